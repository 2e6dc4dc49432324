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


def targets(run: dict, settings: list[str]) -> list[str]:
    out = [
        "| target | fit setting | measured | met |",
        "|---|---|---|---|",
    ]
    for s in settings:
        cells = _cells(run, s)
        if not cells:
            continue
        rows = [
            (
                "do no harm, label-free (every task and pooling: at most 0.5 lost to raw)",
                _harm_label_free(cells, lambda c: c["label_free"]),
            ),
            (f"do no harm, few-label (at most 0.5 lost in at least {MIN_DRAWS_OK} of 20 draws)", _harm_few_label(cells)),
            (
                "capture the gain, label-free (at least 50% of an oracle gain of 2 or more)",
                _capture(cells, "label-free", lambda c: c["label_free"]),
            ),
            ("capture the gain, few-label (median draw keeps at least 70%)", _capture(cells, "few-label")),
        ]
        for name, (ok, text) in rows:
            out.append(f"| {name} | {s} | {text} | **{'met' if ok else 'missed'}** |")
    return out


# ---------------------------------------------------------------- criteria


def criteria_table(run: dict, settings: list[str]) -> list[str]:
    out = [
        "| criterion | fit setting | mean Kendall tau | tau > 0 in | worst loss to raw | cells losing > 0.5 | big gains kept >= 50% | mean change vs raw |",
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


def tau_tables(run: dict, setting: str, poolings: list[str], tasks: list[str]) -> list[str]:
    cells = _cells(run, setting)
    out = []
    for p in poolings:
        have = [t for t in tasks if (p, t) in cells]
        if not have:
            continue
        crits = list(cells[(p, have[0])]["points"])
        out += [
            f"**{p}** (fitted on {setting})",
            "",
            "| criterion | " + " | ".join(have) + " | mean |",
            "|---|" + "---:|" * (len(have) + 1),
        ]
        for n in crits:
            taus = [_kendall(cells[(p, t)]["points"][n], cells[(p, t)]["truth"]) for t in have]
            fin = [x for x in taus if math.isfinite(x)]
            out.append(
                f"| `{n}` | " + " | ".join(f2(x) for x in taus) + f" | {f2(sum(fin) / len(fin) if fin else float('nan'))} |"
            )
        out.append("")
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
    lf = [cells[(pooling, t)]["label_free"] for t in have]
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


def render(run: dict) -> str:
    from isotropy.selection import DEV_LEVEL, LABEL_FREE_RULE

    meta = run["meta"]
    settings, poolings, tasks = meta["settings"], meta["poolings"], meta["tasks"]
    load = meta["load_average"]
    out = [
        "## Results",
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
        f"Rules measured: label-free `auto` = `{LABEL_FREE_RULE['criterion']}`, raw unless a candidate beats raw in at least "
        f"{100 * LABEL_FREE_RULE['level']:.0f}% of 1000 bootstrap resamples of the 1000 sampled sentences, then "
        + ("the candidate that changes raw's similarities least" if LABEL_FREE_RULE["pick"] == "closest" else "the best score")
        + f"; few-label `auto` = raw unless a candidate beats raw's dev Spearman in at least {100 * DEV_LEVEL:.0f}% of 1000 "
        "bootstrap resamples of the pairs, then the best dev Spearman.",
        "",
        f"Full run: **{meta['wall_s'] / 60:.1f} min** wall time ({meta['encode_s']:.0f} s encoding and reading the vector "
        f"cache: {meta['cache_hits']} hits, {meta['cache_misses']} misses) on {meta['machine']}; 1-minute load average "
        f"{load[0]:.1f} at the start and {load[1]:.1f} at the end (2 cores: above 2, the times are upper bounds).",
        "",
        "### Targets",
        "",
        *targets(run, settings),
        "",
        "### The label-free criteria, each under the same rule",
        "",
        "Kendall tau between a criterion's score and the true Spearman across the candidates of one (task, pooling); "
        "then each criterion deciding alone under the label-free rule (raw unless 90% sure).",
        "",
        *criteria_table(run, settings),
        "",
    ]
    for s in settings:
        out += [f"### Kendall tau per task, fitted on {s}", "", *tau_tables(run, s, poolings, tasks)]
    out += ["### Every method, per pooling", ""]
    for s in settings:
        for p in poolings:
            table = pooling_table(run, s, p, tasks)
            if table:
                out += ["<details>", f"<summary>{p}, fitted on {s}</summary>", "", *table, "", "</details>", ""]
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
