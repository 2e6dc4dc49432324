"""A static table: one vector per token, a sentence is the (weighted) mean of its tokens' rows (layer 4).

:class:`StaticTable` is what every static source loads into (model2vec and
sentence-transformers ``StaticEmbedding`` folders, word-vector files, the embedded GloVe):
the token strings (in id order), the ``(V, d)`` float32 vectors (memory-mapped where the
source allows), the tokenizer (a ``tokenizers.Tokenizer``: the source's own, or a word-level
one for word vectors), the id of the unknown token, and per-token probabilities (counts when
given, else Zipf's law on the row order, which is frequency order for GloVe, word2vec and
fastText files).

Pooling is a sparse matrix product: one row per sentence holding its tokens' weights, times
the table (``scipy.sparse``; no ``(tokens, d)`` gather is materialised). ``mean`` weights each
token ``1/n``; ``sif``/``idf`` weight token ``t`` by ``w_t`` and divide by ``n`` (SIF's
``norm=tokens``), so :meth:`StaticTable.fold` gives a table whose plain mean is any affine map
of the weighted pooling: ``mean_t(E'[t]) == mean_t(w_t E[t]) @ A + b``, exactly.

Unknown tokens are dropped before the mean (as model2vec does); a sentence with no known token
gets a zero vector and is counted in :class:`Coverage` (``empty``), never NaN.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import IsotropyError

__all__ = [
    "StaticTable",
    "Coverage",
    "TableTokenizer",
    "zipf_probabilities",
    "word_tokenizer",
    "add_character_cut",
    "take_character_cut",
    "flatten",
    "truncate",
    "set_truncation",
    "character_limit",
    "cut_characters",
    "median_token_length",
    "take_length_limit",
    "WORD_PATTERN",
    "UNK",
]

# words (with English clitics split as GloVe's Stanford tokenizer does: do|n't, it|'s) and punctuation marks
WORD_PATTERN = r"\w+(?=n't)|n't|'\w+|\w+|[^\w\s]"
UNK = "[UNK]"
CHUNK = 8192  # sentences pooled at a time (bounded memory, progress)


def zipf_probabilities(n: int) -> np.ndarray:
    """``p(rank r) = (1/r) / H_n`` for ranks 1..n: Zipf's law on a vocabulary in frequency order (the
    pure law, offset 0, as SIF weights use it; Zipfian whitening's default adds Mandelbrot's offset)."""
    from ...transforms.token_whitening import zipf_probabilities as zipf

    return zipf(int(n), offset=0.0)


# model2vec's first cut of a sentence (at max_length x the median token length, in characters), as a normalizer that
# a sentence-transformers twin's tokenizer runs first: everything past the first N characters is dropped
_CUT = r"(?<=\A[\s\S]{%d})[\s\S]+"
_CUT_RE = re.compile(r"^\(\?<=\\A\[\\s\\S\]\{(\d+)\}\)\[\\s\\S\]\+$")


def add_character_cut(tok: Any, chars: int) -> None:
    """Make ``tok`` (a ``tokenizers.Tokenizer``) drop every character past the first ``chars`` before its own
    normalizer runs (a ``Replace`` normalizer, saved in its ``tokenizer.json``)."""
    from tokenizers import Regex, normalizers

    cut = normalizers.Replace(Regex(_CUT % int(chars)), "")
    tok.normalizer = cut if tok.normalizer is None else normalizers.Sequence([cut, tok.normalizer])


def take_character_cut(tok: Any) -> int | None:
    """The ``chars`` of :func:`add_character_cut` when ``tok`` starts with that cut, which is then taken out of it
    (a :class:`StaticTable` cuts sentences itself, and its word cache needs the tokenizer's own normalizer); else
    None, ``tok`` unchanged."""
    norm = tok.normalizer
    if norm is None:
        return None
    spec = json.loads(norm.__getstate__())
    first = spec["normalizers"][0] if spec.get("type") == "Sequence" and spec.get("normalizers") else spec
    pattern = (first.get("pattern") or {}).get("Regex") if first.get("type") == "Replace" else None
    m = _CUT_RE.match(pattern or "")
    if m is None or first.get("content") != "":
        return None
    rest = [norm[i] for i in range(1, len(spec["normalizers"]))] if spec.get("type") == "Sequence" else []
    tok.normalizer = None if not rest else rest[0] if len(rest) == 1 else _sequence(rest)
    return int(m.group(1))


def take_length_limit(tok: Any) -> tuple[int | None, int | None]:
    """``(max_length, chars_per_token)`` of a tokenizer saved with the length rule in it (:func:`set_truncation`,
    :func:`add_character_cut`: a static folder's sentence-transformers twin), for a :class:`StaticTable`, which cuts
    sentences itself: the character cut is taken out of ``tok`` when it is a whole number of characters per token,
    else left in it (the tokenizer keeps cutting; ``chars_per_token`` None)."""
    limit = (tok.truncation or {}).get("max_length")
    chars = take_character_cut(tok)
    per_token = chars // limit if chars is not None and limit and chars % limit == 0 else None
    if chars is not None and per_token is None:
        add_character_cut(tok, chars)  # not a multiple of the length: the tokenizer keeps cutting itself
    return limit, per_token


def _sequence(parts: list) -> Any:
    from tokenizers import normalizers

    return normalizers.Sequence(parts)


# The one rule of a static model's length limit (model2vec's ``encode``, isotropy's static encoder, the twins'
# tokenizers): a sentence is first cut at ``max_length`` x the median token length in characters (when the table
# knows that length), then at its first ``max_length`` tokens, unknown tokens counted; None is no limit. Every
# reader and writer of a static model decides it through the four functions below.


def set_truncation(tok: Any, max_length: int | None) -> None:
    """Make ``tok`` (a ``tokenizers.Tokenizer``) keep the first ``max_length`` tokens of a sentence (None: all)."""
    if max_length is None:
        tok.no_truncation()
    else:
        tok.enable_truncation(int(max_length))


def median_token_length(tokens: Any) -> int:
    """model2vec's ``median_token_length``: the median length of the vocabulary's tokens, in characters."""
    return int(np.median([len(t) for t in tokens]))


def character_limit(max_length: int | None, chars_per_token: int | None) -> int | None:
    """The first cut, in characters: ``max_length`` x ``chars_per_token`` (None: no cut, also for a 0 length)."""
    if max_length is None or not chars_per_token:
        return None
    return int(max_length) * int(chars_per_token) or None


def cut_characters(sentences: Sequence[str], max_length: int | None, chars_per_token: int | None) -> list[str]:
    """``sentences`` after the first cut (:func:`character_limit`)."""
    chars = character_limit(max_length, chars_per_token)
    return list(sentences) if chars is None else [s[:chars] for s in sentences]


def flatten(ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids per sentence as ``(flat ids, length per sentence)``, int64."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    return np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum())), lengths


def truncate(flat: np.ndarray, lengths: np.ndarray, limit: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The first ``limit`` ids of each sentence (the tokenizer's truncation, unknown tokens counted; None: all)."""
    if limit is None or not lengths.size or int(lengths.max()) <= limit:
        return flat, lengths
    rank = np.arange(flat.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return flat[rank < limit], np.minimum(lengths, limit)


def word_model(tokens: Sequence[str], unk: str) -> Any:
    """The ``tokenizers`` ``WordLevel`` model of ``tokens`` (ids = rows); 0.5 s for GloVe's 400k words."""
    from tokenizers import models

    return models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token=unk)


def word_tokenizer(tokens: Sequence[str], unk: str, lowercase: bool, model: Callable[[], Any] | None = None):
    """A function making a ``tokenizers`` word-level tokenizer over ``tokens`` (ids = rows): words and punctuation as
    tokens (:data:`WORD_PATTERN`), lower-cased first when the table is. Rust-fast, and the same object
    the model2vec and sentence-transformers exports save, so every format tokenises alike. ``model``: a function
    giving the :func:`word_model` of ``tokens`` to share (read-only: each tokenizer has its own truncation)."""

    def make():
        from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

        tok = Tokenizer(word_model(tokens, unk) if model is None else model())
        if lowercase:
            tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(WORD_PATTERN), behavior="removed", invert=True)
        return tok

    return make


@dataclass
class Coverage:
    """Out-of-vocabulary accounting of an encode: tokens seen, tokens unknown, sentences with no known token."""

    sentences: int = 0
    tokens: int = 0
    unknown: int = 0
    empty: int = 0
    empty_rows: list[int] = field(default_factory=list)  # the first few, for messages

    @property
    def oov_rate(self) -> float:
        return self.unknown / self.tokens if self.tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "sentences": self.sentences,
            "tokens": self.tokens,
            "unknown_tokens": self.unknown,
            "oov_rate": round(self.oov_rate, 6),
            "sentences_without_known_token": self.empty,
        }

    def add(self, ids: Any, total: int, unknown: int) -> None:
        """Count one chunk of tokenised sentences: ``ids`` per sentence, or their lengths (an array)."""
        lengths = np.asarray(ids) if isinstance(ids, np.ndarray) else np.fromiter(map(len, ids), dtype=np.int64)
        empty = np.flatnonzero(lengths == 0)
        self.empty += int(empty.size)
        self.empty_rows.extend(self.sentences + int(i) for i in empty[: max(0, 5 - len(self.empty_rows))])
        self.sentences += len(lengths)
        self.tokens += total
        self.unknown += unknown

    def merge(self, other: Coverage) -> Coverage:
        """Add ``other``'s counts (a later encode) to these; returns self."""
        self.empty_rows.extend(self.sentences + r for r in other.empty_rows[: max(0, 5 - len(self.empty_rows))])
        self.sentences += other.sentences
        self.tokens += other.tokens
        self.unknown += other.unknown
        self.empty += other.empty
        return self

    def warning(self, what: str = "sentences") -> str | None:
        """One line when some ``what`` had no known token (their vectors are zero: any score of theirs means
        nothing), naming the first rows (1-based); None when every one had a known token."""
        if not self.empty:
            return None
        rows = ", ".join(str(r + 1) for r in self.empty_rows) + (", ..." if self.empty > len(self.empty_rows) else "")
        return (
            f"{self.empty} of {self.sentences} {what} hold no word the static model knows (row{'s' if self.empty > 1 else ''} "
            f"{rows}): their vectors are zero, so their similarities and hits mean nothing"
        )

    def describe(self) -> str:
        empty = f", {self.empty} sentences without any known token (zero vectors)" if self.empty else ""
        return f"out-of-vocabulary tokens {100 * self.oov_rate:.2f}% ({self.unknown} of {self.tokens}){empty}"


