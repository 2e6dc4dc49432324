"""docs/RESULTS.md's section, rendered from the numbers of bench/results.py (never written by hand).

Every sentence below that states a figure computes it from the results it is given.
"""

from __future__ import annotations

import math
from statistics import mean

EVEN = 0.05  # an average change smaller than this (Spearman x 100) is reported as "changes little"
YEARS = ["STS-12", "STS-13", "STS-14", "STS-15", "STS-16"]
TASKS = ["STS-B", "SICK-R", *YEARS]

# Published BERT-base figures, copied from ../shared/data/README.md, grouped by the aggregation setting
# of their STS-12..16 columns (bert-base-uncased: 768 dims, 12 layers, never trained on similarity).

AGGREGATION_SOURCES = (
    "`all` is what SBERT and SimCSE report (princeton-nlp/SimCSE `evaluation.py` l.182 prints "
    "`results[task]['all']['spearman']['all']`; its SentEval copy concatenates the subsets, `SentEval/senteval/sts.py` "
    "l.61-62, 78-79, 97-104; README l.167), and PromptBERT (kongds/Prompt-BERT `evaluation.py` l.401) and Ditto "
    "(alibaba-damo-academy/SpokenNLP `ditto/evaluation_ditto.py` l.203) follow it. `wmean` is SentEval's weighted "
    "average (facebookresearch/SentEval `senteval/sts.py` l.84-98, weights = pairs per subset): BERT-whitening prints it "
    "as `w-avg` (bojone/BERT-whitening `eng/eval.py` l.70, 110-116) and BERT-flow reads SentEval's `all` dict "
    "(bohanli/BERT-flow `run_siamese.py` l.560); the SimCSE authors state that both papers report `wmean` "
    "(princeton-nlp/SimCSE issue #4, which the BERT-whitening author accepted). `mean` is SentEval's plain average, "
    "printed beside it. STS-B and SICK-R are one correlation on their test split in every setting."
)


