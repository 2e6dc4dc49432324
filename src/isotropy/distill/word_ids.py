"""The static model's token ids of the corpus pass's texts, each distinct word tokenised once (the distill package, above calibration).

``isotropy distill --corpus`` tokenises every line of the corpus and every span made from it (halves, word-dropped
and run-cut copies: words of the line joined by one space), so almost every word it tokenises it has tokenised
before. :class:`WordIds` returns exactly what model2vec's ``StaticModel.tokenize`` followed by the ``max_length``
cut returns (:func:`tokenized`, the path every text took before), but hands the tokenizer each distinct word once:

* a text is split here only where that is provably the same: the tokenizer is BERT's family (``BertNormalizer`` +
  ``BertPreTokenizer`` + a WordPiece/WordLevel/BPE model without dropout, read by
  :func:`~isotropy.encoders.static.wordcache.tokenizer_family`), no padding (model2vec's fixed length 0 pads
  nothing), truncation (model2vec sets it to the
  model's ``max_length``) keeping the first tokens, no added token whose text holds a space, and every character
  of the text printable ASCII (0x20-0x7E). On such a text the normaliser maps each character alone (lower case),
  the pre-tokenizer cuts at every space and around every punctuation mark, and the model takes each pre-token
  alone, so the text's ids are the concatenation of the ids of its space-separated words (``str.split`` and BERT's
  whitespace agree on printable ASCII), each tokenised alone; an added token cannot reach across a space. Every
  other text, and every text of any other tokenizer (byte-level BPE, Metaspace, another normaliser), goes to
  ``StaticModel.tokenize`` in the same call, in order;
* the cut is model2vec's: the tokenizer's truncation keeps the first ``truncation.max_length`` ids (unknown ones
  counted; a word alone is truncated the same way, which never changes the concatenation's first ids), then
  ``tokenize`` drops the unknown id, then the first ``max_length`` of what is left are kept.

Hand-written because no library tokenises a batch through a word cache: the words' ids sit in one flat array and a
text's ids are gathered from it with numpy (a ragged gather: the word index of every occurrence, then its pieces),
not by a Python loop per token. The cache (word -> its ids) belongs to one pass (one ``fit_corpus`` call, one Dask
part) and is emptied when it would pass ``max_words`` words.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..encoders.static.wordcache import MAX_WORDS, assemble, tokenizer_family, tokenizer_spec, truncate

__all__ = ["WordIds", "static_ids", "tokenized"]


def tokenized(static: Any, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(flat ids, tokens per sentence)`` as the static model's ``encode`` averages them (its ``tokenize``: unknown
    tokens dropped; then at most ``max_length`` each): the tokenizer on every sentence."""
    ids = static.tokenize(sentences) if sentences else []
    limit = getattr(static, "max_length", None)
    if limit:
        ids = [row[:limit] for row in ids]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
    return flat, lengths


def static_ids(static: Any, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`tokenized`'s ids, through a word cache made for this one call (:class:`WordIds`)."""
    return WordIds(static)(sentences)


def _word_tokenizer(static: Any) -> tuple[Any, int | None] | None:
    """The static model's tokenizer and its truncation length where a text's ids are its words' ids (module
    docs), else None."""
    tok = getattr(static, "tokenizer", None)
    if tok is None or not hasattr(tok, "encode_batch_fast") or not hasattr(static, "unk_token_id"):
        return None
    try:
        family = tokenizer_family(tokenizer_spec(tok))
    except (AttributeError, TypeError, ValueError):  # not a Hugging Face ``tokenizers.Tokenizer``
        return None
    pad = tok.padding  # model2vec "disables" padding as a fixed length of 0, which pads nothing
    if (
        family is None
        or family[0] != "bert"
        or not (pad is None or (pad.get("length") == 0 and not pad.get("pad_to_multiple_of")))
    ):
        return None
    cut = tok.truncation
    if cut is not None and (
        cut.get("direction", "right") != "right" or cut.get("strategy") not in ("longest_first", "only_first")
    ):
        return None
    if any(" " in t.content for t in tok.get_added_tokens_decoder().values()):
        return None
    return tok, (None if cut is None else int(cut["max_length"]))


class WordIds:
    """``ids(sentences)`` equal to :func:`tokenized` (module docs), each distinct word tokenised once per cache."""

    def __init__(self, static: Any, max_words: int = MAX_WORDS) -> None:
        self.static = static
        self.max_words = int(max_words)
        self.limit = getattr(static, "max_length", None) or None
        found = _word_tokenizer(static)
        self.tokenizer, self.truncation = found if found is not None else (None, None)
        self.unk_id = getattr(static, "unk_token_id", None)
        self._clear()

    @property
    def exact(self) -> bool:
        """Whether printable-ASCII texts are split into words here (else every text goes to the tokenizer)."""
        return self.tokenizer is not None

    def __call__(self, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        sentences = list(sentences)
        n = len(sentences)
        if self.tokenizer is None or not n:
            return tokenized(self.static, sentences)
        fast = np.fromiter((s.isascii() and s.isprintable() for s in sentences), dtype=bool, count=n)
        if fast.all():
            return self._words(sentences)
        rows, others = np.flatnonzero(fast), np.flatnonzero(~fast)
        parts = [(others, *tokenized(self.static, [sentences[i] for i in others.tolist()]))]
        if rows.size:
            parts.insert(0, (rows, *self._words([sentences[i] for i in rows.tolist()])))
        return assemble(n, parts)

    def _words(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Printable-ASCII texts: their words' cached ids gathered, cut, unknown ids dropped, cut again."""
        split = [t.split() for t in texts]
        per_text = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
        words = list(itertools.chain.from_iterable(split))
        distinct = set(words)
        new = distinct.difference(self._rows)
        if new and len(self._rows) + len(new) > self.max_words:
            self._clear()  # one call's own words are all kept, even past the cap: the next call empties them
            new = distinct
        if new:
            self._add(list(new))
        row = np.fromiter(map(self._rows.__getitem__, words), dtype=np.int64, count=len(words))
        count, first = self._count[row], self._first[row]
        total = int(count.sum())
        flat = self._pieces[np.repeat(first - (np.cumsum(count) - count), count) + np.arange(total)]
        ends = np.concatenate([[0], np.cumsum(count)])
        last = np.cumsum(per_text)
        lengths = ends[last] - ends[last - per_text]  # ids per text
        flat, lengths = truncate(flat, lengths, self.truncation)  # the tokenizer's own cut: unknown ids counted
        if self.unk_id is not None:  # model2vec's tokenize drops the unknown id
            known = flat != self.unk_id
            if not known.all():
                text = np.repeat(np.arange(lengths.size), lengths)
                lengths = np.bincount(text[known], minlength=lengths.size).astype(np.int64)
                flat = flat[known]
        return truncate(flat, lengths, self.limit)

    def _add(self, words: list[str]) -> None:
        """Tokenise ``words`` (not cached yet) alone, in one batch, and cache their ids."""
        ids = [e.ids for e in self.tokenizer.encode_batch_fast(words, add_special_tokens=False)]
        count = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        pieces = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(count.sum()))
        base = len(self._rows)
        self._rows.update(zip(words, range(base, base + len(words))))
        self._first = np.concatenate([self._first, self._pieces.size + np.cumsum(count) - count])
        self._count = np.concatenate([self._count, count])
        self._pieces = np.concatenate([self._pieces, pieces])

    def _clear(self) -> None:
        self._rows: dict[str, int] = {}  # word -> its row of _first/_count: where its ids start in _pieces, how many
        self._first = self._count = self._pieces = np.empty(0, dtype=np.int64)
