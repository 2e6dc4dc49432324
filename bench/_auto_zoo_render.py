"""Markdown of the model-zoo sections of docs/AUTO.md (from bench/results/auto.json: ``zoo``, ``zoo_tune``)."""

from __future__ import annotations

import numpy as np
from _auto_zoo import POOLING_CHOICES

HARM, BIG, KEEP_LF, KEEP_FEW, DRAWS_OK = 0.5, 3.0, 0.7, 0.75, 19  # KEEP_FEW: issue #34's 75%
POOLING_DEFAULT = {k: v[0] for k, v in POOLING_CHOICES.items()}


def _f(x: float) -> str:
    return f"{x:+.2f}"


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _entries(cells: dict) -> list[str]:
    return list(dict.fromkeys(k.split("|")[0] for k in cells))


def _share(got: float, best: float) -> float:
    return got / best if best > 0 else 1.0


def _cell(k: str) -> str:
    """A cell key ``entry|task`` as table text (no pipe)."""
    return k.replace("|", " on ")


def _loss_note(c: dict) -> str:
    t = c["truth"]
    best = max(t, key=t.get)
    if best == "raw":
        return f"every calibration loses there, best {max((v for m, v in t.items() if m != 'raw')) - t['raw']:+.2f}"
    return f"the oracle was {best}, {t[best] - t['raw']:+.2f}"


def _why_low(c: dict) -> str:
    """Why label-free auto kept less than half of the oracle's gain in a cell."""
    t = c["truth"]
    best = max(t, key=t.get)
    if not c["fired"]:
        return f"{c['kind']}: the rule keeps raw for this kind; the oracle was {best}"
    return f"acted with {c['label_free']} ({_f(t[c['label_free']] - t['raw'])}); the oracle was {best}"


def targets(zoo: dict) -> tuple[list[str], dict]:
    cells = zoo["cells"]
    rows, stat = [], {}
    lf_gain = {k: c["truth"][c["label_free"]] - c["truth"]["raw"] for k, c in cells.items()}
    oracle = {k: max(c["truth"].values()) - c["truth"]["raw"] for k, c in cells.items()}
    worst = min(lf_gain, key=lf_gain.get)
    losers = [k for k, g in lf_gain.items() if g < -HARM]
    rows.append(
        f"| label-free auto never below raw - 0.5 on any cell | worst {_f(lf_gain[worst])} ({_cell(worst)}); "
        f"{len(losers)} of {len(cells)} cells below: "
        f"{', '.join(f'{_cell(k)} {_f(lf_gain[k])} ({_loss_note(cells[k])})' for k in losers) or 'none'} "
        f"| {_met(not losers)} |"
    )
    big = [k for k in cells if oracle[k] >= BIG]
    keep = {k: _share(lf_gain[k], oracle[k]) for k in big}
    mean_keep = float(np.mean(list(keep.values()))) if big else 1.0
    low = [k for k in big if keep[k] < 0.5]
    reasons = "; ".join(f"{_cell(k)}: {100 * keep[k]:.0f}% of {_f(oracle[k])} ({_why_low(cells[k])})" for k in low)
    rows.append(
        f"| where the oracle gains >= 3 ({len(big)} cells), label-free auto keeps >= 70% of its gain on average | "
        f"{100 * mean_keep:.0f}%; below half: {reasons or 'none'} | {_met(mean_keep >= KEEP_LF)} |"
    )
    few_ok = {
        k: sum(c["truth"][x] - c["truth"]["raw"] >= -HARM for x in c["few_label"]) for k, c in cells.items() if c["few_label"]
    }
    bad = [k for k, v in few_ok.items() if v < DRAWS_OK]
    bad_text = ", ".join(f"{_cell(k)} {few_ok[k]}/{len(cells[k]['few_label'])}" for k in bad) or "none"
    rows.append(
        f"| few-label auto >= raw - 0.5 in >= 19 of 20 draws per cell | fewest {min(few_ok.values())}/20; "
        f"{len(bad)} of {len(few_ok)} cells below 19: {bad_text} "
        f"| {_met(not bad)} |"
    )
    fk = {
        k: float(np.mean([_share(cells[k]["truth"][x] - cells[k]["truth"]["raw"], oracle[k]) for x in cells[k]["few_label"]]))
        for k in big
        if cells[k]["few_label"]
    }
    mean_fk = float(np.mean(list(fk.values()))) if fk else 1.0
    rows.append(
        f"| few-label auto keeps >= 75% of the oracle's gain on average where it gains >= 3 | {100 * mean_fk:.0f}% "
        f"(mean over the draws and the {len(fk)} cells) | {_met(mean_fk >= KEEP_FEW)} |"
    )
    avg = {m: float(np.mean([c["truth"].get(m, np.nan) for c in cells.values()])) for m in ("raw", "whitening")}
    avg["lf"] = float(np.mean([c["truth"][c["label_free"]] for c in cells.values()]))
    avg["few"] = float(np.mean([np.mean([c["truth"][x] for x in c["few_label"]]) for c in cells.values() if c["few_label"]]))
    rows.append(
        f"| full whitening beaten on the zoo average | label-free auto {avg['lf']:.2f}, few-label auto {avg['few']:.2f}, "
        f"whitening {avg['whitening']:.2f}, raw {avg['raw']:.2f} | {_met(avg['lf'] > avg['whitening'])} |"
    )
    stat.update(avg=avg, losers=losers, mean_keep=mean_keep, bad=bad, mean_fk=mean_fk)
    return rows, stat


