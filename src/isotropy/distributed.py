"""Beyond one machine: encode sentence shards and fit whitening on a Dask cluster.

The whitening statistics (row count, mean, centred scatter, plus the two small
Ledoit-Wolf moments) merge exactly (:class:`isotropy.whitening.Moments`), so a fit
on a billion sentences is a map -- each worker encodes one shard and accumulates
its statistics -- followed by a tree of merges. This module runs that on a user's
existing Dask cluster (``address=``) or on a local one (one worker process per
core). It is an optional extra: ``pip install 'isotropy[distributed]'``; the core
package never imports it. docs/DISTRIBUTED.md says why Dask rather than Ray and how
to run it on a real cluster.

Design (decided once, here):

* **Workers get a spec, not a model.** :class:`EncoderSpec` is a handful of plain
  fields (model id or folder, pooling, max_length, batch size, device) plus the
  model's fingerprint as the client saw it. Each worker process loads the model once
  and keeps it (``_ENCODERS``); a worker whose model files differ from the client's
  (another version of the folder on another node) fails with one clear line instead
  of silently mixing two models into one fit.
* **Exactness.** Shards are reduced by a fixed binary tree in input order (not in
  completion order), so a rerun gives bit-identical statistics, and the merge is
  Chan's exact pairwise update: the statistics equal ``numpy.cov`` of all the
  vectors to within 1e-9 relative. The vectors themselves are what the encoder
  produces for each shard; batches of different composition (another shard split,
  another batch size) change them at float32 rounding (~1e-7) -- that is the
  encoder's property, not the merge's (``batch_size=1`` makes them identical).
* **Retries.** Every task is submitted with ``retries`` (a task that raises is run
  again) and Dask reschedules tasks whose worker died. Tasks are idempotent: a
  shard's statistics are returned, never accumulated in place, and output files
  are written atomically, so a retried or duplicated task cannot count a shard twice.
* **Resumable encoding.** Each vector shard ``OUT/<stem>.npy`` gets a sidecar
  ``OUT/<stem>.json`` (written last, atomically) recording the source file's size,
  mtime and sha256, the row count and width, the sha256 of the .npy, and the model
  fingerprint, pooling, max_length and transform hash. A rerun skips a shard only
  when all of it verifies; anything else is encoded again.
* **Fault injection** (for tests and chaos drills on a real cluster): when the
  environment variable ``ISOTROPY_FAULT_ONCE`` is ``raise:DIR`` or ``exit:DIR`` in a
  worker, the first attempt at each shard (marked by a file created in DIR) raises,
  or kills the worker process outright. Unset, it costs one dictionary look-up.
"""

from __future__ import annotations

import contextlib
import functools
import glob as globmod
import hashlib
import json
import os
import re
import socket
import threading
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ._io import (
    IsotropyError,
    ProgressBar,
    atomic_file,
    check_finite_output,
    check_output,
    open_vector_file,
    sweep_stale_temporaries,
    write_json,
)

__all__ = ["EncoderSpec", "ShardResult", "EncodeReport", "fit_whitening", "encode", "expand_inputs", "ENGINES"]

ENGINES = ("dask",)
SIDECAR_FORMAT = "isotropy-vector-shard"
SIDECAR_VERSION = 1
SHARDS_KIND = "vector-shards"
CONNECT_TIMEOUT = 5.0  # seconds to reach an existing scheduler before failing
CHUNK_SENTENCES = 16384  # sentences encoded at a time in a worker (bounds its memory)
FAULT_ENV = "ISOTROPY_FAULT_ONCE"
_GLOB_CHARS = re.compile(r"[*?\[]")


