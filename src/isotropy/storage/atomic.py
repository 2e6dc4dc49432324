"""Writing files and folders so that nothing is ever half-written, and nothing is lost (layer 2).

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
    "MARKER",
    "is_marked_temporary",
    "parent_of",
    "disk_full",
    "check_free_space",
    "recording_outputs",
]


from .signals import signals_deferred, terminate_as_interrupt

# --------------------------------------------------------------------------- atomic writes
#
# Temporaries sit beside their output as ``.NAME.isotropy-HOST-PID-XXXX.tmp`` folders (``.old`` for
# a folder being replaced; a file is written inside its ``.tmp`` folder and renamed out), each
# holding the marker file :data:`MARKER`, so a later write of the same output can tell the
# leftovers of a process that died (SIGKILL, power loss) from a write in progress, and from a
# user's own file that merely has such a name, and sweep only its own.

TMP_TAG = "isotropy"

# The outputs renamed into place while a :func:`recording_outputs` block runs (the command line's, around each
# command): after an interrupt it can then say whether the output was already replaced (S1-053). Only guarded
# writes count (those with a ``check``: a user's output, not a cache entry).
_RECORDERS: list[list[Path]] = []


@contextlib.contextmanager
def recording_outputs() -> Iterator[list[Path]]:
    """Yield a list that collects, in order, every output a guarded atomic write renames into place within the block
    (nests: each block sees its own)."""
    written: list[Path] = []
    _RECORDERS.append(written)
    try:
        yield written
    finally:
        _RECORDERS[:] = [r for r in _RECORDERS if r is not written]


def _renamed(path: Path, check: Any) -> None:
    if check is not None:
        for written in _RECORDERS:
            written.append(path)


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


MARKER = ".isotropy-temporary"  # inside every temporary folder isotropy makes: the proof it is ours


def _marked_temporary(path: Path, suffix: str) -> Path:
    """A new temporary folder beside ``path`` (``.NAME.isotropy-HOST-PID-XXXX`` + ``suffix``) holding :data:`MARKER`.

    Only a folder holding the marker is ever swept (:func:`sweep_stale_temporaries`): a user's
    own file or folder that merely looks like one of our names is never touched. Killed
    between the ``mkdtemp`` and the marker, an empty folder is left behind (kept, never lost).
    """
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(path), suffix=suffix, dir=parent_of(path)))
    try:
        # the content never names the output: a name may hold any character (non-ASCII, or bytes that are not
        # UTF-8), and the marker's proof is its presence in a folder of our name pattern, not what it says
        with open(tmp / MARKER, "x", encoding="ascii") as fh:
            fh.write(f"isotropy temporary (pid {os.getpid()})\n")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # never leave an unmarked temporary behind (nothing could sweep it)
        raise
    return tmp


def is_marked_temporary(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is a temporary folder isotropy made (it holds :data:`MARKER`)."""
    folder = Path(folder)
    return folder.is_dir() and not folder.is_symlink() and (folder / MARKER).is_file()


def sweep_stale_temporaries(path: str | os.PathLike, *, any_process: bool = False) -> list[Path]:
    """Remove the temporaries that dead processes left beside ``path``; returns what was removed.

    Only what provably is ours is touched: a folder named ``.NAME.isotropy-HOST-PID-...tmp``
    (or ``.old``) of a dead process of this host that holds :data:`MARKER`. A file or an
    unmarked folder with such a name (a user's, or an older isotropy's) is left alone, and so
    is isotropy 0.1's ``.NAME.XXXXXXXX.tmp`` (nothing proves it ours). A folder whose
    replacement was cut between its two renames (``path`` missing, its old version parked in a
    marked ``.old`` folder) is put back rather than removed. ``any_process`` removes every
    marked temporary of ``path``, of live processes and other hosts too: only for a caller that
    owns the output exclusively (a distributed encode sweeping its shards).
    """
    path = Path(path)
    parent = parent_of(path)
    host = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"
    ours = re.compile(rf"^\.{re.escape(path.name)}\.{TMP_TAG}-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-[^/]*\.(?P<ext>tmp|old)$")
    removed: list[Path] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        m = ours.match(entry.name)
        if m is None or (not any_process and (m["host"] != host or _pid_alive(int(m["pid"])))):
            continue
        stale = Path(entry.path)
        if not is_marked_temporary(stale):
            continue  # not provably ours: never removed
        with signals_deferred():
            if m["ext"] == "old" and (stale / "x").exists() and not os.path.lexists(path):
                os.replace(stale / "x", path)  # a replacement died between its renames: restore
            shutil.rmtree(stale, ignore_errors=True)
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
    with terminate_as_interrupt():
        # The file is written inside a marked temporary folder (so a sweep can prove it ours) and
        # renamed out of it: same folder's file system, so the rename is as atomic as ever.
        folder: Path | None = None
        try:
            folder = _marked_temporary(path, ".tmp")
            tmp = folder / (path.name if path.name != MARKER else "data")
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _final_mode(path, 0o666)))
            os.chmod(tmp, _final_mode(path, 0o666))  # the umask does not narrow a replaced file's own mode
            yield tmp
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            companion = sidecar(tmp) if sidecar is not None else None
            side_tmp = None
            if companion is not None:
                side_tmp = folder / f"sidecar-{companion[0].name}"
                _write_fsynced(side_tmp, companion[1], _final_mode(companion[0], 0o666))
            with signals_deferred():
                if check is not None:
                    check()
                if side_tmp is not None:
                    os.replace(side_tmp, companion[0])
                os.replace(tmp, path)
                _renamed(path, check)
                shutil.rmtree(folder, ignore_errors=True)
        except BaseException as exc:
            full = disk_full(exc, parent)
            with signals_deferred():
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)
            if full:
                raise _full_error(path) from None
            raise


def _write_fsynced(path: Path, data: bytes, mode: int) -> None:
    """A complete, fsynced new file ``path`` holding ``data`` with ``mode`` (the caller renames it in)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fd, mode)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


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
        tmp: Path | None = None
        try:
            tmp = _marked_temporary(path, ".tmp")  # its marker leaves just before the rename
            os.chmod(tmp, _final_mode(path, 0o777))
            yield tmp
            _umask_modes(tmp)
            with signals_deferred():
                if check is not None:
                    check()
                if path.exists():
                    old = _marked_temporary(path, ".old")
                    os.unlink(tmp / MARKER)
                    os.replace(path, old / "x")
                    os.replace(tmp, path)
                    _renamed(path, check)
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.unlink(tmp / MARKER)
                    os.replace(tmp, path)
                    _renamed(path, check)
        except BaseException as exc:
            full = disk_full(exc, parent)
            with signals_deferred():
                if tmp is not None:  # gone once renamed into place
                    shutil.rmtree(tmp, ignore_errors=True)
            if full:
                raise _full_error(path) from None
            raise
