"""Vectors on disk: every ``.npy`` read, write and chunked stream goes through here (layer 2).

A vector file is a 2-D ``.npy`` array (rows x dims); a folder of them is read as shards,
in name order. Reading memory-maps, so memory stays bounded whatever the file size;
writing streams rows into a temporary file whose header ``numpy.lib.format.open_memmap``
wrote, then renames it into place. Nothing holding NaN or inf is ever written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from .artifacts import check_output, header, vectors_sidecar
from .atomic import atomic_path
from .integrity import sha256_file, verify_file, verifying

# NumPy parses a .npy header with ast.literal_eval, and CPython 3.11's AST constructor is not safe when two threads
# build ASTs at once (python/cpython#106905: "AST constructor recursion depth mismatch", a SystemError). Dask's
# threaded workers read cached and shard files side by side, so every such read in worker code goes through
# load_npy, which parses headers one thread at a time (reads of whole small arrays; memory maps only map).
_NPY_READ = threading.Lock()


def load_npy(file: str | os.PathLike, mmap_mode: str | None = None) -> np.ndarray:
    """``np.load(file, mmap_mode, allow_pickle=False)``, one thread at a time (see :data:`_NPY_READ`)."""
    with _NPY_READ:
        return np.load(file, mmap_mode=mmap_mode, allow_pickle=False)


__all__ = [
    "VECTORS_KIND",
    "load_npy",
    "list_vector_files",
    "open_vector_file",
    "open_vectors",
    "VectorSource",
    "iter_vector_chunks",
    "load_vectors",
    "save_npy",
    "write_vectors",
    "VectorWriter",
    "check_finite_output",
    "sidecar_path",
    "read_sidecar",
    "vectors_provenance",
]

VECTORS_KIND = "vectors"


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


def open_vector_file(
    file: Path, verify: bool = True, advice: str = "vectors must be saved with numpy.save, e.g. by 'isotropy encode'"
) -> np.ndarray:
    """Memory-map one .npy file of vectors; anything but a readable 2-D numeric array is one clear error, ending
    with ``advice`` when the file is no .npy file at all. ``verify``: check it against its sidecar's digest."""
    try:
        with open(file, "rb") as fh:
            magic = fh.read(6)
    except OSError as exc:
        raise IsotropyError(f"{file} cannot be read: {exc.strerror or exc}") from None
    if magic != b"\x93NUMPY":
        raise IsotropyError(f"{file} is not a .npy vector file (no NumPy header{'; it is empty' if not magic else ''}): {advice}")
    try:
        arr = load_npy(file, mmap_mode="r")
    except ValueError as exc:
        reason = "it holds Python objects, not numbers" if "pickle" in str(exc) else f"{exc}"
        if "mmap length is greater than file size" in str(exc) or "cannot reshape" in str(exc):
            reason = "it is truncated (shorter than its header says)"
        raise IsotropyError(f"{file} is not a readable array of vectors: {reason}") from None
    except OSError as exc:
        raise IsotropyError(f"{file} is not a readable array of vectors: {exc.strerror or exc}") from None
    if verify:
        _verify_sidecar(Path(file))
    if arr.dtype.kind not in "biufc":
        raise IsotropyError(f"{file} holds {arr.dtype} values, not numbers")
    if arr.ndim != 2:
        raise IsotropyError(f"{file} must hold a 2-D array (rows x dims), got shape {arr.shape}")
    return arr


CHUNK_BYTES = 64 * 2**20  # float64 bytes of vectors a streamed job holds at a time (VectorSource.chunks)


