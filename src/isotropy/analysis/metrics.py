"""Sentence-level statistics of embeddings (layer 5, :mod:`isotropy.analysis`).

The average cosine of random pairs, the covariance spectrum and the dimensions holding
a share of the variance, Mu & Viswanath's partition isotropy ``I(W)``, IsoScore, the 2-D
projection, and :func:`sentence_report`, which computes them all for raw vectors and for
each calibration applied to them. The decisions behind them (pairs ``i != j``, both
eigenvector signs in ``I(W)``, uncentred projections, ...) are documented once, in the
docstring of :mod:`isotropy.analysis`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._checks import check_matrix
from .._math import cosine_rows, sorted_eigh
from .._progress import ProgressBar
from ..errors import IsotropyError

__all__ = [
    "MIN_SENTENCES",
    "DEFAULT_PAIRS",
    "DEFAULT_SEED",
    "RAW",
    "random_pairs",
    "average_cosine",
    "covariance_spectrum",
    "dims_for_variance",
    "partition_isotropy",
    "isoscore",
    "projection_2d",
    "sentence_report",
]

MIN_SENTENCES = 10  # fewer non-empty lines give statistics dominated by chance
DEFAULT_PAIRS = 10_000
DEFAULT_SEED = 0
SCATTER_POINTS = 2000  # sentence points kept for the projection figure
HIST_BINS = 80
VARIANCE_FRACTIONS = (0.5, 0.9, 0.99)
RAW = "raw"


# =========================================================================== statistics


def _as_float64(X: Any, name: str, min_rows: int = 2) -> np.ndarray:
    return check_matrix(X, name, min_rows=min_rows, dtype=np.float64)


MAX_PAIRS = 10_000_000  # 1.5 s of cosines and 240 MB of indices; the mean's error is already ~3e-4 at 10^5


def check_pairs(n_pairs: Any, option: str = "the number of random pairs") -> int:
    """``n_pairs`` as an int in [1, MAX_PAIRS]: a bound, so that an absurd count is one line at once, not a MemoryError."""
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, (int, np.integer)) or not 1 <= n_pairs <= MAX_PAIRS:
        raise IsotropyError(f"{option} must be between 1 and {MAX_PAIRS:,}, got {n_pairs!r}")
    return int(n_pairs)


def random_pairs(n: int, n_pairs: int, seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """``n_pairs`` index pairs ``(i, j)`` with ``i != j``, uniform over ordered pairs, seeded."""
    if n < 2:
        raise IsotropyError(f"random pairs need at least 2 rows, got {n}")
    check_pairs(n_pairs)
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=n_pairs)
    j = (i + rng.integers(1, n, size=n_pairs)) % n  # any row but i, uniformly
    return i, j


def average_cosine(
    X: Any, n_pairs: int = DEFAULT_PAIRS, seed: int = DEFAULT_SEED, *, return_samples: bool = False
) -> dict[str, Any]:
    """Mean and standard deviation of the cosine similarity of ``n_pairs`` random row pairs.

    For isotropic vectors it is near 0; for ``x = m + noise`` (a cone around ``m``) it is
    near ``|m|^2 / (|m|^2 + E|noise|^2)``. Returns ``{"mean", "std", "sem", "n_pairs"}``
    (and ``"samples"``, the cosines, when asked).
    """

    X = _as_float64(X, "vectors")
    i, j = random_pairs(X.shape[0], n_pairs, seed)
    step = max(1, 2**24 // max(1, X.shape[1]))  # pairs at a time: memory stays bounded whatever n_pairs
    cos = np.concatenate([cosine_rows(X[i[a : a + step]], X[j[a : a + step]]) for a in range(0, len(i), step)])
    out: dict[str, Any] = {
        "mean": float(cos.mean()),
        "std": float(cos.std(ddof=1)) if len(cos) > 1 else 0.0,
        "sem": float(cos.std(ddof=1) / math.sqrt(len(cos))) if len(cos) > 1 else 0.0,
        "n_pairs": int(n_pairs),
    }
    if return_samples:
        out["samples"] = cos
    return out


def _gram(X: np.ndarray) -> np.ndarray:
    """``X^T X`` in float64 (one BLAS call)."""
    return X.T @ X


def _spectra(X: np.ndarray, vectors: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Covariance eigenvalues (descending, ddof=1) and the eigenvectors of ``X^T X``, from one Gram matrix.

    Both the spectrum and Mu & Viswanath's score need a d x d eigenproblem; computing
    ``G = X^T X`` once and the covariance as ``(G - n mu mu^T) / (n - 1)`` halves the
    O(n d^2) work (the cancellation is harmless in float64 at embedding scales).
    """
    n, d = X.shape
    G = _gram(X)
    mu = X.mean(axis=0)
    cov = (G - n * np.outer(mu, mu)) / (n - 1)
    evals, _ = sorted_eigh(0.5 * (cov + cov.T))
    C = sorted_eigh(G)[1] if vectors else None
    return np.maximum(evals, 0.0), C


