"""Writing files and folders so that nothing is ever half-written, and nothing is lost (layer 1).

* :func:`atomic_file` / :func:`atomic_dir`: write beside the output, ``fsync``, then one
  ``os.replace``; an interrupted write (an exception, Ctrl-C, SIGTERM, SIGHUP) removes its
  temporary and keeps the old output. Signals are held back during the renames and the
  cleanup. Outputs get the modes an ordinary ``open()``/``mkdir()`` gives them.
* :func:`sweep_stale_temporaries`: what a killed process (SIGKILL, power loss) left.

Signals are :mod:`.signals`' (:func:`terminate_as_interrupt`, :func:`signals_deferred`: both
re-exported here), the locks that keep two writers of one output apart :mod:`.locks`'.

This module knows nothing of artefact kinds: the policy of what may be replaced is
:mod:`isotropy.storage.artifacts`' (:func:`~isotropy.storage.artifacts.check_output`),
which callers pass in as ``check``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import IsotropyError

__all__ = [
    "atomic_path",
    "atomic_file",
    "atomic_dir",
    "sweep_stale_temporaries",
    "terminate_as_interrupt",
    "signals_deferred",
    "temp_prefix",
    "parent_of",
    "disk_full",
    "check_free_space",
]


from .signals import signals_deferred, terminate_as_interrupt

# --------------------------------------------------------------------------- atomic writes
#
# Temporaries sit beside their output as ``.NAME.isotropy-HOST-PID-XXXX.tmp`` (``.old`` for
# a folder being replaced), so a later write of the same output can tell the leftovers of a
# process that died (SIGKILL, power loss) from a write in progress, and sweep them.

TMP_TAG = "isotropy"


def _umask() -> int:
    try:  # Linux says it without changing it (os.umask can only be read by setting it)
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _final_mode(path: Path, base: int) -> int:
    """The permission bits ``open()``/``mkdir()`` would give ``path``: an existing one keeps its own."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return base & ~_umask()


def _umask_modes(folder: Path) -> None:
    """Give everything inside ``folder`` the modes of an ordinary open()/mkdir().

    Some writers used inside an artefact folder (safetensors, for one) create their files
    with mode 0600 whatever the umask; a folder meant to be shared must not keep that.
    """
    mask = _umask()
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o777 & ~mask)
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, 0o666 & ~mask)


_FULL_WORDS = ("No space left on device", "Disk quota exceeded", "os error 28", "StorageFull")


def disk_full(exc: BaseException, folder: Path | None = None) -> bool:
    """Whether ``exc``, raised while writing into ``folder``, means the disk is full.

    Libraries say it in their own words (faiss and torch do not always name ENOSPC), so a
    device left with under 1 MiB free after a failed write counts as full too.
    """
    if isinstance(exc, IsotropyError):
        return False
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if isinstance(exc, (OSError, RuntimeError, ValueError)) or type(exc).__name__ == "SafetensorError":
        if any(w in str(exc) for w in _FULL_WORDS):
            return True
        if folder is not None:
            with contextlib.suppress(OSError):
                return shutil.disk_usage(folder).free < 2**20
    return False


def _full_error(path: Path) -> IsotropyError:
    return IsotropyError(
        f"the disk holding {parent_of(path)} is full (writing {path}); nothing was written and the old output, "
        f"if any, is kept: free some space or choose another output"
    )


def check_free_space(path: str | os.PathLike, nbytes: int) -> None:
    """Fail before long work when the device that will hold ``path`` has less than ``nbytes`` free."""
    path = Path(path)
    try:
        free = shutil.disk_usage(parent_of(path)).free
    except OSError:
        return
    if free < nbytes:
        raise IsotropyError(
            f"{path} needs about {nbytes / 2**20:,.1f} MiB but the disk holding {parent_of(path)} has "
            f"{free / 2**20:,.1f} MiB free: free some space or choose another output"
        )


