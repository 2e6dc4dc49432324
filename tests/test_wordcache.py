"""The static word-cache tokenisation (#33): the same ids, lengths and unknown counts as the table's tokenizer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isotropy.encoders.static import StaticTable
from isotropy.encoders.static.table import UNK, word_tokenizer
from isotropy.encoders.static.wordcache import WordCache

WORDS = ["a", "b", "n", "t", "ab", "ba", "do", "n't", "'s", "'t", "'n", "_", ".", "'", "tab", "aaaaaaaaaaaaaaaa", "abababab"]
PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b", "n", "t", "ab", "##a", "##b", "##n", "##t", "##ab", ".", "'", "_", "#"]
# characters that meet every rule: word characters, the clitic letters, apostrophes, punctuation, case, whitespace,
# control characters, accents, CJK, emoji, the added tokens' letters
ALPHABET = "abntABNT'_.# \t\n\x01\x7f\u00e9e\u0301\u4e2d\U0001f600[]CLS"
ADVERSARIAL = [
    "",
    " ",
    "don't it's rock'n'roll n't 'n't x'n't n'tn't '''",
    "DON'T IT'S",
    "a" * 40 + " " + "ab" * 9 + " " + "b" * 15 + " " + "a" * 16,
    "caf\u00e9 cafe\u0301 \u4e2d\u6587 \U0001f600 emoji",
    "tab\there\nnewline\x00nul\x1fcontrol\x7f",
    "[CLS] a [cls] b [SEP]",
    "a_b __ a.b ... #a ##a",
    " ".join(["a", "b"] * 300),  # longer than any max_length used here
]


def _word_table(lowercase: bool, max_length: int | None, chars: int | None) -> StaticTable:
    tokens = [*WORDS, UNK]
    vectors = np.random.default_rng(0).standard_normal((len(tokens), 4)).astype(np.float32)
    make = word_tokenizer(tokens, UNK, lowercase)
    return StaticTable(
        tokens, vectors, make, unk_id=len(WORDS), lowercase=lowercase, max_length=max_length, chars_per_token=chars
    )


def _bert_table(drop_unknown: bool, max_length: int | None, chars: int | None) -> StaticTable:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(PIECES)}, unk_token="[UNK]", max_input_chars_per_word=12))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.add_special_tokens(["[CLS]", "[SEP]"])
    vectors = np.random.default_rng(1).standard_normal((len(PIECES), 4)).astype(np.float32)
    return StaticTable(PIECES, vectors, tok, unk_id=1, drop_unknown=drop_unknown, max_length=max_length, chars_per_token=chars)


def _assert_same(table: StaticTable, cache: WordCache, sentences: list[str], limit: int | None) -> None:
    want, got = table.token_array(sentences, limit), cache.token_array(sentences, limit)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1]), (sentences, want, got)
    assert want[2:] == got[2:], (sentences, want[2:], got[2:])


TABLES = {
    "word-lower": _word_table(True, 512, None),
    "word-cased": _word_table(False, 512, None),
    "word-short": _word_table(True, 5, 2),  # model2vec's cut: 10 characters, then 5 tokens
    "bert": _bert_table(True, 512, None),
    "bert-short-keep-unk": _bert_table(False, 4, 3),
}
CACHES = {name: WordCache(t, max_words=64) for name, t in TABLES.items()}  # small: the cache is emptied and refilled


@pytest.mark.parametrize("name", list(TABLES))
def test_the_supported_tokenizers_are_split_here(name):
    assert CACHES[name].exact and CACHES[name].family == name.split("-")[0]


@pytest.mark.parametrize("name", list(TABLES))
@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=ALPHABET, max_size=40), max_size=6), st.sampled_from([None, 3, 7]))
def test_random_text_gives_the_tokenizers_ids(name, sentences, limit):
    _assert_same(TABLES[name], CACHES[name], sentences, limit)


@pytest.mark.parametrize("name", list(TABLES))
def test_adversarial_text_gives_the_tokenizers_ids(name):
    for limit in (None, 1, 6, 100):
        _assert_same(TABLES[name], CACHES[name], ADVERSARIAL, limit)
        _assert_same(TABLES[name], CACHES[name], ADVERSARIAL[::-1] * 3, limit)


def test_a_pickled_cache_starts_empty_and_gives_the_same_ids():
    import pickle

    table, cache = TABLES["bert"], CACHES["bert"]
    cache.token_array(ADVERSARIAL, 6)
    again = pickle.loads(pickle.dumps(cache))
    assert again.exact and not again._count.size
    _assert_same(table, again, ADVERSARIAL, 6)


def test_a_tokenizer_whose_pieces_depend_on_position_is_left_to_the_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(PIECES)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    vectors = np.zeros((len(PIECES), 2), dtype=np.float32)
    table = StaticTable(PIECES, vectors, tok, unk_id=1)
    cache = WordCache(table)
    assert not cache.exact
    _assert_same(table, cache, ADVERSARIAL, 6)


def test_the_encoder_pools_the_same_vectors_across_threads(tmp_path, monkeypatch):
    from isotropy.encoders.backends import static as backend
    from isotropy.encoders.static import table as table_module

    monkeypatch.setattr(backend, "CHUNK", 7)  # many chunks, handed to the threads
    monkeypatch.setattr(table_module, "CHUNK", 7)
    table = TABLES["word-lower"]
    rng = np.random.default_rng(0)
    sentences = [" ".join(rng.choice([*WORDS, "zz", "A", "don't"], size=rng.integers(0, 9))) for _ in range(200)]
    run = backend.StaticBackend.__new__(backend.StaticBackend)  # the backend around an in-memory table
    run.table, run.words, run.coverage_total = table, None, backend.Coverage()

    class Bar:
        def advance(self, n):
            pass

    from isotropy.encoders.poolings import parse_pooling

    out = run.encode(sentences, {"last-avg": parse_pooling("last-avg")}, 512, None, Bar())["last-avg"]
    expected = table.pool(sentences, max_length=512)
    a, b = np.linalg.norm(out, axis=1), np.linalg.norm(expected, axis=1)
    assert np.array_equal(a == 0, b == 0)
    cos = (out * expected).sum(1)[a > 0] / (a * b)[a > 0]
    assert cos.min() >= 1 - 1e-6
    assert run.coverage.sentences == 200 and run.coverage.tokens == table.token_array(sentences, 512)[2]


@pytest.mark.slow
def test_sts_and_cranfield_sentences_give_the_tokenizers_ids():
    """A sample of the 7 STS tasks' sentences and Cranfield's documents (long: truncation), on GloVe's table and on
    the default model's BERT tokenizer."""
    from tokenizers import Tokenizer

    from helpers import data_dir
    from isotropy import Encoder
    from isotropy.encoders import default_model_path
    from isotropy.evaluation import load_tasks
    from isotropy.retrieval import load_cranfield

    data = data_dir()  # ../shared/data, or ISOTROPY_DATA
    if not (data / "sts").is_dir():
        pytest.skip(f"real data not found at {data} (set ISOTROPY_DATA)")
    tasks = load_tasks(data / "sts")
    sentences = [s for t in tasks for p in t.pairs()[:300] for s in (p.s1, p.s2)]
    sentences += load_cranfield(data / "retrieval" / "cranfield").docs[:300]
    glove = Encoder("glove-6b-50d").model
    bert = Tokenizer.from_file(str(Path(default_model_path()) / "tokenizer.json"))
    bert_table = StaticTable(
        [str(i) for i in range(bert.get_vocab_size())],
        np.zeros((bert.get_vocab_size(), 1), np.float32),
        bert,
        unk_id=100,
        max_length=128,
        chars_per_token=4,
    )
    for table in (glove, bert_table):
        cache = WordCache(table)
        assert cache.exact
        for limit in (None, 16):
            _assert_same(table, cache, sentences, limit)
