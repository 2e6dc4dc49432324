"""Shared plumbing: user-facing errors, input validation and atomic artefact I/O.

Every fitted artefact (whitening, flow, index, ...) is a folder holding
``config.json`` (hyper-parameters, kind, format version) and
``state.safetensors`` (arrays). Never pickle. Folders and files are written to
a temporary sibling first and renamed into place, so an interrupted write
never leaves half an artefact behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
import re
import signal
import socket
import stat
import sys
import threading
import time
from typing import Any, Callable, Iterator, Sequence

import numpy as np

FORMAT_VERSION = 1
LIBRARY_TAG = "isotropy"


from .errors import IsotropyError, NotFittedError, Terminated  # noqa: E402,F401  (moving to errors.py)


# --------------------------------------------------------------------------- validation


def check_matrix(
    X: Any,
    name: str = "X",
    *,
    expected_dim: int | None = None,
    min_rows: int = 0,
    dtype: Any = np.float64,
    row_offset: int = 0,
) -> np.ndarray:
    """Return ``X`` as a 2-D finite array of ``dtype``, or raise one clear IsotropyError.

    ``row_offset`` is added to row numbers in messages, so a streamed chunk names
    the row of the whole input rather than of the chunk.
    """
    try:
        arr = np.asarray(X)
        if arr.dtype.kind == "c":  # numpy would drop the imaginary part with only a warning
            raise IsotropyError(f"{name} has complex values; sentence vectors must be real")
        arr = np.asarray(arr, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise IsotropyError(f"{name} must be a numeric matrix: {exc}") from None
    if arr.ndim == 1 and expected_dim is not None and arr.shape[0] == expected_dim:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise IsotropyError(f"{name} must be 2-D (rows x dimensions), got shape {arr.shape}")
    if expected_dim is not None and arr.shape[1] != expected_dim:
        raise IsotropyError(
            f"{name} has {arr.shape[1]} dimensions but {expected_dim} were expected"
        )
    if arr.shape[0] < min_rows:
        raise IsotropyError(f"{name} has {arr.shape[0]} rows; at least {min_rows} are needed")
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int(np.flatnonzero(~finite.all(axis=1))[0])
        raise IsotropyError(
            f"{name} has a NaN or infinite value in row {bad + row_offset} (0-based)"
        )
    return arr


# --------------------------------------------------------------------------- progress


class ProgressBar:
    """A rich progress bar on a terminal (or when asked), silent in non-interactive logs.

    ``show=None`` shows it only when stderr is a terminal and there are at least
    ``min_total`` steps. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, total: int, show: bool | None, label: str, min_total: int = 4) -> None:
        import sys

        if show is None:
            show = sys.stderr.isatty() and total >= min_total
        self._bar = None
        if show:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

            self._bar = Progress(
                "[bold]{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                transient=True, console=Console(stderr=True),
            )
            self._task = self._bar.add_task(label, total=total)
            self._bar.start()

    def advance(self, steps: int = 1, description: str | None = None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=steps, **({"description": description} if description else {}))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --------------------------------------------------------------------------- the Hugging Face hub


