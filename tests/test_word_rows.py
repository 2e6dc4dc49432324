"""Whole-word rows (issue #43, "capacity where cosine looks"): ``isotropy distill --corpus --words N`` gives the N
most frequent corpus words that the teacher's tokenizer splits a token and a row of their own (model2vec's
``vocabulary``), fitted like any other token (isotropy.distill.word_rows).

The teacher is the tiny random DistilBERT (``tiny_model_dir``) with the default model's tokenizer; model2vec's own
distill runs for real (its tokenizer surgery is what is tested), with its forward pass over the vocabulary replaced
by a fixed random table averaged over each entry's token ids, so a run takes seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli, snapshot

pytest.importorskip("model2vec")

SPLIT = ["zorblax", "quixotically", "flimflammery", "glorptastic"]  # each split into 4-6 pieces by the tokenizer
COMMON = (
    "cat dog bird horse fish cow sheep goat mouse bear lion wolf fox deer frog duck house river tree road field hill "
    "shop farm city town lake sea sky sun moon star rain snow wind fire stone wood glass paper book pen door window "
    "table chair bed car bus train ship plane bike ball game song music film story letter word name voice face hand "
    "foot head heart mind eye ear blue red green old new big small long short hot cold fast slow good bad happy sad "
    "dark light high low near far sat ran saw ate took gave made found left kept"
).split()  # more distinct tokens than the 32-d teacher map has parameters per output, so the token fit has work to do
CORPUS = [  # zorblax on 1 line in 2, quixotically 1 in 3, flimflammery 1 in 4, glorptastic 1 in 5
    " ".join([*np.random.default_rng(i).choice(COMMON, 7), *(w for k, w in enumerate(SPLIT) if i % (k + 2) == 0)])
    for i in range(400)
]


@pytest.fixture(autouse=True)
def fast_pass(monkeypatch, tmp_path):
    """model2vec's forward pass: the mean of a fixed random table over each vocabulary entry's ids (deterministic);
    the teacher cache in this test's folder."""
    import model2vec.distill.distillation as m2v

    table = np.random.default_rng(0).standard_normal((30522, 32)).astype(np.float32)

    def create_embeddings(model, tokenized, device, pad_token_id, pooling="mean"):
        return np.stack([table[np.asarray(ids)].mean(axis=0) for ids in tokenized])

    monkeypatch.setattr(m2v, "create_embeddings", create_embeddings)
    monkeypatch.setenv("ISOTROPY_CACHE", str(tmp_path / "isotropy-cache"))


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return path


def _distill(model, out, *args):
    code, _, err = run_cli(["distill", "-m", model, "-o", out, "--spans", "none", *map(str, args)])
    assert code == 0, err
    return json.loads((out / "isotropy.json").read_text())["distill"]


def _model(folder: Path):
    from model2vec import StaticModel

    return StaticModel.from_pretrained(str(folder))


def _row(static, word: str) -> np.ndarray:
    ids = static.tokenizer.encode(word, add_special_tokens=False).ids
    assert len(ids) == 1, (word, ids)
    return np.asarray(static.embedding[ids[0]], dtype=np.float64)


def test_the_most_frequent_split_words_become_one_token_with_a_fitted_row(tiny_model_dir, corpus, tmp_path):
    from model2vec import StaticModel

    args = ("--corpus", corpus, "--dims", 0, "--words", 2, "--teacher-cache", tmp_path / "tc")
    info = _distill(tiny_model_dir, tmp_path / "w", *args, "--lam", 1)
    assert info["words"] == 2 and info["words_added"] == 2 and info["table_cache"] == "distilled"
    assert "Whole-word rows: 2 of the corpus's most frequent words" in (tmp_path / "w" / "README.md").read_text()
    fitted = _model(tmp_path / "w")
    for word in ("zorblax", "quixotically"):  # the two most frequent
        assert len(fitted.tokenizer.encode(word, add_special_tokens=False).ids) == 1
        assert len(fitted.tokenizer.encode(f"The {word.upper()} sat", add_special_tokens=False).ids) == 3  # uncased
    for word in ("flimflammery", "glorptastic"):  # beyond N: still pieces
        assert len(fitted.tokenizer.encode(word, add_special_tokens=False).ids) > 1
    twin = json.loads((tmp_path / "w" / "sentence-transformers" / "tokenizer.json").read_text())
    assert "zorblax" in twin["model"]["vocab"]  # what sentence-transformers loads has the word too
    # model2vec's own table (the distilled-table cache's one entry): the word's row is the teacher's vector of it
    (entry,) = (tmp_path / "tc" / "tables").iterdir()
    own = StaticModel.from_pretrained(str(entry))
    assert len(own.tokenizer.encode("zorblax", add_special_tokens=False).ids) == 1
    assert not np.allclose(_row(fitted, "zorblax"), _row(own, "zorblax"), atol=1e-3)
    # at a strength that keeps every row at its prior (the mapped table: the same table read back from the cache),
    # the word's row is not the fitted one, and a token the corpus never shows has the same row in both
    assert _distill(tiny_model_dir, tmp_path / "p", *args, "--lam", 1e300)["table_cache"] == "cached"
    prior = _model(tmp_path / "p")
    assert not np.allclose(_row(fitted, "zorblax"), _row(prior, "zorblax"), atol=1e-4)
    np.testing.assert_allclose(_row(fitted, "volcano"), _row(prior, "volcano"), rtol=1e-5, atol=1e-6)