# --------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class EncoderSpec:
    """What a worker needs to build an :class:`isotropy.Encoder` itself (no pickled model).

    ``model`` is a Hugging Face id or a folder every worker can read at the same path
    (``None``: the embedded default model, installed with isotropy on every worker).
    ``fingerprint`` is filled in by :meth:`resolve` on the client; workers check it.
    """

    model: str | None = None
    pooling: str | None = None
    max_length: int | None = None
    batch_size: int = 64
    device: str | None = None
    fingerprint: str | None = field(default=None, compare=False)
    dim: int | None = field(default=None, compare=False)

    @classmethod
    def coerce(cls, value: "EncoderSpec | dict | str | os.PathLike | None") -> "EncoderSpec":
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, (str, os.PathLike)):
            return cls(model=str(value))
        if isinstance(value, dict):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                raise IsotropyError(f"unknown encoder spec fields: {', '.join(sorted(unknown))}")
            return cls(**value)
        raise IsotropyError(f"an encoder spec is an EncoderSpec, a dict or a model name, not {type(value).__name__}")

    def build(self):
        from .encoding import Encoder

        return Encoder(self.model, pooling=self.pooling, max_length=self.max_length, batch_size=self.batch_size, device=self.device)

    def resolve(self) -> "EncoderSpec":
        """Load the model here once: validates the spec before any cluster work, pins the
        pooling and max_length the model defaults to, and records its fingerprint."""
        enc = _worker_encoder(self)  # cached: repeated calls in one process load the model once
        model = None if self.model is None else (str(enc.folder) if enc.folder is not None else enc.model_name)
        return replace(self, model=model, pooling=enc.pooling, max_length=enc.max_length, fingerprint=enc.fingerprint(), dim=enc.dim)

    def key(self) -> tuple:
        return (self.model, self.pooling, self.max_length, self.batch_size, self.device)


@dataclass
class ShardResult:
    source: str
    output: str | None
    rows: int
    status: str  # "encoded", or "skipped" (its existing output verified and kept)
    reason: str = ""  # why an existing output was redone


@dataclass
class EncodeReport:
    shards: list[ShardResult]
    dim: int
    output: str

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards)

    @property
    def encoded(self) -> list[ShardResult]:
        return [s for s in self.shards if s.status == "encoded"]

    @property
    def skipped(self) -> list[ShardResult]:
        return [s for s in self.shards if s.status == "skipped"]

    def describe(self) -> str:
        redone = sum(1 for s in self.encoded if s.reason)
        return (
            f"{len(self.shards)} shards, {self.rows} x {self.dim} vectors in {self.output}: "
            f"{len(self.encoded)} encoded ({redone} redone), {len(self.skipped)} verified and skipped"
        )


# --------------------------------------------------------------------------- inputs


