"""Label-free criteria: how good a calibration looks without a single gold score.

Each criterion scores one candidate from its *applied views* -- the candidate's transform
applied to a seeded sample of the corpus (``base``), to word-deleted copies of the same
sentences (``perturbed``, :mod:`.perturb`) and, for ``knn-stability``, the sample mapped by
the candidate fitted on each half of the corpus. A criterion returns per-sentence statistics
(``stats``, m x s) and a reduction of them to one number (higher is better) under weights
(``W``, B x m: how often each sentence is drawn in each of B resamples; all ones for the point
estimate), so the selection can bootstrap over sentences (paired: every candidate sees the same
resamples) and say how sure it is. A Spearman correlation under a resample is computed as the
weighted Pearson correlation of the full sample's ranks (the ranks are not recomputed per
resample): exact for the point estimate, a close and much cheaper approximation for
m = 1000 sentences.

* ``agreement`` -- a sentence should stay nearest to a lightly perturbed copy of itself: the
  mean reciprocal rank of each sentence's copy among the copies of all sampled sentences,
  by cosine.
* ``align-uniform`` -- Wang & Isola (ICML 2020), on L2-normalised vectors: alignment
  ``E ||f(x) - f(x')||^2`` over (sentence, copy) pairs plus ``lam x`` uniformity
  ``log E exp(-t ||f(x) - f(y)||^2)`` over random pairs; the score is minus that loss.
  Their code and paper use ``t = 2``, ``lam = 1`` (SsnL/align_uniform ``align_uniform/__init__.py``).
* ``graded-deletion`` -- a synthetic STS task: pairs (sentence, copy with a fraction q of its
  words deleted) for several q, and (sentence, a random other sentence); the gold score is
  ``-q`` (``-1`` for the random pair) and the criterion is the Spearman correlation of the
  cosines with it, pooled over sentences as STS scores are.
* ``knn-stability`` -- the candidate fitted on two halves of the corpus should give the same
  neighbourhoods: the mean Jaccard overlap of each sampled sentence's k nearest neighbours
  (cosine, within the sample) under the two fits. Raw vectors are fitted on nothing, so
  their overlap is 1.

Each criterion's own settings (deletion rate, t, lam, k) were tuned on the STS-B train split
only (``bench/auto.py --tune`` at commit 440b70e; docs/AUTO.md, 'What we tried').
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Views", "Applied", "Criterion", "CRITERIA", "criterion", "spearman_rows", "weighted_rank_correlation", "normalize"]


def normalize(Y: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(Y, axis=1, keepdims=True)
    return Y / np.maximum(norms, np.finfo(np.float64).tiny)


def _ranks(a: np.ndarray) -> np.ndarray:
    """Ranks (1-based) along the last axis, ties averaged, as scipy's ``rankdata`` gives them.

    Cosines rarely tie: one argsort then suffices (several times faster than ``rankdata`` on the
    bootstrap's thousands of short rows); any tie falls back to ``rankdata``."""
    from scipy.stats import rankdata

    a = np.asarray(a, dtype=np.float64)
    order = np.argsort(a, axis=-1, kind="stable")
    ordered = np.take_along_axis(a, order, axis=-1)
    if a.shape[-1] > 1 and np.any(ordered[..., 1:] == ordered[..., :-1]):
        return rankdata(a, axis=-1)
    ranks = np.empty_like(a)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(1, a.shape[-1] + 1, dtype=np.float64), a.shape), axis=-1)
    return ranks


def centred_ranks(a: np.ndarray) -> np.ndarray:
    """Ranks along the last axis (ties averaged), minus their row mean."""
    r = _ranks(np.atleast_2d(a))
    return r - r.mean(axis=-1, keepdims=True)


