"""Seeing anisotropy: statistics and pictures of embeddings, before and after calibration.

Two levels, as in the papers:

* **Sentence level** (:func:`sentence_report`): for the raw sentence vectors and for
  each calibration (whitening, flow, ...) applied to them,

  - the average cosine similarity of random sentence pairs (the "cone effect":
    Ethayarajh 2019; Li et al. 2020), mean and standard deviation over a fixed
    number of pairs drawn with a seeded generator (the same pairs for every
    representation, so before/after is a paired comparison);
  - Mu & Viswanath's (2018, "All-but-the-top", eq. 7-8) partition-function isotropy
    ``I(W) = min_c Z(c) / max_c Z(c)`` with ``Z(c) = sum_i exp(c^T w_i)``, ``c`` over the
    eigenvectors of ``W^T W`` (:func:`partition_isotropy`);
  - IsoScore (Rudman et al. 2022, Findings of ACL) from the covariance spectrum
    (:func:`isoscore`);
  - the covariance eigenvalue spectrum and how many dimensions hold 50 / 90 / 99 %
    of the variance;
  - a histogram of the pairwise cosines and a 2-D projection.

* **Word level** (:func:`word_report`), from the BERT-flow paper (Li et al. 2020, Table 1),
  on the model's input token-embedding matrix, tokens ranked by their frequency in
  *the user's corpus* (the paper ranks by the pre-training corpus): the mean l2 norm
  per frequency-rank bucket ``[0, 100) [100, 500) [500, 5000) [5000, end)``, the mean l2
  distance and dot product to the k = 3, 5, 7 nearest neighbours (exact kNN with
  faiss), the average cosine of random token pairs ("Learning to Remove", Liang et
  al. 2021) and a projection coloured by rank.

:func:`write_report` renders one report folder (``report.json``, ``report.md`` and
one PNG per figure, written atomically); :func:`analyze` does everything for a list
of sentences and an encoder (the call the demo makes); :func:`analyze_file` is the
``isotropy analyze`` command. Statistics and drawing are separate: every figure is
drawn from the numbers in ``report.json`` alone, by functions that return a
matplotlib ``Figure`` (Agg canvas, no display needed).

Decisions, documented once (docs/ANALYSIS.md explains them at more length):

* Blank lines of a corpus are skipped (they would all encode to the same vector).
* Random pairs are pairs of *different* rows ``i != j``, drawn independently with
  replacement (``numpy.random.default_rng(seed)``).
* ``I(W)`` is computed on the vectors as given (it is not scale-invariant), with
  ``log Z`` by ``scipy.special.logsumexp`` so large norms cannot overflow, and over
  both signs ``+c`` and ``-c`` of every eigenvector: an eigenvector's sign is arbitrary,
  taking both makes the score independent of the solver's choice.
* IsoScore uses the covariance eigenvalues (= the variances after Rudman et al.'s PCA
  re-orientation step), all ``d`` of them (zeros when there are fewer rows than dims).
* Projections are onto the top two right singular vectors of the *uncentred* matrix
  (sentence vectors first scaled to unit length), so the origin stays put and a
  cone shows as a cloud away from it; after whitening the cloud sits on the origin.
* Token ranks: tokens seen in the corpus are ranked by descending count (ties by
  token id); with ``unseen="last"`` (default) the tokens that never occur follow, in a
  seeded random order (token-id order would put blocks of related ids, such as BERT's
  ``[unused]`` tokens, into one bucket: the corpus says nothing about their frequency,
  so every bucket past the seen tokens gets a like sample of them); with
  ``unseen="drop"`` they are left out. Special tokens
  (``tokenizer.all_special_ids``) are never ranked. kNN neighbours are searched among
  the ranked tokens (exact L2, ``faiss.IndexFlatL2``), the query itself excluded; the
  dot product is taken with those same l2 neighbours. Each bucket's kNN statistics are
  averaged over at most ``max_queries`` tokens of the bucket, sampled with the seed
  (``None``: all); norms use every token.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ._io import IsotropyError, ProgressBar, atomic_dir, check_matrix, check_output_path

__all__ = [
    "MIN_SENTENCES",
    "WordLevelUnavailable",
    "average_cosine",
    "covariance_spectrum",
    "dims_for_variance",
    "partition_isotropy",
    "isoscore",
    "projection_2d",
    "token_frequencies",
    "frequency_ranking",
    "sentence_report",
    "word_report",
    "write_report",
    "analyze",
    "analyze_file",
    "sentence_table",
    "word_table",
    "FIGURES",
]

MIN_SENTENCES = 10  # fewer non-empty lines give statistics dominated by chance
DEFAULT_PAIRS = 10_000
DEFAULT_SEED = 0
BUCKET_EDGES = (0, 100, 500, 5000)  # the BERT-flow paper's rank buckets; the last one runs to the end
KNN_KS = (3, 5, 7)
MAX_QUERIES = 1000  # kNN queries per bucket (sampled); the means' standard errors are then ~1 %
SCATTER_POINTS = 2000  # sentence points kept for the projection figure
TOKEN_SCATTER_POINTS = 4000
HIST_BINS = 80
VARIANCE_FRACTIONS = (0.5, 0.9, 0.99)
AUTO_WHITENING = "auto-whitening"
RAW = "raw"


class WordLevelUnavailable(IsotropyError):
    """The model exposes no usable input-embedding matrix; the word-level part is skipped."""


# =========================================================================== statistics


def _as_float64(X: Any, name: str, min_rows: int = 2) -> np.ndarray:
    return check_matrix(X, name, min_rows=min_rows, dtype=np.float64)


def _eigh(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric eigendecomposition, descending, with deterministic eigenvector signs."""
    # One BLAS thread: LAPACK's symmetric solver is a chain of small calls that runs far
    # slower with OpenBLAS threads on a busy machine (measured in whitening.py).
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        evals, U = np.linalg.eigh(matrix)
    evals, U = evals[::-1].copy(), U[:, ::-1].copy()
    signs = np.sign(U[np.abs(U).argmax(axis=0), np.arange(U.shape[1])])
    signs[signs == 0] = 1.0
    return evals, U * signs


