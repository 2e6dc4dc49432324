"""isotropy's artefacts: the one header, the one guard, the one way to save and load state (layer 2).

Every folder isotropy writes carries a header -- ``library: "isotropy"``, its ``kind``,
``format_version`` and the ``isotropy_version`` that wrote it -- in its ``config.json``
(the ONNX export's ``isotropy_onnx.json``, an analysis report's ``report.json``, the
``isotropy.json`` of a sentence-transformers folder). :func:`header` writes it,
:func:`read_config` reads and checks it, :func:`artefact_kind` recognises it.

Fitted state is ``config.json`` + ``state.safetensors`` (never pickle), written as one
folder by :func:`save_state` and read back, every array checked finite, by :func:`load_state`.

:func:`check_output` is the policy that protects users' files: an existing output is
replaced only when it is an isotropy output of the same kind (or an empty folder), unless
forced; an output is never an input. :func:`output_dir` and :func:`output_file` are the
atomic writers of :mod:`isotropy.storage.atomic` with that policy applied before the
work and again just before the rename.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._spelling import spell
from ..errors import IsotropyError
from .atomic import atomic_dir, atomic_file, check_free_space, parent_of, temp_prefix
from .integrity import foreign_entries, seal, verify_folder
from .locks import lock_output
from .signals import signals_deferred

__all__ = [
    "FORMAT_VERSION",
    "LIBRARY_TAG",
    "CONFIG_NAME",
    "STATE_NAME",
    "FOLDER_KINDS",
    "FILE_KINDS",
    "header",
    "check_header",
    "read_config",
    "save_state",
    "load_state",
    "artefact_kind",
    "check_output",
    "check_output_path",
    "output_dir",
    "output_file",
    "write_json",
    "folder_digest",
    "file_sha256",
    "vectors_sidecar",
    "is_own_vectors",
]

FORMAT_VERSION = 1
LIBRARY_TAG = "isotropy"
CONFIG_NAME = "config.json"
STATE_NAME = "state.safetensors"
# The files that hold a folder artefact's header, in the order they are looked for.
HEADER_FILES = (CONFIG_NAME, "isotropy_onnx.json", "isotropy.json", "report.json")


# --------------------------------------------------------------------------- the header


def header(kind: str) -> dict[str, Any]:
    """The header every artefact carries: library tag, kind, format version, writing version."""
    from .. import __version__

    return {"library": LIBRARY_TAG, "kind": kind, "format_version": FORMAT_VERSION, "isotropy_version": __version__}


def check_header(meta: Any, where: Path, kind: str | None = None) -> dict[str, Any]:
    """``meta`` as read from the file ``where``, checked: written by isotropy, this format, of ``kind``."""
    folder = where.parent
    if not isinstance(meta, dict) or meta.get("library") != LIBRARY_TAG:
        raise IsotropyError(f"{where} was not written by isotropy")
    if meta.get("format_version") != FORMAT_VERSION:
        raise IsotropyError(
            f"{folder} has format version {meta.get('format_version')!r}, this isotropy reads "
            f"version {FORMAT_VERSION}; refit or use the isotropy version that wrote it "
            f"({meta.get('isotropy_version', 'unknown')})"
        )
    if kind is not None and meta.get("kind") != kind:
        raise IsotropyError(f"{folder} holds a {meta.get('kind')!r}, not a {kind!r}")
    return meta


def read_config(path: str | os.PathLike, kind: str | None = None, name: str = CONFIG_NAME) -> dict[str, Any]:
    """Read and check an artefact folder's header file (``config.json`` unless ``name`` says otherwise)."""
    path = Path(path)
    if not path.is_dir():
        raise IsotropyError(f"{path} is not a folder of a fitted isotropy artefact")
    cfg_path = path / name
    if not cfg_path.is_file():
        raise IsotropyError(f"{path} is missing {name}; it is not a complete isotropy artefact")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IsotropyError(f"{cfg_path} is not valid JSON: {exc}") from None
    except OSError as exc:
        raise IsotropyError(f"{cfg_path} cannot be read: {exc.strerror or exc}") from None
    return check_header(cfg, cfg_path, kind)


