"""Retrieval benchmark: where does calibration help search? Cranfield 1400 (../shared/data/retrieval/cranfield,
ISOTROPY_DATA overrides the data root): 1400 abstracts, 225 queries, graded qrels (code c -> gain 5 - c).

Models (``--model``, repeatable; default: all four): ``default`` (all-MiniLM-L6-v2, last-avg and cls),
``glove-6b-50d`` (mean and SIF), ``distilled-384`` and ``distilled-256`` (bench/static.py's ``distilled_folder``); any
other value is a model id or folder with its own pooling.

1. Fixed calibrations, each fitted on the documents (``fit_on="target"``, no label): every fixed method of the STS
   harness and whitening-K / pca-K for K in KS, searched exactly and with sq8 / binary codes; raw, whitening-128 and
   pca-128 also with the index kinds of ``isotropy index build``. Metrics from trec_eval.
2. Few-label auto (``--dev-queries 50``, ``--draws 5``): seeded draws of dev queries from the held-out half of the
   queries (``signals.search_split``); ``Selector.few_label`` (``calibrate --method auto --dev FOLDER --for search``)
   chooses, scored on the other held-out queries (docs/RESULTS.md says how the table is read). ``--dev-only`` reruns
   this part alone and keeps the stored tables.

    .venv/bin/python bench/retrieval.py [--model KEY_OR_MODEL ...] [--pooling P ...] [--dev-queries 50] [--draws 5]
                                        [--dev-only]

Raw numbers go to bench/results/retrieval.json, the tables to docs/RESULTS.md (section ``retrieval``); a run for some
models replaces their entries and keeps the others.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402

from _report import DATA, ROOT, Section, load_json, machine  # noqa: E402

KS = [12, 48, 96, 128, 192, 256]
INDEX_METHODS = ["raw", "whitening-128", "pca-128"]
MODELS = {  # key -> (what Encoder loads; "distilled:D" = bench/static.py's distilled folder, poolings, name)
    "default": (None, ["last-avg", "cls"], "all-MiniLM-L6-v2 (the default model)"),
    "glove-6b-50d": ("glove-6b-50d", ["last-avg", "sif"], "GloVe 6B 50d (static)"),
    "distilled-384": ("distilled:384", ["last-avg"], "the default model distilled (model2vec, static), 384 d"),
    "distilled-256": ("distilled:256", ["last-avg"], "the default model distilled (model2vec + PCA, static), 256 d"),
}
SEED = 2026  # the draws of dev queries
OUT = ROOT / "bench" / "results" / "retrieval.json"
SECTION = Section("RESULTS.md", "retrieval", _render.retrieval, OUT)


# ------------------------------------------------------------------ running


def _encoder(key: str, poolings: list[str] | None):
    from isotropy import Encoder

    model, pools, name = MODELS.get(key, (key, None, key))
    if isinstance(model, str) and model.startswith("distilled:"):
        from static import distilled_folder  # bench/static.py: the one place the distilled folders are made

        model = str(distilled_folder(int(model.split(":")[1])))
    encoder = Encoder(model)
    return encoder, poolings or pools or [encoder.pooling], name


def _per_query_ndcg(t, Q: np.ndarray, D: np.ndarray, task) -> np.ndarray:
    """nDCG@10 of every query (row order of ``task.query_ids``) for calibration ``t`` (None: raw), exact search."""
    from isotropy.retrieval.metrics import rank_rows, run_from_ids, score_run

    q, d = (X if t is None else t.transform(X) for X in (Q, D))
    q, d = (X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12) for X in (q, d))
    per = score_run(task.qrels, run_from_ids(task.query_ids, task.doc_ids, rank_rows(q @ d.T, 100)))
    return np.array([per[i]["ndcg@10"] for i in task.query_ids])


def dev_draws(encoder, pooling: str, task, n_dev: int, draws: int) -> list[dict]:
    """Few-label auto on ``draws`` seeded draws of ``n_dev`` dev queries, scored on the other queries."""
    from isotropy.encoders.cache import VectorCache, encode_cached
    from isotropy.selection import Selector, check_dev_qrels
    from isotropy.selection.signals import incumbent_of, search_split

    cache = VectorCache()  # the vectors evaluate_retrieval encoded: read back, not encoded again
    D = np.asarray(encode_cached(encoder, task.docs, [pooling], cache, False)[pooling], dtype=np.float64)
    Q = np.asarray(encode_cached(encoder, task.queries, [pooling], cache, False)[pooling], dtype=np.float64)
    selector = Selector(D, seed=0, source=f"the {len(D)} documents")
    label_free, why = incumbent_of(encoder, task="search")  # label-free auto's choice: the few-label incumbent
    _, held = search_split(len(task.query_ids))  # the tuning half of the queries is never scored here
    per_query = {name: _per_query_ndcg(t, Q, D, task) for name, t in selector.transforms.items()}
    rows = []
    for draw in range(draws):
        perm = held[np.random.default_rng([SEED, draw]).permutation(len(held))]
        dev_rows, test_rows = np.sort(perm[:n_dev]), np.sort(perm[n_dev:])
        ids = [task.query_ids[i] for i in dev_rows]
        dev = check_dev_qrels(
            Q[dev_rows], D, {i: task.qrels[i] for i in ids}, query_ids=ids, doc_ids=task.doc_ids, source=f"draw {draw}"
        )
        sel = selector.few_label(dev, incumbent=label_free, why=why)
        test = {name: float(v[test_rows].mean()) for name, v in per_query.items()}
        best = max(test, key=test.get)
        rows.append(
            {
                "pooling": pooling,
                "draw": draw,
                "dev_queries": n_dev,
                "test_queries": len(test_rows),
                "choice": sel.choice,
                "incumbent": label_free,
                "p_beats_incumbent": sel.p_beats_raw,
                "test_label_free": test[label_free],
                "dev_raw": sel.candidate("raw").score / 100,
                "dev_choice": sel.candidate(sel.choice).score / 100,
                "test_raw": test["raw"],
                "test_auto": test[sel.choice],
                "test_whitening": test.get("whitening"),
                "best_in_hindsight": best,
                "test_best": test[best],
            }
        )
    return rows


def run_model(key: str, poolings: list[str] | None, task, n_dev: int, draws: int) -> dict:
    from isotropy.retrieval import evaluate_retrieval

    t0 = time.perf_counter()
    encoder, pools, name = _encoder(key, poolings)
    dim = int(encoder.dim)
    ks = [k for k in KS if k < dim]
    methods = _render.FIXED + [f"{m}-{k}" for k in ks for m in ("whitening", "pca")]
    common = dict(encoder=encoder, poolings=pools, show_progress=True)
    main = evaluate_retrieval(task, methods=methods, kinds=["exact", "sq8", "binary"], **common)
    idx = evaluate_retrieval(task, methods=[m for m in INDEX_METHODS if m == "raw" or int(m.split("-")[1]) < dim], kinds=["flat", "hnsw", "ivf"], **common)  # fmt: skip
    dev = [r for p in pools for r in dev_draws(encoder, p, task, n_dev, draws)] if n_dev else []
    settings = {**main.settings, "total_s": time.perf_counter() - t0}
    return {"key": key, "name": name, "model": main.settings["model"], "dim": dim, "settings": settings,
            "rows": main.rows + idx.rows, "dev": dev}  # fmt: skip


def rerun_dev(stored: dict, task, n_dev: int, draws: int) -> dict:
    """``stored`` (a model's entry of the JSON) with its few-label draws run again; the tables are kept."""
    t0 = time.perf_counter()
    encoder, _, _ = _encoder(stored["key"], None)
    dev = [r for p in stored["settings"]["poolings"] for r in dev_draws(encoder, p, task, n_dev, draws)]
    settings = {**stored["settings"], "dev_s": time.perf_counter() - t0}
    return {**stored, "dev": dev, "settings": settings}


# ------------------------------------------------------------------ rendering


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument(
        "--model", action="append", help=f"{', '.join(MODELS)}, or a model id or folder; repeatable (default: all four)"
    )
    ap.add_argument("--pooling", action="append", help="pooling, repeatable (default: each model's own, above)")
    ap.add_argument("--dev-queries", type=int, default=50, help="few-label auto: dev queries per draw (0: skip that part)")
    ap.add_argument("--draws", type=int, default=5, help="few-label auto: seeded draws of dev queries")
    ap.add_argument("--dev-only", action="store_true", help="rerun only the few-label part; keep the stored tables")
    args = ap.parse_args()
    if SECTION.rendered(args):
        return
    from isotropy.retrieval import load_retrieval

    task = load_retrieval(DATA / "retrieval" / "cranfield")
    old = load_json(OUT)["results"] if OUT.is_file() else []
    if args.dev_only:
        new = [rerun_dev(r, task, args.dev_queries, args.draws) for r in old if r["key"] in (args.model or list(MODELS))]
    else:
        new = [run_model(m, args.pooling, task, args.dev_queries, args.draws) for m in (args.model or list(MODELS))]
    keys = {n["key"] for n in new}
    results = [r for r in old if r.get("key") in MODELS and r["key"] not in keys] + new  # keep the others' entries
    results.sort(key=lambda r: list(MODELS).index(r["key"]) if r["key"] in MODELS else len(MODELS))
    SECTION.publish({"results": results, "machine": machine()}, args, indent=1, default=float)


if __name__ == "__main__":
    main()
