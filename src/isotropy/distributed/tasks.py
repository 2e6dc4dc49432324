"""The worker side: the fault-injection hook, the fit and encode shard tasks, and the sidecar
that lets a rerun skip a verified shard (the per-process caches they use: :mod:`.workers`).

Every task here runs in a Dask worker process. Tasks are pickled by reference, so they must
stay module-level functions.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..storage.artifacts import file_sha256
from ..storage.text import read_sentences
from ..storage.vectors import check_finite_output, iter_vector_chunks, load_npy, write_vectors
from ..transforms.moments import Moments
from .cluster import input_errors_as_values, is_error_value
from .spec import EncoderSpec
from .workers import worker_encoder, worker_transform

__all__ = [
    "worker_encoder",
    "worker_transform",
    "maybe_fault",
    "fault_marker",
    "fit_shard",
    "merge_stats",
    "encode_shard",
    "shard_outputs",
    "FAULT_ENV",
    "CHUNK_SENTENCES",
    "SIDECAR_FORMAT",
    "SIDECAR_VERSION",
]

SIDECAR_FORMAT = "isotropy-vector-shard"
SIDECAR_VERSION = 1
# Sidecar fields that isotropy 0.1 did not write, read as the value 0.1 always used.
SIDECAR_DEFAULTS = {"backend": "torch"}
CHUNK_SENTENCES = 16384  # sentences encoded at a time in a worker (bounds its memory)
FAULT_ENV = "ISOTROPY_FAULT_ONCE"


def fault_marker(folder: str | os.PathLike, source: str) -> Path:
    """The marker file of ``source`` (a shard, a corpus part's label) in a fault folder (``ISOTROPY_FAULT_ONCE``)."""
    return Path(folder) / (hashlib.sha256(source.encode()).hexdigest()[:16] + ".fault")


def maybe_fault(source: str) -> None:
    """Test hook: see the package docstring (``ISOTROPY_FAULT_ONCE``)."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    mode, _, folder = spec.partition(":")
    marker = fault_marker(folder, source)
    if mode.endswith("-always"):  # every attempt at a source whose marker the drill put there
        if not marker.exists():
            return
    else:
        try:
            marker.open("x").close()
        except FileExistsError:
            return  # this shard already failed once: run normally
    if mode.startswith("exit"):
        os._exit(17)  # the worker process dies mid-task, as on a lost node
    raise RuntimeError(f"injected fault for {source} ({FAULT_ENV})")


def encode_chunks(enc, sentences: list[str]) -> Iterator[np.ndarray]:
    if not sentences:
        yield enc.encode([], show_progress=False)  # (0, dim): an empty shard is a valid shard
    for start in range(0, len(sentences), CHUNK_SENTENCES):
        yield enc.encode(sentences[start : start + CHUNK_SENTENCES], show_progress=False)


# --------------------------------------------------------------------------- fit


@input_errors_as_values
def fit_shard(source: str, spec: EncoderSpec | None, skip_blank: bool = False) -> dict | None:
    """Map step of a fit: the statistics of one shard (text, encoded here, blank lines left out
    when ``skip_blank``; or .npy vectors)."""
    maybe_fault(source)
    m = Moments()
    if spec is None:
        for file, start, chunk in iter_vector_chunks(source):
            m.update(chunk, name=str(file), row_offset=start)
    else:
        sentences = read_sentences(source, allow_empty_file=True)
        if skip_blank:
            sentences = [s for s in sentences if s.strip()]
        enc = worker_encoder(spec)
        for chunk in encode_chunks(enc, sentences):
            m.update(chunk, name=source)
    return m.to_arrays() if m.n else None


def merge_stats(a: dict | None, b: dict | None) -> dict | None:
    """Reduce step: Chan's exact pairwise merge of two shards' statistics."""
    if a is None or b is None:
        return a if b is None else b
    for side in (a, b):  # an input error found in a shard travels up the tree unchanged
        if is_error_value(side):
            return side
    return Moments.from_arrays(a).merge(Moments.from_arrays(b)).to_arrays()


# --------------------------------------------------------------------------- encode


def shard_outputs(source: Path, out_dir: Path) -> tuple[Path, Path]:
    """The vector file and the sidecar of ``source`` in ``out_dir``."""
    return out_dir / f"{source.stem}.npy", out_dir / f"{source.stem}.json"


def sidecar_expect(source: Path, spec: EncoderSpec, tdigest: str | None) -> dict:
    return {
        "format": SIDECAR_FORMAT,
        "version": SIDECAR_VERSION,
        "backend": spec.backend,
        "model": spec.model,
        "model_fingerprint": spec.fingerprint,
        "pooling": spec.pooling,
        "max_length": spec.max_length,
        "transform_hash": tdigest,
        "source_name": source.name,
    }


def read_sidecar(output: Path, side: Path, expect: dict, defaults: dict | None = None) -> tuple[str, dict]:
    """What every resumable shard output checks first: ``("", sidecar)`` when the sidecar ``side`` of ``output``
    is there, readable and records ``expect`` (a key it lacks reads as ``defaults``'), else ``(why not, {})``."""
    if not side.is_file() and not output.is_file():
        return "missing", {}
    if not side.is_file():
        return "no sidecar (interrupted write)", {}
    try:
        meta = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "unreadable sidecar", {}
    if not isinstance(meta, dict):
        return "unreadable sidecar", {}
    for k, v in expect.items():
        if meta.get(k, (defaults or {}).get(k)) != v:
            return f"{k} changed", {}
    return "", meta


def verify(source: Path, npy: Path, side: Path, expect: dict) -> str:
    """'' when the existing output of ``source`` is complete and matches, else why not."""
    reason, meta = read_sidecar(npy, side, expect, SIDECAR_DEFAULTS)
    if reason:
        return reason
    st = source.stat()
    if meta.get("source_size") != st.st_size:
        return "source size changed"
    if meta.get("source_sha256") != file_sha256(source):
        return "source content changed"
    if not npy.is_file():
        return "vector file missing"
    try:
        arr = load_npy(npy, mmap_mode="r")
        shape = tuple(arr.shape)
        del arr
    except (ValueError, OSError):
        return "vector file unreadable"
    if shape != (meta.get("rows"), meta.get("dim")):
        return "vector file has the wrong shape"
    if meta.get("npy_sha256") != file_sha256(npy):
        return "vector file corrupted (sha256 mismatch)"
    return ""


@input_errors_as_values
def encode_shard(source: str, out_dir: str, spec: EncoderSpec, transform: str | None, tdigest: str | None) -> dict:
    """Map step of an encode: verify an existing output, else encode (and transform) one shard."""
    src = Path(source)
    npy, side = shard_outputs(src, Path(out_dir))
    expect = sidecar_expect(src, spec, tdigest)
    reason = verify(src, npy, side, expect)
    if not reason:
        meta = json.loads(side.read_text(encoding="utf-8"))
        return {"status": "skipped", "rows": int(meta["rows"]), "dim": int(meta["dim"]), "reason": ""}
    maybe_fault(source)
    st = src.stat()
    digest = file_sha256(src)
    sentences = read_sentences(src, allow_empty_file=True)
    enc = worker_encoder(spec)
    model = worker_transform(transform, tdigest) if transform is not None else None
    rows = len(sentences)
    dim = int(enc.dim if model is None else model.n_features_out_)
    if side.exists():
        side.unlink()  # the old sidecar must not vouch for a half-replaced .npy
    meta = {
        **expect,
        "source": str(src),
        "source_size": st.st_size,
        "source_mtime_ns": st.st_mtime_ns,
        "source_sha256": digest,
        "rows": rows,
        "dim": dim,
        "dtype": "float32",
        "batch_size": spec.batch_size,
    }
    _write_shard(npy, src, enc, model, sentences, dim, meta)
    prior = "" if reason == "missing" else reason
    return {"status": "encoded", "rows": rows, "dim": dim, "reason": prior}


def _write_shard(npy: Path, src: Path, enc: Any, model: Any, sentences: list[str], dim: int, meta: dict) -> None:
    """Stream the shard's vectors (transformed, if ``model``) into ``npy``, atomically, chunk by chunk.

    The sidecar is storage's vectors sidecar (``npy_sha256`` hashed while writing, renamed in with
    the ``.npy``) carrying ``meta``, the shard's fields: its ``format`` stays ``isotropy-vector-shard``
    (:data:`SIDECAR_FORMAT`), so :func:`verify` reads a sidecar of an earlier run as it always did."""
    with write_vectors(npy, (len(sentences), dim), np.float32, kind=None, sidecar=True, meta=meta) as out:
        for i, chunk in enumerate(encode_chunks(enc, sentences)):
            if model is not None:
                chunk = np.asarray(model.transform(chunk), dtype=np.float32)
            # named after the source shard (write_vectors would refuse too, naming only the output)
            check_finite_output(chunk, f"the vectors of shard {src}", row_offset=i * CHUNK_SENTENCES)
            out.write(chunk)
