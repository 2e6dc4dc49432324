"""The static factory's curve with the real teacher (issue #43): what more generic text buys.

    nice -n 5 .venv/bin/python bench/factory_curve.py                        # 12k, 50k, 100k lines; then --render
    nice -n 5 .venv/bin/python bench/factory_curve.py --steps 80 --no-score    # distill only; --score later
    .venv/bin/python bench/factory_curve.py --render                        # docs/RESULTS.md's section again

For each step S (80, 40, 20, 10 by default: about 12.5k, 25k, 50k and 100k lines; 5, 3, 2 and 1 give 200k, 333k,
500k and 1M lines): every S-th line of
``../shared/data/corpus/wiki-1m.txt`` (``awk 'NR % S == 0'``, as its README says: the articles are roughly
alphabetical, so never the first N lines). The samples are nested (every 80th line is a 40th, a 20th and a 10th;
3 alone is not), so each is
written as a prefix of one ordering (the 80th lines, then the other 40th, 20th and 10th, each in corpus order):
the larger runs then find the smaller runs' chunks in the teacher cache and encode only the new lines (the sums do
not depend on the order of the lines, only the held-out tenth does, by position). Then
``isotropy distill --corpus SAMPLE`` with today's defaults (the default model, all-MiniLM-L6-v2, embedded, as the
teacher; 256 d) in a fresh process, timed end to end, ``--spans none`` by default (``--spans default`` for today's
default spans, which make the teacher read ~3.5x the text: this shared 2-core machine cannot afford them at 50k lines
and more in one session); the row says which. Every run shares one teacher cache (``--teacher-cache``, default
``$ISOTROPY_CACHE/factory-curve``), so nothing is encoded twice; each run records its own teacher seconds and how
many chunks it read from the cache, and the table adds the teacher seconds of the earlier runs that encoded its
prefix (the teacher pass of all its lines, as one uncached run would have spent it, boundary chunks aside).

``--peer`` trains tokenlearn 0.2.1 instead (``train_model`` from model2vec's 256-d distill, as
bench/static_factory.py does) on the same sample's lines and the teacher's vectors of them, read from the teacher
cache where the distill row of that sample left them; its time is the training alone. ``--peer distill`` starts
that training from the distill row's fitted table (spans none, 256 d) instead of model2vec's.

``--extra cran`` adds Cranfield's sentences (its 1,400 titles and abstracts, split as bench/static_factory.py's
``wiki+cran`` corpus does) after the sample: the issue's Cranfield target fits on its abstracts plus generic lines.
The row is a variant, named ``every-STEP-...-cran``; the sample's chunks are read from the teacher cache.

A run on another machine (one with a GPU for the teacher, say) passes ``--label NAME`` (in the row's name and its
teacher), ``--results FILE`` (a results file of its own), ``--model DIR`` where the default model's package is not
installed and ``--no-score``; its folders are then copied into this machine's ``--work`` and its rows scored here,
beside potion-base-8M, with ``--score --merge FILE``.

Each model is scored with the bench's own evaluation (``_factory_common.evaluate``, the same as
bench/static_factory.py): the 7 STS tasks of ``../shared/data/sts`` (all evaluation pairs of a task pooled, Spearman
x 100 of the cosine of model2vec's plain-mean vectors) and Cranfield nDCG@10 (exact cosine search). potion-base-8M
(``../shared/models``) is scored in the same run. No setting is read off a test label: the distill chooses its
strength on held-out corpus lines, as it does for a user.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _render  # noqa: E402

from _report import DATA, POTION, ROOT, load_json, machine, portable, update_section, write_json  # noqa: E402

OUT = ROOT / "bench" / "results" / "factory_curve.json"
CORPUS = DATA / "corpus" / "wiki-1m.txt"
COMMAND = "nice -n 5 .venv/bin/python bench/factory_curve.py"
TOKENLEARN = "tokenlearn 0.2.1"


STEPS = (80, 40, 20, 10, 5, 3, 2, 1)  # every level a sample can be drawn at (3: about 333k lines)
DEFAULT_STEPS = (80, 40, 20, 10)  # what a 2-core machine affords in a session; 5 ran here too (RESULTS)


def sample(step: int, work: Path, extra: str | None = None) -> tuple[Path, int]:
    """Every ``step``-th line of wiki-1m.txt as a prefix of the nested ordering (module docs), in ``work``; ``extra``
    ``cran``: Cranfield's sentences (``_factory_data.cran``) after them (the sample's chunks stay the cached ones)."""
    if extra == "cran":
        from _factory_data import cran

        base, _ = sample(step, work)
        path = work / f"wiki-1m.every-{step}+cran.txt"
        if not path.exists():
            tmp = path.with_suffix(".part")
            tmp.write_text(base.read_text(encoding="utf-8") + "\n".join(cran()) + "\n", encoding="utf-8")
            tmp.replace(path)
        with path.open(encoding="utf-8") as fh:
            return path, sum(1 for _ in fh)
    path = work / f"wiki-1m.every-{step}.txt"
    if not path.exists():
        levels: dict[int, list[str]] = {s: [] for s in STEPS}
        with CORPUS.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh, 1):
                if i % step == 0:
                    levels[next(s for s in STEPS if i % s == 0)].append(line)  # the coarsest level holding it
        tmp = path.with_suffix(".part")
        with tmp.open("w", encoding="utf-8") as out:
            for s in STEPS:
                out.writelines(levels[s])
        tmp.replace(path)
    with path.open(encoding="utf-8") as fh:
        return path, sum(1 for _ in fh)


def teacher_kind(onnx: str) -> str:
    """``onnx-int8`` or ``onnx-fp32``: what the export folder's record says it is."""
    return "onnx-" + (json.loads((Path(onnx) / "isotropy_onnx.json").read_text()).get("quantize") or "fp32")


