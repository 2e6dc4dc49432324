"""Removing the top directions of a second-moment matrix: what ``abtt`` and ``common-component`` share.

Both are ``y = (x - shift) (I - U U^T)``, where the columns of ``U`` are the top
``n_components`` eigenvectors of a d x d matrix solved from :class:`Moments` alone, so
both stream, merge, fit from moments (the distributed fit), save and export like
every :class:`~isotropy.transforms.base.AffineTransform`:

* ``abtt`` (:mod:`.abtt`): the centred covariance, ``shift`` = the mean;
* ``common-component`` (:mod:`.common_component`): the UNcentred second moment
  ``X^T X / n = scatter / n + mean mean^T`` (whose eigenvectors are the right singular
  vectors of the raw sentence matrix, what SIF's TruncatedSVD finds), no shift.

Directions are those of :func:`isotropy._math.sorted_eigh` (descending, deterministic).
A direction is removable only when its eigenvalue exceeds ``EIG_RTOL`` x the largest
(the threshold :mod:`.whitening` uses): asking to remove more directions than the data
has is an error rather than a silent removal of arbitrary ones.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from .._math import sorted_eigh
from .._spelling import spell
from ..errors import IsotropyError
from .base import AffineSolution, AffineTransform
from .moments import Moments
from .whitening import EIG_RTOL

__all__ = ["DirectionRemoval"]


class DirectionRemoval(AffineTransform):
    """Base of the transforms that project out the top ``n_components`` directions of a second moment.

    A subclass sets ``centered`` (covariance about the mean and subtract the mean, or the
    raw second moment and no shift), ``label`` (its name in messages) and
    :meth:`_default_components` (what ``n_components=None`` means).
    """

    centered: ClassVar[bool] = True
    label: ClassVar[str] = ""
    matrix_name: ClassVar[str] = "covariance"

    n_components: int | None

    def _default_components(self, d: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _components(self, d: int | None) -> int | None:
        """The number of directions removed (None while ``d`` is unknown and the default applies)."""
        k = self.n_components
        if k is None:
            return None if d is None else self._default_components(d)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise IsotropyError(f"{self.label}: n_components must be a non-negative integer or None, got {k!r}")
        k = int(k)
        if k < 0:
            raise IsotropyError(f"{self.label}: n_components must be 0 or more, got {k}")
        if d is not None and k >= d:
            raise IsotropyError(
                f"{self.label}: {spell('n_components', k)} would remove all {d} dimensions of the vectors "
                f"(D >= d); remove fewer ({spell('n_components')} < {d}; the default is {self._default_components(d)})"
            )
        return k

    def _check_params(self, d: int | None) -> None:
        self._components(d)

    def min_fit_rows(self, d: int) -> int:
        k = self._components(d) or 0
        # n centred rows span at most n - 1 directions; n raw rows at most n
        return max(2, k + 1) if self.centered else max(2, k)

    def _matrix(self, m: Moments) -> np.ndarray:
        S = m.scatter / m.n
        return S if self.centered else S + np.outer(m.mean, m.mean)

    def _solve(self, m: Moments) -> AffineSolution:
        d = m.dim
        k = self._components(d)
        if m.n < 1:
            raise IsotropyError(f"{self.label} needs at least 1 row, got {m.n}")
        evals, U = sorted_eigh(self._matrix(m))
        evals = np.maximum(evals, 0.0)
        top = float(evals[0])
        rank = int(np.sum(evals > EIG_RTOL * top)) if top > 0 else 0
        if k > rank:
            raise IsotropyError(
                f"{self.label} removes the top {k} directions, but the {self.matrix_name} of the {m.n} fitting rows has "
                f"only {rank} with a non-zero eigenvalue; fit on more (and different) rows or lower n_components"
            )
        Uk = U[:, :k]
        kernel = np.eye(d) - Uk @ Uk.T
        shift = m.mean if self.centered else np.zeros(d)
        total = float(evals.sum())
        removed = float(evals[:k].sum()) / total if total > 0 else 0.0
        inverse = np.eye(d) if k == 0 else None
        return AffineSolution(shift, kernel, inverse, directions=Uk, eigenvalues=evals, removed_fraction=removed)

    # ---------------------------------------------------------------- learned state

    @property
    def components_(self) -> np.ndarray:
        """The removed directions, one per row (``n_components_`` x d, unit length, descending eigenvalue)."""
        return self._solution().info["directions"].T.copy()

    @property
    def n_components_(self) -> int:
        return int(self._solution().info["directions"].shape[1])

    @property
    def eigenvalues_(self) -> np.ndarray:
        """Eigenvalues (descending) of the matrix the directions come from (ddof 0)."""
        return self._solution().info["eigenvalues"]

    @property
    def removed_fraction_(self) -> float:
        """Share of the matrix's trace that the removed directions carried."""
        return float(self._solution().info["removed_fraction"])
