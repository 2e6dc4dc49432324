"""Regenerate docs/AUTO.md's model-zoo section: does ``--method auto`` choose well on tasks it never saw?

    .venv/bin/python bench/auto.py --zoo             # the library's rule held out task by task
    .venv/bin/python bench/auto.py --zoo --few-only  # the same, reusing the stored cells' signals
    .venv/bin/python bench/auto.py --render          # rewrite the section from bench/results/auto.json

The zoo (bench/_auto_zoo.py): GloVe 6B 50d (mean, SIF), the default model distilled to 384 and 256 dims (mean) and the
default transformer (last-avg, cls, first-last-avg). Leave one task out over the 7 STS tasks, calibrations fitted on
``others`` (the six other tasks' sentences minus any the test task holds): per cell raw, every candidate, the oracle,
label-free auto (the library's signal rule) and few-label auto (draws of 100 dev pairs). The passes that chose the
rules are quoted in docs/AUTO.md's 'What we tried' with their commits: the criteria run of issue #16 (440b70e); the
zoo's tuning on the STS-B train split (``--tune-zoo``), the few-label rule's (``--tune-few``) and the pooling choice
(``--zoo-pool``) (b31d6d7). Their results stay in bench/results/auto.json (``zoo_tune``, ``few_tune``, ``zoo_pool``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402
from _auto_zoo import DRAWS, decide  # noqa: E402

from _report import DATA, ROOT, Section, load_json, write_json  # noqa: E402

TASKS = ["STS-B", "SICK-R", "STS-12", "STS-13", "STS-14", "STS-15", "STS-16"]
OUT = ROOT / "bench" / "results" / "auto.json"


SECTION = Section("AUTO.md", "auto-zoo", lambda data: _render.auto_zoo(decide(data["zoo"])), OUT)


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--tasks", nargs="*", default=TASKS)
    ap.add_argument("--zoo", action="store_true", help="the signal rule held out task by task")
    ap.add_argument("--draws", type=int, default=DRAWS, help="few-label draws per zoo cell (20)")
    ap.add_argument("--few-only", action="store_true", help="with --zoo: reuse the stored cells' signals")
    args = ap.parse_args()
    if SECTION.rendered(args):
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data = load_json(OUT) if OUT.exists() else {}
    if args.zoo:
        from _auto_zoo import run_zoo

        def checkpoint(partial: dict) -> None:  # after each entry, so a later failure loses nothing
            data["zoo"] = partial
            if not args.no_write:
                write_json(OUT, data, sort_keys=True)

        reuse = dict(data.get("zoo", {}).get("cells", {})) if args.few_only else None
        data["zoo"] = run_zoo(args.data, args.tasks, args.draws, checkpoint, reuse)
    SECTION.publish(data, args, sort_keys=True)  # the JSON with the decisions the rule made on the cells


if __name__ == "__main__":
    main()
