"""Pieces of linear algebra several layers share, and how many threads they may run (layer 1)."""

from __future__ import annotations

import os

import numpy as np

__all__ = ["cosine_rows", "sorted_eigh", "usable_cores"]


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two equally shaped matrices (float64)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    denom = np.maximum(na * nb, np.finfo(np.float64).tiny)
    return np.einsum("ij,ij->i", a, b) / denom


def sorted_eigh(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and eigenvectors of a symmetric matrix, each vector's
    largest-magnitude entry made positive, so that refits on the same statistics agree.

    LAPACK's symmetric solver is a long chain of small BLAS calls: with OpenBLAS threads on
    a busy machine it measured 100x slower (4.8 s instead of 0.03 s for d=384), so it runs
    on one thread (threadpoolctl is the maintained way to say so).
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        evals, U = np.linalg.eigh(matrix)
    evals, U = evals[::-1].copy(), U[:, ::-1].copy()
    signs = np.sign(U[np.abs(U).argmax(axis=0), np.arange(U.shape[1])])
    signs[signs == 0] = 1.0
    return evals, U * signs


def usable_cores(cap: int = 8) -> int:
    """The cores this process may run on (its CPU affinity where the OS has one), at most ``cap``: the threads of the
    static encoder's pool and of the token solve's transposed product."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(n, cap))