def random_pairs(n: int, n_pairs: int, seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """``n_pairs`` index pairs ``(i, j)`` with ``i != j``, uniform over ordered pairs, seeded."""
    if n < 2:
        raise IsotropyError(f"random pairs need at least 2 rows, got {n}")
    if n_pairs < 1:
        raise IsotropyError(f"the number of random pairs must be at least 1, got {n_pairs}")
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=n_pairs)
    j = (i + rng.integers(1, n, size=n_pairs)) % n  # any row but i, uniformly
    return i, j


def average_cosine(
    X: Any, n_pairs: int = DEFAULT_PAIRS, seed: int = DEFAULT_SEED, *, return_samples: bool = False
) -> dict[str, Any]:
    """Mean and standard deviation of the cosine similarity of ``n_pairs`` random row pairs.

    For isotropic vectors it is near 0; for ``x = m + noise`` (a cone around ``m``) it is
    near ``|m|^2 / (|m|^2 + E|noise|^2)``. Returns ``{"mean", "std", "sem", "n_pairs"}``
    (and ``"samples"``, the cosines, when asked).
    """
    from .evaluation import cosine_rows

    X = _as_float64(X, "vectors")
    i, j = random_pairs(X.shape[0], n_pairs, seed)
    cos = cosine_rows(X[i], X[j])
    out: dict[str, Any] = {
        "mean": float(cos.mean()),
        "std": float(cos.std(ddof=1)) if len(cos) > 1 else 0.0,
        "sem": float(cos.std(ddof=1) / math.sqrt(len(cos))) if len(cos) > 1 else 0.0,
        "n_pairs": int(n_pairs),
    }
    if return_samples:
        out["samples"] = cos
    return out


def _gram(X: np.ndarray) -> np.ndarray:
    """``X^T X`` in float64 (one BLAS call)."""
    return X.T @ X


