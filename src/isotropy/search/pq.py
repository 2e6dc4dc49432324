"""Compressed index kinds: product quantisation behind an inverted file (``ivfpq``, ``opq``).

``ivfpq`` is faiss ``IVF{nlist},PQ{M}np`` and ``opq`` the same behind faiss's learnt OPQ rotation
(``OPQ{M}_{d'},IVF{nlist},PQ{M}np``), both inner product over the L2-normalised (calibrated)
vectors, built with :func:`faiss.index_factory` so faiss does all the work. Above
:data:`HNSW_COARSE_ROWS` vectors the coarse quantiser is an HNSW graph over the centroids
(``IVF{nlist}_HNSW32``), as the faiss wiki advises for large ``nlist``.

* ``bytes_per_vector`` is the code size: ``M`` sub-quantisers of 8 bits each. For ``ivfpq`` the
  vectors' dimension (after the calibration's ``k``) must be divisible by ``M`` (one line
  otherwise); ``opq`` rotates and projects to ``d'``, the largest multiple of ``M`` not above ``d``.
  ``None`` (the command line's default) is :func:`default_bytes`: :data:`DEFAULT_BYTES` where it fits,
  else for ``ivfpq`` the largest byte count below it that divides ``d`` (50 dims: 25), for ``opq``
  ``d`` itself when narrower; the choice is written back into the parameters (:func:`default_bytes_note`
  says it in one line).
* Training (coarse k-means and the codebooks) uses a seeded sample of :func:`train_rows` rows, so
  a build that trains on the same sample (one process, or the client of a Dask build) gets the
  same index bit for bit. faiss's own "WARNING clustering N points to 256 centroids" lines (one
  per sub-quantiser, written by its C++ code on stderr) are kept off the terminal; what they mean
  is said once, in :func:`training_note`'s words.
* ``nprobe`` (lists visited) is the query knob; ``rerank`` re-scores that many candidates with the
  exact vectors when the index keeps them (``keep_vectors``: ``vectors.npy`` beside the index,
  memory-mapped on load).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import IsotropyError

__all__ = [
    "PQ_KINDS",
    "HNSW_COARSE_ROWS",
    "factory_string",
    "default_nlist",
    "train_rows",
    "train_sample",
    "new_pq_index",
    "default_bytes",
    "default_bytes_note",
    "training_note",
    "rerank",
    "describe_pq",
]

PQ_KINDS = ("ivfpq", "opq")
HNSW_COARSE_ROWS = 1_000_000  # from here on the coarse quantiser is an HNSW graph (faiss wiki's guideline)
TRAIN_PER_LIST = 64  # training rows per list: faiss warns below 39; more buys little (faiss wiki)
MIN_TRAIN = 65_536  # at least this many rows (or all) train the codebooks: 256 centroids each want >= 39 x 256
SAMPLE_SEED = 1234
DEFAULT_BYTES = 32  # the code size when none is given (a divisor of the usual 128, 256, 384, 768 dims)
MIN_POINTS = 39  # faiss's k-means warns below 39 training points per centroid
CENTROIDS = 256  # per sub-quantiser: one byte of code


def default_bytes(kind: str, d: int) -> int:
    """The code size used when none is given: :data:`DEFAULT_BYTES`, or for ``ivfpq`` the largest byte count
    below it that divides ``d`` (ivfpq splits the vector into equal parts), for ``opq`` ``d`` when narrower."""
    if kind == "opq":
        return min(DEFAULT_BYTES, d)
    return max(b for b in range(1, min(DEFAULT_BYTES, d) + 1) if d % b == 0)


def _layout(kind: str, d: int, bytes_per_vector: int | None) -> tuple[int, int]:
    """``(M, d')``: sub-quantisers and the dimension PQ encodes; one line when they do not fit ``d``."""
    m = default_bytes(kind, d) if bytes_per_vector is None else int(bytes_per_vector)
    if kind == "opq":
        if m > d:
            raise IsotropyError(
                f"--bytes-per-vector {m} is more than the {d} dimensions of the (calibrated) vectors: "
                f"OPQ needs at least one dimension per byte; choose at most {d}"
            )
        return m, (d // m) * m
    if d % m:
        divisors = [b for b in range(1, d + 1) if d % b == 0 and b >= 4]
        raise IsotropyError(
            f"--bytes-per-vector {m} needs the vectors' dimension ({d} after the calibration) divisible by {m} "
            f"sub-quantisers; choose a calibration to a multiple of {m} dimensions (--whiten K), "
            f"bytes that divide {d} ({', '.join(map(str, divisors[-4:]))}), or --kind opq"
        )
    return m, d


def default_nlist(n: int) -> int:
    """``4 sqrt(n)`` lists, but at least 39 training rows each (faiss's k-means minimum)."""
    return max(1, min(int(4 * math.sqrt(n)), n // 39))


def factory_string(kind: str, d: int, n: int, params: dict[str, Any]) -> str:
    """The :func:`faiss.index_factory` description of a ``kind`` index of ``n`` rows of ``d`` dims
    (``params["nlist"]`` of None is chosen and written back)."""
    m, d_pq = _layout(kind, d, params["bytes_per_vector"])
    params["bytes_per_vector"] = m  # None (the default) is chosen here: default_bytes
    if params.get("nlist") is None:
        params["nlist"] = default_nlist(n)
    coarse = "_HNSW32" if n >= HNSW_COARSE_ROWS else ""
    rotation = f"OPQ{m}_{d_pq}," if kind == "opq" else ""
    # "np": no polysemous training (a slow annealing of code order that plain search does not use)
    return f"{rotation}IVF{params['nlist']}{coarse},PQ{m}np"


def train_rows(n: int, nlist: int) -> int:
    return min(n, max(MIN_TRAIN, TRAIN_PER_LIST * nlist))


def train_sample(n: int, nlist: int) -> np.ndarray:
    """The sorted row numbers a build of ``n`` rows trains on (seeded: the same for every build of ``n`` rows)."""
    rows = train_rows(n, nlist)
    if rows >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(SAMPLE_SEED).choice(n, rows, replace=False))


def new_pq_index(kind: str, params: dict[str, Any], sample: np.ndarray, n: int):
    """An empty, trained faiss index of ``kind`` for ``n`` rows, trained on ``sample`` (rows of
    :func:`train_sample`, already calibrated and L2-normalised)."""
    import faiss

    d = sample.shape[1]
    spec = factory_string(kind, d, n, params)
    nlist = params["nlist"]
    if sample.shape[0] < nlist:
        raise IsotropyError(
            f"an {kind} index with nlist={nlist} needs at least {nlist} training sentences, got {sample.shape[0]}; "
            "lower --nlist or use kind 'flat' or 'hnsw'"
        )
    if sample.shape[0] < 256:
        raise IsotropyError(
            f"an {kind} index trains 256 centroids per sub-quantiser and needs at least 256 sentences, "
            f"got {sample.shape[0]}; use kind 'flat', 'hnsw' or 'ivf'"
        )
    index = faiss.index_factory(d, spec, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.extract_index_ivf(index)
    ivf.cp.verbose = False
    with _quiet_stderr(_FAISS_NOISE):
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
    ivf.nprobe = params["nprobe"]
    return index


def default_bytes_note(kind: str, d: int) -> str | None:
    """The line that says which code size the default chose for ``d`` dims, when it is not :data:`DEFAULT_BYTES`."""
    m = default_bytes(kind, d)
    if m == DEFAULT_BYTES:
        return None
    how = "one byte a dimension" if kind == "opq" else f"the largest byte count below it that divides {d}"
    return f"--bytes-per-vector {m}: the default {DEFAULT_BYTES} does not fit the {d} dimensions, so {how}"


def training_note(kind: str, params: dict[str, Any], n: int) -> str | None:
    """What faiss's "please provide at least N training points" means for an index of ``n`` rows, in one line
    (None when the training sample is large enough)."""
    rows = train_rows(n, params["nlist"])
    want = MIN_POINTS * max(CENTROIDS, params["nlist"])
    if kind not in PQ_KINDS or rows >= want:
        return None
    return (
        f"the {kind} codebooks were trained on {rows} vectors, fewer than the {want} faiss advises "
        f"({MIN_POINTS} for each of {max(CENTROIDS, params['nlist'])} centroids): the codes are coarser and recall lower "
        f"than on a larger corpus; at this size a flat or hnsw index costs little memory and is exact or nearly"
    )


_FAISS_NOISE = re.compile(r"^WARNING clustering \d+ points to \d+ centroids: please provide at least \d+ training points$")


@contextlib.contextmanager
def _quiet_stderr(noise: re.Pattern) -> Iterator[None]:
    """Run a faiss call with C's stderr (fd 2) caught: the lines matching ``noise`` are dropped, any other is
    passed on. By hand because faiss's C++ writes with fprintf, which no Python stream redirect reaches."""
    try:
        sys.stderr.flush()
        caught = tempfile.TemporaryFile()
    except (OSError, ValueError, AttributeError):  # no stderr (closed), or no temporary file: faiss speaks as it will
        yield
        return
    with caught:
        saved = os.dup(2)
        try:
            os.dup2(caught.fileno(), 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            text = caught.read().decode("utf-8", "replace")
            kept = [line for line in text.splitlines() if line.strip() and not noise.match(line.strip())]
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")


def set_nprobe(fidx: Any, nprobe: int) -> None:
    import faiss

    faiss.extract_index_ivf(fidx).nprobe = int(nprobe)


def rerank(exact: np.ndarray, Q: np.ndarray, scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Re-score the candidates ``ids`` (``-1``: none) by the exact inner product with the kept
    vectors ``exact`` (memory-mapped; only the candidates' rows are read); the best ``k`` of each row."""
    safe = np.where(ids < 0, 0, ids)
    order = np.argsort(safe, axis=None, kind="stable")  # rows read in file order: sequential on a memory map
    flat = np.empty((safe.size, exact.shape[1]), np.float32)
    flat[order] = exact[safe.reshape(-1)[order]]
    exact_scores = np.einsum("qrd,qd->qr", flat.reshape(*ids.shape, -1), Q, dtype=np.float32)
    exact_scores[ids < 0] = -np.inf
    best = np.argsort(-exact_scores, axis=1, kind="stable")[:, :k]
    out_scores = np.take_along_axis(exact_scores, best, axis=1)
    out_ids = np.take_along_axis(ids, best, axis=1)
    out_scores[out_ids < 0] = np.nan
    return out_scores, out_ids


def describe_pq(kind: str, params: dict[str, Any]) -> str:
    name = "opq + ivfpq" if kind == "opq" else "ivfpq"
    extra = f", rerank {params['rerank']}" if params.get("rerank") else ""
    kept = ", exact vectors kept" if params.get("keep_vectors") else ""
    return f"{name} ({params['bytes_per_vector']} bytes/vector, nlist {params['nlist']}, nprobe {params['nprobe']}{extra}{kept})"
