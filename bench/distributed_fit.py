"""Benchmark: whitening fit on sentence shards, local Dask cluster vs one process.

The unique sentences of STS-B (``--tasks all``: of the 7 STS tasks) are split into 8 shards. The same fit (embedded
all-MiniLM-L6-v2, its mean pooling, max_length 64) runs three ways, measured in the same run:

* one process: ``Encoder.encode`` of every sentence + ``Whitening.fit`` (torch on all cores);
* ``isotropy.distributed.fit_whitening`` without an address, as the CLI runs it: a local cluster (one single-threaded
  worker process per core) is started, every worker loads the model, the shards are encoded and merged, the cluster
  stops;
* the same call on a cluster that is already up with the model loaded (the steady state of a long job: what per-core
  throughput means).

It reports the wall-time ratios, how far the statistics are from the one-process ones, the per-core throughput, and a
paper estimate for 1 billion sentences. Writes the ``distributed`` section of docs/BENCHMARKS.md.

    .venv/bin/python bench/distributed_fit.py                   # first 2,400 STS-B sentences
    .venv/bin/python bench/distributed_fit.py --sentences 0     # all of STS-B's unique sentences
    .venv/bin/python bench/distributed_fit.py --tasks all --sentences 0 --no-write
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402

from _report import DATA, ROOT, Section, machine  # noqa: E402

SHARDS = 8
SECTION = Section("BENCHMARKS.md", "distributed", _render.distributed, ROOT / "bench" / "results" / "distributed.json")
MAX_LENGTH = 64

# Paper-estimate assumptions (stated in the report; change them here).
PRICE_CORE_HOUR = 0.04  # USD per vCPU-hour, on-demand general-purpose cloud VMs (assumption)
PRICE_GPU_HOUR = 0.50  # USD per hour of a T4/L4-class GPU with its share of host (assumption)
GPU_SENTENCES_PER_S = 5000.0  # MiniLM-L6, max_length 64, fp16, one T4/L4-class GPU (ASSUMPTION, not measured here)


def sentences(tasks: list[str], limit: int) -> list[str]:
    from isotropy.evaluation import load_tasks

    out: dict[str, None] = {}
    for task in load_tasks(DATA / "sts", tasks):
        for s in task.sentences():
            out.setdefault(s.replace("\n", " ").replace("\r", " "), None)
    sents = list(out)
    return sents[:limit] if limit else sents


def write_shards(folder: Path, sents: list[str]) -> list[Path]:
    per = -(-len(sents) // SHARDS)
    files = []
    for i in range(SHARDS):
        part = sents[i * per : (i + 1) * per]
        path = folder / f"shard-{i}.txt"
        path.write_text("".join(s + "\n" for s in part), encoding="utf-8")
        files.append(path)
    return files


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--tasks", nargs="+", default=["STS-B"], help="STS tasks whose unique sentences are used ('all': the 7)")
    ap.add_argument("--sentences", type=int, default=2400, help="use the first N unique sentences (0: all)")
    ap.add_argument("--workers", type=int, default=os.cpu_count(), help="local cluster workers (default: one per core)")
    args = ap.parse_args()
    if SECTION.rendered(args):
        return

    import warnings

    import distributed
    import torch

    from isotropy.errors import RankDeficientWarning

    # MiniLM's mean-pooled vectors span 381 of 384 directions; the warning about the 3 dropped ones is
    # the same in every run and says nothing about timing or the merge.
    warnings.simplefilter("ignore", RankDeficientWarning)

    from isotropy.distributed import EncoderSpec, fit_whitening
    from isotropy.encoders import Encoder
    from isotropy.transforms.whitening import Whitening

    sents = sentences(args.tasks, 0)
    n_all = len(sents)
    sents = sents[: args.sentences] if args.sentences else sents
    n = len(sents)
    load_before = os.getloadavg()
    print(f"{n} sentences in {SHARDS} shards, {args.workers} workers; load average {load_before[0]:.1f}", flush=True)

    with tempfile.TemporaryDirectory(prefix="bench-distributed-") as tmp:
        write_shards(Path(tmp), sents)
        pattern = str(Path(tmp) / "shard-*.txt")
        spec = EncoderSpec(max_length=MAX_LENGTH)

        # ---- one process (the model load is timed apart: the cluster runs pay it too, in the workers)
        t0 = time.perf_counter()
        enc = Encoder(max_length=MAX_LENGTH)
        enc.encode(sents[:SHARDS], show_progress=False)  # warm-up, as the warm cluster run has had
        t_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        single = Whitening().fit(enc.encode(sents, show_progress=False))
        t_single = time.perf_counter() - t0
        print(f"one process: load {t_load:.1f} s, encode+fit {t_single:.1f} s", flush=True)
        enc.fingerprint()  # so the cluster runs' client-side spec check is not charged its hashing

        # ---- local cluster started by the call, as `isotropy fit whitening --engine dask` does
        t0 = time.perf_counter()
        cold = fit_whitening(pattern, spec, n_workers=args.workers)
        t_cold = time.perf_counter() - t0
        print(f"cluster (started by the call): {t_cold:.1f} s", flush=True)

        # ---- a cluster already up, model loaded in every worker (steady state)
        t0 = time.perf_counter()
        cluster = distributed.LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
        )
        client = distributed.Client(cluster)
        t_start = time.perf_counter() - t0
        try:
            t0 = time.perf_counter()
            fit_whitening(pattern, spec, address=client)  # loads the model in each worker
            t_first = time.perf_counter() - t0
            t0 = time.perf_counter()
            warm = fit_whitening(pattern, spec, address=client)
            t_warm = time.perf_counter() - t0
        finally:
            client.close()
            cluster.close()
        print(f"cluster up in {t_start:.1f} s; first fit {t_first:.1f} s, warm fit {t_warm:.1f} s", flush=True)

        # The merge tree is exact: the warm and cold runs encode the same shards the same way.
        ms, mc, mw = single.moments_, cold.moments_, warm.moments_
        same_runs = max(rel(mc.scatter, mw.scatter), rel(mc.mean, mw.mean))
        vs_single_cov = rel(mw.covariance(), ms.covariance())
        vs_single_mean = rel(mw.mean, ms.mean)
        assert mw.n == ms.n == n

    load_after = os.getloadavg()
    per_core = n / (t_warm * args.workers)  # sentences per core-second, steady state
    per_core_single = n / (t_single * torch.get_num_threads())
    r = {"n": n, "n_all": n_all, "tasks": args.tasks, "shards": SHARDS, "max_length": MAX_LENGTH, "d": ms.dim}
    r.update(machine=machine(), load=[load_before[0], load_after[0]], workers=args.workers, threads=torch.get_num_threads())
    r.update(load_s=t_load, single_s=t_single, cold_s=t_cold, start_s=t_start, first_s=t_first, warm_s=t_warm)
    r.update(same_runs=same_runs, vs_single_mean=vs_single_mean, vs_single_cov=vs_single_cov, per_core=per_core)
    r.update(per_core_single=per_core_single, core_hours=1e9 / per_core / 3600, gpu_rate=GPU_SENTENCES_PER_S)
    r.update(price_core=PRICE_CORE_HOUR, price_gpu=PRICE_GPU_HOUR)
    SECTION.publish(r, args)


if __name__ == "__main__":  # the local cluster's worker processes are spawned: keep the guard
    main()
