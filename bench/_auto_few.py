"""The few-label rule of bench/auto.py (issue #34): its test and level read off the STS-B TRAIN split, held out on the zoo.

Few-label ``auto`` keeps the incumbent (the label-free rule's choice for the encoder's kind) unless a challenger
passes a test on 1000 paired bootstrap resamples of the dev pairs (:func:`isotropy.selection.dev.dev_decide`).
The rules compared (:data:`VARIANTS`): each challenger on its own at a level (the rule before issue #34), Holm's
step-down and the studentized max-statistic across the challengers (family-wise: many challengers no longer make a
false switch likely), each with or without a lower bar for raw alone (do no harm when the incumbent is not raw).

``tune_few`` (bench/_auto_few_tune.py): every zoo entry fitted on the STS-B TRAIN split's sentences (as ``tune_zoo``); its train pairs split by
genre (captions, news, forum), each genre's pairs halved by a seeded permutation (a dev half and a truth half). Per
genre two settings: ``same`` (dev pairs drawn from the genre's dev half) and ``shifted`` (drawn from the other genres'
dev halves: what a task without its own train split gets in the zoo, where its dev pairs come from other tasks);
the truth is Spearman x 100 on the genre's truth half. ``tuned_dev_rule`` reads the rule off that table: the fewest
tuning cells with fewer than 19 of 20 draws at >= raw - 0.5, then the best mean gain over raw (within 0.1: a tie),
then the rule before issue #34, then the grid's order. No label of the 7 test tasks is read.
"""

from __future__ import annotations

import numpy as np

HARM, DRAWS_OK, DEV_PAIRS = 0.5, 19, 100
TESTS = ("each", "holm", "max-t")
LEVELS = (0.8, 0.9, 0.95, 0.975, 0.99)
RAW_LEVELS = (None, 0.5, 0.7)
VARIANTS = [{"test": t, "level": lv, "raw_level": r} for r in RAW_LEVELS for t in TESTS for lv in LEVELS]
# Ties are broken by the rule before issue #34 (each challenger alone at 90%) first, then the grid's order
ORDER = sorted(VARIANTS, key=lambda v: v != {"test": "each", "level": 0.9, "raw_level": None})
GAIN_TIE = 0.1  # Spearman points of mean gain over raw that the tuning draws cannot separate


def packed(choices: list[str]) -> str:
    """A variant's choices over the draws as one string (the JSON holds 45 variants x 20 draws per cell)."""
    return ",".join(choices)


def unpacked(choices: str | list[str]) -> list[str]:
    return choices.split(",") if isinstance(choices, str) else list(choices)


def name(v: dict) -> str:
    """A rule variant in a few characters: ``test@level`` (+ ``raw@level`` when raw has its own bar)."""
    s = f"{v['test']}@{v['level']:g}"
    return s + (f" + raw@{v['raw_level']:g}" if v.get("raw_level") is not None else "")


def decisions(sel, dev, incumbent: str) -> tuple[str, dict[str, str]]:
    """``(the product's choice, {variant: choice})`` for one draw of dev pairs, the dev figures scored once."""
    from isotropy.selection.dev import dev_decide

    points, boots = sel.dev_scores(dev)
    return dev_decide(points, boots, incumbent)[0], {name(v): dev_decide(points, boots, incumbent, v)[0] for v in VARIANTS}


def score(cells: dict, variant: str) -> dict:
    """A variant on a set of cells: cells with fewer than 19 of the draws at >= raw - 0.5, the mean gain over raw,
    and the mean share of the oracle's gain kept where it gains >= 3 (the draws' mean per cell)."""
    bad, gains, keep = [], [], []
    for k, c in cells.items():
        choices = c["few_label"] if variant == "product" else unpacked(c["variants"][variant])
        if not choices:
            continue
        t = c["truth"]
        g = [t[x] - t["raw"] for x in choices]
        if sum(v >= -HARM for v in g) < DRAWS_OK * len(choices) / 20:
            bad.append(k)
        gains.append(float(np.mean(g)))
        best = max(t.values()) - t["raw"]
        if best >= 3:
            keep.append(float(np.mean([v / best for v in g])))
    return {
        "bad": bad,
        "gain": float(np.mean(gains)),
        "keep": float(np.mean(keep)) if keep else float("nan"),
        "big": len(keep),
    }


def tuned_dev_rule(tune: dict) -> dict:
    """The rule read off the tuning cells (module docstring): ``{"test", "level", "raw_level"}`` and its scores. Among
    the variants with the fewest failing cells, those within :data:`GAIN_TIE` of the best mean gain tie (20 draws
    cannot tell them apart); the first of them in :data:`ORDER` is the rule."""
    scores = {name(v): score(tune["cells"], name(v)) for v in VARIANTS}
    fewest = min(len(s["bad"]) for s in scores.values())
    top = max(s["gain"] for s in scores.values() if len(s["bad"]) == fewest)
    pick = next(v for v in ORDER if len(scores[name(v)]["bad"]) == fewest and scores[name(v)]["gain"] >= top - GAIN_TIE)
    return {**pick, "scores": scores[name(pick)]}


