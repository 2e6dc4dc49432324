"""What the token fit aims at: the teacher's vectors on their principal axes, optionally soft-whitened first.

Both are one linear map ``P`` of the targets, ``Y -> Y @ P``, read off the teacher block of the map's moments (the
centred scatter of the teacher's corpus vectors, ``S``); the pass's sums are linear in the targets, so any ``P`` is
applied to them after the pass (``TokenRegression.project``) and a rerun with another one encodes nothing again.

``--dims k`` below the teacher's width: ``P`` is the top ``k`` eigenvectors of ``S`` (:func:`principal_axes`).

``--target-whitening p`` (``p`` in [0, 1]; 0 is off; default 0.5 for the token fit, 0 for ``--fit map``, where it was
not measured): before the axes are taken, the targets are soft-whitened, ``M = U Λ^(-p/2) U^T`` (``U Λ U^T = S``;
zca: the teacher's own axes kept), so their eigenvalue spread is shrunk to its ``1 - p`` power (``soft-p`` of
:mod:`isotropy.transforms`, applied to the targets rather than to the model's vectors). ``M`` is scaled so that the
targets' total variance is unchanged, which keeps the strength grid on its scale. Why it can help: the least squares
spends the table's rows on the targets' directions in proportion to their variance, and a few directions of the
teacher's vectors carry most of it; softened, the fit spreads over the rest. The student then matches a softened
teacher, whose own 7-task average is a little lower (78.87 raw; 78.67 at 0.25, 78.16 at 0.5: RESULTS
``sts-default-model``).

The default, 0.5, was read off the STS-B train split (Spearman x 100; never a reported test figure), from the pass's
sums of the factory curve's wiki samples (the int8 teacher, spans none; RESULTS ``factory-curve``): 12,499 lines +
Cranfield's sentences 74.89 / 75.90 / 75.89 at 0 / 0.5 / 1; 99,999 lines 76.43 / 76.71 / 76.85 / 76.43 at 0 / 0.25 /
0.5 / 1; 999,998 lines 77.06 / 77.31 / 77.39 at 0 / 0.25 / 0.5. What it did to the reported figures (the 7-task
average about level, Cranfield's nDCG@10 up by about a point): RESULTS ``factory-curve``.

Directions whose eigenvalue LAPACK cannot resolve (at most ``EIG_RTOL`` x the largest, as
:mod:`isotropy.transforms.whitening` decides) get the factor of the weakest resolved one, so a corpus with fewer
lines than the teacher has dimensions never blows rounding noise (or the mean's share of such a direction) up.
"""

from __future__ import annotations

import numpy as np

from .._math import sorted_eigh
from ..errors import IsotropyError
from ..transforms.teacher_map import TeacherMap
from ..transforms.whitening import EIG_RTOL

DEFAULT_TARGET_WHITENING = 0.5  # chosen on the STS-B train split (module docs)

__all__ = [
    "DEFAULT_TARGET_WHITENING",
    "principal_axes",
    "target_projection",
    "check_target_whitening",
    "projection_note",
    "softening",
]


def check_target_whitening(power: object, corpus: object, fit: str | None = "tokens") -> float:
    """``--target-whitening``'s power as a float in [0, 1], or one clear error; None: ``DEFAULT_TARGET_WHITENING`` for
    the token fit, where it was measured, and 0 for ``--fit map``; ``corpus``: the distill's (None: no fit, no targets)."""
    if power is None:
        return DEFAULT_TARGET_WHITENING if fit == "tokens" else 0.0
    if corpus is None:
        raise IsotropyError("--target-whitening softens the teacher's vectors of --corpus: give --corpus, or leave it out")
    try:
        if isinstance(power, bool):
            raise TypeError
        p = float(power)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise IsotropyError(f"--target-whitening must be a number in [0, 1], got {power!r}") from None
    if not 0.0 <= p <= 1.0:  # NaN fails this too
        raise IsotropyError(f"--target-whitening must be in [0, 1] (0 off, 1 full whitening), got {power!r}")
    return p


def _scatter(tm: TeacherMap) -> np.ndarray:
    d = tm.n_features_in_
    S = tm.moments_.scatter[d:, d:]
    return (S + S.T) / 2


def principal_axes(tm: TeacherMap, k: int) -> np.ndarray:
    """``(d_teacher, k)``: the top ``k`` eigenvectors of the centred scatter of the teacher's corpus vectors."""
    return sorted_eigh(_scatter(tm))[1][:, :k]


def _softened(S: np.ndarray, power: float) -> tuple[np.ndarray, np.ndarray]:
    """``(U, f)``: ``S``'s eigenvectors by descending eigenvalue and each one's factor in the soft whitening of power
    ``power`` (module docs), so that ``M = U diag(f) U^T``, scaled so that ``trace(M S M) == trace(S)``."""
    w, U = sorted_eigh(S)
    resolved = w > EIG_RTOL * max(float(w[0]), 0.0)
    if not resolved.any():
        raise IsotropyError("the teacher's vectors of the corpus do not vary: --target-whitening has nothing to whiten")
    floored = np.maximum(w, w[resolved].min())
    f = (floored / floored.mean()) ** (-power / 2)
    return U, f * np.sqrt(w.sum() / (f * f * w).sum())  # trace(M S M) = sum f^2 w


def softening(S: np.ndarray, power: float) -> np.ndarray:
    """``M`` (``d x d``, symmetric): soft whitening of power ``power`` for vectors of scatter ``S`` (module docs),
    scaled so that ``trace(M S M) == trace(S)``."""
    U, f = _softened(S, power)
    return (U * f) @ U.T


def target_projection(tm: TeacherMap, dims: int | None, power: float = 0.0) -> np.ndarray | None:
    """``P`` (``d_teacher x k``) for ``dims`` (None: the teacher's width) and a target whitening of ``power``; None
    when it is the identity (the full width, no whitening). The axes kept are the teacher's ``dims`` of most variance:
    ``M`` shares ``S``'s eigenvectors, so ``M @ axes`` is each axis scaled by its factor, and at power 1 (where the
    softened targets' variances are all equal) the choice still follows the teacher's own."""
    S = _scatter(tm)
    narrow = dims is not None and dims < S.shape[0]
    if power == 0:
        return sorted_eigh(S)[1][:, :dims] if narrow else None
    U, f = _softened(S, power)
    return U[:, :dims] * f[:dims] if narrow else (U * f) @ U.T


def projection_note(width: int, k: int, power: float) -> str:
    """What the card records of ``P``."""
    parts = [f"soft-whitened (power {power:g}, total variance kept)"] if power else []
    parts += [f"on their {k} principal axes"] if k < width else []
    return f"the teacher's {width}-d vectors {' and '.join(parts)} (on this corpus)"
