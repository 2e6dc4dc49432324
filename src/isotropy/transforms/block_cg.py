"""Conjugate gradients on every column of a symmetric positive definite system at once (layer 3, below
:mod:`.token_regression`, whose solver runs it). Written here because scipy.sparse.linalg.cg solves one right-hand
side at a time: ``d`` separate loops of sparse products instead of one product per iteration for every column."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["block_cg", "column_dot"]


def block_cg(apply: Any, B: np.ndarray, X: np.ndarray, inv: np.ndarray, rtol: float, maxiter: int, progress: Any):
    """Jacobi-preconditioned conjugate gradients on every column of ``M X = B`` at once (``apply(P)``: ``M @ P``;
    ``X`` updated in place). The updates run in place on buffers kept for the whole solve: each ``(V, d)`` temporary
    costs a pass over memory as long as a cheap sparse product's. ``B`` is overwritten (it becomes the residual)."""
    bnorm = np.maximum(np.sqrt(column_dot(B, B)), 1e-300)
    R = B  # B's buffer becomes the residual: one (V, d) array fewer
    R -= apply(X)
    Z = inv * R
    P = Z.copy()
    step = np.empty_like(P)
    rz = column_dot(R, Z)
    worst = float(np.max(np.sqrt(column_dot(R, R)) / bnorm))
    it = 0
    while worst > rtol and it < maxiter:
        Q = apply(P)
        pq = column_dot(P, Q)
        alpha = np.divide(rz, pq, out=np.zeros_like(rz), where=pq > 0).astype(X.dtype)
        X += np.multiply(P, alpha, out=step)
        R -= np.multiply(Q, alpha, out=step)
        np.multiply(inv, R, out=Z)
        rz_new = column_dot(R, Z)
        beta = np.divide(rz_new, rz, out=np.zeros_like(rz), where=rz > 0).astype(X.dtype)
        P *= beta
        P += Z
        rz = rz_new
        it += 1
        worst = float(np.max(np.sqrt(column_dot(R, R)) / bnorm))
        if progress is not None:
            progress(it)
    return it, worst


def column_dot(U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """The dot product of each column of ``U`` with the same column of ``V``, summed in float64."""
    return np.einsum("ij,ij->j", U, V, dtype=np.float64)
