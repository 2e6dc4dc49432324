"""The files a loaded index reads through a memory map, watched for a shrink (layer 5).

A compressed index (``ivfpq``, ``opq``) is memory-mapped: its ``index.faiss`` (faiss's ``IO_FLAG_MMAP``), the
on-disk inverted lists of a Dask-built one (``index.ivfdata``) and the kept exact vectors (``vectors.npy``).
Reading a mapped page past the end of a file that shrank kills the process with SIGBUS, which no
``try`` catches. So each mapped file is measured against the bytes the index will read from it
(:func:`ondisk_bytes_needed`, :func:`npy_bytes_needed`) when it is loaded, and held open: one ``fstat``
of each before every search (:meth:`MappedFiles.check`) tells whether one was cut short since (``cp``
over it truncates the same inode), and the search is refused with one line instead.

A file replaced by a rename is no danger (the map holds the old inode); the window between the
``fstat`` and the read remains, which only reading the files without a map would close.

faiss's on-disk inverted lists also read their map outside a search: ``IndexIVF.search`` starts up to
``prefetch_nthread`` (32) threads that page the probed lists in beside it, and returns without waiting for
them. One still reading when the file is cut short between two requests kills the process just the same, so
every search of such an index ends by joining them (:meth:`MappedFiles.settle`): between searches nothing
reads a mapped page. A compressed index memory-mapped whole (``IO_FLAG_MMAP``) has such lists too: faiss reads its
inverted lists as ``OnDiskInvertedLists`` over ``index.faiss`` itself.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError

__all__ = ["MappedFiles", "ondisk_bytes_needed", "npy_bytes_needed"]


def ondisk_bytes_needed(lists: Any) -> int:
    """The bytes of faiss ``OnDiskInvertedLists`` a search may read: each list holds ``capacity`` codes of
    ``code_size`` bytes from its ``offset``, then its ids (8 bytes each); the ``size`` first of both are read."""
    code_size, needed = int(lists.code_size), 0
    for i in range(int(lists.nlist)):
        one = lists.lists.at(i)
        if one.size:
            needed = max(needed, int(one.offset) + int(one.capacity) * code_size + int(one.size) * 8)
    return needed


def npy_bytes_needed(file: Path) -> int | None:
    """The header and data bytes of a ``.npy`` file, read from its header by numpy's own readers
    (None: a header version they do not read; ValueError: no header)."""
    fmt = np.lib.format
    with open(file, "rb") as fh:
        reader = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(fmt.read_magic(fh))
        if reader is None:
            return None
        shape, _, dtype = reader(fh)
        return fh.tell() + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:  # pragma: no cover - already closed
            pass


class MappedFiles:
    """The memory-mapped files of one loaded index: ``(file, fd, bytes needed)``, closed with the index."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.files: list[tuple[Path, int, int]] = []
        self.prefetching = False  # faiss's on-disk inverted lists, whose prefetch threads settle() joins
        self._fds: list[int] = []
        weakref.finalize(self, _close_all, self._fds)

    def add(self, file: Path, needed: int, what: str) -> None:
        """Hold ``file`` open and refuse it now if it holds fewer than ``needed`` bytes."""
        fd = os.open(file, os.O_RDONLY)
        self._fds.append(fd)
        self.files.append((Path(file), fd, int(needed)))
        have = os.fstat(fd).st_size
        if have < needed:
            raise IsotropyError(
                f"{file} holds {have:,} bytes but {what} need {needed:,}: it was truncated; restore it or rebuild the index"
            )

    def settle(self, index: Any) -> None:
        """Join the prefetch threads a search of ``index`` (the faiss index these files belong to) left reading
        its on-disk inverted lists: faiss joins them at the next ``prefetch_lists`` call, and one of no lists
        stops them after the list each is reading and starts none."""
        if self.prefetching:
            import faiss  # loaded already: the index is faiss's

            faiss.downcast_InvertedLists(faiss.extract_index_ivf(index).invlists).prefetch_lists(None, 0)

    def check(self) -> None:
        """One ``fstat`` a file: IsotropyError when one shrank below what the index reads from it."""
        for file, fd, needed in self.files:
            have = os.fstat(fd).st_size
            if have < needed:
                raise IsotropyError(
                    f"{self.folder.name}/{file.name} was cut short on disk since the index was loaded ({have:,} of "
                    f"{needed:,} bytes; overwritten in place?): searching it would crash; restore it or rebuild the "
                    f"index, then load it again"
                )
