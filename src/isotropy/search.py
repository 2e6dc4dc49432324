"""Semantic search over calibrated sentence vectors: an :class:`Index` on a faiss index.

Pipeline, identical for documents and queries: encode (the index's own
:class:`~isotropy.encoding.Encoder`) -> optional transform (a fitted whitening or
flow, or one fitted on the corpus itself) -> L2-normalise -> faiss inner-product
index, so scores are cosine similarities in the transformed space.

Index kinds (faiss does the work; this module adds the sentence store, the
encoder/transform bookkeeping and the save format):

* ``flat`` (default): exact search, ``faiss.IndexFlatIP``.
* ``hnsw``: approximate, ``faiss.IndexHNSWFlat`` with inner product; ``m`` links
  per node, ``ef_construction`` (build quality), ``ef_search`` (query quality/speed).
* ``ivf``: approximate, ``faiss.IndexIVFFlat`` with inner product, for large
  corpora; ``nlist`` lists, trained (k-means) on the first batch added -- ``None``
  picks ``min(4 sqrt(n), n / 39)`` (faiss wants >= 39 training points per list);
  ``nprobe`` lists visited per query.

Saved index (a folder, written to a temporary sibling and renamed into place, so
an interrupted build or ``add`` never leaves a half index that a search would load):

* ``config.json`` -- library tag, ``kind: "index"``, ``format_version`` (read back
  with :func:`isotropy._io.read_config`), the encoder (model, weights fingerprint,
  pooling, max_length), the transform (kind, subfolder, digest of its files), the
  index kind and parameters, the dimension, the row count, and ``encoding_key``,
  a digest of everything that determines how a sentence becomes a vector;
* ``state.safetensors`` -- the row count (cross-checked on load);
* ``index.faiss`` -- ``faiss.write_index`` output;
* ``sentences.jsonl`` -- one JSON string per line (a sentence given through the API
  may contain newlines), row ``i`` = id ``i``;
* ``transform/`` -- the fitted transform's own saved folder (absent for raw vectors).

On load the encoder is rebuilt from the recorded settings and its weights
fingerprint, and the recomputed ``encoding_key``, must match the recorded ones:
a config edited to point at another model, pooling, max_length or transform is
refused with one clear error, so queries are always encoded like the corpus.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._io import (
    CONFIG_NAME,
    FORMAT_VERSION,
    LIBRARY_TAG,
    STATE_NAME,
    IsotropyError,
    ProgressBar,
    artefact_lock,
    atomic_dir,
    check_matrix,
    check_output,
    load_state,
    read_config,
)
from .encoding import check_sentences

__all__ = ["Index", "SearchResults", "INDEX_KINDS", "DEFAULT_WHITEN_K"]

KIND = "index"
INDEX_VERSION = 1  # layout of this module's folder; bumped on incompatible change
INDEX_KINDS = ("flat", "hnsw", "ivf")
INDEX_FILE = "index.faiss"
SENTENCES_FILE = "sentences.jsonl"
TRANSFORM_DIR = "transform"
ADD_CHUNK = 8192  # rows handed to faiss at a time (progress granularity; memory stays bounded)
# Default for `isotropy index build`: soft whitening (power 0.5) to 128 dims, fitted on the
# corpus; see build_index_file, bench/search.py and docs/BENCHMARKS.md section `search`.
DEFAULT_WHITEN_K = 128
DEFAULT_WHITEN_POWER = 0.5


def _faiss():
    import faiss

    return faiss


def _default_model_folder() -> Path | None:
    from .encoding import default_model_path

    try:
        return default_model_path()
    except IsotropyError:  # pragma: no cover - the default model is a core dependency
        return None


def _is_fitted(transform: Any) -> bool:
    # Whitening and Flow raise NotFittedError (an AttributeError) before fit, so hasattr is False.
    try:
        return getattr(transform, "n_features_in_", None) is not None
    except Exception:
        return False


def _files_digest(folder: Path) -> str:
    """Digest of every file under ``folder`` (names and bytes, sorted), for the encoding key."""
    h = hashlib.blake2b(digest_size=16)
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        rel = p.relative_to(folder).as_posix()
        h.update(rel.encode() + b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()


def _encoding_key(fingerprint: str, pooling: str, max_length: int, transform_digest: str | None) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([fingerprint, pooling, int(max_length), transform_digest]).encode())
    return h.hexdigest()


# --------------------------------------------------------------------------- results


@dataclass
class SearchResults:
    """Results of :meth:`Index.search` for ``n`` queries.

    ``ids`` (n x k int64) and ``scores`` (n x k float32, cosine in the index's space,
    best first) are padded with ``-1`` / ``nan`` where fewer than ``k`` hits exist
    (k larger than the index, or an approximate index that found fewer);
    ``texts[i]`` holds query ``i``'s hit sentences without padding. ``warning`` is
    set (one line) when fewer hits than asked for could be returned.
    """

    ids: np.ndarray
    scores: np.ndarray
    texts: list[list[str]]
    queries: list[str] | None = None
    k: int = 10
    warning: str | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def hits(self, i: int) -> list[dict[str, Any]]:
        """Query ``i``'s hits as ``[{"rank", "id", "score", "text"}, ...]``."""
        out = []
        for rank, (j, s) in enumerate(zip(self.ids[i], self.scores[i]), start=1):
            if j < 0:
                break
            out.append({"rank": rank, "id": int(j), "score": float(s), "text": self.texts[i][rank - 1]})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "warning": self.warning,
            "results": [
                {"query": self.queries[i] if self.queries is not None else None, "hits": self.hits(i)}
                for i in range(len(self))
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)


