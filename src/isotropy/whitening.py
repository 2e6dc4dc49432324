"""BERT-whitening (Su et al. 2021): a linear transform that makes sentence vectors isotropic.

``y = (x - mu) W`` with ``W = U Λ^(-power/2)`` from the eigendecomposition
``Σ = U Λ U^T`` of the covariance of the fitting vectors, keeping the first ``k``
columns of ``W`` (PCA followed by scaling). ``method="zca"`` rotates back,
``W = U Λ^(-power/2) U^T``, so coordinates stay aligned with the original axes.

Two classes:

* :class:`Moments` -- the sufficient statistics (row count, mean, centred scatter
  matrix, plus two small extra moments for the Ledoit-Wolf estimate), accumulated
  in float64, in bounded O(d^2) memory, from chunks of any size, and mergeable
  exactly (Chan et al.'s pairwise update). It is the unit a distributed fit
  merges: ``to_arrays`` / ``from_arrays`` move it between processes.
* :class:`Whitening` -- the scikit-learn style transformer built on it.

Decisions (documented here once):

* **ddof = 1.** The covariance is ``scatter / (n - 1)`` like ``numpy.cov`` and the
  reference BERT-whitening code (``np.cov(vecs.T)``). It only scales the whitened
  output by ``sqrt((n - 1) / n)``; cosines are unaffected. At least 2 rows are needed.
* **Shrinkage.** ``Σ' = (1 - a) Σ + a (tr Σ / d) I``. ``shrinkage="auto"`` takes
  ``a`` from the Ledoit-Wolf formula exactly as ``sklearn.covariance.ledoit_wolf_shrinkage``
  computes it on the fitting rows (which uses the ddof=0 covariance; the intensity
  ``a`` is scale-free, so applying it to the ddof=1 covariance is consistent). The
  formula needs ``sum_k ||x_k - mu||^4`` on top of the covariance; :class:`Moments`
  streams it exactly through two extra moments about each chunk's own mean,
  ``T = sum ||a||^2 a`` (a d-vector) and ``Q = sum ||a||^4`` (a scalar), which shift
  and merge in closed form like the scatter matrix does.
* **Singular covariance.** With ``power > 0`` a direction is whitened only if its
  eigenvalue exceeds ``1e-10 x`` the largest (below that, LAPACK cannot resolve it
  from rounding; ``d x eps`` is ~1e-13). Nothing is floored: a floored eigenvalue
  would blow numerical noise up to unit variance. When the covariance has rank
  ``r`` below the requested ``k``:

  - ``n_components=None``: the ``d - r`` directions without variance are dropped
    (output has ``r`` dimensions; zca projects them out) with a one-line
    :class:`RankDeficientWarning` that suggests ``shrinkage``. This happens with
    fewer rows than dimensions, and with real encoders whose vectors lie in a
    subspace: all-MiniLM-L6-v2's ``cls`` vectors of STS-B have rank 381 of 384
    (3 eigenvalues ~1e-18 x the largest).
  - explicit ``n_components > r`` (or rank 0, constant data): :class:`IsotropyError`
    naming the rank and suggesting ``shrinkage`` or ``n_components <= r``.

  Eigenvalues that rounding makes slightly negative are reported as 0 in
  ``eigenvalues_``. ``power == 0`` (pure rotation) never needs an inverse and keeps
  all requested directions.
* **Eigenvectors** come from ``numpy.linalg.eigh`` (symmetric LAPACK solver), sorted
  by descending eigenvalue, each with its largest-magnitude entry made positive so
  refits on the same statistics give the same kernel.
* ``method="zca"`` keeps all ``d`` dimensions; ``n_components < d`` with zca is an error.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ._estimator import EstimatorParams
from ._io import (
    IsotropyError,
    NotFittedError,
    ProgressBar,
    atomic_file,
    check_matrix,
    check_output,
    iter_vector_chunks,
    list_vector_files,
    load_state,
    open_vector_file,
    save_state,
)

__all__ = ["Moments", "Whitening", "RankDeficientWarning", "fit_whitening_file", "transform_file", "parse_shrinkage"]

KIND = "whitening"
WHITENING_VERSION = 1  # layout of this module's config/state; bumped on incompatible change
EIG_RTOL = 1e-10  # kept eigenvalues must exceed EIG_RTOL x the largest when power > 0
BLOCK_BYTES = 64 * 2**20  # float64 working block of Moments.update: bounds memory whatever the chunk; larger blocks keep dsyrk efficient (measured 1.55x faster than 8 MiB at d=768)
CHUNK_BYTES = 64 * 2**20  # rows read from disk at a time by the file helpers



class RankDeficientWarning(UserWarning):
    """The fitting vectors span fewer directions than were asked for; some were dropped."""


# --------------------------------------------------------------------------- statistics


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

    def update(self, X: Any, *, name: str = "X", row_offset: int | None = None) -> "Moments":
        """Add the rows of ``X`` (n x d). On any error the statistics are left untouched.

        ``name`` and ``row_offset`` shape error messages: a bad row is reported as
        ``row_offset + i`` (default: the number of rows seen before this chunk).
        """
        offset = self.n if row_offset is None else int(row_offset)
        X = self._check(X, name, offset)
        n, d = X.shape
        if n == 0:
            return self
        stats = self._chunk_stats(X, name, offset)
        self._absorb(n, *stats)
        return self

    def _check(self, X: Any, name: str, offset: int) -> np.ndarray:
        arr = X if isinstance(X, np.ndarray) else None
        if arr is None or arr.dtype.kind != "f" or arr.ndim != 2:
            # Lists, integers, 1-D rows...: the shared validator converts to float64
            # (and checks finiteness, which _chunk_stats would do anyway).
            arr = check_matrix(X, name, expected_dim=self.dim, row_offset=offset)
        if self.dim is not None and arr.shape[1] != self.dim:
            raise IsotropyError(
                f"{name} has {arr.shape[1]} dimensions but {self.dim} were expected "
                f"(the width of the first chunk)"
            )
        if arr.shape[1] < 1:
            raise IsotropyError(f"{name} has no columns")
        return arr

    @staticmethod
    def _chunk_stats(X: np.ndarray, name: str, offset: int):
        from scipy.linalg.blas import dsyrk

        n, d = X.shape
        ref = X.mean(axis=0, dtype=np.float64)
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
            # b.T is F-contiguous (d x m): dsyrk computes b.T @ b into S's upper triangle.
            S = dsyrk(1.0, b.T, beta=1.0, c=S, trans=0, lower=0, overwrite_c=1)
            s += b.sum(axis=0)
            r = np.einsum("ij,ij->i", b, b)
            T += r @ b
            Q += float(r @ r)
        upper = np.triu(S)
        S = upper + np.triu(upper, 1).T
        if not (np.isfinite(S).all() and np.isfinite(T).all() and math.isfinite(Q)):
            raise IsotropyError(f"{name} has values too large: its covariance overflows float64")
        # Moments were taken about `ref`; move them to the chunk's exact mean (ref + s/n).
        delta = -s / n
        S, T, Q = _shift(n, s, S, T, Q, delta)
        return ref - delta, S, T, Q

    def _absorb(self, nb: int, mb: np.ndarray, Sb: np.ndarray, Tb: np.ndarray, Qb: float) -> None:
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

    def merge(self, other: "Moments") -> "Moments":
        """Add the statistics of ``other`` (rows seen elsewhere, e.g. another shard) to self."""
        if not isinstance(other, Moments):
            raise IsotropyError(f"can only merge Moments with Moments, not {type(other).__name__}")
        if other.n == 0:
            return self
        if self.dim is not None and other.dim != self.dim:
            raise IsotropyError(f"cannot merge statistics of {other.dim}-dimensional vectors into {self.dim}-dimensional ones")
        self._absorb(other.n, other._mean, other._scatter, other._third, other._fourth)
        return self

    def copy(self) -> "Moments":
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
            "n": np.array([self.n], dtype=np.int64),
            "mean": self._mean.copy(),
            "scatter": self._scatter.copy(),
            "third": self._third.copy(),
            "fourth": np.array([self._fourth], dtype=np.float64),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "Moments":
        try:
            n = int(np.asarray(arrays["n"]).reshape(-1)[0])
            mean = np.array(arrays["mean"], dtype=np.float64)
            scatter = np.array(arrays["scatter"], dtype=np.float64)
            third = np.array(arrays["third"], dtype=np.float64)
            fourth = float(np.asarray(arrays["fourth"]).reshape(-1)[0])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise IsotropyError(f"incomplete or malformed moment arrays: {exc!r}") from None
        d = mean.shape[0] if mean.ndim == 1 else -1
        if d < 1 or scatter.shape != (d, d) or third.shape != (d,) or n < 0:
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


class _Solution:
    __slots__ = ("moments", "key", "kernel", "inverse", "eigenvalues", "shrinkage", "k")

    def __init__(self, moments, key, kernel, inverse, eigenvalues, shrinkage, k):
        self.moments = moments  # the statistics it was computed from (identity is part of the key)
        self.key, self.kernel, self.inverse = key, kernel, inverse
        self.eigenvalues, self.shrinkage, self.k = eigenvalues, shrinkage, k


class Whitening(EstimatorParams):
    """BERT-whitening as a scikit-learn style transformer: ``y = (x - mean_) @ kernel_``.

    Parameters
    ----------
    n_components : int or None
        Output dimensions ``k <= d`` (the ``k`` largest-variance directions); None keeps all.
    power : float in [0, 1]
        Soft whitening, ``W = U Λ^(-power/2)``: 1 full whitening, 0 pure rotation
        (PCA without scaling), in between interpolates.
    shrinkage : float in [0, 1] or "auto"
        ``Σ' = (1 - a) Σ + a (tr Σ / d) I``; "auto" = Ledoit-Wolf. Needed when there
        are fewer rows than dimensions.
    method : "pca" or "zca"
        zca rotates back (``W = U Λ^(-power/2) U^T``), keeping the original axes.

    Learned state: ``mean_`` (d), ``kernel_`` (d x k), ``eigenvalues_`` (d, descending,
    of the possibly shrunk covariance), ``n_samples_seen_``, ``n_features_in_``,
    ``n_components_``, ``shrinkage_`` (the intensity used) and ``moments_`` (the
    :class:`Moments`). The kernel is computed lazily from the statistics and cached.
    """

    def __init__(self, n_components=None, power=1.0, shrinkage=0.0, method="pca"):
        self.n_components = n_components
        self.power = power
        self.shrinkage = shrinkage
        self.method = method

    # ---------------------------------------------------------------- params (sklearn contract)


    def _checked_params(self, d: int | None) -> tuple[int | None, float, float | str, str]:
        k = self.n_components
        if k is not None:
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
                raise IsotropyError(f"n_components must be a positive integer or None, got {k!r}")
            k = int(k)
            if k < 1:
                raise IsotropyError(f"n_components must be at least 1, got {k}")
            if d is not None and k > d:
                raise IsotropyError(f"n_components={k} is more than the {d} dimensions of the vectors")
        try:
            power = float(self.power)
        except (TypeError, ValueError):
            raise IsotropyError(f"power must be a number in [0, 1], got {self.power!r}") from None
        if not 0.0 <= power <= 1.0:
            raise IsotropyError(f"power must be in [0, 1] (1 full whitening, 0 pure rotation), got {self.power!r}")
        shrinkage = parse_shrinkage(self.shrinkage)
        method = self.method
        if method not in ("pca", "zca"):
            raise IsotropyError(f"method must be 'pca' or 'zca', got {method!r}")
        if method == "zca" and k is not None and d is not None and k != d:
            raise IsotropyError(f"method='zca' keeps all {d} dimensions; use method='pca' to keep n_components={k}")
        return k, power, shrinkage, method

    # ---------------------------------------------------------------- fitting

    def fit(self, X: Any, y: Any = None) -> "Whitening":
        """Fit on all rows of ``X`` at once (the kernel is computed now, so problems surface here)."""
        m = Moments()
        d = np.shape(X)[-1] if np.ndim(X) == 2 else None
        self._checked_params(d)
        m.update(X)
        solution = self._solve(m)
        self.moments_ = m
        self._solution_cache = solution
        return self

    def partial_fit(self, X: Any, y: Any = None) -> "Whitening":
        """Add one chunk of rows (any size, any number of calls). A failed call changes nothing."""
        d = np.shape(X)[-1] if np.ndim(X) == 2 else None
        self._checked_params(d)
        if not hasattr(self, "moments_"):
            m = Moments()
            m.update(X)
            self.moments_ = m
        else:
            self.moments_.update(X)
        return self

    def merge(self, other: "Whitening") -> "Whitening":
        """Add the statistics of another fit (e.g. on another shard); keeps self's hyper-parameters."""
        if not isinstance(other, Whitening):
            raise IsotropyError(f"can only merge a Whitening with a Whitening, not {type(other).__name__}")
        other._check_fitted()
        if not hasattr(self, "moments_"):
            self.moments_ = other.moments_.copy()
        else:
            self.moments_.merge(other.moments_)
        return self

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        return self.fit(X).transform(X)

    def _check_fitted(self) -> None:
        if not hasattr(self, "moments_") or self.moments_.n == 0:
            raise NotFittedError("this Whitening is not fitted yet; call fit or partial_fit first")

    def _key(self, m: Moments) -> tuple:
        return (repr(self.n_components), repr(self.power), repr(self.shrinkage), repr(self.method), m.version)

    def _solution(self) -> _Solution:
        self._check_fitted()
        cached = getattr(self, "_solution_cache", None)
        key = self._key(self.moments_)
        if cached is None or cached.moments is not self.moments_ or cached.key != key:
            cached = self._solution_cache = self._solve(self.moments_)
        return cached

    def _solve(self, m: Moments) -> _Solution:
        d = m.dim
        k, power, shrinkage, method = self._checked_params(d)
        if m.n < 2:
            raise IsotropyError(f"whitening needs at least 2 rows in total, got {m.n}")
        cov = m.covariance(ddof=1)
        alpha = m.ledoit_wolf_shrinkage() if shrinkage == "auto" else float(shrinkage)
        if alpha > 0:
            target = np.trace(cov) / d
            cov = (1.0 - alpha) * cov
            cov[np.diag_indices(d)] += alpha * target
        # LAPACK's symmetric solver is a long chain of small BLAS calls: with OpenBLAS threads
        # on a busy machine it measured 100x slower (4.8 s instead of 0.03 s for d=384),
        # so it runs on one thread (threadpoolctl is the maintained way to say so).
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1, user_api="blas"):
            evals, U = np.linalg.eigh(cov)
        evals, U = evals[::-1].copy(), U[:, ::-1].copy()
        # Deterministic signs: the largest-magnitude entry of each eigenvector is positive.
        signs = np.sign(U[np.abs(U).argmax(axis=0), np.arange(d)])
        signs[signs == 0] = 1.0
        U *= signs
        explicit = k is not None
        k = d if k is None else k
        top = max(float(evals[0]), 0.0)
        rank = int(np.sum(evals > EIG_RTOL * top))
        keep = k
        if power > 0 and rank < k:
            few = f"{m.n} rows for {d} dimensions, " if m.n <= d else "the vectors lie in a subspace, "
            # The advice names the Whitening parameter, the one spelling every caller shares (the
            # Python API, `fit whitening`/`eval --shrinkage`); commands without that option (index
            # build, analyze) already shrink ('auto'), so only rank 0 reaches their users, and no
            # shrinkage helps there.
            if rank == 0:
                raise IsotropyError(
                    f"the covariance is singular (rank 0): all {m.n} rows are the same vector, so no direction has "
                    f"variance and no shrinkage helps; fit it on vectors of different sentences"
                )
            if explicit:
                fix = (
                    "set shrinkage (e.g. shrinkage='auto')" if alpha == 0
                    else f"raise shrinkage (now {alpha:.3g}{', from auto' if shrinkage == 'auto' else ''})"
                )
                raise IsotropyError(
                    f"the covariance is singular ({few}rank {rank}): only {rank} of the {k} requested "
                    f"directions have variance above {EIG_RTOL:g} x the largest; {fix} or keep n_components <= {rank}"
                )
            warnings.warn(
                f"the covariance has rank {rank} < {d} ({few.rstrip(', ')}); "
                f"the {d - rank} directions without variance are dropped"
                + (" (projected out)" if method == "zca" else f", output has {rank} dimensions")
                + ("; set shrinkage (e.g. shrinkage='auto') to keep them" if alpha == 0 else f"; raise shrinkage (now {alpha:.3g}) to keep them"),
                RankDeficientWarning,
                stacklevel=3,
            )
            keep = rank
        evals = np.maximum(evals, 0.0)
        Uk, lk = U[:, :keep], evals[:keep]
        scale = lk ** (-power / 2) if power > 0 else np.ones(keep)
        kernel = Uk * scale
        inverse = (Uk * (lk ** (power / 2) if power > 0 else np.ones(keep))).T
        if method == "zca":
            kernel = kernel @ Uk.T
            inverse = Uk @ inverse
        k = kernel.shape[1]
        return _Solution(m, self._key(m), kernel, inverse, evals, alpha, k)

    # ---------------------------------------------------------------- learned state

    @property
    def mean_(self) -> np.ndarray:
        self._check_fitted()
        return self.moments_.mean

    @property
    def kernel_(self) -> np.ndarray:
        return self._solution().kernel

    @property
    def eigenvalues_(self) -> np.ndarray:
        return self._solution().eigenvalues

    @property
    def shrinkage_(self) -> float:
        return self._solution().shrinkage

    @property
    def n_components_(self) -> int:
        return self._solution().kernel.shape[1]

    @property
    def n_samples_seen_(self) -> int:
        self._check_fitted()
        return self.moments_.n

    @property
    def n_features_in_(self) -> int:
        self._check_fitted()
        return self.moments_.dim

    # ---------------------------------------------------------------- applying

    def transform(self, X: Any) -> np.ndarray:
        """``(X - mean_) @ kernel_``, computed in float64; float32 input gives float32 output."""
        sol = self._solution()
        out_dtype = np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64
        X = check_matrix(X, "X", expected_dim=self.moments_.dim)
        return ((X - self.moments_._mean) @ sol.kernel).astype(out_dtype, copy=False)

    def inverse_transform(self, Y: Any) -> np.ndarray:
        """Map back to the input space: exact when no dimensions were dropped, else the
        projection onto the kept directions (like PCA's inverse_transform)."""
        sol = self._solution()
        out_dtype = np.float32 if getattr(Y, "dtype", None) == np.float32 else np.float64
        Y = check_matrix(Y, "Y", expected_dim=sol.kernel.shape[1])
        return (Y @ sol.inverse + self.moments_._mean).astype(out_dtype, copy=False)

    def describe(self) -> str:
        sol = self._solution()
        d = self.moments_.dim
        parts = [f"{self.method} whitening {d} -> {sol.k} dims", f"power {float(self.power):g}"]
        if self.shrinkage == "auto" or sol.shrinkage:
            parts.append(f"shrinkage {sol.shrinkage:.4g}" + (" (Ledoit-Wolf)" if self.shrinkage == "auto" else ""))
        parts.append(f"fitted on {self.moments_.n} rows")
        return ", ".join(parts)

    # ---------------------------------------------------------------- persistence

    def save(self, path: str | os.PathLike, *, force: bool = False) -> Path:
        """Write ``config.json`` + ``state.safetensors`` (statistics and kernel) atomically.

        An existing ``path`` is replaced only when it holds a whitening (or is empty), unless ``force``.
        """
        sol = self._solution()
        k, power, shrinkage, method = self._checked_params(self.moments_.dim)
        config = {
            "whitening_version": WHITENING_VERSION,
            "params": {"n_components": k, "power": power, "shrinkage": shrinkage, "method": method},
            "dim": self.moments_.dim,
            "n_components_": sol.k,
            "n_samples_seen": self.moments_.n,
            "shrinkage_": sol.shrinkage,
        }
        arrays = {f"moments.{k_}": v for k_, v in self.moments_.to_arrays().items()}
        arrays.update(kernel=sol.kernel, inverse=sol.inverse, eigenvalues=sol.eigenvalues)
        return save_state(path, KIND, config, arrays, force=force)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Whitening":
        """Read a folder written by :meth:`save`; the result transforms bit for bit like the saved one."""
        required = ("kernel", "inverse", "eigenvalues", "moments.n", "moments.mean", "moments.scatter", "moments.third", "moments.fourth")
        cfg, arrays = load_state(path, KIND, required)
        if cfg.get("whitening_version") != WHITENING_VERSION:
            raise IsotropyError(
                f"{path} was written by an incompatible isotropy ({cfg.get('isotropy_version', 'unknown')}, "
                f"whitening layout {cfg.get('whitening_version')!r}; this one reads {WHITENING_VERSION}); refit it"
            )
        params = cfg.get("params")
        if not isinstance(params, dict) or set(params) != set(cls._get_param_names()):
            raise IsotropyError(f"{path}/config.json has missing or unknown whitening parameters: {params!r}")
        w = cls(**params)
        try:
            m = Moments.from_arrays({k[len("moments."):]: v for k, v in arrays.items() if k.startswith("moments.")})
        except IsotropyError as exc:
            raise IsotropyError(f"{path}/state.safetensors: {exc}; the artefact is corrupt, refit it") from None
        kernel, inverse, evals = arrays["kernel"], arrays["inverse"], arrays["eigenvalues"]
        kk = kernel.shape[1] if kernel.ndim == 2 else -1
        # config.json states what the arrays must be; a disagreement means an edited config or
        # files of two fits mixed up, and either would transform with the wrong statistics
        for key, held, what in (
            ("dim", m.dim, f"statistics of {m.dim}-dimensional vectors"),
            ("n_components_", kk, f"a kernel with {kk} output dimensions"),
            ("n_samples_seen", m.n, f"statistics of {m.n} rows"),
        ):
            said = cfg.get(key)
            if isinstance(said, bool) or not isinstance(said, int) or said != held:
                raise IsotropyError(
                    f"{path}: config.json says {key} {said!r}, but state.safetensors holds {what}; the folder was edited "
                    f"or its files mixed up: restore it or refit"
                )
        try:
            k, _, _, _ = w._checked_params(m.dim)
        except IsotropyError as exc:
            raise IsotropyError(f"{path}/config.json: {exc}") from None
        if k is not None and kk != k:
            raise IsotropyError(
                f"{path}: config.json says n_components {k}, but state.safetensors holds a kernel with {kk} output "
                f"dimensions; the folder was edited or its files mixed up: restore it or refit"
            )
        out = m.dim if params["method"] == "zca" else kk
        if (
            kernel.shape != (m.dim, out)
            or inverse.shape != (out, m.dim)
            or evals.shape != (m.dim,)
            or (k is not None and kk != k)
            or m.n < 2
        ):
            raise IsotropyError(f"{path}/state.safetensors has inconsistent shapes; the artefact is corrupt, refit it")
        w.moments_ = m
        w._solution_cache = _Solution(
            m,
            w._key(m), kernel, inverse, evals, float(cfg.get("shrinkage_", 0.0)), kk
        )
        return w