def hub_offline_reason(timeout: float = 3.0) -> str | None:
    """Why the hub cannot be reached (None when it answers), decided within ``timeout`` seconds."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{var} is set"
    import socket
    import threading
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    result: list[str | None] = ["no answer within %.0f s" % timeout]

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result[0] = None
        except OSError as exc:
            result[0] = f"{host} is unreachable ({exc.strerror or exc})"

    # name resolution has no timeout of its own: run the probe in a thread and stop waiting
    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return result[0]


# --------------------------------------------------------------------------- signals
#
# SIGTERM (kill, timeout, systemd, Kubernetes, Dask) and SIGHUP end a process without
# running any ``finally``; while an isotropy command or an atomic write runs they raise
# :class:`Terminated` instead (a BaseException, like KeyboardInterrupt), so every cleanup
# that Ctrl-C runs runs for them too. Handlers set by the application itself are left alone.

_TERM_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only; nests)."""
    installed: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in _TERM_SIGNALS:
            if signal.getsignal(sig) == signal.SIG_DFL:
                installed[sig] = signal.signal(sig, _raise_terminated)
    try:
        yield
    finally:
        for sig, old in installed.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP back while a rename or a cleanup runs, so it is never cut in half."""
    block = {signal.SIGINT, *_TERM_SIGNALS}
    main = threading.current_thread() is threading.main_thread()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, block) if main and hasattr(signal, "pthread_sigmask") else None
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


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


def _parent(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def _temp_prefix(path: Path) -> str:
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
    parent = _parent(path)
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
        with _signals_deferred():
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
def atomic_file(
    path: str | os.PathLike,
    mode: str = "wb",
    *,
    kind: str | None = None,
    force: bool = False,
    check: Callable[[], None] | None = None,
) -> Iterator[Any]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename.

    The file gets the mode an ordinary ``open()`` would give it (the umask's, or the mode
    of the file it replaces). With ``kind``, an existing ``path`` that is not an isotropy
    output of that kind is refused unless ``force`` (see :func:`check_output`); ``check``
    runs just before the rename (raise to abandon the write). SIGINT, SIGTERM and SIGHUP
    remove the temporary file; leftovers of killed processes are swept first.
    """
    path = Path(path)
    parent = _parent(path)
    if not parent.is_dir():
        raise IsotropyError(f"output folder {parent} does not exist")
    if kind is not None:
        check_output(path, kind, force=force)
    sweep_stale_temporaries(path)
    with terminate_as_interrupt():
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=parent)
        try:
            os.fchmod(fd, _final_mode(path, 0o666))
            with os.fdopen(fd, mode) as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            with _signals_deferred():
                if kind is not None:
                    check_output(path, kind, force=force)
                if check is not None:
                    check()
                os.replace(tmp, path)
        except BaseException:
            with _signals_deferred(), contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