def same_as_library(rule: dict) -> bool:
    from isotropy.selection.dev import DEV_RULE

    return all(DEV_RULE[k] == rule[k] for k in ("test", "level", "raw_level"))


def check_library(tune: dict) -> dict:
    """The tuned rule; exits when the library's ``DEV_RULE`` is another (the product's rule is never re-derived here)."""
    rule = tuned_dev_rule(tune)
    if not same_as_library(rule):
        from isotropy.selection.dev import DEV_RULE

        raise SystemExit(
            f"DEV_RULE = {DEV_RULE} but the STS-B train split gives {name(rule)}: update src/isotropy/selection/dev.py"
        )
    return rule


def render(tune: dict, zoo: dict | None) -> str:
    """The 'Few-label rule' section: every variant on the tuning cells and, where stored, on the held-out zoo cells."""
    from isotropy.selection.dev import DEV_RULE

    rule = tuned_dev_rule(tune)
    held = zoo is not None and all("few_variants" in c for c in zoo["cells"].values())
    zc = {k: {**c, "variants": c["few_variants"]} for k, c in zoo["cells"].items()} if held else {}
    n_t = len(tune["cells"])
    lines = [
        "## Few-label rule: the test and its level, read off the STS-B train split (issue #34)",
        "",
        "The few-label decision (`DEV_RULE` and `dev_decide` in src/isotropy/selection/dev.py, "
        f"{'which is' if same_as_library(rule) else 'which is NOT'} the rule read off the tuning cells below by "
        "`tuned_dev_rule` in bench/_auto_few.py): the incumbent (the label-free rule's choice for the encoder's kind) is "
        "kept unless a challenger passes the test on 1000 paired bootstrap resamples of the 100 dev pairs; then the best "
        "dev Spearman among those that pass. Tests: `each` -- a challenger alone beats the incumbent in `level` of the "
        "resamples (the rule before issue #34); `holm` -- Holm's step-down over the challengers' bootstrap p-values, "
        "family-wise; `max-t` -- a simultaneous (studentized max-statistic) bootstrap bound on every challenger's gain, "
        "family-wise; `+ raw@x` -- raw alone also replaces a calibrating incumbent when it beats it in x of the "
        f"resamples. Chosen: **{name(rule)}**.",
        "",
        f"Tuning ({n_t} cells, {tune['draws']} draws each; no label of a test task): the 9 zoo entries fitted on the "
        "STS-B train split's sentences; its train pairs by genre (captions, news, forum), each genre's pairs halved "
        "(seeded): dev pairs drawn from the genre's own dev half (`same`) or from the other genres' dev halves "
        "(`shifted`: what a task without a train split gets in the zoo), scored on the genre's other half. The rule: "
        "fewest tuning cells with fewer than 19 of 20 draws at >= raw - 0.5, then the best mean gain over raw (within "
        f"{GAIN_TIE:g}: a tie), then the rule before issue #34 (`each@0.9`), then the table's order. 'held out' "
        "columns: the same variant on the zoo's 63 cells (leave one task out, the draws of the section above), never "
        "used to choose.",
        "",
        "| rule | tuning: cells < 19/20 | tuning: mean gain | tuning: gain kept (oracle >= 3) "
        + ("| held out: cells < 19/20 | held out: mean gain | held out: gain kept (oracle >= 3) |" if held else "|"),
        "|---|---:|---:|---:|" + ("---:|---:|---:|" if held else ""),
    ]
    for v in VARIANTS:
        n = name(v)
        s = score(tune["cells"], n)
        bold = n == name(rule)
        row = f"| {'**' + n + '**' if bold else n} | {len(s['bad'])}/{n_t} | {s['gain']:+.2f} | {100 * s['keep']:.0f}% |"
        if held:
            h = score(zc, n)
            row += f" {len(h['bad'])}/{len(zc)} | {h['gain']:+.2f} | {100 * h['keep']:.0f}% |"
        lines.append(row)
    s = rule["scores"]
    lines += [
        "",
        f"Tuning cells the chosen rule still fails ({len(s['bad'])}): "
        + (", ".join(k.replace("|", " ") for k in s["bad"]) or "none")
        + f". Library: `DEV_RULE` = test {DEV_RULE['test']}, level {DEV_RULE['level']:g}, raw_level "
        f"{DEV_RULE['raw_level']}. Tuning run {tune['wall_s'] / 60:.1f} min.",
        "",
        genre_section(tune),
        losing_signals(zoo) if zoo is not None else "",
    ]
    return "\n".join(lines)