@dataclass(frozen=True)
class VectorSource:
    """A .npy file or a folder of shards, opened once by :func:`open_vectors`: what a streamed job needs.

    ``files`` (in read order) and their ``shapes`` come from the headers (every file checked as
    :func:`open_vector_file` does, its sidecar's sha256 verified); ``rows`` is their total and
    ``width`` the first file's (a shard of another width is named by whoever reads its rows:
    :meth:`load` here, the moments or the transform in a stream). The rows themselves are read
    only by :meth:`chunks`, :meth:`head` or :meth:`load`.
    """

    path: Path
    files: tuple[Path, ...]
    shapes: tuple[tuple[int, int], ...]
    dtype: np.dtype  # the first file's

    @property
    def rows(self) -> int:
        return sum(s[0] for s in self.shapes)

    @property
    def width(self) -> int:
        return self.shapes[0][1]

    def chunks(self, chunk_rows: int | None = None) -> Iterator[tuple[Path, int, np.ndarray]]:
        """Stream ``(file, first_row, chunk)``, memory-mapped: at most ``chunk_rows`` rows at a time
        (None: as many as fit :data:`CHUNK_BYTES` in float64, at least 1024)."""
        if chunk_rows is None:
            chunk_rows = max(1024, CHUNK_BYTES // (8 * max(1, self.width)))
        for file in self.files:
            arr = open_vector_file(file)
            for start in range(0, arr.shape[0], chunk_rows):
                yield file, start, np.asarray(arr[start : start + chunk_rows])

    def head(self, n: int = 1) -> np.ndarray:
        """The first ``n`` rows of the first file (e.g. a probe of what a transform gives)."""
        return np.asarray(open_vector_file(self.files[0])[:n])

    def load(self) -> np.ndarray:
        """Every row in memory: the file, or the shards concatenated (which must share one width)."""
        parts = [open_vector_file(f) for f in self.files]
        for f, p in zip(self.files, parts):
            if p.shape[1] != parts[0].shape[1]:
                raise IsotropyError(
                    f"{self.path}: shards differ in width: {f} has {p.shape[1]} columns but {self.files[0]} has {parts[0].shape[1]}"
                )
        try:
            return np.concatenate([np.asarray(p) for p in parts], axis=0) if len(parts) > 1 else np.array(parts[0])
        except OSError as exc:  # a shard shrank while we read it
            raise IsotropyError(f"{self.path}: cannot read the vectors: {exc.strerror or exc}") from None

    def provenance(self) -> dict | None:
        """The encoder of these vectors, from their sidecars (see :func:`vectors_provenance`)."""
        return _provenance(self.files)


def open_vectors(path: str | os.PathLike) -> VectorSource:
    """Open a .npy file or a folder of shards once: its files, shapes, total rows, width and a chunk stream."""
    files = list_vector_files(path)
    arrays = [open_vector_file(f) for f in files]  # headers only (memory maps, dropped here)
    return VectorSource(Path(path), tuple(files), tuple((int(a.shape[0]), int(a.shape[1])) for a in arrays), arrays[0].dtype)


def iter_vector_chunks(path: str | os.PathLike, chunk_rows: int = 65536) -> Iterator[tuple[Path, int, np.ndarray]]:
    """Stream ``(file, first_row, chunk)`` from a .npy file or folder of shards, memory-mapped.

    Memory stays bounded by ``chunk_rows`` rows whatever the file size.
    """
    yield from open_vectors(path).chunks(chunk_rows)


def load_vectors(path: str | os.PathLike) -> np.ndarray:
    """Load a .npy file or concatenate a folder of shards (every file checked as :func:`open_vector_file` does)."""
    return open_vectors(path).load()


def check_finite_output(array: np.ndarray, what: str, row_offset: int = 0) -> None:
    """Refuse to write vectors holding NaN or inf: name the first bad row (0-based)."""
    arr = np.asarray(array)
    if arr.dtype.kind in "fc" and arr.size and not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1)) if arr.ndim else np.array([0])
        raise IsotropyError(
            f"{what} would hold a NaN or infinite value (row {int(bad[0]) + row_offset}, 0-based); nothing was written"
        )


def save_npy(
    path: str | os.PathLike, array: np.ndarray, *, kind: str | None = None, force: bool = False, meta: dict | None = None
) -> Path:
    """Write one .npy file atomically; vectors holding NaN or inf are refused, nothing is written.

    With ``kind`` (e.g. :data:`VECTORS_KIND`), an existing file that is not an isotropy
    output of that kind is not overwritten unless ``force``; vectors get their sidecar
    (:func:`_sidecar_for`, with ``meta``) in the same rename.
    """
    path = Path(path)
    array = np.ascontiguousarray(array)
    check_finite_output(array, f"the output {path}")
    check = (lambda: check_output(path, kind, force=force)) if kind is not None else None
    sidecar = (lambda tmp: _sidecar_for(path, tmp, sha256_file(tmp), meta)) if kind == VECTORS_KIND else None
    with atomic_path(path, check=check, sidecar=sidecar) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array)
        fh.flush()
    return path


class VectorWriter:
    """Rows appended, chunk by chunk, to a ``.npy`` being written (see :func:`write_vectors`)."""

    def __init__(self, fh, path: Path, shape: tuple[int, int], dtype: np.dtype, digest: Any = None) -> None:
        self._fh, self.path, self.shape, self.dtype = fh, path, shape, dtype
        self._digest = digest  # a hashlib object fed every byte written after the header (the sidecar's sha256)
        self.rows = 0

    def write(self, chunk: np.ndarray) -> None:
        chunk = np.asarray(chunk)
        if chunk.ndim != 2 or chunk.shape[1] != self.shape[1]:
            raise IsotropyError(f"{self.path}: a chunk of shape {chunk.shape} does not fit rows of {self.shape[1]} values")
        if self.rows + chunk.shape[0] > self.shape[0]:
            raise IsotropyError(f"{self.path}: more than the {self.shape[0]} rows announced")
        check_finite_output(chunk, f"the output {self.path}", row_offset=self.rows)
        data = np.ascontiguousarray(chunk, dtype=self.dtype).tobytes()
        self._fh.write(data)
        if self._digest is not None:
            self._digest.update(data)
        self.rows += chunk.shape[0]


