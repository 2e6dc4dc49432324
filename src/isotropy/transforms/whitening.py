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

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._math import sorted_eigh
from .._spelling import spell
from ..errors import IsotropyError, RankDeficientWarning
from .base import AffineSolution, AffineTransform, check_config_counts, stored_moments
from .moments import Moments, parse_shrinkage

__all__ = ["Whitening", "RankDeficientWarning", "EIG_RTOL"]

EIG_RTOL = 1e-10  # kept eigenvalues must exceed EIG_RTOL x the largest when power > 0


class Whitening(AffineTransform):
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
    ``n_components_`` (= ``n_features_out_``), ``shrinkage_`` (the intensity used) and
    ``moments_`` (the :class:`~isotropy.transforms.moments.Moments`). The kernel is
    computed lazily from the statistics and cached.
    """

    kind = "whitening"
    version_key = "whitening_version"
    state_version = 1  # layout of config/state; bumped on incompatible change
    required_arrays = (
        "kernel",
        "inverse",
        "eigenvalues",
        "moments.n",
        "moments.mean",
        "moments.scatter",
        "moments.third",
        "moments.fourth",
    )

    def __init__(self, n_components: int | None = None, power: float = 1.0, shrinkage: float | str = 0.0, method: str = "pca"):
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
                raise IsotropyError(f"{spell('n_components', k)} is more than the {d} dimensions of the vectors")
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
            raise IsotropyError(
                f"{spell('method', 'zca')} keeps all {d} dimensions; use {spell('method', 'pca')} to keep "
                f"{spell('n_components', k)}"
            )
        return k, power, shrinkage, method

    def _check_params(self, d: int | None) -> None:
        self._checked_params(d)

    def min_fit_rows(self, d: int) -> int:
        k, power, shrinkage, _ = self._checked_params(d)
        # a covariance from n centred rows has rank n - 1: k whitened directions need n >= k + 1
        return (k or d) + 1 if shrinkage == 0 and power > 0 else 2

    # ---------------------------------------------------------------- solving

    def _solve(self, m: Moments) -> AffineSolution:
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
        evals, U = sorted_eigh(cov)  # descending, deterministic signs
        explicit = k is not None
        k = d if k is None else k
        top = max(float(evals[0]), 0.0)
        rank = int(np.sum(evals > EIG_RTOL * top))
        keep = k
        if power > 0 and rank < k:
            few = f"{m.n} rows for {d} dimensions, " if m.n <= d else "the vectors lie in a subspace, "
            # The advice names the parameter as the caller's interface spells it (spell(): shrinkage='auto'
            # from Python, --shrinkage auto from the command line); commands without that option (index
            # build, analyze) already shrink ('auto'), so only rank 0 reaches their users, and no
            # shrinkage helps there.
            if rank == 0:
                raise IsotropyError(
                    f"the covariance is singular (rank 0): all {m.n} rows are the same vector, so no direction has "
                    f"variance and no shrinkage helps; fit it on vectors of different sentences"
                )
            if explicit:
                fix = (
                    f"set {spell('shrinkage')} (e.g. {spell('shrinkage', 'auto')})"
                    if alpha == 0
                    else f"raise {spell('shrinkage')} (now {alpha:.3g}{', from auto' if shrinkage == 'auto' else ''})"
                )
                raise IsotropyError(
                    f"the covariance is singular ({few}rank {rank}): only {rank} of the {k} requested "
                    f"directions have variance above {EIG_RTOL:g} x the largest; {fix} or keep {spell('n_components')} <= {rank}"
                )
            warnings.warn(
                f"the covariance has rank {rank} < {d} ({few.rstrip(', ')}); "
                f"the {d - rank} directions without variance are dropped"
                + (" (projected out)" if method == "zca" else f", output has {rank} dimensions")
                + (
                    f"; set {spell('shrinkage')} (e.g. {spell('shrinkage', 'auto')}) to keep them"
                    if alpha == 0
                    else f"; raise {spell('shrinkage')} (now {alpha:.3g}) to keep them"
                ),
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
        return AffineSolution(m.mean, kernel, inverse, eigenvalues=evals, shrinkage=alpha)

    # ---------------------------------------------------------------- learned state

    @property
    def eigenvalues_(self) -> np.ndarray:
        return self._solution().info["eigenvalues"]

    @property
    def shrinkage_(self) -> float:
        return self._solution().info["shrinkage"]

    @property
    def n_components_(self) -> int:
        return self.n_features_out_

    def describe(self) -> str:
        sol = self._solution()
        d = self.moments_.dim
        parts = [f"{self.method} whitening {d} -> {sol.kernel.shape[1]} dims", f"power {float(self.power):g}"]
        if self.shrinkage == "auto" or sol.info["shrinkage"]:
            parts.append(f"shrinkage {sol.info['shrinkage']:.4g}" + (" (Ledoit-Wolf)" if self.shrinkage == "auto" else ""))
        parts.append(f"fitted on {self.moments_.n} rows")
        return ", ".join(parts)

    # ---------------------------------------------------------------- persistence (layout of isotropy 0.1)

    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        sol = self._solution()
        config = {
            "dim": self.moments_.dim,
            "n_components_": int(sol.kernel.shape[1]),
            "n_samples_seen": self.moments_.n,
            "shrinkage_": sol.info["shrinkage"],
        }
        arrays = {f"moments.{k_}": v for k_, v in self.moments_.to_arrays().items()}
        arrays.update(kernel=sol.kernel, inverse=sol.inverse, eigenvalues=sol.info["eigenvalues"])
        return config, arrays

    def _params_to_save(self) -> dict[str, Any]:
        k, power, shrinkage, method = self._checked_params(self.moments_.dim)
        return {"n_components": k, "power": power, "shrinkage": shrinkage, "method": method}

    @classmethod
    def _from_state(cls, w: Whitening, cfg: dict[str, Any], arrays: dict[str, np.ndarray], path: Path) -> Whitening:
        """Restore from a folder written by :meth:`save`; the result transforms bit for bit like the saved one."""
        m = stored_moments(arrays, path)
        kernel, inverse, evals = arrays["kernel"], arrays["inverse"], arrays["eigenvalues"]
        kk = kernel.shape[1] if kernel.ndim == 2 else -1
        # config.json states what the arrays must be; a disagreement means an edited config or
        # files of two fits mixed up, and either would transform with the wrong statistics
        held = [
            ("dim", m.dim, f"statistics of {m.dim}-dimensional vectors"),
            ("n_components_", kk, f"a kernel with {kk} output dimensions"),
            ("n_samples_seen", m.n, f"statistics of {m.n} rows"),
        ]
        check_config_counts(cfg, path, held)
        try:
            k, _, _, _ = w._checked_params(m.dim)
        except IsotropyError as exc:
            raise IsotropyError(f"{path}/config.json: {exc}") from None
        if k is not None and kk != k:
            raise IsotropyError(
                f"{path}: config.json says n_components {k}, but state.safetensors holds a kernel with {kk} output "
                f"dimensions; the folder was edited or its files mixed up: restore it or refit"
            )
        out = m.dim if w.method == "zca" else kk
        if (
            kernel.shape != (m.dim, out)
            or inverse.shape != (out, m.dim)
            or evals.shape != (m.dim,)
            or (k is not None and kk != k)
            or m.n < 2
        ):
            raise IsotropyError(f"{path}/state.safetensors has inconsistent shapes; the artefact is corrupt, refit it")
        w._attach(m, AffineSolution(m.mean, kernel, inverse, eigenvalues=evals, shrinkage=float(cfg.get("shrinkage_", 0.0))))
        return w