def signal_table(zoo: dict, rule: dict) -> list[str]:
    """Each vector signal deciding alone (its STS-B-train threshold; act = the static branch's calibration), and the rule."""
    cells = zoo["cells"]
    o = {k: max(c["truth"].values()) - c["truth"]["raw"] for k, c in cells.items()}
    big = [k for k in cells if o[k] >= BIG]
    out = [
        "| deciding | cells losing > 0.5 | big gains kept >= 50% | mean gain over raw |",
        "|---|---:|---:|---:|",
    ]
    rows = [
        (f"`{n}` {op} {t:g} alone", {k: c["alone"][n] for k, c in cells.items()}) for n, (op, t) in rule["thresholds"].items()
    ]
    rows.append(("**the rule (encoder kind)**", {k: c["label_free"] for k, c in cells.items()}))
    for name, choice in rows:
        g = {k: c["truth"][choice[k]] - c["truth"]["raw"] for k, c in cells.items()}
        kept = sum(g[k] >= 0.5 * o[k] for k in big)
        out.append(
            f"| {name} | {sum(v < -HARM for v in g.values())}/{len(g)} | {kept}/{len(big)} | {_f(float(np.mean(list(g.values()))))} |"
        )
    return out


def _few_words() -> str:
    from _auto_few import name

    from isotropy.selection.dev import DEV_RULE

    return f"`{name(DEV_RULE)}`"


def _same_rule(rule: dict) -> bool:
    """Whether the product's SIGNAL_RULE (and POOLING_RULE) is the rule read off the tuning table."""
    from _auto_zoo import library_pooling  # noqa: I001

    from isotropy.selection.signals import POOLING_RULE, SIGNAL_RULE

    lib = {k: list(v) for k, v in SIGNAL_RULE["thresholds"].items()}
    same = SIGNAL_RULE["act"] == rule["act"] and lib == {k: list(v) for k, v in rule["thresholds"].items()}
    if "pooling" in rule:
        same = same and POOLING_RULE["pooling"] == {k: library_pooling(k, p) for k, p in rule["pooling"]["choice"].items()}
    return same


def pooling_table(zoo: dict) -> list[str]:
    """Per zoo model, leave one task out: every pooling of the zoo raw and under its kind's label-free calibration, and
    auto (the pooling rule's pooling + the label-free calibration), with the average over the tasks."""
    cells, rule = zoo["cells"], zoo["rule"]
    tasks = list(dict.fromkeys(k.split("|")[1] for k in cells))
    models = list(dict.fromkeys(k.split("/")[0] for k in cells))
    out = []
    head = "| model | pooling, calibration | " + " | ".join(tasks) + " | avg |"
    out += [head, "|---|---|" + "---:|" * (len(tasks) + 1)]
    summary = []
    for m in models:
        mine = {k.split("|")[0].split("/")[1]: None for k in cells if k.startswith(m + "/")}
        kind = next(c["kind"] for k, c in cells.items() if k.startswith(m + "/"))
        cal = rule["act"][kind]
        pick = rule["pooling"]["choice"][kind] if "pooling" in rule else None

        def row(name: str, vals: list[float], bold: bool = False, m: str = m) -> str:
            v = " | ".join(f"{x:.2f}" for x in vals)
            return f"| {m} | {'**' + name + '**' if bold else name} | {v} | {np.mean(vals):.2f} |"

        for p in mine:
            for cname in dict.fromkeys(["raw", cal]):
                out.append(row(f"{p}, {cname}", [cells[f"{m}/{p}|{t}"]["truth"][cname] for t in tasks]))
        if pick in mine:
            auto = [cells[f"{m}/{pick}|{t}"]["truth"][cal] for t in tasks]
            out.append(row(f"auto: {pick}, {cal}", auto, bold=True))
            alts = [p for p in POOLING_CHOICES[kind] if p in mine and p != pick]
            diffs = [
                f"{p}, {cal} {_f(float(np.mean([cells[f'{m}/{p}|{t}']['truth'][cal] for t in tasks]) - np.mean(auto)))}"
                for p in alts
            ]
            summary.append(f"{m} {', '.join(diffs)}" if diffs else f"{m}: no other pooling offered")
    return out, summary