@contextlib.contextmanager
def write_vectors(
    path: str | os.PathLike,
    shape: tuple[int, int],
    dtype: np.dtype | type = np.float32,
    *,
    kind: str | None = VECTORS_KIND,
    force: bool = False,
    meta: dict | None = None,
    sidecar: bool | None = None,
) -> Iterator[VectorWriter]:
    """Stream ``shape[0]`` rows into the .npy ``path``, atomically, in bounded memory.

    ``numpy.lib.format.open_memmap`` writes the header (and sizes the file); the rows
    are then written sequentially through an ordinary file handle, so memory does not
    grow with the file (a writable memory map would keep every written page resident
    until it is flushed). The file appears only when all rows were written. Vectors
    (``kind`` :data:`VECTORS_KIND`, or ``sidecar=True``) get their sidecar ``X.json`` in the same
    rename: the sha256 is computed on the bytes as they are written (no second pass), plus ``meta``
    (a distributed shard: ``kind=None``, its caller checked the folder, and ``sidecar=True``).
    """
    path = Path(path)
    shape = (int(shape[0]), int(shape[1]))
    dtype = np.dtype(dtype)
    check = (lambda: check_output(path, kind, force=force)) if kind is not None else None
    digest = hashlib.sha256() if (kind == VECTORS_KIND if sidecar is None else sidecar) else None
    beside = (lambda tmp: _sidecar_for(path, tmp, digest.hexdigest(), meta)) if digest is not None else None
    with atomic_path(path, check=check, sidecar=beside) as tmp:
        mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
        del mm  # header written, file sized; the data goes in through a plain handle
        offset = os.path.getsize(tmp) - shape[0] * shape[1] * dtype.itemsize
        with open(tmp, "r+b") as fh:
            if digest is not None:
                digest.update(fh.read(offset))
            fh.seek(offset)
            writer = VectorWriter(fh, path, shape, dtype, digest)
            yield writer
            if writer.rows != shape[0]:
                raise IsotropyError(f"{path}: {writer.rows} rows were written, {shape[0]} were announced")


# --------------------------------------------------------------------------- sidecars
#
# A vector file X.npy written by isotropy (`isotropy encode` and `transform` outputs, a distributed
# shard) has a sidecar X.json, renamed in with it: its size, modification time and sha256
# (``npy_sha256``) and, when known, the encoder that made it. The size and time mark the file as
# isotropy's own (an output it may replace: storage.artifacts.is_own_vectors); every read verifies
# the sha256 (once per file version and process). A file without a sidecar (the user's own, or one
# written before sidecars) is read as before, and replaced only with --force.

SIDECAR_FORMAT = "isotropy-vectors"
_verified: set[tuple[str, int, int]] = set()  # (path, size, mtime_ns) already verified in this process


def sidecar_path(npy: str | os.PathLike) -> Path:
    return vectors_sidecar(npy)


def read_sidecar(npy: str | os.PathLike) -> dict | None:
    """The sidecar of ``npy`` when isotropy wrote one (a JSON object with ``npy_sha256``), else None."""
    side = sidecar_path(npy)
    try:
        meta = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and "npy_sha256" in meta else None


def _sidecar_for(npy: Path, tmp: Path, sha256: str, meta: dict | None) -> tuple[Path, bytes] | None:
    """The sidecar of ``npy`` about to be renamed in from ``tmp``; None (no sidecar) where an
    ``X.json`` that isotropy did not write is in the way: it is never replaced."""
    side = sidecar_path(npy)
    if side.exists() and read_sidecar(npy) is None:
        return None
    st = os.stat(tmp)  # a rename keeps both
    data = {
        **header(VECTORS_KIND),
        "format": SIDECAR_FORMAT,
        **(meta or {}),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "npy_sha256": sha256,
    }
    return side, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def _verify_sidecar(npy: Path) -> None:
    if not verifying():
        return
    meta = read_sidecar(npy)
    if meta is None:
        return
    try:
        st = npy.stat()
    except OSError:
        return
    key = (str(npy.resolve()), st.st_size, st.st_mtime_ns)
    if key in _verified:
        return
    verify_file(npy, meta["npy_sha256"], sidecar_path(npy))
    _verified.add(key)


def vectors_provenance(path: str | os.PathLike) -> dict | None:
    """The encoder (model, fingerprint, pooling, max_length, dim) of the vectors at ``path`` (a .npy or a
    folder of shards), from their sidecars; None when unknown or when shards disagree."""
    return _provenance(list_vector_files(path))


def _provenance(files: Sequence[Path]) -> dict | None:
    seen = []
    for file in files:
        meta = read_sidecar(file)
        if meta is None:
            return None
        if isinstance(meta.get("provenance"), dict):
            seen.append(meta["provenance"])
        elif meta.get("format") == "isotropy-vector-shard" and meta.get("transform_hash") is None:
            prov = {
                "model": meta.get("model"),
                "fingerprint": meta.get("model_fingerprint"),
                "pooling": meta.get("pooling"),
                "max_length": meta.get("max_length"),
                "dim": meta.get("dim"),
            }
            seen.append({k: v for k, v in prov.items() if v is not None})
        else:
            return None
    return seen[0] if seen and all(p == seen[0] for p in seen) else None
