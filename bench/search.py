"""Retrieval benchmark: does whitening to k dimensions keep recall while shrinking and speeding up search?

A task nobody has to label, from the STS data in ../shared/data (override with ISOTROPY_DATA): the corpus is every
unique sentence of the seven tasks; the queries are sentence1 of every pair with gold >= 4.0 (identical pairs and
repeated pairs dropped), the relevant document its sentence2; each query is searched with k + 1 and its own id dropped
(docs/BENCHMARKS.md, 'Search', says how the table is read). Vectors: the default model, last-avg, max_length 64,
encoded once (``encode_cached``); each transform fitted on the corpus as ``isotropy index build`` does. Timings are
search only (``Index.search_vectors``), in interleaved sweeps, as ratios to raw-384 flat of the same sweep.

    .venv/bin/python bench/search.py [--single 500] [--kinds flat,hnsw]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402

from _report import DATA, ROOT, Section, machine, median_time  # noqa: E402

MAX_LENGTH = 64
THRESHOLD = 4.0
SECTION = Section(
    "BENCHMARKS.md",
    "search",
    lambda data: _render.search(data, THRESHOLD, MAX_LENGTH),
    ROOT / "bench" / "results" / "search.json",
)
K = 10
# (name, n_components, power): None = raw vectors
SETTINGS = [("raw-384", None, None)] + [  # (name, dims, whitening power)
    (f"{name}-{k}", k, power) for name, power, ks in (("whitened", 1.0, (384, 256, 128, 64)), ("soft0.5", 0.5, (384, 256, 128, 64)), ("pca", 0.0, (128, 64))) for k in ks
]  # fmt: skip


def build_task(data: Path):
    from isotropy.evaluation import load_tasks

    tasks = load_tasks(data)
    corpus = list(dict.fromkeys(s for t in tasks for p in t.pairs() for s in (p.s1, p.s2)))
    row = {s: i for i, s in enumerate(corpus)}
    pairs = list(dict.fromkeys((row[p.s1], row[p.s2]) for t in tasks for p in t.pairs() if p.score >= THRESHOLD and p.s1 != p.s2))
    per_task = {t.name: sum(1 for p in t.pairs() if p.score >= THRESHOLD and p.s1 != p.s2) for t in tasks}
    queries = list(dict.fromkeys(q for q, _ in pairs))
    return [t.name for t in tasks], corpus, queries, np.array(pairs, dtype=np.int64), per_task


def drop_self(ids: np.ndarray, query_ids: np.ndarray, k: int) -> np.ndarray:
    """From k + 1 hits per query, drop the query's own id (else the last hit): k hits each."""
    out = np.empty((ids.shape[0], k), dtype=np.int64)
    for i, (row, q) in enumerate(zip(ids, query_ids)):
        keep = row[row != q]
        out[i] = keep[:k] if len(keep) >= k else np.pad(keep, (0, k - len(keep)), constant_values=-1)
    return out