def expand_inputs(inputs: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """Shard files from a glob pattern, a file, or a list of either; sorted, de-duplicated.

    A pattern that matches no file is one clear error naming it.
    """
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if not items:
        raise IsotropyError("no input shards given")
    out: list[Path] = []
    for item in items:
        text = os.path.expanduser(str(item))
        if _GLOB_CHARS.search(text):
            matches = sorted(p for p in globmod.glob(text, recursive=True) if Path(p).is_file())
            if not matches:
                raise IsotropyError(f"the pattern {str(item)!r} matches no file")
            out.extend(Path(p) for p in matches)
        else:
            p = Path(text)
            if not p.is_file():
                raise IsotropyError(f"input shard {item} does not exist or is not a file")
            out.append(p)
    seen: dict[Path, None] = {}
    for p in out:
        seen.setdefault(p.resolve(), None)
    return list(seen)


def _vector_widths(files: list[Path]) -> int:
    """Width shared by all .npy shards (read from headers only), or one clear error."""
    first: tuple[Path, int] | None = None
    for f in files:
        arr = open_vector_file(f)
        if first is None:
            first = (f, arr.shape[1])
        elif arr.shape[1] != first[1]:
            raise IsotropyError(
                f"vector shards differ in width: {f} has {arr.shape[1]} columns but {first[0]} has {first[1]}"
            )
    assert first is not None
    return first[1]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def transform_hash(folder: str | os.PathLike) -> str:
    """sha256 over a fitted transform folder's file names and contents."""
    folder = Path(folder)
    if not folder.is_dir():
        raise IsotropyError(f"transform {folder} is not a folder of a fitted transform")
    h = hashlib.sha256()
    for f in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        h.update(f.name.encode() + b"\0" + _sha256(f).encode())
    return h.hexdigest()


# --------------------------------------------------------------------------- cluster


def _import_dask():
    try:
        import distributed
    except ImportError:
        raise IsotropyError(
            "the distributed engine needs Dask: pip install 'isotropy[distributed]'"
        ) from None
    return distributed


def _probe(address: str, timeout: float) -> None:
    """Fail within ``timeout`` seconds, naming the address, when nothing listens there."""
    m = re.match(r"^(?:(tcp|tls|ucx|inproc|ws|wss)://)?\[?([^\]/]*?)\]?:(\d+)/?$", address.strip())
    if not m:
        raise IsotropyError(f"cannot use the Dask scheduler address {address!r}: expected tcp://HOST:PORT")
    scheme, host, port = m.groups()
    if scheme in (None, "tcp", "tls", "ws", "wss"):
        try:
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
        except OSError as exc:
            raise IsotropyError(
                f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({exc.strerror or exc}); "
                f"is it running, and is the address right?"
            ) from None


@contextlib.contextmanager
def _client(address: Any = None, n_workers: int | None = None) -> Iterator[Any]:
    """A Dask client: on ``address`` (a scheduler address or an existing ``distributed.Client``),
    or on a fresh local cluster of ``n_workers`` processes (default: one per core), torn down after."""
    distributed = _import_dask()
    if address is not None and not isinstance(address, (str, os.PathLike)):
        if not isinstance(address, distributed.Client):
            raise IsotropyError(f"address must be a scheduler address or a distributed.Client, not {type(address).__name__}")
        yield address
        return
    if address is not None:
        address = str(address)
        _probe(address, CONNECT_TIMEOUT)
        try:
            client = distributed.Client(address, timeout=CONNECT_TIMEOUT * 2, set_as_default=False)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise IsotropyError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None
        try:
            yield client
        finally:
            client.close()
        return
    import logging
    import tempfile

    n = int(n_workers or os.cpu_count() or 1)
    if n < 1:
        raise IsotropyError(f"n_workers must be at least 1, got {n_workers}")
    with tempfile.TemporaryDirectory(prefix="isotropy-dask-") as scratch:
        # One single-threaded worker process per core; Dask sets OMP/MKL threads to 1 in
        # each, so torch in n workers does not oversubscribe the n cores.
        cluster = distributed.LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
            local_directory=scratch, silence_logs=logging.ERROR,
        )
        try:
            with distributed.Client(cluster, set_as_default=False) as client:
                yield client
        finally:
            cluster.close()


def _gather(client: Any, futures: list, label: str, sources: list[Path], show_progress: bool | None, fetch: bool = True) -> list:
    """Results of ``futures`` in submission order, a progress bar advancing as they finish.

    A task that raised (after its retries) re-raises here; a worker lost too often while
    running a shard becomes one line naming the shard.
    """
    distributed = _import_dask()
    index = {f.key: i for i, f in enumerate(futures)}
    results: list = [None] * len(futures)
    with ProgressBar(len(futures), show_progress, label, min_total=2) as bar:
        for fut in distributed.as_completed(futures, loop=client.loop):
            i = index[fut.key]
            try:
                if fetch or fut.status == "error":
                    results[i] = _raise_error_value(fut.result())  # re-raises the task's error
            except distributed.KilledWorker:
                raise IsotropyError(
                    f"shard {sources[i]} killed its worker repeatedly (out of memory? a crash in the model?)"
                ) from None
            bar.advance()
    return results


# --------------------------------------------------------------------------- worker side

_LOCK = threading.Lock()
_ENCODERS: dict[tuple, Any] = {}
_TRANSFORMS: dict[tuple, Any] = {}


def _worker_encoder(spec: EncoderSpec):
    """The encoder for ``spec``, loaded once per worker process (and on the client) and kept."""
    key = spec.key()
    with _LOCK:
        enc = _ENCODERS.get(key)
        if enc is None:
            enc = spec.build()
            if spec.fingerprint is not None and enc.fingerprint() != spec.fingerprint:
                raise IsotropyError(
                    f"the worker on {socket.gethostname()} loaded different weights for model {spec.model} "
                    f"(fingerprint {enc.fingerprint()} != {spec.fingerprint} on the client); "
                    f"make the same model files available to every worker"
                )
            _ENCODERS[key] = enc
    return enc


