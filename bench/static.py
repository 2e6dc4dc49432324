"""Static models on the seven STS tasks (issue #23): sentence- and token-level calibrations, and the teacher map.

    .venv/bin/python bench/static.py              # everything: the sts-static section of docs/RESULTS.md + bench/results/static.json
    .venv/bin/python bench/static.py --glove-only --no-write   # the GloVe models only (no transformer), a smoke run

Spearman x 100 of cosine over all evaluation pairs of a task pooled, and the 7-task average. Models, all through
``isotropy.Encoder``: GloVe 6B 50d mean and SIF (a = 1e-3, p from Zipf's law over the frequency rank), and the default
model distilled by ``isotropy distill`` at 384 and 256 dimensions (kept under ``$ISOTROPY_CACHE/bench-distill``).
Calibrations (docs/RESULTS.md says which and how the table is read): the fixed sentence-level methods of
bench/results.py but the flow, fitted on ``others`` and ``target``; the token-level ones of ``isotropy calibrate``
(:mod:`isotropy.calibration.token_fit`), applied to the pooled vectors, which is what the folded table computes
(tests/test_static_tokencal_cli.py checks it); and the corpus-fitted ``TeacherMap``. No label is read to fit or choose
anything; every setting was fixed before the run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _render  # noqa: E402
from results import METHODS  # noqa: E402

from _report import DATA, ROOT, Section, machine, pair_spearman, portable  # noqa: E402

SECTION = Section("RESULTS.md", "sts-static", _render.sts_static, ROOT / "bench" / "results" / "static.json")
SENTENCE_METHODS = [m for m in METHODS if m != "flow"]


def distilled_folder(dims: int) -> Path:
    """The default model distilled at ``dims`` (384: no PCA), from the bench's cache folder or made now."""
    from isotropy.distill.run import distill
    from isotropy.encoders.cache import default_cache_dir

    folder = Path(default_cache_dir()) / "bench-distill" / f"all-MiniLM-L6-v2-{dims}"
    if not (folder / "isotropy.json").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        distill(folder, None, dims=0 if dims == 384 else dims, show_progress=True)
    return folder


def models(glove_only: bool) -> dict[str, tuple[str, str]]:
    """name -> (what ``Encoder`` loads, pooling)."""
    out = {"GloVe 6B 50d, mean": ("glove-6b-50d", "last-avg"), "GloVe 6B 50d, SIF": ("glove-6b-50d", "sif")}
    if not glove_only:
        for dims in (384, 256):
            out[f"default model distilled, {dims} d"] = (str(distilled_folder(dims)), "last-avg")
    return out


def score(task, vecs: np.ndarray) -> float:
    """Spearman x 100 over the task's evaluation pairs pooled (``vecs``: rows of ``task.sentences()``)."""
    row = {s: i for i, s in enumerate(task.sentences())}
    a, b = (vecs[[row[getattr(p, side)] for p in task.eval_pairs]] for side in ("s1", "s2"))
    return pair_spearman(a, b, [p.score for p in task.eval_pairs])


def others_sentences(plan, tasks) -> list[str]:
    out = []
    for j, rows in plan.parts:
        sents = tasks[j].sentences()
        out += [sents[r] for r in rows]
    return out


