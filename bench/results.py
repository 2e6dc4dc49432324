"""Regenerate docs/RESULTS.md: every pooling x calibration of the default model on the seven STS tasks.

    .venv/bin/python bench/results.py            # the full run (about 15-30 min on 2 cores)
    .venv/bin/python bench/results.py --tasks STS-16 --poolings cls --no-write   # a smoke run

Everything is fitted on the target task (``--fit-on target``, every pair of the task,
as both papers do) with max_length 64. Encoded vectors are cached under .cache/vectors
of the repository, so a rerun only refits. The prose below the tables is derived
from the numbers here, never written by hand.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import DATA, DOCS, ROOT, machine, update_section  # noqa: E402

POOLINGS = ["cls", "last-avg", "first-last-avg", "embed-last-avg", "last2-avg"]
METHODS = ["raw", "whitening", "whitening-256", "whitening-128", "soft-whitening-0.5", "flow"]
EVEN = 0.05  # an average change smaller than this (in Spearman x 100) is reported as "changes little"
TASKS = ["STS-B", "SICK-R", "STS-12", "STS-13", "STS-14", "STS-15", "STS-16"]

# Published figures, copied from ../shared/data/README.md (bert-base-uncased: a different,
# larger model that was never trained on sentence similarity; 768 dimensions, 12 layers).
PUBLISHED = [
    ("BERT-base last2avg (BERT-flow paper)", [59.04, 63.75, 57.84, 61.95, 62.48, 70.95, 69.81]),
    ("BERT-base-flow (target) (BERT-flow paper)", [70.72, 63.11, 63.48, 72.14, 68.42, 73.77, 75.37]),
    ("BERT-base-whitening (target) (BERT-whitening blog)", [71.20, None, None, None, None, None, None]),
    ("BERT-base-whitening-256 (target) (BERT-whitening blog)", [71.42, None, None, None, None, None, None]),
]


def f2(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def num(x: float) -> float:
    """NaN (a transform that could not be fitted) sorts below every number."""
    return -math.inf if x is None or math.isnan(x) else x


def covariance_rank(vectors) -> tuple[int, int]:
    """(eigenvalues above 1e-10 x the largest, dimensions) of the vectors' covariance."""
    import numpy as np

    w = np.linalg.eigvalsh(np.cov(np.asarray(vectors, dtype=np.float64).T))
    return int((w > 1e-10 * w.max()).sum()), int(w.shape[0])


