"""Word-level statistics: the model's input token-embedding matrix by frequency rank (layer 5).

From the BERT-flow paper (Li et al. 2020, Table 1): tokens ranked by their frequency in
the user's corpus, the mean l2 norm per rank bucket, the mean l2 distance and dot product
to the k nearest neighbours (exact kNN with faiss), the average cosine of random token
pairs and a projection coloured by rank. The ranking rules (unseen tokens, special
tokens, sampled kNN queries) are documented in :mod:`isotropy.analysis`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .._progress import ProgressBar
from .._spelling import spell
from ..errors import IsotropyError
from .metrics import (
    DEFAULT_PAIRS,
    DEFAULT_SEED,
    _partition_ratio,
    _spectra,
    _variance_dims,
    average_cosine,
    isoscore,
)

__all__ = [
    "BUCKET_EDGES",
    "KNN_KS",
    "MAX_QUERIES",
    "WordLevelUnavailable",
    "input_embedding_matrix",
    "token_frequencies",
    "frequency_ranking",
    "word_report",
]

BUCKET_EDGES = (0, 100, 500, 5000)  # the BERT-flow paper's rank buckets; the last one runs to the end
KNN_KS = (3, 5, 7)
MAX_QUERIES = 1000  # kNN queries per bucket (sampled); the means' standard errors are then ~1 %
TOKEN_SCATTER_POINTS = 4000


class WordLevelUnavailable(IsotropyError):
    """The model exposes no usable input-embedding matrix; the word-level part is skipped."""


def input_embedding_matrix(model: Any) -> np.ndarray:
    """The model's input token-embedding matrix as float32 numpy, or :class:`WordLevelUnavailable`."""
    name = type(model).__name__
    getter = getattr(model, "get_input_embeddings", None)
    if getter is None:
        raise WordLevelUnavailable(f"model {name} has no get_input_embeddings(); word-level analysis skipped")
    try:
        emb = getter()
    except (NotImplementedError, AttributeError, TypeError) as exc:
        raise WordLevelUnavailable(
            f"model {name} gives no input-embedding matrix ({type(exc).__name__}); word-level analysis skipped"
        ) from None
    weight = getattr(emb, "weight", None)
    if weight is None or getattr(weight, "ndim", 0) != 2:
        raise WordLevelUnavailable(f"model {name} has no 2-D input-embedding weight; word-level analysis skipped")
    try:
        arr = weight.detach().float().cpu().numpy()
    except AttributeError:
        arr = np.asarray(weight, dtype=np.float32)
    if not np.isfinite(arr).all():
        raise WordLevelUnavailable(f"model {name}'s input-embedding matrix holds NaN or inf; word-level analysis skipped")
    return np.ascontiguousarray(arr, dtype=np.float32)


