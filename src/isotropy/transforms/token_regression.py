"""A static table fitted token by token to a teacher's sentence vectors, in closed form (layer 3).

A static model's sentence vector is the mean of its tokens' rows, ``A E``, where ``A`` (sentences x
vocabulary, sparse) holds ``count(t in s) / len(s)`` and ``E`` is the ``(V, d)`` table. Given a teacher's
vectors ``Y`` of the same sentences and a prior table ``E0`` (the distilled table with the sentence-level
teacher map folded in), :class:`TokenRegression` finds

    E = argmin  ||A E - Y||_F^2  +  lam * g * sum_t ||E_t - E0_t||^2

over the rows of the tokens the corpus shows (a token never seen keeps its prior row exactly). ``g`` is the
mean of ``diag(A^T A)`` over the seen tokens, so ``lam`` is in units of an average token's data weight:
``lam = 1`` lets a token of average weight move half-way between its prior row and what the corpus alone says.
Rare tokens (small ``diag(A^T A)``) stay near their prior, frequent ones follow the corpus.

Statistics: the normal equations need only ``G = A^T A`` (sparse, vocabulary x vocabulary: which tokens share
sentences), ``C = A^T Y`` (vocabulary x d), ``Y^T Y`` (d x d, for the objective's value) and the token counts,
all sums over sentences: :meth:`TokenRegression.partial_fit` adds a chunk, :meth:`merge` adds another shard's
sums, so the memory is bounded by the vocabulary (the pairs of tokens that co-occur), not by the corpus; ``C`` is
kept for the tokens seen so far only (``rows_``, grown by doubling). ``G`` is symmetric, so only its upper triangle
(diagonal included) is kept, in row blocks (:class:`~.gram_blocks.UpperBlocks`), and each chunk's triangle is
buffered as COO triplets that are summed into it (scipy.sparse's COO -> CSR sums duplicates) once
``FLUSH_TRIPLETS`` of them wait: one pass over the kept triangle per flush, not per chunk, and at most one block's
copy beside it while summing (a merge alike). The sums are the one-shot sums
to float64 rounding (only their order differs). ``gram_`` gives the full symmetric matrix on demand.
A linear map of the targets (``Y -> Y P``: a PCA to fewer dimensions) is applied to the sums afterwards
(``C P``, ``P^T Y^T Y P``), so the teacher is encoded once whatever the output width.

Solver: conjugate gradients on ``(G + lam g I) E = C + lam g E0`` (symmetric positive definite on the seen
tokens), all columns at once (one sparse-times-dense product per iteration for every column), Jacobi
preconditioned, warm-started at the prior rows. Written here rather than calling ``scipy.sparse.linalg.cg``
once per column, which would run ``d`` separate loops of sparse matrix-vector products; the products are
torch's sparse CSR product (multi-threaded; scipy.sparse's where torch lacks it, :func:`sparse_product`), 32 columns
at a time so that the block of the dense factor stays in cache, and the CG's updates run in place.
:meth:`solver` builds the seen tokens' system once for a grid of strengths: one float32 copy of the triangle's
off-diagonal pairs, written block by block (:func:`~.gram_blocks.strict_upper`), its product
``U X + U^T X + diag(G) X`` (:func:`~.gram_blocks.symmetric_product`). :meth:`error` gives ``||A E - Y||^2`` from the sums alone, so a held-out shard's statistics
score a fit (what ``isotropy distill --fit tokens`` uses to choose ``lam`` without labels).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from .._checks import check_int, check_matrix, check_number
from ..errors import IsotropyError
from .block_cg import block_cg as _block_cg
from .gram_blocks import UpperBlocks, spill_folder, strict_upper, symmetric_product

__all__ = ["TokenRegression", "NormalEquations", "pooling_matrix", "sparse_product", "FLUSH_TRIPLETS"]

FLUSH_TRIPLETS = 4_000_000  # buffered Gram triplets (16 bytes each) summed into the kept triangle at once


def pooling_matrix(flat: np.ndarray, lengths: np.ndarray, vocab_size: int):
    """The ``(n, V)`` CSR mean-pooling matrix of sentences given as flat token ids and their lengths."""
    from scipy.sparse import csr_matrix

    flat = np.asarray(flat, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= vocab_size):
        raise IsotropyError(f"token ids must lie in [0, {vocab_size}), got {flat.min()}..{flat.max()}")
    indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    if indptr[-1] != flat.size:
        raise IsotropyError(f"lengths sum to {indptr[-1]} but {flat.size} token ids were given")
    data = np.repeat(1.0 / np.maximum(lengths, 1), lengths)
    A = csr_matrix((data, flat, indptr), shape=(len(lengths), vocab_size))
    A.sum_duplicates()
    return A


class TokenRegression:
    """Streamed sums of the token-level least squares (module docs) and their regularised solve.

    ``partial_fit(flat, lengths, Y)``: one chunk of sentences (token ids, tokens per sentence, the
    teacher's ``(n, d)`` vectors); sentences with no token give no equation and are counted in
    ``skipped_``. ``merge(other)``; ``project(P)``; ``solve(prior, lam)``; ``error(E)``.
    """

    def __init__(self, vocab_size: int, dim: int):
        check_int(vocab_size, "the vocabulary size of a token regression")
        check_int(dim, "the width of a token regression")
        if int(vocab_size) < 1 or int(dim) < 1:
            raise IsotropyError(f"a token regression needs a vocabulary and a width, got {vocab_size} x {dim}")
        self.vocab_size, self.dim = int(vocab_size), int(dim)
        self._tri = UpperBlocks(self.vocab_size)  # G's upper triangle, in row blocks
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # chunk triangles not yet summed in
        self._pending_n = 0
        # A^T Y kept for the seen tokens only (the V x d array would hold mostly zeros): row _slot[t] of _buf is
        # token t's (-1: unseen), rows in order of first appearance (_ids), _buf grown by doubling so that a chunk's
        # new tokens cost no copy of the rows already kept
        self._slot = np.full(self.vocab_size, -1, dtype=np.int64)
        self._ids = np.zeros(0, dtype=np.int64)
        self._buf = np.zeros((0, self.dim), dtype=np.float64)
        self.yy_ = np.zeros((self.dim, self.dim), dtype=np.float64)
        self.counts_ = np.zeros(self.vocab_size, dtype=np.int64)
        self.n_ = 0
        self.skipped_ = 0

    # ------------------------------------------------------------------ statistics

    def partial_fit(self, flat: Any, lengths: Any, Y: Any) -> TokenRegression:
        """Add one chunk (a failed call changes nothing): ``flat`` and ``lengths`` integers (``lengths`` >= 0),
        ``Y`` real and finite; anything else is one IsotropyError line naming the row."""
        Y = check_matrix(Y, "the teacher's vectors (Y)")  # complex, text, NaN or inf: one line naming the row
        flat, lengths = _integers(flat, "token ids"), _integers(lengths, "lengths")
        if Y.shape[1] != self.dim:
            raise IsotropyError(f"the teacher's vectors must be {self.dim} wide, got shape {Y.shape}")
        if Y.shape[0] != len(lengths):
            raise IsotropyError(f"{len(lengths)} sentences but {Y.shape[0]} teacher vectors")
        if (lengths < 0).any():
            i = int(np.flatnonzero(lengths < 0)[0])
            raise IsotropyError(f"lengths must be >= 0 (tokens per sentence): sentence {i} (0-based) has {lengths[i]}")
        A = pooling_matrix(flat, lengths, self.vocab_size)
        keep = lengths > 0
        if not keep.all():
            A, Y = A[keep], Y[keep]
        self._add_pairs(A, flat, lengths[keep])
        cols = np.unique(A.indices)
        self._add_cross(cols, A.tocsc()[:, cols].T @ Y)
        self.yy_ += Y.T @ Y
        self.counts_ += np.bincount(flat, minlength=self.vocab_size)
        self.n_ += int(keep.sum())
        self.skipped_ += int((~keep).sum())
        return self

    def merge(self, other: TokenRegression) -> TokenRegression:
        """Add another accumulator's sums (another shard of the corpus)."""
        if not isinstance(other, TokenRegression) or (other.vocab_size, other.dim) != (self.vocab_size, self.dim):
            raise IsotropyError("can only merge a token regression of the same vocabulary and width")
        self._merge_pairs(other)
        self._add_cross(other._ids, other._kept())
        self.yy_ += other.yy_
        self.counts_ += other.counts_
        self.n_ += other.n_
        self.skipped_ += other.skipped_
        return self

    def project(self, P: Any) -> TokenRegression:
        """The same sums for the targets ``Y @ P`` (a new accumulator; ``P``: ``(d, k)``)."""
        P = check_matrix(P, "the projection P")  # a NaN would make every later solve return its start (W9)
        if P.shape[0] != self.dim:
            raise IsotropyError(f"a projection of {self.dim}-wide targets must have {self.dim} rows, got {P.shape}")
        out = type(self)(self.vocab_size, P.shape[1])
        self._share_pairs(out)
        out.counts_, out.n_, out.skipped_ = self.counts_.copy(), self.n_, self.skipped_
        out._slot, out._ids, out._buf = self._slot.copy(), self._ids.copy(), self._kept() @ P
        out.yy_ = P.T @ self.yy_ @ P
        return out

    def _add_pairs(self, A: Any, flat: np.ndarray, lengths: np.ndarray) -> None:
        """A chunk's token pairs (``A``: its pooling matrix, sentences without a token dropped; ``flat``,
        ``lengths``: the same sentences as ids): their Gram's upper triangle, buffered."""
        self._add_upper((A.T @ A).tocoo())

    def _merge_pairs(self, other: TokenRegression) -> None:
        self._flush()
        self._tri.add(other._blocks())  # block by block: at most one block's copy beside the two triangles

    def _share_pairs(self, out: TokenRegression) -> None:
        out._tri = self._blocks().copy()  # the blocks shared, not copied: a block is replaced by a sum, never changed

    def drop_pairs(self) -> None:
        """Forget the token pairs (the Gram), keeping the other sums: a held-out part once merged into the fit."""
        self.gram_ = None

    def _add_upper(self, gram: Any) -> None:
        """Buffer the upper triangle of a chunk's Gram (COO) as triplets; sum them in past ``FLUSH_TRIPLETS``."""
        keep = gram.row <= gram.col
        rows, cols, vals = gram.row[keep].astype(np.int32), gram.col[keep].astype(np.int32), gram.data[keep]
        self._pending.append((rows, cols, vals))
        self._pending_n += len(vals)
        if self._pending_n >= FLUSH_TRIPLETS:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        from scipy.sparse import coo_matrix

        rows, cols, vals = (np.concatenate(parts) for parts in zip(*self._pending, strict=True))
        self._pending, self._pending_n = [], 0
        shape = (self.vocab_size, self.vocab_size)
        chunk = coo_matrix((vals, (rows, cols)), shape=shape).tocsr()  # duplicates summed
        del rows, cols, vals
        self._tri.add(chunk)

    def _blocks(self) -> UpperBlocks:
        """The kept triangle's row blocks, every buffered triplet summed in."""
        self._flush()
        return self._tri

    def upper_(self):
        """The upper triangle of ``G = A^T A``, diagonal included (CSR, float64), as one matrix (built from the
        kept row blocks: a copy when there are several)."""
        return self._blocks().whole()

    @property
    def gram_(self):
        """``G = A^T A`` (V x V CSR, float64), built from the kept triangle on demand."""
        from scipy.sparse import diags

        U = self.upper_()
        return (U + U.T - diags(U.diagonal())).tocsr()

    @gram_.setter
    def gram_(self, value: Any) -> None:
        """Replace the Gram (its upper triangle is kept); None: an empty one (a consumed held-out part)."""
        from scipy.sparse import csr_matrix, triu

        self._pending, self._pending_n = [], 0
        self._tri = UpperBlocks(self.vocab_size, None if value is None else csr_matrix(triu(value), dtype=np.float64))

    @property
    def rows_(self) -> np.ndarray:
        """Ids of the tokens whose rows of ``A^T Y`` are kept (the seen tokens), sorted."""
        return np.sort(self._ids)

    @property
    def cross_(self) -> np.ndarray:
        """``A^T Y`` as a dense ``(V, d)`` array (rows of unseen tokens zero); built on demand."""
        out = np.zeros((self.vocab_size, self.dim), dtype=np.float64)
        out[self._ids] = self._kept()
        return out

    def _kept(self) -> np.ndarray:
        """The kept rows of ``A^T Y``, in the order of ``_ids``."""
        return self._buf[: len(self._ids)]

    def _cross_at(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``A^T Y`` for token ``ids`` (zero for a token no sentence held)."""
        slot = self._slot[np.asarray(ids, dtype=np.int64)]
        out = np.zeros((len(slot), self.dim), dtype=np.float64)
        out[slot >= 0] = self._buf[slot[slot >= 0]]
        return out

    def _add_cross(self, ids: np.ndarray, C: np.ndarray) -> None:
        """Add the rows ``C`` of ``A^T Y`` for the distinct token ``ids``, keeping rows for the new ones."""
        ids = np.asarray(ids, dtype=np.int64)
        new = ids[self._slot[ids] < 0]
        n = len(self._ids)
        if new.size:
            if n + new.size > len(self._buf):
                buf = np.zeros((max(2 * len(self._buf), n + new.size), self.dim), dtype=np.float64)
                buf[:n] = self._buf[:n]
                self._buf = buf
            self._slot[new] = np.arange(n, n + new.size)
            self._ids = np.concatenate([self._ids, new])
        self._buf[self._slot[ids]] += np.asarray(C, dtype=np.float64)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_buf"] = self._kept().copy()  # no spare capacity in a pickle (a Dask part's sums)
        state["_tri"], state["_pending"], state["_pending_n"] = self._blocks(), [], 0
        return state

    @property
    def seen(self) -> np.ndarray:
        """Ids of the tokens some sentence holds."""
        return np.flatnonzero(self._blocks().diagonal() > 0)

    def error(self, E: Any) -> float:
        """``sum_s ||mean-pool(E, s) - y_s||^2`` over the sentences added, from the sums alone."""
        E = check_matrix(E, "the table E")
        if E.shape != (self.vocab_size, self.dim):
            raise IsotropyError(f"the table E must be {self.vocab_size} x {self.dim}, got {E.shape}")
        return float(self._quadratic(E) - 2 * self._cross_term(E) + np.trace(self.yy_))

    def _quadratic(self, E: np.ndarray) -> float:
        return self._blocks().quadratic(E)  # E^T G E from the triangle, block by block

    def _cross_term(self, E: np.ndarray) -> float:
        """``sum(E * A^T Y)`` over the kept rows, 4096 rows at a time (no ``(V, d)`` temporary)."""
        step = 4096
        return sum(float(np.sum(E[self._ids[a : a + step]] * self._kept()[a : a + step])) for a in range(0, len(self._ids), step))

    # ------------------------------------------------------------------ solving

    @contextlib.contextmanager
    def spilled(self):
        """While inside, the kept triangle waits in a temporary directory, its memory freed (:meth:`solver` reads it
        a block at a time; :class:`~.gram_blocks.UpperBlocks`), and it is read back on the way out; where the disk
        refuses it, it stays in memory."""
        tri = self._blocks()
        with contextlib.ExitStack() as stack:
            try:
                path = stack.enter_context(spill_folder())
            except OSError:
                yield self
                return
            tri.spill(path)
            try:
                yield self
            finally:
                tri.restore()

    def solver(self, prior: Any, *, dtype: Any = np.float32) -> NormalEquations:
        """The normal equations on the seen tokens, built once for every strength :meth:`NormalEquations.solve` is
        asked for (the Gram restricted to the seen tokens, its diagonal, ``A^T Y``, the prior's rows)."""
        if np.shape(prior) != (self.vocab_size, self.dim):
            raise IsotropyError(f"the prior table must be {self.vocab_size} x {self.dim}, got {np.shape(prior)}")
        prior = check_matrix(prior, "the prior table")  # a NaN row: the CG would stop at once on the prior (W8)
        seen = self.seen
        if seen.size == 0:
            raise IsotropyError("no sentence held a token of the vocabulary: nothing to fit")
        strict, diag = strict_upper(self._blocks(), seen, dtype)  # one float32 copy of the pairs (module docs)
        return NormalEquations(strict, self._cross_at(seen), prior, seen, dtype, diag=diag, symmetric=True)

    def solve(
        self,
        prior: Any,
        lam: float,
        *,
        x0: Any = None,
        rtol: float = 1e-3,
        maxiter: int = 200,
        dtype: Any = np.float32,
        progress: Any = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """The regularised table (module docs) and ``{"iterations", "residual", "seen", "scale"}``: one strength,
        ``self.solver(prior, dtype=dtype).solve(lam, ...)`` (:meth:`NormalEquations.solve`)."""
        check_number(lam, "the regularisation strength", positive=True)  # before the system is built
        return self.solver(prior, dtype=dtype).solve(lam, x0=x0, rtol=rtol, maxiter=maxiter, progress=progress)


class NormalEquations:
    """``(G + lam g I) E = C + lam g E0`` on the seen tokens (module docs), for any strength ``lam``.

    Made by :meth:`TokenRegression.solver`; the sparse Gram is converted once, so a grid of strengths pays for
    it once. The iterations run in ``dtype`` (float32 halves the sparse products' time, ample for rtol 1e-3)."""

    def __init__(
        self,
        gram: Any,
        cross: np.ndarray,
        prior: np.ndarray,
        seen: np.ndarray,
        dtype: Any,
        *,
        diag: Any = None,
        symmetric: bool = False,
    ):
        """``gram``: G on the seen tokens, or a tuple of matrices that sum to it, or (``symmetric``) its strict upper
        triangle, G being ``gram + gram^T + diag`` (:meth:`TokenRegression.solver`)."""
        self.prior, self.seen, self.dtype = prior, seen, np.dtype(dtype)
        halves = gram if isinstance(gram, tuple) else (gram,)
        self.diag = halves[0].diagonal() if diag is None else np.asarray(diag, dtype=np.float64)
        self.scale = float(self.diag.mean())
        self.cross = cross
        if symmetric:
            self.product = symmetric_product(gram, self.diag, self.dtype, sparse_product, _by_columns)
        else:
            products = [sparse_product(h, self.dtype) for h in halves]
            self.product = products[0] if len(products) == 1 else _summed(products)
        self._gap: float | None = None  # ||C - G E0||, for :meth:`_at_prior`

    def solve(
        self, lam: float, *, x0: Any = None, rtol: float = 1e-3, maxiter: int = 200, progress: Any = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """The table at strength ``lam`` and ``{"iterations", "residual", "seen", "scale"}``.

        ``x0``: a ``(V, d)`` start for the seen rows (default: the prior's); stops when every column's residual is
        below ``rtol`` times its right-hand side's norm. ``progress``: called with the iteration number after each.
        A strength so large that the fit cannot move a row by a float's resolution (``--lam 1e300``) gives the prior
        itself, exactly, with ``"at_prior": True`` (the limit of the solution; iterating would overflow)."""
        lam = check_number(lam, "the regularisation strength", positive=True)
        reg = lam * self.scale
        dt = self.dtype
        rows = self.prior[self.seen]
        if x0 is not None:
            x0 = check_matrix(x0, "the start x0")
            if x0.shape != self.prior.shape:
                raise IsotropyError(f"the start x0 must be {self.prior.shape[0]} x {self.prior.shape[1]}, got {x0.shape}")
        if self._at_prior(reg, rows):
            info = {"iterations": 0, "residual": 0.0, "seen": int(self.seen.size), "scale": self.scale, "at_prior": True}
            return self.prior.copy(), info
        B = np.empty(rows.shape, dtype=dt)
        for a in range(0, len(rows), 4096):  # in float64 and rounded once, as one expression would, without (V, d) temporaries
            B[a : a + 4096] = self.cross[a : a + 4096] + reg * rows[a : a + 4096]
        X = np.array(rows if x0 is None else np.asarray(x0)[self.seen], dtype=dt)
        del rows
        inv = (1.0 / (self.diag + reg)[:, None]).astype(dt)
        reg_dt = dt.type(reg)

        def apply(P: np.ndarray) -> np.ndarray:
            out = self.product(P)
            out += reg_dt * P
            return out

        it, res = _block_cg(apply, B, X, inv, rtol, maxiter, progress)
        out = self.prior.copy()
        out[self.seen] = X
        return out, {"iterations": it, "residual": res, "seen": int(self.seen.size), "scale": self.scale}

    def _at_prior(self, reg: float, rows: np.ndarray) -> bool:
        """Whether the solution is the prior to ``dtype``'s resolution: the move ``E - E0 = (G + reg I)^-1 (C - G E0)``
        is at most ``||C - G E0|| / reg`` (G is positive semi-definite), checked before ``reg`` overflows the solve."""
        if not np.isfinite(reg):
            return True
        if self._gap is None:  # the same for every strength: one sparse product per system
            self._gap = float(np.linalg.norm(self.cross - self.product(rows.astype(self.dtype)).astype(np.float64)))
        gap = self._gap
        resolution = np.finfo(self.dtype).eps * max(float(np.linalg.norm(rows)), float(np.finfo(self.dtype).tiny))
        if gap / reg <= resolution:
            return True
        if not np.isfinite(self.dtype.type(reg)) or not np.isfinite(reg * float(np.abs(rows).max(initial=0.0))):
            raise IsotropyError(f"the regularisation strength is too large to solve in {self.dtype} (lam x scale = {reg:g})")
        return False


def _summed(products: list) -> Any:
    """``X -> sum of products(X)``: the Gram's product from its two triangles."""

    def product(X: np.ndarray) -> np.ndarray:
        out = products[0](X)
        for p in products[1:]:
            out += p(X)
        return out

    return product


def _integers(values: Any, what: str) -> np.ndarray:
    """``values`` as a 1-D int64 array when they are integers (integral floats too: an empty list is float); else
    one IsotropyError line naming the first that is not (``3.5`` is refused, not truncated)."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise IsotropyError(f"{what} must be integers: {exc}") from None
    if arr.ndim != 1:
        raise IsotropyError(f"{what} must be a 1-D sequence of integers, got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "f" or (arr.size == 0 and arr.dtype.kind not in "bc"):
        bad = ~np.isfinite(arr) | (arr != np.round(arr)) if arr.dtype.kind == "f" else np.zeros(0, dtype=bool)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise IsotropyError(f"{what} must be integers: position {i} (0-based) is {arr[i].item()!r}")
        return arr.astype(np.int64)
    raise IsotropyError(f"{what} must be integers, got values of type {arr.dtype}")


def sparse_product(matrix: Any, dtype: Any = np.float32):
    """``X -> matrix @ X`` for dense ``X`` (the CG's one costly step): torch's CSR product, which runs on every
    intra-op thread (scipy.sparse's is single-threaded; 1.5x faster on this 2-core machine, BENCHMARKS
    `token-solve`, equal to rounding), or scipy's where torch's sparse CSR is unavailable."""
    from scipy.sparse import csr_matrix

    M = csr_matrix(matrix, dtype=dtype)
    try:
        import warnings

        import torch

        index = torch.int32 if M.nnz < 2**31 else torch.int64
        with warnings.catch_warnings():  # torch says its sparse CSR support is "in beta": nothing for a user to do
            warnings.simplefilter("ignore", UserWarning)
            T = torch.sparse_csr_tensor(
                torch.from_numpy(M.indptr).to(index),
                torch.from_numpy(M.indices).to(index),
                torch.from_numpy(M.data),
                size=M.shape,
                check_invariants=False,
            )
    except Exception:  # an old torch without sparse CSR: scipy's product
        return lambda X: _by_columns(lambda block: M @ block, X)

    def product(X: np.ndarray) -> np.ndarray:
        return _by_columns(lambda block: (T @ torch.from_numpy(block)).numpy(), X)

    return product


PRODUCT_COLUMNS = 32  # columns of the dense factor per sparse product (BENCHMARKS `token-solve`)


def _by_columns(product: Any, X: np.ndarray) -> np.ndarray:
    """``product`` applied to ``PRODUCT_COLUMNS`` columns of ``X`` at a time. Each nonzero of the sparse factor reads
    one row of the dense one; a block of 32 columns (2.3 MB for 18k tokens in float32) stays in a core's cache
    between those reads, where the whole 256-column factor (19 MB) does not (BENCHMARKS `token-solve` times both)."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] <= PRODUCT_COLUMNS:
        return product(np.ascontiguousarray(X))
    out = None
    for a in range(0, X.shape[1], PRODUCT_COLUMNS):
        part = product(np.ascontiguousarray(X[:, a : a + PRODUCT_COLUMNS]))
        if out is None:
            out = np.empty((part.shape[0], X.shape[1]), dtype=part.dtype)
        out[:, a : a + PRODUCT_COLUMNS] = part
    return out