def covariance_spectrum(X: Any) -> np.ndarray:
    """Eigenvalues of the covariance of the rows (ddof = 1), descending, negatives from rounding set to 0."""
    X = _as_float64(X, "vectors")
    return _spectra(X, vectors=False)[0]


def dims_for_variance(eigenvalues: Any, fraction: float = 0.9) -> int:
    """Smallest number of principal directions that hold ``fraction`` of the total variance."""
    ev = np.maximum(np.asarray(eigenvalues, dtype=np.float64), 0.0)
    total = ev.sum()
    if total <= 0:
        return 0
    cum = np.cumsum(np.sort(ev)[::-1]) / total
    return int(min(np.searchsorted(cum, fraction - 1e-12) + 1, len(ev)))


def _variance_dims(evals: np.ndarray) -> dict[str, int]:
    """:func:`dims_for_variance` for each of the report's fractions (0.5 / 0.9 / 0.99), keyed ``"0.9"`` etc."""
    return {f"{f:g}": dims_for_variance(evals, f) for f in VARIANCE_FRACTIONS}


def partition_isotropy(X: Any) -> float:
    """Mu & Viswanath's isotropy ``I(W) = min_c Z(c) / max_c Z(c)``, in [0, 1].

    ``Z(c) = sum_i exp(c^T w_i)`` with ``c`` over the eigenvectors of ``W^T W`` (rows
    ``w_i`` of ``X``, uncentred), both signs of each (see the module notes). Near 1 for
    isotropic vectors of moderate norm, near 0 for a cone. Reference: J. Mu and
    P. Viswanath, "All-but-the-Top: Simple and Effective Postprocessing for Word
    Representations", ICLR 2018, eq. (7)-(8).
    """
    W = _as_float64(X, "vectors", min_rows=1)
    return _partition_ratio(W, sorted_eigh(_gram(W))[1])


def _log_partition(proj: np.ndarray) -> np.ndarray:
    """Column-wise ``log sum_i exp(proj[i, c])``, shifted by the column maximum so it cannot overflow."""
    # Written out rather than scipy.special.logsumexp: scipy's generic version made several
    # full-size temporaries and measured ~5x slower on a 30,000 x 384 token matrix.
    top = proj.max(axis=0)
    return top + np.log(np.exp(proj - top).sum(axis=0))


def _partition_ratio(W: np.ndarray, C: np.ndarray) -> float:
    proj = W @ C  # (n, d): c^T w_i for every eigenvector c
    log_z = np.concatenate([_log_partition(proj), _log_partition(-proj)])
    return float(np.exp(log_z.min() - log_z.max()))


def isoscore(X: Any = None, *, eigenvalues: Any = None) -> float:
    """IsoScore (Rudman, Gillman, Rayne & Eickhoff, "IsoScore: Measuring the Uniformity of
    Embedding Space Utilization", Findings of ACL 2022), in [0, 1].

    With ``Σ`` the d variances of the PCA-reoriented vectors (the covariance eigenvalues):
    ``Σ̂ = sqrt(d) Σ / ||Σ||``, defect ``δ = ||Σ̂ - 1|| / sqrt(2 (d - sqrt(d)))``,
    ``IsoScore = ((d - δ² (d - sqrt(d)))² - d) / (d (d - 1))``. 1 when every direction
    carries the same variance, 0 when one direction carries it all. It ignores the
    mean, so it does not see a cone's offset, only how evenly the variance is spread.
    """
    if eigenvalues is None:
        if X is None:
            raise IsotropyError("isoscore needs vectors or their covariance eigenvalues")
        eigenvalues = covariance_spectrum(X)
    ev = np.maximum(np.asarray(eigenvalues, dtype=np.float64), 0.0)
    d = ev.shape[0]
    if d < 2:
        return 1.0
    top = ev.max()
    if top == 0:
        return 0.0
    ev = ev / top  # scale-free; also keeps tiny eigenvalues from underflowing when squared in the norm
    norm = np.linalg.norm(ev)
    normed = ev * math.sqrt(d) / norm
    defect = np.linalg.norm(normed - 1.0) / math.sqrt(2.0 * (d - math.sqrt(d)))
    score = ((d - defect**2 * (d - math.sqrt(d))) ** 2 - d) / (d * (d - 1))
    return float(min(max(score, 0.0), 1.0))


def projection_2d(X: Any, *, normalize: bool = True) -> np.ndarray:
    """Coordinates (n x 2) on the top two right singular vectors of the uncentred rows.

    ``normalize=True`` scales rows to unit length first (cosine geometry). The origin
    is kept, so vectors in a narrow cone land away from it.
    """
    X = _as_float64(X, "vectors", min_rows=1)
    if normalize:
        X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), np.finfo(np.float64).tiny)
    if X.shape[1] < 2:
        return np.column_stack([X[:, 0], np.zeros(X.shape[0])])
    _, V = sorted_eigh(X.T @ X)
    return X @ V[:, :2]


