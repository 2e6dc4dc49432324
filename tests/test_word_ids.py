"""The corpus pass's word-cached tokenisation (encoders/static/sources.py's ``Model2VecIds``, a ``WordCache`` over a
``StaticTable`` of the model) gives model2vec's own ids, cut as before."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("model2vec")

from isotropy.distill.corpus_fit import static_ids  # noqa: E402
from isotropy.encoders.static.sources import Model2VecIds as WordIds  # noqa: E402
from isotropy.encoders.static.sources import model2vec_tokenize as tokenized  # noqa: E402

WORDS = "the cat sat on a mat run runs running dog talk talks about and sentence number new york".split()
PIECES = ["##s", "##ing", "##ed", "##er", "un", "##a", "##t", "c", "d", "m", "r", "1", "2", "##3", "##0"]
MARKS = list(".,!?'-()[]")


def bert_tokenizer(**extra):
    """A tiny BERT-family tokenizer (BertNormalizer + BertPreTokenizer + WordPiece with ``##`` pieces)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *PIECES, *MARKS])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", **extra))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.add_special_tokens(["[CLS]", "[SEP]", "[MASK]"])
    return tok


def static_model(tok, max_length=12, truncation=None):
    from model2vec import StaticModel

    rng = np.random.default_rng(0)
    model = StaticModel(rng.standard_normal((tok.get_vocab_size(), 4)).astype(np.float32), tok, max_length=max_length)
    if truncation is not None:  # the tokenizer's own cut shorter than the model's (unknown ids counted by it)
        model.tokenizer.enable_truncation(truncation)
    return model


@pytest.fixture(scope="module")
def models():
    """(model, its pass's WordIds, shared across examples so the cache is reused): the model2vec default cut, none,
    and a tokenizer cut (before the unknown ids are dropped) shorter, then longer than the model's cut (after)."""
    cuts = [(12, None), (None, None), (12, 7), (6, 14)]
    made = [static_model(bert_tokenizer(), m, t) for m, t in cuts]
    return [(m, WordIds(m)) for m in made]


plain = st.sampled_from(WORDS + ["[MASK]", "[cls]", "x[SEP]y", "[UNK]", "##s"])
odd = st.sampled_from(["a" * 101, "run" * 40, "zzqx", "qwv"])  # [UNK]: a word too long, words out of the vocabulary
glued = st.builds("".join, st.lists(st.sampled_from(WORDS + MARKS + ["1", "23", "zq"]), min_size=1, max_size=4))
word = st.one_of(plain, plain, plain, plain.map(str.upper), glued, glued, st.integers(0, 10**6).map(str), odd)
foreign = st.sampled_from(["caf\u00e9", "\u65e5\u672c", "na\u00efve", "a\tb", "x\u00a0y", "cat\x1fs", "\n"])


def joined(words, seps):
    return "".join(w + s for w, s in zip(words, seps))


ascii_text = st.builds(
    joined, st.lists(word, max_size=20), st.lists(st.sampled_from([" "] * 6 + ["  ", ""]), min_size=20, max_size=20)
)
text = st.one_of(ascii_text, ascii_text, st.builds(joined, st.lists(st.one_of(word, foreign), max_size=20), st.just([" "] * 20)))


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(text, max_size=8), which=st.integers(0, 3))
def test_word_ids_equal_model2vec_tokenize_then_the_cut(models, texts, which):
    model, ids = models[which]
    assert ids.exact
    flat, lengths = ids(texts)
    want_flat, want_lengths = tokenized(model, texts)
    assert flat.dtype == lengths.dtype == np.int64
    np.testing.assert_array_equal(lengths, want_lengths)
    np.testing.assert_array_equal(flat, want_flat)
    assert np.array_equal(static_ids(model, texts)[0], want_flat)  # the one-call function too


