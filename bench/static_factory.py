"""A static model from the default transformer fitted on a corpus: `isotropy distill --corpus`'s defaults beside
tokenlearn 0.2.1 (same teacher, start table and corpus) and potion-base-8M (model2vec's own static model).

    nice -n 5 .venv/bin/python bench/_factory_data.py     # the teacher's vectors of every corpus (cached, slow once)
    nice -n 5 .venv/bin/python bench/static_factory.py    # the static-factory section of docs/RESULTS.md + bench/results/static_factory.json
    .venv/bin/python bench/static_factory.py --render     # rewrite the section from the JSON, running nothing

Rows: ``raw``, the start table (the default model distilled by model2vec, PCA to 256: bench/static.py's
``distilled_folder(256)``); ``distill --corpus``, the library's defaults (``isotropy.distill.run.fit_on_corpus``:
token fit from the full-width 384-d distill, the lines' halves, dropped-word and cut copies as spans, targets scaled
by n^-0.5, the strength chosen by held-out cosine agreement), with the teacher's cached vectors looked up by text, so
a row is what `isotropy distill --corpus` writes, less the teacher's encoding; ``tokenlearn``: tokenlearn 0.2.1's
``train_model`` on the same lines and teacher vectors from the 256-d start, run in turn with our fit (``--repeats``,
medians); ``potion-base-8M`` from ``../shared/models/potion-base-8M``, scored the same way (no corpus).
Corpora (_factory_data.py): ``wiki``, ``cran`` (Cranfield's abstracts as sentences; no query, no qrel),
``wiki+cran``; ``--others``: the ``others`` protocol of RESULTS `sts-static` (per STS task one fit on the six other
tasks' sentences, scored on that task); ``--others-generic STEP``: that protocol alone, spans none, without and with
every STEP-th line of wiki-1m.txt added (two rows added to the saved ones). Scores: Spearman x 100 over all pairs of each STS task pooled, their
average; Cranfield nDCG@10 and recall@100 (exact cosine search, trec_eval). ``--potion``: score potion-base-8M
alone and add it to the JSON (seconds). The rows the earlier rounds added (ladders, criteria, variants) are in git
(commit 440b70e, this file and bench/_factory_round3.py): docs/RESULTS.md quotes them with that commit.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _factory_data as fd  # noqa: E402
import _render  # noqa: E402
from _factory_common import CachedTeacher, encode, evaluate, fit, tokenlearn_fit  # noqa: E402

from _report import DATA, POTION, ROOT, Section, machine, portable  # noqa: E402

OUT = ROOT / "bench" / "results" / "static_factory.json"
SECTION = Section("RESULTS.md", "static-factory", _render.static_factory, OUT)
PRODUCT, TOKENLEARN, RAW, POTION_ROW = _render.FACTORY_ROWS


def _start(dims: int):
    from model2vec import StaticModel
    from static import distilled_folder

    return StaticModel.from_pretrained(str(distilled_folder(dims)))


def _teacher(parts: list[list[str]]) -> CachedTeacher:
    """The cached teacher vectors of the lines and of the library's default spans of each part."""
    from isotropy.distill.corpus_fit import span_texts

    texts, Ys = [], []
    for p in parts:
        texts += p
        Ys.append(fd.teacher(p))
        spans = span_texts(p)
        texts += spans
        Ys.append(fd.teacher(spans))
    return CachedTeacher(texts, np.vstack(Ys))


def _product(start, sents: list[str], teacher, spans: bool = True) -> tuple:
    load0 = os.getloadavg()[0]
    static, info, secs = fit(start, sents, teacher, "tokens", spans=spans, criterion="cosine")
    row = {"sentences": len(sents), "seconds": secs, "load": [load0, os.getloadavg()[0]], "strength": info["tokens"]["lambda"]}
    row["spans"] = int(info["spans"].split()[0]) if spans else 0
    return static, row


def potion_row(tasks, cran_task) -> dict:
    from model2vec import StaticModel

    return {"corpus": "-", "fit": "potion", **evaluate(StaticModel.from_pretrained(str(POTION)), tasks, cran_task)}


def corpus_rows(rows: dict, cname: str, corpora: dict, tasks, cran_task, starts: dict, repeats: int) -> None:
    """The product's fit on one corpus and tokenlearn's training on the same lines, ``repeats`` times in turn."""
    parts = [corpora[p] for p in cname.split("+")]
    sents = [s for p in parts for s in p]
    teacher = _teacher(parts)
    ours, theirs, model = [], [], None
    for i in range(repeats):
        static, row = _product(starts[384], sents, teacher)
        ours.append(row["seconds"])
        if i == 0:
            rows[f"{PRODUCT} / {cname}"] = {"corpus": cname, **row, **evaluate(static, tasks, cran_task)}
        if cname != "wiki":  # tokenlearn on the lines (the spans are ours), the last run's model scored
            model, secs = tokenlearn_fit(starts[256], sents, teacher.encode(sents))
            theirs.append(secs)
    rows[f"{PRODUCT} / {cname}"].update(seconds=float(np.median(ours)), seconds_runs=ours)
    if model is not None:
        rows[f"{TOKENLEARN} / {cname}"] = {"corpus": cname, "sentences": len(sents), "seconds": float(np.median(theirs))}
        rows[f"{TOKENLEARN} / {cname}"].update(seconds_runs=theirs, **evaluate(model, tasks, cran_task))


