"""Vector files: encode a sentence file, fit a transform on vectors, apply one, streaming.

Each function checks its output (:func:`isotropy.storage.artifacts.check_output`) and every
input it can before encoding anything, opens its vectors once
(:func:`isotropy.storage.vectors.open_vectors`: files, rows, width and the chunk stream in one
call), keeps memory bounded whatever the number of rows, and raises one-line
:class:`~isotropy.errors.IsotropyError` for bad input.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np

from .._checks import check_matrix
from .._progress import ProgressBar
from ..encoders import Encoder
from ..errors import IsotropyError
from ..storage.artifacts import check_output
from ..storage.atomic import check_free_space
from ..storage.integrity import check_provenance, provenance_of_record
from ..storage.text import iter_sentences, read_sentences
from ..storage.vectors import VECTORS_KIND, VectorSource, open_vectors, write_vectors
from ..transforms import load_transform, make_transform, resolve_transform
from ..transforms.base import AffineTransform
from ..transforms.moments import Moments

__all__ = ["ENCODE_CHUNK", "encode_file", "fit_file", "transform_file"]

ENCODE_CHUNK = 16384  # sentences encoded and written at a time: memory stays bounded whatever the file's length


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
    check_output(output, VECTORS_KIND, force=force, inputs=[input, pooling_stats, model, transform])
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
    source = open_vectors(vectors)
    if affine:
        try:
            est._check_params(source.width)
        except IsotropyError as exc:
            raise IsotropyError(f"{vectors} holds {source.width}-dimensional vectors: {exc}") from None
    try:
        if affine:
            est = cls.from_moments(_stream_moments(source, cls.kind, show_progress), **est.get_params())
        else:
            est.fit(source.load(), show_progress=show_progress)
    except IsotropyError as exc:
        raise IsotropyError(f"{vectors}: {exc}") from None
    est.provenance = source.provenance()  # the encoder of the vectors, when their sidecar says
    if output is not None:
        est.save(output, force=force)
    return est


def _stream_moments(source: VectorSource, kind: str, show_progress: bool | None) -> Moments:
    m = Moments()
    with ProgressBar(source.rows, show_progress, f"fitting {kind}", min_total=1, unit="vectors") as bar:
        for file, start, chunk in source.chunks():
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
    named = isinstance(transform, (str, os.PathLike))
    check_output(output, VECTORS_KIND, force=force, inputs=[transform, vectors])
    model = load_transform(transform) if named else transform
    source = open_vectors(vectors)
    check_provenance(
        model.provenance,
        source.provenance(),
        transform if named else "the transform",
        f"the vectors {vectors}",
        allow=allow_other_encoder,
    )
    rows, width = source.rows, source.width
    if rows == 0:
        raise IsotropyError(f"{vectors} holds no rows")
    expected = model.n_features_in_
    if width != expected:
        raise IsotropyError(f"{vectors} has {width} dimensions but the {model.kind} expects {expected}")
    probe = source.head(1)
    out_dtype = np.asarray(model.transform(probe)).dtype if probe.shape[0] else np.float32
    dim = int(model.n_features_out_)
    check_free_space(output, rows * dim * np.dtype(out_dtype).itemsize + 4096)
    with (
        write_vectors(output, (rows, dim), out_dtype, force=force, meta={"rows": rows, "dim": dim}) as out,
        ProgressBar(rows, show_progress, "transforming", min_total=1, unit="vectors") as bar,
    ):
        for file, start, chunk in source.chunks():
            chunk = check_matrix(chunk, str(file), expected_dim=expected, dtype=None, row_offset=start)
            if chunk.shape[0]:
                out.write(np.asarray(model.transform(chunk)))
            bar.advance(chunk.shape[0])
    return rows, dim