def test_a_tiny_cache_cap_changes_nothing():
    model = static_model(bert_tokenizer())
    ids = WordIds(model, max_words=3)
    texts = ["the cat sat on a mat", "The dogs talked, running!", "a" * 150 + " cat", "un runs the cat", "naive caf\u00e9 talk"]
    for _ in range(3):  # the cache emptied and filled again on every call
        for got, want in zip(ids(texts), tokenized(model, texts)):
            np.testing.assert_array_equal(got, want)
        cached = ids.cache._count.size  # the words' pre-tokens (runs of letters and digits, single marks)
        assert cached <= max(3, len({w for t in texts for w in re.findall(r"[A-Za-z0-9]+|[^A-Za-z0-9\s]", t.lower())}))


def other_tokenizers():
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers

    word_level = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *WORDS])}, unk_token="[UNK]"))
    word_level.pre_tokenizer = pre_tokenizers.Whitespace()
    byte_level = Tokenizer(models.BPE({chr(c): c - 32 for c in range(32, 127)}, [], unk_token=None))
    byte_level.pre_tokenizer = pre_tokenizers.Metaspace()
    lower = bert_tokenizer()
    lower.normalizer = normalizers.Lowercase()  # not BERT's normaliser
    spaced = bert_tokenizer()
    spaced.add_tokens([AddedToken("new york", normalized=True)])  # an added token reaching across a space
    padded = bert_tokenizer()
    return {"word-level": word_level, "metaspace": byte_level, "lowercase": lower, "spaced": spaced, "padded": padded}


@pytest.mark.parametrize("name", ["word-level", "metaspace", "lowercase", "spaced", "padded"])
def test_other_tokenizers_take_the_tokenizer_path(name):
    model = static_model(other_tokenizers()[name])
    if name == "padded":
        model.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # pads a batch to its longest: not per word
    ids = WordIds(model)
    assert not ids.exact
    texts = ["the cat sat on a mat", "New York talks!", "", "dogs  run\tabout", "the " * 20]
    for got, want in zip(ids(texts), tokenized(model, texts)):
        np.testing.assert_array_equal(got, want)


def test_the_default_models_tokenizer_takes_the_word_path_with_the_same_ids():
    """The real distilled model's tokenizer (the default model's WordPiece): split here, model2vec's ids."""
    from tokenizers import Tokenizer

    from isotropy.encoders import default_model_path

    model = static_model(Tokenizer.from_file(str(default_model_path() / "tokenizer.json")), max_length=16)
    ids = WordIds(model)
    assert ids.exact and ids.truncation == 16
    texts = [
        "The Cranfield tests (1960s) measured 3.5% recall; it's [CLS]-like x[SEP]y.",
        "Supercalifragilisticexpialidocious " + "b" * 120 + " ##ing [UNK] [unk] don't",
        "caf\u00e9 \u65e5\u672c\ttab",
        "word " * 40,
        "",
    ]
    for _ in range(2):  # the second call from the cache
        for got, want in zip(ids(texts), tokenized(model, texts)):
            np.testing.assert_array_equal(got, want)


def test_a_word_table_tokenizer_takes_the_word_path_with_the_same_ids():
    """A model2vec model over a word table's tokenizer (calibrate's GloVe export: Lowercase + Split on the word
    pattern, clitics split) goes through the encoder's word cache too, with model2vec's ids."""
    from isotropy.encoders.static.table import word_tokenizer

    tokens = ["[UNK]", *WORDS, "do", "n't", "it", "'s", "don", "'t", *MARKS]
    model = static_model(word_tokenizer(tokens, "[UNK]", True)(), max_length=9)
    ids = WordIds(model)
    assert ids.exact and ids.truncation == 9
    texts = ["The cat didn't sit, it's a mat!", "don't DON'T do n't 'tis", "caf\u00e9 talk\tsat", "run " * 12, "", "x'y'n't"]
    for _ in range(2):  # the second call from the cache
        for got, want in zip(ids(texts), tokenized(model, texts)):
            np.testing.assert_array_equal(got, want)
