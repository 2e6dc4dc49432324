"""Locks: one writer per output, across processes (layer 2).

* :func:`artefact_lock`: the lock every read-modify-write of an artefact holds (a second writer waits).
* :func:`output_locks` / :func:`lock_output`: within a command, every output it checks is locked
  until the command ends (a second command writing the same output fails at once).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import IsotropyError
from .atomic import MARKER, parent_of
from .signals import signals_deferred

__all__ = [
    "artefact_lock",
    "output_locks",
    "lock_output",
    "lock_file_of",
    "LOCK_MARK",
    "LOCK_TIMEOUT_ENV",
    "DEFAULT_LOCK_TIMEOUT",
]

# One lock per output: a ``.NAME.lock`` file beside it (``filelock``: ``flock`` on Unix). One
# ``FileLock`` object per lock file in this process, so the locks are reentrant within it (an
# ``index add`` holds its index's lock, and the save inside takes it again). A lock file this
# process made (it writes LOCK_MARK into it) is removed on the last release, while still held:
# filelock's acquire sees an unlinked inode (``st_nlink == 0``) and starts over, so mutual exclusion
# holds and no ``.lock`` files pile up. A ``.NAME.lock`` that was there before and holds anything else
# (a user's own file) is locked but never written or removed (#31, L2).

LOCK_TIMEOUT_ENV = "ISOTROPY_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 3600.0
_LOCKS: dict[str, Any] = {}
_LOCKS_GUARD = threading.Lock()
_SCOPES: list[list[Path]] = []  # outputs locked by check_output while an output_locks() block runs
_OURS: set[str] = set()  # lock files this process made (it wrote LOCK_MARK into them): only those are removed
LOCK_MARK = b"isotropy lock file\n"  # what an isotropy lock file holds; a file holding anything else is the user's


def lock_file_of(path: str | os.PathLike) -> Path:
    """The lock file of the output ``path``: ``.NAME.lock`` beside it."""
    path = Path(path)
    return parent_of(path) / f".{path.name}.lock"


def _lock_for(path: Path) -> Any:
    from filelock import FileLock

    key = os.path.abspath(lock_file_of(path))
    with _LOCKS_GUARD:
        if key not in _LOCKS:
            _LOCKS[key] = FileLock(key, thread_local=False)
        return _LOCKS[key]


def _release(lock: Any) -> None:
    with signals_deferred():
        if lock.lock_counter == 1 and lock.lock_file in _OURS:  # the last hold: remove the file while it is still ours
            _OURS.discard(lock.lock_file)
            with contextlib.suppress(OSError):
                os.unlink(lock.lock_file)
        lock.release()


def _inode(path: str) -> int | None:
    try:
        return os.stat(path, follow_symlinks=False).st_ino
    except OSError:
        return None


def _claim(lock: Any, existed: int | None) -> None:
    """After the first acquisition: mark a lock file this process made as isotropy's (a user's own
    ``.NAME.lock``, already there and holding anything but the mark, is locked but never written or removed)."""
    if lock.lock_counter != 1:
        return
    path = lock.lock_file
    try:
        with open(path, "rb+") as fh:
            head = fh.read(len(LOCK_MARK) + 1)
            if head == b"" and os.fstat(fh.fileno()).st_ino != existed:  # a file made after we looked: ours
                fh.write(LOCK_MARK)
                head = LOCK_MARK
    except OSError:
        return
    if head == LOCK_MARK:
        _OURS.add(path)


def _lock_timeout(timeout: float | None) -> float:
    if timeout is not None:
        return timeout
    try:
        return float(os.environ.get(LOCK_TIMEOUT_ENV, DEFAULT_LOCK_TIMEOUT))
    except ValueError:
        raise IsotropyError(f"${LOCK_TIMEOUT_ENV} must be a number of seconds") from None


def _acquire(path: Path, timeout: float | None, wait: bool) -> Any:
    from filelock import Timeout

    lock = _lock_for(path)
    lock_file = lock.lock_file
    existed = _inode(lock_file)  # a file already there (its inode) is written and removed only if it holds the mark
    try:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if not wait:
                raise IsotropyError(
                    f"{path} is being written by another isotropy process (lock file {lock_file}); wait for it to "
                    f"finish, or choose another output"
                ) from None
            timeout = _lock_timeout(timeout)
            print(f"waiting for another isotropy process that is writing {path} (lock {lock_file}) ...", file=sys.stderr)
            lock.acquire(timeout=timeout)
    except Timeout:
        raise IsotropyError(
            f"{path} is still locked by another isotropy process after {timeout:g} s (lock file {lock_file}); "
            f"try again later, or raise ${LOCK_TIMEOUT_ENV}"
        ) from None
    except OSError as exc:
        raise IsotropyError(f"cannot lock {path} ({lock_file}: {exc.strerror or exc})") from None
    _claim(lock, existed)
    return lock


@contextlib.contextmanager
def artefact_lock(path: str | os.PathLike, timeout: float | None = None, *, wait: bool = True) -> Iterator[None]:
    """Hold the write lock of the artefact at ``path`` (a ``.NAME.lock`` file beside it).

    Every read-modify-write of an artefact (``isotropy index add``) takes it, so a second
    writer waits (saying so once on stderr) instead of silently losing one of the two
    updates; after ``timeout`` seconds (default ``$ISOTROPY_LOCK_TIMEOUT`` or one hour) it
    gives up with one line. With ``wait=False`` a held lock is one line at once.
    """
    lock = _acquire(Path(path), timeout, wait)
    try:
        yield
    finally:
        _release(lock)


@contextlib.contextmanager
def output_locks() -> Iterator[None]:
    """Within the block, every output that passes :func:`~isotropy.storage.artifacts.check_output`
    is locked (:func:`lock_output`) until the block ends: the command line runs each command in one,
    so two commands writing the same output never both run (the second fails at once, with one line)."""
    _SCOPES.append([])
    try:
        yield
    finally:
        for path in reversed(_SCOPES.pop()):
            _release(_lock_for(path))


def lock_output(path: str | os.PathLike) -> None:
    """Lock the output ``path`` for the rest of the innermost :func:`output_locks` block (no block: nothing);
    held by another process: one line at once. Taking it again in the same block is a no-op."""
    if not _SCOPES:
        return
    path = Path(os.path.abspath(path))
    if (path.parent / MARKER).is_file():
        return  # inside one of our own temporary folders: nobody else can know it (no lock file left in the output)
    if any(path == held for scope in _SCOPES for held in scope):
        return
    _acquire(path, 0, wait=False)
    _SCOPES[-1].append(path)
