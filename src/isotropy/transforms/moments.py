"""Exact, mergeable, streaming first and second moments of row vectors (layer 3).

Every linear calibration (centering, all-but-the-top, common-component removal,
whitening with any k, power and shrinkage) is a function of the row count, the mean and
the covariance of the fitting vectors. :class:`Moments` accumulates them in float64,
in bounded O(d^2) memory, from chunks of any size, and merges two accumulators exactly
(Chan et al.'s pairwise update): it is the unit a streaming fit updates, a distributed
fit merges (``to_arrays`` / ``from_arrays`` move it between processes) and a saved
transform keeps. Two extra moments make the Ledoit-Wolf shrinkage exact too (see
:meth:`Moments.ledoit_wolf_shrinkage`).

Rows may carry frequency weights (``update(X, weights=w)``): a row of weight 3 counts as the
same row three times, so ``n`` is then the total weight (an int while every weight is an integer,
a float otherwise) and ``covariance(ddof=1)`` is ``scatter / (n - 1)``, as for repeated rows. This
is what the token-level calibrations need: moments of a vocabulary's table weighted by each
token's probability (``transforms/token_whitening.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._checks import check_matrix, check_weights
from ..errors import IsotropyError

__all__ = ["Moments", "parse_shrinkage", "BLOCK_BYTES"]

# float64 working block of Moments.update: bounds memory whatever the chunk; larger blocks keep
# dsyrk efficient (measured 1.55x faster than 8 MiB at d=768, docs/BENCHMARKS.md section whitening)
BLOCK_BYTES = 64 * 2**20


def _shift(n: int, s: np.ndarray | None, S: np.ndarray, T: np.ndarray, Q: float, delta: np.ndarray):
    """Re-express moments about a point moved by ``delta`` (a' = a + delta), exactly.

    Moments of deviations ``a_k`` (k = 1..n) with ``s = sum a`` (None for 0),
    ``S = sum a a^T``, ``T = sum ||a||^2 a`` and ``Q = sum ||a||^4``. Expanding
    ``||a + δ||^2 = A + 2B + C`` with ``A = ||a||^2``, ``B = a.δ``, ``C = ||δ||^2``.
    """
    C = float(delta @ delta)
    Sd = S @ delta
    trS = float(np.trace(S))
    sd = 0.0 if s is None else float(s @ delta)
    T2 = T + 2.0 * Sd + (trS + n * C + 2.0 * sd) * delta
    if s is not None:
        T2 = T2 + C * s
    Q2 = Q + 4.0 * float(delta @ Sd) + n * C * C + 4.0 * float(delta @ T) + 2.0 * C * trS + 4.0 * C * sd
    S2 = S
    if s is not None:
        S2 = S + np.outer(s, delta) + np.outer(delta, s)
    S2 = S2 + n * np.outer(delta, delta)
    return S2, T2, Q2


class Moments:
    """Exact, mergeable, streaming mean and covariance of row vectors (float64).

    Holds ``n`` (rows), ``mean`` (d), the centred scatter ``sum (x - mean)(x - mean)^T``
    (d x d) and, for the Ledoit-Wolf shrinkage, ``third = sum ||x - mean||^2 (x - mean)``
    (d) and ``fourth = sum ||x - mean||^4``. Memory is O(d^2) whatever the number
    of rows. ``update`` takes chunks of any size; ``merge`` combines two
    accumulators (Chan, Golub & LeVeque's pairwise formula, never the cancelling
    ``E[xx^T] - mu mu^T``), so any split into chunks and any merge order give
    ``numpy.cov``'s result to rounding (well within 1e-9 relative).

    Within a chunk, rows are centred on the chunk's float64 mean and the scatter is
    accumulated block by block (at most ``BLOCK_BYTES`` of float64 at a time) with
    BLAS ``dsyrk``, then corrected exactly for the residual of that mean.
    """

    def __init__(self, dim: int | None = None):
        self.dim: int | None = None if dim is None else int(dim)
        self.n = 0
        self.version = 0  # bumped on every change; lets owners cache what they derive
        self._mean = self._scatter = self._third = None
        self._fourth = 0.0
        if self.dim is not None:
            self._init(self.dim)

    def _init(self, d: int) -> None:
        if d < 1:
            raise IsotropyError("vectors need at least 1 dimension")
        self.dim = d
        self._mean = np.zeros(d)
        self._scatter = np.zeros((d, d))
        self._third = np.zeros(d)
        self._fourth = 0.0

    # ---------------------------------------------------------------- accumulate

    def update(self, X: Any, *, weights: Any = None, name: str = "X", row_offset: int | None = None) -> Moments:
        """Add the rows of ``X`` (n x d), each with its frequency weight (``weights``: n
        non-negative finite numbers; None: 1 each). On any error the statistics are left untouched.

        ``name`` and ``row_offset`` shape error messages: a bad row is reported as
        ``row_offset + i`` (default: the number of rows seen before this chunk).
        """
        offset = int(self.n) if row_offset is None else int(row_offset)
        X = self._check(X, name, offset)
        n, d = X.shape
        w = None if weights is None else check_weights(weights, n, f"the weights of {name}", offset)
        if w is not None and np.all(w == 1):
            w = None  # unit weights: the unweighted path, so the result is the same bit for bit
        if n == 0:
            return self
        if w is None:
            self._absorb(n, *self._chunk_stats(X, name, offset))
            return self
        total = float(w.sum())
        if total == 0:
            return self  # rows of weight 0 add nothing
        stats = self._chunk_stats(X, name, offset, w)
        integral = bool(np.all(w == np.round(w))) and isinstance(self.n, int)
        self._absorb(int(round(total)) if integral else total, *stats)
        return self

    def _check(self, X: Any, name: str, offset: int) -> np.ndarray:
        arr = X if isinstance(X, np.ndarray) else None
        if arr is None or arr.dtype.kind != "f" or arr.ndim != 2:
            # Lists, integers, 1-D rows...: the shared validator converts to float64
            # (and checks finiteness, which _chunk_stats would do anyway).
            arr = check_matrix(X, name, expected_dim=self.dim, row_offset=offset)
        if self.dim is not None and arr.shape[1] != self.dim:
            raise IsotropyError(
                f"{name} has {arr.shape[1]} dimensions but {self.dim} were expected (the width of the first chunk)"
            )
        if arr.shape[1] < 1:
            raise IsotropyError(f"{name} has no columns")
        return arr

    @staticmethod
    def _chunk_stats(X: np.ndarray, name: str, offset: int, w: np.ndarray | None = None):
        """``(mean, scatter, third, fourth)`` of the rows, each counted ``w`` times (None: once)."""
        from scipy.linalg.blas import dsyrk

        n, d = X.shape
        ref = X.mean(axis=0, dtype=np.float64) if w is None else (w @ X) / w.sum()
        if not np.isfinite(ref).all():
            # Any NaN/inf makes the float64 column sums non-finite; find the first such row.
            for start in range(0, n, 4096):
                bad = ~np.isfinite(X[start : start + 4096]).all(axis=1)
                if bad.any():
                    row = offset + start + int(np.flatnonzero(bad)[0])
                    raise IsotropyError(f"{name} has a NaN or infinite value in row {row} (0-based)")
            raise IsotropyError(f"{name} has values too large to sum in float64 (overflow)")
        rows = max(1, min(n, BLOCK_BYTES // (8 * d)))
        buf = np.empty((rows, d))
        # Fortran order so dsyrk accumulates in place (beta=1, overwrite_c) without copies;
        # numpy's `b.T @ b` would allocate a d x d result per block and need an extra add.
        S = np.zeros((d, d), order="F")
        s = np.zeros(d)
        T = np.zeros(d)
        Q = 0.0
        for start in range(0, n, rows):
            m = min(rows, n - start)
            b = buf[:m]
            np.subtract(X[start : start + m], ref, out=b)
            r = np.einsum("ij,ij->i", b, b)
            if w is None:
                # b.T is F-contiguous (d x m): dsyrk computes b.T @ b into S's upper triangle.
                S = dsyrk(1.0, b.T, beta=1.0, c=S, trans=0, lower=0, overwrite_c=1)
                s += b.sum(axis=0)
                T += r @ b
                Q += float(r @ r)
                continue
            wb = w[start : start + m]
            s += wb @ b
            T += (wb * r) @ b
            Q += float(wb @ (r * r))
            np.multiply(b, np.sqrt(wb)[:, None], out=b)  # sum w b b^T = (sqrt(w) b)^T (sqrt(w) b)
            S = dsyrk(1.0, b.T, beta=1.0, c=S, trans=0, lower=0, overwrite_c=1)
        upper = np.triu(S)
        S = upper + np.triu(upper, 1).T
        if not (np.isfinite(S).all() and np.isfinite(T).all() and math.isfinite(Q)):
            raise IsotropyError(f"{name} has values too large: its covariance overflows float64")
        # Moments were taken about `ref`; move them to the chunk's exact mean (ref + s/n).
        total = n if w is None else float(w.sum())
        delta = -s / total
        S, T, Q = _shift(total, s, S, T, Q, delta)
        return ref - delta, S, T, Q

    def _absorb(self, nb: float, mb: np.ndarray, Sb: np.ndarray, Tb: np.ndarray, Qb: float) -> None:
        """Chan-merge the statistics of ``nb`` rows (about their own mean) into self."""
        if self.dim is None:
            self._init(mb.shape[0])
        na = self.n
        if na == 0:
            mean, S, T, Q = mb.copy(), Sb.copy(), Tb.copy(), float(Qb)
        else:
            n = na + nb
            delta = mb - self._mean
            mean = self._mean + delta * (nb / n)
            Sa, Ta, Qa = _shift(na, None, self._scatter, self._third, self._fourth, self._mean - mean)
            Sb2, Tb2, Qb2 = _shift(nb, None, Sb, Tb, Qb, mb - mean)
            # Sa + Sb2 is algebraically Sa + Sb + na nb / n δδ^T (Chan's formula).
            S, T, Q = Sa + Sb2, Ta + Tb2, Qa + Qb2
            S = 0.5 * (S + S.T)
        # all computed: now commit (nothing below can fail)
        self.n, self._mean, self._scatter, self._third, self._fourth = na + nb, mean, S, T, Q
        self.version += 1

    def merge(self, other: Moments) -> Moments:
        """Add the statistics of ``other`` (rows seen elsewhere, e.g. another shard) to self."""
        if not isinstance(other, Moments):
            raise IsotropyError(f"can only merge Moments with Moments, not {type(other).__name__}")
        if other.n == 0:
            return self
        if self.dim is not None and other.dim != self.dim:
            raise IsotropyError(f"cannot merge statistics of {other.dim}-dimensional vectors into {self.dim}-dimensional ones")
        self._absorb(other.n, other._mean, other._scatter, other._third, other._fourth)
        return self

    def copy(self) -> Moments:
        return Moments.from_arrays(self.to_arrays()) if self.dim is not None else Moments()

    # ---------------------------------------------------------------- results

    def _need(self, rows: int) -> None:
        if self.n < rows:
            raise IsotropyError(f"at least {rows} rows in total are needed, got {self.n}")

    @property
    def mean(self) -> np.ndarray:
        self._need(1)
        return self._mean.copy()

    @property
    def scatter(self) -> np.ndarray:
        """Centred sum of squares ``sum (x - mean)(x - mean)^T``."""
        self._need(1)
        return self._scatter.copy()

    def covariance(self, ddof: int = 1) -> np.ndarray:
        """``scatter / (n - ddof)``; ddof=1 matches ``numpy.cov``."""
        self._need(ddof + 1)
        return self._scatter / (self.n - ddof)

    def ledoit_wolf_shrinkage(self) -> float:
        """Ledoit-Wolf shrinkage intensity of the rows seen, as scikit-learn computes it.

        Same formula as ``sklearn.covariance.ledoit_wolf_shrinkage(X)`` (centred on
        the mean, ddof=0), evaluated from the streamed moments instead of the rows.
        """
        self._need(1)
        n, d = self.n, self.dim
        if d == 1:
            return 0.0
        S = self._scatter
        diag_trace = float(np.trace(S)) / n  # trace of the ddof=0 covariance
        mu = diag_trace / d
        delta_ = float(np.sum(S * S)) / n**2  # ||emp_cov||_F^2
        beta_ = self._fourth  # sum_k ||x_k - mean||^4
        beta = (beta_ / n - delta_) / (d * n)
        delta = (delta_ - 2.0 * mu * diag_trace + d * mu**2) / d
        beta = min(beta, delta)
        return 0.0 if beta == 0 else float(beta / delta)

    # ---------------------------------------------------------------- (de)serialise

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays (safetensors-friendly) that :meth:`from_arrays` turns back into equal statistics."""
        if self.dim is None:
            raise IsotropyError("these statistics have seen no rows yet")
        return {
            # an int count (isotropy 0.1's layout), or a float total of frequency weights
            "n": np.array([self.n], dtype=np.int64 if isinstance(self.n, int) else np.float64),
            "mean": self._mean.copy(),
            "scatter": self._scatter.copy(),
            "third": self._third.copy(),
            "fourth": np.array([self._fourth], dtype=np.float64),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Moments:
        try:
            n_arr = np.asarray(arrays["n"]).reshape(-1)
            n = int(n_arr[0]) if n_arr.dtype.kind in "iu" else float(n_arr[0])
            mean = np.array(arrays["mean"], dtype=np.float64)
            scatter = np.array(arrays["scatter"], dtype=np.float64)
            third = np.array(arrays["third"], dtype=np.float64)
            fourth = float(np.asarray(arrays["fourth"]).reshape(-1)[0])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise IsotropyError(f"incomplete or malformed moment arrays: {exc!r}") from None
        d = mean.shape[0] if mean.ndim == 1 else -1
        if d < 1 or scatter.shape != (d, d) or third.shape != (d,) or not n >= 0 or not math.isfinite(n):
            raise IsotropyError(
                f"inconsistent moment arrays: mean {mean.shape}, scatter {scatter.shape}, third {third.shape}, n {n}"
            )
        m = cls(d)
        m.n, m._mean, m._scatter, m._third, m._fourth = n, mean, scatter, third, fourth
        return m

    def __repr__(self) -> str:
        return f"Moments(dim={self.dim}, n={self.n})"


# --------------------------------------------------------------------------- the transform


def parse_shrinkage(value: Any) -> float | str:
    """``"auto"`` or a float in [0, 1] (strings from the command line included)."""
    if isinstance(value, str):
        if value.strip().lower() == "auto":
            return "auto"
        try:
            value = float(value)
        except ValueError:
            raise IsotropyError(f"shrinkage must be a number in [0, 1] or 'auto', got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise IsotropyError(f"shrinkage must be a number in [0, 1] or 'auto', got {value!r}")
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise IsotropyError(f"shrinkage must be in [0, 1] or 'auto', got {value}")
    return value
