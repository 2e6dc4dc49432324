"""The scores of the STS tables (layer 5): Spearman, ROC-AUC, thresholded accuracy.

Every figure is x 100, as the papers print them. :func:`cosine_rows` is
:mod:`isotropy._math`'s, re-exported here because the harness scores cosines.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._math import cosine_rows
from ..errors import IsotropyError

__all__ = [
    "cosine_rows",
    "spearman",
    "roc_auc",
    "best_threshold",
    "accuracy",
    "cross_fit_accuracy",
    "AGGREGATES",
    "check_aggregate",
    "aggregate_subsets",
]

# How a task made of several datasets (a SemEval year's files: STS-12..16) becomes one figure.
# Which paper uses which, read from their code (docs/RESULTS.md has the sentence with every source):
#   all   - princeton-nlp/SimCSE evaluation.py l.182 (its SentEval/senteval/sts.py l.97-104 concatenates),
#           kongds/Prompt-BERT evaluation.py l.401, SpokenNLP ditto/evaluation_ditto.py l.203; SBERT
#   wmean - facebookresearch/SentEval senteval/sts.py l.84-98 (weights = pairs per subset); reported by
#           BERT-whitening (bojone/BERT-whitening eng/eval.py l.110-116, "w-avg") and BERT-flow (SimCSE issue #4)
#   mean  - SentEval's plain average (same lines), printed beside wmean by SentEval and BERT-whitening
AGGREGATES: dict[str, str] = {
    "all": "the pairs of every subset pooled into one correlation (SBERT, SimCSE, PromptBERT, Ditto)",
    "mean": "unweighted mean of the per-subset correlations",
    "wmean": "mean of the per-subset correlations weighted by their pair counts (SentEval's weighted average; "
    "BERT-flow, BERT-whitening)",
}


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation x 100 (scipy's, ties averaged); NaN when either side is constant."""
    from scipy.stats import spearmanr

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic) * 100.0


def roc_auc(scores: Sequence[float], labels: Sequence[float]) -> float:
    """ROC-AUC x 100 by the rank-sum (Mann-Whitney) formula, ties counted half.

    Written with scipy's ``rankdata`` rather than scikit-learn's ``roc_auc_score``
    because scikit-learn is an optional dependency; the test suite checks both agree.
    """
    from scipy.stats import rankdata

    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels) > 0.5
    n_pos = int(labels.sum())
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    u = ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg)) * 100.0


def best_threshold(scores: Sequence[float], labels: Sequence[float]) -> float:
    """The cosine threshold (predict 1 when ``score >= threshold``) with the best accuracy."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels) > 0.5
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], labels[order]
    n = len(s)
    # threshold at position i: everything from i on is predicted 1
    pos_at_or_above = np.concatenate([np.cumsum(y[::-1])[::-1], [0]])
    neg_below = np.concatenate([[0], np.cumsum(~y)])
    correct = pos_at_or_above + neg_below
    # a threshold can only sit between two distinct scores (or beyond either end)
    valid = np.ones(n + 1, dtype=bool)
    valid[1:n] = s[1:] > s[:-1]
    i = int(np.flatnonzero(valid)[np.argmax(correct[valid])])
    if i == 0:
        return float(s[0]) if n else 0.0
    if i == n:
        return float(np.nextafter(s[-1], np.inf))
    return float((s[i - 1] + s[i]) / 2.0)


def accuracy(scores: Sequence[float], labels: Sequence[float], threshold: float) -> float:
    """Accuracy x 100 of ``score >= threshold`` against 0/1 labels."""
    pred = np.asarray(scores, dtype=np.float64) >= threshold
    return float(np.mean(pred == (np.asarray(labels) > 0.5))) * 100.0


def cross_fit_accuracy(scores: Sequence[float], labels: Sequence[float], seed: int = 0) -> tuple[float, list[float]]:
    """Two-fold cross-fitted accuracy x 100 for a task with a single split.

    The pairs are shuffled (fixed ``seed``) and halved; the threshold tuned on one
    half is applied to the other and vice versa, so no pair is scored with a
    threshold that saw it. Returns (accuracy over all pairs, the two thresholds).
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels)
    perm = np.random.default_rng(seed).permutation(len(scores))
    halves = [perm[: len(perm) // 2], perm[len(perm) // 2 :]]
    correct = 0
    thresholds = []
    for tune, test in (halves, halves[::-1]):
        t = best_threshold(scores[tune], labels[tune])
        thresholds.append(t)
        correct += int(np.sum((scores[test] >= t) == (labels[test] > 0.5)))
    return correct / max(len(scores), 1) * 100.0, thresholds


def check_aggregate(name: str) -> str:
    """``name`` when it is an aggregation setting; anything else is one clear error."""
    if not isinstance(name, str) or name not in AGGREGATES:
        raise IsotropyError(
            f"unknown aggregate {name!r}; choose all (one correlation over a year's pooled subsets), "
            f"mean (mean of the subset correlations) or wmean (their mean weighted by pair counts)"
        )
    return name


def aggregate_subsets(pooled: float, subsets: dict[str, float], counts: dict[str, int], how: str) -> float:
    """One figure for a task of several subsets: ``pooled`` (``all``), or the plain (``mean``) or
    pair-count weighted (``wmean``) mean of the per-subset figures, as SentEval computes them
    (``np.average(list_spr, weights=nsamples)``). A subset without a figure (NaN) makes it NaN."""
    check_aggregate(how)
    if how == "all" or not subsets:
        return float(pooled)
    vals = np.array([subsets[k] for k in subsets], dtype=np.float64)
    if how == "mean":
        return float(np.mean(vals))
    return float(np.average(vals, weights=np.array([counts[k] for k in subsets], dtype=np.float64)))
