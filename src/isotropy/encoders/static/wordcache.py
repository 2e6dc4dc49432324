"""Static tokenisation without the tokenizer: split, look words up in a bounded cache, expand (layer 4).

A mean over a static table ignores word order, and for the tokenizers this module accepts a word's pieces do
not depend on its neighbours once the pre-tokenizer has split the text (WordPiece, WordLevel and BPE take each
pre-token alone). So a sentence's ids are the concatenation of its words' ids, and the Hugging Face tokenizer
only has to see a word the first time: :class:`WordCache` splits a chunk of sentences with numpy, looks each
word's ids up in a bounded hash table (a miss runs the tokenizer's own model on that word), and returns exactly what
:meth:`StaticTable.token_array` returns (same ids, same truncation, same unknown-token accounting).

Exactness is by construction, not by approximation, and only where it can be proved:

* the tokenizer must be one of two families, read from its ``tokenizer.json``: the word tables' own
  (``Lowercase`` or no normalizer, ``Split`` on :data:`~isotropy.encoders.static.table.WORD_PATTERN`) or BERT's
  (``BertNormalizer`` + ``BertPreTokenizer``); BPE with dropout, ``Metaspace``/``ByteLevel`` pre-tokenizers
  (pieces depend on the word's position), any other normalizer: every sentence goes to the tokenizer;
* a sentence is split here only when every character is printable ASCII (0x20-0x7E), where the normalizers
  reduce to ASCII lower-casing and the pre-tokenizers to "alphanumeric runs and single punctuation marks", and
  when it holds no added token's text (the tokenizer matches those before normalising); every other sentence
  (accents, CJK, emoji, tabs, control characters) is tokenised by the tokenizer, in the same call;
* the word pattern's English clitics (``do|n't``, ``it|'s``) make its splits depend on the apostrophe's
  neighbours: :func:`_bounds` applies the pattern's rules, and the one case they would need a scan for (an
  apostrophe, a run, then ``n't``) is split by Python's ``re`` with the same pattern (on printable ASCII, ``re``
  and the tokenizer's Oniguruma agree on ``\\w`` and ``\\s``);
* truncation is model2vec's: the caller's character cut, then the first ``max_length`` tokens, unknown tokens
  counted, then the unknown tokens dropped when the table drops them.

Hand-written rather than a library call because no library splits a batch of sentences into word keys in
vectorised form; the splitting rules are checked against the tokenizer itself in ``tests/test_wordcache.py``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from .table import WORD_PATTERN, StaticTable, cut_characters, truncate

__all__ = ["WordCache", "assemble", "tokenizer_family", "tokenizer_spec", "truncate"]

MAX_WORDS = 1 << 19  # words cached in each of the two caches (~100 MB at most in all): a full cache is emptied


def tokenizer_family(spec: dict[str, Any]) -> tuple[str, bool] | None:
    """``(family, lowercase)`` of a ``tokenizer.json`` this module splits exactly, else None.

    ``word``: a word table's tokenizer (Split on WORD_PATTERN, removed, inverted; Lowercase or no normalizer);
    ``bert``: BertNormalizer + BertPreTokenizer. The model must take words alone (no BPE dropout)."""
    model = spec.get("model") or {}
    if model.get("type") not in ("WordLevel", "WordPiece", "BPE") or model.get("dropout"):
        return None
    norm, pre = spec.get("normalizer"), spec.get("pre_tokenizer") or {}
    if pre.get("type") == "Split":
        pattern = (pre.get("pattern") or {}).get("Regex")
        if pattern != WORD_PATTERN or pre.get("behavior") != "Removed" or not pre.get("invert"):
            return None
        if norm is None or norm.get("type") == "Lowercase":
            return "word", norm is not None
        return None
    if pre.get("type") == "BertPreTokenizer" and (norm or {}).get("type") == "BertNormalizer":
        return "bert", bool(norm.get("lowercase", True))
    return None


def tokenizer_spec(tok: Any) -> dict[str, Any]:
    """The parts of a tokenizer's ``tokenizer.json`` that :func:`tokenizer_family` reads, without serialising its
    vocabulary (seconds for GloVe's 400k words)."""
    parts = {}
    for name in ("normalizer", "pre_tokenizer"):
        part = getattr(tok, name)
        parts[name] = None if part is None else json.loads(part.__getstate__())
    parts["model"] = {"type": type(tok.model).__name__, "dropout": getattr(tok.model, "dropout", None)}
    return parts


def _classes(family: str) -> tuple[np.ndarray, np.ndarray]:
    """Per byte: part of a word (``\\w`` for the word pattern, alphanumeric for BERT); a one-character token."""
    word = np.zeros(256, dtype=bool)
    for lo, hi in (("a", "z"), ("A", "Z"), ("0", "9")):
        word[ord(lo) : ord(hi) + 1] = True
    if family == "word":
        word[ord("_")] = True
    mark = np.zeros(256, dtype=bool)
    mark[0x21:0x7F] = True
    mark &= ~word
    return word, mark


class WordCache:
    """:meth:`token_array` equal to ``table.token_array`` (see the module docs), faster on repeated words."""

    def __init__(self, table: StaticTable, max_words: int = MAX_WORDS) -> None:
        self.table = table
        self.max_words = int(max_words)
        tok = table.tokenizer
        found = tokenizer_family(tokenizer_spec(tok))
        self.family, self.lowercase = found if found is not None else (None, False)
        self.added = [t.content for t in tok.get_added_tokens_decoder().values() if t.content]
        self._model = tok.model
        longest = sorted(self.added, key=len, reverse=True)  # one scan for all of them, in any case
        self._added = re.compile("|".join(map(re.escape, longest)), re.IGNORECASE) if longest else None
        self._word, self._mark = _classes(self.family or "word")
        self._lower = np.arange(256, dtype=np.uint8)
        if self.lowercase:
            self._lower[ord("A") : ord("Z") + 1] += 32
        self._pattern = re.compile(WORD_PATTERN)
        self._by_text: dict[str, tuple[int, ...]] = {}  # long words and the regex path's words
        self._lock = threading.Lock()  # the cache's arrays
        self._tokenizing = threading.Lock()  # the tokenizer: setting its truncation borrows it mutably
        self._clear()

    def __getstate__(self) -> dict[str, Any]:  # an encoder sent to another process: locks made anew, caches empty
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_tokenizing")}
        state["_by_text"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock, self._tokenizing = threading.Lock(), threading.Lock()
        self._clear()

    @property
    def exact(self) -> bool:
        """Whether sentences are split here (True) or all handed to the tokenizer (False)."""
        return self.family is not None

    # ------------------------------------------------------------------ the cache

    def _ids(self, word: str) -> tuple[int, ...]:
        """The ids of one pre-token: the tokenizer's model on it (what the tokenizer does to each pre-token)."""
        return tuple(t.id for t in self._model.tokenize(word))

    def _text_ids(self, word: str) -> tuple[int, ...]:
        ids = self._by_text.get(word)
        if ids is None:
            if len(self._by_text) >= self.max_words:
                self._by_text.clear()
            ids = self._by_text[word] = self._ids(word)
        return ids

    # ------------------------------------------------------------------ tokenising

    def token_array(self, sentences: Sequence[str], max_length: int | None = None) -> tuple[np.ndarray, np.ndarray, int, int]:
        """``(flat ids, length per sentence, tokens, unknown tokens)``, as :meth:`StaticTable.token_array`."""
        table = self.table
        if self.family is None:
            with self._tokenizing:
                return table.token_array(sentences, max_length)
        limit = table.max_length if max_length is None else max_length
        sentences = cut_characters(sentences, limit, table.chars_per_token)
        codes, begins, fast, regex, slow = self._route(sentences)
        parts, total, unknown = [], 0, 0
        pieces = [(fast, lambda: self._split(codes, begins, fast)), (regex, lambda: self._regex([sentences[i] for i in regex]))]
        for rows, split in pieces:
            if rows.size:
                flat, lengths = truncate(*split(), limit)  # (a word start without its end would raise)
                flat, lengths, seen, unk = self._drop_unknown(flat, lengths)
                parts.append((rows, flat, lengths))
                total, unknown = total + seen, unknown + unk
        if slow.size:
            with self._tokenizing:
                flat, lengths, seen, unk = table.token_array([sentences[i] for i in slow.tolist()], limit)
            parts.append((slow, flat, lengths))
            total, unknown = total + seen, unknown + unk
        flat, lengths = assemble(len(sentences), parts)
        return flat, lengths, total, unknown

    def _drop_unknown(self, flat: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
        """Count the unknown tokens and leave them out when the table does (as ``StaticTable.token_array``)."""
        unk_id, total, unknown = self.table.unk_id, int(flat.size), 0
        if unk_id is not None:
            known = flat != unk_id
            unknown = total - int(known.sum())
            if unknown and self.table.drop_unknown:
                rows = np.repeat(np.arange(len(lengths)), lengths)
                lengths = np.bincount(rows[known], minlength=len(lengths)).astype(np.int64)
                flat = flat[known]
        return flat, lengths, total, unknown

    def _route(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The chunk's code points (sentences joined by a newline) and where each sentence begins, and the indices
        of the sentences split with numpy, split with ``re`` (word pattern: an apostrophe before a run ending in
        ``n't``), or tokenised (a character outside printable ASCII, or an added token's text in any case)."""
        n = len(sentences)
        text = "\n".join(sentences)
        sizes = np.fromiter(map(len, sentences), dtype=np.int64, count=n)
        begins = np.cumsum(sizes + 1) - sizes - 1
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
        codes[begins[1:] - 1] = 0x20  # the separators
        slow = np.zeros(n, dtype=bool)
        outside = (codes < 0x20) | (codes > 0x7E)
        bad = np.flatnonzero(outside)
        slow[np.searchsorted(begins, bad, side="right") - 1] = True
        if self._added is not None:
            at = [m.start() for m in self._added.finditer(text)]
            slow[np.searchsorted(begins, np.asarray(at, dtype=np.int64), side="right") - 1] = True
        regex = np.zeros(n, dtype=bool)
        if self.family == "word" and "'" in text:  # an apostrophe, a run, then n't: left to re (see _bounds)
            flags = re.IGNORECASE if self.lowercase else 0
            at = [m.start() for m in re.finditer(r"'[A-Za-z0-9_]*n't", text, flags)]
            regex[np.searchsorted(begins, np.asarray(at, dtype=np.int64), side="right") - 1] = True
            regex &= ~slow
        fast = ~(slow | regex)
        codes[outside] = 0x20
        codes[begins[1:] - 1] = 0x0A
        return codes.astype(np.uint8), begins, np.flatnonzero(fast), np.flatnonzero(regex), np.flatnonzero(slow)

    def _regex(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Printable-ASCII sentences split by Python's ``re`` with the word pattern: flat ids and lengths."""
        ids: list[int] = []
        lengths = np.empty(len(sentences), dtype=np.int64)
        find, word_ids = self._pattern.findall, self._text_ids
        for j, s in enumerate(sentences):
            before = len(ids)
            for w in find(s.lower() if self.lowercase else s):
                ids.extend(word_ids(w))
            lengths[j] = len(ids) - before
        return np.asarray(ids, dtype=np.int64), lengths

    def _split(self, codes: np.ndarray, begins: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ids of sentences ``rows`` of the chunk (:meth:`_route`'s bytes), split with numpy (:func:`_bounds`),
        each word's ids from the cache: flat ids and lengths of those sentences."""
        b = self._lower[codes] if self.lowercase else codes.copy()  # printable ASCII: what the normalizers do
        if rows.size < begins.size:  # the other sentences' characters become spaces
            mine = np.zeros(begins.size, dtype=bool)
            mine[rows] = True
            b[~np.repeat(mine, np.diff(np.append(begins, b.size + 1)))[: b.size]] = 0x20
        starts, ends = _bounds(b, self._word, self._mark, self.family == "word")
        if starts.size != ends.size:  # pragma: no cover - the rules are complete (tests/test_wordcache.py)
            raise RuntimeError("word cache: unpaired word bounds")
        cuts = np.concatenate([[0], np.searchsorted(starts, begins[1:] - 1), [starts.size]])
        keep = np.zeros(starts.size, dtype=bool)  # the tokens of sentences ``rows``
        words = np.diff(cuts)[rows]
        keep[np.repeat(cuts[rows] - np.concatenate([[0], np.cumsum(words)[:-1]]), words) + np.arange(int(words.sum()))] = True
        starts, ends = starts[keep], ends[keep]
        first, count, pieces = self._lookup(b, starts, ends)
        if count.size and int(count.min()) == 1 == int(count.max()):
            return pieces[first], words
        out = np.cumsum(count) - count
        flat = pieces[np.repeat(first - out, count) + np.arange(int(count.sum()))]
        total = np.concatenate([[0], np.cumsum(count)])
        ends_at = np.cumsum(words)
        return flat, total[ends_at] - total[ends_at - words]

    def _lookup(self, b: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per word: where its ids start in the returned pieces array, and how many there are. Words of up to
        15 bytes are found by their bytes (a 128-bit key, hashed to 64 bits for the sorted search, then checked
        whole); longer ones, and the rare hash collision, by their text in a dict."""
        size = ends - starts
        fits = np.flatnonzero(size <= 2 * 8 - 1)
        lo, hi, key = _keys(b, starts[fits], size[fits])
        with self._lock:
            found = self._find(lo, hi, key)
            missing = np.flatnonzero(found < 0)
            if missing.size:
                _, at = np.unique(key[missing], return_index=True)
                rows = fits[missing[at]]
                words = [b[x:y].tobytes().decode() for x, y in zip(starts[rows].tolist(), ends[rows].tolist())]
                self._insert(lo[missing[at]], hi[missing[at]], key[missing[at]], [self._ids(w) for w in words])
                found = self._find(lo, hi, key)
            pieces, first_of, count_of = self._pieces, self._first, self._count
        first = np.empty(starts.size, dtype=np.int64)
        count = np.empty(starts.size, dtype=np.int64)
        ok = found >= 0
        first[fits[ok]], count[fits[ok]] = first_of[found[ok]], count_of[found[ok]]
        other = np.ones(starts.size, dtype=bool)
        other[fits[ok]] = False
        rest = np.flatnonzero(other)
        if not rest.size:
            return first, count, pieces
        ids = [self._text_ids(b[x:y].tobytes().decode()) for x, y in zip(starts[rest].tolist(), ends[rest].tolist())]
        count[rest] = [len(i) for i in ids]
        first[rest] = pieces.size + np.cumsum(count[rest]) - count[rest]
        extra = np.fromiter((i for w in ids for i in w), dtype=np.int64, count=int(count[rest].sum()))
        return first, count, np.concatenate([pieces, extra])

    def _find(self, lo: np.ndarray, hi: np.ndarray, key: np.ndarray) -> np.ndarray:
        """Cache row of each word (-1: not cached): an open-addressing hash table, at most half full and no larger,
        probed in vectorised steps (a sorted array's binary search took four times as long)."""
        if not self._count.size:
            return np.full(key.size, -1, dtype=np.int64)
        mask = self._slots.size - 1
        slot = (key >> np.uint64(64 - self._bits)).astype(np.int64)
        row = self._slots[slot].astype(np.int64)
        entry = self._entries[np.maximum(row, 0)]  # key, lo, hi: one gather of 24 bytes a word
        match = (row >= 0) & (entry[:, 0] == key) & (entry[:, 1] == lo) & (entry[:, 2] == hi)
        found = np.where(match, row, -1)
        pending = np.flatnonzero((row >= 0) & ~match)
        while pending.size:  # the rare collision: the next slots
            slot[pending] = (slot[pending] + 1) & mask
            row = self._slots[slot[pending]].astype(np.int64)
            entry = self._entries[np.maximum(row, 0)]
            match = (row >= 0) & (entry[:, 0] == key[pending]) & (entry[:, 1] == lo[pending]) & (entry[:, 2] == hi[pending])
            found[pending[match]] = row[match]
            pending = pending[(row >= 0) & ~match]
        return found

    def _insert(self, lo: np.ndarray, hi: np.ndarray, key: np.ndarray, ids: list[tuple[int, ...]]) -> None:
        """Add words (not cached yet, distinct keys) to the cache, emptied first when it would pass ``max_words``."""
        if self._count.size + key.size > self.max_words:
            self._clear()
        count = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        first = self._pieces.size + np.cumsum(count) - count
        self._pieces = np.concatenate([self._pieces, np.fromiter((i for w in ids for i in w), dtype=np.int64)])
        self._entries = np.concatenate([self._entries, np.stack([key, lo, hi], axis=1)])
        self._first = np.concatenate([self._first, first])
        self._count = np.concatenate([self._count, count])
        rows = range(self._count.size - key.size, self._count.size)
        if 2 * self._count.size > self._slots.size:  # grow: every word is placed again
            self._bits = (2 * self._count.size).bit_length()
            self._slots = np.full(1 << self._bits, -1, dtype=np.int32)
            rows = range(self._count.size)
        mask, shift, slots = self._slots.size - 1, 64 - self._bits, self._slots
        for r, k in zip(rows, self._entries[rows.start :, 0].tolist()):  # new words only, but for a growth
            slot = k >> shift
            while slots[slot] >= 0:
                slot = (slot + 1) & mask
            slots[slot] = r

    def _clear(self) -> None:
        self._entries = np.empty((0, 3), dtype=np.uint64)  # per word: its hash, its bytes 0-7, bytes 8-14 and length
        self._first = self._count = self._pieces = np.empty(0, dtype=np.int64)
        self._bits = 12
        self._slots = np.full(1 << self._bits, -1, dtype=np.int32)


_K1, _K2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)  # odd multipliers mixing the two halves
_LO = np.array([(1 << (8 * min(n, 8))) - 1 for n in range(16)], dtype=np.uint64)
_HI = np.array([(1 << (8 * max(n - 8, 0))) - 1 for n in range(16)], dtype=np.uint64)


def _keys(b: np.ndarray, starts: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Words of up to 15 bytes as two integers (bytes 0-7; bytes 8-14 and the length) and a 64-bit hash of both."""
    padded = np.zeros(b.size + 16, dtype=np.uint8)
    padded[: b.size] = b
    windows = np.lib.stride_tricks.as_strided(padded, shape=(b.size, 16), strides=(1, 1))
    raw = np.ascontiguousarray(windows[starts]).view("<u8").reshape(-1, 2)
    lo = raw[:, 0] & _LO[size]
    hi = raw[:, 1] & _HI[size] | (size.astype(np.uint64) << np.uint64(56))
    return lo, hi, lo * _K1 + hi * _K2


def _bounds(b: np.ndarray, word: np.ndarray, mark: np.ndarray, clitics: bool) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every word in ``b``: runs of ``word`` bytes and single ``mark`` bytes, and with
    ``clitics`` the word pattern's apostrophe rules: ``n't`` is a word (``do|n't``), an apostrophe followed by
    a run starts a word that takes the run (``it|'s``). (A run ending in ``n't`` that an apostrophe precedes
    is the one case left to ``re``.)"""
    w, n = word[b], b.size
    edge = np.zeros(n + 1, dtype=bool)
    edge[1:-1] = w[1:] != w[:-1]
    if n:
        edge[0], edge[-1] = w[0], w[-1]
    first = (edge[:-1] & w) | mark[b]
    last = (edge[1:] & w) | mark[b]
    if clitics:
        ap = np.flatnonzero(b == 0x27)
        nxt = np.minimum(ap + 1, max(n - 1, 0))
        after = (ap + 1 < n) & w[nxt]
        nt = (ap > 0) & (b[np.maximum(ap - 1, 0)] == ord("n")) & (ap + 1 < n) & (b[nxt] == ord("t"))
        c = ap[after & ~nt]  # 'x...: the apostrophe starts a word, the run after it joins it
        last[c], first[c + 1] = False, False
        a = ap[nt]  # n't
        first[a], last[a], first[a + 1], last[a + 1] = False, False, False, True
        first[a - 1], last[a - 1] = True, False
        before = a[(a >= 2)]
        before = before[w[before - 2]]
        last[before - 2] = True
        rest = a[a + 2 < n]
        rest = rest[w[rest + 2]]
        first[rest + 2] = True
    return np.flatnonzero(first), np.flatnonzero(last) + 1


def assemble(n: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Flat ids and lengths of ``n`` sentences from parts ``(sentence indices, flat ids, lengths)`` (in order)."""
    lengths = np.zeros(n, dtype=np.int64)
    for rows, _, part_lengths in parts:
        lengths[rows] = part_lengths
    if len(parts) == 1 and np.array_equal(parts[0][0], np.arange(n)):
        return parts[0][1], lengths
    offsets = np.cumsum(lengths) - lengths
    flat = np.empty(int(lengths.sum()), dtype=np.int64)
    for rows, part_flat, part_lengths in parts:
        inner = np.arange(part_flat.size) - np.repeat(np.cumsum(part_lengths) - part_lengths, part_lengths)
        flat[np.repeat(offsets[rows], part_lengths) + inner] = part_flat
    return flat, lengths