def others_rows(rows: dict, tasks, starts: dict, limit: int | None, generic: int | None = None) -> None:
    """The others protocol: per task, the product's fit and tokenlearn's on the six other tasks' sentences.
    ``generic``: instead, two rows of the product alone, spans none: those sentences, and those sentences followed
    by every ``generic``-th line of wiki-1m.txt (bench/factory_curve.py's sample, its teacher vectors read from that
    bench's teacher cache; a line the scored task also holds, whitespace and case ignored, is left out)."""
    from static import score

    from isotropy.distill.corpus_fit import span_texts

    corpora = fd.others_corpora(tasks, limit)
    texts, Y = fd.sts_teacher(tasks)
    if generic is None:
        distinct = list(dict.fromkeys(s for c in corpora for s in c))
        sp = span_texts(distinct)  # the spans of every distinct line, their teacher vectors cached apart
        teacher = CachedTeacher(texts + sp, np.vstack([Y, fd.teacher(sp)]))
        variants = {"others": (corpora, True)}
    else:
        lines, Yw = _generic(generic)
        teacher = CachedTeacher(texts + lines, np.vstack([Y, Yw]))
        held = [{_plain(s) for s in t.sentences()} for t in tasks]
        wiki = [[w for w in lines if _plain(w) not in h] for h in held]
        variants = {"others (spans none)": (corpora, False)}
        variants[f"others + wiki/{generic} (spans none)"] = ([c + w for c, w in zip(corpora, wiki)], False)
    for cname, (fitting, spans) in variants.items():
        ours, theirs = {}, {}
        for task, corpus in zip(tasks, fitting):
            static, row = _product(starts[384], corpus, teacher, spans)
            ours[task.name] = {**row, "score": score(task, encode(static, task.sentences()))}
            if generic is None:
                model, secs = tokenlearn_fit(starts[256], corpus, teacher.encode(corpus))
                got = score(task, encode(model, task.sentences()))
                theirs[task.name] = {"sentences": len(corpus), "seconds": secs, "score": got}
            print(f"{cname}, {task.name}: {ours[task.name]['score']:.2f}", file=sys.stderr, flush=True)
        for name, per in ((PRODUCT, ours), (TOKENLEARN, theirs)):
            if per:
                s = [per[t.name]["score"] for t in tasks]
                rows[f"{name} / {cname}"] = {"corpus": cname, "sts": s, "avg": float(np.mean(s)), "cranfield": None}
                rows[f"{name} / {cname}"].update(seconds=sum(p["seconds"] for p in per.values()), per_task=per, limit=limit)


def _plain(s: str) -> str:
    return " ".join(s.lower().split())


def _generic(step: int) -> tuple[list[str], np.ndarray]:
    """bench/factory_curve.py's every-``step``-th-line sample and the teacher's vectors of it, from its cache."""
    import factory_curve as fc

    from isotropy.encoders.cache import default_cache_dir

    root = default_cache_dir() / "factory-curve"
    corpus, _ = fc.sample(step, root / "work")
    return fc.teacher_lines(corpus, root / "teacher")


def run(args) -> dict:
    from isotropy.evaluation import load_tasks
    from isotropy.retrieval.data import load_cranfield

    tasks = load_tasks(DATA / "sts", ["all"])
    cran_task = load_cranfield(DATA / "retrieval" / "cranfield")
    data = json.loads(OUT.read_text(encoding="utf-8")) if args.potion or args.others_generic else {"rows": {}}
    rows = data["rows"]
    if args.others_generic:  # two rows added to the saved ones (others_rows)
        others_rows(rows, tasks, {384: _start(384)}, args.limit, args.others_generic)
        return portable(data)
    rows[POTION_ROW] = potion_row(tasks, cran_task)
    if not args.potion:
        load = [os.getloadavg()]
        starts = {d: _start(d) for d in (256, 384)}
        rows[RAW] = {"corpus": "-", "fit": "raw", **evaluate(starts[256], tasks, cran_task)}
        corpora = fd.corpora()
        for cname in args.corpora:
            corpus_rows(rows, cname, corpora, tasks, cran_task, starts, args.repeats)
        if args.others:
            others_rows(rows, tasks, starts, args.limit)
        teacher = json.loads((ROOT / "bench" / "results" / "static.json").read_text())["teacher"]
        data = {"tasks": [t.name for t in tasks], "rows": rows, "teacher_sts": teacher}
        data["meta"] = {"machine": machine(), "load": [*load, os.getloadavg()]}
    return portable(data)


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--corpora", nargs="+", default=["wiki", "wiki+cran", "cran"])
    ap.add_argument("--repeats", type=int, default=3, help="fits of ours and tokenlearn's, in turn (medians)")
    ap.add_argument("--others", action="store_true", help="also the others protocol (7 fits each; slow)")
    ap.add_argument("--limit", type=int, help="others: the first N sentences of each fitting corpus (a dry run)")
    ap.add_argument("--potion", action="store_true", help="only score potion-base-8M and add it to the JSON")
    ap.add_argument(
        "--others-generic",
        type=int,
        metavar="STEP",
        help="only the others protocol, spans none, without and with every STEP-th wiki-1m line; added to the JSON",
    )
    args = ap.parse_args()
    if not SECTION.rendered(args):
        SECTION.publish(run(args), args)


if __name__ == "__main__":
    main()
