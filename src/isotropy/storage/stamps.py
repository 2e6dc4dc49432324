"""Stat stamps of files on disk, and a process-wide memo of what was read or computed from them.

A model's fingerprint (:meth:`isotropy.encoders.Encoder.fingerprint`) hashes what decides its vectors: a
transformer's weights, config and vocabulary (0.1-0.3 s for a small one), a static table's tokenizer and rows
(2-3 s for GloVe's 400k words). Every encoder loaded from the same folder used to pay it again: an index's
load, each shard of a Dask job, each test. A digest computed from files that have not changed since is the same
digest, so :class:`DigestMemo` keeps it for the life of the process, keyed on the files' :func:`stamp`.

Why a stat stamp is enough: a file's ``ctime`` changes on every write to it, whatever wrote it (a copy that keeps
the ``mtime`` included) and cannot be set back; a file replaced by a rename has another inode. A file written in
the last :data:`SETTLE_S` seconds is not stamped (git's "racy" files: a second write within the clock's tick
could leave every field as it was), so its digest is computed each time until it settles.

:class:`StampMemo` keeps any value so: a transformer's tokenizer as ``from_pretrained`` built it (0.1 s for the
default model's, paid by every ``Encoder`` of the folder), which its caller copies before use.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = ["SETTLE_S", "DigestMemo", "StampMemo", "stamp"]

SETTLE_S = 2.0  # seconds a file must have been left alone before its stat stands for its content
MAX_FILES = 10_000  # a folder holding more is not stamped (the walk would cost what the memo saves)

Stamp = tuple[tuple[str, int, int, int, int, int], ...]


def _entry(path: Path, name: str, now: float) -> tuple[str, int, int, int, int, int] | None:
    st = path.stat()
    if now - max(st.st_mtime, st.st_ctime) < SETTLE_S:
        return None
    return (name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def stamp(paths: Iterable[str | os.PathLike]) -> Stamp | None:
    """``(name, size, mtime_ns, ctime_ns, inode, device)`` of every regular file at or under ``paths`` (folders
    walked, links followed), sorted; None when one was written in the last :data:`SETTLE_S` seconds, a folder holds
    more than :data:`MAX_FILES` files, or anything cannot be read."""
    now = time.time()
    out = []
    try:
        for root in map(Path, paths):
            if not root.is_dir():
                out.append(_entry(root, str(root.resolve()), now))
                continue
            for folder, _, files in os.walk(root, followlinks=True):
                out += [_entry(Path(folder, f), os.path.join(os.path.realpath(folder), f), now) for f in files]
                if len(out) > MAX_FILES:
                    return None
    except OSError:
        return None
    return None if any(e is None for e in out) else tuple(sorted(out))


class StampMemo:
    """Values by ``(key, stamp of the files)``, for this process; the oldest go past ``size`` entries. The values are
    shared: keep only immutable ones, or copy what :meth:`get` returns before changing it."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._done: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, paths: Iterable[str | os.PathLike], compute: Callable[[], Any]) -> Any:
        """The value of ``key`` over ``paths``: the one computed before from the same unchanged files, else
        ``compute()`` (kept when the files could be stamped)."""
        st = stamp(paths)
        if st is None:
            return compute()
        with self._lock:
            found = self._done.get((key, st))
        if found is not None:
            return found
        value = compute()
        with self._lock:
            self._done[(key, st)] = value
            while len(self._done) > self.size:
                self._done.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._done.clear()


class DigestMemo(StampMemo):
    """A :class:`StampMemo` of digests (strings)."""

    def get(self, key: tuple, paths: Iterable[str | os.PathLike], compute: Callable[[], str]) -> str:
        return super().get(key, paths, compute)
