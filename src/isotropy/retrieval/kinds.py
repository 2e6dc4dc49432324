"""Ways to search calibrated vectors (layer 5.5), each with its size and its time per query.

* ``exact``: every cosine, in numpy (the reference the others are measured against);
* ``flat``, ``hnsw``, ``ivf``: :class:`isotropy.search.Index` with its defaults, exactly what
  ``isotropy index build --kind`` ships (its faiss file's size is the bytes per vector);
* ``sq8``: faiss's ``IndexScalarQuantizer`` with 8 bits per dimension (one byte instead of four),
  trained on the documents;
* ``binary``: the sign bit of each dimension in faiss's ``IndexBinaryFlat`` (Hamming distance;
  d/8 bytes). Sign bits only mean something around the origin, which calibration puts there.

Every searcher takes vectors already calibrated and L2-normalised and returns the ``k`` best
document rows per query, ties broken by row, and the median wall time of one query's search
(encoding excluded).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from .metrics import rank_rows

__all__ = ["KINDS", "Searched", "search_kind", "check_kinds"]

KINDS = ("exact", "flat", "hnsw", "ivf", "sq8", "binary")
TIMED_QUERIES = 200  # queries timed one at a time (the median); the ranking uses them all


@dataclass
class Searched:
    ranked: np.ndarray  # (queries, k) document rows, best first, -1 where nothing was found
    bytes_per_vector: float
    query_ms: float  # median wall time of one query's search, milliseconds


def check_kinds(kinds: list[str]) -> list[str]:
    out = []
    for k in kinds:
        names = KINDS if k == "all" else [k]
        for n in names:
            if n not in KINDS:
                raise IsotropyError(f"unknown search kind {k!r}; valid: {', '.join(KINDS)}, all")
            if n not in out:
                out.append(n)
    return out or ["exact"]


def _median_ms(one: Callable[[int], Any], n: int) -> float:
    times = []
    for i in range(min(n, TIMED_QUERIES)):
        t0 = time.perf_counter()
        one(i)
        times.append(time.perf_counter() - t0)
    return 1000.0 * statistics.median(times) if times else float("nan")


def _exact(D: np.ndarray, Q: np.ndarray, k: int) -> Searched:
    ranked = rank_rows(Q @ D.T, k)
    ms = _median_ms(lambda i: rank_rows(Q[i : i + 1] @ D.T, k), len(Q))
    return Searched(ranked, 4.0 * D.shape[1], ms)


def _by_distance(dist: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """faiss's hits re-sorted by (distance, row): its heap leaves the order of ties unspecified."""
    out = ids.copy()
    for i in range(len(ids)):
        order = np.lexsort((ids[i], dist[i]))
        out[i] = ids[i][order]
    return out


def _faiss_size(faiss: Any, index: Any, n: int, binary: bool = False) -> float:
    data = faiss.serialize_index_binary(index) if binary else faiss.serialize_index(index)
    return float(np.asarray(data).nbytes) / n


def _sq8(D: np.ndarray, Q: np.ndarray, k: int) -> Searched:
    import faiss

    idx = faiss.IndexScalarQuantizer(D.shape[1], faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
    idx.train(D)
    idx.add(D)
    k = min(k, len(D))
    dist, ids = idx.search(Q, k)
    ms = _median_ms(lambda i: idx.search(Q[i : i + 1], k), len(Q))
    return Searched(_by_distance(-dist, ids), _faiss_size(faiss, idx, len(D)), ms)


def sign_bits(X: np.ndarray) -> np.ndarray:
    """One bit per dimension (1 where > 0), packed 8 to a byte, padded with zero bits to a whole byte."""
    return np.packbits(np.asarray(X) > 0, axis=1)


def _binary(D: np.ndarray, Q: np.ndarray, k: int) -> Searched:
    import faiss

    Db, Qb = sign_bits(D), sign_bits(Q)
    idx = faiss.IndexBinaryFlat(Db.shape[1] * 8)
    idx.add(Db)
    k = min(k, len(D))
    dist, ids = idx.search(Qb, k)
    ms = _median_ms(lambda i: idx.search(Qb[i : i + 1], k), len(Q))
    return Searched(_by_distance(dist, ids), _faiss_size(faiss, idx, len(D), binary=True), ms)


def _index_kind(kind: str, D: np.ndarray, Q: np.ndarray, k: int, encoder: Any, transform: Any, raw_docs: np.ndarray) -> Searched:
    """Through :class:`isotropy.search.Index`: the documents' raw vectors with the fitted transform."""
    from ..search import Index

    index = Index(encoder, transform, kind)
    names = [str(i) for i in range(len(raw_docs))]
    # a copy: with no transform, Index.add_encoded L2-normalises a float32 array in place
    index.add_encoded(names, np.array(raw_docs, dtype=np.float32, copy=True), show_progress=False)
    k = min(k, len(D))
    res = index.search_vectors(Q, k)
    ms = _median_ms(lambda i: index.search_vectors(Q[i : i + 1], k), len(Q))
    with tempfile.TemporaryDirectory() as tmp:  # the faiss file `isotropy index build` writes
        index.save(Path(tmp) / "index")
        size = (Path(tmp) / "index" / "index.faiss").stat().st_size
    return Searched(_by_distance(-np.nan_to_num(res.scores, nan=-np.inf), res.ids), size / len(D), ms)


def search_kind(
    kind: str, D: np.ndarray, Q: np.ndarray, k: int, *, encoder: Any = None, transform: Any = None, raw_docs: Any = None
) -> Searched:
    """Search the normalised calibrated queries ``Q`` among the documents ``D`` with ``kind``."""
    D = np.ascontiguousarray(D, dtype=np.float32)
    Q = np.ascontiguousarray(Q, dtype=np.float32)
    if kind == "exact":
        return _exact(D, Q, k)
    if kind == "sq8":
        return _sq8(D, Q, k)
    if kind == "binary":
        return _binary(D, Q, k)
    return _index_kind(kind, D, Q, k, encoder, transform, raw_docs)