def spearman_rows(scores: np.ndarray, gold: np.ndarray, gold_ranks: np.ndarray | None = None) -> np.ndarray:
    """Spearman correlation of every row of ``scores`` (B x n) with ``gold`` (n, or B x n); NaN for a constant row.
    ``gold_ranks``: :func:`centred_ranks` of ``gold`` broadcast to B x n, when the caller reuses them."""
    rs = centred_ranks(scores)
    rg = centred_ranks(np.broadcast_to(gold, rs.shape)) if gold_ranks is None else gold_ranks
    den = np.sqrt((rs * rs).sum(-1) * (rg * rg).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rs * rg).sum(-1) / np.where(den > 0, den, 1.0), np.nan)


@dataclass
class Views:
    """What every candidate is applied to: raw vectors of the sampled sentences and of their copies."""

    base: np.ndarray  # m x d
    perturbed: dict[float, np.ndarray] = field(default_factory=dict)  # rate -> m x d
    partners: np.ndarray | None = None  # m x r: random other sentences of the sample (row indices)


@dataclass
class Applied:
    """One candidate's transform applied to the views (``halves``: the sample under the fits on each half)."""

    base: np.ndarray
    perturbed: dict[float, np.ndarray]
    halves: tuple[np.ndarray, np.ndarray] | None = None


@dataclass(frozen=True)
class Criterion:
    """A label-free criterion: per-sentence ``stats`` and the ``reduce`` of any resample to a score (higher is better)."""

    name: str
    stats: Callable[[Applied, Views, dict[str, Any]], np.ndarray]
    reduce: Callable[[np.ndarray, np.ndarray, dict[str, Any]], np.ndarray]  # (m x s stats, B x m weights) -> (B,)
    defaults: dict[str, Any]
    needs_copies: bool = True  # needs the encoder (perturbed copies)
    needs_halves: bool = False
    about: str = ""

    def rates(self, settings: dict[str, Any]) -> list[float]:
        """The deletion rates whose copies this criterion reads."""
        if not self.needs_copies:
            return []
        return sorted({float(r) for r in settings.get("rates", [settings.get("rate")]) if r is not None})


# ---------------------------------------------------------------- agreement (self-retrieval)


def _agreement_stats(a: Applied, v: Views, s: dict[str, Any]) -> np.ndarray:
    q = normalize(a.base)
    keys = normalize(a.perturbed[float(s["rate"])])
    sims = q @ keys.T
    own = np.diag(sims)[:, None]
    rank = 1.0 + (sims > own).sum(axis=1)
    return (1.0 / rank)[:, None]


