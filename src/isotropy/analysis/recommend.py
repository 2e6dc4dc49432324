"""The report's recommendation: which calibration to use on this corpus, from ``--method auto``'s label-free selection.

:func:`recommendation` runs :func:`isotropy.selection.select_calibration` on the report's
vectors (the encoder encodes word-deleted copies of a sample of the sentences for the
label-free criteria) and words the outcome as one paragraph with the probability that the choice beats raw, and with
what the held-out measurements (docs/AUTO.md) say about trusting a label-free choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import IsotropyError

__all__ = ["recommendation", "recommendation_markdown", "HELD_OUT"]

# What docs/AUTO.md measured (bench/auto.py), said beside every label-free recommendation.
HELD_OUT = (
    "on held-out STS tasks no label-free criterion of the candidates' scores both avoided losing more than 0.5 points "
    "to the raw vectors and kept half of the gains there were (docs/AUTO.md), so auto does not act on it. To choose "
    "for real, give 100 or more scored pairs of your own, or a retrieval folder with qrels "
    "(`isotropy calibrate CORPUS -o MODEL --method auto --dev pairs.tsv`: the label-free choice for the encoder's kind "
    "unless another candidate beats it in 90% of bootstrap resamples) and check the result on other held-out pairs "
    "(`--eval`): there too, dev pairs from other tasks than the one tested sometimes chose a calibration that lost "
    "more than 0.5 points."
)


def recommendation(
    vectors: np.ndarray,
    sentences: Sequence[str],
    encoder: Any,
    *,
    seed: int = 0,
    selection: Any = None,
    show_progress: bool | None = False,
) -> dict[str, Any]:
    """``{"choice", "p_beats_raw", "mode", "criterion", "paragraph", "selection"}`` for ``vectors`` (one row per sentence);
    ``{"choice": None, "paragraph": why not}`` when the corpus is too small to compare the candidates.
    ``selection``: one already made (the demo's)."""
    from ..selection import select_calibration

    if selection is None:
        try:
            selection = select_calibration(
                np.asarray(vectors, dtype=np.float64),
                list(sentences),
                encoder=encoder,
                seed=seed,
                source="the corpus",
                show_progress=show_progress,
            )
        except IsotropyError as exc:
            return {"choice": None, "paragraph": f"No recommendation: {exc}."}
    sel = selection
    n = len([c for c in sel.candidates if not c.note.startswith("skipped")])
    text = (
        f"`auto` ({sel.mode}) compared {n} candidate calibrations on {sel.settings.get('corpus_rows', len(vectors)):,} "
        "sentences of this corpus. "
    )
    rivals = [c for c in sel.candidates if c.name != "raw" and c.beats_raw is not None]
    if sel.signals:
        text += (
            f"Recommendation: **{sel.choice}**"
            + (
                " (keep the model's vectors as they are)"
                if sel.choice == "raw"
                else f" (`isotropy calibrate CORPUS -o MODEL --method {sel.choice}`)"
            )
            + f". Rule: {sel.rule}. What fired: {sel.fired}. Expected effect: {sel.expected}."
        )
    elif sel.rule.startswith("keep raw"):
        best = max(rivals, key=lambda c: c.beats_raw, default=None)
        text += "Recommendation: **keep the model's vectors as they are** (no calibration)."
        if best is not None:
            text += (
                f" By `{sel.criterion}` the most promising candidate is {best.name}, which beats raw in "
                f"{100 * best.beats_raw:.0f}% of the bootstrap resamples, but "
            )
        text += HELD_OUT if best is not None else " " + HELD_OUT[0].upper() + HELD_OUT[1:]
    elif sel.choice == "raw":
        text += (
            "Recommendation: **keep the model's vectors as they are** (no calibration): no candidate beat them with the "
            "required bootstrap probability."
        )
    else:
        text += (
            f"Recommendation: **{sel.choice}**, which beat the raw vectors in {100 * (sel.p_beats_raw or 0.0):.0f}% of the bootstrap "
            f"resamples (`isotropy calibrate CORPUS -o MODEL --method {sel.choice}`)."
        )
    return {
        "choice": sel.choice,
        "p_beats_raw": sel.p_beats_raw,
        "mode": sel.mode,
        "criterion": sel.criterion,
        "paragraph": text,
        "selection": sel.to_dict(),
    }


def recommendation_markdown(rec: dict[str, Any] | None) -> list[str]:
    """The report.md section: the paragraph, then the evidence table."""
    if not rec:
        return []
    out = ["## Recommendation", "", rec["paragraph"], ""]
    if rec.get("selection"):
        from ..selection import Selection

        out += [
            "<details><summary>The evidence</summary>",
            "",
            Selection.from_dict(rec["selection"]).markdown(),
            "",
            "</details>",
            "",
        ]
    return out
