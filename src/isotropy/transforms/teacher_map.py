"""The teacher map: an affine map from a student's sentence vectors to a teacher's (layer 3).

Fitted by least squares on pairs of vectors of the same sentences, ``Y ≈ X A + b``, streamed:
the only statistics least squares needs are the joint mean and centred scatter of ``[X, Y]``,
which :class:`~isotropy.transforms.moments.Moments` already accumulates exactly in float64, in
bounded memory, chunk by chunk and mergeable across shards (Chan's pairwise update). Centred
scatter rather than raw ``X^T X`` / ``X^T Y`` sums: the same information, without the
cancellation of ``X^T X - n mu mu^T`` when the vectors sit far from the origin (static models'
averaged vectors do). The solve is scikit-learn's: ``A = (Sxx + alpha I)^-1 Sxy`` on centred
data with an unpenalised intercept ``b = mean_y - mean_x A`` (``Ridge(alpha)``; ``alpha=0`` is
``LinearRegression``, the minimum-norm solution when ``Sxx`` is singular).

A static model's mean pooling makes the map fold into its table exactly
(:func:`~isotropy.transforms.token_whitening.fold_into_table`), which is what
``isotropy distill --corpus`` does. The map needs targets, so it is not a method one names for
``fit``/``eval``; it saves and loads like every transform (``load_transform`` reads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_matrix
from ..errors import IsotropyError, NotFittedError
from .base import Transform, stored_moments
from .moments import Moments

__all__ = ["TeacherMap"]


class TeacherMap(Transform):
    """Least-squares affine map ``X A + b ≈ Y`` from student vectors ``X`` to teacher vectors ``Y``.

    Parameters
    ----------
    alpha : float >= 0
        Ridge penalty on ``||A||_F^2`` (the intercept is not penalised), in the units of the
        centred scatter, as scikit-learn's ``Ridge(alpha)``; 0 is ordinary least squares.

    ``partial_fit(X, Y)`` over a stream, ``merge`` of shards, ``fit(X, Y)``; ``transform(X)``;
    ``affine_()`` gives ``(A, b)``. Learned state: ``moments_`` (joint moments of ``[X, Y]``),
    ``n_features_in_`` (student width), ``n_features_out_`` (teacher width).
    """

    kind = "teacher-map"
    version_key = "layout_version"
    state_version = 1
    required_arrays = tuple(f"moments.{name}" for name in ("n", "mean", "scatter", "third", "fourth"))
    _preserves_dtype = ("float64", "float32")

    def __init__(self, alpha: float = 0.0):
        self.alpha = alpha

    def _checked_alpha(self) -> float:
        try:
            alpha = float(self.alpha)
        except (TypeError, ValueError):
            raise IsotropyError(f"alpha must be a number >= 0, got {self.alpha!r}") from None
        if not np.isfinite(alpha) or alpha < 0 or isinstance(self.alpha, bool):
            raise IsotropyError(f"alpha must be a finite number >= 0, got {self.alpha!r}")
        return alpha

    # ---------------------------------------------------------------- fitting

    def _joint(self, X: Any, Y: Any) -> np.ndarray:
        if Y is None:
            raise IsotropyError("a TeacherMap is fitted on pairs: give the teacher's vectors Y of the same sentences")
        d_in = getattr(self, "_d_in", None)
        X = check_matrix(X, "X", expected_dim=d_in)
        Y = check_matrix(Y, "Y", expected_dim=getattr(self, "_d_out", None))
        if X.shape[0] != Y.shape[0]:
            raise IsotropyError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}: they must be vectors of the same sentences")
        return np.hstack([X, Y]), X.shape[1], Y.shape[1]

    def partial_fit(self, X: Any, Y: Any = None, sample_weight: Any = None) -> TeacherMap:
        """Add one chunk of pairs (row i of ``X`` and of ``Y``: the same sentence). A failed call changes nothing."""
        self._checked_alpha()
        XY, d_in, d_out = self._joint(X, Y)
        if not hasattr(self, "moments_"):
            m = Moments().update(XY, weights=sample_weight, name="[X, Y]")
            self.moments_, self._d_in, self._d_out = m, d_in, d_out
        else:
            self.moments_.update(XY, weights=sample_weight, name="[X, Y]")
        self._cache = None
        return self

    def fit(self, X: Any, Y: Any = None, sample_weight: Any = None) -> TeacherMap:
        """Fit on all pairs at once (solved now, so too few rows surface here)."""
        for attr in ("moments_", "_d_in", "_d_out"):
            self.__dict__.pop(attr, None)
        self.partial_fit(X, Y, sample_weight)
        self._solve()
        return self

    def merge(self, other: TeacherMap) -> TeacherMap:
        """Add the pairs another map saw (e.g. on another shard); keeps self's alpha."""
        if not isinstance(other, TeacherMap):
            raise IsotropyError(f"can only merge a TeacherMap with a TeacherMap, not a {type(other).__name__}")
        other._check_fitted()
        if not hasattr(self, "moments_"):
            self.moments_, self._d_in, self._d_out = other.moments_.copy(), other._d_in, other._d_out
        elif (other._d_in, other._d_out) != (self._d_in, self._d_out):
            raise IsotropyError(f"cannot merge a {other._d_in} -> {other._d_out} map into a {self._d_in} -> {self._d_out} one")
        else:
            self.moments_.merge(other.moments_)
        self._cache = None
        return self

    @classmethod
    def from_moments(cls, moments: Moments, n_features_in: int, alpha: float = 0.0) -> TeacherMap:
        """A map fitted on pairs whose joint moments (``[X, Y]``, ``moments_``) were gathered elsewhere, the first
        ``n_features_in`` columns the student's (what a kept copy of a pass's sums reads back, distill/sums_cache.py);
        the moments are taken, not copied."""
        d_in = int(n_features_in)
        if not isinstance(moments, Moments) or not 1 <= d_in < moments.dim:
            raise IsotropyError(f"a TeacherMap needs joint moments of more than {d_in} >= 1 columns, got {moments!r}")
        est = cls(alpha=alpha)
        est._checked_alpha()
        est.moments_, est._d_in, est._d_out, est._cache = moments, d_in, moments.dim - d_in, None
        return est

    # ---------------------------------------------------------------- solving

    def _solve(self) -> tuple[np.ndarray, np.ndarray]:
        from scipy import linalg

        self._check_fitted()
        alpha, m = self._checked_alpha(), self.moments_
        key = (alpha, m.version)
        cached = getattr(self, "_cache", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        if m.n < 2:
            raise IsotropyError(f"a teacher map needs at least 2 pairs, got {m.n}")
        d = self._d_in
        S, mean = m.scatter, m.mean
        Sxx, Sxy = S[:d, :d], S[:d, d:]
        if alpha > 0:
            A = linalg.solve(Sxx + alpha * np.eye(d), Sxy, assume_a="pos")
        else:
            # minimum-norm least squares, like LinearRegression's lstsq on the centred rows
            A = linalg.lstsq(Sxx, Sxy, cond=1e-12 * max(float(np.abs(Sxx).max()), 1e-300))[0]
        b = mean[d:] - mean[:d] @ A
        self._cache = (key, (A, b))
        return A, b

    def affine_(self) -> tuple[np.ndarray, np.ndarray]:
        """``(A, b)`` with ``transform(x) == x @ A + b`` (float64)."""
        A, b = self._solve()
        return A.copy(), b.copy()

    # ---------------------------------------------------------------- applying

    def transform(self, X: Any) -> np.ndarray:
        """``X @ A + b`` in float64; float32 input gives float32 output."""
        A, b = self._solve()
        out_dtype = np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64
        X = check_matrix(X, "X", expected_dim=self._d_in)
        return (X @ A + b).astype(out_dtype, copy=False)

    def _check_fitted(self) -> None:
        if not hasattr(self, "moments_") or self.moments_.n == 0:
            raise NotFittedError("this TeacherMap is not fitted yet; call fit(X, Y) or partial_fit first")

    @property
    def n_features_in_(self) -> int:
        self._check_fitted()
        return int(self._d_in)

    @property
    def n_features_out_(self) -> int:
        self._check_fitted()
        return int(self._d_out)

    def to_torch(self, dtype: Any = None):
        from ._torch import LinearMap

        A, b = self._solve()
        return LinearMap(A, b, dtype)

    def describe(self) -> str:
        self._check_fitted()
        ridge = f", ridge alpha {self._checked_alpha():g}" if self._checked_alpha() else ""
        return f"teacher map {self._d_in} -> {self._d_out} dims (least squares{ridge}), fitted on {self.moments_.n} pairs"

    # ---------------------------------------------------------------- persistence

    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        self._solve()  # solvable before anything is written
        config = {"dim_in": self._d_in, "dim_out": self._d_out, "n_samples_seen": self.moments_.n}
        return config, {f"moments.{k}": v for k, v in self.moments_.to_arrays().items()}

    def _params_to_save(self) -> dict[str, Any]:
        return {"alpha": self._checked_alpha()}

    @classmethod
    def _from_state(cls, est: TeacherMap, cfg: dict[str, Any], arrays: dict[str, np.ndarray], path: Path) -> TeacherMap:
        m = stored_moments(arrays, path)
        d_in, d_out = cfg.get("dim_in"), cfg.get("dim_out")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (d_in, d_out)) or d_in + d_out != m.dim:
            raise IsotropyError(
                f"{path}: config.json says dim_in {d_in!r} and dim_out {d_out!r}, but state.safetensors holds moments "
                f"of {m.dim} columns; the folder was edited or its files mixed up: restore it or refit"
            )
        said = cfg.get("n_samples_seen")
        if isinstance(said, bool) or not isinstance(said, int | float) or said != m.n:
            raise IsotropyError(f"{path}: config.json says n_samples_seen {said!r}, but state.safetensors holds {m.n}")
        est.moments_, est._d_in, est._d_out, est._cache = m, d_in, d_out, None
        try:
            est._solve()
        except IsotropyError as exc:
            raise IsotropyError(f"{path}: {exc}") from None
        return est