def variant(
    spans: str, onnx: str | None, dims: int, label=None, words: int = 0, extra=None, engine=None, lam=None, tw=None
) -> str:
    """The row's name after ``every-STEP-``: spans, then the teacher, width, a given strength, a target whitening,
    whole-word rows, the text added, the engine and machine where not the defaults."""
    name = spans + ("" if onnx is None else f"-{teacher_kind(onnx)}") + ("" if dims == 256 else f"-{dims}d")
    name += ("" if lam is None else f"-lam{lam:g}") + ("" if tw is None else f"-tw{tw:g}")
    name += (f"-words{words}" if words else "") + (f"-{extra}" if extra else "") + (f"-{engine}" if engine else "")
    return name + ("" if label is None else f"-{label}")


def distill(
    step: int,
    work: Path,
    cache: Path,
    spans: str,
    onnx: str | None = None,
    dims: int = 256,
    label: str | None = None,
    words: int = 0,
    extra: str | None = None,
    engine: str | None = None,
    lam: float | None = None,
    tw: float | None = None,
    *,
    model: str | None = None,
) -> dict:
    """One ``isotropy distill --corpus`` run of the every-``step``-th-line sample in a fresh process, timed (wall and
    the child's CPU seconds, which load does not inflate); ``onnx``: an ``isotropy export onnx`` folder of the default
    model that encodes the corpus (``--teacher-onnx``); ``dims``: ``--dims``; ``model``: a folder of the default
    model's weights (``--model``, where its package is not installed); ``label``: the machine, in the row's name;
    ``words``: ``--words`` (whole-word rows); ``extra``: text added to the sample (:func:`sample`); ``engine``:
    ``--engine`` (``dask``: a local cluster, one single-threaded worker per core; the same sums, so the same row);
    ``lam``: ``--lam`` (the strength given, no grid); ``tw``: ``--target-whitening`` (None: the default)."""
    name = f"{step}-{variant(spans, onnx, dims, label, words, extra, engine, lam, tw)}"
    (corpus, n), folder = sample(step, work, extra), work / f"distilled-{name}"
    cmd = [sys.executable, "-m", "isotropy.cli", "distill", "--corpus", str(corpus), "-o", str(folder)]
    cmd += [] if model is None else ["--model", model]
    cmd += ["--words", str(words)] if words else []
    cmd += ["--teacher-cache", str(cache), "--force", "--dims", str(dims)] + ([] if onnx is None else ["--teacher-onnx", onnx])
    if spans == "none":
        cmd += ["--spans", "none"]
    cmd += [] if engine is None else ["--engine", engine]
    cmd += [] if lam is None else ["--lam", f"{lam:g}"]
    cmd += [] if tw is None else ["--target-whitening", f"{tw:g}"]
    path = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)  # src first
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    load, t0 = os.getloadavg()[0], time.perf_counter()
    with (work / f"distill-{name}.log").open("a", encoding="utf-8") as log:
        child = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
        _, status, use = os.wait4(child.pid, 0)  # this child's own rusage: its CPU seconds and peak resident set
    if os.waitstatus_to_exitcode(status):
        raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), cmd)
    wall, cpu = time.perf_counter() - t0, use.ru_utime + use.ru_stime
    record = json.loads((folder / "isotropy.json").read_text())["distill"]
    fit = record["corpus_fit"]
    return {
        "sentences": n,
        "folder": str(folder),
        "marker": _marker(folder),  # which run wrote the folder (score_rows: another row's run may write it later)
        "table_cache": record.get("table_cache"),
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_mb": use.ru_maxrss / 1024,  # Linux: KB; with --engine dask, the largest of the client and its workers
        "dims": dims,
        "words": record.get("words_added", 0),
        "teacher_s": fit["seconds"].get("teacher"),
        "statistics_s": fit["seconds"].get("statistics"),
        "solve_s": fit["tokens"]["seconds"],
        "lambda": fit["tokens"]["lambda"],
        "spans": fit.get("spans", "none"),
        "teacher_cache": fit["teacher_cache"],
        "teacher": ("torch fp32" if onnx is None else teacher_kind(onnx).replace("-", " "))
        + ("" if label is None else f" ({label})"),
        "engine": engine or "one process",
        "load": [load, os.getloadavg()[0]],
        "machine": machine(),
    }


