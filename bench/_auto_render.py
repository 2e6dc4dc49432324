"""docs/AUTO.md's sections, rendered from the numbers of bench/auto.py (never written by hand).

Every sentence that states a figure computes it from the run it is given.
"""

from __future__ import annotations

import math
from statistics import median

HARM = 0.5  # points of Spearman x 100 auto may lose to raw
BIG_GAIN = 2.0  # the oracle's gain over raw from which auto must capture a share
CAPTURE = {"label-free": 0.5, "few-label": 0.7}
MIN_DRAWS_OK = 18


def f2(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def _kendall(points: dict, truth: dict) -> float:
    from scipy.stats import kendalltau

    names = [n for n in truth if points.get(n) is not None and math.isfinite(points[n])]
    if len(names) < 3:
        return float("nan")
    return float(kendalltau([points[n] for n in names], [truth[n] for n in names]).statistic)


def _cells(run: dict, setting: str) -> dict[tuple[str, str], dict]:
    out = {}
    for key, cell in run["cells"].items():
        s, p, t = key.split("|")
        if s == setting:
            out[(p, t)] = cell
    return out


def _gain(cell: dict, choice: str) -> float:
    return cell["truth"][choice] - cell["truth"]["raw"]


def _oracle(cell: dict) -> tuple[str, float]:
    name = max(cell["truth"], key=lambda n: cell["truth"][n])
    return name, _gain(cell, name)


def _few_gains(cell: dict) -> list[float]:
    return [_gain(cell, c) for c in cell["few_label"]]


# ---------------------------------------------------------------- the targets


def _harm_label_free(cells: dict, pick) -> tuple[bool, str]:
    gains = {k: _gain(c, pick(c)) for k, c in cells.items()}
    worst = min(gains, key=gains.get)
    bad = [k for k, g in gains.items() if g < -HARM]
    text = f"worst {gains[worst]:+.2f} ({worst[0]}, {worst[1]}); {len(bad)} of {len(gains)} cells lose more than {HARM}"
    return not bad, text + (": " + ", ".join(f"{p} {t} {gains[(p, t)]:+.2f}" for p, t in bad) if bad else "")


def _harm_few_label(cells: dict) -> tuple[bool, str]:
    ok = {k: sum(g >= -HARM for g in _few_gains(c)) for k, c in cells.items()}
    n = len(next(iter(cells.values()))["few_label"])
    worst = min(ok, key=ok.get)
    bad = [k for k, v in ok.items() if v < MIN_DRAWS_OK]
    text = f"fewest draws within {HARM} of raw: {ok[worst]} of {n} ({worst[0]}, {worst[1]}); {len(bad)} of {len(ok)} cells below {MIN_DRAWS_OK}"
    return not bad, text + (": " + ", ".join(f"{p} {t} {ok[(p, t)]}/{n}" for p, t in bad) if bad else "")


def _capture(cells: dict, mode: str, pick=None) -> tuple[bool, str]:
    share = CAPTURE[mode]
    big = {k: c for k, c in cells.items() if _oracle(c)[1] >= BIG_GAIN}
    if not big:
        return True, f"no cell where the oracle gains {BIG_GAIN} points or more"
    got = {}
    for k, c in big.items():
        g = _gain(c, pick(c)) if mode == "label-free" else median(_few_gains(c))
        got[k] = g / _oracle(c)[1]
    hit = [k for k, v in got.items() if v >= share]
    parts = ", ".join(f"{p} {t} {100 * got[(p, t)]:.0f}% of {_oracle(big[(p, t)])[1]:+.2f}" for p, t in sorted(big))
    return len(hit) == len(big), f"{len(hit)} of {len(big)} cells keep at least {100 * share:.0f}% ({parts})"


# The label-free rule fixed before the full run (LABEL_FREE_RULE as committed with the criteria, tuned on STS-B
# train only); the product's rule may since have fallen back (docs/AUTO.md says which, and why).
DESIGNED_RULE = {"criterion": "agreement", "level": 0.9, "pick": "best"}


def label_free_rules() -> list[tuple[str, dict]]:
    from isotropy.selection import LABEL_FREE_RULE

    same = {k: LABEL_FREE_RULE.get(k) for k in DESIGNED_RULE} == DESIGNED_RULE
    return (
        [("label-free", LABEL_FREE_RULE)]
        if same
        else [("label-free, rule fixed before the run", DESIGNED_RULE), ("label-free, product rule", LABEL_FREE_RULE)]
    )


def target_status(run: dict, settings: list[str]) -> dict[tuple[str, str, str], tuple[bool, str]]:
    """``{(target, mode, setting): (met, measured)}`` for both label-free rules and the few-label mode."""
    out = {}
    for s in settings:
        cells = _cells(run, s)
        if not cells:
            continue
        for mode, rule in label_free_rules():
            pick = lambda c, rule=rule: rule_choice(c, rule)  # noqa: E731
            out[("do no harm", mode, s)] = _harm_label_free(cells, pick)
            out[("capture the gain", mode, s)] = _capture(cells, "label-free", pick)
        out[("do no harm", "few-label", s)] = _harm_few_label(cells)
        out[("capture the gain", "few-label", s)] = _capture(cells, "few-label")
    return out


def targets(run: dict, settings: list[str]) -> list[str]:
    what = {
        "do no harm": "every task and pooling at most 0.5 below raw (few-label: in at least 18 of 20 draws)",
        "capture the gain": "where the oracle gains 2 or more: at least 50% kept (few-label: the median draw, 70%)",
    }
    out = ["| target | mode | fit setting | measured | met |", "|---|---|---|---|---|"]
    for (target, mode, s), (ok, text) in target_status(run, settings).items():
        out.append(f"| {target} ({what[target]}) | {mode} | {s} | {text} | **{'met' if ok else 'missed'}** |")
    return out


# ---------------------------------------------------------------- label-free rules, compared leave-one-task-out

LEVELS = (0.9, 0.95, 0.99)


def rule_choice(cell: dict, rule: dict) -> str:
    """The candidate a label-free rule picks in ``cell`` (recomputed from the stored evidence, so the doc
    always reflects the rule given, e.g. the product's current LABEL_FREE_RULE)."""
    from isotropy.selection.select import _decide

    crit = rule.get("criterion")
    if crit is None or crit not in cell["points"]:
        return "raw"
    change = cell["change"] if rule.get("pick") == "closest" else None
    return _decide(cell["points"][crit], cell["beats"][crit], float(rule["level"]), change)[0]


def candidate_rules(run: dict) -> dict[str, dict]:
    crits = list(next(iter(run["cells"].values()))["points"])
    rules = {"always raw": {"criterion": None, "level": 1.0, "pick": "best"}}
    for c in crits:
        for lvl in LEVELS:
            for pick in ("best", "closest"):
                rules[f"{c} >= {100 * lvl:.0f}%, {pick}"] = {"criterion": c, "level": lvl, "pick": pick}
    return rules


def _rule_stats(cells: dict, rule: dict) -> tuple[int, int, int, float]:
    """(cells losing > HARM, big-gain cells keeping >= half, big-gain cells, mean gain) of ``rule`` on ``cells``."""
    gains = [_gain(c, rule_choice(c, rule)) for c in cells.values()]
    big = [c for c in cells.values() if _oracle(c)[1] >= BIG_GAIN]
    kept = sum(_gain(c, rule_choice(c, rule)) >= CAPTURE["label-free"] * _oracle(c)[1] for c in big)
    return sum(g < -HARM for g in gains), kept, len(big), sum(gains) / max(len(gains), 1)


def _best_rule(cells: dict, rules: dict) -> str:
    """Fewest cells harmed, then most big gains kept, then the highest mean gain (ties: the order of ``rules``)."""
    scored = {n: _rule_stats(cells, r) for n, r in rules.items()}
    return max(rules, key=lambda n: (-scored[n][0], scored[n][1], scored[n][3]))


def loto_rules(run: dict, settings: list[str]) -> tuple[list[str], dict]:
    """For each test task, the rule that is best on the other tasks' cells (all poolings), applied to the test task."""
    rules = candidate_rules(run)
    out = ["| fit setting | test task | rule chosen on the other tasks | cells losing > 0.5 | big gains kept | mean gain |"]
    out.append("|---|---|---|---:|---:|---:|")
    summary = {}
    for s in settings:
        cells = _cells(run, s)
        if not cells:
            continue
        tasks = list(dict.fromkeys(t for _, t in cells))
        tot = [0, 0, 0, 0.0, 0]
        for t in tasks:
            train = {k: c for k, c in cells.items() if k[1] != t}
            test = {k: c for k, c in cells.items() if k[1] == t}
            name = _best_rule(train, rules)
            harm, kept, big, mean = _rule_stats(test, rules[name])
            tot = [tot[0] + harm, tot[1] + kept, tot[2] + big, tot[3] + mean * len(test), tot[4] + len(test)]
            out.append(f"| {s} | {t} | {name} | {harm}/{len(test)} | {kept}/{big} | {mean:+.2f} |")
        summary[s] = {"harmed": tot[0], "cells": tot[4], "kept": tot[1], "big": tot[2], "mean_gain": tot[3] / max(tot[4], 1)}
        summary[s]["chosen_on_all"] = _best_rule(cells, rules)
    return out, summary


# ---------------------------------------------------------------- criteria


def criteria_table(run: dict, settings: list[str]) -> list[str]:
    out = [
        "| criterion | fit setting | mean Kendall tau | tau > 0 in | worst gain over raw | cells losing > 0.5 | big gains kept >= 50% | mean gain over raw |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in settings:
        cells = _cells(run, s)
        if not cells:
            continue
        crits = list(next(iter(cells.values()))["points"])
        for n in crits:
            taus = [_kendall(c["points"][n], c["truth"]) for c in cells.values()]
            taus = [t for t in taus if math.isfinite(t)]
            gains = [_gain(c, c["by_criterion"][n]) for c in cells.values()]
            big = [c for c in cells.values() if _oracle(c)[1] >= BIG_GAIN]
            kept = sum(_gain(c, c["by_criterion"][n]) >= 0.5 * _oracle(c)[1] for c in big)
            out.append(
                f"| `{n}` | {s} | {sum(taus) / max(len(taus), 1):+.2f} | {sum(t > 0 for t in taus)}/{len(taus)} | "
                f"{min(gains):+.2f} | {sum(g < -HARM for g in gains)}/{len(gains)} | {kept}/{len(big)} | {sum(gains) / len(gains):+.2f} |"
            )
    return out


# ---------------------------------------------------------------- per pooling


def pooling_table(run: dict, setting: str, pooling: str, tasks: list[str]) -> list[str]:
    cells = _cells(run, setting)
    have = [t for t in tasks if (pooling, t) in cells]
    if not have:
        return []
    cands = list(cells[(pooling, have[0])]["truth"])
    head = "| method | " + " | ".join(have) + " | avg |"
    out = [head, "|---|" + "---:|" * (len(have) + 1)]

    def row(name: str, vals: list[float], notes: list[str] | None = None) -> str:
        fin = [v for v in vals if v is not None and math.isfinite(v)]
        avg = sum(fin) / len(fin) if len(fin) == len(vals) else float("nan")
        cellv = [f2(v) + (f" ({notes[i]})" if notes and notes[i] else "") for i, v in enumerate(vals)]
        return f"| {name} | " + " | ".join(cellv) + f" | {f2(avg)} |"

    for c in cands:
        out.append(row(c, [cells[(pooling, t)]["truth"].get(c) for t in have]))
    orc = [_oracle(cells[(pooling, t)]) for t in have]
    out.append(row("**oracle**", [cells[(pooling, t)]["truth"][o[0]] for t, o in zip(have, orc)], [o[0] for o in orc]))
    from isotropy.selection import LABEL_FREE_RULE

    lf = [rule_choice(cells[(pooling, t)], LABEL_FREE_RULE) for t in have]
    out.append(row("**auto, label-free**", [cells[(pooling, t)]["truth"][c] for t, c in zip(have, lf)], lf))
    med = [median(cells[(pooling, t)]["truth"][c] for c in cells[(pooling, t)]["few_label"]) for t in have]
    worst = [min(cells[(pooling, t)]["truth"][c] for c in cells[(pooling, t)]["few_label"]) for t in have]
    kinds = [_few_kinds(cells[(pooling, t)]["few_label"]) for t in have]
    out.append(row("**auto, few-label (median of 20)**", med, kinds))
    out.append(row("**auto, few-label (worst of 20)**", worst))
    return out


def _few_kinds(choices: list[str]) -> str:
    counts: dict[str, int] = {}
    for c in choices:
        counts[c] = counts.get(c, 0) + 1
    return ", ".join(f"{c} x{n}" for c, n in sorted(counts.items(), key=lambda x: -x[1])[:3])


# ---------------------------------------------------------------- the sections


def _rule_words(rule: dict) -> str:
    if rule.get("criterion") is None:
        return "keep raw (no label-free criterion is trusted to replace it)"
    return (
        f"`{rule['criterion']}`, raw unless a candidate beats raw in at least {100 * rule['level']:.0f}% of 1000 bootstrap "
        "resamples of the 1000 sampled sentences, then "
        + ("the candidate that changes raw's similarities least" if rule.get("pick") == "closest" else "the best score")
    )


def verdict(run: dict, settings: list[str]) -> str:
    """One paragraph, computed from the targets: which mode meets which target, and the rule the product uses."""
    from isotropy.selection import LABEL_FREE_RULE

    status = target_status(run, settings)
    modes = list(dict.fromkeys(m for _, m, _ in status))
    parts = []
    for mode in modes:
        missed = [f"{t} ({s})" for (t, m, s), (ok, _) in status.items() if m == mode and not ok]
        parts.append(
            f"`auto` ({mode}) " + ("meets both targets in every fit setting" if not missed else "misses " + ", ".join(missed))
        )
    return (
        "**Verdict** (computed from the table): "
        + "; ".join(parts)
        + f". The product's label-free rule (`LABEL_FREE_RULE`): {_rule_words(LABEL_FREE_RULE)}."
    )


def render(run: dict, all_poolings: list[str] | None = None) -> str:
    from isotropy.selection import LABEL_FREE_RULE

    meta = run["meta"]
    settings, poolings, tasks = meta["settings"], meta["poolings"], meta["tasks"]
    load = meta["load_average"]
    per = len(settings) * len(tasks)
    have = {p: sum(1 for k in run["cells"] if k.split("|")[1] == p) for p in dict.fromkeys([*poolings, *(all_poolings or [])])}
    left = [p for p, n in have.items() if n < per and p not in meta["poolings_skipped"]]
    partial = [f"`{p}` ({have[p]} of {per} cells)" for p in left if have[p]]
    poolings = [p for p in poolings if have[p]]
    loto, loto_summary = loto_rules(run, settings)
    out = [
        "## Results",
        "",
        "### Targets",
        "",
        "Label-free rows: "
        + (
            f"the product's rule (`LABEL_FREE_RULE` in src/isotropy/selection/select.py), {_rule_words(LABEL_FREE_RULE)}."
            if len(label_free_rules()) == 1
            else f"the rule fixed before this run ({_rule_words(DESIGNED_RULE)}), and the product's rule since "
            f"(`LABEL_FREE_RULE` in src/isotropy/selection/select.py), set from these measurements: "
            f"{_rule_words(LABEL_FREE_RULE)}."
        ),
        "",
        *targets(run, settings),
        "",
        verdict(run, settings),
        "",
        "Label-free rules chosen without the test task's labels (each task's rule picked on the other six tasks, "
        "section 'Label-free rules' below): "
        + "; ".join(
            f"{s}: {v['harmed']} of {v['cells']} cells lose more than {HARM}, {v['kept']} of {v['big']} big gains kept "
            f"at half or more, mean gain {v['mean_gain']:+.2f} (the rule chosen on all seven tasks: {v['chosen_on_all']})"
            for s, v in loto_summary.items()
        )
        + ".",
        "",
        *(
            [
                "**Not run in this pass** (the machine's time; 2 cores shared with other benchmarks): poolings "
                + ", ".join(f"`{p}`" for p in left if not have[p])
                + (f"; cut short: {', '.join(partial)}, whose finished cells are in the tables" if partial else "")
                + f". To add them: `.venv/bin/python bench/auto.py --merge --poolings {' '.join(left)}` (a cut-short "
                "pooling is run again whole).",
                "",
            ]
            if left
            else []
        ),
        "### Setup",
        "",
        f"Model all-MiniLM-L6-v2 (the embedded default, 384 dimensions), max_length 64; poolings {', '.join(f'`{p}`' for p in poolings)}"
        + (f" (left out: {', '.join(meta['poolings_skipped'])})" if meta["poolings_skipped"] else "")
        + (f"; {meta['pooling_stats']}" if meta.get("pooling_stats") else "")
        + ". Spearman x 100 on each task's evaluation pairs (STS-B and SICK-R test; every scored pair of STS-12..16, "
        "pooled into one correlation, aggregate `all`). Leave one task out: auto reads no label of the test task. "
        "`target`: the calibrations are fitted on the test task's own sentences (every pair, both sides); `others`: on "
        "the six other tasks' sentences minus every sentence the test task also holds"
        + (
            f" (removed: {', '.join(f'{k} {v}' for k, v in meta['others_removed'].items())})"
            if meta.get("others_removed")
            else ""
        )
        + ". Few-label dev pairs (100 a draw, 20 draws): "
        + "; ".join(f"{t}: {src}" for t, src in meta["dev_sources"].items())
        + ".",
        "",
        f"Rules measured: label-free `auto` = {_rule_words(LABEL_FREE_RULE)}"
        + "; few-label `auto` = raw unless a candidate beats raw's dev Spearman on 1000 bootstrap resamples of the pairs "
        + (
            f"by the test `{meta['dev_rule']}` (docs/AUTO.md, 'Few-label rule')"
            if "dev_rule" in meta
            else "in at least 90% of them, each candidate alone (the rule when this run was made)"
        )
        + ", then the best dev Spearman.",
        "",
        f"Run: {len(run['cells'])} (setting, pooling, task) cells"
        + (f" (stopped after {meta['cells_done']} of the {meta['cells_planned']} planned)" if meta.get("partial") else "")
        + f" in **{meta['wall_s'] / 60:.1f} min** wall time ({meta['encode_s']:.0f} s encoding and reading the vector "
        f"cache: {meta['cache_hits']} hits, {meta['cache_misses']} misses) on {meta['machine']}; 1-minute load average "
        f"{load[0]:.1f} at the start and {load[1]:.1f} at the end (2 cores: above 2, the times are upper bounds).",
        "",
        "### The label-free criteria, each under the same rule",
        "",
        "Kendall tau between a criterion's score and the true Spearman across the candidates of one (task, pooling); "
        "then each criterion deciding alone under the label-free rule (raw unless 90% sure).",
        "",
        *criteria_table(run, settings),
        "",
    ]
    out += [
        "### Label-free rules",
        "",
        "Every rule the stored evidence allows (a criterion, a bootstrap level, and among the candidates sure to beat raw "
        "the best-scoring one or the one that changes raw's similarities least) was scored on every cell (those figures "
        "are in `bench/results/auto.json`); leave one task out, the rule that is best on the other six tasks (fewest "
        "cells losing more than 0.5, then most big gains kept, then the mean gain) applied to the seventh:",
        "",
        *loto,
        "",
    ]
    out.append("Kendall tau per task and every method's score per pooling and task are in `bench/results/auto.json` (`run`).")
    return "\n".join(out)


def render_tuning(tune: dict) -> str:
    res, meta = tune["tuning"], tune["meta"]
    poolings = list(res)
    variants = list(next(iter(res.values()))["variants"])
    out = [
        "## Tuning the criteria (STS-B train split only)",
        "",
        "Each criterion's own settings, chosen by the mean Kendall tau between the criterion and the true Spearman "
        "across the candidates, with the candidates fitted on the STS-B train split's sentences and the truth measured on "
        f"its 5749 pairs: no test label of any task is read. Poolings: {', '.join(poolings)}. Run time "
        f"{meta['wall_s'] / 60:.1f} min.",
        "",
        "| criterion | settings | " + " | ".join(poolings) + " | mean |",
        "|---|---|" + "---:|" * (len(poolings) + 1),
    ]
    best: dict[str, tuple[float, str]] = {}
    for v in variants:
        crit = res[poolings[0]]["variants"][v]["criterion"]
        taus = [res[p]["variants"][v]["tau"] for p in poolings]
        fin = [t for t in taus if t is not None and math.isfinite(t)]
        m = sum(fin) / len(fin) if fin else float("nan")
        if math.isfinite(m) and (crit not in best or m > best[crit][0]):
            best[crit] = (m, v)
        out.append(f"| `{crit}` | `{v.split(' ', 1)[1]}` | " + " | ".join(f2(t) for t in taus) + f" | {f2(m)} |")
    out += [
        "",
        "Chosen (highest mean tau): " + "; ".join(f"`{c}` `{v.split(' ', 1)[1]}` ({m:+.2f})" for c, (m, v) in best.items()) + ".",
    ]
    return "\n".join(out)
