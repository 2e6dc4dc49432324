"""Benchmark: ``isotropy serve`` against the one-shot ``isotropy search`` (issue #25).

An index of a generated 1,000-line corpus (bench/analysis.py's generator) on the default model, built once (``isotropy
index build``, its default soft whitening). Then:

1. ``isotropy search INDEX "query" --json`` as a subprocess, ``--repeats`` times: the wall time of the command and the
   load time it reports (``timings.load_s``: the index and the model);
2. ``isotropy serve INDEX --port 0`` as a subprocess: the time until ``/health`` answers, then ``--requests`` ``GET
   /search?q=...&k=10`` one after another (httpx, one connection): the median and 90th percentile latency as the
   client sees it, and the server's ``took_ms``.

Writes the ``serve`` section of docs/BENCHMARKS.md.

    .venv/bin/python bench/serve.py [--requests 200] [--repeats 3] [--no-write]
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402
from analysis import make_corpus  # noqa: E402

from _report import ROOT, Section, machine  # noqa: E402

SECTION = Section("BENCHMARKS.md", "serve", _render.serve, ROOT / "bench" / "results" / "serve.json")

BIN = Path(sys.executable).parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
QUERIES = ["a dog walks past the station", "someone writes a long letter at night", "the committee builds a bridge"]


def one_shot(index: Path, repeats: int) -> tuple[list[float], list[float]]:
    walls, loads = [], []
    for i in range(repeats):
        t0 = time.perf_counter()
        out = subprocess.run(
            [str(BIN / "isotropy"), "search", str(index), QUERIES[i % len(QUERIES)], "--json"],
            check=True,
            capture_output=True,
            text=True,
            env=ENV,
        )
        walls.append(time.perf_counter() - t0)
        loads.append(json.loads(out.stdout)["timings"]["load_s"])
    return walls, loads


def served(index: Path, requests: int) -> dict:
    import httpx

    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN / "isotropy"), "serve", str(index), "--port", "0"], stderr=subprocess.PIPE, text=True, env=ENV
    )
    try:
        line = proc.stderr.readline()
        m = re.search(r"serving on (http://\S+)", line)
        if not m:
            raise SystemExit(f"the server did not start: {line}")
        url = m.group(1)
        with httpx.Client(base_url=url, timeout=60) as client:
            health = client.get("/health").json()
            ready = time.perf_counter() - t0
            client.get("/search", params={"q": "warm up"})
            latency, took = [], []
            for i in range(requests):
                t = time.perf_counter()
                body = client.get("/search", params={"q": f"{QUERIES[i % len(QUERIES)]} {i}", "k": 10}).json()
                latency.append(1000 * (time.perf_counter() - t))
                took.append(body["took_ms"])
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    return {"ready_s": ready, "load_s": health["load_seconds"], "latency_ms": latency, "took_ms": took}


def p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))]


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if SECTION.rendered(args):
        return
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(make_corpus(args.lines)) + "\n")
        index = Path(tmp) / "idx"
        subprocess.run(
            [str(BIN / "isotropy"), "index", "build", str(corpus), "-o", str(index), "--no-progress"],
            check=True,
            capture_output=True,
            env=ENV,
        )
        load0 = os.getloadavg()[0]
        walls, loads = one_shot(index, args.repeats)
        srv = served(index, args.requests)
        load1 = os.getloadavg()[0]
    lat, took = srv["latency_ms"], srv["took_ms"]
    res = {"machine": machine(), "load": [load0, load1], "lines": args.lines, "repeats": args.repeats}
    res.update(wall=[statistics.median(walls), max(walls)], loading=[statistics.median(loads), max(loads)])
    res.update(ready_s=srv["ready_s"], requests=len(lat), latency_ms=[statistics.median(lat), p90(lat)])
    res["took_ms"] = [statistics.median(took), p90(took)]
    SECTION.publish(res, args)


if __name__ == "__main__":
    main()