def teacher_lines(corpus: Path, cache: Path):
    """The lines of ``corpus`` and the teacher's vectors of them, read from the teacher cache chunk by chunk as the
    distill of the same sample stored them (its ``CHUNK``-line chunks; one not there is encoded now, and said)."""
    import numpy as np

    from isotropy.distill.corpus_fit import CHUNK
    from isotropy.distill.teacher_vectors import TeacherVectors, teacher_cache
    from isotropy.encoders import Encoder
    from isotropy.storage.text import read_sentences

    lines = read_sentences(corpus)
    vectors = TeacherVectors(Encoder(), teacher_cache(cache), str(corpus))
    parts, encoded = [], 0
    for i in range(0, len(lines), CHUNK):
        got, how = vectors(lines[i : i + CHUNK], [], i)
        parts.append(np.asarray(got, dtype=np.float32))
        encoded += how != "cached"
    if encoded:
        print(f"{corpus}: {encoded} chunk(s) were not in the teacher cache and were encoded", file=sys.stderr)
    return lines, np.vstack(parts)


def peer(step: int, work: Path, cache: Path, start_from: str = "model2vec") -> dict:
    """tokenlearn 0.2.1 (the peer a user would pick, as bench/static_factory.py runs it: ``train_model`` from
    model2vec's distill of the default model at 256 d) trained on the every-``step``-th-line sample and the cached
    teacher vectors of those lines (the teacher pass is the distill row's; this row times the training alone), its
    model saved where the rows' folders are, then scored like them. ``start_from="distill"``: tokenlearn's training
    started from the distill row's fitted table of the same sample (spans none, 256 d) instead: the fit as the
    starting point of gradient training (tokenlearn learns its own output layer, so the spaces need not agree)."""
    from _factory_common import tokenlearn_fit

    from isotropy.distill.run import distill_static

    corpus, n = sample(step, work)
    folder = work / (f"tokenlearn-{step}" + ("" if start_from == "model2vec" else "-from-distill"))
    if start_from == "model2vec":
        start = distill_static(None, 256, show_progress=False)
    else:
        from model2vec import StaticModel

        fitted = work / f"distilled-{step}-{variant('none', None, 256)}"
        if not (fitted / "isotropy.json").is_file():
            raise SystemExit(f"--peer distill: {fitted} is not there; distill that sample first (--steps {step})")
        start = StaticModel.from_pretrained(str(fitted))
    lines, Y = teacher_lines(corpus, cache)
    load, cpu0 = os.getloadavg()[0], time.process_time()
    model, wall = tokenlearn_fit(start, lines, Y)
    model.save_pretrained(str(folder))
    return {
        "sentences": n,
        "folder": str(folder),
        "table_cache": "distilled" if start_from == "model2vec" else "the distill row's",
        "wall_s": wall,
        "cpu_s": time.process_time() - cpu0,
        "dims": 256,
        "teacher_s": None,
        "spans": "none",
        "teacher_cache": "cached chunks used: the distill row's",
        "teacher": "torch fp32",
        "load": [load, os.getloadavg()[0]],
        "machine": machine(),
    }