def _worker_transform(path: str, digest: str):
    from ._io import load_transform

    key = (path, digest)
    with _LOCK:
        model = _TRANSFORMS.get(key)
        if model is None:
            if transform_hash(path) != digest:
                raise IsotropyError(f"the transform {path} on {socket.gethostname()} differs from the client's copy")
            model = _TRANSFORMS[key] = load_transform(path)
    return model


def _maybe_fault(source: str) -> None:
    """Test hook: see the module docstring (``ISOTROPY_FAULT_ONCE``)."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    mode, _, folder = spec.partition(":")
    marker = Path(folder) / (hashlib.sha256(source.encode()).hexdigest()[:16] + ".fault")
    try:
        marker.open("x").close()
    except FileExistsError:
        return  # this shard already failed once: run normally
    if mode == "exit":
        os._exit(17)  # the worker process dies mid-task, as on a lost node
    raise RuntimeError(f"injected fault for {source} ({FAULT_ENV})")


def _encode_chunks(enc, sentences: list[str]) -> Iterator[np.ndarray]:
    if not sentences:
        yield enc.encode([], show_progress=False)  # (0, dim): an empty shard is a valid shard
    for start in range(0, len(sentences), CHUNK_SENTENCES):
        yield enc.encode(sentences[start : start + CHUNK_SENTENCES], show_progress=False)


def _input_errors_as_values(fn):
    """Run a task so that bad input (an IsotropyError) comes back as ``{"error": line}``.

    Dask would retry a raising task (the same bad line fails every time) and log each
    attempt's traceback on the worker; an error returned as a value is neither retried
    nor logged, and the client raises it as the one line it is. Worker crashes and
    other exceptions still raise, so they are retried.
    """

    @functools.wraps(fn)
    def task(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except IsotropyError as exc:
            return {"error": str(exc)}

    return task


def _raise_error_value(result: Any) -> Any:
    if isinstance(result, dict) and set(result) == {"error"}:
        raise IsotropyError(result["error"])
    return result


@_input_errors_as_values
def _fit_shard(source: str, spec: EncoderSpec | None) -> dict | None:
    """Map step of a fit: the statistics of one shard (text, encoded here; or .npy vectors)."""
    from ._io import iter_vector_chunks
    from .whitening import Moments

    _maybe_fault(source)
    m = Moments()
    if spec is None:
        for file, start, chunk in iter_vector_chunks(source):
            m.update(chunk, name=str(file), row_offset=start)
    else:
        from .data import read_sentences

        sentences = read_sentences(source, allow_empty_file=True)
        enc = _worker_encoder(spec)
        for chunk in _encode_chunks(enc, sentences):
            m.update(chunk, name=source)
    return m.to_arrays() if m.n else None


def _merge(a: dict | None, b: dict | None) -> dict | None:
    """Reduce step: Chan's exact pairwise merge of two shards' statistics."""
    from .whitening import Moments

    if a is None or b is None:
        return a if b is None else b
    for side in (a, b):  # an input error found in a shard travels up the tree unchanged
        if set(side) == {"error"}:
            return side
    return Moments.from_arrays(a).merge(Moments.from_arrays(b)).to_arrays()


def _tree(items: Sequence[Any], combine) -> Any:
    """Reduce ``items`` by a fixed binary tree in input order: ``combine(a, b, depth, i)``.

    Pairs (0,1), (2,3), ... then pairs of those, an odd one out carried up. The shape
    depends only on the number of items, never on which task finished first, so
    the floating-point result is the same on every run.
    """
    level, depth = list(items), 0
    if not level:
        raise IsotropyError("nothing to reduce")
    while len(level) > 1:
        depth += 1
        nxt = [combine(level[i], level[i + 1], depth, i) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _sidecar_expect(source: Path, spec: EncoderSpec, tdigest: str | None) -> dict:
    return {
        "format": SIDECAR_FORMAT,
        "version": SIDECAR_VERSION,
        "model": spec.model,
        "model_fingerprint": spec.fingerprint,
        "pooling": spec.pooling,
        "max_length": spec.max_length,
        "transform_hash": tdigest,
        "source_name": source.name,
    }


def _verify(source: Path, npy: Path, side: Path, expect: dict) -> str:
    """'' when the existing output of ``source`` is complete and matches, else why not."""
    if not side.is_file() and not npy.is_file():
        return "missing"
    if not side.is_file():
        return "no sidecar (interrupted write)"
    try:
        meta = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "unreadable sidecar"
    if not isinstance(meta, dict):
        return "unreadable sidecar"
    for k, v in expect.items():
        if meta.get(k) != v:
            return f"{k} changed"
    st = source.stat()
    if meta.get("source_size") != st.st_size:
        return "source size changed"
    if meta.get("source_sha256") != _sha256(source):
        return "source content changed"
    if not npy.is_file():
        return "vector file missing"
    try:
        arr = np.load(npy, mmap_mode="r", allow_pickle=False)
        shape = tuple(arr.shape)
        del arr
    except (ValueError, OSError):
        return "vector file unreadable"
    if shape != (meta.get("rows"), meta.get("dim")):
        return "vector file has the wrong shape"
    if meta.get("npy_sha256") != _sha256(npy):
        return "vector file corrupted (sha256 mismatch)"
    return ""


@_input_errors_as_values
def _encode_shard(source: str, out_dir: str, spec: EncoderSpec, transform: str | None, tdigest: str | None) -> dict:
    """Map step of an encode: verify an existing output, else encode (and transform) one shard."""
    from .data import read_sentences

    src = Path(source)
    npy, side = _outputs(src, Path(out_dir))
    expect = _sidecar_expect(src, spec, tdigest)
    reason = _verify(src, npy, side, expect)
    if not reason:
        meta = json.loads(side.read_text(encoding="utf-8"))
        return {"status": "skipped", "rows": int(meta["rows"]), "dim": int(meta["dim"]), "reason": ""}
    _maybe_fault(source)
    st = src.stat()
    digest = _sha256(src)
    sentences = read_sentences(src, allow_empty_file=True)
    enc = _worker_encoder(spec)
    model = _worker_transform(transform, tdigest) if transform is not None else None
    rows, dim = len(sentences), None
    if side.exists():
        side.unlink()  # the old sidecar must not vouch for a half-replaced .npy
    with atomic_file(npy) as fh:
        for i, chunk in enumerate(_encode_chunks(enc, sentences)):
            if model is not None:
                chunk = np.asarray(model.transform(chunk), dtype=np.float32)
            check_finite_output(chunk, f"the vectors of shard {src}", row_offset=i * CHUNK_SENTENCES)
            if i == 0:  # header first, then the rows streamed chunk by chunk (bounded memory)
                dim = int(chunk.shape[1])
                header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False, "shape": (rows, dim)}
                np.lib.format.write_array_header_1_0(fh, header)
            fh.write(np.ascontiguousarray(chunk, dtype=np.float32).tobytes())
    meta = {
        **expect,
        "source": str(src),
        "source_size": st.st_size,
        "source_mtime_ns": st.st_mtime_ns,
        "source_sha256": digest,
        "rows": rows,
        "dim": dim,
        "dtype": "float32",
        "npy_sha256": _sha256(npy),
        "batch_size": spec.batch_size,
    }
    write_json(side, meta)
    prior = "" if reason == "missing" else reason
    return {"status": "encoded", "rows": rows, "dim": dim, "reason": prior}


def _outputs(source: Path, out_dir: Path) -> tuple[Path, Path]:
    return out_dir / f"{source.stem}.npy", out_dir / f"{source.stem}.json"


# --------------------------------------------------------------------------- public API


def _whitening_params(whitening: Any) -> dict:
    from .whitening import Whitening, parse_shrinkage

    if whitening is None:
        params: dict = {}
    elif isinstance(whitening, Whitening):
        params = whitening.get_params()
    elif isinstance(whitening, dict):
        params = dict(whitening)
    else:
        raise IsotropyError(f"whitening must be a Whitening or a dict of its parameters, not {type(whitening).__name__}")
    if "shrinkage" in params:
        params["shrinkage"] = parse_shrinkage(params["shrinkage"])
    try:
        return Whitening(**params).get_params()
    except TypeError as exc:
        raise IsotropyError(f"bad whitening parameters: {exc}") from None


def fit_whitening(
    inputs: str | os.PathLike | Sequence[str | os.PathLike],
    encoder: EncoderSpec | dict | str | None = None,
    whitening: Any = None,
    *,
    output: str | os.PathLike | None = None,
    address: Any = None,
    n_workers: int | None = None,
    retries: int = 2,
    show_progress: bool | None = None,
    force: bool = False,
):
    """Fit a :class:`isotropy.Whitening` on sentence shards (or .npy vector shards) on a Dask cluster.

    ``inputs``: a glob (``'shards/*.txt'``), a file, or a list of them. Text shards hold
    one sentence a line and are encoded on the workers with ``encoder`` (an
    :class:`EncoderSpec`, a dict of its fields, or a model name); shards ending in
    ``.npy`` are taken as pre-computed vectors (no encoder). ``whitening``: a
    :class:`Whitening` (its parameters are used) or a dict of parameters.
    ``address``: a scheduler address (``tcp://host:8786``) or a ``distributed.Client``;
    ``None`` starts a local cluster with ``n_workers`` processes (default one per core).

    Each shard's statistics are computed on a worker and reduced by a tree of exact
    merges; the result equals ``Whitening(**params).fit(all vectors)`` to within 1e-9
    relative. With ``output``, the fitted folder is written there (the same folder a
    single-machine fit writes).
    """
    from .whitening import Moments, Whitening

    files = expand_inputs(inputs)
    if output is not None:
        check_output(output, "whitening", force=force, inputs=files)
    params = _whitening_params(whitening)
    vectors = [f.suffix == ".npy" for f in files]
    if any(vectors) and not all(vectors):
        raise IsotropyError("input shards mix .npy vectors and text files; fit on one kind at a time")
    if all(vectors):
        width = _vector_widths(files)
        spec = None
    else:
        spec = EncoderSpec.coerce(encoder).resolve()
        width = spec.dim
    Whitening(**params)._checked_params(width)  # bad n_components etc. fail before the cluster starts
    run = uuid.uuid4().hex[:12]  # every run's tasks are new tasks (no stale results reused)
    with _client(address, n_workers) as client:
        shard_futs = [
            client.submit(_fit_shard, str(f), spec, retries=retries, key=f"isotropy-fit-{run}-{i}")
            for i, f in enumerate(files)
        ]
        root = _tree(
            shard_futs,
            lambda a, b, depth, i: client.submit(_merge, a, b, retries=retries, key=f"isotropy-merge-{run}-{depth}-{i}"),
        )
        # Only the root comes back to the client: per-shard statistics (d x d each) stay on the workers.
        _gather(client, shard_futs, "fitting shards", files, show_progress, fetch=False)
        total = _raise_error_value(root.result())
    if total is None:
        raise IsotropyError(f"the {len(files)} input shards hold no rows")
    w = Whitening(**params)
    w.moments_ = Moments.from_arrays(total)
    _ = w.kernel_  # solve now: too few rows / a singular covariance surface as one clear error
    if output is not None:
        w.save(output, force=force)
    return w


def encode(
    inputs: str | os.PathLike | Sequence[str | os.PathLike],
    output_dir: str | os.PathLike,
    encoder: EncoderSpec | dict | str | None = None,
    *,
    transform: str | os.PathLike | None = None,
    address: Any = None,
    n_workers: int | None = None,
    retries: int = 2,
    show_progress: bool | None = None,
    force: bool = False,
) -> EncodeReport:
    """Encode text shards on a Dask cluster into one vector shard each, resumably.

    Shard ``shards/x.txt`` becomes ``output_dir/x.npy`` (float32, row i = line i + 1,
    with the fitted ``transform`` folder applied if given) and ``output_dir/x.json``
    (its verification record). A rerun skips shards whose output verifies and redoes
    the others (missing, interrupted, corrupted, or made from another source, model,
    pooling, max_length or transform). ``output_dir`` then reads as a folder of
    shards (``isotropy fit whitening OUT``, ``isotropy.load_vectors``).
    """
    files = expand_inputs(inputs)
    if any(f.suffix == ".npy" for f in files):
        raise IsotropyError("encode takes text shards (one sentence a line), not .npy vectors")
    out = check_output(output_dir, SHARDS_KIND, force=force, inputs=files)
    stems: dict[str, Path] = {}
    for f in files:
        if f.stem in stems:
            raise IsotropyError(f"input shards {stems[f.stem]} and {f} have the same name {f.stem!r}; their outputs would collide")
        stems[f.stem] = f
    spec = EncoderSpec.coerce(encoder).resolve()
    tpath = tdigest = None
    if transform is not None:
        from ._io import load_transform

        model = load_transform(transform)  # validate here, before the cluster starts
        expected = getattr(model, "n_features_in_", None)
        if expected is not None and expected != spec.dim:
            raise IsotropyError(f"transform {transform} expects {expected}-dimensional vectors but the encoder makes {spec.dim}")
        tpath, tdigest = str(Path(transform).resolve()), transform_hash(transform)
    run = uuid.uuid4().hex[:12]
    with _client(address, n_workers) as client:
        # Made only once a cluster answers: a failed connection leaves nothing behind.
        created = not out.exists()
        out.mkdir(exist_ok=True)
        try:
            for stem in stems:  # temporaries of workers killed mid-write in an earlier run, on any host
                sweep_stale_temporaries(out / f"{stem}.npy", any_process=True)
                sweep_stale_temporaries(out / f"{stem}.json", any_process=True)
            futs = [
                client.submit(_encode_shard, str(f), str(out.resolve()), spec, tpath, tdigest, retries=retries,
                              key=f"isotropy-encode-{run}-{i}")
                for i, f in enumerate(files)
            ]
            results = _gather(client, futs, "encoding shards", files, show_progress)
        except BaseException:
            if created:  # a run that failed before any shard was written leaves no empty folder
                with contextlib.suppress(OSError):
                    out.rmdir()
            raise
    shards = [
        ShardResult(str(f), str(_outputs(f, out)[0]), r["rows"], r["status"], r["reason"]) for f, r in zip(files, results)
    ]
    dims = {r["dim"] for r in results}
    return EncodeReport(shards, dims.pop() if len(dims) == 1 else -1, str(out))


# --------------------------------------------------------------------------- the CLI's library calls


def _check_engine(engine: str | None, inputs: str | None, positional: Any) -> None:
    if engine is None:
        raise IsotropyError("--input needs --engine (dask)")
    if engine.lower() not in ENGINES:
        raise IsotropyError(
            f"unknown engine {engine!r}; the supported engine is dask (docs/DISTRIBUTED.md says why not Ray)"
        )
    if not inputs:
        raise IsotropyError("--engine needs --input, a glob of shards such as 'shards/*.txt'")
    if positional is not None:
        raise IsotropyError(f"give either {positional} or --input {inputs}, not both")


def cli_fit_whitening(engine, inputs, positional, output, address, model, pooling, max_length, batch_size, params, progress, force=False):
    """``isotropy fit whitening --engine dask --input GLOB -o DIR``: one call into :func:`fit_whitening`."""
    _check_engine(engine, inputs, positional)
    spec = EncoderSpec(model=model, pooling=pooling, max_length=max_length, batch_size=batch_size)
    return fit_whitening(inputs, spec, params, output=output, address=address, show_progress=progress, force=force)


def cli_encode(engine, inputs, positional, output, address, model, pooling, max_length, batch_size, transform, progress, force=False) -> str:
    """``isotropy encode --engine dask --input GLOB -o DIR [--transform T]``; returns the summary line."""
    _check_engine(engine, inputs, positional)
    spec = EncoderSpec(model=model, pooling=pooling, max_length=max_length, batch_size=batch_size)
    report = encode(inputs, output, spec, transform=transform, address=address, show_progress=progress, force=force)
    return f"wrote {report.describe()}"
