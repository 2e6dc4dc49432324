"""Benchmark: whitening fit on sentence shards, local Dask cluster vs one process.

The unique sentences of STS-B (``--tasks all``: of the 7 STS tasks) are split into
8 shards. The same fit (embedded all-MiniLM-L6-v2, its mean pooling, max_length 64)
runs three ways, measured in the same run:

* one process: ``Encoder.encode`` of every sentence + ``Whitening.fit`` (torch on all cores);
* ``isotropy.distributed.fit_whitening`` without an address, as the CLI runs it: a
  local cluster (one single-threaded worker process per core) is started, every
  worker loads the model, the shards are encoded and merged, the cluster stops;
* the same call on a cluster that is already up with the model loaded (the steady
  state of a long job: what per-core throughput means).

It reports the wall-time ratios, how far the statistics are from the one-process
ones, the per-core throughput, and a paper estimate for 1 billion sentences.
Writes the ``distributed`` section of docs/BENCHMARKS.md.

    .venv/bin/python bench/distributed_fit.py                   # first 2,400 STS-B sentences
    .venv/bin/python bench/distributed_fit.py --sentences 0     # all of STS-B's unique sentences
    .venv/bin/python bench/distributed_fit.py --tasks all --sentences 0 --no-write
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import DATA, machine, update_section  # noqa: E402

SHARDS = 8
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=["STS-B"], help="STS tasks whose unique sentences are used ('all': the 7)")
    ap.add_argument("--sentences", type=int, default=2400, help="use the first N unique sentences (0: all)")
    ap.add_argument("--workers", type=int, default=os.cpu_count(), help="local cluster workers (default: one per core)")
    ap.add_argument("--no-write", action="store_true", help="print the report instead of writing docs/BENCHMARKS.md")
    args = ap.parse_args()

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
    billion = 1e9
    core_hours = billion / per_core / 3600
    gpu_hours = billion / GPU_SENTENCES_PER_S / 3600
    rows = []
    for cores in (64, 512, 4096):
        rows.append(f"| {cores} CPU cores | {core_hours / cores:,.1f} h | ${core_hours * PRICE_CORE_HOUR:,.0f} |")
    for gpus in (8, 64):
        rows.append(
            f"| {gpus} GPUs (assumed {GPU_SENTENCES_PER_S:,.0f} sentences/s each) | {gpu_hours / gpus:,.1f} h | ${gpu_hours * PRICE_GPU_HOUR:,.0f} |"
        )
    d = ms.dim
    subset = ""
    if n < n_all:
        minutes = n_all / (n / t_single) / 60
        subset = (
            f". Why a subset: at the one-process rate measured here ({n / t_single:.0f} sentences/s) all "
            f"{n_all:,} would take about {minutes:.0f} min per run, four runs; `--sentences 0` runs them all"
        )
    if t_warm <= t_single:
        verdict = f"gains only what {args.workers} single-threaded processes win over one process with {torch.get_num_threads()} intra-op threads"
        why = (
            "On a busy machine that gain is mostly an artefact: torch's intra-op threads wait for each other "
            "whenever one of them is descheduled, single-threaded workers never wait; on an idle machine expect a warm ratio near 1."
        )
    else:
        verdict = f"is slower than one process with {torch.get_num_threads()} intra-op threads on the same cores"
        why = (
            "Not measured separately, but the likely causes: each worker length-sorts only its own shard "
            "(more padding per batch), and each task pays the scheduler's overhead, while one process keeps "
            "both cores on one stream of batches sorted over the whole corpus."
        )
    md = f"""## Distributed fit (`bench/distributed_fit.py`)

{n:,} unique sentences ({", ".join(args.tasks)}{f": the first {n:,} of its {n_all:,}" if n < n_all else ""}) in {SHARDS} shards,
embedded all-MiniLM-L6-v2 (mean pooling, max_length {MAX_LENGTH}, {d} dims), whitening fit.
Machine: {machine()}. **This machine has 2 cores and was shared with other jobs during the run**
(load average {load_before[0]:.1f} before, {load_after[0]:.1f} after, on 2 cores): absolute times are
several times slower than on an idle machine, and all ratios carry that noise. One run each (no repeats:
a run is minutes here){subset}.

| run | wall time | vs one process |
|---|---|---|
| one process (`Encoder.encode` + `Whitening.fit`, torch on {torch.get_num_threads()} threads; model load and warm-up {t_load:.1f} s not included) | {t_single:.1f} s | 1.00 |
| `fit_whitening` without address: starts a {args.workers}-worker local cluster, loads the model in each worker, fits, stops | {t_cold:.1f} s | {t_cold / t_single:.2f} |
| the same on a cluster already up (start-up {t_start:.1f} s not included), first call (workers load the model) | {t_first:.1f} s | {t_first / t_single:.2f} |
| the same, warm (model cached in each worker process) | {t_warm:.1f} s | {t_warm / t_single:.2f} |

One machine has no more compute to give a cluster: the cold call also pays process start-up and a
model load in every worker (cold minus warm here: {t_cold - t_warm:+.1f} s; a one-run difference, so
within this machine's noise when it is near zero), and the warm cluster
{verdict} ({t_warm / t_single:.2f}x the one-process time). {why}
The point is the next machine: the shards are independent and the
merge is exact, so throughput grows with workers, and start-up is paid once per job, not per shard.

Statistics: the cold and warm cluster fits agree to {same_runs:.1e} relative (the merge tree
is fixed, so reruns are bit-identical). Against the one-process fit the mean differs by
{vs_single_mean:.1e} and the covariance by {vs_single_cov:.1e} relative (max |difference| / max |value|):
not the merge, which is exact to 1e-9 and better (tests/test_distributed.py), but the vectors
themselves, which float32 forward passes compute with another rounding when the batches
(per-shard length sorting) and torch's thread count (1 per worker, {torch.get_num_threads()} here) differ.
With one thread and `batch_size=1` they are bit-identical and so are the statistics (tested).

### Paper estimate: 1 billion sentences

Measured steady-state throughput here: {per_core:,.1f} sentences per core-second in the cluster
({per_core_single:,.1f} per core-second for the one-process run). Assumptions, not measurements:
CPU at ${PRICE_CORE_HOUR:.2f} per core-hour (on-demand general-purpose VMs), the per-core rate above
holds on the cluster's cores (it was measured on a shared, busy machine, so an idle core is likely
faster: the estimate is pessimistic), reading shards and merging are negligible (one merge moves
{d}x{d} float64 = {d * d * 8 / 2**20:.1f} MiB; a billion sentences at ~100 bytes is ~100 GB of text).
**GPU speed is an assumption**: {GPU_SENTENCES_PER_S:,.0f} sentences/s per T4/L4-class GPU for
MiniLM-L6 at max_length {MAX_LENGTH} in fp16 (not measured: no GPU here), at ${PRICE_GPU_HOUR:.2f} per GPU-hour.

| workers | wall time | cost |
|---|---|---|
{chr(10).join(rows)}

Total CPU work: {core_hours:,.0f} core-hours; GPU: {gpu_hours:,.0f} GPU-hours (assumed rate).
"""
    if args.no_write:
        print(md)
    else:
        print(f"wrote {update_section('BENCHMARKS.md', 'distributed', md, title='Benchmarks')}")


if __name__ == "__main__":  # the local cluster's worker processes are spawned: keep the guard
    main()
