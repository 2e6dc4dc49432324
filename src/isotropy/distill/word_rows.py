"""Whole-word rows (``isotropy distill --corpus --words N``): the corpus's most frequent words that the teacher's
tokenizer splits, handed to model2vec's distill as its ``vocabulary`` (the distill package, beside the corpus pass).

model2vec 0.10 (``model2vec.tokenizer.clean_and_create_vocabulary``) preprocesses each word it is given with the
teacher tokenizer's normalizer and pre-tokenizer: a word that stays one pre-token joins the tokenizer's model
vocabulary as a whole token (its row: the teacher's vector of the word, as for every token), a word that becomes
several pre-tokens becomes an "added token" matched before normalisation, and a word already in the vocabulary is
dropped. The counting here agrees with that: each corpus line goes through the tokenizer's own normalizer (an uncased
tokenizer lower-cases and strips accents), is split into words by the static tables' word pattern
(:data:`~isotropy.encoders.static.table.WORD_PATTERN`, the library's word splitting), and a word is kept only when
the normalizer leaves it as it is, the pre-tokenizer leaves it one pre-token (so it becomes a whole token, never an
added token, and the student's tokenization of the corpus sees it as one token: the corpus fit then fits its row as
any other), and the tokenizer's model splits it into two or more tokens. Words are ranked by their count, ties by
the word, so a corpus gives the same list on every run.

Why: the 12k-line round of RESULTS `static-factory` found these rows worse; issue #43 asks for the measurement at
100k lines and more, where the corpus has the text to fit them.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Any

from ..calibration.corpus import Corpus
from ..encoders.static.table import WORD_PATTERN
from ..errors import IsotropyError

__all__ = ["check_words", "frequent_split_words", "teacher_tokenizer", "words_digest", "words_record", "WORD_CHUNK"]

WORD_CHUNK = 4096  # corpus lines read at a time while counting


def check_words(words: Any, corpus: Any, source: Corpus | None) -> int:
    """``words`` as a count (0: none), refused before any work: a whole number >= 0, only with a corpus that can be
    read twice (the count, then the pass: standard input is read once)."""
    if words is None:
        return 0
    if isinstance(words, bool) or not hasattr(words, "__index__") or int(words) < 0:  # int, numpy's integers
        raise IsotropyError(f"--words must be a whole number of words >= 0, got {words!r}")
    n = int(words)
    if n and corpus is None:
        raise IsotropyError("--words adds rows for the corpus's frequent words: give --corpus, or leave --words out")
    if n and source is not None and source.stdin:
        raise IsotropyError(
            "--words counts the corpus's words before the fit reads it, and standard input is read once: give --corpus a file"
        )
    return n


def teacher_tokenizer(model: Any) -> Any:
    """The teacher's fast tokenizer (a ``tokenizers.Tokenizer``), loaded as model2vec's distill loads it."""
    from transformers import AutoTokenizer

    from ..encoders.models import quiet_transformers, resolve_model

    path, name = resolve_model(model)
    try:
        with quiet_transformers():
            tok = AutoTokenizer.from_pretrained(str(path) if path is not None else name, use_fast=True)
    except (OSError, ValueError) as exc:
        raise IsotropyError(f"cannot read the tokenizer of {name!r} for --words: {' '.join(str(exc).split())[:200]}") from None
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        raise IsotropyError(f"--words needs a fast tokenizer, and {name!r} has none")
    return backend


def _whole_token(tok: Any, word: str) -> bool:
    """``word`` (already normalised) stays one pre-token, is not a vocabulary entry, and the model splits it."""
    norm, pre = tok.normalizer, tok.pre_tokenizer
    if norm is not None and norm.normalize_str(word) != word:
        return False
    if pre is not None and [p for p, _ in pre.pre_tokenize_str(word)] != [word]:
        return False
    if tok.token_to_id(word) is not None:
        return False
    return len(tok.model.tokenize(word)) >= 2


def _normaliser(tok: Any) -> Any:
    """What ``tok``'s normalizer does to a line. The tokenizers' ``normalize_str`` costs ~0.1 ms a line (3 s for 20k
    wiki lines), so for the two families the word cache splits exactly (:func:`~isotropy.encoders.static.wordcache.
    tokenizer_family`) a printable-ASCII line takes the shortcut that module proves: the normalizer is then ASCII
    lower-casing or nothing; every other line, and every line of any other tokenizer, goes to the normalizer."""
    from ..encoders.static.wordcache import tokenizer_family, tokenizer_spec

    norm = tok.normalizer
    if norm is None:
        return str
    found = tokenizer_family(tokenizer_spec(tok))
    if found is None:
        return norm.normalize_str
    lower = found[1]

    def normalise(line: str) -> str:
        if line.isascii() and line.isprintable():
            return line.lower() if lower else line
        return norm.normalize_str(line)

    return normalise


def frequent_split_words(source: Corpus, tok: Any, n: int) -> list[str]:
    """The ``n`` most frequent words of ``source`` that ``tok`` splits into two or more tokens and model2vec would
    add as whole tokens (module docs), most frequent first (fewer when the corpus has fewer)."""
    if n <= 0:
        return []
    find, normalise = re.compile(WORD_PATTERN).findall, _normaliser(tok)
    counts: Counter[str] = Counter()
    for chunk in source.chunks(WORD_CHUNK):
        counts.update(find("\n".join(map(normalise, chunk))))
    out: list[str] = []
    for word, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if _whole_token(tok, word):
            out.append(word)
            if len(out) == n:
                break
    return out


def words_digest(words: list[str]) -> str:
    """The sha256 of the sorted words, one a line (the distilled-table cache's key part)."""
    return hashlib.sha256("\n".join(sorted(words)).encode("utf-8")).hexdigest()


def words_record(static: Any, words: list[str], n: int) -> dict[str, int]:
    """What ``isotropy.json`` records of ``--words n`` (nothing for 0): ``words`` (n) and ``words_added``, how many of
    ``words`` the distilled model's tokenizer (``static.tokenizer``) encodes as one token."""
    if not n:
        return {}
    added = sum(len(static.tokenizer.encode(w, add_special_tokens=False).ids) == 1 for w in words)
    return {"words": int(n), "words_added": int(added)}
