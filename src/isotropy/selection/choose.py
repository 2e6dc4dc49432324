"""Compare, then fit the choice: the one path of every feature that offers ``--method auto`` on a corpus.

``isotropy calibrate --method auto`` compares the candidates on a seeded sample of its corpus and
fits the choice again on the whole corpus; ``isotropy index build --method auto`` compares on the
whole corpus it indexes. Both call :func:`choose` on the sentences they compared on and their
vectors, and :func:`unfitted_choice` for the estimator to fit on more rows than the comparison saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .candidates import parse_candidate
from .result import Selection
from .select import select_calibration

__all__ = ["choose", "unfitted_choice"]


def choose(
    encoder: Any,
    sentences: Sequence[str],
    X: Any,
    *,
    source: str,
    candidates: Any = None,
    dev_pairs: Any = None,
    dev_source: str = "the dev pairs",
    seed: int = 0,
    show_progress: bool | None = False,
    task: str | None = None,
    evidence: bool = False,
) -> Selection:
    """:func:`~.select.select_calibration` on ``X`` (the vectors of ``sentences``, row for row).

    ``encoder`` encodes the word-deleted copies the label-free criteria read (and the dev pairs).
    The callers say an empty corpus in their own words before they encode anything. ``task``: the rule tuned for
    ``"similarity"`` (default) or ``"search"``; ``evidence``: also the label-free criteria (slow; shown, never deciding).
    """
    more = {} if dev_pairs is not None else {"evidence": evidence}
    return select_calibration(
        np.asarray(X, dtype=np.float64),
        list(sentences),
        encoder=encoder,
        candidates=candidates,
        dev_pairs=dev_pairs,
        source=source,
        dev_source=dev_source,
        seed=seed,
        show_progress=show_progress,
        task=task,
        **more,
    )


def unfitted_choice(selection: Selection) -> Any | None:
    """A new, unfitted estimator of the chosen calibration (None: the choice is to keep the vectors raw)."""
    if selection.choice == "raw":
        return None
    from ..transforms import transform_class

    cand = parse_candidate(selection.choice)
    return transform_class(cand.kind)(**dict(cand.params))