def test_words_zero_writes_what_a_run_without_it_writes(tiny_model_dir, corpus, tmp_path, monkeypatch):
    import isotropy.distill.run as mod

    original = mod.distill_static
    monkeypatch.setattr(mod, "distill_static", lambda model, dims, show: original(model, dims, show))  # no vocabulary
    args = ("--corpus", corpus, "--dims", 16, "--lam", 1, "--teacher-cache", tmp_path / "tc")
    a = _distill(tiny_model_dir, tmp_path / "a", *args)
    b = _distill(tiny_model_dir, tmp_path / "b", *args, "--words", 0)
    assert (a["table_cache"], b["table_cache"]) == ("distilled", "cached")  # the key a table without words had
    assert "words" not in b and "words_added" not in b
    for name in ("model.safetensors", "tokenizer.json", "sentence-transformers/model.safetensors"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_the_table_cache_keeps_tables_with_and_without_words_apart(tiny_model_dir, corpus, tmp_path):
    from isotropy.distill.table_cache import table_key

    plain = table_key("f", None)
    assert "words" not in plain  # the key a table without words always had
    two = table_key("f", None, words={"n": 2, "count": 2, "sha256": "x"})
    assert two != plain and two != table_key("f", None, words={"n": 3, "count": 2, "sha256": "x"})
    assert two != table_key("f", None, words={"n": 2, "count": 2, "sha256": "y"})
    args = ("--corpus", corpus, "--dims", 16, "--lam", 1, "--teacher-cache", tmp_path / "tc")
    first = _distill(tiny_model_dir, tmp_path / "a", *args)
    assert first["table_cache"] == "distilled"
    with_words = _distill(tiny_model_dir, tmp_path / "b", *args, "--words", 2)
    assert with_words["table_cache"] == "distilled" and with_words["vocabulary"] == first["vocabulary"] + 2
    chunks = with_words["corpus_fit"]["teacher_cache"].split()
    assert chunks[:3] == ["cached", "chunks", "used:"] and chunks[3] == chunks[5]  # the teacher's vectors read back
    again = _distill(tiny_model_dir, tmp_path / "c", *args, "--words", 2)
    assert again["table_cache"] == "cached" and again["vocabulary"] == with_words["vocabulary"]
    without = _distill(tiny_model_dir, tmp_path / "e", *args)
    assert without["table_cache"] == "cached" and without["vocabulary"] == first["vocabulary"]
    assert len(list((tmp_path / "tc" / "tables").iterdir())) == 2
    assert len(_model(tmp_path / "e").tokenizer.encode("zorblax", add_special_tokens=False).ids) > 1
    assert len(_model(tmp_path / "c").tokenizer.encode("zorblax", add_special_tokens=False).ids) == 1


def test_the_word_count_agrees_with_the_tokenizer(tiny_model_dir):
    from isotropy.calibration.corpus import Corpus
    from isotropy.distill.word_rows import _normaliser, frequent_split_words, teacher_tokenizer

    tok = teacher_tokenizer(tiny_model_dir)
    lines = ["Zorblax don't café's foo_bar", "ZÖRBLAX zorblax wikipedia", "glorptastic, glorptastic!"]
    # lower-cased and accents stripped as the uncased tokenizer does (ZÖRBLAX counts as zorblax); n't, 's and foo_bar
    # would not stay one pre-token; wikipedia, do and cafe are vocabulary entries
    assert frequent_split_words(Corpus(lines), tok, 10) == ["zorblax", "glorptastic"]
    assert frequent_split_words(Corpus(lines), tok, 1) == ["zorblax"]
    assert frequent_split_words(Corpus(lines), tok, 0) == []
    # the printable-ASCII shortcut is what the normalizer does
    for line in [*lines, "A\tB\x01C D", "Ünïcödé MIXED case 42", "plain ASCII, Upper And lower."]:
        assert _normaliser(tok)(line) == tok.normalizer.normalize_str(line), line


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        (["--words", "3"], None, "--words adds rows for the corpus's frequent words: give --corpus"),
        (["--corpus", "{c}", "--words", "-1"], None, "--words must be a whole number of words >= 0, got -1"),
        (["--corpus", "{c}", "--words", "many"], None, "--words"),
        (["--corpus", "{c}", "--words", "2.5"], None, "--words"),
        (["--corpus", "-", "--words", "3"], "a b c\nd e f\n", "standard input is read once"),
    ],
)
def test_bad_words_are_one_line(args, stdin, says, tiny_model_dir, corpus, tmp_path, monkeypatch):
    import isotropy.distill.run as mod

    def boom(*a, **k):
        raise AssertionError("the vocabulary pass ran")

    monkeypatch.setattr(mod, "distill_static", boom)
    before = snapshot(tmp_path)
    args = [a.replace("{c}", str(corpus)) for a in args]
    code, _, err = run_cli(["distill", "-m", tiny_model_dir, "-o", tmp_path / "out", "--dims", "16", *args], stdin)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and snapshot(tmp_path) == before


def test_python_words_is_checked(tiny_model_dir, corpus, tmp_path):
    from isotropy.distill import distill
    from isotropy.errors import IsotropyError

    for bad in (True, 2.0, "3", -2):
        with pytest.raises(IsotropyError, match="--words must be a whole number"):
            distill(tmp_path / "x", tiny_model_dir, dims=16, corpus=str(corpus), words=bad)
    assert not (tmp_path / "x").exists()
