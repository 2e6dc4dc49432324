"""Scale benchmark: calibrations in front of product quantisation (isotropy.search.pq), at 1M+ vectors.

Vectors: ``bench/_scale_data.py`` (windows of 5-30 words over the wiki and Cranfield text of ../shared/data, encoded
with GloVe 6B 50d; 1,000 held-out windows are the queries). For each calibration in front of PQ -- none, PCA-k (power
0), soft whitening-k (power 0.5), whitening-k (power 1), each the library's default whitening (Ledoit-Wolf shrinkage)
fitted on the first 200,000 vectors; and OPQ (faiss's learnt rotation) on the raw vectors -- at byte budgets 16, 32
and 64, the script builds the library's index (``pq.new_pq_index``: trained on its seeded sample, HNSW coarse
quantiser at >= 1M rows) with ``nlist`` by a rule fixed in advance (sqrt(n) rounded to a power of two: 1,024 at 1M,
4,096 at 10M) and measures:

* recall@10 against exact search (faiss brute force, inner product) of the *same* calibrated, normalised vectors on
  the 1,000 queries, without and with re-ranking of the top 100 from the exact vectors (in RAM here; the library reads
  them memory-mapped), at nprobe 32, or with ``--tune`` (the 10M runs) at the nprobe chosen on 1,000 *tuning* queries
  drawn with another seed (never the reported ones): the smallest of 8..128 whose re-ranked recall@10 there reaches
  0.95;
* queries per second, batch (1,000 in one call) and single (one call each), one thread and two;
* the index's size (faiss's serialised bytes), the process's peak memory and its build time (train + add, one
  process); with ``--dask``, the build of the library's soft whitening-48 16-byte index in one process (streamed over
  the memory-mapped vectors) against ``build_index_dask`` on 2 local workers, and whether both hold the same codes.

GloVe has 50 dimensions, so the budgets are spent honestly as follows (bytes used in the table): 16 bytes = 16
sub-quantisers of 3 dims on a calibration to k=48 (OPQ16 projects 50 -> 48; the raw vectors are zero-padded to 64 = 4
dims a sub-quantiser); 32 bytes = 25 sub-quantisers of 2 dims on all 50 dims (25 bytes: 32 does not divide 50); 64
bytes = 50 sub-quantisers of 1 dim (50 bytes). Nothing here was tuned on the recall it reports (nlist and the rerank
depth are fixed above, nprobe fixed or chosen on the tuning queries).

    .venv/bin/python bench/scale.py [--rows 1000000] [--budgets 16,32,64] [--calibrations ...] [--tune] [--dask] [--cranfield]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import DATA, ROOT, load_json, portable, update_section, write_json  # noqa: E402, I001
from _scale_data import tuning_queries, vectors  # noqa: E402
from _render import scale as render  # noqa: E402


NPROBE, RERANK, K = 32, 100, 10
NPROBES = (8, 16, 32, 64, 128)  # swept on the tuning queries with --tune
TUNE_RECALL = 0.95  # the re-ranked recall@10 --tune asks of the tuning queries (the 10M target, 0.90, plus a margin)
FIT_ROWS = 200_000
SINGLE = 300  # queries timed one call each
CALIBS = [("none", None), ("pca", 0.0), ("soft-whitening", 0.5), ("whitening", 1.0), ("raw+opq", None)]
BUDGETS = {16: (48, 16), 32: (50, 25), 64: (50, 50)}  # budget -> (calibrated dims k, sub-quantisers M)
OUT = ROOT / "bench" / "results" / "scale.json"


def load() -> tuple[float, float, float]:
    return os.getloadavg()


def nlist_for(n: int) -> int:
    """The rule for the number of lists: sqrt(n) rounded to the nearest power of two (1,024 at 1M, 4,096 at
    10M); fixed before any recall was seen."""
    return 2 ** round(math.log2(math.sqrt(n)))


def peak_rss_gb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def calibrate(X: np.ndarray, Q: np.ndarray, power: float | None, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Calibrated, L2-normalised corpus and queries (what the library's Index stores and searches with)."""
    import faiss

    from isotropy.search.build import default_whitening

    if power is None:
        Xc, Qc = np.array(X, dtype=np.float32), [np.array(q, dtype=np.float32) for q in Q]
    else:
        t = default_whitening(X.shape[1], k, power).fit(np.asarray(X[:FIT_ROWS]))
        Xc = np.empty((len(X), k), np.float32)  # filled chunk by chunk: one copy of the corpus in memory
        for a in range(0, len(X), 200_000):
            Xc[a : a + 200_000] = t.transform(np.asarray(X[a : a + 200_000]))
        Qc = [np.asarray(t.transform(q), np.float32) for q in Q]
    for a in range(0, len(Xc), 1_000_000):
        faiss.normalize_L2(Xc[a : a + 1_000_000])
    for q in Qc:
        faiss.normalize_L2(q)
    return Xc, Qc


