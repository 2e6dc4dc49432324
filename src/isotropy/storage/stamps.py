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

A :class:`DigestMemo` given a ``folder`` also keeps each digest on disk, one small JSON file per key (the folder's
path: its latest stamp and digest), so that the next process reading the same unchanged files does not hash them
again either: ``isotropy search`` or ``serve`` over an index of a GloVe-sized static model paid 2-3 s for the table's
fingerprint at every start. An entry is used only when its key and its whole stamp are equal to the files' now and
its checksum matches; the folder keeps the :data:`DISK_ENTRIES` newest entries; an entry that cannot be read or
written is passed over.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = ["SETTLE_S", "DISK_ENTRIES", "DigestMemo", "StampMemo", "stamp"]

SETTLE_S = 2.0  # seconds a file must have been left alone before its stat stands for its content
MAX_FILES = 10_000  # a folder holding more is not stamped (the walk would cost what the memo saves)
DISK_ENTRIES = 512  # a DigestMemo's folder keeps this many keys, the most recently written

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
    """A :class:`StampMemo` of digests (strings); with ``folder`` (a callable giving the folder, None: none), kept on
    disk too (module docs)."""

    def __init__(self, size: int = 64, folder: Callable[[], Path | None] | None = None) -> None:
        super().__init__(size)
        self.folder = folder

    def get(self, key: tuple, paths: Iterable[str | os.PathLike], compute: Callable[[], str]) -> str:
        if self.folder is None:
            return super().get(key, paths, compute)
        paths = list(paths)  # stamped more than once
        return super().get(key, paths, lambda: self._on_disk(key, paths, compute))

    def _on_disk(self, key: tuple, paths: list[str | os.PathLike], compute: Callable[[], str]) -> str:
        st = stamp(paths)
        try:
            folder = self.folder()
        except OSError:
            folder = None
        if st is None or folder is None:
            return compute()
        name = hashlib.blake2b(repr(key).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest() + ".json"
        entry = {"key": repr(key), "stamp": [list(e) for e in st]}
        try:
            found = json.loads((folder / name).read_text(encoding="utf-8"))
            if not isinstance(found, dict):
                raise ValueError("not an entry")
            digest = found.get("digest")
            if (
                {k: found.get(k) for k in entry} == entry
                and isinstance(digest, str)
                and found.get("seal") == _seal(entry, digest)
            ):
                return digest
        except (OSError, ValueError):
            pass
        digest = compute()
        if stamp(paths) == st:  # unchanged while it was hashed
            _write_entry(folder, name, {**entry, "digest": digest, "seal": _seal(entry, digest)})
        return digest


def _seal(entry: dict, digest: str) -> str:
    """A checksum of an entry's key, stamp and digest: a damaged digest is never served (it is computed again)."""
    return hashlib.blake2b(json.dumps([entry, digest], sort_keys=True).encode(), digest_size=16).hexdigest()


def _write_entry(folder: Path, name: str, entry: dict) -> None:
    from .atomic import atomic_file

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_file(folder / name, "w") as fh:
            fh.write(json.dumps(entry))
        entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        for old in entries[: max(len(entries) - DISK_ENTRIES, 0)]:
            old.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001 - a memo that cannot be written is only slower: the digest was computed
        return