def stsb(folder: Path | str, tasks) -> float:
    from _factory_common import stsb_train
    from model2vec import StaticModel

    return stsb_train(StaticModel.from_pretrained(str(folder)), tasks)


def score(folder: Path | str, tasks, cran) -> dict:
    from _factory_common import evaluate
    from model2vec import StaticModel

    return evaluate(StaticModel.from_pretrained(str(folder)), tasks, cran)


def _scorer():
    from isotropy.evaluation import load_tasks
    from isotropy.retrieval.data import load_cranfield

    return load_tasks(DATA / "sts", ["all"]), load_cranfield(DATA / "retrieval" / "cranfield")


def _marker(folder: Path) -> str | None:
    """A digest of the folder's ``isotropy.json`` (what its distill recorded, timings included): tells the run that
    wrote the folder from a later one that wrote the same folder (None: not an isotropy folder)."""
    marker = Path(folder) / "isotropy.json"
    return hashlib.sha256(marker.read_bytes()).hexdigest()[:16] if marker.is_file() else None


def score_rows(data: dict) -> None:
    """Score every recorded run's latest folder that is still there (and potion-base-8M) in this process."""
    tasks, cran = _scorer()
    data["tasks"] = [t.name for t in tasks]
    if POTION.exists():  # absent on a machine that only distils (--label): scored where the rows are merged
        data["potion-base-8M"] = {**score(POTION, tasks, cran), "stsb_train": stsb(POTION, tasks)}
        print(f"potion-base-8M: {data['potion-base-8M']['avg']:.2f}", file=sys.stderr, flush=True)
    for name, row in data["rows"].items():
        folder = os.path.expanduser(row["runs"][-1]["folder"])  # portable() wrote the home as ~
        if not Path(folder).is_dir():  # a folder since removed (another machine, a cleared cache): its scores stay
            print(f"{name}: {folder} is gone, its recorded scores kept", file=sys.stderr, flush=True)
            continue
        marker = row["runs"][-1].get("marker")
        if marker is not None and _marker(Path(folder)) != marker:  # rewritten by another row's run since
            print(f"{name}: {folder} was written by another run since, its recorded scores kept", file=sys.stderr, flush=True)
            continue
        row.update({**score(folder, tasks, cran), "stsb_train": stsb(folder, tasks)})
        print(f"{name}: {row['avg']:.2f} (STS-B train {row['stsb_train']:.2f})", file=sys.stderr, flush=True)


def merge(data: dict, paths: list[str], work: Path) -> None:
    """Add the rows of other runs' results files (``--results`` of a run on another machine or beside this file,
    ``--no-score``): each run's folder is read from ``work`` under its own name (copied there first), then scored here
    with the rest. A row already here keeps its runs (the table shows the first) and gets the other file's after them."""
    for path in paths:
        for name, row in json.loads(Path(path).read_text())["rows"].items():
            for got in row["runs"]:
                got["folder"] = str(work / Path(got["folder"]).name)
                if not any(Path(got["folder"], f).exists() for f in ("isotropy.json", "config.json")):  # ours, tokenlearn's
                    raise SystemExit(f"{path}: row {name}: copy its folder to {got['folder']} first")
            mine = data["rows"].setdefault(name, row)
            if mine is not row:
                mine["runs"] += [got for got in row["runs"] if got not in mine["runs"]]


def row_model(args) -> str:
    """The model column of a row that is not a plain point of the curve: what its command added."""
    if args.peer:
        return TOKENLEARN + ("" if args.peer == "model2vec" else ", from the distill's table")
    name = "isotropy distill"
    name += "" if args.engine is None else f" --engine {args.engine}"  # the same sums as one process, on a cluster
    name += "" if args.lam is None else f" --lam {args.lam:g}"  # a rerun's setting: the strength given, not chosen
    name += "" if args.target_whitening is None else f" --target-whitening {args.target_whitening:g}"
    return name + (", the sample + Cranfield's sentences" if args.extra == "cran" else "")  # a variant of the text


