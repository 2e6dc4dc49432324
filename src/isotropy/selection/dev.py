"""Few-label mode: a handful of scored (or 0/1) pairs decide, with a do-no-harm rule.

Each candidate scores the dev pairs by cosine; the figure is Spearman x 100 against graded
scores, or ROC-AUC x 100 against 0/1 labels (the metrics ``isotropy eval`` reports; written
here with scipy because the selection sits below the evaluation layer). The pairs are
resampled with replacement (a paired bootstrap: every candidate is scored on the same
resamples), and a candidate *beats raw* with the share of resamples in which its figure is
higher than raw's. Raw is kept unless some candidate beats it in at least ``level`` (90 %)
of the resamples; among those that do, the best dev figure wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import IsotropyError
from .criteria import normalize, spearman_rows

__all__ = ["DevPairs", "check_dev_pairs", "MIN_DEV_PAIRS", "dev_statistics", "auc_rows"]

MIN_DEV_PAIRS = 20


@dataclass
class DevPairs:
    """Checked dev pairs: the sentences (when given as text) or the two vector matrices, and the gold column."""

    gold: np.ndarray
    binary: bool
    left: list[str] | np.ndarray
    right: list[str] | np.ndarray
    source: str

    @property
    def metric(self) -> str:
        return "auc" if self.binary else "spearman"

    def __len__(self) -> int:
        return len(self.gold)


def _gold(value: Any, source: str, row: int) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise IsotropyError(f"{source}: pair {row} has a gold score {value!r} that is not a number") from None
    if not np.isfinite(x):
        raise IsotropyError(f"{source}: pair {row} has a gold score that is not finite ({value!r})")
    return x


def check_dev_pairs(pairs: Any, source: str = "dev pairs") -> DevPairs:
    """Dev pairs as ``[(s1, s2, score), ...]`` (``Pair`` tuples included) or ``(A, B, scores)`` vector matrices.

    Refused, each with one line naming ``source``: fewer than 20 pairs, a constant gold column,
    and pairs whose two sentences are all identical (no candidate can tell them apart).
    """
    if isinstance(pairs, DevPairs):  # already checked
        return pairs
    if isinstance(pairs, tuple) and len(pairs) == 3 and all(hasattr(x, "__len__") for x in pairs) and np.ndim(pairs[0]) == 2:
        from .._checks import check_matrix

        A = check_matrix(pairs[0], f"{source} (left vectors)")
        B = check_matrix(pairs[1], f"{source} (right vectors)", expected_dim=A.shape[1])
        gold = np.array([_gold(g, source, i) for i, g in enumerate(pairs[2])])
        if not (len(A) == len(B) == len(gold)):
            raise IsotropyError(f"{source}: {len(A)} left vectors, {len(B)} right vectors and {len(gold)} gold scores differ")
        left, right = A, B
        identical = bool(np.all(A == B))
    else:
        try:
            rows = [tuple(p)[:3] for p in pairs]
        except TypeError:
            raise IsotropyError(f"{source}: expected (sentence1, sentence2, score) pairs, got {type(pairs).__name__}") from None
        if any(len(r) != 3 or not isinstance(r[0], str) or not isinstance(r[1], str) for r in rows):
            raise IsotropyError(f"{source}: every pair must be (sentence1, sentence2, score) with two strings")
        left, right = [r[0] for r in rows], [r[1] for r in rows]
        gold = np.array([_gold(r[2], source, i) for i, r in enumerate(rows)])
        identical = all(" ".join(r[0].split()) == " ".join(r[1].split()) for r in rows)
    n = len(gold)
    if n < MIN_DEV_PAIRS:
        raise IsotropyError(
            f"{source} has {n} pairs; the few-label mode needs at least {MIN_DEV_PAIRS} scored pairs (100 or more recommended)"
        )
    if np.ptp(gold) == 0:
        raise IsotropyError(
            f"{source}: every gold score is {gold[0]:g}, so no calibration can be ranked on it; give pairs with different scores"
        )
    if identical:
        raise IsotropyError(
            f"{source}: every pair compares a sentence with itself, so every calibration scores them alike; "
            "give pairs of different sentences"
        )
    binary = bool(np.isin(gold, (0.0, 1.0)).all())
    return DevPairs(gold, binary, left, right, source)


def auc_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """ROC-AUC of every row of ``scores`` (B x n) against 0/1 ``labels`` (B x n or n), ties counted half."""
    from scipy.stats import rankdata

    scores = np.atleast_2d(scores)
    labels = np.broadcast_to(labels, scores.shape) > 0.5
    ranks = rankdata(scores, axis=-1)
    n_pos = labels.sum(-1)
    n_neg = labels.shape[-1] - n_pos
    u = (ranks * labels).sum(-1) - n_pos * (n_pos + 1) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n_pos > 0) & (n_neg > 0), u / np.maximum(n_pos * n_neg, 1), np.nan)


def dev_statistics(
    left: np.ndarray, right: np.ndarray, dev: DevPairs, resamples: np.ndarray, gold_ranks: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """``(figure x 100 on all pairs, figures x 100 on each resample)`` for vectors already calibrated
    (``gold_ranks``: ``centred_ranks(dev.gold[resamples])``, shared by every candidate)."""
    cos = np.einsum("ij,ij->i", normalize(left), normalize(right))
    if dev.binary:
        point = float(auc_rows(cos[None], dev.gold)[0]) * 100.0
        boot = auc_rows(cos[resamples], dev.gold[resamples]) * 100.0
    else:
        point = float(spearman_rows(cos[None], dev.gold)[0]) * 100.0
        boot = spearman_rows(cos[resamples], dev.gold[resamples], gold_ranks) * 100.0
    return point, boot


def pairs_sentences(dev: DevPairs) -> Sequence[str]:
    """The distinct sentences of text dev pairs, in order (what the encoder encodes)."""
    return list(dict.fromkeys([*dev.left, *dev.right]))
