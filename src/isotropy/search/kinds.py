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
from .spec import INDEX_KINDS, _is_int, check_params

__all__ = ["INDEX_KINDS", "faiss_module", "check_params", "new_faiss", "set_query_params", "describe_kind", "reconstruct"]

# INDEX_KINDS and check_params live with the build's spec (.spec: the kind is checked once, where a request enters)


def faiss_module():
    """faiss, imported on first use (``import isotropy.search`` does not load it)."""
    import faiss

    return faiss


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