@contextlib.contextmanager
def atomic_dir(
    path: str | os.PathLike,
    *,
    kind: str | None = None,
    force: bool = False,
    check: Callable[[], None] | None = None,
) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it becomes ``path``.

    An existing ``path`` is replaced only after the new folder is complete, and, with
    ``kind``, only when it is an isotropy artefact of that kind, empty, or ``force`` is
    given (checked again just before the rename). ``check`` runs just before the rename.
    Interrupted (SIGINT, SIGTERM, SIGHUP, an exception), the temporary folder is removed
    and the old one kept. Modes follow the umask (or the replaced folder's mode).
    """
    path = Path(path)
    parent = _parent(path)
    if not parent.is_dir():
        raise IsotropyError(f"output folder {parent} does not exist")
    if path.exists() and not path.is_dir():
        raise IsotropyError(f"{path} exists and is not a folder")
    if kind is not None:
        check_output(path, kind, force=force)
    sweep_stale_temporaries(path)
    with terminate_as_interrupt():
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".tmp", dir=parent))
        try:
            os.chmod(tmp, _final_mode(path, 0o777))
            yield tmp
            _umask_modes(tmp)
            with _signals_deferred():
                if kind is not None:
                    check_output(path, kind, force=force)
                if check is not None:
                    check()
                if path.exists():
                    old = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".old", dir=parent))
                    os.replace(path, old / "x")
                    os.replace(tmp, path)
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.replace(tmp, path)
        except BaseException:
            with _signals_deferred():
                shutil.rmtree(tmp, ignore_errors=True)
            raise


# --------------------------------------------------------------------------- output guard
#
# Never destroy what isotropy did not write: an output that exists is replaced only when it
# is an isotropy output of the same kind (or an empty folder), unless the user forces it.

FOLDER_KINDS = {
    "whitening": "fitted whitening",
    "flow": "fitted flow",
    "index": "search index",
    "onnx-encoder": "ONNX export",
    "report": "analysis report",
    "demo": "demo output folder",
    "sentence-transformers": "calibrated sentence-transformers model",
    "vector-shards": "folder of encoded vector shards",
}
FILE_KINDS = {
    "vectors": "vector file (.npy)",
    "results": "results file",
    "results-table": "results table (.md)",
}
DEMO_ENTRIES = frozenset({"whitening-cls", "analysis", "index", "calibrated", "demo.json"})


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def artefact_kind(path: str | os.PathLike) -> str | None:
    """The kind of isotropy output at ``path`` (see FOLDER_KINDS/FILE_KINDS), or None when it is not one."""
    path = Path(path)
    if path.is_dir():
        for name in (CONFIG_NAME, "isotropy_onnx.json", "isotropy.json", "report.json"):
            meta = _read_json(path / name)
            if isinstance(meta, dict) and meta.get("library") == LIBRARY_TAG and isinstance(meta.get("kind"), str):
                return meta["kind"]
        report = _read_json(path / "report.json")  # reports of isotropy 0.1 carry no header
        if isinstance(report, dict) and "meta" in report and ("sentence" in report or "word" in report):
            return "report"
        try:
            names = {p.name for p in path.iterdir() if not p.name.startswith(".")}
        except OSError:
            return None
        if names and names <= DEMO_ENTRIES:
            return "demo"
        if names and all(n.endswith((".npy", ".json")) for n in names) and any(
            isinstance(_read_json(path / n), dict) and "npy_sha256" in _read_json(path / n) for n in names if n.endswith(".json")
        ):
            return "vector-shards"
        return None
    if not path.is_file():
        return None
    if path.suffix == ".npy":
        try:
            shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
        except (OSError, ValueError, EOFError):
            return None
        return "vectors" if len(shape) == 2 else None
    if path.suffix == ".md":
        try:
            with open(path, encoding="utf-8") as fh:
                first = fh.readline()
        except (OSError, UnicodeDecodeError):
            return None
        return "results-table" if first.startswith("| model | pooling | method |") else None
    data = _read_json(path)
    if isinstance(data, dict) and {"rows", "tasks", "settings"} <= set(data):
        return "results"
    return None


def _sample(path: Path) -> str:
    try:
        names = sorted(p.name for p in path.iterdir())
    except OSError:
        return "unreadable"
    shown = ", ".join(repr(n) for n in names[:3])
    return f"it holds {len(names)} entr{'y' if len(names) == 1 else 'ies'}: {shown}{', ...' if len(names) > 3 else ''}"


def check_output(
    path: str | os.PathLike,
    kind: str,
    *,
    force: bool = False,
    inputs: Sequence[str | os.PathLike | None] = (),
    option: str = "--output",
) -> Path:
    """Fail before any work when writing ``path`` would destroy something isotropy did not write.

    ``kind`` is the output's kind (a key of FOLDER_KINDS or FILE_KINDS). Refused: an empty
    path; a path that is, contains or lies inside one of ``inputs``; an existing folder that
    is not an empty folder or an isotropy output of the same kind (a file of the same kind,
    for file outputs), unless ``force``; a folder where a file is expected and the reverse
    (even with ``force``); a parent folder that is missing or not writable.
    """
    if path is None or not str(path).strip():
        raise IsotropyError(f"{option} is empty: name the output {'folder' if kind in FOLDER_KINDS else 'file'}")
    path = Path(path)
    folder = kind not in FILE_KINDS
    what = FILE_KINDS.get(kind) or FOLDER_KINDS.get(kind) or repr(kind)
    _check_inputs(path, inputs, folder)
    if path.exists() or path.is_symlink():
        if folder and not path.is_dir():
            raise IsotropyError(f"{path} exists and is not a folder; the {what} must be written to a folder ({option})")
        if not folder and path.is_dir():
            raise IsotropyError(f"{path} is a folder; give a file name for the {what} ({option})")
        empty = folder and not any(True for _ in path.iterdir())
        if not empty and not force and artefact_kind(path) != kind:
            if folder:
                raise IsotropyError(
                    f"{path} exists and is not an isotropy {what} ({_sample(path)}); refusing to replace it: "
                    f"choose a new folder, or pass --force (force=True) to replace it"
                )
            raise IsotropyError(
                f"{path} exists and is not an isotropy {what}; refusing to overwrite it: choose another file, "
                f"or pass --force (force=True) to overwrite it"
            )
    return check_output_path(path)


def _check_inputs(path: Path, inputs: Sequence[str | os.PathLike | None], folder: bool) -> None:
    out = path.resolve()
    for item in inputs:
        if item is None or str(item) in ("", "-"):
            continue
        src = Path(item).expanduser().resolve()
        if out == src:
            raise IsotropyError(f"the output {path} is the input {item}: it would be overwritten; choose another output")
        if src.is_dir() and out.is_relative_to(src):
            raise IsotropyError(f"the output {path} lies inside the input folder {item}; choose an output outside it")
        if folder and src.is_relative_to(out):
            raise IsotropyError(
                f"the input {item} lies inside the output folder {path}, which would be replaced; choose another output"
            )


def check_output_path(path: str | os.PathLike) -> Path:
    """Fail early (before any expensive work) when ``path``'s folder is missing or not writable."""
    path = Path(path)
    parent = _parent(path)
    if not parent.is_dir():
        raise IsotropyError(f"output folder {parent} does not exist (for {path})")
    if not os.access(parent, os.W_OK):
        raise IsotropyError(f"output folder {parent} is not writable (for {path})")
    try:  # os.access says yes to root on read-only mounts; an actual write does not lie
        with _signals_deferred():
            fd, probe = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=parent)
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise IsotropyError(f"output folder {parent} is not writable (for {path}): {exc.strerror or exc}") from None
    return path


