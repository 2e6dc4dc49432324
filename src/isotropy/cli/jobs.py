"""The command line's jobs: read inputs from files, check outputs before any work, call the library, write.

Each ``isotropy`` command is one call into a function here (or straight into a feature's
own entry point, such as :func:`isotropy.evaluation.evaluate`). They are the library's
file-level face, usable from Python too: every one takes keyword arguments, checks its
output (:func:`isotropy.storage.artifacts.check_output`) and every input it can before
encoding anything, streams what can be streamed, and raises one-line
:class:`~isotropy.errors.IsotropyError` for bad input.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_matrix
from .._progress import ProgressBar
from ..encoders import Encoder
from ..errors import IsotropyError
from ..storage.artifacts import check_output, read_config
from ..storage.atomic import artefact_lock, check_free_space
from ..storage.integrity import check_provenance, provenance_of_record
from ..storage.text import iter_sentences, read_sentences
from ..storage.vectors import (
    VECTORS_KIND,
    iter_vector_chunks,
    list_vector_files,
    load_vectors,
    open_vector_file,
    vectors_provenance,
    write_vectors,
)
from ..transforms import load_transform, make_transform, resolve_transform, transform_class
from ..transforms.base import AffineTransform
from ..transforms.moments import Moments

__all__ = [
    "ENCODE_CHUNK",
    "encode_file",
    "fit_file",
    "transform_file",
    "build_index",
    "add_to_index",
    "search_index",
    "default_whitening",
    "check_engine",
    "only_with_engine",
]

ENCODE_CHUNK = 16384  # sentences encoded and written at a time: memory stays bounded whatever the file's length
CHUNK_BYTES = 64 * 2**20  # float64 bytes of vectors read from disk at a time


# --------------------------------------------------------------------------- encode


def _path_or_none(value: Any) -> Any:
    """``value`` when it names a file or folder (an input the output must not replace), else None."""
    return value if isinstance(value, (str, os.PathLike)) else None


def encode_file(
    input: str | os.PathLike,
    output: str | os.PathLike,
    *,
    model: str | None = None,
    pooling: str | None = None,
    max_length: int | None = None,
    batch_size: int = 64,
    backend: str = "torch",
    show_progress: bool | None = None,
    force: bool = False,
    pooling_stats: Any = None,
    precision: str = "fp32",
    transform: Any = None,
) -> tuple[tuple[int, int], Encoder]:
    """``isotropy encode``: one sentence a line (or ``-``) to a float32 ``.npy``, row i = line i + 1.

    The file is read a line at a time and vectors are written chunk by chunk
    (:data:`ENCODE_CHUNK` sentences), so memory does not grow with the number of lines
    (standard input is held: its rows must be counted before the header is written). With ``transform`` (a
    fitted transform or its folder), it is applied to every chunk. Returns the shape written and the encoder.
    The disk's free space is checked before anything is encoded.
    """
    read = [input, _path_or_none(pooling_stats), _path_or_none(model), _path_or_none(transform)]
    check_output(output, VECTORS_KIND, force=force, inputs=read)
    t = load_transform(transform) if isinstance(transform, (str, os.PathLike)) else transform
    if str(input) == "-":  # standard input cannot be read twice: it is held (the rows must be counted first)
        held = read_sentences(input)
        n, stream = len(held), lambda: iter(held)
    else:  # a file is read twice, one line at a time: counted (and every line checked) before the model loads
        n = sum(1 for _ in iter_sentences(input))
        if n == 0:
            raise IsotropyError(f"{input} is empty: there is nothing to encode")

        def stream():
            return (text for _, text in iter_sentences(input))

    enc = Encoder(
        model,
        pooling=pooling,
        max_length=max_length,
        batch_size=batch_size,
        backend=backend,
        pooling_stats=pooling_stats,
        precision=precision,
    )
    dim = enc.dim
    if t is not None:
        if int(t.n_features_in_) != int(enc.dim):
            raise IsotropyError(
                f"--transform {transform} expects {t.n_features_in_}-dimensional vectors, but {enc.describe()} gives {enc.dim}"
            )
        dim = int(t.n_features_out_)
    check_free_space(output, n * dim * 4 + 4096)
    lines = stream()
    # X.json beside X.npy, renamed in with it: its sha256 (verified on every read) and, for vectors
    # straight from the encoder (not through --transform), the encoder that made them
    meta = {"rows": n, "dim": dim}
    if t is None:
        meta["provenance"] = provenance_of_record(enc.record(), enc.dim)
    with (
        write_vectors(output, (n, dim), np.float32, force=force, meta=meta) as out,
        ProgressBar(n, show_progress, "encoding", min_total=4 * enc.batch_size, unit="sentences") as bar,
    ):
        for _ in range(0, n, ENCODE_CHUNK):
            chunk = enc.encode(list(itertools.islice(lines, ENCODE_CHUNK)), progress=bar)  # the bar advances by batch
            out.write(chunk if t is None else np.asarray(t.transform(chunk), dtype=np.float32))
    return (n, dim), enc


# --------------------------------------------------------------------------- fit and apply transforms


def _chunk_rows(width: int) -> int:
    return max(1024, CHUNK_BYTES // (8 * max(1, width)))


def _vector_shape(vectors: str | os.PathLike) -> tuple[int, int]:
    """Rows and width of a .npy file or a folder of shards (headers only)."""
    shapes = [open_vector_file(f).shape for f in list_vector_files(vectors)]
    return sum(s[0] for s in shapes), shapes[0][1]


def fit_file(
    kind: str,
    vectors: str | os.PathLike,
    output: str | os.PathLike | None = None,
    *,
    params: dict[str, Any] | None = None,
    show_progress: bool | None = None,
    force: bool = False,
):
    """``isotropy fit KIND``: fit a registered transform (or a preset such as ``soft-0.5``) on a
    .npy file or a folder of shards.

    A transform solved from moments (whitening and its relatives) streams the vectors
    chunk by chunk, so memory stays bounded whatever the number of rows; any other (the
    flow) is fitted on all of them at once. Bad parameters are named before anything is
    read; errors about the data name the file (and row). With ``output``, the fitted folder
    is written there (checked first: an existing folder that is not a transform of this
    kind is refused unless ``force``).
    """
    cls, _ = resolve_transform(kind)
    if output is not None:
        check_output(output, cls.kind, force=force, inputs=[vectors])
    est = make_transform(kind, **(params or {}))
    affine = isinstance(est, AffineTransform)
    if not affine:
        est._check_params()  # a bad option is named as such, before any loading
    rows, width = _vector_shape(vectors)
    if affine:
        try:
            est._check_params(width)
        except IsotropyError as exc:
            raise IsotropyError(f"{vectors} holds {width}-dimensional vectors: {exc}") from None
    try:
        if affine:
            est = cls.from_moments(_stream_moments(vectors, rows, width, cls.kind, show_progress), **est.get_params())
        else:
            est.fit(load_vectors(vectors), show_progress=show_progress)
    except IsotropyError as exc:
        raise IsotropyError(f"{vectors}: {exc}") from None
    est.provenance = vectors_provenance(vectors)  # the encoder of the vectors, when their sidecar says
    if output is not None:
        est.save(output, force=force)
    return est


def _stream_moments(vectors: str | os.PathLike, rows: int, width: int, kind: str, show_progress: bool | None) -> Moments:
    m = Moments()
    with ProgressBar(rows, show_progress, f"fitting {kind}", min_total=1, unit="vectors") as bar:
        for file, start, chunk in iter_vector_chunks(vectors, chunk_rows=_chunk_rows(width)):
            m.update(chunk, name=str(file), row_offset=start)
            bar.advance(chunk.shape[0])
    return m


def transform_file(
    transform: Any,
    vectors: str | os.PathLike,
    output: str | os.PathLike,
    *,
    show_progress: bool | None = None,
    force: bool = False,
    allow_other_encoder: bool = False,
) -> tuple[int, int]:
    """``isotropy transform``: apply a fitted transform (or its folder) to a .npy file or folder of
    shards, streaming, into one .npy written atomically (never one holding NaN or inf). Returns the
    output shape. Vectors of another encoder than the transform was fitted on (both recorded) are
    refused unless ``allow_other_encoder``."""
    sources = [transform] if isinstance(transform, (str, os.PathLike)) else []
    check_output(output, VECTORS_KIND, force=force, inputs=[*sources, vectors])
    model = load_transform(transform) if sources else transform
    check_provenance(
        model.provenance,
        vectors_provenance(vectors),
        sources[0] if sources else "the transform",
        f"the vectors {vectors}",
        allow=allow_other_encoder,
    )
    rows, width = _vector_shape(vectors)
    if rows == 0:
        raise IsotropyError(f"{vectors} holds no rows")
    expected = model.n_features_in_
    if width != expected:
        raise IsotropyError(f"{vectors} has {width} dimensions but the {model.kind} expects {expected}")
    probe = np.asarray(open_vector_file(list_vector_files(vectors)[0])[:1])
    out_dtype = np.asarray(model.transform(probe)).dtype if probe.shape[0] else np.float32
    check_free_space(output, rows * int(model.n_features_out_) * np.dtype(out_dtype).itemsize + 4096)
    with (
        write_vectors(
            output, (rows, model.n_features_out_), out_dtype, force=force, meta={"rows": rows, "dim": int(model.n_features_out_)}
        ) as out,
        ProgressBar(rows, show_progress, "transforming", min_total=1, unit="vectors") as bar,
    ):
        for file, start, chunk in iter_vector_chunks(vectors, chunk_rows=_chunk_rows(width)):
            chunk = check_matrix(chunk, str(file), expected_dim=expected, dtype=None, row_offset=start)
            if chunk.shape[0]:
                out.write(np.asarray(model.transform(chunk)))
            bar.advance(chunk.shape[0])
    return rows, int(model.n_features_out_)


# --------------------------------------------------------------------------- search

# Default of `isotropy index build`: soft whitening (power 0.5) to 128 dims, fitted on the corpus;
# from bench/search.py (docs/BENCHMARKS.md, section search): on the STS retrieval task with the
# default model it kept recall@10 within 1 point of raw 384-dim vectors (89.4 vs 90.2) with a third
# of the index memory, where full whitening lost more (89.1 at 128 dims); this model is trained for
# similarity, so full whitening has little anisotropy left to fix.
DEFAULT_WHITEN_K = 128
DEFAULT_WHITEN_POWER = 0.5


def default_whitening(dim: int, n_components: int | None = DEFAULT_WHITEN_K, power: float = DEFAULT_WHITEN_POWER):
    """The whitening ``isotropy index build`` fits on the corpus by default: ``n_components``
    (capped at the encoder's dimension), ``power``, Ledoit-Wolf shrinkage (so small corpora work)."""
    k = None if n_components is None else min(int(n_components), int(dim))
    return transform_class("whitening")(n_components=k, power=power, shrinkage="auto")


def _index_transform(corpus, n: int, encoder: Encoder, transform, whiten, power, no_whiten) -> tuple[Any, str | None]:
    """The transform an index build uses, and a warning when the default had to be skipped."""
    if transform is not None:
        return load_transform(transform), None
    if no_whiten:
        return None, None
    if whiten is not None and (isinstance(whiten, bool) or whiten < 1):
        raise IsotropyError(f"--whiten must be a positive number of dimensions, got {whiten}")
    if whiten is not None and whiten > encoder.dim:
        raise IsotropyError(f"--whiten {whiten} is more than the {encoder.dim} dimensions of {encoder.model_name}")
    k = min(DEFAULT_WHITEN_K, encoder.dim) if whiten is None else whiten
    # n centred sentences span at most n - 1 directions: a whitening to k dims needs n > k
    # (below that, the extra directions hold only the shrinkage's made-up variance).
    if n > k:
        return default_whitening(encoder.dim, k, DEFAULT_WHITEN_POWER if power is None else power), None
    if whiten is not None or power is not None:
        raise IsotropyError(
            f"a whitening to {k} dimensions needs more than {k} sentences, but {corpus} has {n}; "
            f"lower --whiten, pass --transform with a whitening fitted on a larger corpus, or use --no-whiten"
        )
    return None, (
        f"{corpus} has {n} sentences, too few to fit the default whitening to {k} dimensions "
        f"(it needs more than {k}); indexing the raw vectors instead (pass --transform with a whitening "
        f"fitted on a larger corpus to calibrate them)"
    )


def build_index(
    corpus: str | os.PathLike,
    output: str | os.PathLike,
    *,
    model: str | None = None,
    pooling: str | None = None,
    max_length: int | None = None,
    transform: str | os.PathLike | None = None,
    whiten: int | None = None,
    power: float | None = None,
    no_whiten: bool = False,
    kind: str = "flat",
    batch_size: int = 64,
    backend: str = "torch",
    show_progress: bool | None = None,
    force: bool = False,
    pooling_stats: Any = None,
    allow_other_encoder: bool = False,
    **params: Any,
):
    """``isotropy index build``: index a sentence file (one a line; id = line number - 1) into ``output``.

    Transform: ``transform`` (a fitted folder), else raw with ``no_whiten``, else a
    whitening fitted on the corpus itself with ``whiten`` components (default 128) and
    ``power`` (default 0.5, soft whitening), with Ledoit-Wolf shrinkage. A whitening to k
    dimensions needs more than k sentences: on a smaller corpus the default falls back to
    raw vectors with a warning (in ``index.warnings``), and an explicit ``whiten`` is an error.
    """
    from ..search import Index

    chosen = [
        name
        for name, on in (
            ("--transform", transform is not None),
            ("--whiten/--power", whiten is not None or power is not None),
            ("--no-whiten", no_whiten),
        )
        if on
    ]
    if len(chosen) > 1:
        raise IsotropyError(f"choose one of {', '.join(chosen)}")
    check_output(output, "index", force=force, inputs=[corpus, transform, _path_or_none(pooling_stats), _path_or_none(model)])
    sentences = read_sentences(corpus)
    if not any(s.strip() for s in sentences):
        raise IsotropyError(f"{corpus} holds no sentence (every line is empty): there is nothing to index")
    encoder = Encoder(
        model, pooling=pooling, max_length=max_length, batch_size=batch_size, backend=backend, pooling_stats=pooling_stats
    )
    t, warning = _index_transform(corpus, len(sentences), encoder, transform, whiten, power, no_whiten)
    index = Index(encoder, t, kind, allow_other_encoder=allow_other_encoder, **params)
    if warning:
        index.warnings.append(warning)
    try:
        index.add(sentences, show_progress=show_progress)
    except IsotropyError as exc:
        raise IsotropyError(f"{corpus}: {exc}") from None
    index.save(output, force=force)
    return index


def add_to_index(index_dir: str | os.PathLike, more: str | os.PathLike, show_progress: bool | None = None):
    """``isotropy index add``: append a sentence file to a saved index, rewriting it atomically.

    The index is locked from load to save, so a second ``add`` waits for this one
    instead of silently dropping one of the two batches. Returns ``(index, added)``.
    """
    from ..search import Index

    index_dir = Path(index_dir)
    read_config(index_dir, "index")  # a missing or foreign folder is named before any lock is taken
    sentences = read_sentences(more)
    blank = next((i for i, s in enumerate(sentences, start=1) if not s.strip()), None)
    if blank is not None:  # it would become a searchable row that matches nothing
        raise IsotropyError(f"{more} line {blank} is blank: there is no sentence to index there; remove the blank lines")
    with artefact_lock(index_dir):
        index = Index.load(index_dir)
        index.add(sentences, show_progress=show_progress)
        index.save(index_dir)
    return index, len(sentences)


def search_index(
    index_dir: str | os.PathLike,
    queries: Sequence[str] | None = None,
    queries_file: str | os.PathLike | None = None,
    k: int = 10,
    ef_search: int | None = None,
    nprobe: int | None = None,
    show_progress: bool | None = None,
):
    """``isotropy search``: queries given directly or read from a UTF-8 file (one a line)."""
    from ..search import Index

    queries = list(queries or [])
    if queries and queries_file is not None:
        raise IsotropyError("give either a query or --queries FILE, not both")
    if queries_file is not None:
        queries = read_sentences(queries_file)
    if not queries:
        raise IsotropyError("no query: give a query or --queries FILE")
    Index._check_k(k)
    start = time.perf_counter()
    index = Index.load(index_dir, ef_search=ef_search, nprobe=nprobe)
    loaded = time.perf_counter()
    results = index.search(queries, k, show_progress=show_progress)
    results.timings = {"load_s": round(loaded - start, 3), "search_s": round(time.perf_counter() - loaded, 3)}
    return results


# --------------------------------------------------------------------------- the distributed engine


def only_with_engine(why: str, **given: Any) -> None:
    """Options that describe a cluster run (``--model`` of ``fit whitening``, ``--address``), given without
    ``--engine``: one line, rather than silently ignoring them."""
    named = [f"--{k.replace('_', '-')}" for k, v in given.items() if v is not None]
    if named:
        raise IsotropyError(
            f"{', '.join(named)} applies only with --engine (a cluster run); {why}: drop {'it' if len(named) == 1 else 'them'}"
        )


def check_engine(engine: str | None, inputs: str | None, positional: Any) -> None:
    """``--engine``/``--input`` go together, name a known engine, and replace the positional input."""
    if engine is None:
        raise IsotropyError("--input needs --engine (dask)")
    from ..distributed import ENGINES

    if engine.lower() not in ENGINES:
        raise IsotropyError(f"unknown engine {engine!r}; the supported engine is dask (docs/DISTRIBUTED.md says why not Ray)")
    if not inputs:
        raise IsotropyError("--engine needs --input, a glob of shards such as 'shards/*.txt'")
    if positional is not None:
        raise IsotropyError(f"give either {positional} or --input {inputs}, not both")