def _wmean(W: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Weighted means of ``x`` (m) under each row of ``W`` (B x m)."""
    return (W @ x) / W.sum(axis=1)


def _mean_first(stats: np.ndarray, W: np.ndarray, s: dict[str, Any]) -> np.ndarray:
    return _wmean(W, stats[:, 0])


# ---------------------------------------------------------------- alignment and uniformity


def _align_uniform_stats(a: Applied, v: Views, s: dict[str, Any]) -> np.ndarray:
    u = normalize(a.base)
    up = normalize(a.perturbed[float(s["rate"])])
    align = ((u - up) ** 2).sum(axis=1)
    # squared distance of unit vectors: 2 - 2 cos
    d2 = 2.0 - 2.0 * np.einsum("id,ird->ir", u, u[v.partners])
    unif = np.exp(-float(s["t"]) * d2).mean(axis=1)
    return np.stack([align, unif], axis=1)


def _align_uniform_reduce(stats: np.ndarray, W: np.ndarray, s: dict[str, Any]) -> np.ndarray:
    align = _wmean(W, stats[:, 0])
    unif = np.log(np.maximum(_wmean(W, stats[:, 1]), np.finfo(np.float64).tiny))
    return -(align + float(s["lam"]) * unif)


# ---------------------------------------------------------------- graded deletion (a synthetic STS task)


def _graded_stats(a: Applied, v: Views, s: dict[str, Any]) -> np.ndarray:
    u = normalize(a.base)
    cols = [np.einsum("id,id->i", u, normalize(a.perturbed[float(r)])) for r in sorted(s["rates"])]
    if s.get("random", True):
        cols.append(np.einsum("id,id->i", u, u[v.partners[:, 0]]))
    return np.stack(cols, axis=1)


def _graded_gold(s: dict[str, Any]) -> np.ndarray:
    gold = [-float(r) for r in sorted(s["rates"])]
    if s.get("random", True):
        gold.append(-1.0)
    return np.array(gold)


def weighted_rank_correlation(scores: np.ndarray, gold: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Spearman of ``scores`` (n) with ``gold`` (n) under item weights ``W`` (B x n): the weighted Pearson
    correlation of the two rank vectors (ties averaged). All-ones weights give scipy's Spearman exactly."""
    from scipy.stats import rankdata

    rs, rg = rankdata(scores), rankdata(gold)
    tot = W.sum(axis=1)
    ms, mg = (W @ rs) / tot, (W @ rg) / tot
    cov = (W @ (rs * rg)) / tot - ms * mg
    vs = (W @ (rs * rs)) / tot - ms * ms
    vg = (W @ (rg * rg)) / tot - mg * mg
    den = np.sqrt(np.maximum(vs, 0) * np.maximum(vg, 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, cov / np.where(den > 0, den, 1.0), np.nan)


def _graded_reduce(stats: np.ndarray, W: np.ndarray, s: dict[str, Any]) -> np.ndarray:
    m, k = stats.shape
    gold = np.tile(_graded_gold(s), m)
    return weighted_rank_correlation(stats.reshape(m * k), gold, np.repeat(W, k, axis=1))


# ---------------------------------------------------------------- stability of neighbourhoods across half fits


def _knn(Y: np.ndarray, k: int) -> np.ndarray:
    u = normalize(Y)
    sims = u @ u.T
    np.fill_diagonal(sims, -np.inf)
    return np.argpartition(-sims, k, axis=1)[:, :k]


def _stability_stats(a: Applied, v: Views, s: dict[str, Any]) -> np.ndarray:
    k = int(min(s["k"], len(a.base) - 2))
    if a.halves is None:  # raw: fitted on nothing, the same vectors under both halves
        return np.ones((len(a.base), 1))
    na, nb = _knn(a.halves[0], k), _knn(a.halves[1], k)
    m = len(na)
    member = np.zeros((m, m), dtype=bool)
    member[np.arange(m)[:, None], na] = True
    inter = member[np.arange(m)[:, None], nb].sum(axis=1).astype(np.float64)
    return (inter / (2 * k - inter))[:, None]


CRITERIA: dict[str, Criterion] = {
    "agreement": Criterion(
        "agreement",
        _agreement_stats,
        _mean_first,
        {"rate": 0.35},
        about="mean reciprocal rank of each sentence's word-deleted copy among the copies of the sample",
    ),
    "align-uniform": Criterion(
        "align-uniform",
        _align_uniform_stats,
        _align_uniform_reduce,
        {"rate": 0.35, "t": 2.0, "lam": 0.25},
        about="minus Wang & Isola's alignment (sentence vs its copy) + lam x uniformity (random pairs) loss",
    ),
    "graded-deletion": Criterion(
        "graded-deletion",
        _graded_stats,
        _graded_reduce,
        {"rates": [0.2, 0.5], "random": True},
        about="Spearman of cosines with the deleted fraction over (sentence, copy) and random pairs",
    ),
    "knn-stability": Criterion(
        "knn-stability",
        _stability_stats,
        _mean_first,
        {"k": 20},
        needs_copies=False,
        needs_halves=True,
        about="mean Jaccard overlap of the k nearest neighbours under the fits on two halves of the corpus",
    ),
}


def criterion(name: str) -> Criterion:
    from ..errors import IsotropyError

    if name not in CRITERIA:
        raise IsotropyError(f"unknown criterion {name!r}; the criteria are {', '.join(CRITERIA)}")
    return CRITERIA[name]
