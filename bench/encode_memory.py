"""Peak memory and throughput of ``isotropy encode`` on a large file (issue 17's memory check).

Writes a file of N lines (the STS-B sentences, train+dev+test, repeated) under /tmp -- never in the repository -- and
runs ``isotropy encode FILE -o OUT.npy`` on its first n lines for each n given, as a child process; peak RSS is the
child's ``ru_maxrss`` (getrusage of children, exact, no sampling), throughput = lines / wall seconds (model load
included). With ``--progress`` the progress bar runs too, and its last frame (sentences/s and time left) is kept from
stderr.

    .venv/bin/python bench/encode_memory.py [--lines 100000,1000000] [--precision bf16] [--threads 1]

Writes bench/results/encode_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]
from _encode_data import stsb_rows  # noqa: E402

ROOT = HERE.parent


def make_file(path: Path, n: int) -> Path:
    if path.exists() and sum(1 for _ in open(path, encoding="utf-8")) == n:
        return path
    pool = [s for split in ("train", "dev", "test") for a, b, _ in stsb_rows(split) for s in (a, b)]
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(pool[i % len(pool)] + "\n")
    return path


def run_one(path: Path, out: Path, precision: str, threads: int, progress: bool) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1", COLUMNS="120")
    if threads == 1:
        env["TOKENIZERS_PARALLELISM"] = "false"
    cmd = [str(ROOT / ".venv" / "bin" / "isotropy"), "encode", str(path), "-o", str(out), "--precision", precision, "--force"]
    cmd.append("--progress" if progress else "--no-progress")
    if progress and shutil.which("script"):  # a pseudo-terminal, so rich draws the live bar as a user sees it
        cmd = ["script", "-qefc", shlex.join(cmd), "/dev/null"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    text = proc.stdout + proc.stderr
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)  # rich's cursor moves between frames
    frames = [f for f in re.split(r"[\r\n]", plain) if "sentences/s" in f]
    return {
        "lines": sum(1 for _ in open(path, encoding="utf-8")),
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "peak_rss_mib": after.ru_maxrss / 1024,  # Linux: KiB; the largest child so far (runs go smallest first)
        "progress_frame": frames[-1].strip() if frames else None,
        # the output path is a temporary file of this machine: not recorded
        "last_line": (text.strip().splitlines()[-1] if text.strip() else "").rsplit(" to /", 1)[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", default="100000,1000000")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--progress", action="store_true", help="run with --progress and keep the bar's last frame")
    ap.add_argument("--work", type=Path, default=Path("/tmp/isotropy-bench-encode/memory"))
    args = ap.parse_args()
    ns = sorted(int(x) for x in args.lines.split(","))
    args.work.mkdir(parents=True, exist_ok=True)
    runs = []
    for n in ns:  # each file the first n lines of the same cycle through STS-B's sentences
        rec = run_one(
            make_file(args.work / f"sts-{n}.txt", n), args.work / "out.npy", args.precision, args.threads, args.progress
        )
        rec["sentences_per_s"] = rec["lines"] / rec["wall_s"]
        runs.append(rec)
        print(json.dumps(rec), flush=True)
        (args.work / "out.npy").unlink(missing_ok=True)
    out = HERE / "results" / "encode_memory.json"
    result = {"precision": args.precision, "threads": args.threads, "runs": runs}
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