def exact_top(Xc: np.ndarray, Qc: np.ndarray) -> np.ndarray:
    """Exact top K by inner product (faiss's brute force over the array itself: no copy into an index)."""
    import faiss

    faiss.omp_set_num_threads(2)
    return faiss.knn(Qc, Xc, K, metric=faiss.METRIC_INNER_PRODUCT)[1]


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a[:K]) & set(b)) / K for a, b in zip(found, truth)]))


def qps(fidx, Qc: np.ndarray, threads: int, depth: int = K) -> tuple[float, float]:
    import faiss

    faiss.omp_set_num_threads(threads)
    t = time.perf_counter()
    fidx.search(Qc, depth)
    batch = len(Qc) / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(SINGLE):
        fidx.search(Qc[i : i + 1], depth)
    single = SINGLE / (time.perf_counter() - t)
    return batch, single


def tune(fidx, Xc: np.ndarray, Tc: np.ndarray, ttruth: np.ndarray) -> tuple[int, list[dict]]:
    """``nprobe`` chosen on the tuning queries (never the reported ones): the smallest of NPROBES whose
    re-ranked recall@10 reaches TUNE_RECALL there (the largest when none does), as autofaiss picks its
    search parameters for a recall goal."""
    from isotropy.search.pq import rerank, set_nprobe

    sweep = []
    for nprobe in NPROBES:
        set_nprobe(fidx, nprobe)
        s, i = fidx.search(Tc, RERANK)
        sweep.append(
            {"nprobe": nprobe, "recall@10": recall(i, ttruth), "recall@10_rerank": recall(rerank(Xc, Tc, s, i, K)[1], ttruth)}
        )
    chosen = next((r["nprobe"] for r in sweep if r["recall@10_rerank"] >= TUNE_RECALL), NPROBES[-1])
    set_nprobe(fidx, chosen)
    return chosen, sweep


def one(name: str, kind: str, Xc: np.ndarray, Qs: list, truths: list, m: int, budget: int, tuned: bool) -> dict:
    # long: build, then every measurement of one (calibration, budget) row
    import faiss

    from isotropy.search.pq import new_pq_index, rerank, train_sample

    n, Qc, truth = len(Xc), Qs[0], truths[0]
    nlist = nlist_for(n)
    params = {"bytes_per_vector": m, "nlist": nlist, "nprobe": NPROBE}
    faiss.omp_set_num_threads(2)
    before = load()
    t0 = time.perf_counter()
    fidx = new_pq_index(kind, params, Xc[train_sample(n, nlist)], n)
    t1 = time.perf_counter()
    for a in range(0, n, 100_000):
        fidx.add(Xc[a : a + 100_000])
    t2 = time.perf_counter()
    faiss.omp_set_num_threads(2)
    nprobe, sweep = tune(fidx, Xc, Qs[1], truths[1]) if tuned else (NPROBE, None)
    found = fidx.search(Qc, K)[1]
    s, i = fidx.search(Qc, RERANK)
    reranked = rerank(Xc, Qc, s, i, K)[1]
    row = {
        "calibration": name,
        "budget": budget,
        "bytes": m,
        "dims": int(Xc.shape[1]),
        "factory": faiss.extract_index_ivf(fidx).__class__.__name__,
        "recall@10": recall(found, truth),
        "recall@10_rerank": recall(reranked, truth),
        "train_s": t1 - t0,
        "add_s": t2 - t1,
        "size_mb": len(faiss.serialize_index(fidx)) / 1e6,
        "nlist": nlist,
        "nprobe": nprobe,
        "load_before": before,
    }
    if sweep is not None:
        row["tuning"] = sweep
    for threads in (1, 2):
        row[f"qps_batch_{threads}t"], row[f"qps_single_{threads}t"] = qps(fidx, Qc, threads)
    faiss.omp_set_num_threads(1)
    t = time.perf_counter()
    for j in range(SINGLE):
        s, i = fidx.search(Qc[j : j + 1], RERANK)
        rerank(Xc, Qc[j : j + 1], s, i, K)
    row["qps_single_rerank_1t"] = SINGLE / (time.perf_counter() - t)
    row["load_after"] = load()
    row["peak_rss_gb"] = peak_rss_gb()
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    return row