# --------------------------------------------------------------------------- files (the CLI's library calls)


def _shapes(path: str | os.PathLike) -> list[tuple[Path, tuple[int, ...]]]:
    out = []
    for file in list_vector_files(path):
        out.append((file, open_vector_file(file).shape))
    return out


def _chunk_rows(shapes) -> int:
    width = max(1, shapes[0][1][1])
    return max(1024, CHUNK_BYTES // (8 * width))


def fit_whitening_file(
    vectors: str | os.PathLike,
    output: str | os.PathLike | None = None,
    *,
    n_components: int | None = None,
    power: float = 1.0,
    shrinkage: float | str = 0.0,
    method: str = "pca",
    show_progress: bool | None = None,
    force: bool = False,
) -> Whitening:
    """Fit a :class:`Whitening` on a .npy file or a folder of .npy shards, streamed chunk by chunk.

    Memory stays bounded whatever the number of rows. Errors name the file and its row.
    With ``output``, the fitted folder is written there (checked before any work: an existing
    folder that is not a whitening is refused unless ``force``).
    """
    if output is not None:
        check_output(output, KIND, force=force, inputs=[vectors])
    w = Whitening(n_components=n_components, power=power, shrinkage=parse_shrinkage(shrinkage), method=method)
    shapes = _shapes(vectors)
    w._checked_params(shapes[0][1][1])
    m = Moments()
    total = sum(s[0] for _, s in shapes)
    with ProgressBar(total, show_progress, "fitting whitening", min_total=1) as bar:
        for file, start, chunk in iter_vector_chunks(vectors, chunk_rows=_chunk_rows(shapes)):
            m.update(chunk, name=str(file), row_offset=start)
            bar.advance(chunk.shape[0])
    try:
        w._solution_cache = w._solve(m)  # problems (too few rows, singular covariance) surface now
    except IsotropyError as exc:
        raise IsotropyError(f"{vectors}: {exc}") from None
    w.moments_ = m
    if output is not None:
        w.save(output, force=force)
    return w


def transform_file(
    transform: str | os.PathLike | Any,
    vectors: str | os.PathLike,
    output: str | os.PathLike,
    *,
    show_progress: bool | None = None,
    force: bool = False,
) -> tuple[int, int]:
    """Apply a fitted transform (a folder of any kind :func:`isotropy.load_transform` reads,
    or an object with ``transform``) to a .npy file or folder of shards, streaming, and
    write one .npy atomically (never one holding NaN or inf). Returns the output shape."""
    from ._io import check_finite_output, load_transform

    sources = [transform] if isinstance(transform, (str, os.PathLike)) else []
    output = check_output(output, "vectors", force=force, inputs=[*sources, vectors])
    model = load_transform(transform) if isinstance(transform, (str, os.PathLike)) else transform
    shapes = _shapes(vectors)
    total = sum(s[0] for _, s in shapes)
    width = shapes[0][1][1]
    expected = getattr(model, "n_features_in_", None) or width
    if total == 0:
        raise IsotropyError(f"{vectors} holds no rows")
    written = 0
    out_dtype = out_width = None
    with atomic_file(output, kind="vectors", force=force) as fh, ProgressBar(total, show_progress, "transforming", min_total=1) as bar:
        for file, start, chunk in iter_vector_chunks(vectors, chunk_rows=_chunk_rows(shapes)):
            chunk = check_matrix(chunk, str(file), expected_dim=expected, dtype=None, row_offset=start)
            if chunk.shape[0] == 0:
                continue
            Y = np.asarray(model.transform(chunk))
            check_finite_output(Y, f"the output {output}", row_offset=written)
            if out_dtype is None:
                out_dtype, out_width = Y.dtype, Y.shape[1]
                header = {
                    "descr": np.lib.format.dtype_to_descr(out_dtype),
                    "fortran_order": False,
                    "shape": (int(total), int(out_width)),
                }
                np.lib.format.write_array_header_1_0(fh, header)
            fh.write(np.ascontiguousarray(Y, dtype=out_dtype).tobytes())
            written += Y.shape[0]
            bar.advance(chunk.shape[0])
    if written != total:  # pragma: no cover - would mean a shard changed while we read it
        raise IsotropyError(f"expected {total} rows but transformed {written}")
    return total, int(out_width)
