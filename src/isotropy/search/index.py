"""The index: sentences -> encoder -> transform -> L2-normalise -> faiss (layer 4)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_matrix, check_sentences
from .._progress import ProgressBar
from ..encoders import Encoder
from ..errors import IsotropyError
from ..storage.artifacts import CONFIG_NAME, STATE_NAME, check_output, folder_digest, header, load_state, output_dir
from ..storage.integrity import DIGESTS_KEY, check_encoder_of, member, provenance_of_record
from ..storage.text import read_json_lines
from ..transforms import TRANSFORMS, load_transform
from ..transforms.base import Transform
from .results import SearchResults

__all__ = ["Index", "INDEX_KINDS", "KIND"]

KIND = "index"
INDEX_VERSION = 1  # layout of this package's folder; bumped on incompatible change
INDEX_KINDS = ("flat", "hnsw", "ivf")
INDEX_FILE = "index.faiss"
SENTENCES_FILE = "sentences.jsonl"
TRANSFORM_DIR = "transform"
STATS_DIR = "pooling_stats"  # the token frequencies of a sif/idf pooling (Encoder.pooling_stats)
ADD_CHUNK = 8192  # rows handed to faiss at a time (progress granularity; memory stays bounded)


def _faiss():
    import faiss

    return faiss


def _is_fitted(transform: Any) -> bool:
    return transform.__sklearn_is_fitted__()


def _encoding_key(fingerprint: str, pooling: str, max_length: int, transform_digest: str | None) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([fingerprint, pooling, int(max_length), transform_digest]).encode())
    return h.hexdigest()


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
        allow_other_encoder: bool = False,
    ) -> None:
        if kind not in INDEX_KINDS:
            raise IsotropyError(f"unknown index kind {kind!r}; valid kinds: {', '.join(INDEX_KINDS)}")
        for name, value, low in (
            ("m", m, 2),
            ("ef_construction", ef_construction, 1),
            ("ef_search", ef_search, 1),
            ("nprobe", nprobe, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise IsotropyError(f"{name} must be an integer >= {low}, got {value!r}")
        if nlist is not None and (isinstance(nlist, bool) or not isinstance(nlist, (int, np.integer)) or nlist < 1):
            raise IsotropyError(f"nlist must be a positive integer or None, got {nlist!r}")
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
        self.params = {
            "m": int(m),
            "ef_construction": int(ef_construction),
            "ef_search": int(ef_search),
            "nlist": None if nlist is None else int(nlist),
            "nprobe": int(nprobe),
        }
        self.sentences: list[str] = []
        self.warnings: list[str] = []  # one line each, e.g. a default transform skipped on a tiny corpus
        self.selection: dict[str, Any] | None = None  # --method auto: the evidence (Selection.to_dict()), saved in config
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
        p = self.params
        kind = {
            "flat": "flat (exact)",
            "hnsw": f"hnsw (m {p['m']}, ef_construction {p['ef_construction']}, ef_search {p['ef_search']})",
            "ivf": f"ivf (nlist {p['nlist']}, nprobe {p['nprobe']})",
        }[self.kind]
        return f"{len(self)} sentences, {self.dim} dims, {kind}; {self.encoder.describe()}; {t}"

    def __repr__(self) -> str:
        return f"Index(kind={self.kind!r}, rows={len(self)}, dim={self.dim})"

    # ------------------------------------------------------------------ vectors

    def _apply(self, raw: np.ndarray, transform: Any = None) -> np.ndarray:
        X = np.asarray(raw, dtype=np.float32)
        transform = self.transform if transform is None else transform
        if transform is not None:
            X = np.asarray(transform.transform(X), dtype=np.float32)
        if X is raw or np.shares_memory(X, raw):
            X = X.copy()  # faiss normalises in place: never the caller's array
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
        X = self._apply(raw, transform)
        index = self._new_faiss(X) if self._index is None else self._index
        if X.shape[1] != index.d:  # pragma: no cover - guarded by construction
            raise IsotropyError(f"vectors have {X.shape[1]} dimensions, the index {index.d}")
        self.transform, self._index = transform, index
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
            warning = (
                f"the {self.kind} index found fewer than {k} hits for {short} of {Q.shape[0]} queries "
                f"(raise {'nprobe' if self.kind == 'ivf' else 'ef_search'})"
            )
        return SearchResults(ids=ids, scores=scores, texts=texts, k=kk, warning=warning)

    def set_search_params(self, ef_search: int | None = None, nprobe: int | None = None) -> Index:
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

    def save(self, path: str | os.PathLike, *, force: bool = False) -> Path:
        """Write the index folder atomically (see the module docs for its layout).

        An existing ``path`` is replaced only when it holds an index (or is empty), unless
        ``force``. Saving back to the folder the index was loaded from fails, writing
        nothing, when another writer changed that folder in the meantime (so one of two
        concurrent ``add``s is never silently lost; ``isotropy index add`` also locks it).
        """
        from safetensors.numpy import save_file

        if self._index is None:
            raise IsotropyError("the index is empty: add sentences before saving")
        path = check_output(path, KIND, force=force)
        encoder = self.encoder.record()
        # Written by hand rather than with save_state, which owns its whole folder: here the
        # transform's own saved folder must sit inside the same atomic rename.
        with output_dir(path, KIND, force=force, check=lambda: self._check_unchanged(path)) as tmp:
            transform_cfg = None
            if self.transform is not None:
                self.transform.save(tmp / TRANSFORM_DIR)
                sub = json.loads((tmp / TRANSFORM_DIR / CONFIG_NAME).read_text(encoding="utf-8"))
                transform_cfg = {"kind": sub.get("kind"), "path": TRANSFORM_DIR, "digest": folder_digest(tmp / TRANSFORM_DIR)}
            if "pooling_stats" in encoder:
                self.encoder.pooling_stats.save(tmp / STATS_DIR)
            _faiss().write_index(self._index, str(tmp / INDEX_FILE))
            with open(tmp / SENTENCES_FILE, "w", encoding="utf-8", newline="\n") as fh:
                for s in self.sentences:
                    fh.write(json.dumps(s, ensure_ascii=False) + "\n")
            save_file({"count": np.array([len(self.sentences)], dtype=np.int64)}, str(tmp / STATE_NAME))
            config = {
                **header(KIND),
                "index_version": INDEX_VERSION,
                "encoder": encoder,
                "transform": transform_cfg,
                "index": {"kind": self.kind, "params": self.params, "file": INDEX_FILE},
                "dim": self.dim,
                "count": len(self.sentences),
                "sentences_file": SENTENCES_FILE,
                **({"allow_other_encoder": True} if self.allow_other_encoder else {}),
                **({"selection": self.selection} if self.selection else {}),
                "generation": uuid.uuid4().hex,  # every save is a new version (see _check_unchanged)
                "encoding_key": _encoding_key(
                    encoder["fingerprint"],
                    self.encoder.pooling_key(),
                    encoder["max_length"],
                    None if transform_cfg is None else transform_cfg["digest"],
                ),
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
        verify: bool | None = None,
    ) -> Index:
        """Read a folder written by :meth:`save`, rebuilding and verifying its encoder and transform.

        The encoder is rebuilt on the backend it was built with (an index over an ONNX
        export reloads on onnxruntime); its weights fingerprint and the recomputed
        ``encoding_key`` must match the recorded ones, and every file the sha256 its config records
        (``verify=False`` skips that; None: unless ``--no-verify``); named paths stay inside the folder.
        """
        path = Path(path)
        cfg, arrays = load_state(path, KIND, required=("count",), verify=verify)
        rec = _read_index_config(path, cfg)
        if int(np.asarray(arrays["count"]).reshape(-1)[0]) != rec["count"]:
            raise IsotropyError(f"{path}: {STATE_NAME} and {CONFIG_NAME} disagree on the row count; rebuild the index")
        encoder, unverified = _rebuild_encoder(path, rec, batch_size, device)
        transform, digest = _load_index_transform(path, rec["transform"], False if DIGESTS_KEY in cfg else verify)  # hashed once
        if _encoding_key(rec["fingerprint"], encoder.pooling_key(), encoder.max_length, digest) != rec["key"]:
            t_cfg = rec["transform"]
            raise IsotropyError(
                f"{path}/{CONFIG_NAME} no longer matches the index: it names pooling {encoder.pooling!r}, "
                f"max_length {encoder.max_length} and "
                f"{'no transform' if t_cfg is None else 'transform ' + repr(t_cfg.get('path'))}, but the index "
                f"was built with other encoding settings (recorded encoding_key differs); queries would not be "
                f"encoded like the corpus: restore the original config/transform or rebuild the index"
            )
        params = rec["params"]
        try:
            index = cls(
                encoder,
                transform,
                rec["kind"],
                **{k: params[k] for k in ("m", "ef_construction", "ef_search", "nprobe")},
                nlist=params.get("nlist"),
                allow_other_encoder=cfg.get("allow_other_encoder") is True,
            )
        except KeyError as exc:
            raise IsotropyError(f"{path}/{CONFIG_NAME} lacks the index parameter {exc}; rebuild the index") from None
        index._index, index.sentences = _read_contents(path, cfg, rec)
        if unverified:
            _verify_by_reencoding(path, index, rec["fingerprint"])
        out_dim = index._apply(np.zeros((1, encoder.dim), np.float32)).shape[1]
        if out_dim != rec["dim"]:
            raise IsotropyError(f"{path}: the transform gives {out_dim} dims but the index holds {rec['dim']}; rebuild the index")
        index.set_search_params(ef_search=ef_search, nprobe=nprobe)
        index.selection = cfg.get("selection")
        index._source = (path.resolve(), _config_digest(path))
        return index


# --------------------------------------------------------------------------- reading a saved index


def _read_index_config(path: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    if cfg.get("index_version") != INDEX_VERSION:
        raise IsotropyError(
            f"{path} was written by an incompatible isotropy ({cfg.get('isotropy_version', 'unknown')}, index "
            f"layout {cfg.get('index_version')!r}; this one reads {INDEX_VERSION}); rebuild the index"
        )
    try:
        enc, idx = cfg["encoder"], cfg["index"]
        return {
            "kind": idx["kind"],
            "params": dict(idx["params"]),
            "file": idx.get("file", INDEX_FILE),
            "count": int(cfg["count"]),
            "dim": int(cfg["dim"]),
            "backend": str(enc.get("backend", "torch")),
            "fingerprint_version": enc.get("fingerprint_version"),
            "model": enc["model"],
            "fingerprint": str(enc["fingerprint"]),
            "pooling": enc["pooling"],
            "pooling_stats": enc.get("pooling_stats"),
            "precision": str(enc.get("precision", "fp32")),
            "max_length": int(enc["max_length"]),
            "transform": cfg.get("transform"),
            "key": cfg["encoding_key"],
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise IsotropyError(f"{path}/{CONFIG_NAME} is incomplete or malformed ({exc!r}); rebuild the index") from None


def _rebuild_encoder(path: Path, rec: dict[str, Any], batch_size: int, device: str | None) -> tuple[Encoder, bool]:
    """The recorded encoder, its fingerprint checked; ``(encoder, True)`` when the record is isotropy 0.1's
    and its fingerprint cannot be compared (0.1 hashed the model's folder path): the caller then
    verifies by re-encoding stored sentences instead."""
    stats = path / STATS_DIR
    if rec["pooling_stats"] and not stats.is_dir():
        raise IsotropyError(f"{path} is missing its token frequencies folder {STATS_DIR}/; rebuild the index")
    encoder = Encoder(
        rec["model"],
        pooling=rec["pooling"],
        max_length=rec["max_length"],
        batch_size=batch_size,
        device=device,
        backend=rec["backend"],
        pooling_stats=stats if rec["pooling_stats"] else None,
        precision=rec["precision"],
    )
    if encoder.fingerprint() == rec["fingerprint"]:
        return encoder, False
    if rec["fingerprint_version"] is None and rec["backend"] == "torch":
        return encoder, True
    raise _other_weights(path, rec["fingerprint"], encoder)


def _other_weights(path: Path, recorded: str, encoder: Encoder) -> IsotropyError:
    return IsotropyError(
        f"{path} was built with other model weights than {encoder.model_name} (fingerprint "
        f"{recorded[:12]}..., this model {encoder.fingerprint()[:12]}...); queries would not be encoded "
        f"like the corpus: restore its config.json or rebuild the index"
    )


REENCODE_PROBES = 8  # stored sentences re-encoded to verify an index whose fingerprint cannot be compared


def _verify_by_reencoding(path: Path, index: Index, recorded: str) -> None:
    """Re-encode a few stored sentences and compare them with the stored vectors (isotropy 0.1's indexes)."""
    n = len(index.sentences)
    ids = sorted({int(i) for i in np.linspace(0, n - 1, min(REENCODE_PROBES, n))})
    try:
        if index.kind == "ivf":
            _faiss().extract_index_ivf(index._index).make_direct_map()
        stored = np.stack([index._index.reconstruct(i) for i in ids])
    except RuntimeError:  # an index type that cannot give its vectors back
        raise _other_weights(path, recorded, index.encoder) from None
    fresh = index.embed([index.sentences[i] for i in ids], show_progress=False)
    if not np.allclose(stored, fresh, atol=1e-4):
        raise _other_weights(path, recorded, index.encoder)


def _load_index_transform(path: Path, t_cfg: dict[str, Any] | None, verify: bool | None) -> tuple[Any, str | None]:
    if t_cfg is None:
        return None, None
    tdir = member(path, t_cfg.get("path", TRANSFORM_DIR), "transform path")
    if not tdir.is_dir():
        raise IsotropyError(f"{path} is missing its transform folder {tdir.name}/; rebuild the index")
    return load_transform(tdir, verify=verify), folder_digest(tdir)


def _read_contents(path: Path, cfg: dict[str, Any], rec: dict[str, Any]) -> tuple[Any, list[str]]:
    """The faiss index and the sentences, checked against the config's row count and dimension."""
    faiss = _faiss()
    file = member(path, rec["file"], "index file")
    if not file.is_file():
        raise IsotropyError(f"{path} is missing {file.name}; it is not a complete index")
    try:
        fidx = faiss.read_index(str(file))
    except RuntimeError as exc:
        raise IsotropyError(f"{file} is not a readable faiss index: {str(exc).strip().splitlines()[-1]}") from None
    sentences = read_json_lines(member(path, cfg.get("sentences_file", SENTENCES_FILE), "sentences_file"))
    count, dim = rec["count"], rec["dim"]
    if fidx.ntotal != count or len(sentences) != count or fidx.d != dim:
        raise IsotropyError(
            f"{path} is inconsistent: config says {count} rows x {dim} dims, the faiss index holds "
            f"{fidx.ntotal} x {fidx.d}, the sentence file {len(sentences)} sentences; rebuild the index"
        )
    return fidx, sentences


def _config_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256((path / CONFIG_NAME).read_bytes()).hexdigest()
    except OSError:
        return None