def _pad(A: np.ndarray, d: int) -> np.ndarray:
    out = np.zeros((len(A), d), np.float32)
    out[:, : A.shape[1]] = A
    return out


def grid(X: np.ndarray, Q: list, budgets: list[int], calibs: list[str], tuned: bool) -> list[dict]:
    rows = []
    for name, power in CALIBS:
        if name not in calibs:
            continue
        dims = [50] if power is None else sorted({BUDGETS[b][0] for b in budgets})
        for k in dims:
            Xc, Qc = calibrate(X, Q, power, k)
            truth = [exact_top(Xc, q) for q in Qc]
            for b in budgets:
                kb, m = BUDGETS[b]
                if power is not None and kb != k:
                    continue
                if name == "raw+opq":
                    rows.append(one(name, "opq", Xc, Qc, truth, m, b, tuned))
                elif k % m:  # raw vectors: zero-padded to the next multiple of M (64 for 16 bytes)
                    d = m * -(-k // m)
                    rows.append(one(name, "ivfpq", _pad(Xc, d), [_pad(q, d) for q in Qc], truth, m, b, tuned))
                else:
                    rows.append(one(name, "ivfpq", Xc, Qc, truth, m, b, tuned))
            del Xc
    return rows


def _codes(fidx) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each inverted list's ids and codes, sorted by id (the order within a list depends on the add order)."""
    import faiss

    ivf = faiss.extract_index_ivf(fidx)
    inv, cs, out = ivf.invlists, ivf.code_size, []
    for li in range(ivf.nlist):
        n = inv.list_size(li)
        ids = faiss.rev_swig_ptr(inv.get_ids(li), n).copy() if n else np.zeros(0, np.int64)
        codes = faiss.rev_swig_ptr(inv.get_codes(li), n * cs).copy().reshape(n, cs) if n else np.zeros((0, cs), np.uint8)
        order = np.argsort(ids)
        out.append((ids[order], codes[order]))
    return out


def dask_vs_one(X: np.ndarray, rows: int) -> dict:
    """Build time of the soft whitening-48, 16-byte index: one process against ``build_index_dask`` on a local
    cluster of 2 single-threaded workers (10 vector shards), and whether both hold the same codes.

    One process runs the steps of ``Index.add_encoded`` (the whitening fitted on every row, the index trained on
    the seeded sample, every row added) streamed over the memory-mapped vectors, as ``add_encoded`` would need the
    whole corpus in memory at once; neither side encodes (the shards are the cached vectors)."""
    # long: both builds, timed, and the comparison of their codes
    import shutil

    import faiss

    from isotropy.encoders import Encoder
    from isotropy.search import Index
    from isotropy.search.build import default_whitening
    from isotropy.search.build_dask import build_index_dask
    from isotropy.search.pq import new_pq_index, train_sample

    work = ROOT / ".cache" / "scale" / f"dask-{rows}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "shards").mkdir(parents=True)
    corpus = work / "corpus.txt"
    with open(corpus, "w", encoding="utf-8") as fh:  # ids only: no text is encoded
        for a in range(0, rows, 1_000_000):
            fh.write("".join(f"window {i}\n" for i in range(a, min(rows, a + 1_000_000))))
    for j, part in enumerate(np.array_split(np.arange(rows), 10)):
        np.save(work / "shards" / f"part{j:02d}.npy", np.asarray(X[part[0] : part[-1] + 1], np.float32))
    nlist = nlist_for(rows)
    kw = dict(bytes_per_vector=16, nlist=nlist, nprobe=NPROBE)
    out: dict = {"rows": rows, "nlist": nlist, "load_before": load()}
    faiss.omp_set_num_threads(2)
    t = time.perf_counter()
    index = Index(Encoder("glove-6b-50d"), default_whitening(50, 48, 0.5), "ivfpq", **kw)
    w = index.transform
    for a in range(0, rows, 1_000_000):
        w.partial_fit(np.asarray(X[a : a + 1_000_000]))
    fidx = new_pq_index("ivfpq", dict(kw), index._apply(np.asarray(X[train_sample(rows, nlist)]), w), rows)
    for a in range(0, rows, 1_000_000):
        fidx.add(index._apply(np.asarray(X[a : a + 1_000_000]), w))
    out["one_process_s"] = time.perf_counter() - t
    out["load_mid"] = load()
    t = time.perf_counter()
    built, _ = build_index_dask(
        corpus, work / "shards", work / "dask", model="glove-6b-50d", whiten=48, power=0.5, n_workers=2, **kw
    )
    out["dask_2_workers_s"] = time.perf_counter() - t
    out["load_after"] = load()
    mine, theirs = _codes(fidx), _codes(built._index)
    out["same_codes"] = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(mine, theirs))
    out["peak_rss_gb"] = peak_rss_gb()
    del built, fidx, mine, theirs
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out), flush=True)
    return out