def f2(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def num(x: float | None) -> float:
    """NaN (a transform that could not be fitted, or not run) sorts below every number."""
    return -math.inf if x is None or math.isnan(x) else x


def _avg(r) -> float:
    vals = [s.score for s in r.scores.values()]
    return float("nan") if not vals or any(math.isnan(v) for v in vals) else float(mean(vals))


def _cell(res, pooling: str, method: str) -> float:
    try:
        return _avg(res.row(pooling, method))
    except KeyError:
        return float("nan")


# --------------------------------------------------------------------------- tables


def summary_table(by_agg: dict, methods: list[str], poolings: list[str]) -> list[str]:
    """Rows = methods, columns = poolings, cell = the task average as `all / wmean`; best per column in bold."""
    out = ["| method | " + " | ".join(f"`{p}`" for p in poolings) + " |", "|---|" + "---:|" * len(poolings)]
    best = {(p, a): max(num(_cell(by_agg[a], p, m)) for m in methods) for p in poolings for a in by_agg}
    for m in methods:
        cells = []
        for p in poolings:
            parts = []
            for a in by_agg:
                v = _cell(by_agg[a], p, m)
                parts.append(f"**{f2(v)}**" if num(v) == best[(p, a)] and not math.isnan(v) else f2(v))
            cells.append(" / ".join(parts))
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    return out


# --------------------------------------------------------------------------- prose derived from the numbers


def helps_and_hurts(res, methods: list[str], poolings: list[str]) -> list[str]:
    """One line per method: against raw of the same pooling, and against center (the baseline to beat)."""
    tasks = res.tasks
    lines = []
    for m in [m for m in methods if m != "raw"]:
        groups: dict[str, list[str]] = {"helps": [], "hurts": [], "changes little for": [], "not run / not fitted for": []}
        beats_center = []
        for p in poolings:
            try:
                r, raw = res.row(p, m), res.row(p, "raw")
            except KeyError:
                groups["not run / not fitted for"].append(f"`{p}`")
                continue
            d = _avg(r) - _avg(raw)
            if math.isnan(d):
                groups["not run / not fitted for"].append(f"`{p}`")
                continue
            up = sum(num(r.scores[t].score) > raw.scores[t].score for t in tasks)
            text = f"`{p}` ({d:+.2f}; better on {up}/{len(tasks)} tasks)"
            groups["helps" if d >= EVEN else "hurts" if d <= -EVEN else "changes little for"].append(text)
            if m != "center" and "center" in res.settings["methods"]:
                beats_center.append(_avg(r) - _avg(res.row(p, "center")) >= EVEN)
        parts = [f"{k} {', '.join(v)}" for k, v in groups.items() if v]
        vs_center = f" Beats `center` on {sum(beats_center)}/{len(beats_center)} poolings." if beats_center else ""
        lines.append(f"- **{m}** vs raw vectors of the same pooling (task average, `all`): " + "; ".join(parts) + "." + vs_center)
    return lines


def reading(runs: dict, methods: list[str], poolings: list[str]) -> list[str]:
    """The short, honest reading: which methods help which poolings, by how much, and what the settings change."""
    out = []
    for setting, by_agg in runs.items():
        res = by_agg["all"]
        raw = {p: _avg(res.row(p, "raw")) for p in poolings}
        best_raw = max(poolings, key=lambda p: num(raw[p]))
        fitted = [(p, m, _avg(res.row(p, m))) for p in poolings for m in methods if m != "raw" and _has(res, p, m)]
        gains = sorted(((v - raw[p], p, m) for p, m, v in fitted if not math.isnan(v)), reverse=True)
        per_pool = []
        for p in poolings:
            mine = [(g, m) for g, q, m in gains if q == p]
            if mine:
                g, m = mine[0]
                per_pool.append(f"`{p}` {'+' if g >= 0 else ''}{g:.2f} (`{m}`)")
        helped = sorted({p for g, p, _ in gains if g >= EVEN})
        best = max(fitted, key=lambda x: num(x[2])) if fitted else None
        line = (
            f"- **Fitted on {setting}.** Best raw pooling `{best_raw}` ({f2(raw[best_raw])}). Best change over raw per "
            f"pooling (task average, `all`): {', '.join(per_pool)}. "
        )
        if best is not None:
            line += (
                f"Best calibrated row overall: `{best[0]}` + `{best[1]}` ({f2(best[2])}, "
                f"{best[2] - raw[best_raw]:+.2f} against the best raw pooling). "
            )
        line += (
            f"Some method raises the average for {', '.join(f'`{p}`' for p in helped)}."
            if helped
            else "No method raises the average of any pooling."
        )
        out.append(line)
    if "target" in runs and "others" in runs:
        out.append(_target_vs_others(runs, methods, poolings))
    out.append(_aggregation_effect(runs, methods, poolings))
    return out


def _has(res, p: str, m: str) -> bool:
    try:
        res.row(p, m)
        return True
    except KeyError:
        return False


def _target_vs_others(runs: dict, methods: list[str], poolings: list[str]) -> str:
    t, o = runs["target"]["all"], runs["others"]["all"]
    diffs = [
        (_avg(t.row(p, m)) - _avg(o.row(p, m)), p, m)
        for p in poolings
        for m in methods
        if m != "raw" and _has(t, p, m) and _has(o, p, m)
    ]
    diffs = [x for x in diffs if not math.isnan(x[0])]
    if not diffs:
        return "- No method ran in both fit settings."
    lo, hi = min(diffs), max(diffs)
    return (
        f"- **target vs others.** Fitting on the test task's own sentences instead of the other tasks' changes the "
        f"task average by {mean(d for d, _, _ in diffs):+.2f} on average over the {len(diffs)} (pooling, method) rows "
        f"run in both settings (from {lo[0]:+.2f}, `{lo[1]}` + `{lo[2]}`, to {hi[0]:+.2f}, `{hi[1]}` + `{hi[2]}`): "
        "positive means the transforms gain from having seen the test sentences (never their labels), negative that "
        "the larger corpus of the other tasks serves them better."
    )


def _aggregation_effect(runs: dict, methods: list[str], poolings: list[str]) -> str:
    res_all, res_w = runs["target"]["all"], runs["target"]["wmean"]
    years = [t for t in YEARS if t in res_all.tasks]
    if not years:
        return "- No STS-12..16 task was run, so `all` and `wmean` agree."
    d = [
        res_w.score(r.pooling, r.method, y) - r.scores[y].score
        for r in res_all.rows
        for y in years
        if not math.isnan(r.scores[y].score)
    ]
    order_a = [(r.pooling, r.method) for r in sorted(res_all.rows, key=lambda r: -num(_avg(r)))]
    order_w = [(r.pooling, r.method) for r in sorted(res_w.rows, key=lambda r: -num(_avg(r)))]
    same_top = order_a[:1] == order_w[:1]
    return (
        f"- **all vs wmean.** On STS-12..16 the `wmean` figure differs from the `all` one by {mean(d):+.2f} on average "
        f"(from {min(d):+.2f} to {max(d):+.2f}) over every row and year (fitted on target); the best row is "
        + (
            "the same in both settings."
            if same_top
            else f"`{' + '.join(order_a[0])}` in `all` but `{' + '.join(order_w[0])}` in `wmean`."
        )
        + " Published figures are therefore only set beside ours in their own setting."
    )
