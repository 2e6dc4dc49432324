"""How fast the command line starts (issue #44): ``isotropy --help`` and ``isotropy calibrate --help`` against the
same commands at a reference commit (the code before the start was made light), and against the bare interpreter.

    .venv/bin/python bench/cli_start.py                      # writes docs/BENCHMARKS.md (cli-start) + results
    .venv/bin/python bench/cli_start.py --before 6e4e491 --repeats 9 --no-write
    .venv/bin/python bench/cli_start.py --render                 # the section again from the saved results

The reference commit is checked out with ``git worktree`` into a temporary folder and run with the same interpreter
and packages (``PYTHONPATH`` to its ``src``), so the two differ only in isotropy's code. Each round runs every
command once, in turn (load from other users hits all alike); the table gives medians over ``--repeats`` rounds.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _render  # noqa: E402

from _report import ROOT, Section  # noqa: E402

RESULTS = HERE / "results" / "cli_start.json"
BEFORE = "6e4e491"  # main before the start was made light (issue #44's "today": 1.4-1.6 s)


def _time(args: list[str], src: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    t = time.perf_counter()
    subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def measure(before: str, repeats: int) -> dict:
    cli = [sys.executable, "-c", "from isotropy.cli import main; main()"]
    with tempfile.TemporaryDirectory(prefix="isotropy-cli-start-") as scratch:
        ref = Path(scratch) / "ref"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(ref), before], check=True)
        try:
            runs = {
                "python -c pass (the interpreter)": ([sys.executable, "-c", "pass"], ROOT / "src"),
                "isotropy --help": ([*cli, "--help"], ROOT / "src"),
                f"isotropy --help at {before}": ([*cli, "--help"], ref / "src"),
                "isotropy calibrate --help": ([*cli, "calibrate", "--help"], ROOT / "src"),
                f"isotropy calibrate --help at {before}": ([*cli, "calibrate", "--help"], ref / "src"),
            }
            for args, src in runs.values():  # warm the page cache and the bytecode of both trees
                _time(args, src)
            times: dict[str, list[float]] = {k: [] for k in runs}
            for _ in range(repeats):
                for name, (args, src) in runs.items():
                    times[name].append(_time(args, src))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(ref)], check=False)
    median = {k: statistics.median(v) for k, v in times.items()}
    return {"before": before, "repeats": repeats, "load": round(os.getloadavg()[0], 2), "median_s": median}


SECTION = Section("BENCHMARKS.md", "cli-start", _render.cli_start, RESULTS)


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    if not SECTION.rendered(args):
        SECTION.publish(measure(args.before, args.repeats), args)


if __name__ == "__main__":
    main()
