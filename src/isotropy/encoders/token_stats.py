"""Token statistics for the poolings that weight tokens by frequency, ``sif`` and ``idf`` (layer 4).

A :class:`TokenFrequencies` is fitted like a transform, but on sentences: every sentence of
a fit corpus is tokenised with the encoder's own tokenizer (no special tokens, no
truncation) and two counts are kept per token id -- its occurrences (``counts``, for SIF's
p(w)) and the number of sentences holding it (``doc_counts``, for IDF). It is an artefact
of kind ``token-frequencies``: ``config.json`` (the header, the tokenizer's identity, the
corpus size) + ``state.safetensors`` (the two count vectors), saved and loaded through
:mod:`isotropy.storage`. The tokenizer's identity is a digest of its vocabulary and of the
ids it gives a fixed probe text (lower-casing, accent stripping); a table counted with
another tokenizer is refused, because its ids would name other tokens.

Weights (``weights(kind, a)``):

* ``sif``: ``a / (a + p(w))`` with ``p(w) = counts[w] / counts.sum()`` (Arora et al. 2017;
  PrincetonML/SIF ``src/data_io.py`` 271-290, ``a = 1e-3`` by default). A token never seen in
  the corpus has p = 0, so weight 1 -- as SIF gives words absent from its frequency file
  (``getWeight``, line 298).
* ``idf``: ``log((1 + N) / (1 + df(w))) + 1``, N sentences, df(w) sentences holding w:
  scikit-learn's smoothed IDF (``TfidfVectorizer(smooth_idf=True)``), finite for unseen tokens.

Special tokens ([CLS], [SEP], [PAD], [MASK], ...; not [UNK], which stands for real words)
get weight 0: SIF weights words, and a template token is no word.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import ProgressBar
from ..errors import IsotropyError
from ..storage.artifacts import load_state, read_config, save_state

__all__ = ["TokenFrequencies", "KIND", "tokenizer_identity", "as_token_stats", "WEIGHT_KINDS"]

KIND = "token-frequencies"
STATS_VERSION = 1
WEIGHT_KINDS = ("sif", "idf")
PROBE = "Hello World! Ünïcödé café, 123 NAÏVE straße"  # lower-casing and accent stripping change its ids
CHUNK = 4096  # sentences tokenised at a time


def tokenizer_identity(tokenizer) -> dict[str, Any]:
    """What identifies a tokenizer's ids: a digest of its vocabulary and of how it tokenises a probe text."""
    vocab = tokenizer.get_vocab()
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps(vocab, sort_keys=True, ensure_ascii=False).encode())
    h.update(json.dumps(tokenizer(PROBE, add_special_tokens=False)["input_ids"]).encode())
    return {"digest": h.hexdigest(), "vocab_size": int(len(tokenizer))}


def _special_ids(tokenizer) -> list[int]:
    unk = tokenizer.unk_token_id
    return sorted(int(i) for i in set(tokenizer.all_special_ids) if i is not None and i != unk)