def cranfield() -> list[dict]:
    """nDCG@10 on Cranfield (its own 1,400 documents and 225 queries, GloVe) through the compressed index
    (nlist 35 = the library's default for 1,400 rows, nprobe 8) and exactly, per calibration at 16 and 25 bytes."""
    from isotropy.encoders import Encoder
    from isotropy.retrieval.data import load_cranfield
    from isotropy.retrieval.index_eval import evaluate_index
    from isotropy.search import Index
    from isotropy.search.build import default_whitening

    task = load_cranfield(DATA / "retrieval" / "cranfield")
    enc = Encoder("glove-6b-50d")
    raw = np.asarray(enc.encode(task.docs, show_progress=False), np.float32)
    out = []
    for name, power in CALIBS:
        for m, k in ((16, 48), (25, 50)):
            if name == "none" and m == 16:
                continue  # 50 dims are not divisible by 16 (the grid pads; the library refuses)
            t = None if power is None else default_whitening(50, k, power)
            kind = "opq" if name == "raw+opq" else "ivfpq"
            index = Index(enc, t, kind, bytes_per_vector=m, nprobe=8).add_encoded(task.docs, raw)
            r = evaluate_index(index, task)
            row = {"calibration": name, "bytes": m, "ndcg@10": r["index"]["ndcg@10"], "exact_ndcg@10": r["exact"]["ndcg@10"]}
            row["recall@10_vs_exact"] = r["recall@10_vs_exact"]
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def save(rows: int, grid: list[dict] | None = None, dask=None, cran=None) -> None:
    """Merge new figures into the results file, read just before writing (runs of other sizes may have written
    meanwhile): grid rows replace those of the same calibration and budget."""
    results = load_json(OUT) if OUT.exists() else {}
    if grid is not None:
        res = results.setdefault(str(rows), {"rows": rows, "grid": []})
        done = {(r["calibration"], r["budget"]) for r in grid}
        res["grid"] = [r for r in res["grid"] if (r["calibration"], r["budget"]) not in done] + grid
        if dask is not None:
            res["dask"] = dask
    if cran:
        results["cranfield"] = cran
    write_json(OUT, portable(results), indent=2)


def _ingest(log: Path, rows: int) -> None:
    """The JSON lines an interrupted run printed (grid rows, the Dask timing, Cranfield rows), into the results file."""
    grid, found = {}, {"dask": None, "cran": []}
    for line in log.read_text(encoding="utf-8").splitlines():
        r = json.loads(line) if line.startswith("{") else {}
        if "budget" in r:
            grid[(r["calibration"], r["budget"])] = r
        elif "dask_2_workers_s" in r:
            found["dask"] = r
        elif "exact_ndcg@10" in r:
            found["cran"].append(r)
    save(rows, list(grid.values()), **found)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--budgets", default="16,32,64")
    ap.add_argument("--calibrations", default=",".join(c for c, _ in CALIBS))
    ap.add_argument("--dask", action="store_true", help="also time the Dask build against one process")
    ap.add_argument("--cranfield", action="store_true", help="also score Cranfield nDCG@10 through the index")
    ap.add_argument("--tune", action="store_true", help="choose nprobe per row on the tuning queries (else 32)")
    ap.add_argument("--render", action="store_true", help="only rewrite the BENCHMARKS section from the results file")
    ap.add_argument(
        "--from-log", type=Path, help="take the rows this script printed in an interrupted run (its stdout) into the results"
    )
    args = ap.parse_args()
    if args.from_log:
        _ingest(args.from_log, args.rows)
    elif not args.render:
        X, Q, info = vectors(args.rows)
        budgets = [int(b) for b in args.budgets.split(",") if b]
        queries = [Q, tuning_queries()] if args.tune else [Q]
        new = grid(X, queries, budgets, args.calibrations.split(","), args.tune) if budgets else []
        dask = dask_vs_one(X, args.rows) if args.dask else None
        save(args.rows, new, dask, cranfield() if args.cranfield else None)
    update_section("BENCHMARKS.md", "scale", render(load_json(OUT) if OUT.exists() else {}))


if __name__ == "__main__":
    main()