# --------------------------------------------------------------------------- locks

LOCK_TIMEOUT_ENV = "ISOTROPY_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 3600.0


@contextlib.contextmanager
def artefact_lock(path: str | os.PathLike, timeout: float | None = None) -> Iterator[None]:
    """Hold the write lock of the artefact at ``path`` (a ``.NAME.lock`` file beside it).

    Every read-modify-write of an artefact (``isotropy index add``) takes it, so a second
    writer waits (saying so once on stderr) instead of silently losing one of the two
    updates; after ``timeout`` seconds (default ``$ISOTROPY_LOCK_TIMEOUT`` or one hour) it
    gives up with one line.
    """
    from filelock import FileLock, Timeout

    path = Path(path)
    if timeout is None:
        try:
            timeout = float(os.environ.get(LOCK_TIMEOUT_ENV, DEFAULT_LOCK_TIMEOUT))
        except ValueError:
            raise IsotropyError(f"${LOCK_TIMEOUT_ENV} must be a number of seconds") from None
    lock_file = _parent(path) / f".{path.name}.lock"
    lock = FileLock(str(lock_file), thread_local=False)
    try:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            print(f"waiting for another isotropy process that is writing {path} (lock {lock_file}) ...", file=sys.stderr)
            lock.acquire(timeout=timeout)
    except Timeout:
        raise IsotropyError(
            f"{path} is still locked by another isotropy process after {timeout:g} s (lock file {lock_file}); "
            f"try again later, or raise ${LOCK_TIMEOUT_ENV}"
        ) from None
    except OSError as exc:
        raise IsotropyError(f"cannot lock {path} ({lock_file}: {exc.strerror or exc})") from None
    try:
        yield
    finally:
        lock.release()


def check_finite_output(array: np.ndarray, what: str, row_offset: int = 0) -> None:
    """Refuse to write vectors holding NaN or inf: name the first bad row (0-based)."""
    arr = np.asarray(array)
    if arr.dtype.kind in "fc" and arr.size and not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1)) if arr.ndim else np.array([0])
        raise IsotropyError(
            f"{what} would hold a NaN or infinite value (row {int(bad[0]) + row_offset}, 0-based); nothing was written"
        )


def save_npy(path: str | os.PathLike, array: np.ndarray, *, kind: str | None = None, force: bool = False) -> Path:
    """Write one .npy file atomically; vectors holding NaN or inf are refused, nothing is written.

    With ``kind`` (e.g. ``"vectors"``), an existing file that is not an isotropy output of
    that kind is not overwritten unless ``force`` (see :func:`check_output`).
    """
    path = Path(path)
    array = np.ascontiguousarray(array)
    check_finite_output(array, f"the output {path}")
    with atomic_file(path, kind=kind, force=force) as fh:
        np.save(fh, array)
    return path