def _spectra(X: np.ndarray, vectors: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Covariance eigenvalues (descending, ddof=1) and the eigenvectors of ``X^T X``, from one Gram matrix.

    Both the spectrum and Mu & Viswanath's score need a d x d eigenproblem; computing
    ``G = X^T X`` once and the covariance as ``(G - n mu mu^T) / (n - 1)`` halves the
    O(n d^2) work (the cancellation is harmless in float64 at embedding scales).
    """
    n, d = X.shape
    G = _gram(X)
    mu = X.mean(axis=0)
    cov = (G - n * np.outer(mu, mu)) / (n - 1)
    evals, _ = _eigh(0.5 * (cov + cov.T))
    C = _eigh(G)[1] if vectors else None
    return np.maximum(evals, 0.0), C


def covariance_spectrum(X: Any) -> np.ndarray:
    """Eigenvalues of the covariance of the rows (ddof = 1), descending, negatives from rounding set to 0."""
    X = _as_float64(X, "vectors")
    return _spectra(X, vectors=False)[0]


def dims_for_variance(eigenvalues: Any, fraction: float = 0.9) -> int:
    """Smallest number of principal directions that hold ``fraction`` of the total variance."""
    ev = np.maximum(np.asarray(eigenvalues, dtype=np.float64), 0.0)
    total = ev.sum()
    if total <= 0:
        return 0
    cum = np.cumsum(np.sort(ev)[::-1]) / total
    return int(min(np.searchsorted(cum, fraction - 1e-12) + 1, len(ev)))


def partition_isotropy(X: Any) -> float:
    """Mu & Viswanath's isotropy ``I(W) = min_c Z(c) / max_c Z(c)``, in [0, 1].

    ``Z(c) = sum_i exp(c^T w_i)`` with ``c`` over the eigenvectors of ``W^T W`` (rows
    ``w_i`` of ``X``, uncentred), both signs of each (see the module notes). Near 1 for
    isotropic vectors of moderate norm, near 0 for a cone. Reference: J. Mu and
    P. Viswanath, "All-but-the-Top: Simple and Effective Postprocessing for Word
    Representations", ICLR 2018, eq. (7)-(8).
    """
    W = _as_float64(X, "vectors", min_rows=1)
    return _partition_ratio(W, _eigh(_gram(W))[1])


def _log_partition(proj: np.ndarray) -> np.ndarray:
    """Column-wise ``log sum_i exp(proj[i, c])``, shifted by the column maximum so it cannot overflow."""
    # Written out rather than scipy.special.logsumexp: scipy's generic version made several
    # full-size temporaries and measured ~5x slower on a 30,000 x 384 token matrix.
    top = proj.max(axis=0)
    return top + np.log(np.exp(proj - top).sum(axis=0))


def _partition_ratio(W: np.ndarray, C: np.ndarray) -> float:
    proj = W @ C  # (n, d): c^T w_i for every eigenvector c
    log_z = np.concatenate([_log_partition(proj), _log_partition(-proj)])
    return float(np.exp(log_z.min() - log_z.max()))


def isoscore(X: Any = None, *, eigenvalues: Any = None) -> float:
    """IsoScore (Rudman, Gillman, Rayne & Eickhoff, "IsoScore: Measuring the Uniformity of
    Embedding Space Utilization", Findings of ACL 2022), in [0, 1].

    With ``Σ`` the d variances of the PCA-reoriented vectors (the covariance eigenvalues):
    ``Σ̂ = sqrt(d) Σ / ||Σ||``, defect ``δ = ||Σ̂ - 1|| / sqrt(2 (d - sqrt(d)))``,
    ``IsoScore = ((d - δ² (d - sqrt(d)))² - d) / (d (d - 1))``. 1 when every direction
    carries the same variance, 0 when one direction carries it all. It ignores the
    mean, so it does not see a cone's offset, only how evenly the variance is spread.
    """
    if eigenvalues is None:
        if X is None:
            raise IsotropyError("isoscore needs vectors or their covariance eigenvalues")
        eigenvalues = covariance_spectrum(X)
    ev = np.maximum(np.asarray(eigenvalues, dtype=np.float64), 0.0)
    d = ev.shape[0]
    if d < 2:
        return 1.0
    norm = np.linalg.norm(ev)
    if norm == 0:
        return 0.0
    normed = ev * math.sqrt(d) / norm
    defect = np.linalg.norm(normed - 1.0) / math.sqrt(2.0 * (d - math.sqrt(d)))
    score = ((d - defect**2 * (d - math.sqrt(d))) ** 2 - d) / (d * (d - 1))
    return float(min(max(score, 0.0), 1.0))


def projection_2d(X: Any, *, normalize: bool = True) -> np.ndarray:
    """Coordinates (n x 2) on the top two right singular vectors of the uncentred rows.

    ``normalize=True`` scales rows to unit length first (cosine geometry). The origin
    is kept, so vectors in a narrow cone land away from it.
    """
    X = _as_float64(X, "vectors", min_rows=1)
    if normalize:
        X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), np.finfo(np.float64).tiny)
    if X.shape[1] < 2:
        return np.column_stack([X[:, 0], np.zeros(X.shape[0])])
    _, V = _eigh(X.T @ X)
    return X @ V[:, :2]


# =========================================================================== sentence level


def _apply(name: str, transform: Any, X: np.ndarray) -> np.ndarray:
    if isinstance(transform, np.ndarray):
        Y = transform
        if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
            raise IsotropyError(f"vectors given for {name!r} have shape {Y.shape}; expected {X.shape[0]} rows")
        return np.asarray(Y, dtype=np.float64)
    expected = getattr(transform, "n_features_in_", None)
    if isinstance(expected, (int, np.integer)) and int(expected) != X.shape[1]:
        raise IsotropyError(
            f"transform {name!r} was fitted on {int(expected)}-dimensional vectors but these have "
            f"{X.shape[1]}; fit it on vectors of the same model and pooling"
        )
    try:
        Y = transform.transform(X)
    except IsotropyError as exc:
        raise IsotropyError(f"transform {name!r}: {exc}") from None
    return check_matrix(Y, f"output of transform {name!r}", dtype=np.float64)


def _describe(
    V: np.ndarray, n_pairs: int, seed: int, scatter_idx: np.ndarray, bin_edges: np.ndarray
) -> dict[str, Any]:
    cos = average_cosine(V, n_pairs, seed, return_samples=True)
    samples = cos.pop("samples")
    evals, C = _spectra(V)
    total = float(evals.sum())
    counts, _ = np.histogram(np.clip(samples, -1.0, 1.0), bins=bin_edges)
    xy = projection_2d(V)[scatter_idx]
    norms = np.linalg.norm(V, axis=1)
    return {
        "dim": int(V.shape[1]),
        "average_cosine": cos,
        "partition_isotropy": _partition_ratio(V, C),
        "isoscore": isoscore(eigenvalues=evals),
        "dims_for_variance": {f"{f:g}": dims_for_variance(evals, f) for f in VARIANCE_FRACTIONS},
        "mean_norm": float(norms.mean()),
        # |mean vector| / mean |x|: 0 for centred data, 1 when every vector is the same.
        "mean_vector_norm_ratio": float(np.linalg.norm(V.mean(axis=0)) / max(norms.mean(), 1e-300)),
        "eigenvalues": evals.tolist(),
        "explained_variance_total": total,
        "cosine_histogram": {"edges": bin_edges.tolist(), "counts": counts.astype(int).tolist()},
        "projection": {"x": np.round(xy[:, 0], 5).tolist(), "y": np.round(xy[:, 1], 5).tolist()},
    }


def sentence_report(
    vectors: Any,
    transforms: Mapping[str, Any] | None = None,
    *,
    n_pairs: int = DEFAULT_PAIRS,
    seed: int = DEFAULT_SEED,
    scatter_points: int = SCATTER_POINTS,
    show_progress: bool | None = None,
) -> dict[str, Any]:
    """Sentence-level statistics of ``vectors`` and of each transform applied to them.

    ``transforms`` maps a display name to a fitted transform (anything with
    ``.transform(X)``: :class:`~isotropy.Whitening`, :class:`~isotropy.Flow`, a
    scikit-learn transformer) or to an array of already transformed vectors (same
    rows). Returns a JSON-ready dict: ``n_sentences``, ``dim``, ``n_pairs``, ``seed`` and
    ``representations`` = ``{"raw": {...}, name: {...}}``, each with ``average_cosine``
    (mean, std, sem), ``partition_isotropy``, ``isoscore``, ``dims_for_variance``
    (fractions 0.5 / 0.9 / 0.99), ``eigenvalues``, ``cosine_histogram`` and
    ``projection`` (the figures' data).
    """
    X = check_matrix(vectors, "vectors", min_rows=MIN_SENTENCES, dtype=np.float64)
    transforms = dict(transforms or {})
    if RAW in transforms:
        raise IsotropyError(f"{RAW!r} is reserved for the untransformed vectors; rename that transform")
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    scatter_idx = np.sort(rng.choice(n, size=min(n, scatter_points), replace=False))
    bin_edges = np.linspace(-1.0, 1.0, HIST_BINS + 1)
    reps: dict[str, Any] = {}
    with ProgressBar(1 + len(transforms), show_progress, "sentence statistics", min_total=1) as bar:
        reps[RAW] = _describe(X, n_pairs, seed, scatter_idx, bin_edges)
        bar.advance()
        for name, t in transforms.items():
            reps[str(name)] = _describe(_apply(str(name), t, X), n_pairs, seed, scatter_idx, bin_edges)
            bar.advance()
    return {"n_sentences": n, "dim": int(X.shape[1]), "n_pairs": int(n_pairs), "seed": int(seed), "representations": reps}


# =========================================================================== word level


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
        ids = tokenizer(batch, add_special_tokens=False, truncation=False, return_attention_mask=False, verbose=False)["input_ids"]
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
    D, I = index.search(Q, kmax + 1)
    self_hit = I == query_pos[:, None]
    # Drop the query itself; where (ties) it is not among the results, drop the farthest instead.
    no_self = ~self_hit.any(axis=1)
    self_hit[no_self, -1] = True
    keep = ~self_hit
    nb = I[keep].reshape(len(query_pos), kmax)
    dist = np.sqrt(np.maximum(D[keep].reshape(len(query_pos), kmax), 0.0)).astype(np.float64)
    dots = np.einsum("qd,qkd->qk", Q.astype(np.float64), E[nb].astype(np.float64))
    return {
        "knn_l2": {str(k): float(dist[:, :k].mean()) for k in ks},
        "knn_dot": {str(k): float(dots[:, :k].mean()) for k in ks},
    }


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
    edges = [int(b) for b in buckets]
    if not edges or edges[0] != 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise IsotropyError(f"rank buckets must start at 0 and increase, got {list(buckets)}")
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise IsotropyError(f"kNN sizes must be positive integers, got {list(ks)}")
    if max_queries is not None and int(max_queries) < 1:
        raise IsotropyError(f"max_queries must be at least 1 or None, got {max_queries}")
    vocab = min(E_all.shape[0], len(tokenizer))  # rows past the tokenizer's ids are padding, never produced
    special = set(int(i) for i in getattr(tokenizer, "all_special_ids", []) or [])
    counts = token_frequencies(tokenizer, list(corpus_sentences), vocab)
    order = frequency_ranking(counts, special, unseen, seed)
    n_seen = int((counts[order] > 0).sum())
    notes: list[str] = []
    if len(order) <= max(ks):
        raise IsotropyError(
            f"only {len(order)} tokens can be ranked ({n_seen} seen in the corpus, unseen={unseen!r}); "
            f"the kNN statistics need more than {max(ks)}"
        )
    if n_seen < edges[-1]:
        notes.append(
            f"only {n_seen} distinct tokens occur in the corpus, so ranks from {n_seen} on "
            + ("are unseen tokens in random order, not ranked by frequency" if unseen == "last" else "do not exist")
        )
    E = np.ascontiguousarray(E_all[order])  # row r = token of rank r
    norms = np.linalg.norm(E.astype(np.float64), axis=1)
    index = faiss.IndexFlatL2(E.shape[1])  # exact search; O(V d) memory, no V x V matrix
    index.add(E)
    rng = np.random.default_rng(seed)
    bounds = list(zip(edges, edges[1:] + [None]))
    out_buckets = []
    with ProgressBar(len(bounds) + 1, show_progress, "token statistics", min_total=1) as bar:
        for start, stop in bounds:
            stop_eff = len(order) if stop is None else min(stop, len(order))
            entry: dict[str, Any] = {"name": _bucket_name(start, stop), "start": start, "stop": stop}
            if start >= stop_eff:
                entry.update(n_tokens=0, n_seen=0, n_queries=0, mean_norm=None, knn_l2=None, knn_dot=None)
            else:
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
            out_buckets.append(entry)
            bar.advance()
        E64 = E.astype(np.float64)
        cos = average_cosine(E64, n_pairs, seed)
        evals, C = _spectra(E64)
        piso = _partition_ratio(E64, C)
        bar.advance()
    # The figures' sample: every one of the most frequent ranks (few, but the interesting ones), then random others.
    head = np.arange(min(len(order), 500, scatter_points // 4))
    rest = np.arange(len(head), len(order))
    extra = rng.choice(rest, size=min(len(rest), scatter_points - len(head)), replace=False)
    sample = np.sort(np.concatenate([head, extra]).astype(np.int64))
    xy = E64[sample] @ C[:, :2]  # top-2 right singular vectors of the whole uncentred matrix
    top = [
        {"rank": r, "id": int(order[r]), "token": str(tokenizer.convert_ids_to_tokens(int(order[r]))), "count": int(counts[order[r]])}
        for r in range(min(10, n_seen))
    ]
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
        "dims_for_variance": {f"{f:g}": dims_for_variance(evals, f) for f in VARIANCE_FRACTIONS},
        "top_tokens": top,
        "notes": notes,
        "projection": {
            "x": np.round(xy[:, 0], 5).tolist(),
            "y": np.round(xy[:, 1], 5).tolist(),
            "rank": sample.astype(int).tolist(),
            "norm": np.round(norms[sample], 5).tolist(),
        },
    }


# =========================================================================== tables


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, float) and value != 0 and abs(value) < 10 ** (-digits):
        return f"{value:.1e}"
    return f"{value:.{digits}f}"


def _sentence_rows(sentence: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    reps = sentence["representations"]
    names = list(reps)
    rows = [
        ["average cosine of random pairs"] + [_fmt(reps[n]["average_cosine"]["mean"]) for n in names],
        ["  std of that cosine"] + [_fmt(reps[n]["average_cosine"]["std"]) for n in names],
        ["isotropy I(W) (Mu & Viswanath)"] + [_fmt(reps[n]["partition_isotropy"]) for n in names],
        ["IsoScore (Rudman et al.)"] + [_fmt(reps[n]["isoscore"]) for n in names],
        ["dims holding 90% of variance"] + [f'{reps[n]["dims_for_variance"]["0.9"]} / {reps[n]["dim"]}' for n in names],
        ["norm of mean vector / mean norm"] + [_fmt(reps[n]["mean_vector_norm_ratio"]) for n in names],
        ["mean norm"] + [_fmt(reps[n]["mean_norm"]) for n in names],
    ]
    return ["statistic", *names], rows


def _word_rows(word: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    bks = word["buckets"]
    header = ["statistic", *[b["name"] for b in bks]]
    rows = [["mean l2 norm"] + [_fmt(b["mean_norm"]) for b in bks]]
    for k in word["ks"]:
        rows.append([f"mean {k}-NN l2 distance"] + [_fmt(b["knn_l2"][str(k)] if b["knn_l2"] else None) for b in bks])
    for k in word["ks"]:
        rows.append([f"mean {k}-NN dot product"] + [_fmt(b["knn_dot"][str(k)] if b["knn_dot"] else None) for b in bks])
    rows.append(["tokens (seen in corpus)"] + [f'{b["n_tokens"]} ({b["n_seen"]})' for b in bks])
    return header, rows


def _rich(title: str, header: list[str], rows: list[list[str]]):
    from rich.table import Table

    table = Table(title=title)
    table.add_column(header[0], style="bold")
    for h in header[1:]:
        table.add_column(h, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def sentence_table(sentence: Mapping[str, Any]):
    """A rich Table: rows = statistic, columns = raw and each transform."""
    return _rich(f"Sentence vectors ({sentence['n_sentences']} sentences, {sentence['n_pairs']} random pairs)", *_sentence_rows(sentence))


def word_table(word: Mapping[str, Any]):
    """A rich Table in the BERT-flow paper's layout: rows = statistic, columns = frequency-rank buckets."""
    return _rich(f"Token embeddings by frequency rank in the corpus ({word['model']})", *_word_rows(word))


def print_tables(report: Mapping[str, Any], console: Any = None) -> None:
    """Print the report's tables (sentence level, then word level) with rich."""
    if console is None:
        from rich.console import Console

        console = Console()
    if report.get("sentence"):
        console.print(sentence_table(report["sentence"]))
    word = report.get("word")
    if word:
        console.print(word_table(word))
        cos = word["average_cosine"]
        console.print(
            f"random token pairs: average cosine {_fmt(cos['mean'])} (std {_fmt(cos['std'])}), "
            f"I(W) {_fmt(word['partition_isotropy'])}, IsoScore {_fmt(word['isoscore'])}"
        )


# =========================================================================== figures


def _new_figure(width: float, height: float):
    # Figure + Agg canvas directly: no pyplot global state, no display, thread-safe.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def plot_cosine_histograms(sentence: Mapping[str, Any]):
    """Histograms of the random-pair cosines, one per representation (overlaid)."""
    fig = _new_figure(7, 4.2)
    ax = fig.add_subplot()
    reps = sentence["representations"]
    for (name, rep), color in zip(reps.items(), _colors(len(reps))):
        h = rep["cosine_histogram"]
        edges = np.asarray(h["edges"])
        counts = np.asarray(h["counts"], dtype=np.float64)
        density = counts / max(counts.sum(), 1) / np.diff(edges)
        ax.stairs(density, edges, label=f"{name} (mean {rep['average_cosine']['mean']:.3f})", color=color, linewidth=1.6)
        ax.axvline(rep["average_cosine"]["mean"], color=color, linestyle="--", linewidth=1)
    ax.set_xlabel("cosine similarity of a random sentence pair")
    ax.set_ylabel("density")
    ax.set_xlim(-1, 1)
    ax.set_title(f"Cosine similarity of {sentence['n_pairs']} random sentence pairs")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def plot_spectrum(sentence: Mapping[str, Any]):
    """Covariance eigenvalue spectrum (left) and cumulative explained variance (right)."""
    fig = _new_figure(10, 4.2)
    ax1, ax2 = fig.subplots(1, 2)
    reps = sentence["representations"]
    for (name, rep), color in zip(reps.items(), _colors(len(reps))):
        ev = np.asarray(rep["eigenvalues"], dtype=np.float64)
        total = ev.sum() if ev.sum() > 0 else 1.0
        share = ev / total
        idx = np.arange(1, len(ev) + 1)
        pos = share > 0
        ax1.plot(idx[pos], share[pos], color=color, label=name)
        d90 = rep["dims_for_variance"]["0.9"]
        ax2.plot(idx, np.cumsum(share), color=color, label=f"{name}: 90% in {d90} dims")
        if d90:
            ax2.plot([d90], [np.cumsum(share)[d90 - 1]], "o", color=color)
    ax1.set_yscale("log")
    ax1.set_xlabel("principal direction (sorted by variance)")
    ax1.set_ylabel("share of total variance")
    ax1.set_title("Covariance eigenvalue spectrum")
    ax1.legend(fontsize="small")
    ax2.axhline(0.9, color="grey", linestyle=":", linewidth=1)
    ax2.set_xlabel("number of principal directions")
    ax2.set_ylabel("cumulative explained variance")
    ax2.set_ylim(0, 1.02)
    ax2.set_title("Explained variance curve")
    ax2.legend(fontsize="small", loc="lower right")
    return fig


def plot_projection(sentence: Mapping[str, Any]):
    """2-D projection of the unit-length sentence vectors, one panel per representation."""
    reps = sentence["representations"]
    n = len(reps)
    fig = _new_figure(4.2 * n, 4.4)
    axes = np.atleast_1d(fig.subplots(1, n))
    theta = np.linspace(0, 2 * np.pi, 200)
    for ax, (name, rep), color in zip(axes, reps.items(), _colors(n)):
        p = rep["projection"]
        ax.scatter(p["x"], p["y"], s=4, alpha=0.5, color=color, linewidths=0)
        ax.plot(np.cos(theta), np.sin(theta), color="lightgrey", linewidth=0.8)
        ax.plot([0], [0], "k+", markersize=10)
        ax.set_xlim(-1.05, 1.05)
        ax.set_ylim(-1.05, 1.05)
        ax.set_aspect("equal")
        ax.set_xlabel("1st singular direction")
        ax.set_ylabel("2nd singular direction")
        ax.set_title(f"{name}\n(avg cosine {rep['average_cosine']['mean']:.3f})", fontsize="medium")
    fig.suptitle("Unit-length sentence vectors projected to 2-D (origin +, unit circle grey)")
    return fig


def plot_token_projection(word: Mapping[str, Any]):
    """2-D projection of token embeddings coloured by frequency rank."""
    from matplotlib.colors import LogNorm

    fig = _new_figure(6.4, 5.2)
    ax = fig.add_subplot()
    p = word["projection"]
    order = np.argsort(p["rank"])[::-1]  # frequent tokens drawn last, on top
    rank = np.asarray(p["rank"], dtype=np.float64)[order] + 1
    sc = ax.scatter(np.asarray(p["x"])[order], np.asarray(p["y"])[order], c=rank, s=5, cmap="viridis_r",
                    norm=LogNorm(vmin=1, vmax=max(rank.max(), 2)), linewidths=0)
    fig.colorbar(sc, ax=ax, label="frequency rank in the corpus (1 = most frequent)")
    ax.plot([0], [0], "k+", markersize=10)
    ax.set_xlabel("1st singular direction")
    ax.set_ylabel("2nd singular direction")
    ax.set_title(f"Token embeddings ({len(rank)} of {word['ranked_tokens']}), coloured by frequency rank")
    return fig


def plot_token_norms(word: Mapping[str, Any]):
    """l2 norm of token embeddings against frequency rank, bucket means drawn as segments."""
    fig = _new_figure(7, 4.2)
    ax = fig.add_subplot()
    p = word["projection"]
    ax.scatter(np.asarray(p["rank"]) + 1, p["norm"], s=4, alpha=0.4, color="tab:blue", linewidths=0, label="token (sample)")
    n = word["ranked_tokens"]
    for b in word["buckets"]:
        if b["mean_norm"] is None:
            continue
        lo, hi = b["start"] + 1, (b["stop"] if b["stop"] is not None else n)
        ax.hlines(b["mean_norm"], lo, min(hi, n), color="tab:red", linewidth=2.5)
        ax.axvline(lo, color="grey", linestyle=":", linewidth=0.8)
    ax.plot([], [], color="tab:red", linewidth=2.5, label="bucket mean")
    ax.set_xscale("log")
    ax.set_xlabel("frequency rank in the corpus (1 = most frequent)")
    ax.set_ylabel("l2 norm of the token embedding")
    ax.set_title("Token embedding norm by frequency rank")
    ax.legend(fontsize="small")
    return fig


# file name -> (part of the report it draws, function, caption)
FIGURES: dict[str, tuple[str, Any, str]] = {
    "cosine_histogram.png": ("sentence", plot_cosine_histograms, "Cosine similarity of random sentence pairs"),
    "spectrum.png": ("sentence", plot_spectrum, "Covariance spectrum and explained variance"),
    "projection.png": ("sentence", plot_projection, "2-D projection of the sentence vectors"),
    "token_projection.png": ("word", plot_token_projection, "2-D projection of the token embeddings by frequency rank"),
    "token_norms.png": ("word", plot_token_norms, "Token embedding norm by frequency rank"),
}


# =========================================================================== the report folder


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(float(obj)) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _markdown_report(report: Mapping[str, Any]) -> str:
    meta = report.get("meta", {})
    out = ["# Anisotropy report", ""]
    for key, label in (("corpus", "Corpus"), ("encoder", "Encoder"), ("created", "Created")):
        if meta.get(key):
            out.append(f"- {label}: {meta[key]}")
    for name, desc in (meta.get("transforms") or {}).items():
        out.append(f"- Transform `{name}`: {desc}")
    out.append("")
    if report.get("notes"):
        out += ["## Notes", ""] + [f"- {n}" for n in report["notes"]] + [""]
    sentence = report.get("sentence")
    if sentence:
        out += [
            "## Sentence level",
            "",
            f"{sentence['n_sentences']} sentences, {sentence['dim']} dimensions; {sentence['n_pairs']} random pairs "
            f"(seed {sentence['seed']}), the same pairs for every column.",
            "",
            _markdown(*_sentence_rows(sentence)),
            "",
            "Average cosine near 0, I(W) and IsoScore near 1 and many dimensions for 90% of the variance "
            "mean isotropic vectors; an average cosine well above 0 is the cone effect.",
            "",
        ]
    word = report.get("word")
    if word:
        out += [
            "## Word level (input token embeddings)",
            "",
            f"Model {word['model']}: {word['ranked_tokens']} tokens ranked ({word['special_tokens_excluded']} special tokens "
            f"excluded), {word['seen_tokens']} of them seen in the corpus ({word['corpus_tokens']} token occurrences). "
            "Ranks are by frequency in **this corpus** (the BERT-flow paper ranks by the pre-training corpus); "
            + (
                "tokens that never occur come last, in a seeded random order."
                if word["unseen"] == "last"
                else "tokens that never occur are left out."
            )
            + f" kNN: exact l2 neighbours among the ranked tokens (faiss), averaged over at most {word['max_queries'] or 'all'} "
            "tokens per bucket.",
            "",
            _markdown(*_word_rows(word)),
            "",
            f"Average cosine of {word['average_cosine']['n_pairs']} random token pairs: "
            f"{_fmt(word['average_cosine']['mean'])} (std {_fmt(word['average_cosine']['std'])}); "
            f"I(W) {_fmt(word['partition_isotropy'])}; IsoScore {_fmt(word['isoscore'])}.",
            "",
        ]
        if word.get("top_tokens"):
            out += ["Most frequent tokens: " + ", ".join(f"`{t['token']}` ({t['count']})" for t in word["top_tokens"]), ""]
    figs = report.get("figures") or []
    if figs:
        out += ["## Figures", ""]
        for f in figs:
            out += [f"### {FIGURES[f][2]}", "", f"![{FIGURES[f][2]}]({f})", ""]
    return "\n".join(out).rstrip() + "\n"


def write_report(out_dir: str | os.PathLike, report: Mapping[str, Any]) -> Path:
    """Write ``report.json``, one PNG per figure and ``report.md`` (embedding them) into ``out_dir``.

    ``report`` holds ``"sentence"`` (from :func:`sentence_report`) and/or ``"word"``
    (from :func:`word_report`), optionally ``"meta"`` and ``"notes"``. The folder is
    written atomically: it appears complete or not at all (an old one is replaced).
    """
    report = dict(report)
    figures = [f for f, (part, _, _) in FIGURES.items() if report.get(part)]
    report["figures"] = figures
    with atomic_dir(out_dir) as tmp:
        for name in figures:
            part, draw, _ = FIGURES[name]
            fig = draw(report[part])
            fig.savefig(tmp / name, dpi=100)
        import json

        (tmp / "report.json").write_text(json.dumps(_jsonable(report), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        (tmp / "report.md").write_text(_markdown_report(report), encoding="utf-8")
    return Path(out_dir)


def check_report_dir(out_dir: str | os.PathLike) -> Path:
    """Fail before any work when ``out_dir`` cannot be written (its parent must be a writable folder)."""
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise IsotropyError(f"{path} exists and is not a folder; choose another report folder")
    check_output_path(path)
    parent = path.parent if str(path.parent) else Path(".")
    try:  # os.access says yes to root on read-only mounts; an actual write does not lie
        tempfile.TemporaryDirectory(prefix=f".{path.name}.", suffix=".probe", dir=parent).cleanup()
    except OSError as exc:
        raise IsotropyError(f"output folder {parent} is not writable (for {path}): {exc.strerror or exc}") from None
    return path


def _note(notes: list[str], message: str, quiet: bool) -> None:
    notes.append(message)
    if not quiet:
        print(f"note: {message}", file=sys.stderr)


def _nonblank(sentences: Sequence[str], source: str) -> list[str]:
    kept = [s for s in sentences if isinstance(s, str) and s.strip()]
    if len(kept) < MIN_SENTENCES:
        raise IsotropyError(
            f"{source} has {len(kept)} non-empty line{'s' if len(kept) != 1 else ''}; the analysis needs at least "
            f"{MIN_SENTENCES} (random pairs, a covariance spectrum and a 2-D projection)"
        )
    return kept


def _load_transforms(transforms: Any) -> dict[str, Any]:
    """A mapping name -> transform/path, or a sequence of folders (named after the folder)."""
    from ._io import load_transform

    if transforms is None:
        return {}
    items = transforms.items() if isinstance(transforms, Mapping) else [(Path(p).name or str(p), p) for p in transforms]
    out: dict[str, Any] = {}
    for name, t in items:
        name = str(name)
        base, i = name, 2
        while name in out or name == RAW:
            name, i = f"{base}-{i}", i + 1
        out[name] = load_transform(t) if isinstance(t, (str, os.PathLike)) else t
    return out


def _describe_transform(t: Any) -> str:
    if isinstance(t, np.ndarray):
        return f"precomputed vectors {t.shape}"
    describe = getattr(t, "describe", None)
    try:
        return str(describe()) if callable(describe) else repr(t)
    except Exception:  # a description is cosmetic; never fail the report over it
        return type(t).__name__


def analyze(
    sentences: Sequence[str],
    encoder: Any = None,
    transforms: Any = None,
    out_dir: str | os.PathLike | None = None,
    show_progress: bool | None = None,
    *,
    auto_whiten: bool = True,
    word_level: bool = True,
    n_pairs: int = DEFAULT_PAIRS,
    seed: int = DEFAULT_SEED,
    max_sentences: int | None = None,
    unseen_tokens: str = "last",
    max_queries: int | None = MAX_QUERIES,
    corpus_name: str | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Encode ``sentences``, compute the sentence- and word-level reports and write the folder.

    ``encoder``: an :class:`~isotropy.Encoder` (None: the default model).
    ``transforms``: ``{name: fitted transform or folder}`` or a list of folders; when
    none is given and ``auto_whiten`` is true, a whitening (Ledoit-Wolf shrinkage) fitted
    on these very vectors is shown as ``"auto-whitening"`` -- the "after" of an in-sample
    calibration. ``max_sentences`` encodes a seeded sample of that many lines (token
    frequencies still use every line). Notes (a skipped word-level part, few distinct
    tokens) go to the report and, unless ``quiet``, to stderr. Returns the report dict
    (as written to ``report.json``, plus ``"path"`` when ``out_dir`` is given).
    """
    if out_dir is not None:
        check_report_dir(out_dir)
    if isinstance(sentences, str):
        raise IsotropyError("sentences must be a list of strings, not one string")
    source = corpus_name or "the corpus"
    kept = _nonblank(list(sentences), source)
    if int(n_pairs) < 1:
        raise IsotropyError(f"the number of random pairs must be at least 1, got {n_pairs}")
    if unseen_tokens not in ("last", "drop"):
        raise IsotropyError(f"unseen tokens must be ranked 'last' or 'drop'ped, got {unseen_tokens!r}")
    sample = kept
    if max_sentences is not None:
        if int(max_sentences) < MIN_SENTENCES:
            raise IsotropyError(f"max_sentences must be at least {MIN_SENTENCES}, got {max_sentences}")
        if len(kept) > int(max_sentences):
            idx = np.sort(np.random.default_rng(seed).choice(len(kept), size=int(max_sentences), replace=False))
            sample = [kept[i] for i in idx]
    loaded = _load_transforms(transforms)
    if encoder is None:
        from .encoding import Encoder

        encoder = Encoder()
    timings: dict[str, float] = {}
    notes: list[str] = []
    t0 = time.perf_counter()
    vectors = encoder.encode(sample, show_progress=show_progress)
    timings["encode_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if not loaded and auto_whiten:
        from .whitening import Whitening

        loaded = {AUTO_WHITENING: Whitening(shrinkage="auto").fit(vectors)}
        _note(notes, "no transform given: 'auto-whitening' is a whitening fitted on these same sentences (in-sample)", True)
    sentence = sentence_report(vectors, loaded, n_pairs=int(n_pairs), seed=seed, show_progress=show_progress)
    timings["sentence_s"] = time.perf_counter() - t0

    word = None
    if word_level:
        t0 = time.perf_counter()
        try:
            word = word_report(
                encoder, kept, unseen=unseen_tokens, max_queries=max_queries, n_pairs=int(n_pairs), seed=seed,
                show_progress=show_progress,
            )
            for n in word.pop("notes", []):
                _note(notes, f"word level: {n}", quiet)
        except WordLevelUnavailable as exc:
            _note(notes, str(exc), quiet)
        timings["word_s"] = time.perf_counter() - t0

    describe = getattr(encoder, "describe", None)
    report: dict[str, Any] = {
        "meta": {
            "corpus": corpus_name,
            "lines_used": len(sample),
            "non_empty_lines": len(kept),
            "encoder": describe() if callable(describe) else type(encoder).__name__,
            "transforms": {name: _describe_transform(t) for name, t in loaded.items()},
            "auto_whitening": bool(AUTO_WHITENING in loaded and not transforms),
            "seed": int(seed),
            "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "timings": timings,
        },
        "notes": notes,
        "sentence": sentence,
        "word": word,
    }
    if out_dir is not None:
        t0 = time.perf_counter()
        write_report(out_dir, report)
        timings["write_s"] = time.perf_counter() - t0
        report["figures"] = [f for f, (part, _, _) in FIGURES.items() if report.get(part)]
        report["path"] = str(out_dir)
    return _jsonable(report)


def analyze_file(
    corpus: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    model: str | os.PathLike | None = None,
    pooling: str | None = None,
    max_length: int | None = None,
    batch_size: int = 64,
    transforms: Sequence[str | os.PathLike] = (),
    **kwargs: Any,
) -> dict[str, Any]:
    """The ``isotropy analyze`` command: validate everything cheap first, then load the model and run :func:`analyze`."""
    from .data import read_sentences

    check_report_dir(out_dir)
    sentences = read_sentences(corpus)
    _nonblank(sentences, str(corpus))
    loaded = _load_transforms(list(transforms)) if transforms else None
    from .encoding import Encoder

    encoder = Encoder(model, pooling=pooling, max_length=max_length, batch_size=batch_size)
    return analyze(sentences, encoder, loaded, out_dir, corpus_name=str(corpus), **kwargs)