def pooling_section(zoo: dict) -> list[str]:
    rule = zoo["rule"].get("pooling")
    if rule is None:
        return []
    table, summary = pooling_table(zoo)
    ch = rule["choice"]
    return [
        "### Pooling: the rule read off the STS-B train split, held out task by task",
        "",
        f"The pooling rule (`POOLING_RULE` in src/isotropy/selection/signals.py, read off the 'Zoo tuning' table by "
        f"`tuned_pooling` in bench/_auto_zoo.py): per kind, the default pooling ({POOLING_DEFAULT['static']} on a static "
        f"table, the model's own on a transformer: {POOLING_DEFAULT['transformer']} for the default model) is kept unless "
        f"another, each under the kind's label-free calibration, scored >= {rule['margin']:g} higher on every zoo model of "
        f"that kind on the STS-B train split. Chosen: **{ch['static']}** on a static table, **{ch['transformer']}** on "
        "a transformer. Below, each zoo model's poolings raw and under the kind's label-free calibration, and auto "
        "(the rule's pooling + calibration), fitted on `others`, Spearman x 100 on each held-out task. "
        "The other pooling offered, minus auto (both under the kind's calibration), on the task average: "
        f"{'; '.join(summary)}. A positive figure is a gain the rule leaves on the table (it keeps the default "
        "pooling unless the other gains on every zoo model of the kind on the STS-B train split).",
        "",
        *table,
        "",
    ]


def render(zoo: dict, tune: dict | None, pool: dict | None = None) -> str:
    from _auto_zoo_pool import section

    from isotropy.selection.signals import SIGNAL_DOCS

    rows, stat = targets(zoo)
    rule = zoo["rule"]
    act = rule["act"]
    meta = zoo["meta"]
    draws = meta.get("draws", 20)
    reduced = f" (REDUCED: {draws} draws per cell instead of the issue's 20)" if draws != 20 else ""
    partial = " PARTIAL RUN: only the entries listed below finished." if meta.get("partial") else ""
    lines = [
        "## Model zoo: label-free `auto` by the encoder's kind (issue #24)",
        "",
        f"Label-free `auto` = **{act['static']} on a static table (GloVe, model2vec, `StaticEmbedding`, word vectors), "
        f"raw on a transformer, raw for vectors given without their encoder**. Read off the STS-B TRAIN split by "
        f"`tuned_rule` in bench/_auto_zoo.py (section 'Zoo tuning' below): a kind acts only with the calibration of best "
        f"mean gain among those that gained >= {rule['margin']:g} on every zoo model of that kind; no signal of the "
        "vectors alone separated gains from losses there, so none decides (each is compared below). The product's "
        f"`SIGNAL_RULE` in src/isotropy/selection/signals.py {'is this rule' if _same_rule(rule) else 'is NOT this rule'}; "
        "no label of the 7 test tasks tuned anything. Few-label `auto` starts from that choice: the incumbent is the "
        f"label-free rule's calibration for the encoder's kind ({act['static']} on a static table, {act['transformer']} on "
        "a transformer), and another candidate (raw included) replaces it only if it passes the few-label rule "
        f"(`DEV_RULE`, section 'Few-label rule' below: {_few_words()}) on 1000 paired bootstrap resamples of 100 pairs "
        f"(then the best dev Spearman among those that do); {draws} draws per cell{reduced}. Leave one task out, "
        "calibrations fitted on `others` (the six other tasks' sentences minus any the test task holds); Spearman x 100, "
        f"all pairs of a task pooled; {len(_entries(zoo['cells']))} zoo entries x {len(meta['tasks'])} tasks.{partial}",
        "",
        "### Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        *rows,
        "",
        "### The rule and each signal deciding alone, on the held-out cells",
        "",
        f"Each signal alone: act ({act['static']}) when it passes its best STS-B-train threshold, else raw.",
        "",
        *signal_table(zoo, rule),
        "",
        "The agreement / align-uniform / graded-deletion / knn-stability criteria of the candidate-scoring rule were not "
        "rerun on the zoo (they encode perturbed copies of 1000 sentences per cell); on the default model's poolings "
        "they are compared in the sections below.",
        "",
        *pooling_section(zoo),
        *section(pool),
        "Signals: " + "; ".join(f"`{k}`: {v}" for k, v in SIGNAL_DOCS.items()) + ".",
        "",
        f"Run: {len(zoo['cells'])} cells in {meta.get('wall_s', float('nan')) / 60:.1f} min"
        + (
            f" (`--few-only`: the signals of {meta['signals_reused']} cells taken from the run before, their truths "
            "recomputed and checked equal; the few-label draws rerun)"
            if meta.get("signals_reused")
            else ""
        )
        + (
            f"; 1-minute load average {meta['load_average'][0]:.1f} at the start, {meta['load_average'][1]:.1f} at the end "
            "(2 cores)"
            if "load_average" in meta
            else "; load average not recorded by this run"
        )
        + "; vectors from the library's "
        "encoders (`Encoder('glove-6b-50d')`, `Encoder(model2vec folder)`, the default model at max_length 64).",
        "",
    ]
    lines.append(
        "Every cell (each entry x task: raw, the rule's choice, few-label auto, the oracle, the signals) is in "
        "`bench/results/auto.json` (`zoo`)."
    )
    return "\n".join(lines)