def write_json(path: str | os.PathLike, obj: Any, *, kind: str | None = None, force: bool = False) -> Path:
    path = Path(path)
    with atomic_file(path, "w", kind=kind, force=force) as fh:
        json.dump(obj, fh, indent=2, sort_keys=True)
        fh.write("\n")
    return path


# --------------------------------------------------------------------------- fitted artefacts

CONFIG_NAME = "config.json"
STATE_NAME = "state.safetensors"


def save_state(
    path: str | os.PathLike,
    kind: str,
    config: dict[str, Any],
    arrays: dict[str, np.ndarray],
    extra_files: dict[str, bytes] | None = None,
    *,
    force: bool = False,
) -> Path:
    """Write ``config.json`` + ``state.safetensors`` (+ extra files) as one folder, atomically.

    An existing ``path`` is replaced only when it is an isotropy ``kind`` (or an empty
    folder), unless ``force``; arrays holding NaN or inf are refused.
    """
    from safetensors.numpy import save_file

    for name, value in arrays.items():
        if np.asarray(value).dtype.kind in "fc" and not np.isfinite(value).all():
            raise IsotropyError(f"refusing to save a {kind} whose array {name!r} holds NaN or infinite values")

    from . import __version__

    meta = {
        "library": LIBRARY_TAG,
        "kind": kind,
        "format_version": FORMAT_VERSION,
        "isotropy_version": __version__,
        **config,
    }
    with atomic_dir(path, kind=kind, force=force) as tmp:
        save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(tmp / STATE_NAME))
        (tmp / CONFIG_NAME).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        for name, data in (extra_files or {}).items():
            (tmp / name).write_bytes(data)
    return Path(path)


def read_config(path: str | os.PathLike, kind: str | None = None) -> dict[str, Any]:
    """Read and validate an artefact folder's ``config.json``."""
    path = Path(path)
    if not path.is_dir():
        raise IsotropyError(f"{path} is not a folder of a fitted isotropy artefact")
    cfg_path = path / CONFIG_NAME
    if not cfg_path.is_file():
        raise IsotropyError(f"{path} is missing {CONFIG_NAME}; it is not a complete isotropy artefact")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IsotropyError(f"{cfg_path} is not valid JSON: {exc}") from None
    if not isinstance(cfg, dict) or cfg.get("library") != LIBRARY_TAG:
        raise IsotropyError(f"{cfg_path} was not written by isotropy")
    if cfg.get("format_version") != FORMAT_VERSION:
        raise IsotropyError(
            f"{path} has format version {cfg.get('format_version')!r}, this isotropy reads "
            f"version {FORMAT_VERSION}; refit or use the isotropy version that wrote it "
            f"({cfg.get('isotropy_version', 'unknown')})"
        )
    if kind is not None and cfg.get("kind") != kind:
        raise IsotropyError(f"{path} holds a {cfg.get('kind')!r}, not a {kind!r}")
    return cfg


