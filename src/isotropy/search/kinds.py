"""The faiss kinds of an :class:`~isotropy.search.Index`: their parameters, construction, query knobs.

Every kind is an inner-product index over L2-normalised vectors, so its scores are cosines:

* ``flat``: exact, ``faiss.IndexFlatIP``;
* ``hnsw``: ``faiss.IndexHNSWFlat`` (``m`` links per node, ``ef_construction``, ``ef_search``);
* ``ivf``: ``faiss.IndexIVFFlat`` (``nlist`` lists trained on the first batch, ``nprobe`` visited per query);
* ``ivfpq``, ``opq``: product-quantised codes of ``bytes_per_vector`` bytes behind an inverted file (and
  OPQ's rotation), :mod:`.pq`; ``keep_vectors`` keeps the exact vectors for ``rerank``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import IsotropyError
from . import pq

__all__ = ["INDEX_KINDS", "faiss_module", "check_params", "new_faiss", "set_query_params", "describe_kind", "reconstruct"]

INDEX_KINDS = ("flat", "hnsw", "ivf", *pq.PQ_KINDS)


def faiss_module():
    """faiss, imported on first use (``import isotropy.search`` does not load it)."""
    import faiss

    return faiss


def _is_int(value: Any, low: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= low


def check_params(
    kind: str,
    *,
    m: int,
    ef_construction: int,
    ef_search: int,
    nlist: int | None,
    nprobe: int,
    bytes_per_vector: int | None = None,
    keep_vectors: bool = False,
    rerank: int = 0,
) -> dict[str, Any]:
    """The parameters of an index of ``kind``, checked (one line naming a bad one), as plain ints."""
    if kind not in INDEX_KINDS:
        raise IsotropyError(f"unknown index kind {kind!r}; valid kinds: {', '.join(INDEX_KINDS)}")
    for name, value, low in (
        ("m", m, 2),
        ("ef_construction", ef_construction, 1),
        ("ef_search", ef_search, 1),
        ("nprobe", nprobe, 1),
    ):
        if not _is_int(value, low):
            raise IsotropyError(f"{name} must be an integer >= {low}, got {value!r}")
    if nlist is not None and not _is_int(nlist, 1):
        raise IsotropyError(f"nlist must be a positive integer or None, got {nlist!r}")
    params: dict[str, Any] = {
        "m": int(m),
        "ef_construction": int(ef_construction),
        "ef_search": int(ef_search),
        "nlist": None if nlist is None else int(nlist),
        "nprobe": int(nprobe),
    }
    if kind in pq.PQ_KINDS:
        if bytes_per_vector is not None and not _is_int(bytes_per_vector, 1):  # None: pq.default_bytes at training
            raise IsotropyError(f"bytes_per_vector must be an integer >= 1, got {bytes_per_vector!r}")
        if not _is_int(rerank, 0):
            raise IsotropyError(f"rerank must be an integer >= 0, got {rerank!r}")
        if rerank and not keep_vectors:
            raise IsotropyError("rerank needs the exact vectors: build the index with keep_vectors (--keep-vectors)")
        bytes_per_vector = None if bytes_per_vector is None else int(bytes_per_vector)
        params.update(bytes_per_vector=bytes_per_vector, keep_vectors=bool(keep_vectors), rerank=int(rerank))
    elif keep_vectors or rerank:
        raise IsotropyError(f"keep_vectors and rerank apply to the compressed kinds ({', '.join(pq.PQ_KINDS)}), not {kind!r}")
    return params


def new_faiss(kind: str, params: dict[str, Any], X: np.ndarray):
    """An empty faiss index of ``kind`` for vectors like ``X`` (an ``ivf`` is trained on ``X``; a
    ``nlist`` of None is chosen from its rows and written back into ``params``)."""
    faiss = faiss_module()
    n, d = X.shape
    if kind == "flat":
        return faiss.IndexFlatIP(d)
    if kind in pq.PQ_KINDS:
        if params["nlist"] is None:
            params["nlist"] = pq.default_nlist(n)
        return pq.new_pq_index(kind, params, X[pq.train_sample(n, params["nlist"])], n)
    if kind == "hnsw":
        idx = faiss.IndexHNSWFlat(d, params["m"], faiss.METRIC_INNER_PRODUCT)
        idx.hnsw.efConstruction = params["ef_construction"]
        idx.hnsw.efSearch = params["ef_search"]
        return idx
    nlist = params["nlist"]
    if nlist is None:
        # faiss's k-means wants >= 39 points per centroid; 4 sqrt(n) is the usual rule of thumb.
        nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))
        params["nlist"] = nlist
    if n < nlist:
        raise IsotropyError(
            f"an ivf index with nlist={nlist} is trained on the first batch, which has only {n} sentences; "
            f"add at least {nlist} sentences first, lower nlist, or use kind 'flat' or 'hnsw'"
        )
    quantizer = faiss.IndexFlatIP(d)
    idx = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    idx.cp.verbose = False
    idx.train(X)
    idx.nprobe = params["nprobe"]
    return idx  # faiss's Python wrapper keeps `quantizer` alive as long as `idx`


def set_query_params(
    params: dict[str, Any], fidx: Any, kind: str, ef_search: int | None, nprobe: int | None, rerank: int | None = None
) -> None:
    """Check and set the query-time knobs (``ef_search`` of hnsw, ``nprobe`` of ivf and the compressed kinds,
    ``rerank`` of a compressed index that keeps its vectors) in ``params`` and on ``fidx``."""
    for name, value, kinds in (("ef_search", ef_search, ("hnsw",)), ("nprobe", nprobe, ("ivf", *pq.PQ_KINDS))):
        if value is None:
            continue
        if kind not in kinds:  # it would be ignored without a word (as --rerank on a flat index is refused)
            raise IsotropyError(
                f"--{name.replace('_', '-')} applies to {', '.join(kinds[:-1]) + ' or ' if kinds[1:] else ''}{kinds[-1]} "
                f"indexes; this index is {kind} (drop the option)"
            )
        if not _is_int(value, 1):
            raise IsotropyError(f"{name} must be a positive integer, got {value!r}")
        params[name] = int(value)
    if rerank is not None:
        if kind not in pq.PQ_KINDS or not params.get("keep_vectors"):
            if rerank:
                raise IsotropyError(
                    "--rerank needs an ivfpq or opq index built with --keep-vectors (the exact vectors it re-scores with)"
                )
        elif not _is_int(rerank, 0):
            raise IsotropyError(f"rerank must be an integer >= 0, got {rerank!r}")
        else:
            params["rerank"] = int(rerank)
    if fidx is not None:
        if kind == "hnsw":
            fidx.hnsw.efSearch = params["ef_search"]
        elif kind == "ivf":
            fidx.nprobe = params["nprobe"]
        elif kind in pq.PQ_KINDS:
            pq.set_nprobe(fidx, params["nprobe"])


def describe_kind(kind: str, params: dict[str, Any]) -> str:
    if kind in pq.PQ_KINDS:
        return pq.describe_pq(kind, params)
    return {
        "flat": "flat (exact)",
        "hnsw": f"hnsw (m {params['m']}, ef_construction {params['ef_construction']}, ef_search {params['ef_search']})",
        "ivf": f"ivf (nlist {params['nlist']}, nprobe {params['nprobe']})",
    }[kind]


def reconstruct(fidx: Any, kind: str, ids: list[int]) -> np.ndarray:
    """The stored vectors of rows ``ids``; RuntimeError from a faiss index that cannot give them back."""
    if kind == "ivf":
        faiss_module().extract_index_ivf(fidx).make_direct_map()
    return np.stack([fidx.reconstruct(i) for i in ids])