def token_frequencies(tokenizer: Any, sentences: Sequence[str], vocab_size: int) -> np.ndarray:
    """Count of each token id in the tokenised sentences (no special tokens added, no truncation)."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    for start in range(0, len(sentences), 4096):
        batch = list(sentences[start : start + 4096])
        # verbose=False: long lines are counted whole, without "longer than the maximum" warnings
        ids = tokenizer(batch, add_special_tokens=False, truncation=False, return_attention_mask=False, verbose=False)[
            "input_ids"
        ]
        flat = np.fromiter((t for seq in ids for t in seq), dtype=np.int64)
        flat = flat[(flat >= 0) & (flat < vocab_size)]
        counts += np.bincount(flat, minlength=vocab_size)
    return counts


def frequency_ranking(
    counts: np.ndarray, exclude: Iterable[int] = (), unseen: str = "last", seed: int = DEFAULT_SEED
) -> np.ndarray:
    """Token ids in rank order: seen tokens by descending count (ties by id), then unseen ones.

    ``unseen="last"`` appends the never-seen tokens in a random order drawn with ``seed``;
    ``"drop"`` leaves them out. Ids in ``exclude`` (special tokens) are never ranked.
    """
    if unseen not in ("last", "drop"):
        raise IsotropyError(f"unseen tokens must be ranked 'last' or 'drop'ped, got {unseen!r}")
    counts = np.asarray(counts)
    keep = np.ones(len(counts), dtype=bool)
    ex = np.array([i for i in exclude if 0 <= i < len(counts)], dtype=np.int64)
    keep[ex] = False
    ids = np.flatnonzero(keep)
    seen = ids[counts[ids] > 0]
    seen = seen[np.argsort(-counts[seen], kind="stable")]  # stable: ties stay in id order
    if unseen == "drop":
        return seen
    never = ids[counts[ids] == 0]
    return np.concatenate([seen, np.random.default_rng(seed).permutation(never)])


def _bucket_name(start: int, stop: int | None) -> str:
    return f"[{start}, {stop})" if stop is not None else f"[{start}, end)"


def _knn_stats(E: np.ndarray, query_pos: np.ndarray, ks: Sequence[int], index: Any) -> dict[str, dict[str, float]]:
    """Mean l2 distance and dot product to the k nearest (l2) neighbours, the query excluded."""
    kmax = max(ks)
    Q = E[query_pos]
    D, ids = index.search(Q, kmax + 1)
    self_hit = ids == query_pos[:, None]
    # Drop the query itself; where (ties) it is not among the results, drop the farthest instead.
    no_self = ~self_hit.any(axis=1)
    self_hit[no_self, -1] = True
    keep = ~self_hit
    nb = ids[keep].reshape(len(query_pos), kmax)
    dist = np.sqrt(np.maximum(D[keep].reshape(len(query_pos), kmax), 0.0)).astype(np.float64)
    dots = np.einsum("qd,qkd->qk", Q.astype(np.float64), E[nb].astype(np.float64))
    return {
        "knn_l2": {str(k): float(dist[:, :k].mean()) for k in ks},
        "knn_dot": {str(k): float(dots[:, :k].mean()) for k in ks},
    }


# =========================================================================== word_report and its steps


def _check_word_args(buckets: Sequence[int], ks: Sequence[int], max_queries: int | None) -> tuple[list[int], list[int]]:
    """The rank-bucket edges and the sorted kNN sizes, checked; ``max_queries`` checked too."""
    edges = [int(b) for b in buckets]
    if not edges or edges[0] != 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise IsotropyError(f"rank buckets must start at 0 and increase, got {list(buckets)}")
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise IsotropyError(f"kNN sizes must be positive integers, got {list(ks)}")
    if max_queries is not None and int(max_queries) < 1:
        raise IsotropyError(f"max_queries must be at least 1 or None, got {max_queries}")
    return edges, ks


def _ranking_notes(n_ranked: int, n_seen: int, edges: list[int], ks: list[int], unseen: str) -> list[str]:
    """Refuse a ranking too short for the kNN statistics; note when the corpus sees too few distinct tokens."""
    notes: list[str] = []
    if n_ranked <= max(ks):
        raise IsotropyError(
            f"only {n_ranked} tokens can be ranked ({n_seen} seen in the corpus, {spell('unseen_tokens', unseen)}); "
            f"the kNN statistics need more than {max(ks)}"
        )
    if n_seen < edges[-1]:
        notes.append(
            f"only {n_seen} distinct tokens occur in the corpus, so ranks from {n_seen} on "
            + ("are unseen tokens in random order, not ranked by frequency" if unseen == "last" else "do not exist")
        )
    return notes


def _bucket_entry(
    E: np.ndarray,
    index: Any,
    order: np.ndarray,
    counts: np.ndarray,
    norms: np.ndarray,
    bounds: tuple[int, int | None],
    ks: list[int],
    max_queries: int | None,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """One rank bucket ``[start, stop)``: token counts, mean norm and kNN statistics of (sampled) queries."""
    start, stop = bounds
    stop_eff = len(order) if stop is None else min(stop, len(order))
    entry: dict[str, Any] = {"name": _bucket_name(start, stop), "start": start, "stop": stop}
    if start >= stop_eff:
        entry.update(n_tokens=0, n_seen=0, n_queries=0, mean_norm=None, knn_l2=None, knn_dot=None)
        return entry
    pos = np.arange(start, stop_eff)
    if max_queries is not None and len(pos) > max_queries:
        pos = np.sort(rng.choice(pos, size=int(max_queries), replace=False))
    entry.update(
        n_tokens=int(stop_eff - start),
        n_seen=int((counts[order[start:stop_eff]] > 0).sum()),
        n_queries=int(len(pos)),
        mean_norm=float(norms[start:stop_eff].mean()),
        **_knn_stats(E, pos, ks, index),
    )
    return entry


def _scatter_sample(n_ranked: int, scatter_points: int, rng: np.random.Generator) -> np.ndarray:
    """The figures' sample: every one of the most frequent ranks (few, but the interesting ones), then random others."""
    head = np.arange(min(n_ranked, 500, scatter_points // 4))
    rest = np.arange(len(head), n_ranked)
    extra = rng.choice(rest, size=min(len(rest), scatter_points - len(head)), replace=False)
    return np.sort(np.concatenate([head, extra]).astype(np.int64))


def _top_tokens(tokenizer: Any, order: np.ndarray, counts: np.ndarray, n_seen: int) -> list[dict[str, Any]]:
    """The ten most frequent tokens of the corpus: rank, id, token and count."""
    return [
        {
            "rank": r,
            "id": int(order[r]),
            "token": str(tokenizer.convert_ids_to_tokens(int(order[r]))),
            "count": int(counts[order[r]]),
        }
        for r in range(min(10, n_seen))
    ]


def word_report(
    encoder: Any,
    corpus_sentences: Sequence[str],
    *,
    unseen: str = "last",
    buckets: Sequence[int] = BUCKET_EDGES,
    ks: Sequence[int] = KNN_KS,
    max_queries: int | None = MAX_QUERIES,
    n_pairs: int = DEFAULT_PAIRS,
    seed: int = DEFAULT_SEED,
    scatter_points: int = TOKEN_SCATTER_POINTS,
    show_progress: bool | None = None,
) -> dict[str, Any]:
    """Word-level statistics of the model's token-embedding matrix (BERT-flow paper, Table 1).

    ``encoder`` is an :class:`~isotropy.Encoder` (anything with ``.tokenizer`` and
    ``.model``). Token frequencies come from tokenising ``corpus_sentences`` with the
    same tokenizer; see the module notes for the ranking of unseen tokens. Raises
    :class:`WordLevelUnavailable` when the model has no usable embedding matrix.
    Returns a JSON-ready dict with ``buckets`` (one entry per rank bucket: ``mean_norm``,
    ``knn_l2`` and ``knn_dot`` per k, token counts), ``average_cosine``,
    ``partition_isotropy``, ``isoscore``, ``top_tokens`` and the figures' data.
    """
    import faiss

    tokenizer, model = encoder.tokenizer, encoder.model
    E_all = input_embedding_matrix(model)
    edges, ks = _check_word_args(buckets, ks, max_queries)
    vocab = min(E_all.shape[0], len(tokenizer))  # rows past the tokenizer's ids are padding, never produced
    special = set(int(i) for i in getattr(tokenizer, "all_special_ids", []) or [])
    counts = token_frequencies(tokenizer, list(corpus_sentences), vocab)
    order = frequency_ranking(counts, special, unseen, seed)
    n_seen = int((counts[order] > 0).sum())
    notes = _ranking_notes(len(order), n_seen, edges, ks, unseen)
    E = np.ascontiguousarray(E_all[order])  # row r = token of rank r
    norms = np.linalg.norm(E.astype(np.float64), axis=1)
    index = faiss.IndexFlatL2(E.shape[1])  # exact search; O(V d) memory, no V x V matrix
    index.add(E)
    rng = np.random.default_rng(seed)
    bounds = list(zip(edges, edges[1:] + [None]))
    out_buckets = []
    with ProgressBar(len(bounds) + 1, show_progress, "token statistics", min_total=1) as bar:
        for bucket in bounds:
            out_buckets.append(_bucket_entry(E, index, order, counts, norms, bucket, ks, max_queries, rng))
            bar.advance()
        E64 = E.astype(np.float64)
        cos = average_cosine(E64, n_pairs, seed)
        evals, C = _spectra(E64)
        piso = _partition_ratio(E64, C)
        bar.advance()
    sample = _scatter_sample(len(order), scatter_points, rng)
    xy = E64[sample] @ C[:, :2]  # top-2 right singular vectors of the whole uncentred matrix
    return {
        "model": getattr(encoder, "model_name", type(model).__name__),
        "vocab_size": int(vocab),
        "dim": int(E.shape[1]),
        "special_tokens_excluded": len(special & set(range(vocab))),
        "ranked_tokens": int(len(order)),
        "seen_tokens": n_seen,
        "corpus_tokens": int(counts.sum()),
        "unseen": unseen,
        "ks": ks,
        "max_queries": None if max_queries is None else int(max_queries),
        "buckets": out_buckets,
        "mean_norm": float(norms.mean()),
        "average_cosine": cos,
        "partition_isotropy": piso,
        "isoscore": isoscore(eigenvalues=evals),
        "dims_for_variance": _variance_dims(evals),
        "top_tokens": _top_tokens(tokenizer, order, counts, n_seen),
        "notes": notes,
        "projection": {
            "x": np.round(xy[:, 0], 5).tolist(),
            "y": np.round(xy[:, 1], 5).tolist(),
            "rank": sample.astype(int).tolist(),
            "norm": np.round(norms[sample], 5).tolist(),
        },
    }