def load_state(
    path: str | os.PathLike, kind: str | None = None, required: tuple[str, ...] = ()
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read an artefact folder written by :func:`save_state`; every problem is one clear error."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(path)
    cfg = read_config(path, kind)
    state_path = path / STATE_NAME
    if not state_path.is_file():
        raise IsotropyError(f"{path} is missing {STATE_NAME}; it is not a complete isotropy artefact")
    try:
        arrays = load_file(str(state_path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise IsotropyError(f"{state_path} is corrupt: {exc}") from None
    missing = [k for k in required if k not in arrays]
    if missing:
        other = next((k for k, sig in SIGNATURE_ARRAYS.items() if k != cfg.get("kind") and sig in arrays), None)
        if other is not None:
            raise IsotropyError(
                f"{path}/{CONFIG_NAME} says it holds a {cfg.get('kind')!r}, but its arrays are a {other}'s: "
                f"the config was edited or files were mixed up; restore it or refit"
            )
        raise IsotropyError(f"{state_path} lacks the arrays {', '.join(missing)}; the artefact is incomplete, refit it")
    for name, value in arrays.items():
        if value.dtype.kind in "fc" and not np.isfinite(value).all():
            raise IsotropyError(f"{state_path}: array {name!r} holds NaN or infinite values; the artefact is corrupt, refit it")
    return cfg, arrays


# One array that only a kind's state holds: lets a relabelled folder be named for what it is.
SIGNATURE_ARRAYS = {"whitening": "kernel", "flow": "loss_curve", "index": "count"}


def load_transform(path: str | os.PathLike):
    """Load any fitted transform folder (whitening or flow), dispatching on its ``kind``."""
    cfg = read_config(path)
    kind = cfg.get("kind")
    if kind == "whitening":
        from .whitening import Whitening

        return Whitening.load(path)
    if kind == "flow":
        from .flow import Flow

        return Flow.load(path)
    raise IsotropyError(f"{path} holds a {kind!r}, which is not a transform (whitening or flow)")


# --------------------------------------------------------------------------- vector files


def list_vector_files(path: str | os.PathLike) -> list[Path]:
    """A .npy file, or a folder of .npy shards (sorted by name)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".npy" and p.is_file())
        if not files:
            raise IsotropyError(f"folder {path} has no .npy files")
        return files
    if not path.is_file():
        raise IsotropyError(f"{path} does not exist")
    return [path]


def open_vector_file(file: Path) -> np.ndarray:
    """Memory-map one .npy file of vectors; anything but a readable 2-D array is one clear error."""
    try:
        with open(file, "rb") as fh:
            magic = fh.read(6)
    except OSError as exc:
        raise IsotropyError(f"{file} cannot be read: {exc.strerror or exc}") from None
    if magic != b"\x93NUMPY":
        raise IsotropyError(
            f"{file} is not a .npy file (no NumPy header){'; it is empty' if not magic else ''}: vectors must be "
            f"saved with numpy.save, e.g. by 'isotropy encode'"
        )
    try:
        arr = np.load(file, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        reason = "it holds Python objects, not numbers" if "pickle" in str(exc) else f"{exc}"
        if "mmap length is greater than file size" in str(exc) or "cannot reshape" in str(exc):
            reason = "it is truncated (shorter than its header says)"
        raise IsotropyError(f"{file} is not a readable array of vectors: {reason}") from None
    except OSError as exc:
        raise IsotropyError(f"{file} is not a readable array of vectors: {exc.strerror or exc}") from None
    if arr.dtype.kind not in "biufc":
        raise IsotropyError(f"{file} holds {arr.dtype} values, not numbers")
    if arr.ndim != 2:
        raise IsotropyError(f"{file} must hold a 2-D array (rows x dims), got shape {arr.shape}")
    return arr


def iter_vector_chunks(path: str | os.PathLike, chunk_rows: int = 65536) -> Iterator[tuple[Path, int, np.ndarray]]:
    """Stream ``(file, first_row, chunk)`` from a .npy file or folder of shards, memory-mapped.

    Memory stays bounded by ``chunk_rows`` rows whatever the file size.
    """
    for file in list_vector_files(path):
        arr = open_vector_file(file)
        for start in range(0, arr.shape[0], chunk_rows):
            yield file, start, np.asarray(arr[start : start + chunk_rows])


def load_vectors(path: str | os.PathLike) -> np.ndarray:
    """Load a .npy file or concatenate a folder of shards (every file checked as :func:`open_vector_file` does)."""
    files = list_vector_files(path)
    parts = [open_vector_file(f) for f in files]
    for f, p in zip(files, parts):
        if p.shape[1] != parts[0].shape[1]:
            raise IsotropyError(
                f"{path}: shards differ in width: {f} has {p.shape[1]} columns but {files[0]} has {parts[0].shape[1]}"
            )
    try:
        return np.concatenate([np.asarray(p) for p in parts], axis=0) if len(parts) > 1 else np.array(parts[0])
    except OSError as exc:  # a shard shrank while we read it
        raise IsotropyError(f"{path}: cannot read the vectors: {exc.strerror or exc}") from None
