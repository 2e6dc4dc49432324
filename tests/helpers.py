"""Small helpers shared by the tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    import os

    return Path(os.environ.get("ISOTROPY_DATA", ROOT.parent / "shared" / "data")).resolve()


def spearman_cos(a: np.ndarray, b: np.ndarray, gold: np.ndarray) -> float:
    """Spearman x 100 between the row-wise cosine of ``a`` and ``b`` and the gold scores."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(spearmanr(cos, gold).statistic * 100)