# --------------------------------------------------------------------------- the guard
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
    "token-frequencies": "token-frequency table (sif, idf poolings)",
    "static-model": "static model (model2vec folder, isotropy distill)",
}
FILE_KINDS = {
    "vectors": "vector file (.npy)",
    "results": "results file",
    "results-table": "results table (.md)",
}
# what `isotropy demo` writes (static-model/, demo.json) and what its earlier versions did: a folder holding only these
DEMO_ENTRIES = frozenset({"whitening-cls", "analysis", "index", "calibrated", "static-model", "demo.json"})


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def artefact_kind(path: str | os.PathLike) -> str | None:
    """The kind of isotropy output at ``path`` (see FOLDER_KINDS/FILE_KINDS), or None when it is not one."""
    path = Path(path)
    if path.is_dir():
        for name in HEADER_FILES:
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
        if (
            names
            and all(n.endswith((".npy", ".json")) for n in names)
            and any(
                isinstance(_read_json(path / n), dict) and "npy_sha256" in _read_json(path / n)
                for n in names
                if n.endswith(".json")
            )
        ):
            return "vector-shards"
        return None
    if not path.is_file():
        return None
    if path.suffix == ".npy":  # only a file isotropy wrote: its sidecar must describe it as it is now
        return "vectors" if is_own_vectors(path) else None
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
    inputs: Sequence[Any] = (),
    option: str = "--output",
) -> Path:
    """Fail before any work when writing ``path`` would destroy something isotropy did not write.

    ``kind`` is the output's kind (a key of FOLDER_KINDS or FILE_KINDS). Refused: an empty
    path; a path that is, contains or lies inside one of ``inputs`` (those that name files: None,
    ``-`` and objects given in their place are skipped); an existing folder that
    is not an empty folder or an isotropy output of the same kind (a file of the same kind,
    for file outputs), unless ``force``; an isotropy folder holding files or folders its artefact did
    not write (not in its sha256 record), even with ``force``; a folder where a file is expected and the reverse
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
                    f"choose a new folder, or pass {spell('force', True)} to replace it"
                )
            raise IsotropyError(
                f"{path} exists and is not an isotropy {what}; refusing to overwrite it: choose another file, "
                f"or pass {spell('force', True)} to overwrite it"
            )
        if folder and not empty:
            _check_no_foreign(path, what)
    check_output_path(path)
    lock_output(path)  # inside the command line's output_locks(): a second writer of path fails at once
    return path


def _check_no_foreign(path: Path, what: str) -> None:
    """An isotropy folder is replaced whole: refuse (``--force`` or not) when it holds what its artefact did not
    write (its header's sha256 record names every file it wrote), so a user's notes or folders inside it are never lost."""
    foreign = foreign_entries(path)
    if foreign:
        shown = ", ".join(repr(n) for n in foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise IsotropyError(
            f"{path} holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'} that the {what} there did not write "
            f"({shown}); refusing to replace it, {spell('force', True)} or not, as they would be lost: move them out "
            f"of it, or choose another folder"
        )


def _check_inputs(path: Path, inputs: Sequence[Any], folder: bool) -> None:
    out = path.resolve()
    for item in inputs:
        if not isinstance(item, (str, os.PathLike)) or str(item) in ("", "-"):
            continue  # None, standard input, or an object given in place of a file (a fitted transform)
        src = Path(item).expanduser()
        if not (src.exists() or src.is_symlink()):
            continue  # nothing there to lose (a hub model id, a file yet to be named missing by its reader)
        src = src.resolve()
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
    parent = parent_of(path)
    if not parent.is_dir():
        raise IsotropyError(f"output folder {parent} does not exist (for {path})")
    if not os.access(parent, os.W_OK):
        raise IsotropyError(f"output folder {parent} is not writable (for {path})")
    try:  # os.access says yes to root on read-only mounts; an actual write does not lie
        with signals_deferred():
            fd, probe = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=parent)
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise IsotropyError(f"output folder {parent} is not writable (for {path}): {exc.strerror or exc}") from None
    return path


@contextlib.contextmanager
def output_dir(path: str | os.PathLike, kind: str, *, force: bool = False, check: Any = None) -> Iterator[Path]:
    """:func:`~isotropy.storage.atomic.atomic_dir` for an output of ``kind``: :func:`check_output`
    runs before the work and again just before the rename (then ``check``, if given). The
    finished folder is sealed (:func:`~isotropy.storage.integrity.seal`: the sha256 of each
    file it holds, recorded in its header) before it is renamed into place."""

    def guard() -> None:
        check_output(path, kind, force=force)
        if check is not None:
            check()

    with atomic_dir(path, check=guard) as tmp:
        yield tmp
        seal(tmp)


@contextlib.contextmanager
def output_file(path: str | os.PathLike, kind: str, mode: str = "wb", *, force: bool = False) -> Iterator[Any]:
    """:func:`~isotropy.storage.atomic.atomic_file` for an output of ``kind``, guarded like :func:`output_dir`."""
    with atomic_file(path, mode, check=lambda: check_output(path, kind, force=force)) as fh:
        yield fh


def write_json(path: str | os.PathLike, obj: Any, *, kind: str | None = None, force: bool = False) -> Path:
    """Write ``obj`` as indented JSON, atomically; with ``kind``, guarded like :func:`output_file`."""
    path = Path(path)
    check = (lambda: check_output(path, kind, force=force)) if kind is not None else None
    with atomic_file(path, "w", check=check) as fh:
        json.dump(obj, fh, indent=2, sort_keys=True)
        fh.write("\n")
    return path


# --------------------------------------------------------------------------- vector files: how isotropy knows its own
#
# A ``.npy`` is a plain NumPy file: nothing in it says who wrote it, and a user's own 2-D
# array looks exactly like encoded vectors. So every ``.npy`` isotropy writes gets a hidden
# sidecar, ``.NAME.isotropy.json``, holding the header and the file's size and modification
# time as written: a file replaced or edited since (np.save over it, a copy from elsewhere)
# no longer matches, and is then protected like any file of the user's.


def vectors_sidecar(path: str | os.PathLike) -> Path:
    """``X.json`` beside ``X.npy``: what isotropy records of a vector file it wrote (its size,
    modification time and sha256, and the encoder that made it; :mod:`isotropy.storage.vectors`)."""
    return Path(path).with_suffix(".json")


def is_own_vectors(path: str | os.PathLike) -> bool:
    """Whether the ``.npy`` at ``path`` is, unchanged, one isotropy wrote (its sidecar matches it)."""
    path = Path(path)
    meta = _read_json(vectors_sidecar(path))
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (
        isinstance(meta, dict)
        and meta.get("library") == LIBRARY_TAG
        and meta.get("kind") == "vectors"
        and "npy_sha256" in meta
        and meta.get("size") == st.st_size
        and meta.get("mtime_ns") == st.st_mtime_ns
    )


# --------------------------------------------------------------------------- fitted state


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

    meta = {**header(kind), **config}
    nbytes = sum(np.asarray(v).nbytes for v in arrays.values())
    check_free_space(path, nbytes)
    with output_dir(path, kind, force=force) as tmp:
        save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(tmp / STATE_NAME))
        if os.path.getsize(tmp / STATE_NAME) < nbytes:  # safetensors can meet a full disk without a word
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        (tmp / CONFIG_NAME).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        for name, data in (extra_files or {}).items():
            (tmp / name).write_bytes(data)
    return Path(path)


def load_state(
    path: str | os.PathLike, kind: str | None = None, required: tuple[str, ...] = (), *, verify: bool | None = None
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read an artefact folder written by :func:`save_state`; every problem is one clear error.

    Every file the folder's ``config.json`` records a sha256 of is verified first (unless
    ``verify`` is False, or None under ``--no-verify``: :func:`~isotropy.storage.integrity.verifying`).
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(path)
    cfg = read_config(path, kind)
    verify_folder(path, cfg, verify=verify)
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


# --------------------------------------------------------------------------- digests


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of one file, read in blocks."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def folder_digest(folder: str | os.PathLike, names: Sequence[str] | None = None) -> str:
    """The digest of a folder: every file's relative path and bytes, in sorted order (blake2b, 16 bytes).

    ``names`` limits it to those files (missing ones count as absent). Used wherever an
    artefact must prove that a folder it depends on is unchanged (an index's transform, a
    distributed run's transform, an ONNX export's tokenizer files).
    """
    folder = Path(folder)
    h = hashlib.blake2b(digest_size=16)
    files = (
        sorted(q for q in folder.rglob("*") if q.is_file())
        if names is None
        else [folder / n for n in sorted(names) if (folder / n).is_file()]
    )
    for p in files:
        h.update(p.relative_to(folder).as_posix().encode() + b"\0")
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()