def metrics(hits: np.ndarray, queries: list[int], pairs: np.ndarray) -> dict[str, float]:
    pos = {q: i for i, q in enumerate(queries)}
    ranks = []
    for q, rel in pairs:
        found = np.flatnonzero(hits[pos[int(q)]] == rel)
        ranks.append(int(found[0]) + 1 if len(found) else 0)
    r = np.array(ranks)
    return {
        "recall@1": float(np.mean(r == 1)) * 100,
        "recall@10": float(np.mean((r >= 1) & (r <= 10))) * 100,
        "mrr@10": float(np.mean(np.where(r >= 1, 1.0 / np.maximum(r, 1), 0.0))) * 100,
    }


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--single", type=int, default=500, help="queries timed one call at a time (a fixed sample)")
    ap.add_argument("--kinds", default="flat,hnsw", help="index kinds, comma-separated (flat, hnsw, ivf)")
    ap.add_argument("--settings", default=None, help="only these settings (comma-separated names)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if SECTION.rendered(args):
        return

    import faiss

    from isotropy.encoders import Encoder
    from isotropy.encoders.cache import VectorCache, encode_cached
    from isotropy.search import Index
    from isotropy.transforms.whitening import Whitening

    data = DATA / "sts"
    if not data.is_dir():
        sys.exit(f"real data not found at {data} (set ISOTROPY_DATA)")
    task_names, corpus, queries, pairs, per_task = build_task(data)
    print(f"corpus {len(corpus)} sentences, {len(queries)} queries, {len(pairs)} relevant pairs", file=sys.stderr)

    enc = Encoder(max_length=MAX_LENGTH)
    cache = VectorCache()
    t0 = time.perf_counter()
    raw = encode_cached(enc, corpus, [enc.pooling], cache=cache)[enc.pooling]
    encode_s = time.perf_counter() - t0
    cached = cache.hits > 0
    # encoding speed, measured afresh on a fixed sample even when the corpus came from the cache
    sample = [corpus[i] for i in np.random.default_rng(1).choice(len(corpus), 512, replace=False)]
    enc_s, _ = median_time(lambda: enc.encode(sample, show_progress=False), repeats=1)

    qids = np.array(queries, dtype=np.int64)
    rng = np.random.default_rng(0)
    single = np.sort(rng.choice(len(qids), min(args.single, len(qids)), replace=False))
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    settings = [s for s in SETTINGS if args.settings is None or s[0] in args.settings.split(",")]

    # 1. build every index and score it (recall needs no timing)
    rows, built = [], []
    for name, k_comp, power in settings:
        transform = None
        fit_s = 0.0
        if k_comp is not None:
            transform = Whitening(n_components=k_comp, power=power, shrinkage="auto")
            t0 = time.perf_counter()
            transform.fit(raw)
            fit_s = time.perf_counter() - t0
        for kind in kinds:
            index = Index(enc, transform, kind)
            t0 = time.perf_counter()
            index.add_encoded(corpus, raw, show_progress=False)
            build_s = time.perf_counter() - t0
            Q = index._apply(raw[qids])  # the same transform + normalisation as `embed`
            res = index.search_vectors(Q, K + 1)
            m = metrics(drop_self(res.ids, qids, K), queries, pairs)
            size = int(faiss.serialize_index(index._index).nbytes)
            rows.append({"setting": name, "kind": kind, "dims": index.dim, **m, "bytes": size, "build_s": build_s + fit_s})
            built.append((index, Q, [Q[i : i + 1] for i in single]))
            print(json.dumps(rows[-1]), file=sys.stderr)

    # 2. time them in interleaved sweeps: each sweep times every index once (batch, then one query
    # at a time), so a change in the machine's load hits all settings alike; per setting, the
    # median over sweeps of the time and of the ratio to raw-384 flat in the same sweep.
    times = [{"batch": [], "single": []} for _ in rows]
    threads = faiss.omp_get_max_threads()
    for sweep in range(args.repeats):
        for t, (index, Q, Qs) in zip(times, built):
            t["batch"].append(median_time(lambda index=index, Q=Q: index.search_vectors(Q, K + 1), repeats=1)[0])

            def one_by_one(index=index, Qs=Qs) -> None:
                for q in Qs:
                    index.search_vectors(q, K + 1)

            # One OpenMP thread for single queries: with faiss's default threads, a lone query on this
            # shared 2-core machine spent most of its time waiting on thread synchronisation (and a
            # server answering one query at a time would run one query per thread anyway).
            faiss.omp_set_num_threads(1)
            try:
                t["single"].append(median_time(one_by_one, repeats=1)[0])
            finally:
                faiss.omp_set_num_threads(threads)
        print(f"timing sweep {sweep + 1}/{args.repeats} done", file=sys.stderr)
    ref_i = next((i for i, r in enumerate(rows) if r["setting"] == "raw-384" and r["kind"] == "flat"), None)
    for r, t in zip(rows, times):
        for mode, n in (("batch", len(qids)), ("single", len(single))):
            r[f"qps_{mode}"] = n / statistics.median(t[mode])
            r[f"speedup_{mode}"] = (
                None if ref_i is None else statistics.median(a / b for a, b in zip(times[ref_i][mode], t[mode]))
            )
        r["times"] = t

    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "faiss_threads": __import__("faiss").omp_get_max_threads(),
        "task_names": task_names,
        "per_task": per_task,
        "n_corpus": len(corpus),
        "n_queries": len(queries),
        "n_pairs": len(pairs),
        "n_single": len(single),
        "encode_s": encode_s,
        "cached": cached,
        "enc_rate": len(sample) / enc_s,
        "repeats": args.repeats,
    }
    SECTION.publish({"rows": rows, "meta": meta}, args)


if __name__ == "__main__":
    main()