# =========================================================================== sentence level


def _apply(name: str, transform: Any, X: np.ndarray) -> np.ndarray:
    if isinstance(transform, np.ndarray):
        Y = transform
        if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
            raise IsotropyError(f"vectors given for {name!r} have shape {Y.shape}; expected {X.shape[0]} rows")
        return np.asarray(Y, dtype=np.float64)
    expected = getattr(transform, "n_features_in_", None)
    if isinstance(expected, (int, np.integer)) and int(expected) != X.shape[1]:
        raise IsotropyError(
            f"transform {name!r} was fitted on {int(expected)}-dimensional vectors but these have "
            f"{X.shape[1]}; fit it on vectors of the same model and pooling"
        )
    try:
        Y = transform.transform(X)
    except IsotropyError as exc:
        raise IsotropyError(f"transform {name!r}: {exc}") from None
    return check_matrix(Y, f"output of transform {name!r}", dtype=np.float64)


def _describe(V: np.ndarray, n_pairs: int, seed: int, scatter_idx: np.ndarray, bin_edges: np.ndarray) -> dict[str, Any]:
    cos = average_cosine(V, n_pairs, seed, return_samples=True)
    samples = cos.pop("samples")
    evals, C = _spectra(V)
    total = float(evals.sum())
    counts, _ = np.histogram(np.clip(samples, -1.0, 1.0), bins=bin_edges)
    xy = projection_2d(V)[scatter_idx]
    norms = np.linalg.norm(V, axis=1)
    return {
        "dim": int(V.shape[1]),
        "average_cosine": cos,
        "partition_isotropy": _partition_ratio(V, C),
        "isoscore": isoscore(eigenvalues=evals),
        "dims_for_variance": _variance_dims(evals),
        "mean_norm": float(norms.mean()),
        # |mean vector| / mean |x|: 0 for centred data, 1 when every vector is the same.
        "mean_vector_norm_ratio": float(np.linalg.norm(V.mean(axis=0)) / max(norms.mean(), 1e-300)),
        "eigenvalues": evals.tolist(),
        "explained_variance_total": total,
        "cosine_histogram": {"edges": bin_edges.tolist(), "counts": counts.astype(int).tolist()},
        "projection": {"x": np.round(xy[:, 0], 5).tolist(), "y": np.round(xy[:, 1], 5).tolist()},
    }


def sentence_report(
    vectors: Any,
    transforms: Mapping[str, Any] | None = None,
    *,
    n_pairs: int = DEFAULT_PAIRS,
    seed: int = DEFAULT_SEED,
    scatter_points: int = SCATTER_POINTS,
    show_progress: bool | None = None,
) -> dict[str, Any]:
    """Sentence-level statistics of ``vectors`` and of each transform applied to them.

    ``transforms`` maps a display name to a fitted transform (anything with
    ``.transform(X)``: :class:`~isotropy.Whitening`, :class:`~isotropy.Flow`, a
    scikit-learn transformer) or to an array of already transformed vectors (same
    rows). Returns a JSON-ready dict: ``n_sentences``, ``dim``, ``n_pairs``, ``seed`` and
    ``representations`` = ``{"raw": {...}, name: {...}}``, each with ``average_cosine``
    (mean, std, sem), ``partition_isotropy``, ``isoscore``, ``dims_for_variance``
    (fractions 0.5 / 0.9 / 0.99), ``eigenvalues``, ``cosine_histogram`` and
    ``projection`` (the figures' data).
    """
    X = check_matrix(vectors, "vectors", min_rows=MIN_SENTENCES, dtype=np.float64)
    transforms = dict(transforms or {})
    if RAW in transforms:
        raise IsotropyError(f"{RAW!r} is reserved for the untransformed vectors; rename that transform")
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    scatter_idx = np.sort(rng.choice(n, size=min(n, scatter_points), replace=False))
    bin_edges = np.linspace(-1.0, 1.0, HIST_BINS + 1)
    reps: dict[str, Any] = {}
    with ProgressBar(1 + len(transforms), show_progress, "sentence statistics", min_total=1) as bar:
        reps[RAW] = _describe(X, n_pairs, seed, scatter_idx, bin_edges)
        bar.advance()
        for name, t in transforms.items():
            reps[str(name)] = _describe(_apply(str(name), t, X), n_pairs, seed, scatter_idx, bin_edges)
            bar.advance()
    return {"n_sentences": n, "dim": int(X.shape[1]), "n_pairs": int(n_pairs), "seed": int(seed), "representations": reps}