class StaticTable:
    """Token vectors averaged per sentence (see the module docs).

    ``tokens``: the token strings in id order; ``vectors``: ``(V, d)`` float32; ``tokenizer``: a
    ``tokenizers.Tokenizer`` whose ids index the rows; ``unk_id``: the unknown token's id (None: none);
    ``drop_unknown``: leave unknown tokens out of the mean (model2vec, word vectors) or average their
    row (sentence-transformers' ``StaticEmbedding`` does); ``counts``: token counts, for
    :attr:`probabilities` (None: Zipf on the row order); ``source``: what was loaded, for messages.
    """

    def __init__(
        self,
        tokens: Sequence[str],
        vectors: np.ndarray,
        tokenizer: Any,
        *,
        unk_id: int | None = None,
        drop_unknown: bool = True,
        counts: np.ndarray | None = None,
        lowercase: bool = False,
        source: str = "",
        max_length: int | None = 512,
        chars_per_token: int | None = None,
    ) -> None:
        self.tokens = list(tokens)
        self.vectors = vectors if vectors.dtype == np.float32 else np.asarray(vectors, dtype=np.float32)
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.tokens):
            raise IsotropyError(f"{source}: {len(self.tokens)} tokens but a table of shape {self.vectors.shape}")
        self._tokenizer = tokenizer  # a tokenizers.Tokenizer, or a function making one (built on first use)
        self._word_level = callable(tokenizer) and not hasattr(tokenizer, "encode_batch")  # word_tokenizer(tokens)
        self._maker = tokenizer if self._word_level else None
        self.unk_id = unk_id
        self.drop_unknown = bool(drop_unknown)
        self.counts = None if counts is None else np.asarray(counts, dtype=np.int64)
        self.lowercase = bool(lowercase)
        self.source = source
        self.max_length = max_length
        self.chars_per_token = chars_per_token  # model2vec cuts a sentence at max_length x its median token length first
        self._digest: str | None = None

    @property
    def tokenizer(self):
        """The ``tokenizers.Tokenizer`` whose ids index the rows (a word-level one is built on first use: seconds for
        a large vocabulary, which a fingerprint or a cache hit never pays)."""
        if callable(self._tokenizer) and not hasattr(self._tokenizer, "encode_batch"):
            self._tokenizer = self._tokenizer()
        self._tokenizer.no_padding()
        return self._tokenizer

    def _tokenizer_spec(self) -> str:
        if self._word_level:
            return json.dumps({"words": self.tokens, "lowercase": self.lowercase, "pattern": WORD_PATTERN})
        spec = json.loads(self._tokenizer.to_str())
        spec.pop("truncation", None)  # set per encode (max_length), not part of the table
        spec.pop("padding", None)
        return json.dumps(spec, sort_keys=True)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def probabilities(self) -> np.ndarray:
        """float64 ``p(t)`` per row: the counts' relative frequencies, else Zipf on the row order (unknown: 0)."""
        if self.counts is not None:
            return self.counts / max(int(self.counts.sum()), 1)
        n = len(self) - (1 if self.unk_id is not None else 0)
        p = np.zeros(len(self), dtype=np.float64)
        rows = np.array([i for i in range(len(self)) if i != self.unk_id], dtype=np.int64)
        p[rows] = zipf_probabilities(n)
        return p

    # ------------------------------------------------------------------ identity

    def digest(self) -> str:
        """A digest of what decides the vectors: tokenizer, vectors, the unknown-token policy."""
        if self._digest is None:
            h = hashlib.blake2b(digest_size=16)
            h.update(self._tokenizer_spec().encode())
            h.update(json.dumps([self.unk_id, self.drop_unknown, list(self.vectors.shape)]).encode())
            for start in range(0, len(self), 65536):  # bounded memory on a memory-mapped table
                h.update(np.ascontiguousarray(self.vectors[start : start + 65536]).tobytes())
            self._digest = h.hexdigest()
        return self._digest

    # ------------------------------------------------------------------ folding

    def fold(self, A: np.ndarray, b: np.ndarray | None = None, row_weights: np.ndarray | None = None) -> StaticTable:
        """The table ``E'[t] = (w_t E[t]) @ A + b``: its plain mean is ``mean_t(w_t E[t]) @ A + b`` for every sentence.

        ``A``: ``(d, k)``; ``b``: ``(k,)`` (None: 0); ``row_weights``: ``(V,)`` per-token weights such as SIF's
        (None: 1). The unknown token's row is transformed too (sentence-transformers averages it)."""
        A = np.asarray(A, dtype=np.float64)
        if A.ndim != 2 or A.shape[0] != self.dim:
            raise IsotropyError(f"fold: A must be ({self.dim}, k), got {A.shape}")
        bias = np.zeros(A.shape[1]) if b is None else np.asarray(b, dtype=np.float64).reshape(-1)
        if bias.shape != (A.shape[1],):
            raise IsotropyError(f"fold: b must have {A.shape[1]} values, got {bias.shape}")
        if row_weights is not None and np.shape(row_weights) != (len(self),):
            raise IsotropyError(f"fold: row_weights must have {len(self)} values, got {np.shape(row_weights)}")
        out = np.empty((len(self), A.shape[1]), dtype=np.float32)
        for start in range(0, len(self), 65536):
            rows = np.asarray(self.vectors[start : start + 65536], dtype=np.float64)
            if row_weights is not None:
                rows = rows * np.asarray(row_weights[start : start + 65536], dtype=np.float64)[:, None]
            out[start : start + 65536] = rows @ A + bias
        return StaticTable(
            self.tokens,
            out,
            self._maker if self._word_level else self._tokenizer.__class__.from_str(self._tokenizer.to_str()),
            unk_id=self.unk_id,
            drop_unknown=self.drop_unknown,
            counts=self.counts,
            lowercase=self.lowercase,
            source=f"{self.source} (folded)",
            max_length=self.max_length,
            chars_per_token=self.chars_per_token,
        )

    # ------------------------------------------------------------------ encoding

    def token_ids(self, sentences: Sequence[str], max_length: int | None = None) -> tuple[list[list[int]], int, int]:
        """Token ids per sentence (truncated to ``max_length``, unknown ones dropped when the table drops them),
        and the number of tokens and unknown tokens seen."""
        ids = self._encode(sentences, max_length)
        total = sum(map(len, ids))
        unk = self.unk_id
        if unk is None:
            return ids, total, 0
        unknown = sum(row.count(unk) for row in ids)
        if unknown and self.drop_unknown:
            ids = [[t for t in row if t != unk] if unk in row else row for row in ids]
        return ids, total, unknown

    def token_array(self, sentences: Sequence[str], max_length: int | None = None) -> tuple[np.ndarray, np.ndarray, int, int]:
        """:meth:`token_ids` as ``(flat ids, length per sentence, tokens, unknown tokens)``, with numpy doing the
        per-token work (the fast path of the encoder)."""
        ids = self._encode(sentences, max_length)
        flat, lengths = flatten(ids)
        total, unknown = int(flat.size), 0
        if self.unk_id is not None:
            known = flat != self.unk_id
            unknown = total - int(known.sum())
            if unknown and self.drop_unknown:
                rows = np.repeat(np.arange(len(ids)), lengths)
                lengths = np.bincount(rows[known], minlength=len(ids)).astype(np.int64)
                flat = flat[known]
        return flat, lengths, total, unknown

    def _encode(self, sentences: Sequence[str], max_length: int | None) -> list[list[int]]:
        limit = self.max_length if max_length is None else max_length
        set_truncation(self.tokenizer, limit)
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        return [e.ids for e in encode(cut_characters(sentences, limit, self.chars_per_token), add_special_tokens=False)]

    def pool(
        self,
        sentences: Sequence[str],
        weights: np.ndarray | None = None,
        norm: str = "tokens",
        max_length: int | None = None,
        coverage: Coverage | None = None,
    ) -> np.ndarray:
        """``(n, d)`` float32: per sentence ``sum_t w_t E[t] / n_t`` (``norm=tokens``; ``weights``: None is 1), or
        divided by ``sum_t w_t`` (``weights``), or not divided (``none``). No known token: a zero row."""
        ids, total, unknown = self.token_ids(sentences, max_length)
        if coverage is not None:
            coverage.add(ids, total, unknown)
        return self.pool_ids(ids, weights, norm)

    def pool_ids(self, ids: list[list[int]], weights: np.ndarray | None = None, norm: str = "tokens") -> np.ndarray:
        """:meth:`pool` on token ids (from :meth:`token_ids`): one sparse product, no ``(tokens, d)`` gather."""
        return self.pool_array(*flatten(ids), weights, norm)

    def pool_array(
        self, flat: np.ndarray, lengths: np.ndarray, weights: np.ndarray | None = None, norm: str = "tokens"
    ) -> np.ndarray:
        """:meth:`pool_ids` on ``(flat ids, lengths)`` (from :meth:`token_array`)."""
        from scipy.sparse import csr_matrix

        n = len(lengths)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        data = np.ones(flat.size, dtype=np.float64) if weights is None else np.asarray(weights, dtype=np.float64)[flat]
        if norm == "tokens":
            denom = lengths.astype(np.float64)
        elif norm == "weights":
            denom = np.bincount(np.repeat(np.arange(n), lengths), weights=data, minlength=n)
        else:
            denom = np.ones(n)
        scale = np.divide(1.0, denom, out=np.zeros_like(denom), where=denom > 0)
        data *= np.repeat(scale, lengths)
        matrix = csr_matrix((data.astype(np.float32), flat, indptr), shape=(n, len(self)))
        return np.asarray(matrix @ self.vectors, dtype=np.float32)


class TableTokenizer:
    """The few methods of a Hugging Face tokenizer that :mod:`isotropy.encoders.token_stats` calls, over a
    :class:`StaticTable`'s tokenizer (so ``sif``/``idf`` counts reuse that machinery unchanged)."""

    all_special_ids: list[int] = []

    def __init__(self, table: StaticTable) -> None:
        self.table = table
        self.unk_token_id = table.unk_id

    def __len__(self) -> int:
        return len(self.table)

    def get_vocab(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.table.tokens)}

    def __call__(self, texts: str | Sequence[str], add_special_tokens: bool = False, **_: Any) -> dict[str, Any]:
        single = isinstance(texts, str)
        ids, _, _ = self.table.token_ids([texts] if single else texts)
        return {"input_ids": ids[0] if single else ids}