class TokenFrequencies:
    """Token occurrence and document counts of a corpus, under one tokenizer (see the module docs).

    Build one with :meth:`fit` (or ``Encoder.fit_pooling(sentences)``), save it with
    :meth:`save`, read it with :meth:`load`.
    """

    kind = KIND

    def __init__(
        self, counts: np.ndarray, doc_counts: np.ndarray, n_sentences: int, tokenizer: dict[str, Any], **info: Any
    ) -> None:
        self.counts = np.asarray(counts, dtype=np.int64)
        self.doc_counts = np.asarray(doc_counts, dtype=np.int64)
        self.n_sentences = int(n_sentences)
        self.tokenizer = dict(tokenizer)
        self.info = dict(info)  # model_name, source: what a reader wants to know, not checked
        self._digest: str | None = None

    # ------------------------------------------------------------------ fitting

    @classmethod
    def fit(
        cls,
        tokenizer,
        sentences: Sequence[str],
        *,
        model_name: str | None = None,
        source: str | None = None,
        show_progress: bool | None = None,
    ) -> TokenFrequencies:
        """Count every token of ``sentences`` (no special tokens added, no truncation)."""
        from .._checks import check_sentences

        sentences = check_sentences(sentences)
        if not any(s.strip() for s in sentences):
            where = f"{source}: " if source else ""
            raise IsotropyError(f"{where}no sentence to count token frequencies on (every one is empty)")
        size = int(len(tokenizer))
        counts = np.zeros(size, dtype=np.int64)
        docs = np.zeros(size, dtype=np.int64)
        with ProgressBar(len(sentences), show_progress, "counting tokens", min_total=4 * CHUNK, unit="sentences") as bar:
            for start in range(0, len(sentences), CHUNK):
                chunk = sentences[start : start + CHUNK]
                ids = tokenizer(chunk, add_special_tokens=False, truncation=False, return_attention_mask=False)["input_ids"]
                flat = np.fromiter((t for row in ids for t in row), dtype=np.int64)
                row = np.repeat(np.arange(len(ids), dtype=np.int64), [len(r) for r in ids])
                if flat.size:
                    counts += np.bincount(flat, minlength=size)[:size]
                    # one count per (sentence, token) pair: the sentences holding each token
                    docs += np.bincount(np.unique(row * size + flat) % size, minlength=size)[:size]
                bar.advance(len(chunk))
        return cls(counts, docs, len(sentences), tokenizer_identity(tokenizer), model_name=model_name, source=source)

    # ------------------------------------------------------------------ weights

    def weights(self, kind: str, a: float = 1e-3, tokenizer=None) -> np.ndarray:
        """float32 weight per token id (``sif`` or ``idf``); special tokens of ``tokenizer`` get 0."""
        if kind == "sif":
            p = self.counts / max(int(self.counts.sum()), 1)
            w = a / (a + p)
        elif kind == "idf":
            w = np.log((1.0 + self.n_sentences) / (1.0 + self.doc_counts)) + 1.0
        else:
            raise IsotropyError(f"unknown token weighting {kind!r}; valid: {', '.join(WEIGHT_KINDS)}")
        w = w.astype(np.float32)
        if tokenizer is not None:
            w[[i for i in _special_ids(tokenizer) if i < w.size]] = 0.0
        return w

    # ------------------------------------------------------------------ identity

    def digest(self) -> str:
        """A digest of the counts and the tokenizer identity (what the vectors depend on)."""
        if self._digest is None:
            h = hashlib.blake2b(digest_size=16)
            h.update(self.tokenizer["digest"].encode())
            h.update(np.int64(self.n_sentences).tobytes())
            h.update(np.ascontiguousarray(self.counts).tobytes())
            h.update(np.ascontiguousarray(self.doc_counts).tobytes())
            self._digest = h.hexdigest()
        return self._digest

    def record(self) -> dict[str, Any]:
        """What an artefact that records an encoder stores about this table."""
        return {
            "kind": KIND,
            "digest": self.digest(),
            "tokenizer_digest": self.tokenizer["digest"],
            "sentences": self.n_sentences,
            "tokens": int(self.counts.sum()),
            "source": self.info.get("source"),
        }

    def check_tokenizer(self, tokenizer, model_name: str, where: str | None = None) -> None:
        """Refuse a table counted with another tokenizer than ``tokenizer`` (its ids would name other tokens)."""
        ident = tokenizer_identity(tokenizer)
        if ident["digest"] != self.tokenizer.get("digest"):
            counted = self.info.get("model_name") or "another model"
            raise IsotropyError(
                f"the token frequencies{f' in {where}' if where else ''} were counted with the tokenizer of {counted}, "
                f"not with the tokenizer of model {model_name} (tokenizer digest differs): fit them again with this model "
                f"(isotropy fit token-frequencies CORPUS --model ...)"
            )

    def describe(self) -> str:
        src = self.info.get("source")
        return f"token frequencies of {self.n_sentences} sentences{f' ({src})' if src else ''}, {int(self.counts.sum())} tokens"

    def __repr__(self) -> str:
        return f"TokenFrequencies({self.n_sentences} sentences, {int(self.counts.sum())} tokens)"

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike, *, force: bool = False) -> Path:
        """Write ``config.json`` + ``state.safetensors`` atomically (guarded like every isotropy output)."""
        config = {
            "stats_version": STATS_VERSION,
            "tokenizer": self.tokenizer,
            "n_sentences": self.n_sentences,
            "n_tokens": int(self.counts.sum()),
            **{k: v for k, v in self.info.items() if v is not None},
        }
        return save_state(path, KIND, config, {"counts": self.counts, "doc_counts": self.doc_counts}, force=force)

    @classmethod
    def load(cls, path: str | os.PathLike, *, verify: bool | None = None) -> TokenFrequencies:
        """Read a folder written by :meth:`save`; a table that disagrees with its config (or with the
        sha256 digests it records, unless ``verify=False``) is refused."""
        path = Path(path)
        cfg, arrays = load_state(path, KIND, required=("counts", "doc_counts"), verify=verify)
        if cfg.get("stats_version") != STATS_VERSION:
            raise IsotropyError(
                f"{path} has token-frequency layout {cfg.get('stats_version')!r}, this isotropy reads 1; fit it again"
            )
        counts, docs = arrays["counts"], arrays["doc_counts"]
        tok = cfg.get("tokenizer")
        if not isinstance(tok, dict) or "digest" not in tok or not isinstance(cfg.get("n_sentences"), int):
            raise IsotropyError(f"{path}/config.json lacks the tokenizer identity or n_sentences; fit it again")
        if counts.ndim != 1 or counts.shape != docs.shape or counts.shape[0] != tok.get("vocab_size"):
            raise IsotropyError(
                f"{path}: the counts cover {counts.shape[0] if counts.ndim == 1 else counts.shape} token ids, config.json "
                f"says a vocabulary of {tok.get('vocab_size')}; the artefact is inconsistent, fit it again"
            )
        if (
            (counts < 0).any()
            or (docs < 0).any()
            or (docs > cfg["n_sentences"]).any()
            or int(counts.sum()) != cfg.get("n_tokens")
        ):
            raise IsotropyError(f"{path}: the counts disagree with config.json (n_sentences, n_tokens); fit it again")
        info = {k: cfg.get(k) for k in ("model_name", "source")}
        return cls(counts, docs, cfg["n_sentences"], tok, **info)


def as_token_stats(value: Any, tokenizer, model_name: str, show_progress: bool | None = None) -> TokenFrequencies:
    """A :class:`TokenFrequencies` from an object, a folder written by :meth:`TokenFrequencies.save`
    (loaded), or a UTF-8 text file, one sentence a line (counted now); checked against ``tokenizer``."""
    where = None
    if isinstance(value, TokenFrequencies):
        stats = value
    elif isinstance(value, (str, os.PathLike)):
        path = Path(value).expanduser()
        where = str(value)
        if path.is_dir():
            read_config(path, KIND)  # a folder of another kind is named as such
            stats = TokenFrequencies.load(path)
        elif path.is_file():
            from ..storage.text import read_sentences

            stats = TokenFrequencies.fit(
                tokenizer, read_sentences(path), model_name=model_name, source=path.name, show_progress=show_progress
            )
        else:
            raise IsotropyError(f"pooling stats {value} do not exist (give a token-frequencies folder or a text file)")
    else:
        raise IsotropyError(
            f"pooling_stats must be a TokenFrequencies, a token-frequencies folder or a text file, not {type(value).__name__}"
        )
    stats.check_tokenizer(tokenizer, model_name, where)
    return stats
