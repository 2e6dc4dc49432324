"""Benchmark: streaming whitening fit on 1,000,000 x 768 float32 rows read from .npy shards on disk.

Compares the wall time of ``isotropy.files.fit_file("whitening", ...)`` (float64 statistics, streamed, including the
eigendecomposition) with one in-memory float32 ``X.T @ X`` on the same data, measured in the same run, and reports the
peak extra (Python-heap, tracemalloc) memory of the fit at two row counts. Writes the ``whitening`` section of
docs/BENCHMARKS.md.

    .venv/bin/python bench/whitening.py            # 1,000,000 rows (3 GB of shards, deleted after)
    .venv/bin/python bench/whitening.py --rows 200000 --no-write
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402

from _report import ROOT, Section, machine, median_time  # noqa: E402
from isotropy.files import fit_file  # noqa: E402
from isotropy.transforms.moments import Moments  # noqa: E402


def fit_whitening_file(vectors, show_progress=None):
    return fit_file("whitening", vectors, show_progress=show_progress)


D = 768
SHARDS = 4
SECTION = Section("BENCHMARKS.md", "whitening", _render.whitening, ROOT / "bench" / "results" / "whitening.json")


def workdir(nbytes: int) -> Path:
    """``.cache/`` in the repo when its disk has room (twice the data), else /tmp."""
    for base in (ROOT / ".cache", Path(tempfile.gettempdir())):
        base.mkdir(parents=True, exist_ok=True)
        if shutil.disk_usage(base).free > 2 * nbytes + 2**30:
            return Path(tempfile.mkdtemp(prefix="bench-whitening-", dir=base))
    raise SystemExit(f"no disk with {2 * nbytes / 2**30:.1f} GiB free for the benchmark data")


def generate(folder: Path, rows: int, seed: int = 0) -> list[Path]:
    """Correlated float32 vectors with a decaying spectrum and an offset mean, as shards."""
    rng = np.random.default_rng(seed)
    scale = np.geomspace(3.0, 0.01, D).astype(np.float32)
    low_rank = (rng.standard_normal((16, D)) * 0.5).astype(np.float32)  # shared factors: correlations
    loc = rng.standard_normal(D).astype(np.float32) * 2.0
    files = []
    per = -(-rows // SHARDS)
    for i in range(SHARDS):
        n = min(per, rows - i * per)
        path = folder / f"{i:02d}.npy"
        out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, D))
        for s in range(0, n, 50_000):
            e = min(n, s + 50_000)
            out[s:e] = (
                rng.standard_normal((e - s, D), dtype=np.float32) * scale
                + rng.standard_normal((e - s, 16), dtype=np.float32) @ low_rank
                + loc
            )
        out.flush()
        del out
        files.append(path)
    return files


def peak_traced(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads for the whole run (default: as configured)")
    args = ap.parse_args()
    if SECTION.rendered(args):
        return
    if args.threads:
        import scipy.linalg.blas  # noqa: F401  (load scipy's own OpenBLAS first, so the limit covers it too)
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads, user_api="blas")
    N = args.rows
    nbytes = N * D * 4
    folder = workdir(nbytes)
    print(f"data: {N} x {D} float32 = {nbytes / 2**30:.2f} GiB in {folder}", file=sys.stderr)
    try:
        t0 = time.perf_counter()
        files = generate(folder, N)
        print(f"generated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

        # Peak extra memory of the streamed fit at two N (before anything big is in memory).
        one = folder / "one"
        one.mkdir()
        (one / files[0].name).symlink_to(files[0])
        n_one = np.load(files[0], mmap_mode="r").shape[0]
        fit_whitening_file(one, show_progress=False)  # warm-up: imports and one-time allocations
        mem_small = peak_traced(lambda: fit_whitening_file(one, show_progress=False))
        mem_full = peak_traced(lambda: fit_whitening_file(folder, show_progress=False))
        print(
            f"peak traced memory: {mem_small / 2**20:.1f} MiB at {n_one} rows, {mem_full / 2**20:.1f} MiB at {N}", file=sys.stderr
        )

        # The reference's data: the same rows held in memory as float32.
        X = np.empty((N, D), dtype=np.float32)
        row = 0
        for f in files:
            part = np.load(f, mmap_mode="r")
            X[row : row + len(part)] = part
            row += len(part)

        # Interleaved repeats (reference, streamed fit, in-memory statistics), so that the
        # other jobs on this shared machine load all three alike; medians are reported.
        times: dict[str, list[float]] = {"ref": [], "fit": [], "mem": []}
        runs = {
            "ref": lambda: X.T @ X,  # numpy dispatches X.T @ X to syrk
            "fit": lambda: fit_whitening_file(folder, show_progress=False),  # streamed, page-cached shards, eigh included
            "mem": lambda: Moments().update(X),
        }
        for _ in range(args.repeats):
            for key, fn in runs.items():
                times[key].append(median_time(fn, 1)[0])
                print(f"{key} {times[key][-1]:.2f} s", file=sys.stderr)
        t_ref, t_fit, t_mem = (statistics.median(times[k]) for k in ("ref", "fit", "mem"))
        w = fit_whitening_file(folder, show_progress=False)
        t0 = time.perf_counter()
        w._solve(w.moments_)
        t_eigh = time.perf_counter() - t0

        # Our float64 streamed result against a float64 one-shot numpy.cov of a 100,000-row slice
        # (the full one-shot float64 reference would need 6 GB more).
        sl = X[:100_000]
        len_sl = len(sl)
        err_ours = float(
            np.abs(Moments().update(sl).covariance() - np.cov(sl.T.astype(np.float64))).max()
            / np.abs(np.cov(sl.T.astype(np.float64))).max()
        )
        # Intrinsic float64 / float32 BLAS speed on this machine: the same syrk on a slice.
        sl64 = sl.astype(np.float64)
        t32, _ = median_time(lambda: sl.T @ sl, args.repeats)
        t64, _ = median_time(lambda: sl64.T @ sl64, args.repeats)
        X = sl = sl64 = None  # free the 3 GB before the report

        ratio = t_fit / t_ref
        from threadpoolctl import threadpool_info

        blas = ", ".join(
            sorted({f"{i['internal_api']} {i.get('version')} ({i['num_threads']} threads)" for i in threadpool_info()})
        )
        r = {"rows": N, "d": D, "shards": SHARDS, "repeats": args.repeats, "threads": args.threads}
        r.update(load=os.getloadavg()[0], machine=machine(), blas=blas)
        r.update(ref_s=t_ref, fit_s=t_fit, eigh_s=t_eigh, mem_s=t_mem, slice_rows=len_sl, t64=t64, t32=t32)
        r.update(ratio=ratio, eigh_ratio=t_eigh / t_ref, mem_ratio=t_mem / t_ref, t64_ratio=t64 / t32)
        r.update(err_ours=err_ours, mem_small_mib=mem_small / 2**20, mem_full_mib=mem_full / 2**20)
        r["rows_small"] = n_one
        SECTION.publish(r, args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