def genre_section(tune: dict) -> str:
    """What the tuning cells say for a pooling-aware label-free rule: each entry's label-free calibration (by kind)
    over raw on each STS-B train genre's truth half, and per kind and pooling the calibrations that gained >= the
    rule's margin on every (entry, genre) -- the strictest reading of the STS-B train split (no test label)."""
    from isotropy.selection.signals import SIGNAL_RULE

    truth: dict = {}
    for k, c in tune["cells"].items():
        entry, genre, setting = k.split("|")
        if setting == "same":
            truth.setdefault(entry, {})[genre] = c["truth"]
    genres = list(dict.fromkeys(g for t in truth.values() for g in t))
    kind = {
        e: "static" if c["incumbent"] != "raw" else "transformer"
        for e, c in ((k.split("|")[0], c) for k, c in tune["cells"].items())
    }
    margin = SIGNAL_RULE["margin"]
    lines = [
        "### A pooling-aware label-free rule? The STS-B train split by genre",
        "",
        "Each zoo entry's label-free calibration (its kind's, `SIGNAL_RULE`) minus raw on each genre's truth half of the "
        "STS-B train split (the tuning cells above; Spearman x 100), and the best calibration there:",
        "",
        "| entry | label-free | " + " | ".join(genres) + " |",
        "|---|---|" + "---:|" * len(genres),
    ]
    for e, by in truth.items():
        act = SIGNAL_RULE["act"][kind[e]]
        cells = []
        for g in genres:
            t = by[g]
            best = max(t, key=t.get)
            cells.append(f"{t[act] - t['raw']:+.2f} (best {best} {t[best] - t['raw']:+.2f})")
        lines.append(f"| {e} | {act} | " + " | ".join(cells) + " |")
    lines += ["", f"Calibrations that gained >= {margin:g} on every genre of every entry of a group (none: raw):", ""]
    groups = {
        "static, every pooling": [e for e in truth if kind[e] == "static"],
        "static, SIF only": [e for e in truth if kind[e] == "static" and e.endswith("/sif")],
        "static, mean only": [e for e in truth if kind[e] == "static" and e.endswith("/mean")],
        "transformer": [e for e in truth if kind[e] == "transformer"],
    }
    for gname, members in groups.items():
        if not members:
            continue
        shared = set.intersection(*(set(truth[e][g]) for e in members for g in genres)) - {"raw"}
        worst = {n: min(truth[e][g][n] - truth[e][g]["raw"] for e in members for g in genres) for n in shared}
        safe = sorted((n for n in shared if worst[n] >= margin), key=lambda n: -worst[n])
        top = max(worst, key=worst.get)
        lines.append(
            f"- {gname} ({len(members)} entries x {len(genres)} genres): "
            + (", ".join(f"{n} (worst {worst[n]:+.2f})" for n in safe) if safe else "none")
            + f"; best worst case {top} ({worst[top]:+.2f})."
        )
    return "\n".join(lines) + "\n"


def losing_signals(zoo: dict) -> str:
    """Each held-out cell where label-free auto falls below raw - 0.5: its fit corpus's signals beside the range over the
    same entry's other cells (where the same calibration was applied). Shown, never tuned on: a signal at an extreme
    of seven cells is no threshold one could read off the STS-B train split."""
    from isotropy.selection.signals import SIGNAL_NAMES

    cells = zoo["cells"]
    out = []
    for k, c in cells.items():
        t = c["truth"]
        if t[c["label_free"]] - t["raw"] >= -HARM:
            continue
        entry = k.split("|")[0]
        rest = [o for j, o in cells.items() if j.split("|")[0] == entry and j != k]
        gains = [o["truth"][o["label_free"]] - o["truth"]["raw"] for o in rest]
        parts = []
        for s in SIGNAL_NAMES:
            vals = [o["signals"][s] for o in rest]
            v = c["signals"][s]
            where = "below all" if v < min(vals) else "above all" if v > max(vals) else "inside"
            parts.append(f"`{s}` {v:.4f} ({where}: {min(vals):.4f} to {max(vals):.4f})")
        out.append(
            f"- {k.replace('|', ' on ')} ({c['label_free']} {t[c['label_free']] - t['raw']:+.2f}; the entry's other "
            f"{len(rest)} cells {min(gains):+.2f} to {max(gains):+.2f}): " + "; ".join(parts) + "."
        )
    if not out:
        return ""
    return (
        "The held-out cells where label-free auto falls below raw - 0.5, their fit corpus's signals (`others`: the six "
        "other tasks' sentences, so the test task's own sentences are not among them) beside the range over the same "
        "entry's other cells:\n\n" + "\n".join(out) + "\n"
    )