def render_tuning(tune: dict) -> str:
    from isotropy.selection.signals import SIGNAL_NAMES

    ent = tune["entries"]
    head = ["entry", "kind", *SIGNAL_NAMES, "whitening", "whitening-shrunk", "soft-0.5", "spectemp", "best (gain)"]
    out = [
        "## Zoo tuning (STS-B train split only)",
        "",
        "Every zoo entry fitted on the STS-B train split's sentences; the gains are Spearman x 100 over raw on its "
        "5749 train pairs. The signal rule's thresholds are read off this table; no test label is used.",
        "",
        "| " + " | ".join(head) + " |",
        "|---|" + "---:|" * (len(head) - 1),
    ]
    for e, r in ent.items():
        tr = r["truth"]
        best = max(tr, key=tr.get)

        def g(m: str, tr: dict = tr) -> str:
            return _f(tr[m] - tr["raw"]) if m in tr else "-"

        sig = [f"{r['signals'][s]:.3f}" for s in SIGNAL_NAMES]
        out.append(
            f"| {e} | {r.get('kind', '-')} | "
            + " | ".join(sig)
            + f" | {g('whitening')} | {g('whitening-shrunk')} | {g('soft-0.5')} | {g('spectemp')} | {best} ({g(best)}) |"
        )
    from _auto_zoo import tuned_rule

    rule = tuned_rule(tune)
    helps = {e: r["truth"]["whitening"] - r["truth"]["raw"] >= 0.5 for e, r in ent.items()}
    out += [
        "",
        "Each signal alone (act when it passes; the best threshold and direction on this table for telling "
        '"full whitening gains >= 0.5" from "it does not"):',
        "",
        "| signal | threshold | entries right | wrong on |",
        "|---|---|---:|---|",
    ]
    for n, (op, t) in rule["thresholds"].items():
        wrong = [e for e, r in ent.items() if _passes(r["signals"][n], op, t) != helps[e]]
        out.append(
            f"| `{n}` | {op} {t:g} | {rule['quality'][n][0]}/{len(ent)} | "
            + ", ".join(f"{e} (whitening {_f(ent[e]['truth']['whitening'] - ent[e]['truth']['raw'])})" for e in wrong)
            + " |"
        )
    out += [
        "",
        "The rule read off this table (a kind acts only with a calibration that gained >= "
        f"{rule['margin']:g} on every entry of that kind; the best mean gain among those):",
        "",
    ]
    for kind in ("static", "transformer"):
        name, worst = rule["best_worst_case"][kind]
        out.append(f"- {kind}: **{rule['act'][kind]}** -- {rule['expected'][kind]}; best worst case {name} ({_f(worst)}).")
    pr = rule["pooling"]
    out += [
        "",
        f"The pooling rule read off this table (per kind, the default pooling is kept unless another, under the kind's "
        f"calibration above, scores >= {pr['margin']:g} higher on every zoo model of that kind; the best mean gain among "
        "those; gains below are over the default pooling under the same calibration):",
        "",
    ]
    for kind in ("static", "transformer"):
        out.append(f"- {kind}: **{pr['choice'][kind]}** -- {pr['expected'][kind]}.")
    out.append(f"\nRun time {tune['wall_s'] / 60:.1f} min.")
    return "\n".join(out)


def _passes(v: float, op: str, t: float) -> bool:
    return bool(np.isfinite(v)) and (v > t if op == ">" else v < t)
