"""The few-label rule of bench/auto.py (issue #34): its test and level read off the STS-B TRAIN split, held out on the zoo.

Few-label ``auto`` keeps the incumbent (the label-free rule's choice for the encoder's kind) unless a challenger
passes a test on 1000 paired bootstrap resamples of the dev pairs (:func:`isotropy.selection.dev.dev_decide`).
The rules compared (:data:`VARIANTS`): each challenger on its own at a level (the rule before issue #34), Holm's
step-down and the studentized max-statistic across the challengers (family-wise: many challengers no longer make a
false switch likely), each with or without a lower bar for raw alone (do no harm when the incumbent is not raw).

The tuning (``bench/auto.py --tune-few`` at commit b31d6d7, its cells kept in bench/results/auto.json): every zoo entry fitted on the STS-B TRAIN split's sentences (as ``tune_zoo``); its train pairs split by
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
