"""The upper triangle of a token Gram ``G = A^T A`` kept in row blocks, and the solver's float32 system made from it
(layer 3, below :mod:`.token_regression`).

Why blocks: at a million lines the triangle holds ~50M token pairs (~600 MB in float64). Kept as one CSR matrix,
every sum into it (a flush of buffered chunk triplets, a merge of another shard's sums) builds the whole new matrix
beside the old one, doubling the triangle for a moment. Kept as consecutive row ranges, each at most ``BLOCK_NNZ``
entries (a block that grows past it is cut in two at its middle entry), a sum replaces one block at a time: at most
one block's copy beside the triangle. Each block is a scipy.sparse CSR matrix of its rows (all ``size`` columns),
summed with scipy's own ``+`` and sliced with its row slicing; only the bookkeeping of the ranges is written here,
since scipy.sparse has no row-partitioned matrix.

While the solver runs on its float32 system, the float64 blocks it was made from can wait in files
(:meth:`UpperBlocks.spill`, scipy.sparse's ``save_npz``; :meth:`UpperBlocks.restore` reads them back): the exact
sums are needed again only after the solve (the held-out sums merged in), not beside the system. Each file's sha256
is kept when it is written and checked when it is read back: a block changed on disk while it waited is one error
naming the file, never a wrong sum. The files go in a folder of :func:`spill_folder`, which also removes the folders
of runs that were killed (SIGKILL gives no chance to clean up; at a million lines one holds ~600 MB).

The solver's system (:func:`strict_upper`) is the triangle without its diagonal, in float32, on the seen tokens,
written block by block into arrays allocated once (no float64 or int64 copy of the whole), and its product
(:func:`symmetric_product`) is ``U X + U^T X + diag(G) X``: one float32 copy of the pairs instead of two halves.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._math import usable_cores
from ..errors import IsotropyError
from ..storage.artifacts import file_sha256

__all__ = ["UpperBlocks", "strict_upper", "symmetric_product", "spill_folder", "BLOCK_NNZ", "SPILL_PREFIX"]

BLOCK_NNZ = 1 << 22  # entries of a block (48 MB in float64 with its int32 indices) before it is cut in two


class UpperBlocks:
    """The upper triangle (diagonal included) of a ``size x size`` symmetric matrix in row blocks (module docs).

    ``blocks``: ``[(first row, stop row, CSR of those rows)]``, consecutive, covering ``0..size``. A block is
    replaced by a sum, never changed in place, so two owners may share blocks (:meth:`copy`)."""

    def __init__(self, size: int, upper: Any = None):
        from scipy.sparse import csr_matrix

        self.size = int(size)
        self.blocks: list[tuple[int, int, Any]] = [(0, self.size, csr_matrix((self.size, self.size), dtype=np.float64))]
        if upper is not None:
            self.add(csr_matrix(upper, dtype=np.float64))

    @property
    def nnz(self) -> int:
        return sum(M.nnz for _, _, M in self.blocks)  # a spilled block keeps its nnz

    def spill(self, directory: str) -> bool:
        """Move every block to a file in ``directory`` (its memory freed once no other owner holds it); False, and
        every block kept in memory, when the disk refuses one (full, read-only)."""
        from scipy.sparse import save_npz

        moved = []
        try:
            for i, (a, b, M) in enumerate(self.blocks):
                if not isinstance(M, _Spilled):
                    path = os.path.join(directory, f"gram-{id(self):x}-{i}.npz")
                    save_npz(path, M, compressed=False)
                    moved.append((i, M))
                    self.blocks[i] = (a, b, _Spilled(path, M.nnz, file_sha256(path)))
        except OSError:
            for i, M in moved:
                self.blocks[i] = (*self.blocks[i][:2], M)
            return False
        del moved
        release_freed_memory()
        return True

    def restore(self) -> None:
        """Read the spilled blocks back into memory (their files removed)."""
        self.blocks = [(a, b, _load(M)) for a, b, M in self.blocks]

    def copy(self) -> UpperBlocks:
        """Another owner of the same blocks (cheap: a sum into either replaces its own list's block)."""
        out = UpperBlocks.__new__(UpperBlocks)
        out.size, out.blocks = self.size, list(self.blocks)
        return out

    def rows(self, a: int, b: int):
        """Rows ``a..b`` as one CSR matrix (a block itself when the range is one block's)."""
        from scipy.sparse import csr_matrix, vstack

        parts = [
            _load(M, False)[max(a, s) - s : min(b, e) - s] if (s, e) != (a, b) else _load(M, False)
            for s, e, M in self.blocks
            if s < b and e > a
        ]
        if not parts:
            return csr_matrix((b - a, self.size), dtype=np.float64)
        return parts[0] if len(parts) == 1 else vstack(parts, format="csr")

    def whole(self):
        """The triangle as one CSR matrix (a copy unless it is one block)."""
        return self.rows(0, self.size)

    def add(self, upper: Any) -> None:
        """Sum ``upper`` (a ``size x size`` CSR of upper-triangle entries, or another :class:`UpperBlocks`) in,
        block by block. A spilled block's sum is spilled again beside it: summing into a spilled triangle holds
        one block in memory at a time (a held-out part merged in before the final solve)."""
        out, old = [], self.blocks
        for i, (a, b, M) in enumerate(old):
            old[i] = None  # the old block goes as soon as its sum is made (this list is this owner's alone)
            where = os.path.dirname(M.path) if isinstance(M, _Spilled) else None
            M = _load(M)
            part = upper.rows(a, b) if isinstance(upper, UpperBlocks) else upper[a:b]
            pieces = [(a, b, M)]
            if part.nnz:
                M = part.tocsr() if M.nnz == 0 else (M + part).tocsr()
                M.sum_duplicates()  # canonical (sorted, summed): what strict_upper reads
                pieces = _split(a, b, M)
            if where is not None:  # back to disk
                pieces = [(s, e, _spill_one(P, where)) for s, e, P in pieces]
            out += pieces
            del part, M, pieces
            if where is not None:  # its memory back to the system before the next block is read (heap holes)
                release_freed_memory()
        self.blocks = out
        release_freed_memory()

    def diagonal(self) -> np.ndarray:
        return np.concatenate([_load(M, False).diagonal(k=a) for a, _, M in self.blocks])

    def quadratic(self, E: np.ndarray) -> float:
        """``sum(E * (G E))`` from the triangle (off-diagonal pairs twice, the diagonal once), block by block."""
        total = 0.0
        for a, b, M in self.blocks:
            if M.nnz:
                M, rows = _load(M, False), E[a:b]
                total += 2 * float(np.sum(rows * (M @ E))) - float(np.sum(M.diagonal(k=a)[:, None] * rows * rows))
        return total


def release_freed_memory() -> None:
    """Hand the heap's freed pages back to the system (glibc's ``malloc_trim``; nothing where it is absent).

    Written by hand because no library does it: a block's arrays (up to 32 MB) sit under glibc's mmap threshold, so
    they live on the heap, and a freed block in the middle of the heap (a block replaced by its sum, a block spilled
    to disk) stays resident until the heap is trimmed: at a million lines that kept ~500 MB of freed blocks resident
    beside the solver's system."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, looked up once; None where the C library has none (musl, macOS, Windows)."""
    import ctypes

    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


class _Spilled:
    """A block waiting in a file (:meth:`UpperBlocks.spill`), with the file's sha256 when it was written."""

    def __init__(self, path: str, nnz: int, digest: str):
        self.path, self.nnz, self.digest = path, nnz, digest


_SPILLED_NAMES = itertools.count()


def _spill_one(M: Any, directory: str) -> Any:
    """``M`` written to a new file in ``directory`` (a :class:`_Spilled`), or ``M`` itself where the disk refuses."""
    from scipy.sparse import save_npz

    path = os.path.join(directory, f"gram-{os.getpid()}-s{next(_SPILLED_NAMES)}.npz")
    try:
        save_npz(path, M, compressed=False)
        return _Spilled(path, M.nnz, file_sha256(path))
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(path)
        return M


def _load(M: Any, remove: bool = True):
    """A block's matrix, read from its file if it was spilled (the file removed with ``remove``)."""
    if not isinstance(M, _Spilled):
        return M
    from scipy.sparse import load_npz

    if file_sha256(M.path) != M.digest:  # read twice (the second time from the page cache): no second copy in memory
        raise IsotropyError(f"{M.path}: a block of the token fit's sums changed on disk while it waited there: run again")
    out = load_npz(M.path).tocsr()
    if remove:
        os.remove(M.path)
    return out


SPILL_PREFIX = "isotropy-gram-"  # spill folders, in the system's temporary folder
_OWNER = ".owner"  # in each spill folder: locked (flock) by the process that uses it, for its whole life


@contextlib.contextmanager
def spill_folder() -> Iterator[str]:
    """A new folder for spilled blocks in the system's temporary folder, removed on the way out, after removing the
    folders of runs of ours that were killed (:func:`_sweep`).

    Written by hand because ``tempfile.TemporaryDirectory`` cannot tell a folder of a run that was killed from one in
    use: here the process that uses a folder holds an ``flock`` on its ``.owner`` file (the kernel drops it when the
    process dies, however it dies), taken before the folder gets its final name, so a sweep never sees a folder
    whose owner has not locked it yet. Raises OSError where the folder cannot be made."""
    import fcntl

    base = tempfile.gettempdir()
    _sweep(base)
    new = tempfile.mkdtemp(prefix="." + SPILL_PREFIX, dir=base)  # a name the sweep never matches
    fd = -1
    try:
        fd = os.open(os.path.join(new, _OWNER), os.O_CREAT | os.O_WRONLY, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = os.path.join(base, os.path.basename(new)[1:])
        os.rename(new, path)
    except OSError:
        shutil.rmtree(new, ignore_errors=True)
        if fd >= 0:
            os.close(fd)
        raise
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)  # before the lock goes: no sweep removes it under us
        os.close(fd)


def _sweep(base: str) -> None:
    """Remove ``base``'s spill folders left by runs that were killed: this user's, named as :func:`spill_folder`
    names them, holding nothing but its ``.owner`` file and block files, and whose ``.owner`` lock can be taken (no
    process holds it). Anything else, and every error, is left alone."""
    import fcntl

    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if not (entry.name.startswith(SPILL_PREFIX) and entry.is_dir(follow_symlinks=False)):
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                    continue
                names = os.listdir(entry.path)
                if _OWNER not in names or not all(n == _OWNER or re.fullmatch(r"gram-[0-9a-fs-]+\.npz", n) for n in names):
                    continue
                fd = os.open(os.path.join(entry.path, _OWNER), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError (an OSError): in use
                    shutil.rmtree(entry.path, ignore_errors=True)
                finally:
                    os.close(fd)


def _split(a: int, b: int, M: Any) -> list[tuple[int, int, Any]]:
    """``M`` (rows ``a..b``) cut at its middle entry until every piece holds at most ``BLOCK_NNZ`` (or one row)."""
    out, todo = [], [(a, b, M)]
    while todo:
        a, b, M = todo.pop()
        if M.nnz <= BLOCK_NNZ or b - a < 2:
            out.append((a, b, M))
            continue
        cut = min(max(int(np.searchsorted(M.indptr, M.nnz // 2)), 1), b - a - 1)
        todo += [(a + cut, b, M[cut:]), (a, a + cut, M[:cut])]  # the first piece is popped (and kept) first
        del M
    return out


def strict_upper(tri: UpperBlocks, seen: np.ndarray, dtype: Any):
    """``(U, diag)``: the triangle's off-diagonal entries on the ``seen`` tokens (every token with an entry; their
    rows and columns renumbered in order) as a CSR matrix in ``dtype``, and the diagonal of those tokens in float64.

    Written into arrays allocated once, block by block: a block's temporaries (its row of each entry) are the only
    other memory. An unseen token's row and column are empty (its diagonal would be positive), so the seen rows
    are the triangle's non-empty rows, in order."""
    from scipy.sparse import csr_matrix

    where = np.full(tri.size, -1, dtype=np.int32)
    where[seen] = np.arange(seen.size, dtype=np.int32)
    nnz = tri.nnz - seen.size  # the diagonal left out
    index = np.int32 if nnz < 2**31 else np.int64
    counts, diag = np.zeros(tri.size, dtype=np.int64), np.zeros(tri.size)
    data, indices = np.empty(nnz, dtype=dtype), np.empty(nnz, dtype=index)
    at = 0
    for a, b, M in tri.blocks:  # in order: the seen rows' entries follow each other (a spilled block read once)
        if not M.nnz:
            continue
        M = _load(M, False)
        rows = np.repeat(np.arange(a, b, dtype=np.int32), np.diff(M.indptr))
        off = M.indices != rows
        diag[a:b] = M.diagonal(k=a)
        counts[a:b] = np.bincount(rows[off] - a, minlength=b - a)
        n = int(off.sum())
        data[at : at + n] = M.data[off]
        indices[at : at + n] = where[M.indices[off]]
        at += n
        del M, rows, off
        release_freed_memory()  # a spilled block read for this: its arrays freed on the heap, handed back
    if at != nnz or np.any(diag[seen] <= 0):  # a row with pairs but no diagonal entry: not a Gram of sentences
        raise ValueError("the Gram's triangle has an off-diagonal entry in a row without its diagonal")
    indptr = np.zeros(seen.size + 1, dtype=index)
    np.cumsum(counts[seen], out=indptr[1:])
    return csr_matrix((data, indices, indptr), shape=(seen.size, seen.size), copy=False), diag[seen]


def symmetric_product(upper: Any, diag: np.ndarray, dtype: Any, product: Any, by_columns: Any, parts: int | None = None):
    """``X -> (U + U^T + diag) X`` for the strict upper triangle ``U`` (:func:`strict_upper`): ``U X`` by
    ``product(U, dtype)`` (the threaded CSR product), ``U^T X`` by scipy.sparse's CSC product of the same arrays on
    ``parts`` threads (:func:`_transposed_product`; None: one per core), a few columns at a time (``by_columns(f,
    X)``: the blocks of ``X`` stay in cache). The CSC matrices are views: no second copy of the pairs (torch's
    product of a CSC tensor converts it to CSR on every call, 6x slower)."""
    forward = product(upper, dtype)
    transposed = _transposed_product(upper, parts)

    d = np.asarray(diag, dtype=dtype)[:, None]

    def columns(block: np.ndarray) -> np.ndarray:
        out = forward(block)
        out += transposed(block)
        out += d * block
        return out

    def apply(X: np.ndarray) -> np.ndarray:
        return by_columns(columns, X)  # every temporary a block of columns, not (V, d)

    return apply


def _transposed_product(upper: Any, parts: int | None = None):
    """``X -> U^T X`` for a CSR ``U``: ``sum_i U_i^T X_i`` over ``parts`` row ranges of ``U`` of equal entries (one per
    core: ``usable_cores``), each range's CSC product on its own thread, summed in a fixed order.

    Written by hand because scipy.sparse's product runs on one core (it releases the GIL, so threads run it side by
    side), and on one core this half took most of the symmetric product's time (BENCHMARKS `token-product`). The
    ranges are views of ``U``'s arrays (``U_i^T`` a CSC view of each): no copy of the pairs, which at a million lines
    are the solver's largest array."""
    from concurrent.futures import ThreadPoolExecutor

    from scipy.sparse import csc_matrix

    parts = max(1, min(usable_cores() if parts is None else int(parts), 8, upper.shape[0]))
    if parts == 1 or upper.nnz == 0:
        whole = upper.T  # CSC view of the same data
        return lambda X: whole @ X
    cuts = {int(np.searchsorted(upper.indptr, upper.nnz * k // parts)) for k in range(1, parts)}
    ends = sorted(cuts | {0, upper.shape[0]})
    ranges = []
    for a, b in itertools.pairwise(ends):
        s, e = upper.indptr[a], upper.indptr[b]
        part = csc_matrix((upper.shape[1], b - a), dtype=upper.dtype)  # U_i^T: rows a..b of U as its columns
        # set, not passed to the constructor: it copies a view of under half its array (scipy's _prune_array)
        part.data, part.indices = upper.data[s:e], upper.indices[s:e]
        part.indptr = (upper.indptr[a : b + 1] - s).astype(upper.indptr.dtype)
        ranges.append((a, b, part))
    pool = ThreadPoolExecutor(len(ranges), thread_name_prefix="isotropy-gram")

    def apply(X: np.ndarray) -> np.ndarray:
        out, *rest = pool.map(lambda r: r[2] @ X[r[0] : r[1]], ranges)
        for part in rest:
            out += part
        return out

    apply.ranges = ranges  # type: ignore[attr-defined]  # (first row, stop row, U_i^T): what a test checks is a view
    return apply
