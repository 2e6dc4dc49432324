"""Token-level calibrations: whitening fitted on a table of token vectors (layer 3).

A static model (GloVe, word2vec, model2vec, ...) embeds a sentence as the mean of its
tokens' rows in a table ``E`` (V x d). An affine map fitted on the rows of the table itself,
rather than on sentence vectors, folds into it exactly (``mean_t((E[t] - mu) W) =
(mean_t E[t] - mu) W``), so the calibrated model is the same size and speed as the raw one.

* **Uniform whitening** of the table: a plain :class:`~isotropy.transforms.whitening.Whitening`
  fitted on the rows, each token counted once.
* **Zipfian whitening** (Yokoi et al., NeurIPS 2024): the same, but the mean and covariance
  weight each token by its probability ``p(w)``: ``mu = sum_w p(w) E[w]``,
  ``Sigma = sum_w p(w) (E[w] - mu)(E[w] - mu)^T``, ``W = U Lambda^(-1/2)``. Frequent words,
  which dominate the sentence vectors, dominate the statistics, and rare (informative) words
  end up with large norms. ``p(w)`` comes from counts on a corpus or, for a vocabulary sorted
  by frequency, from Zipf's law ``p ∝ 1 / (rank + offset)`` (:func:`zipf_probabilities`).

Both are whitenings solved from weighted :class:`~isotropy.transforms.moments.Moments`, so they
save, load, export and fold like every other affine transform. The probabilities are rescaled
to sum to the number of rows before they weight the moments: the scale does not change the
whitened directions, and keeps ``covariance(ddof=1)`` meaningful.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._checks import check_matrix, check_weights
from ..errors import IsotropyError
from .moments import Moments
from .whitening import Whitening

__all__ = ["ZipfianWhitening", "zipf_probabilities", "fit_token_whitening", "fold_into_table", "ZIPF_OFFSET"]

# Mandelbrot's offset in p ∝ 1/(rank + offset): the classic fit of Zipf's law to word counts,
# chosen a priori (no STS label tuned it).
ZIPF_OFFSET = 2.7


def zipf_probabilities(n_tokens: int, offset: float = ZIPF_OFFSET) -> np.ndarray:
    """Probabilities of ``n_tokens`` tokens sorted by descending frequency: ``p ∝ 1 / (rank + offset)``,
    rank 1 for the most frequent; they sum to 1."""
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int | np.integer) or n_tokens < 1:
        raise IsotropyError(f"the number of tokens must be a positive integer, got {n_tokens!r}")
    offset = _check_offset(offset)
    p = 1.0 / (np.arange(1, int(n_tokens) + 1, dtype=np.float64) + offset)
    return p / p.sum()


def _check_offset(offset: Any) -> float:
    try:
        value = float(offset)
    except (TypeError, ValueError):
        raise IsotropyError(f"zipf_offset must be a number > -1, got {offset!r}") from None
    if not np.isfinite(value) or value <= -1:
        raise IsotropyError(f"zipf_offset must be a finite number > -1 (rank 1 needs 1 + offset > 0), got {offset!r}")
    return value


def _table_weights(probabilities: Any, n: int, name: str = "probabilities") -> np.ndarray:
    """Probabilities (or counts) of the ``n`` rows, rescaled to sum to ``n``."""
    p = check_weights(probabilities, n, f"{name} (the probabilities or counts of the table's rows)")
    total = p.sum()
    if not total > 0:
        raise IsotropyError(f"{name} are all 0: no token has any weight")
    return p * (n / total)


class ZipfianWhitening(Whitening):
    """Whitening of a token table with moments weighted by word probability (Yokoi et al., 2024).

    ``fit(table, sample_weight=p)`` with ``p`` the probabilities (or counts) of the rows; without
    ``sample_weight`` the rows are taken to be sorted by descending frequency and weighted by
    Zipf's law, ``p ∝ 1 / (rank + zipf_offset)``. ``partial_fit`` streams a table in chunks and
    then needs the weights of each chunk (counts, or probabilities on one scale). The other
    parameters are :class:`~isotropy.transforms.whitening.Whitening`'s (``n_components``,
    ``power``: soft whitening, ``shrinkage``, ``method``).
    """

    kind = "zipfian-whitening"

    def __init__(
        self,
        n_components: int | None = None,
        power: float = 1.0,
        shrinkage: float | str = 0.0,
        method: str = "pca",
        zipf_offset: float = ZIPF_OFFSET,
    ):
        super().__init__(n_components=n_components, power=power, shrinkage=shrinkage, method=method)
        self.zipf_offset = zipf_offset

    def _check_params(self, d: int | None) -> None:
        super()._check_params(d)
        _check_offset(self.zipf_offset)

    def _params_to_save(self) -> dict[str, Any]:
        return {**super()._params_to_save(), "zipf_offset": _check_offset(self.zipf_offset)}

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> ZipfianWhitening:
        """Fit on a whole table (V x d): ``sample_weight`` its rows' probabilities or counts, or None
        for Zipf's law over the row order (the most frequent token first)."""
        self._check_params(np.shape(X)[-1] if np.ndim(X) == 2 else None)
        table = check_matrix(X, "table")
        n = table.shape[0]
        if sample_weight is None:
            weights = zipf_probabilities(n, self.zipf_offset) * n if n else np.zeros(0)
        else:
            weights = _table_weights(sample_weight, n, "sample_weight")
        m = Moments().update(table, weights=weights, name="table")
        self._attach(m, self._solve(m))
        return self

    def partial_fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> ZipfianWhitening:
        if sample_weight is None:
            raise IsotropyError(
                "ZipfianWhitening.partial_fit needs sample_weight (each chunk's counts or probabilities); "
                "fit(table) weights a whole table by Zipf's law over its row order"
            )
        return super().partial_fit(X, sample_weight=sample_weight)

    def describe(self) -> str:
        base = super().describe()
        return base.replace("whitening", "Zipfian whitening", 1).rsplit(", fitted on", 1)[0] + (
            f", moments weighted by word probability (Zipf offset {float(self.zipf_offset):g} when by rank)"
        )