def run(args) -> dict:
    results = Path(args.results)
    data = json.loads(results.read_text()) if results.exists() else {"rows": {}}
    data["meta"] = {"machine": machine(), "command": COMMAND}
    work = Path(args.work).absolute()
    if args.merge:
        merge(data, args.merge, work)
    if args.score:
        score_rows(data)
        write_json(results, portable(data))
        return data
    work.mkdir(parents=True, exist_ok=True)
    cache = Path(args.teacher_cache).absolute()
    for step in args.steps:
        if args.peer:
            got = peer(step, work, cache, args.peer)
            name = f"every-{step}-tokenlearn" + ("" if args.peer == "model2vec" else "-from-distill")
        else:
            setting = (args.spans, args.teacher_onnx, args.dims, args.label, args.words, args.extra, args.engine)
            setting += (args.lam, args.target_whitening)  # in variant()'s order, which distill() shares
            got = distill(step, work, cache, *setting, model=args.model)
            name = f"every-{step}-" + variant(*setting)
        row = data["rows"].get(name, {})
        row.setdefault("runs", []).append(got)
        row.update(
            {"step": step, "sentences": got["sentences"], "spans": got["spans"], "teacher": got["teacher"], "dims": got["dims"]}
        )
        if args.peer or args.extra or args.engine or args.lam is not None or args.target_whitening is not None:
            row["model"] = row_model(args)
        data["rows"][name] = row
        write_json(results, portable(data))
        print(f"{name}: {got}", file=sys.stderr, flush=True)
    if not args.no_score:
        score_rows(data)
        write_json(results, portable(data))
    return data


def main() -> None:
    from isotropy.encoders.cache import default_cache_dir

    default_root = default_cache_dir()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, nargs="+", default=list(DEFAULT_STEPS), choices=STEPS, help="every S-th line")
    p.add_argument("--spans", choices=("none", "default"), default="none")
    p.add_argument("--work", default=str(default_root / "factory-curve" / "work"), help="samples and distilled folders")
    p.add_argument("--teacher-cache", default=str(default_root / "factory-curve" / "teacher"))
    p.add_argument("--teacher-onnx", help="an `isotropy export onnx` folder of the default model as the corpus's teacher")
    p.add_argument("--dims", type=int, default=256, help="the width distilled (a capacity variant when not 256)")
    p.add_argument("--words", type=int, default=0, help="whole-word rows (distill --words; a capacity variant)")
    p.add_argument("--lam", type=float, help="the token fit's strength given (distill --lam: no grid; a rerun's setting)")
    p.add_argument("--target-whitening", type=float, help="distill --target-whitening (a variant of the targets)")
    p.add_argument("--extra", choices=("cran",), help="text added after the sample: Cranfield's sentences (its target)")
    p.add_argument("--engine", choices=("dask",), help="distill --engine: the pass on a local Dask cluster (same sums)")
    p.add_argument("--model", help="a folder of the default model's weights, where its package is not installed")
    p.add_argument("--label", help="the machine, when not this one: added to the row's name and teacher")
    p.add_argument(
        "--results", default=str(OUT), help="the results file read and written (another one: RESULTS.md is left alone)"
    )
    p.add_argument("--merge", nargs="+", help="with --score: add the rows of these results files (module docs)")
    p.add_argument(
        "--peer",
        nargs="?",
        const="model2vec",
        choices=("model2vec", "distill"),
        help="tokenlearn's training on each sample's lines instead, from model2vec's distill or the distill row's table",
    )
    p.add_argument("--no-score", action="store_true", help="distill only (the teacher pass, cached); score later")
    p.add_argument("--score", action="store_true", help="score the recorded runs' folders and potion-base-8M only")
    p.add_argument("--render", action="store_true", help="write docs/RESULTS.md's section from the saved results")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args()
    given = (args.spans, args.dims, args.words, args.extra, args.teacher_onnx, args.engine, args.target_whitening)
    if args.peer and given != ("none", 256, 0, None, None, None, None):
        p.error(
            "--peer trains tokenlearn on the sample's lines at 256 d from the fp32 teacher's cached vectors: it takes "
            "none of --spans, --dims, --words, --extra, --teacher-onnx, --engine, --target-whitening"
        )
    data = load_json(args.results) if args.render else run(args)
    if not args.no_write and Path(args.results).absolute() == OUT:  # another machine's results file: not the docs'
        print(update_section("RESULTS.md", "factory-curve", _render.factory_curve(data)), file=sys.stderr)


if __name__ == "__main__":
    main()