def parent_of(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def temp_prefix(path: Path) -> str:
    host = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"
    return f".{path.name}.{TMP_TAG}-{host}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


LEGACY_TMP_AGE = 24 * 3600  # v0.1 temporaries carry no pid: swept once a day old


def sweep_stale_temporaries(path: str | os.PathLike, *, any_process: bool = False) -> list[Path]:
    """Remove the temporaries that dead processes left beside ``path``; returns what was removed.

    A folder whose replacement was cut between its two renames (``path`` missing, its old
    version parked in a ``.old`` folder) is put back rather than removed. ``any_process``
    removes every temporary of ``path``, of live processes and other hosts too: only for
    a caller that owns the output exclusively (a distributed encode sweeping its shards).
    """
    path = Path(path)
    parent = parent_of(path)
    host = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"
    ours = re.compile(rf"^\.{re.escape(path.name)}\.{TMP_TAG}-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-[^/]*\.(?P<ext>tmp|old)$")
    legacy = re.compile(rf"^\.{re.escape(path.name)}\.[A-Za-z0-9_]{{8}}\.(?P<ext>tmp|old)$")
    removed: list[Path] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        m = ours.match(entry.name)
        if m is not None:
            if not any_process and (m["host"] != host or _pid_alive(int(m["pid"]))):
                continue
        else:
            m = legacy.match(entry.name)
            try:
                if m is None or now - entry.stat(follow_symlinks=False).st_mtime < LEGACY_TMP_AGE:
                    continue
            except OSError:
                continue
        stale = Path(entry.path)
        with signals_deferred():
            if m["ext"] == "old" and (stale / "x").exists() and not os.path.lexists(path):
                os.replace(stale / "x", path)  # a replacement died between its renames: restore
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    stale.unlink()
        removed.append(stale)
    return removed


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike,
    *,
    check: Callable[[], None] | None = None,
    sidecar: Callable[[Path], tuple[Path, bytes] | None] | None = None,
) -> Iterator[Path]:
    """Reserve a temporary file beside ``path`` (empty, with its final mode) and yield its path;
    on success it is ``fsync``ed and replaces ``path`` in one rename.

    For writers that want a path rather than an open file (``numpy.lib.format.open_memmap``).
    The file gets the mode an ordinary ``open()`` would give it (the umask's, or the mode
    of the file it replaces). ``check`` runs first and again just before the rename (raise
    to abandon the write: e.g. :func:`isotropy.storage.artifacts.check_output`, which
    refuses to replace what isotropy did not write). SIGINT, SIGTERM and SIGHUP remove
    the temporary file; leftovers of killed processes are swept first.

    ``sidecar(tmp)``, once the file is complete, may return ``(path, bytes)``: a companion
    file (the sha256 record of a vector file) renamed into place together with the file, in
    the same signal-free block, so a signal never leaves one replaced without the other.
    """
    path = Path(path)
    parent = parent_of(path)
    if not parent.is_dir():
        raise IsotropyError(f"output folder {parent} does not exist")
    if check is not None:
        check()
    sweep_stale_temporaries(path)
    side_tmp: str | None = None
    with terminate_as_interrupt():
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=parent)
        try:
            os.fchmod(fd, _final_mode(path, 0o666))
            os.close(fd)
            yield Path(tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            companion = sidecar(Path(tmp)) if sidecar is not None else None
            if companion is not None:
                side_tmp = _write_temporary(companion[0], companion[1])
            with signals_deferred():
                if check is not None:
                    check()
                if companion is not None:
                    os.replace(side_tmp, companion[0])
                os.replace(tmp, path)
        except BaseException as exc:
            full = disk_full(exc, parent)
            with signals_deferred():
                for leftover in (tmp, side_tmp):
                    if leftover is not None:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(leftover)
            if full:
                raise _full_error(path) from None
            raise


def _write_temporary(path: Path, data: bytes) -> str:
    """A complete, fsynced temporary file beside ``path`` holding ``data`` (the caller renames it in)."""
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=parent_of(path))
    try:
        os.fchmod(fd, _final_mode(path, 0o666))
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "wb", *, check: Callable[[], None] | None = None) -> Iterator[Any]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename
    (see :func:`atomic_path`, which this opens for writing)."""
    with atomic_path(path, check=check) as tmp, open(tmp, mode) as fh:
        yield fh
        fh.flush()


@contextlib.contextmanager
def atomic_dir(
    path: str | os.PathLike,
    *,
    check: Callable[[], None] | None = None,
) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it becomes ``path``.

    An existing ``path`` is replaced only after the new folder is complete. ``check`` runs
    first and again just before the rename (raise to abandon the write). Interrupted (SIGINT, SIGTERM, SIGHUP, an exception), the temporary folder is removed
    and the old one kept. Modes follow the umask (or the replaced folder's mode).
    """
    path = Path(path)
    parent = parent_of(path)
    if not parent.is_dir():
        raise IsotropyError(f"output folder {parent} does not exist")
    if path.exists() and not path.is_dir():
        raise IsotropyError(f"{path} exists and is not a folder")
    if check is not None:
        check()
    sweep_stale_temporaries(path)
    with terminate_as_interrupt():
        tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(path), suffix=".tmp", dir=parent))
        try:
            os.chmod(tmp, _final_mode(path, 0o777))
            yield tmp
            _umask_modes(tmp)
            with signals_deferred():
                if check is not None:
                    check()
                if path.exists():
                    old = Path(tempfile.mkdtemp(prefix=temp_prefix(path), suffix=".old", dir=parent))
                    os.replace(path, old / "x")
                    os.replace(tmp, path)
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.replace(tmp, path)
        except BaseException as exc:
            full = disk_full(exc, parent)
            with signals_deferred():
                shutil.rmtree(tmp, ignore_errors=True)
            if full:
                raise _full_error(path) from None
            raise
