"""Regenerate docs/RESULTS.md: every pooling x every training-free method of the default model on the seven STS tasks.

    .venv/bin/python bench/results.py                 # every registered pooling (about 10-20 min on 2 cores, cold)
    .venv/bin/python bench/results.py --stock         # only the stock poolings (cls, pooler, last-avg, ...)
    .venv/bin/python bench/results.py --tasks STS-16 STS-13 --poolings cls --no-write   # a smoke run

Two fit settings (``--fit-on``): ``target`` and ``others`` (docs/RESULTS.md says what each is), each scored in the
``all`` and ``wmean`` aggregations (the second derived from the first's per-subset figures, nothing refitted). The
poolings are whatever ``isotropy.encoders.poolings`` registers (``--stock``: ``poolings/standard.py``'s); a pooling
the default model cannot run is recorded with its reason. The flow runs on ``target`` only by default (``--flow-on``:
on ``others`` it would take longer than the run's 20-minute budget). Encoded vectors are cached under .cache/vectors.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


import _render  # noqa: E402

from _report import DATA, DOCS, ROOT, Section, machine  # noqa: E402

METHODS = "raw center abtt common-component whitening whitening-256 whitening-128 soft-0.25 soft-0.5 soft-0.75 flow".split()
FIT_SETTINGS = ["target", "others"]
TASKS = _render.TASKS


def registered_poolings(stock_only: bool = False) -> list[str]:
    """Every pooling name the registry offers (no parametrised family); ``stock_only``: those of poolings/standard.py."""
    from isotropy.encoders.poolings import FAMILIES

    return [
        name
        for name, target in FAMILIES.items()
        if not name.endswith(":") and (not stock_only or target.startswith("isotropy.encoders.poolings.standard:"))
    ]


def usable_poolings(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """The poolings the default model runs, and why the others were left out."""
    from isotropy.encoders import Encoder
    from isotropy.errors import IsotropyError

    ok, skipped = [], {}
    for p in names:
        try:
            Encoder(None, pooling=p, max_length=64)
            ok.append(p)
        except IsotropyError as exc:
            skipped[p] = str(exc)
    return ok, skipped


def make_encoder(poolings: list[str], tasks) -> tuple[object, str | None]:
    """One encoder for every pooling; token frequencies (sif, idf) counted once on every task's sentences."""
    from isotropy.encoders import Encoder
    from isotropy.encoders.poolings import parse_pooling

    enc = Encoder(None, pooling=poolings[0], max_length=64)
    if not any(getattr(parse_pooling(p), "needs_token_stats", False) for p in poolings):
        return enc, None
    sentences = list(dict.fromkeys(s for t in tasks for s in t.sentences()))
    enc.fit_pooling(sentences)
    return (
        enc,
        f"token frequencies of the weighted poolings counted once on the {len(sentences)} unique sentences of the {len(tasks)} tasks (no labels)",
    )


def run(args) -> dict:
    """Evaluate every fit setting; returns what RESULTS.json holds."""
    import torch

    from isotropy.evaluation import evaluate, load_tasks

    torch.set_num_threads(args.threads)
    names = args.poolings or registered_poolings(args.stock)
    poolings, skipped = usable_poolings(names)
    tasks = load_tasks(args.data, args.tasks)
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    enc, stats_note = make_encoder(poolings, tasks)
    runs, wall = {}, {}
    for setting in args.fit_on:
        methods = [m for m in args.methods if m != "flow" or setting in args.flow_on]
        t1 = time.perf_counter()
        res = evaluate(
            tasks,
            encoder=enc,
            poolings=poolings,
            methods=methods,
            fit_on=setting,
            aggregate="all",
            shrinkage=args.shrinkage,
            cache=args.cache,
            show_progress=None,
            errors="record",
        )
        wall[setting] = time.perf_counter() - t1
        runs[setting] = res.to_dict()
        print(
            f"{setting}: {wall[setting] / 60:.1f} min ({res.timings['encode_s']:.0f} s encoding, {res.timings['fit_s']:.0f} s fitting)"
        )
    total = time.perf_counter() - t0
    meta = {
        "wall_s": total,
        "wall_per_setting_s": wall,
        "load_average": [load0, os.getloadavg()[0]],
        "threads": args.threads,
        "machine": machine(),
        "poolings_skipped": skipped,
        "pooling_stats": stats_note,
        "flow_on": [s for s in args.fit_on if s in args.flow_on and "flow" in args.methods],
        "pooling_choice": "given" if args.poolings else "stock" if args.stock else "registry",
    }
    print(f"full run: {total / 60:.1f} min")
    return {"meta": meta, "runs": runs}


# --------------------------------------------------------------------------- the section


SECTION = Section("RESULTS.md", "sts-default-model", _render.sts_default_model, DOCS / "RESULTS.json")


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--tasks", nargs="*", default=TASKS)
    ap.add_argument("--poolings", nargs="*", default=None, help="default: every registered pooling (see --stock)")
    ap.add_argument("--stock", action="store_true", help="only the stock poolings (encoders/poolings/standard.py)")
    ap.add_argument("--methods", nargs="*", default=METHODS)
    ap.add_argument("--fit-on", nargs="*", default=FIT_SETTINGS, choices=FIT_SETTINGS)
    ap.add_argument("--flow-on", nargs="*", default=["target"], choices=FIT_SETTINGS)
    ap.add_argument("--shrinkage", default="0", help="whitening shrinkage (0: the papers' exact whitening)")
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "vectors"))
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: the flow's small products on a shared 2-core box)")
    args = ap.parse_args()
    if not SECTION.rendered(args):
        SECTION.publish(run(args), args, sort_keys=True)


if __name__ == "__main__":
    main()