def fit_token_whitening(
    table: Any,
    probabilities: Any = None,
    *,
    weighting: str = "zipfian",
    n_components: int | None = None,
    power: float = 1.0,
    shrinkage: float | str = 0.0,
    zipf_offset: float = ZIPF_OFFSET,
) -> Whitening:
    """A whitening fitted on the rows of a token table (V x d), to fold into it (:func:`fold_into_table`).

    ``weighting="zipfian"``: moments weighted by ``probabilities`` (per row; counts are fine), or by
    Zipf's law over the row order when None (the table sorted by descending frequency).
    ``weighting="uniform"``: every row counts once (``probabilities`` must be None).
    """
    if weighting == "uniform":
        if probabilities is not None:
            raise IsotropyError("uniform whitening weights every token the same; drop probabilities or use weighting='zipfian'")
        return Whitening(n_components=n_components, power=power, shrinkage=shrinkage).fit(check_matrix(table, "table"))
    if weighting != "zipfian":
        raise IsotropyError(f"weighting must be 'zipfian' or 'uniform', got {weighting!r}")
    est = ZipfianWhitening(n_components=n_components, power=power, shrinkage=shrinkage, zipf_offset=zipf_offset)
    return est.fit(table, sample_weight=probabilities)


def fold_into_table(table: Any, transform: Any) -> np.ndarray:
    """The table whose mean pooling gives ``transform(mean pooling of table)``: each row mapped by
    the affine ``transform`` (any object with ``shift_kernel_()`` or ``affine_()``), float32.

    Exact for a plain mean of token rows (``mean_t(E[t] A + b) = mean_t(E[t]) A + b``); not for a
    normalised output or a pooling whose weights do not sum to 1.
    """
    E = check_matrix(table, "table")
    if hasattr(transform, "shift_kernel_"):
        shift, kernel = transform.shift_kernel_()
        out = (E - shift) @ kernel
    elif hasattr(transform, "affine_"):
        A, b = transform.affine_()
        out = E @ A + b
    else:
        raise IsotropyError(f"only an affine transform folds into a table, not a {type(transform).__name__}")
    return out.astype(np.float32)