def others_rows(plan, per_task: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([per_task[j][rows] for j, rows in plan.parts])


def methods_for(dim: int) -> list[str]:
    """The sentence-level methods, less ``whitening-K`` with K >= dim (the same as ``whitening``, or impossible)."""
    return [m for m in SENTENCE_METHODS if not (m.startswith("whitening-") and int(m.rsplit("-", 1)[1]) >= dim)]


def sentence_rows(enc, tasks) -> dict[str, dict[str, list[float]]]:
    """setting -> method -> per-task scores, through the evaluation harness."""
    from isotropy.evaluation import evaluate

    methods = methods_for(int(enc.dim))
    out = {}
    for setting in ("others", "target"):
        res = evaluate(
            tasks, encoder=enc, poolings=[enc.pooling], methods=methods, fit_on=setting, errors="record", show_progress=False
        )
        out[setting] = {m: [res.score(enc.pooling, m, t.name) for t in tasks] for m in methods}
    return out


def token_rows(enc, tasks, plans, X: list[np.ndarray]) -> dict[str, dict[str, list[float]]]:
    """setting -> token-level method -> per-task scores (a table-only fit is the same in both settings)."""
    from isotropy.calibration.token_fit import TOKEN_METHODS, fit_table_whitening, token_counts
    from isotropy.transforms.methods import parse_method

    out: dict[str, dict[str, list[float]]] = {"others": {}, "target": {}}
    for name, (method, needs_corpus) in _render.TOKEN_ROWS.items():
        source = TOKEN_METHODS[method][1]
        if not needs_corpus:
            t, _ = fit_table_whitening(enc, parse_method(method).build(), source)
            scores = [score(task, t.transform(x)) for task, x in zip(tasks, X)]
            out["others"][name] = out["target"][name] = scores
            continue
        for setting in ("others", "target"):
            scores = []
            for task, plan, x in zip(tasks, plans, X):
                corpus = others_sentences(plan, tasks) if setting == "others" else task.sentences()
                t, _ = fit_table_whitening(enc, parse_method(method).build(), source, token_counts(enc, corpus), setting)
                scores.append(score(task, t.transform(x)))
            out[setting][name] = scores
    return out


def teacher_vectors(tasks) -> list[np.ndarray]:
    """The default transformer's mean-pooled vectors of every task's sentences, L2-normalised (cached)."""
    from isotropy.encoders import Encoder
    from isotropy.evaluation import VectorCache, encode_cached

    enc = Encoder()
    out = []
    for t in tasks:
        Y = encode_cached(enc, t.sentences(), [enc.pooling], VectorCache(), show_progress=True)[enc.pooling]
        out.append(Y / np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12))
    return out


def run_model(name: str, spec: tuple[str, str], tasks, plans, teacher) -> dict:
    from isotropy.encoders import Encoder
    from isotropy.transforms.teacher_map import TeacherMap

    t0 = time.perf_counter()
    enc = Encoder(spec[0], pooling=spec[1])
    X = [np.asarray(enc.encode(t.sentences()), dtype=np.float64) for t in tasks]
    coverage = enc.coverage_total.to_dict()
    rows = sentence_rows(enc, tasks)
    raw_check = [score(t, x) for t, x in zip(tasks, X)]
    for setting, by in token_rows(enc, tasks, plans, X).items():
        rows[setting].update(by)
    if teacher is not None:
        rows["others"]["teacher map"] = [
            score(t, TeacherMap().fit(others_rows(p, X), others_rows(p, teacher)).transform(x))
            for t, p, x in zip(tasks, plans, X)
        ]
    print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return {
        "model": spec[0],
        "pooling": spec[1],
        "dim": int(enc.dim),
        "coverage": coverage,
        "raw_direct": raw_check,
        "rows": rows,
    }


def run(args) -> dict:
    from isotropy.evaluation import load_tasks
    from isotropy.evaluation.fitting import plan_others

    tasks = load_tasks(DATA / "sts", ["all"])
    plans = plan_others(tasks)
    teacher = None if args.glove_only else teacher_vectors(tasks)
    t0 = time.perf_counter()
    out = {name: run_model(name, spec, tasks, plans, teacher) for name, spec in models(args.glove_only).items()}
    data = {
        "tasks": [t.name for t in tasks],
        "models": out,
        "teacher": None if teacher is None else [score(t, y) for t, y in zip(tasks, teacher)],
        "settings": {
            "aggregate": "all pairs of a task pooled",
            "sentence_methods": SENTENCE_METHODS,
            "token_methods": list(_render.TOKEN_ROWS),
            "zipf_offset": 2.7,
            "sif_a": 1e-3,
            "others_removed": {t.name: p.removed for t, p in zip(tasks, plans)},
            "data": str(DATA / "sts"),
        },
        "meta": {"wall_s": time.perf_counter() - t0, "machine": machine()},
    }
    return portable(data)


# --------------------------------------------------------------------------- the section


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--glove-only", action="store_true", help="only the GloVe models (no transformer)")
    args = ap.parse_args()
    if not SECTION.rendered(args):
        SECTION.publish(run(args), args)


if __name__ == "__main__":
    main()
