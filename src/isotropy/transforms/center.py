"""Centering: subtract the mean of the fitting vectors, nothing else.

``y = x - mean``. The cheapest calibration there is, and the baseline every other one
must beat: whitening, all-but-the-top and flows all centre first, so what they add
beyond centering is what they earn.
"""

from __future__ import annotations

import numpy as np

from ..errors import IsotropyError
from .base import AffineSolution, AffineTransform
from .moments import Moments

__all__ = ["Center"]


class Center(AffineTransform):
    """Mean centering as a scikit-learn style transformer (kind ``center``); no parameters.

    Learned state: ``mean_`` (d), ``moments_``, ``n_samples_seen_``; the map is
    ``(x - mean_) @ I`` and is inverted exactly.
    """

    kind = "center"

    def __init__(self):
        pass

    def min_fit_rows(self, d: int) -> int:
        return 1

    def _solve(self, m: Moments) -> AffineSolution:
        if m.n < 1:
            raise IsotropyError(f"center needs at least 1 row, got {m.n}")
        eye = np.eye(m.dim)
        return AffineSolution(m.mean, eye, eye)

    def describe(self) -> str:
        return f"center: mean of {self.moments_.n} rows subtracted ({self.moments_.dim} dims)"
