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
from typing import Any, Iterator

import numpy as np

FORMAT_VERSION = 1
LIBRARY_TAG = "isotropy"


class IsotropyError(ValueError):
    """A problem with the user's input, reported as one clear line (the CLI prints only the message)."""


class NotFittedError(IsotropyError, AttributeError):
    """Raised when ``transform`` (or similar) is called before ``fit``.

    Subclasses ValueError and AttributeError, like scikit-learn's own NotFittedError.
    """


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


# --------------------------------------------------------------------------- atomic writes


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "wb") -> Iterator[Any]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename."""
    path = Path(path)
    if not path.parent.exists():
        raise IsotropyError(f"output folder {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it becomes ``path``.

    An existing ``path`` is replaced only after the new folder is complete
    (KeyboardInterrupt included: the temporary folder is removed, the old one kept).
    """
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        raise IsotropyError(f"output folder {parent} does not exist")
    if path.exists() and not path.is_dir():
        raise IsotropyError(f"{path} exists and is not a folder")
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent))
    try:
        yield tmp
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=parent))
            os.replace(path, old / "x")
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def check_output_path(path: str | os.PathLike) -> Path:
    """Fail early (before any expensive work) when ``path`` cannot be written."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise IsotropyError(f"output folder {parent} does not exist (for {path})")
    if not os.access(parent, os.W_OK):
        raise IsotropyError(f"output folder {parent} is not writable (for {path})")
    return path


def save_npy(path: str | os.PathLike, array: np.ndarray) -> Path:
    """Write one .npy file atomically."""
    path = Path(path)
    with atomic_file(path) as fh:
        np.save(fh, np.ascontiguousarray(array))
    return path


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    path = Path(path)
    with atomic_file(path, "w") as fh:
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
) -> Path:
    """Write ``config.json`` + ``state.safetensors`` (+ extra files) as one folder, atomically."""
    from safetensors.numpy import save_file

    from . import __version__

    meta = {
        "library": LIBRARY_TAG,
        "kind": kind,
        "format_version": FORMAT_VERSION,
        "isotropy_version": __version__,
        **config,
    }
    with atomic_dir(path) as tmp:
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
        raise IsotropyError(f"{state_path} lacks the arrays {', '.join(missing)}")
    return cfg, arrays


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
        arr = np.load(file, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise IsotropyError(f"{file} is not a readable .npy array: {exc}") from None
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
    """Load a .npy file or concatenate a folder of shards."""
    parts = [np.load(f, allow_pickle=False) for f in list_vector_files(path)]
    widths = {p.shape[1] if p.ndim == 2 else None for p in parts}
    if len(widths) != 1 or None in widths:
        raise IsotropyError(f"{path}: shards must all be 2-D with the same width, got {sorted(map(str, widths))}")
    return np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