# --------------------------------------------------------------------------- the index


class Index:
    """A searchable collection of sentences: encoder -> transform -> L2-normalise -> faiss.

    Parameters
    ----------
    encoder : Encoder or None
        Encodes documents and queries alike (``None``: the embedded default model,
        its own pooling and max_length).
    transform : None, a fitted transform, a transform folder, or an unfitted transform
        ``None`` indexes raw vectors. A fitted :class:`~isotropy.Whitening` /
        :class:`~isotropy.Flow` (or the folder of one) is applied as is. An unfitted
        one is fitted on the vectors of the first :meth:`add` (the corpus) and then
        kept fixed, so later additions and queries share its space.
    kind : "flat", "hnsw" or "ivf"
        Exact inner-product search, or one of faiss's approximate indexes.
    m, ef_construction, ef_search : int
        HNSW links per node, build-time and query-time beam widths.
    nlist, nprobe : int
        IVF lists (``None``: chosen from the first batch, see the module docs) and
        lists visited per query.

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
    ) -> None:
        if kind not in INDEX_KINDS:
            raise IsotropyError(f"unknown index kind {kind!r}; valid kinds: {', '.join(INDEX_KINDS)}")
        for name, value, low in (("m", m, 2), ("ef_construction", ef_construction, 1), ("ef_search", ef_search, 1),
                                 ("nprobe", nprobe, 1)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise IsotropyError(f"{name} must be an integer >= {low}, got {value!r}")
        if nlist is not None and (isinstance(nlist, bool) or not isinstance(nlist, (int, np.integer)) or nlist < 1):
            raise IsotropyError(f"nlist must be a positive integer or None, got {nlist!r}")
        if encoder is None:
            from .encoding import Encoder

            encoder = Encoder()
        if isinstance(transform, (str, os.PathLike)):
            from ._io import load_transform

            transform = load_transform(transform)
        if transform is not None and not hasattr(transform, "transform"):
            raise IsotropyError(f"transform must be a Whitening, a Flow or a folder of one, not {type(transform).__name__}")
        if transform is not None and _is_fitted(transform) and transform.n_features_in_ != encoder.dim:
            raise IsotropyError(
                f"the transform was fitted on {transform.n_features_in_}-dimensional vectors but the encoder "
                f"({encoder.describe()}) gives {encoder.dim}"
            )
        self.encoder = encoder
        self.transform = transform
        self.kind = kind
        self.params = {"m": int(m), "ef_construction": int(ef_construction), "ef_search": int(ef_search),
                       "nlist": None if nlist is None else int(nlist), "nprobe": int(nprobe)}
        self.sentences: list[str] = []
        self.warnings: list[str] = []  # one line each, e.g. a default transform skipped on a tiny corpus
        self._index = None  # the faiss index, created by the first add
        self._source: tuple[Path, str | None] | None = None  # (folder, config digest) when loaded

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
    ) -> "Index":
        """Encode ``sentences`` and index them (see the class docs for ``transform`` and ``params``)."""
        from .encoding import Encoder

        sentences = check_sentences(sentences, "sentence")
        if not sentences:
            raise IsotropyError("the corpus is empty: there is nothing to index")
        index = cls(Encoder(model, pooling=pooling, max_length=max_length, batch_size=batch_size, device=device),
                    transform, kind, **params)
        index.add(sentences, show_progress=show_progress)
        return index

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def dim(self) -> int | None:
        """Dimension of the indexed vectors (None before the first add)."""
        return None if self._index is None else int(self._index.d)

    def describe(self) -> str:
        t = "raw vectors" if self.transform is None else (
            self.transform.describe() if _is_fitted(self.transform) and hasattr(self.transform, "describe")
            else type(self.transform).__name__)
        p = self.params
        kind = {"flat": "flat (exact)",
                "hnsw": f"hnsw (m {p['m']}, ef_construction {p['ef_construction']}, ef_search {p['ef_search']})",
                "ivf": f"ivf (nlist {p['nlist']}, nprobe {p['nprobe']})"}[self.kind]
        return f"{len(self)} sentences, {self.dim} dims, {kind}; {self.encoder.describe()}; {t}"

    def __repr__(self) -> str:
        return f"Index(kind={self.kind!r}, rows={len(self)}, dim={self.dim})"

    # ------------------------------------------------------------------ vectors

    def _apply(self, raw: np.ndarray) -> np.ndarray:
        X = np.asarray(raw, dtype=np.float32)
        if self.transform is not None:
            X = np.asarray(self.transform.transform(X), dtype=np.float32)
        X = np.ascontiguousarray(X, dtype=np.float32)
        if X.shape[0]:
            _faiss().normalize_L2(X)
        return X

    def embed(self, sentences: Sequence[str] | str, show_progress: bool | None = None) -> np.ndarray:
        """The vectors this index stores or searches with: encode -> transform -> L2-normalise (float32)."""
        sentences = check_sentences(sentences, "sentence")
        self._require_transform()
        return self._apply(self.encoder.encode(sentences, show_progress=show_progress))

    def _require_transform(self) -> None:
        if self.transform is not None and not _is_fitted(self.transform):
            raise IsotropyError("the index's transform is fitted on the first sentences added; add a corpus first")

    def _new_faiss(self, X: np.ndarray):
        faiss = _faiss()
        n, d = X.shape
        p = self.params
        if self.kind == "flat":
            return faiss.IndexFlatIP(d)
        if self.kind == "hnsw":
            idx = faiss.IndexHNSWFlat(d, p["m"], faiss.METRIC_INNER_PRODUCT)
            idx.hnsw.efConstruction = p["ef_construction"]
            idx.hnsw.efSearch = p["ef_search"]
            return idx
        nlist = p["nlist"]
        if nlist is None:
            # faiss's k-means wants >= 39 points per centroid; 4 sqrt(n) is the usual rule of thumb.
            nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))
            p["nlist"] = nlist
        if n < nlist:
            raise IsotropyError(
                f"an ivf index with nlist={nlist} is trained on the first batch, which has only {n} sentences; "
                f"add at least {nlist} sentences first, lower nlist, or use kind 'flat' or 'hnsw'"
            )
        quantizer = faiss.IndexFlatIP(d)
        idx = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
        idx.cp.verbose = False
        idx.train(X)
        idx.nprobe = p["nprobe"]
        return idx  # faiss's Python wrapper keeps `quantizer` alive as long as `idx`

    def add(self, sentences: Sequence[str] | str, show_progress: bool | None = None) -> "Index":
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

    def add_encoded(self, sentences: Sequence[str], raw: np.ndarray, show_progress: bool | None = None) -> "Index":
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
        transform_fitted_here = False
        if self.transform is not None and not _is_fitted(self.transform):
            if len(sentences) < 2:
                raise IsotropyError(
                    f"cannot fit the {type(self.transform).__name__} on a corpus of {len(sentences)} sentence; "
                    "index more sentences, pass an already fitted transform, or index raw vectors (--no-whiten)"
                )
            self.transform.fit(raw)
            transform_fitted_here = True
        try:
            X = self._apply(raw)
            if self._index is None:
                self._index = self._new_faiss(X)
            elif X.shape[1] != self._index.d:  # pragma: no cover - guarded by construction
                raise IsotropyError(f"vectors have {X.shape[1]} dimensions, the index {self._index.d}")
        except BaseException:
            if transform_fitted_here and self._index is None:
                # leave the index as it was: an unfitted transform is fitted again by the next add
                for attr in ("moments_", "_solution_cache"):
                    self.transform.__dict__.pop(attr, None)
            raise
        steps = list(range(0, X.shape[0], ADD_CHUNK))
        with ProgressBar(len(steps), show_progress if X.shape[0] > ADD_CHUNK else False, f"indexing ({self.kind})") as bar:
            for start in steps:
                self._index.add(X[start : start + ADD_CHUNK])
                bar.advance()
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
        self._check_k(k)
        if self._index is None:
            raise IsotropyError("the index is empty: add sentences before searching")
        Q = self.embed(queries, show_progress=show_progress) if queries else np.zeros((0, self.dim), np.float32)
        res = self.search_vectors(Q, k)
        res.queries = queries
        return res

    @staticmethod
    def _check_k(k: Any) -> None:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise IsotropyError(f"k must be a positive integer, got {k!r}")

    def search_vectors(self, vectors: np.ndarray, k: int = 10) -> SearchResults:
        """Search with vectors already in the index's space (from :meth:`embed`)."""
        self._check_k(k)
        if self._index is None:
            raise IsotropyError("the index is empty: add sentences before searching")
        Q = np.ascontiguousarray(check_matrix(vectors, "query vectors", expected_dim=self.dim, dtype=np.float32))
        n = len(self.sentences)
        kk = min(int(k), n)
        if Q.shape[0]:
            scores, ids = self._index.search(Q, kk)
        else:
            scores, ids = np.zeros((0, kk), np.float32), np.zeros((0, kk), np.int64)
        ids = ids.astype(np.int64, copy=False)
        scores = np.where(ids < 0, np.nan, scores).astype(np.float32)
        texts = [[self.sentences[j] for j in row if j >= 0] for row in ids]
        warning = None
        if kk < k:
            warning = f"k={k} is larger than the index, which holds {n} sentences: returning all {n}"
        elif Q.shape[0] and (ids < 0).any():
            short = int((ids < 0).any(axis=1).sum())
            warning = (f"the {self.kind} index found fewer than {k} hits for {short} of {Q.shape[0]} queries "
                       f"(raise {'nprobe' if self.kind == 'ivf' else 'ef_search'})")
        return SearchResults(ids=ids, scores=scores, texts=texts, k=kk, warning=warning)

    def set_search_params(self, ef_search: int | None = None, nprobe: int | None = None) -> "Index":
        """Change the query-time accuracy/speed knobs of an approximate index."""
        for name, value in (("ef_search", ef_search), ("nprobe", nprobe)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise IsotropyError(f"{name} must be a positive integer, got {value!r}")
            self.params[name] = int(value)
        if self._index is not None:
            if self.kind == "hnsw":
                self._index.hnsw.efSearch = self.params["ef_search"]
            elif self.kind == "ivf":
                self._index.nprobe = self.params["nprobe"]
        return self

    # ------------------------------------------------------------------ persistence

    def _encoder_record(self) -> dict[str, Any]:
        enc = self.encoder
        from .encoding import DEFAULT_MODEL_NAME

        default = _default_model_folder()
        is_default = enc.model_name == DEFAULT_MODEL_NAME and enc.folder is not None and default is not None \
            and Path(enc.folder).resolve() == default.resolve()
        return {
            "model": None if is_default else enc.model_name,
            "model_name": enc.model_name,
            "fingerprint": enc.fingerprint(),
            "pooling": enc.pooling,
            "max_length": int(enc.max_length),
            "dim": int(enc.dim),
        }

    def save(self, path: str | os.PathLike, *, force: bool = False) -> Path:
        """Write the index folder atomically (see the module docs for its layout).

        An existing ``path`` is replaced only when it holds an index (or is empty), unless
        ``force``. Saving back to the folder the index was loaded from fails, writing
        nothing, when another writer changed that folder in the meantime (so one of two
        concurrent ``add``s is never silently lost; ``isotropy index add`` also locks it).
        """
        from safetensors.numpy import save_file

        from . import __version__

        if self._index is None:
            raise IsotropyError("the index is empty: add sentences before saving")
        path = check_output(path, KIND, force=force)
        encoder = self._encoder_record()
        # Written by hand rather than with _io.save_state, which owns its whole folder:
        # here the transform's own saved folder must sit inside the same atomic rename.
        with atomic_dir(path, kind=KIND, force=force, check=lambda: self._check_unchanged(path)) as tmp:
            transform_cfg = None
            if self.transform is not None:
                self.transform.save(tmp / TRANSFORM_DIR)
                sub = json.loads((tmp / TRANSFORM_DIR / CONFIG_NAME).read_text(encoding="utf-8"))
                transform_cfg = {"kind": sub.get("kind"), "path": TRANSFORM_DIR,
                                 "digest": _files_digest(tmp / TRANSFORM_DIR)}
            _faiss().write_index(self._index, str(tmp / INDEX_FILE))
            with open(tmp / SENTENCES_FILE, "w", encoding="utf-8", newline="\n") as fh:
                for s in self.sentences:
                    fh.write(json.dumps(s, ensure_ascii=False) + "\n")
            save_file({"count": np.array([len(self.sentences)], dtype=np.int64)}, str(tmp / STATE_NAME))
            config = {
                "library": LIBRARY_TAG,
                "kind": KIND,
                "format_version": FORMAT_VERSION,
                "isotropy_version": __version__,
                "index_version": INDEX_VERSION,
                "encoder": encoder,
                "transform": transform_cfg,
                "index": {"kind": self.kind, "params": self.params, "file": INDEX_FILE},
                "dim": self.dim,
                "count": len(self.sentences),
                "sentences_file": SENTENCES_FILE,
                "generation": uuid.uuid4().hex,  # every save is a new version (see _check_unchanged)
                "encoding_key": _encoding_key(encoder["fingerprint"], encoder["pooling"], encoder["max_length"],
                                              None if transform_cfg is None else transform_cfg["digest"]),
            }
            (tmp / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        self._source = (path.resolve(), _config_digest(path))
        return path

    def _check_unchanged(self, path: Path) -> None:
        """Before replacing the folder this index was loaded from: is it still the version that was read?"""
        if self._source is None or self._source[0] != path.resolve():
            return
        if _config_digest(path) != self._source[1]:
            raise IsotropyError(
                f"{path} was changed by another writer since this index was loaded; nothing was written "
                f"(load it again and redo the change)"
            )

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        *,
        ef_search: int | None = None,
        nprobe: int | None = None,
        batch_size: int = 64,
        device: str | None = None,
    ) -> "Index":
        """Read a folder written by :meth:`save`, rebuilding and verifying its encoder and transform."""
        from .encoding import Encoder

        path = Path(path)
        cfg, arrays = load_state(path, KIND, required=("count",))
        if cfg.get("index_version") != INDEX_VERSION:
            raise IsotropyError(
                f"{path} was written by an incompatible isotropy ({cfg.get('isotropy_version', 'unknown')}, index "
                f"layout {cfg.get('index_version')!r}; this one reads {INDEX_VERSION}); rebuild the index"
            )
        try:
            enc_cfg = cfg["encoder"]
            idx_cfg = cfg["index"]
            kind, params = idx_cfg["kind"], dict(idx_cfg["params"])
            count, dim = int(cfg["count"]), int(cfg["dim"])
            model, fingerprint = enc_cfg["model"], str(enc_cfg["fingerprint"])
            pooling, max_length = enc_cfg["pooling"], int(enc_cfg["max_length"])
            t_cfg = cfg.get("transform")
            key = cfg["encoding_key"]
        except (KeyError, TypeError, ValueError) as exc:
            raise IsotropyError(f"{path}/{CONFIG_NAME} is incomplete or malformed ({exc!r}); rebuild the index") from None
        if int(np.asarray(arrays["count"]).reshape(-1)[0]) != count:
            raise IsotropyError(f"{path}: {STATE_NAME} and {CONFIG_NAME} disagree on the row count; rebuild the index")

        encoder = Encoder(model, pooling=pooling, max_length=max_length, batch_size=batch_size, device=device)
        if encoder.fingerprint() != fingerprint:
            raise IsotropyError(
                f"{path} was built with other model weights than {encoder.model_name} (fingerprint "
                f"{fingerprint[:12]}..., this model {encoder.fingerprint()[:12]}...); queries would not be encoded "
                f"like the corpus: restore its config.json or rebuild the index"
            )
        transform, digest = None, None
        if t_cfg is not None:
            from ._io import load_transform

            tdir = path / str(t_cfg.get("path", TRANSFORM_DIR))
            if not tdir.is_dir():
                raise IsotropyError(f"{path} is missing its transform folder {tdir.name}/; rebuild the index")
            digest = _files_digest(tdir)
            transform = load_transform(tdir)
        if _encoding_key(fingerprint, encoder.pooling, encoder.max_length, digest) != key:
            raise IsotropyError(
                f"{path}/{CONFIG_NAME} no longer matches the index: it names pooling {encoder.pooling!r}, "
                f"max_length {encoder.max_length} and "
                f"{'no transform' if t_cfg is None else 'transform ' + repr(t_cfg.get('path'))}, but the index "
                f"was built with other encoding settings (recorded encoding_key differs); queries would not be "
                f"encoded like the corpus: restore the original config/transform or rebuild the index"
            )
        try:
            index = cls(encoder, transform, kind, **{k: params[k] for k in ("m", "ef_construction", "ef_search", "nprobe")},
                        nlist=params.get("nlist"))
        except KeyError as exc:
            raise IsotropyError(f"{path}/{CONFIG_NAME} lacks the index parameter {exc}; rebuild the index") from None

        faiss = _faiss()
        file = path / str(idx_cfg.get("file", INDEX_FILE))
        if not file.is_file():
            raise IsotropyError(f"{path} is missing {file.name}; it is not a complete index")
        try:
            fidx = faiss.read_index(str(file))
        except RuntimeError as exc:
            raise IsotropyError(f"{file} is not a readable faiss index: {str(exc).strip().splitlines()[-1]}") from None
        sentences = _read_sentences_jsonl(path / str(cfg.get("sentences_file", SENTENCES_FILE)))
        if fidx.ntotal != count or len(sentences) != count or fidx.d != dim:
            raise IsotropyError(
                f"{path} is inconsistent: config says {count} rows x {dim} dims, the faiss index holds "
                f"{fidx.ntotal} x {fidx.d}, the sentence file {len(sentences)} sentences; rebuild the index"
            )
        out_dim = index._apply(np.zeros((1, encoder.dim), np.float32)).shape[1]
        if out_dim != dim:
            raise IsotropyError(f"{path}: the transform gives {out_dim} dims but the index holds {dim}; rebuild the index")
        index._index = fidx
        index.sentences = sentences
        index.set_search_params(ef_search=ef_search, nprobe=nprobe)
        index._source = (path.resolve(), _config_digest(path))
        return index


def _config_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256((path / CONFIG_NAME).read_bytes()).hexdigest()
    except OSError:
        return None


def _read_sentences_jsonl(file: Path) -> list[str]:
    if not file.is_file():
        raise IsotropyError(f"{file.parent} is missing {file.name}; it is not a complete index")
    out = []
    with open(file, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            try:
                s = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise IsotropyError(f"{file} line {number} is not a JSON string: {exc}") from None
            if not isinstance(s, str):
                raise IsotropyError(f"{file} line {number} is not a JSON string")
            out.append(s)
    return out


# --------------------------------------------------------------------------- the CLI's library calls


def default_whitening(dim: int, n_components: int | None = DEFAULT_WHITEN_K, power: float = DEFAULT_WHITEN_POWER):
    """The whitening ``isotropy index build`` fits on the corpus by default: ``n_components``
    (capped at the encoder's dimension), ``power``, Ledoit-Wolf shrinkage (so small corpora work)."""
    from .whitening import Whitening

    k = None if n_components is None else min(int(n_components), int(dim))
    return Whitening(n_components=k, power=power, shrinkage="auto")


def build_index_file(
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
    show_progress: bool | None = None,
    force: bool = False,
    **params: Any,
) -> Index:
    """``isotropy index build``: index a sentence file (one a line; id = line number - 1) into ``output``.

    Transform: ``transform`` (a fitted folder), else raw with ``no_whiten``, else a
    whitening fitted on the corpus itself with ``whiten`` components (default
    :data:`DEFAULT_WHITEN_K` = 128) and ``power`` (default :data:`DEFAULT_WHITEN_POWER` =
    0.5, soft whitening), with Ledoit-Wolf shrinkage. A whitening to k dimensions needs
    more than k sentences: on a smaller corpus the default falls back to raw vectors with
    a warning (in ``index.warnings``), and an explicit ``whiten`` is an error. The default
    comes from ``bench/search.py`` (docs/BENCHMARKS.md, section ``search``): on the STS retrieval task with the default model, soft whitening to
    128 dims kept recall@10 within 1 point of raw 384-dim vectors (89.4 vs 90.2) with a third
    of the index memory, where full whitening lost more (89.1 at 128 dims); this model is
    trained for similarity, so full whitening has little anisotropy left to fix.
    """
    from .data import read_sentences
    from .encoding import Encoder

    chosen = [name for name, on in (("--transform", transform is not None), ("--whiten/--power", whiten is not None or power is not None),
                                     ("--no-whiten", no_whiten)) if on]
    if len(chosen) > 1:
        raise IsotropyError(f"choose one of {', '.join(chosen)}")
    check_output(output, KIND, force=force, inputs=[corpus, transform])
    sentences = read_sentences(corpus)
    if not any(s.strip() for s in sentences):
        raise IsotropyError(f"{corpus} holds no sentence (every line is empty): there is nothing to index")
    encoder = Encoder(model, pooling=pooling, max_length=max_length, batch_size=batch_size)
    if transform is not None:
        from ._io import load_transform

        t = load_transform(transform)
    elif no_whiten:
        t = None
    else:
        if whiten is not None and (isinstance(whiten, bool) or whiten < 1):
            raise IsotropyError(f"--whiten must be a positive number of dimensions, got {whiten}")
        if whiten is not None and whiten > encoder.dim:
            raise IsotropyError(f"--whiten {whiten} is more than the {encoder.dim} dimensions of {encoder.model_name}")
        k = min(DEFAULT_WHITEN_K, encoder.dim) if whiten is None else whiten
        # n centred sentences span at most n - 1 directions: a whitening to k dims needs n > k
        # (below that, the extra directions hold only the shrinkage's made-up variance).
        if len(sentences) <= k:
            if whiten is not None or power is not None:
                raise IsotropyError(
                    f"a whitening to {k} dimensions needs more than {k} sentences, but {corpus} has {len(sentences)}; "
                    f"lower --whiten, pass --transform with a whitening fitted on a larger corpus, or use --no-whiten"
                )
            t = None
            warning = (
                f"{corpus} has {len(sentences)} sentences, too few to fit the default whitening to {k} dimensions "
                f"(it needs more than {k}); indexing the raw vectors instead (pass --transform with a whitening "
                f"fitted on a larger corpus to calibrate them)"
            )
        else:
            t = default_whitening(encoder.dim, k, DEFAULT_WHITEN_POWER if power is None else power)
    index = Index(encoder, t, kind, **params)
    if t is None and not no_whiten and transform is None:
        index.warnings.append(warning)
    try:
        index.add(sentences, show_progress=show_progress)
    except IsotropyError as exc:
        raise IsotropyError(f"{corpus}: {exc}") from None
    index.save(output, force=force)
    return index


def add_index_file(index_dir: str | os.PathLike, more: str | os.PathLike, show_progress: bool | None = None) -> tuple[Index, int]:
    """``isotropy index add``: append a sentence file to a saved index, rewriting it atomically.

    The index is locked from load to save, so a second ``add`` waits for this one
    instead of silently dropping one of the two batches.
    """
    from .data import read_sentences

    index_dir = Path(index_dir)
    read_config(index_dir, KIND)  # a missing or foreign folder is named before any lock is taken
    sentences = read_sentences(more)
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
) -> SearchResults:
    """``isotropy search``: queries given directly or read from a UTF-8 file (one a line)."""
    from .data import read_sentences

    queries = list(queries or [])
    if queries and queries_file is not None:
        raise IsotropyError("give either a query or --queries FILE, not both")
    if queries_file is not None:
        queries = read_sentences(queries_file)
    if not queries:
        raise IsotropyError("no query: give a query or --queries FILE")
    Index._check_k(k)
    index = Index.load(index_dir, ef_search=ef_search, nprobe=nprobe)
    return index.search(queries, k, show_progress=show_progress)


def format_results(results: SearchResults) -> str:
    """Plain-text rendering for the terminal: one block per query, ``rank score id text``."""
    lines = []
    for i in range(len(results)):
        if len(results) > 1 or results.queries:
            lines.append(f"query {i + 1}: {results.queries[i] if results.queries else ''}")
        for h in results.hits(i):
            text = h["text"].replace("\n", " ")
            lines.append(f"  {h['rank']:>3}  {h['score']:.4f}  [{h['id']}]  {text}")
    return "\n".join(lines)