def render(res, wall_s: float, rank: tuple[int, int] | None, load: list[float] | None = None) -> str:
    tasks = res.tasks
    rows = res.rows
    best = {t: max(num(r.scores[t].score) for r in rows) for t in tasks}
    best_avg = max(num(r.avg) for r in rows)

    def cell(r, t):
        v = r.scores[t].score
        return f"**{f2(v)}**" if num(v) == best[t] else f2(v)

    out = []
    s = res.settings
    out.append("## Default model on the seven STS tasks")
    out.append("")
    out.append(
        f"Model `{s['model']}` ({s['dim']} dimensions, the embedded default), max_length {s['max_length']}, "
        f"every transform fitted on the target task (every pair of the task, all splits, both sentences; "
        f'the papers\' "target" setting). Whitening shrinkage: `{s["shrinkage"]}`. '
        "Spearman x 100 between the cosine of the two sentence vectors and the gold score; "
        "evaluation pairs are the test split for STS-B (1379) and SICK-R (4927) and every scored pair for "
        "STS-12..16, where the pairs of the whole year are pooled into **one** correlation "
        "(the per-subset figures are in `docs/RESULTS.json`). Best per column in bold."
    )
    out.append("")
    head = ["pooling", "method", *tasks, "avg"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|---|---|" + "---:|" * (len(tasks) + 1))
    for r in rows:
        avg = f"**{f2(r.avg)}**" if num(r.avg) == best_avg else f2(r.avg)
        out.append("| " + " | ".join([r.pooling, r.method, *(cell(r, t) for t in tasks), avg]) + " |")
    out.append("")
    out.append(
        f"Full run: **{wall_s / 60:.1f} min** wall time ({res.timings['encode_s']:.0f} s encoding "
        f"the {sum(t['unique_sentences'] for t in s['tasks'].values())} unique sentences of {len(tasks)} tasks once for "
        f"all {len(s['poolings'])} poolings, "
        f"{res.timings['fit_s']:.0f} s fitting and applying the transforms) on {machine()}. "
        f"Cache hits this run: {s['cache_hits']}."
        + (
            f" The machine was shared: 1-minute load average {load[0]:.1f} at the start and {load[1]:.1f} at the end "
            "(2 cores), so the times are upper bounds."
            if load
            else ""
        )
    )
    for note in res.notes:
        out.append(f"Note: {note}.")
        out.append("")

    # ---- prose derived from the numbers
    raw = {r.pooling: r for r in rows if r.method == "raw"}
    methods = [m for m in res.settings["methods"] if m != "raw"]
    out.append("### What helps and what hurts on this model")
    out.append("")
    lines = []
    for m in methods:
        for p in res.settings["poolings"]:
            r = res.row(p, m)
            delta = r.avg - raw[p].avg
            up = [t for t in tasks if num(r.scores[t].score) > raw[p].scores[t].score]
            lines.append((m, p, delta, up))
    for m in methods:
        mine = [x for x in lines if x[0] == m]
        helps = [x for x in mine if x[2] >= EVEN]
        hurts = [x for x in mine if x[2] <= -EVEN]  # NaN (failed fits) is in neither
        even = [x for x in mine if abs(x[2]) < EVEN]
        failed = [x for x in mine if math.isnan(x[2])]
        parts = []
        if helps:
            parts.append(
                "helps " + ", ".join(f"`{p}` ({d:+.2f} avg; better on {len(up)}/{len(tasks)} tasks)" for _, p, d, up in helps)
            )
        if hurts:
            parts.append(
                "hurts " + ", ".join(f"`{p}` ({d:+.2f} avg; better on {len(up)}/{len(tasks)} tasks)" for _, p, d, up in hurts)
            )
        if even:
            parts.append(
                "changes little for "
                + ", ".join(f"`{p}` ({d:+.2f} avg; better on {len(up)}/{len(tasks)} tasks)" for _, p, d, up in even)
            )
        if failed:
            parts.append("could not be fitted on every task for " + ", ".join(f"`{p}`" for _, p, _, _ in failed))
        out.append(f"- **{m}** vs raw vectors of the same pooling: " + "; ".join(parts) + ".")
    per_task = []
    for t in tasks:
        cal = [r for r in rows if r.method != "raw"]
        wins = sum(num(r.scores[t].score) > raw[r.pooling].scores[t].score for r in cal)
        per_task.append(f"{t} {wins}/{len(cal)}")
    out.append("")
    out.append("Calibrated rows that beat the raw vectors of their own pooling, per task: " + ", ".join(per_task) + ".")
    out.append("")
    best_row = max(rows, key=lambda r: num(r.avg))
    best_raw = max(raw.values(), key=lambda r: num(r.avg))
    calibrated = [r for r in rows if r.method != "raw"]
    if not calibrated:
        out.append(f"Best raw pooling: `{best_raw.pooling}` (avg {f2(best_raw.avg)}); no calibration was run.")
        return "\n".join(out)
    best_cal = max(calibrated, key=lambda r: num(r.avg))
    out.append(
        f"Best raw pooling: `{best_raw.pooling}` (avg {f2(best_raw.avg)}). "
        f"Best calibrated row: `{best_cal.pooling}` + `{best_cal.method}` (avg {f2(best_cal.avg)}, "
        f"{best_cal.avg - raw[best_cal.pooling].avg:+.2f} over its raw pooling)."
    )
    out.append("")
    helped = sorted({p for m, p, d, _ in lines if d >= EVEN})
    best_task_gain = max(
        ((t, r.scores[t].score - raw[r.pooling].scores[t].score, r) for r in calibrated for t in tasks),
        key=lambda x: num(x[1]),
    )
    if best_row.method == "raw":
        rec = (
            f"**Recommendation for this model:** `{best_row.pooling}` pooling with no calibration (avg {f2(best_row.avg)}). "
            f"The best calibration (`{best_cal.pooling}` + `{best_cal.method}`) is {best_row.avg - best_cal.avg:.2f} points "
            "behind on average. all-MiniLM-L6-v2 was fine-tuned on sentence pairs, with mean pooling (`last-avg`), "
            "so the geometry that whitening and flows impose without labels competes with one already learned from labels. "
            + (
                f"Calibration raises the average only for {', '.join(f'`{p}`' for p in helped)}, "
                if helped
                else "No calibration raises the average for any pooling; "
            )
            + f"and the largest single-task gain is {best_task_gain[1]:+.2f} on {best_task_gain[0]} "
            f"(`{best_task_gain[2].pooling}` + `{best_task_gain[2].method}`). For models not trained on similarity, "
            "the published BERT-base figures below show the opposite picture."
        )
    else:
        rec = (
            f"**Recommendation for this model:** `{best_row.pooling}` + `{best_row.method}` (avg {f2(best_row.avg)}, "
            f"{best_row.avg - best_raw.avg:+.2f} over the best raw pooling `{best_raw.pooling}`)."
        )
    out.append(rec)
    out.append("")
    if rank is not None:
        r_, d_ = rank
        if r_ < d_:
            out.append(
                f"Rank: on this model the covariance of the sentence vectors has only {r_} eigenvalues above "
                f"1e-10 x the largest out of {d_} (measured on the STS-B `cls` vectors): the vectors lie in a "
                f"{r_}-dimensional subspace. Full `whitening` (no shrinkage, as in the papers) therefore keeps the "
                f"{r_} directions that have variance and drops the others with a warning (recorded in "
                "`docs/RESULTS.json`); whitening-256/128 are unaffected. `--shrinkage auto` (Ledoit-Wolf) would keep all "
                f"{d_} instead."
            )
        else:
            out.append(f"The covariance of the STS-B `cls` vectors is full rank ({r_} of {d_}).")
        out.append("")

    # ---- subsets of STS-12..16 for the recommended row
    sub_tasks = [t for t in tasks if best_row.scores[t].subsets]
    if sub_tasks:
        out.append(
            f"Per-subset Spearman of the recommended row (`{best_row.pooling}` + `{best_row.method}`) "
            "beside the pooled figure and the unweighted mean of the subsets (what some papers report instead):"
        )
        out.append("")
        out.append("| task | pooled (table) | mean of subsets | subsets |")
        out.append("|---|---:|---:|---|")
        for t in sub_tasks:
            sc = best_row.scores[t]
            subs = ", ".join(f"{k} {f2(v)}" for k, v in sc.subsets.items())
            out.append(f"| {t} | {f2(sc.score)} | {f2(sc.extra.get('subset_mean'))} | {subs} |")
        out.append("")

    # ---- the published figures
    out.append("### Published figures for BERT-base (a different model)")
    out.append("")
    out.append(
        "For orientation only: these come from the BERT-flow paper and the BERT-whitening blog, measured on "
        "**bert-base-uncased** (768 dimensions, 12 layers, never trained on sentence similarity), with the "
        'same data, the same evaluation pairs and the same "target" fitting. They are not comparable row by '
        "row with the table above; they show the effect calibration has on a model that was not trained for "
        "similarity."
    )
    out.append("")
    out.append("| published (bert-base-uncased) | " + " | ".join(TASKS) + " | avg |")
    out.append("|---|" + "---:|" * (len(TASKS) + 1))
    for name, vals in PUBLISHED:
        avg = f2(sum(vals) / len(vals)) if all(v is not None for v in vals) else "-"
        out.append(f"| {name} | " + " | ".join(f2(v) for v in vals) + f" | {avg} |")
    out.append("")
    out.append("Regenerate with `.venv/bin/python bench/results.py` (writes this section and `docs/RESULTS.json`).")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--tasks", nargs="*", default=TASKS)
    ap.add_argument("--poolings", nargs="*", default=POOLINGS)
    ap.add_argument("--methods", nargs="*", default=METHODS)
    ap.add_argument("--shrinkage", default="0", help="whitening shrinkage (0: the papers' exact whitening)")
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "vectors"))
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: on a shared 2-core machine the flow's small matrix products "
        "run many times faster on one thread than on two contended ones)",
    )
    ap.add_argument("--cold", action="store_true", help="start from an empty vector cache, so the wall time includes encoding")
    ap.add_argument("--no-write", action="store_true", help="print the section instead of writing docs/")
    ap.add_argument("--render-only", action="store_true", help="rewrite the section from docs/RESULTS.json without evaluating")
    args = ap.parse_args()

    import os

    import torch

    from isotropy.evaluation import Results, evaluate
    from isotropy.storage.artifacts import write_json

    json_path = DOCS / "RESULTS.json"
    if args.render_only:
        data = json.loads(json_path.read_text(encoding="utf-8"))
        res = Results.from_dict(data)
        torch.set_num_threads(data.get("threads", args.threads))  # machine() reports the run's thread count
        wall, load = data["wall_s"], data.get("load_average")
        rank = tuple(data["cls_rank"]) if data.get("cls_rank") else stsb_cls_rank(args, res)
    else:
        torch.set_num_threads(args.threads)
        if args.cold:
            import tempfile

            (ROOT / ".cache").mkdir(exist_ok=True)
            args.cache = tempfile.mkdtemp(prefix="results-cold-", dir=ROOT / ".cache")
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        res = evaluate(
            args.tasks,
            data=args.data,
            poolings=args.poolings,
            methods=args.methods,
            fit_on="target",
            max_length=64,
            shrinkage=args.shrinkage,
            cache=args.cache,
            show_progress=None,
            errors="record",
        )
        wall = time.perf_counter() - t0
        load = [load0, os.getloadavg()[0]]
        rank = stsb_cls_rank(args, res)
        if args.cold:
            import shutil

            shutil.rmtree(args.cache, ignore_errors=True)
        data = res.to_dict()
        data.update(wall_s=wall, load_average=load, cls_rank=list(rank) if rank else None, threads=args.threads)
    text = render(res, wall, rank, load)
    if args.no_write:
        print(text)
        return
    if not args.render_only:
        write_json(json_path, data)
    path = update_section("RESULTS.md", "sts-default-model", text, title="Results")
    print(f"wrote {path}" + ("" if args.render_only else f" and {json_path} ({wall / 60:.1f} min)"))


def stsb_cls_rank(args, res) -> tuple[int, int] | None:
    """Covariance rank of the STS-B cls vectors (from the vector cache when it has them)."""
    if "STS-B" not in res.tasks or "cls" not in res.settings["poolings"]:
        return None
    from isotropy.encoders import Encoder
    from isotropy.encoders.cache import VectorCache, encode_cached
    from isotropy.evaluation import load_tasks

    task = load_tasks(args.data, ["STS-B"])[0]
    enc = Encoder(None, pooling="cls", max_length=64)
    cache = args.cache if Path(args.cache).is_dir() else str(ROOT / ".cache" / "vectors")
    vecs = encode_cached(enc, task.sentences(), ["cls"], VectorCache(cache))["cls"]
    return covariance_rank(vecs)


if __name__ == "__main__":
    main()
