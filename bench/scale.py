"""Scale benchmark: calibrations in front of product quantisation (isotropy.search.pq), at 1M+ vectors.

Vectors: ``bench/_scale_data.py`` (windows of 5-30 words over the wiki and Cranfield text of
../shared/data, encoded with GloVe 6B 50d; 1,000 held-out windows are the queries). For each
calibration in front of PQ -- none, PCA-k (power 0), soft whitening-k (power 0.5), whitening-k
(power 1), each the library's default whitening (Ledoit-Wolf shrinkage) fitted on the first
200,000 vectors; and OPQ (faiss's learnt rotation) on the raw vectors -- at byte budgets 16, 32
and 64, the script builds the library's index (``pq.new_pq_index``: trained on its seeded sample,
``nlist`` 1024 fixed in advance, HNSW coarse quantiser at >= 1M rows) and measures:

* recall@10 against exact search (faiss flat inner product) of the *same* calibrated, normalised
  vectors on the 1,000 queries, at nprobe 32, without and with re-ranking of the top 100 from the
  exact vectors (in RAM here; the library reads them memory-mapped);
* queries per second, batch (1,000 in one call) and single (one call each), one thread and two;
* the index's size (faiss's serialised bytes) and its build time (train + add, one process).

GloVe has 50 dimensions, so the budgets are spent honestly as follows (bytes used in the table):
16 bytes = 16 sub-quantisers of 3 dims on a calibration to k=48 (OPQ16 projects 50 -> 48; the raw
vectors are zero-padded to 64 = 4 dims a sub-quantiser); 32 bytes = 25 sub-quantisers of 2 dims on
all 50 dims (25 bytes: 32 does not divide 50); 64 bytes = 50 sub-quantisers of 1 dim (50 bytes).
Nothing here was tuned on the recall it reports (nlist, nprobe, the rerank depth are fixed above).

    .venv/bin/python bench/scale.py [--rows 1000000] [--dask] [--cranfield]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import DATA, ROOT, portable, update_section  # noqa: E402, I001
from _scale_data import vectors  # noqa: E402
from _scale_render import render  # noqa: E402

# bench/distributed.py would shadow Dask's `distributed` (here and in the workers, which inherit sys.path)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

NLIST, NPROBE, RERANK, K = 1024, 32, 100, 10
FIT_ROWS = 200_000
SINGLE = 300  # queries timed one call each
CALIBS = [("none", None), ("pca", 0.0), ("soft-whitening", 0.5), ("whitening", 1.0), ("raw+opq", None)]
BUDGETS = {16: (48, 16), 32: (50, 25), 64: (50, 50)}  # budget -> (calibrated dims k, sub-quantisers M)
OUT = ROOT / "bench" / "results" / "scale.json"


def load() -> tuple[float, float, float]:
    return os.getloadavg()


def calibrate(X: np.ndarray, Q: np.ndarray, power: float | None, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Calibrated, L2-normalised corpus and queries (what the library's Index stores and searches with)."""
    import faiss

    from isotropy.files.index import default_whitening

    if power is None:
        Xc, Qc = np.array(X, dtype=np.float32), np.array(Q, dtype=np.float32)
    else:
        t = default_whitening(X.shape[1], k, power).fit(np.asarray(X[:FIT_ROWS]))
        Xc = np.concatenate([np.asarray(t.transform(X[a : a + 200_000]), np.float32) for a in range(0, len(X), 200_000)])
        Qc = np.asarray(t.transform(Q), np.float32)
    faiss.normalize_L2(Xc)
    faiss.normalize_L2(Qc)
    return Xc, Qc


def exact_top(Xc: np.ndarray, Qc: np.ndarray) -> np.ndarray:
    import faiss

    flat = faiss.IndexFlatIP(Xc.shape[1])
    flat.add(Xc)
    return flat.search(Qc, K)[1]


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


def one(name: str, kind: str, Xc: np.ndarray, Qc: np.ndarray, truth: np.ndarray, m: int, budget: int) -> dict:
    # long: build, then every measurement of one (calibration, budget) row
    import faiss

    from isotropy.search.pq import new_pq_index, rerank, train_sample

    n = len(Xc)
    params = {"bytes_per_vector": m, "nlist": NLIST, "nprobe": NPROBE}
    faiss.omp_set_num_threads(2)
    before = load()
    t0 = time.perf_counter()
    fidx = new_pq_index(kind, params, Xc[train_sample(n, NLIST)], n)
    t1 = time.perf_counter()
    for a in range(0, n, 100_000):
        fidx.add(Xc[a : a + 100_000])
    t2 = time.perf_counter()
    faiss.omp_set_num_threads(2)
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
        "load_before": before,
    }
    for threads in (1, 2):
        row[f"qps_batch_{threads}t"], row[f"qps_single_{threads}t"] = qps(fidx, Qc, threads)
    faiss.omp_set_num_threads(1)
    t = time.perf_counter()
    for j in range(SINGLE):
        s, i = fidx.search(Qc[j : j + 1], RERANK)
        rerank(Xc, Qc[j : j + 1], s, i, K)
    row["qps_single_rerank_1t"] = SINGLE / (time.perf_counter() - t)
    row["load_after"] = load()
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    return row


