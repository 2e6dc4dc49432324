"""The draws and views that the selection's evidence is computed on (layer 4.5).

A seeded sample of the corpus's distinct sentences (:func:`_sample`), random partners for each
(:func:`_partners`) and word-deleted copies encoded by the same encoder: the :class:`~.criteria.Views`
that the label-free criteria read (:func:`_views`); seeded bootstrap resamples (:func:`_resamples`)
and every candidate applied as the affine map it is (:func:`_apply`). :mod:`.select` scores the
candidates on them and decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import IsotropyError
from .criteria import Views
from .perturb import perturbed_copies

__all__: list[str] = []  # the selection's own helpers: select_calibration and Selector are the API

PARTNERS = 10  # random other sentences per sampled sentence (uniformity, random pairs)


def _encode(encoder: Any, sentences: Sequence[str], cache: Any, show_progress: bool | None) -> np.ndarray:
    if cache is not None:
        from ..encoders.cache import encode_cached

        pooling = encoder.pooling
        return np.asarray(encode_cached(encoder, sentences, [pooling], cache, show_progress)[pooling], dtype=np.float64)
    return np.asarray(encoder.encode(list(sentences), show_progress=show_progress), dtype=np.float64)


def _sample(sentences: Sequence[str] | None, n_rows: int, size: int, seed: int) -> np.ndarray:
    """Row indices of a seeded sample of distinct sentences (rows, when there are no sentences)."""
    if sentences is None:
        rows = np.arange(n_rows)
    else:
        first: dict[str, int] = {}
        for i, s in enumerate(sentences):
            first.setdefault(s, i)
        rows = np.fromiter(first.values(), dtype=np.int64)
    if len(rows) > size:
        rows = np.sort(np.random.default_rng([seed, 2]).choice(rows, size=size, replace=False))
    return rows


def _partners(m: int, r: int, seed: int) -> np.ndarray:
    """``m x r`` random indices of other rows (never the row itself)."""
    rng = np.random.default_rng([seed, 3])
    p = rng.integers(0, m - 1, size=(m, r))
    return p + (p >= np.arange(m)[:, None])


def _resamples(n: int, size: int, seed: int, salt: int) -> np.ndarray:
    return np.random.default_rng([seed, salt]).integers(0, n, size=(size, n))


def _apply(t: Any, X: np.ndarray) -> np.ndarray:
    """``t`` applied as ``X @ A + b`` (every candidate is affine; skipping the per-call input checks of
    ``transform`` matters for the thousands of small products of a bootstrap); raw: X itself."""
    if t is None:
        return X
    A, b = t.affine_()
    return np.asarray(X, dtype=np.float64) @ A + b


def _views(
    encoder: Any,
    X: np.ndarray,
    sentences: Sequence[str] | None,
    rates: Sequence[float],
    seed: int,
    size: int,
    cache: Any,
    sp: Any,
) -> Views:
    rows = _sample(sentences, len(X), size, seed)
    if len(rows) < 4:
        raise IsotropyError(f"the corpus has {len(rows)} distinct sentences; the label-free criteria need at least 4")
    views = Views(X[rows], partners=_partners(len(rows), PARTNERS, seed))
    if rates:
        if encoder is None or sentences is None:
            raise IsotropyError(
                "the label-free selection perturbs sentences and encodes the copies: give the encoder and the corpus "
                "sentences (select_calibration(encoder, sentences)), or dev pairs for the few-label mode"
            )
        base = [sentences[i] for i in rows]
        for r in rates:
            views.perturbed[float(r)] = _encode(encoder, perturbed_copies(base, r, seed), cache, sp)
    return views
