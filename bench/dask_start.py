"""How fast a local Dask cluster's workers start (issue #44): Dask's own start (each worker process spawned afresh)
against isotropy's (``isotropy.distributed.cluster.worker_processes``: forked from a forkserver that imported torch,
transformers and the task module once), in the same run.

    .venv/bin/python bench/dask_start.py                 # writes docs/BENCHMARKS.md (dask-start) + results
    .venv/bin/python bench/dask_start.py --repeats 5 --no-write
    .venv/bin/python bench/dask_start.py --render        # the section again from the saved results

Each trial is a fresh interpreter (a forkserver lives as long as its process): a cluster of two single-threaded worker
processes starts and each worker runs a task that imports what isotropy's tasks import (up); then one worker dies
(``os._exit``) and the nanny starts it again, which runs the same task (restart). CPU is the whole machine's busy
time over each phase (``/proc/stat``, so the worker processes, which are not this process's children under a
forkserver, are counted too): Linux only. Trials alternate between the two starts; the table gives medians.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import Section  # noqa: E402

STARTS = {"spawn": "Dask's own (spawn)", "isotropy": "isotropy's (forkserver, preloaded)"}


def _busy() -> float:
    with open("/proc/stat", encoding="ascii") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def _task() -> int:
    """What a worker of ours imports for its first task (the forkserver's preload, which it then finds loaded)."""
    import importlib

    from isotropy.distributed.cluster import WORKER_PRELOAD

    for name in WORKER_PRELOAD:
        importlib.import_module(name)
    return os.getpid()


def trial(start: str) -> dict:
    """One trial in this process: ``start`` is ``spawn`` or ``isotropy``."""
    import contextlib
    import logging
    import time

    import distributed

    from isotropy.distributed.cluster import worker_processes

    with worker_processes() if start == "isotropy" else contextlib.nullcontext():
        b0, t0 = _busy(), time.perf_counter()
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.CRITICAL
        )
        client = distributed.Client(cluster)
        workers = list(client.scheduler_info()["workers"])
        client.gather([client.submit(_task, pure=False, workers=[w]) for w in workers])
        b1, t1 = _busy(), time.perf_counter()
        with contextlib.suppress(Exception):
            client.run(os._exit, 1, workers=[workers[0]])
        while workers[0] in client.scheduler_info()["workers"]:
            time.sleep(0.05)
        client.wait_for_workers(2, timeout=300)
        client.gather([client.submit(_task, pure=False, workers=[w]) for w in client.scheduler_info()["workers"]])
        b2, t2 = _busy(), time.perf_counter()
        client.close()
        cluster.close()
    return {"up_s": t1 - t0, "up_cpu_s": b1 - b0, "restart_s": t2 - t1, "restart_cpu_s": b2 - b1}


def measure(repeats: int) -> dict:
    runs: dict[str, list[dict]] = {k: [] for k in STARTS}
    for _ in range(repeats):
        for start in STARTS:
            done = subprocess.run(
                [sys.executable, __file__, "--trial", start], capture_output=True, text=True, check=True, cwd=HERE.parent
            )
            runs[start].append(json.loads(done.stdout.strip().splitlines()[-1]))
    med = {s: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for s, rs in runs.items()}
    return {"repeats": repeats, "load": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(), "median": med}


def render(r: dict) -> str:
    from _render import dask_start  # here: a trial's process imports nothing it does not measure

    return dask_start(r, STARTS)


SECTION = Section("BENCHMARKS.md", "dask-start", render, HERE / "results" / "dask_start.json")


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trial", choices=list(STARTS), help="one trial in this process (what each repeat runs)")
    args = ap.parse_args()
    if args.trial:
        print(json.dumps(trial(args.trial)))
    elif not SECTION.rendered(args):
        SECTION.publish(measure(args.repeats), args)


if __name__ == "__main__":
    main()