def _pad(A: np.ndarray, d: int) -> np.ndarray:
    out = np.zeros((len(A), d), np.float32)
    out[:, : A.shape[1]] = A
    return out


def grid(X: np.ndarray, Q: np.ndarray, budgets: list[int], calibs: list[str]) -> list[dict]:
    rows = []
    for name, power in CALIBS:
        if name not in calibs:
            continue
        dims = [50] if power is None else sorted({BUDGETS[b][0] for b in budgets})
        for k in dims:
            Xc, Qc = calibrate(X, Q, power, k)
            truth = exact_top(Xc, Qc)
            for b in budgets:
                kb, m = BUDGETS[b]
                if power is not None and kb != k:
                    continue
                if name == "raw+opq":
                    rows.append(one(name, "opq", Xc, Qc, truth, m, b))
                elif k % m:  # raw vectors: zero-padded to the next multiple of M (64 for 16 bytes)
                    d = m * -(-k // m)
                    rows.append(one(name, "ivfpq", _pad(Xc, d), _pad(Qc, d), truth, m, b))
                else:
                    rows.append(one(name, "ivfpq", Xc, Qc, truth, m, b))
            del Xc
    return rows


def dask_vs_one(X: np.ndarray, rows: int) -> dict:
    """Build time of the soft whitening-48, 16-byte index: one process (Index.add_encoded) vs
    ``build_index_dask`` on a local cluster of 2 single-threaded workers (10 vector shards)."""
    import shutil

    from isotropy.encoders import Encoder
    from isotropy.files.index import default_whitening
    from isotropy.files.index_scale import build_index_dask
    from isotropy.search import Index

    work = ROOT / ".cache" / "scale" / f"dask-{rows}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "shards").mkdir(parents=True)
    corpus = work / "corpus.txt"
    corpus.write_text("".join(f"window {i}\n" for i in range(rows)), encoding="utf-8")  # ids only: no text is encoded
    for j, part in enumerate(np.array_split(np.arange(rows), 10)):
        np.save(work / "shards" / f"part{j:02d}.npy", np.asarray(X[part[0] : part[-1] + 1], np.float32))
    out: dict = {"rows": rows, "load_before": load()}
    kw = dict(bytes_per_vector=16, nlist=NLIST, nprobe=NPROBE)
    t = time.perf_counter()
    enc = Encoder("glove-6b-50d")
    index = Index(enc, default_whitening(50, 48, 0.5), "ivfpq", **kw)
    index.add_encoded([f"window {i}" for i in range(rows)], np.asarray(X[:rows], np.float32))
    index.save(work / "one", force=True)
    out["one_process_s"] = time.perf_counter() - t
    t = time.perf_counter()
    build_index_dask(corpus, work / "shards", work / "dask", model="glove-6b-50d", whiten=48, power=0.5, n_workers=2, **kw)
    out["dask_2_workers_s"] = time.perf_counter() - t
    out["load_after"] = load()
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out), flush=True)
    return out


def cranfield() -> list[dict]:
    """nDCG@10 on Cranfield (its own 1,400 documents and 225 queries, GloVe) through the compressed index
    (nlist 35 = the library's default for 1,400 rows, nprobe 8) and exactly, per calibration at 16 and 25 bytes."""
    from isotropy.encoders import Encoder
    from isotropy.files.index import default_whitening
    from isotropy.retrieval.data import load_cranfield
    from isotropy.retrieval.index_eval import evaluate_index
    from isotropy.search import Index

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


def _ingest(log: Path, rows: int) -> None:
    """The JSON lines an interrupted run printed (grid rows, the Dask timing, Cranfield rows), into the results file."""
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    res = results.setdefault(str(rows), {"rows": rows, "grid": []})
    cran = []
    for line in log.read_text(encoding="utf-8").splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "budget" in r:
            res["grid"] = [g for g in res["grid"] if (g["calibration"], g["budget"]) != (r["calibration"], r["budget"])] + [r]
        elif "dask_2_workers_s" in r:
            res["dask"] = r
        elif "exact_ndcg@10" in r:
            cran.append(r)
    if cran:
        results["cranfield"] = cran
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(portable(results), indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--budgets", default="16,32,64")
    ap.add_argument("--calibrations", default=",".join(c for c, _ in CALIBS))
    ap.add_argument("--dask", action="store_true", help="also time the Dask build against one process")
    ap.add_argument("--cranfield", action="store_true", help="also score Cranfield nDCG@10 through the index")
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
        new = grid(X, Q, budgets, args.calibrations.split(",")) if budgets else []
        dask = dask_vs_one(X, args.rows) if args.dask else None
        cran = cranfield() if args.cranfield else None
        # read just before writing: runs of other sizes may have written meanwhile
        results = json.loads(OUT.read_text()) if OUT.exists() else {}
        res = results.setdefault(str(args.rows), {"rows": args.rows, "grid": []})
        done = {(r["calibration"], r["budget"]) for r in new}
        res["grid"] = [r for r in res["grid"] if (r["calibration"], r["budget"]) not in done] + new
        if dask is not None:
            res["dask"] = dask
        if cran is not None:
            results["cranfield"] = cran
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(portable(results), indent=2) + "\n")
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    update_section("BENCHMARKS.md", "scale", render(results))


if __name__ == "__main__":
    main()
