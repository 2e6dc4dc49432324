"""The index: sentences -> encoder -> transform -> L2-normalise -> faiss; the add and search path.

The faiss kinds are in :mod:`.kinds`, the saved folder in :mod:`.store`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_matrix, check_sentences
from .._progress import ProgressBar
from ..encoders import Encoder
from ..errors import IsotropyError
from ..storage.integrity import check_encoder_of, provenance_of_record
from ..transforms import TRANSFORMS, load_transform
from ..transforms.base import Transform
from .kinds import describe_kind, faiss_module, new_faiss, set_query_params
from .pq import rerank
from .results import SearchResults
from .spec import INDEX_KINDS, IndexSpec, check_params
from .store import KIND, load_index, save_index

__all__ = ["Index", "INDEX_KINDS", "KIND", "index_vectors"]

ADD_CHUNK = 8192  # rows handed to faiss at a time (progress granularity; memory stays bounded)


def _is_fitted(transform: Any) -> bool:
    return transform.__sklearn_is_fitted__()


def index_vectors(raw: np.ndarray, transform: Any = None, *, own: bool = False) -> np.ndarray:
    """Encoder output -> the vectors an index stores and searches with: ``transform`` (a fitted one, or None),
    float32, L2-normalised, C-contiguous; never the caller's array (faiss normalises in place) unless ``own`` (the
    caller hands it over: a worker's freshly read shard). The one apply path: :meth:`Index.add` and search, and
    each worker of a Dask build (:mod:`isotropy.distributed.index_build`)."""
    X = np.asarray(raw, dtype=np.float32)
    if transform is not None:
        X = np.asarray(transform.transform(X), dtype=np.float32)
    if not own and (X is raw or np.shares_memory(X, raw)):
        X = X.copy()
    X = np.ascontiguousarray(X, dtype=np.float32)
    if X.shape[0]:
        faiss_module().normalize_L2(X)
    return X


class Index:
    """A searchable collection of sentences: encoder -> transform -> L2-normalise -> faiss.

    Parameters
    ----------
    encoder : Encoder or None
        Encodes documents and queries alike (``None``: the embedded default model,
        its own pooling and max_length).
    transform : None, a fitted transform, a transform folder, or an unfitted transform
        ``None`` indexes raw vectors. A fitted transform (:mod:`isotropy.transforms`,
        or the folder of one) is applied as is. An unfitted
        one is fitted on the vectors of the first :meth:`add` (the corpus) and then
        kept fixed, so later additions and queries share its space.
    kind : "flat", "hnsw", "ivf", "ivfpq" or "opq"
        Exact inner-product search, or one of faiss's approximate indexes (``ivfpq``, ``opq``:
        compressed codes, :mod:`isotropy.search.pq`).
    m, ef_construction, ef_search : int
        HNSW links per node, build-time and query-time beam widths.
    nlist, nprobe : int
        IVF lists (``None``: chosen from the first batch, see the module docs) and
        lists visited per query.
    bytes_per_vector, keep_vectors, rerank : int, bool, int
        ``ivfpq``/``opq``: the code size (one 8-bit sub-quantiser per byte; ``None``: 32, or what fits the
        dimension, :func:`isotropy.search.pq.default_bytes`), whether the exact
        (calibrated, normalised) vectors are kept beside the codes, and how many candidates a
        search re-scores with them (0: none).

    Build one with :meth:`build` (or construct and :meth:`add`), query with
    :meth:`search`, persist with :meth:`save` / :meth:`load`.
    """

    def __init__(
        self,
        encoder: Any = None,
        transform: Any = None,
        kind: str = "flat",
        *,
        m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 64,
        nlist: int | None = None,
        nprobe: int = 16,
        bytes_per_vector: int | None = None,
        keep_vectors: bool = False,
        rerank: int = 0,
        allow_other_encoder: bool = False,
    ) -> None:
        params = check_params(
            kind,
            m=m,
            ef_construction=ef_construction,
            ef_search=ef_search,
            nlist=nlist,
            nprobe=nprobe,
            bytes_per_vector=bytes_per_vector,
            keep_vectors=keep_vectors,
            rerank=rerank,
        )
        self._setup(encoder, transform, kind, params, allow_other_encoder)

    @classmethod
    def from_spec(cls, encoder: Any, transform: Any, spec: IndexSpec) -> Index:
        """An empty index of ``spec``'s kind and parameters (checked once, when the spec was made) over ``encoder``
        and ``transform`` (as the constructor takes them)."""
        index = cls.__new__(cls)
        index._setup(encoder, transform, spec.kind, spec.params, spec.allow_other_encoder)
        return index

    def _setup(self, encoder: Any, transform: Any, kind: str, params: dict[str, Any], allow_other_encoder: bool) -> None:
        if encoder is None:
            encoder = Encoder()
        if isinstance(transform, (str, os.PathLike)):
            transform = load_transform(transform)
        if transform is not None and not isinstance(transform, Transform):
            raise IsotropyError(
                f"transform must be an isotropy transform ({', '.join(TRANSFORMS)}) or the folder of one, not {type(transform).__name__}"
            )
        if transform is not None and _is_fitted(transform) and transform.n_features_in_ != encoder.dim:
            raise IsotropyError(
                f"the transform was fitted on {transform.n_features_in_}-dimensional vectors but the encoder "
                f"({encoder.describe()}) gives {encoder.dim}"
            )
        check_encoder_of(transform, encoder, "the transform", f"the index's encoder ({encoder.describe()})", allow_other_encoder)
        self.allow_other_encoder = bool(allow_other_encoder)
        self.encoder = encoder
        self.transform = transform
        self.kind = kind
        self.params = params
        self.sentences: list[str] = []
        self.warnings: list[str] = []  # one line each, e.g. a default transform skipped on a tiny corpus
        self.selection: dict[str, Any] | None = None  # --method auto: the evidence (Selection.to_dict()), saved in config
        self._index = None  # the faiss index, created by the first add
        self._exact: np.ndarray | None = None  # keep_vectors: the exact vectors (memory-mapped once loaded)
        self._read_only: str | None = None  # why the loaded faiss index takes no additions (on-disk lists)
        self._source: tuple[Path, str | None] | None = None  # (folder, config digest) when loaded
        self._mapped: Any = None  # the memory-mapped files of a loaded index, checked before each search (mapped.py)

    # ------------------------------------------------------------------ construction

    @classmethod
    def build(
        cls,
        sentences: Sequence[str],
        model: str | os.PathLike | None = None,
        pooling: str | None = None,
        max_length: int | None = None,
        transform: Any = None,
        kind: str = "flat",
        *,
        batch_size: int = 64,
        device: str | None = None,
        show_progress: bool | None = None,
        **params: Any,
    ) -> Index:
        """Encode ``sentences`` and index them (see the class docs for ``transform`` and ``params``)."""
        sentences = check_sentences(sentences, "sentence")
        if not sentences:
            raise IsotropyError("the corpus is empty: there is nothing to index")
        index = cls(
            Encoder(model, pooling=pooling, max_length=max_length, batch_size=batch_size, device=device),
            transform,
            kind,
            **params,
        )
        index.add(sentences, show_progress=show_progress)
        return index

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def dim(self) -> int | None:
        """Dimension of the indexed vectors (None before the first add)."""
        return None if self._index is None else int(self._index.d)

    def describe(self) -> str:
        t = (
            "raw vectors"
            if self.transform is None
            else (self.transform.describe() if _is_fitted(self.transform) else type(self.transform).__name__)
        )
        kind = describe_kind(self.kind, self.params)
        return f"{len(self)} sentences, {self.dim} dims, {kind}; {self.encoder.describe()}; {t}"

    def __repr__(self) -> str:
        return f"Index(kind={self.kind!r}, rows={len(self)}, dim={self.dim})"

    # ------------------------------------------------------------------ vectors

    def _apply(self, raw: np.ndarray, transform: Any = None) -> np.ndarray:
        return index_vectors(raw, self.transform if transform is None else transform)

    def embed(self, sentences: Sequence[str] | str, show_progress: bool | None = None) -> np.ndarray:
        """The vectors this index stores or searches with: encode -> transform -> L2-normalise (float32)."""
        sentences = check_sentences(sentences, "sentence")
        self._require_transform()
        return self._apply(self.encoder.encode(sentences, show_progress=show_progress))

    def _require_transform(self) -> None:
        if self.transform is not None and not _is_fitted(self.transform):
            raise IsotropyError("the index's transform is fitted on the first sentences added; add a corpus first")

    def add(self, sentences: Sequence[str] | str, show_progress: bool | None = None) -> Index:
        """Encode and add sentences; they get the ids ``len(self)``, ``len(self) + 1``, ...

        The first call fits an unfitted transform on these sentences and, for ``ivf``,
        trains the index on them.
        """
        sentences = check_sentences(sentences, "sentence")
        if not sentences:
            if not self.sentences:
                raise IsotropyError("the corpus is empty: there is nothing to index")
            return self
        raw = self.encoder.encode(sentences, show_progress=show_progress)
        return self.add_encoded(sentences, raw, show_progress=show_progress)

    def add_encoded(self, sentences: Sequence[str], raw: np.ndarray, show_progress: bool | None = None) -> Index:
        """Add sentences whose encoder output is already at hand (e.g. from
        :func:`isotropy.evaluation.encode_cached` with ``self.encoder``).

        ``raw`` must be ``self.encoder``'s output for exactly these sentences (before
        any transform); only its shape can be checked here, so prefer :meth:`add`.
        """
        sentences = check_sentences(sentences, "sentence")
        raw = check_matrix(raw, "raw vectors", expected_dim=self.encoder.dim, dtype=np.float32)
        if raw.shape[0] != len(sentences):
            raise IsotropyError(f"{len(sentences)} sentences but {raw.shape[0]} vector rows")
        if not sentences:
            if not self.sentences:
                raise IsotropyError("the corpus is empty: there is nothing to index")
            return self
        transform = self.transform
        if transform is not None and not _is_fitted(transform):
            if len(sentences) < 2:
                raise IsotropyError(
                    f"cannot fit the {type(transform).__name__} on a corpus of {len(sentences)} sentence; "
                    "index more sentences, pass an already fitted transform, or index raw vectors (--no-whiten)"
                )
            # a copy is fitted and attached only once the index exists: a failure leaves this index as it was
            transform = type(transform)(**transform.get_params()).fit(raw)
            transform.provenance = provenance_of_record(self.encoder.record(), self.encoder.dim)
        if self._read_only:
            raise IsotropyError(self._read_only)
        X = self._apply(raw, transform)
        index = new_faiss(self.kind, self.params, X) if self._index is None else self._index
        if X.shape[1] != index.d:  # pragma: no cover - guarded by construction
            raise IsotropyError(f"vectors have {X.shape[1]} dimensions, the index {index.d}")
        self.transform, self._index = transform, index
        steps = list(range(0, X.shape[0], ADD_CHUNK))
        with ProgressBar(len(steps), show_progress if X.shape[0] > ADD_CHUNK else False, f"indexing ({self.kind})") as bar:
            for start in steps:
                self._index.add(X[start : start + ADD_CHUNK])
                bar.advance()
        if self.params.get("keep_vectors"):
            self._exact = X if self._exact is None else np.concatenate([np.asarray(self._exact), X])
        self.sentences.extend(sentences)
        return self

    # ------------------------------------------------------------------ search

    def search(self, queries: Sequence[str] | str, k: int = 10, show_progress: bool | None = None) -> SearchResults:
        """The ``k`` most similar indexed sentences for each query (cosine, best first).

        Queries go through the same encoder, pooling, max_length, transform and
        normalisation as the corpus. With ``k`` larger than the index, every
        sentence is returned and ``warning`` says so.
        """
        queries = check_sentences(queries, "query")
        blank = next((i for i, q in enumerate(queries) if not q.strip()), None)
        if blank is not None:  # its vector would be a constant: hits ranked by nothing (#31, U32)
            raise IsotropyError(f"query {blank + 1} of {len(queries)} is empty: there is nothing to search for")
        self._check_k(k)
        if self._index is None:
            raise IsotropyError("the index is empty: add sentences before searching")
        Q = self.embed(queries, show_progress=show_progress) if queries else np.zeros((0, self.dim), np.float32)
        res = self.search_vectors(Q, k)
        res.queries = queries
        coverage = getattr(self.encoder, "coverage", None)  # a static model's out-of-vocabulary count
        unknown = coverage.warning("queries") if coverage is not None else None
        if unknown:  # a zero vector (then transformed) ranks the index by nothing meaningful (#31, U40)
            res.warning = f"{res.warning}; {unknown}" if res.warning else unknown
        return res

    @staticmethod
    def _check_k(k: Any) -> None:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise IsotropyError(f"k must be a positive integer, got {k!r}")

    def check_mapped(self) -> None:
        """IsotropyError (one line) when a memory-mapped file of this loaded index was cut short on disk since
        it was loaded: reading it would kill the process (SIGBUS). One ``fstat`` a file; :meth:`search` calls it."""
        if self._mapped is not None:
            self._mapped.check()

    def search_vectors(self, vectors: np.ndarray, k: int = 10) -> SearchResults:
        """Search with vectors already in the index's space (from :meth:`embed`)."""
        self._check_k(k)
        if self._index is None:
            raise IsotropyError("the index is empty: add sentences before searching")
        self.check_mapped()
        Q = np.ascontiguousarray(check_matrix(vectors, "query vectors", expected_dim=self.dim, dtype=np.float32))
        n = len(self.sentences)
        kk = min(int(k), n)
        deep = self._exact is not None and self.params.get("rerank", 0) > 0
        if Q.shape[0]:
            try:
                scores, ids = self._index.search(Q, min(max(kk, self.params["rerank"]), n) if deep else kk)
            finally:  # no thread of the search reads a mapped file after it (mapped.py)
                if self._mapped is not None:
                    self._mapped.settle(self._index)
            if deep:  # the candidates re-scored with the exact vectors
                scores, ids = rerank(self._exact, Q, scores, ids, kk)
        else:
            scores, ids = np.zeros((0, kk), np.float32), np.zeros((0, kk), np.int64)
        ids = ids.astype(np.int64, copy=False)
        scores = np.where(ids < 0, np.nan, scores).astype(np.float32)
        texts = [[self.sentences[j] for j in row if j >= 0] for row in ids]
        return SearchResults(ids=ids, scores=scores, texts=texts, k=kk, warning=self._short_warning(k, kk, ids))

    def _short_warning(self, k: int, kk: int, ids: np.ndarray) -> str | None:
        """What a search that returned fewer than ``k`` hits says: the index is smaller than ``k``, and (both
        may hold) an approximate index found fewer than the ``kk`` it was asked for."""
        n, said = len(self.sentences), []
        short = int((ids < 0).any(axis=1).sum()) if ids.size else 0
        if kk < k:
            said.append(
                f"k={k} is larger than the index, which holds {n} sentences: "
                + (f"searching for all {n}" if short else f"returning all {n}")
            )
        if short:
            said.append(
                f"the {self.kind} index found fewer than {kk} hits for {short} of {ids.shape[0]} queries "
                f"(raise {'ef_search' if self.kind == 'hnsw' else 'nprobe'})"
            )
        return "; ".join(said) or None

    def set_search_params(self, ef_search: int | None = None, nprobe: int | None = None, rerank: int | None = None) -> Index:
        """Change the query-time accuracy/speed knobs of an approximate index (``rerank``: ``ivfpq``/``opq``
        with kept vectors)."""
        set_query_params(self.params, self._index, self.kind, ef_search, nprobe, rerank)
        return self

    # ------------------------------------------------------------------ persistence (store.py)

    save = save_index  # Index.save(path, *, force=False): the folder written atomically
    load = classmethod(load_index)  # Index.load(path, *, ef_search, nprobe, rerank, batch_size, device, verify)
