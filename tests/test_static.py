"""Static embedding models (#23): loaders of every format, pooling, OOV policy, folding, exports, the CLI."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isotropy import Encoder
from isotropy.encoders.static import StaticTable, load_table
from isotropy.errors import IsotropyError

WORDS = ["the", ",", ".", "cat", "sat", "on", "mat", "a", "dog", "ran", "n't", "do", "'s", "it", "big", "red"]
DIM = 6


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ISOTROPY_CACHE", str(tmp_path_factory.getbasetemp() / "static-cache"))


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((len(WORDS), DIM)).astype(np.float32)


def _text_rows(vectors: np.ndarray, words=WORDS) -> str:
    return "".join(w + " " + " ".join(f"{x:.6f}" for x in v) + "\n" for w, v in zip(words, vectors))


def write_table(folder: Path, fmt: str, vectors: np.ndarray, words=WORDS) -> Path:
    """A tiny table in one of the formats: glove, word2vec (text), vec (fastText), bin (word2vec binary)."""
    if fmt == "glove":
        path = folder / "tiny.glove.txt"
        path.write_text(_text_rows(vectors, words), encoding="utf-8")
    elif fmt in ("word2vec", "vec"):
        path = folder / ("tiny.w2v.txt" if fmt == "word2vec" else "tiny.vec")
        path.write_text(f"{len(words)} {vectors.shape[1]}\n" + _text_rows(vectors, words), encoding="utf-8")
    else:
        path = folder / "tiny.bin"
        body = b"".join(w.encode() + b" " + struct.pack(f"<{len(v)}f", *v) + b"\n" for w, v in zip(words, vectors))
        path.write_bytes(f"{len(words)} {vectors.shape[1]}\n".encode() + body)
    return path


def manual_mean(vectors: np.ndarray, tokens: list[str]) -> np.ndarray:
    return vectors[[WORDS.index(t) for t in tokens]].mean(axis=0)


@pytest.mark.parametrize("fmt", ["glove", "word2vec", "vec", "bin"])
def test_every_word_vector_format_loads_and_pools(fmt, tmp_path, vectors):
    path = write_table(tmp_path, fmt, vectors)
    enc = Encoder(str(path))
    assert enc.backend == "static" and enc.dim == DIM and enc.pooling == "last-avg"
    out = enc.encode(["The cat sat on the mat.", "It's a big dog, don't"])
    tol = 1e-5 * np.abs(vectors).max()
    np.testing.assert_allclose(out[0], manual_mean(vectors, ["the", "cat", "sat", "on", "the", "mat", "."]), atol=tol)
    np.testing.assert_allclose(out[1], manual_mean(vectors, ["it", "'s", "a", "big", "dog", ",", "do", "n't"]), atol=tol)
    assert enc.coverage.unknown == 0 and enc.coverage.empty == 0


def test_the_cache_is_reused_and_an_edited_source_is_parsed_again(tmp_path, vectors):
    path = write_table(tmp_path, "glove", vectors)
    first = load_table(path)
    again = load_table(path)
    assert isinstance(again.vectors, np.memmap) and again.digest() == first.digest()
    edited = vectors.copy()
    edited[3] += 1.0
    path.write_text(_text_rows(edited), encoding="utf-8")
    table = load_table(path)
    np.testing.assert_allclose(table.vectors[3], edited[3], atol=1e-5)
    assert table.digest() != first.digest()


def test_oov_policy_zero_vector_counted_never_nan(tmp_path, vectors):
    enc = Encoder(str(write_table(tmp_path, "glove", vectors)))
    out = enc.encode(["zzz qqq", "", "the zzz"])
    assert np.isfinite(out).all()
    assert not out[0].any() and not out[1].any()
    np.testing.assert_allclose(out[2], vectors[0], atol=1e-6)  # the unknown word is left out of the mean
    cov = enc.coverage
    assert (cov.sentences, cov.tokens, cov.unknown, cov.empty) == (3, 4, 3, 2)
    assert cov.empty_rows == [0, 1] and "75.00%" in cov.describe()
    enc.encode(["the", "qqq"])  # a second chunk: coverage is that encode's, coverage_total both
    assert (enc.coverage.sentences, enc.coverage.unknown) == (2, 1)
    total = enc.coverage_total
    assert (total.sentences, total.tokens, total.unknown, total.empty) == (5, 6, 4, 3)
    assert total.empty_rows == [0, 1, 4]  # rows counted across the encodes
    enc.reset_coverage()
    assert enc.coverage_total.sentences == 0


def test_analyze_reports_the_out_of_vocabulary_rate(tmp_path, vectors):
    from isotropy.analysis import analyze

    enc = Encoder(str(write_table(tmp_path, "glove", vectors)))
    rep = analyze(["the cat zzz", "a dog", "the qqq"] * 20, enc, word_level=False, quiet=True)
    assert rep["coverage"]["oov_rate"] == pytest.approx(2 / 7)
    assert any("out-of-vocabulary" in n for n in rep["notes"])


def test_cased_tables_keep_case_and_lowercase_tables_lower(tmp_path, vectors):
    cased = [{"the": "The", "it": "It"}.get(w, w) for w in WORDS]  # two capitalised words: one would not make it cased
    enc = Encoder(str(write_table(tmp_path, "vec", vectors, cased)))
    out = enc.encode(["The cat", "the cat"])
    np.testing.assert_allclose(out[0], vectors[[0, 3]].mean(0), atol=1e-5)
    np.testing.assert_allclose(out[1], vectors[3], atol=1e-5)  # 'the' is unknown to a cased table


def test_sif_zipf_and_corpus_counts(tmp_path, vectors):
    path = write_table(tmp_path, "glove", vectors)
    enc = Encoder(str(path), pooling="sif")
    table = enc.model
    w = 1e-3 / (1e-3 + table.probabilities)
    out = enc.encode(["the cat sat"])
    np.testing.assert_allclose(out[0], (vectors[[0, 3, 4]] * w[[0, 3, 4], None]).sum(0) / 3, rtol=1e-5, atol=1e-7)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\nthe dog ran\nthe mat\n", encoding="utf-8")
    counted = Encoder(str(path), pooling="sif", pooling_stats=corpus)
    p = counted.pooling_stats.counts / counted.pooling_stats.counts.sum()
    wc = 1e-3 / (1e-3 + p)
    np.testing.assert_allclose(
        counted.encode(["the cat sat"])[0], (vectors[[0, 3, 4]] * wc[[0, 3, 4], None]).sum(0) / 3, rtol=1e-5, atol=1e-7
    )
    assert counted.record()["pooling_stats"]["sentences"] == 3
    idf = Encoder(str(path), pooling="idf", pooling_stats=corpus).encode(["the cat"])
    assert np.isfinite(idf).all()
    with pytest.raises(IsotropyError, match="needs document counts"):
        Encoder(str(path), pooling="idf").encode(["the cat"])
    with pytest.raises(IsotropyError, match="static model pools by mean"):
        Encoder(str(path), pooling="cls")


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    k=st.integers(1, 8),
    weighted=st.booleans(),
    sentences=st.lists(st.lists(st.sampled_from(WORDS + ["zzz"]), max_size=9), min_size=1, max_size=6),
)
def test_folding_equals_calibrating_the_pooled_vectors(seed, k, weighted, sentences):
    rng = np.random.default_rng(seed)
    from isotropy.encoders.static.table import UNK, word_tokenizer

    tokens = [*WORDS, UNK]
    vecs = np.vstack([rng.standard_normal((len(WORDS), DIM)), np.zeros((1, DIM))]).astype(np.float32)
    table = StaticTable(tokens, vecs, word_tokenizer(tokens, UNK, True), unk_id=len(WORDS), lowercase=True)
    A, b = rng.standard_normal((DIM, k)), rng.standard_normal(k)
    w = rng.uniform(0.01, 2.0, len(tokens)) if weighted else None
    text = [" ".join(s) for s in sentences]
    ids, _, _ = table.token_ids(text)
    known = np.array([len(r) > 0 for r in ids])
    expected = table.pool(text, w).astype(np.float64) @ A + b
    folded = table.fold(A, b, row_weights=w).pool(text)
    scale = 1.0 + np.abs(expected).max()
    np.testing.assert_allclose(folded[known], expected[known], atol=1e-4 * scale)
    assert not folded[~known].any()  # no known token: still the zero vector


def _model2vec_folder(folder: Path, vectors: np.ndarray) -> Path:
    from model2vec import StaticModel

    from isotropy.encoders.static.table import UNK, word_tokenizer

    tokens = [*WORDS, UNK]
    tok = word_tokenizer(tokens, UNK, True)()
    StaticModel(np.vstack([vectors, np.zeros((1, DIM), np.float32)]), tok, normalize=False).save_pretrained(folder)
    return folder


def test_model2vec_folder_matches_model2vec_encode(tmp_path, vectors):
    from model2vec import StaticModel

    folder = _model2vec_folder(tmp_path / "m2v", vectors)
    enc = Encoder(str(folder))
    assert enc.backend == "static"
    text = ["The cat sat on the mat.", "a big red dog ran", "zzz the"]
    ours = enc.encode(text)
    theirs = StaticModel.from_pretrained(folder).encode(text)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


def _as_model2vec_loads_it(folder: Path) -> StaticTable:
    """The table built from ``model2vec.StaticModel.from_pretrained`` (what the loader did before it read the files
    itself)."""
    from model2vec import StaticModel

    from isotropy.encoders.static.sources import _model2vec_rows

    m = StaticModel.from_pretrained(folder)
    return StaticTable(
        list(m.tokens), _model2vec_rows(folder, m), m.tokenizer, unk_id=m.unk_token_id, source=str(folder),
        max_length=m.max_length, chars_per_token=int(m.median_token_length),
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["words", "wordpiece-quantised"])
def test_a_model2vec_folder_is_read_as_model2vec_reads_it(tmp_path, vectors, kind):
    """The loader reads a model2vec folder's files itself (model2vec's constructor copies a 400k-word tokenizer):
    the same tokens, rows, unknown id, lengths, tokenizer and fingerprint as model2vec's own loader gives, for a
    word table with no length limit and for a vocabulary-quantised subword model (mapping and weights)."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    from isotropy.encoders import default_model_path
    from isotropy.encoders.static.table import UNK, word_tokenizer

    folder = tmp_path / kind
    if kind == "words":
        tok = word_tokenizer([*WORDS, UNK], UNK, True)()
        StaticModel(np.vstack([vectors, np.zeros((1, DIM), np.float32)]), tok, max_length=None).save_pretrained(folder)
    else:
        tok = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
        tok.enable_padding(pad_token="[PAD]", pad_id=0)  # saved padded: model2vec stops it, so does the loader
        rng = np.random.default_rng(1)
        n = tok.get_vocab_size()
        mapping, weights = rng.integers(0, 7, size=n), rng.uniform(0.5, 2.0, size=n).astype(np.float32)
        StaticModel(rng.standard_normal((7, 4)).astype(np.float16), tok, weights=weights, token_mapping=mapping).save_pretrained(
            folder
        )
    ours, theirs = load_table(folder), _as_model2vec_loads_it(folder)
    assert ours.tokens == theirs.tokens and ours.unk_id == theirs.unk_id
    assert (ours.max_length, ours.chars_per_token) == (theirs.max_length, theirs.chars_per_token)
    assert ours.vectors.dtype == np.float32 and np.array_equal(ours.vectors, theirs.vectors)
    assert json.loads(ours.tokenizer.to_str()) == json.loads(theirs.tokenizer.to_str())
    assert ours.digest() == theirs.digest()
    text = ["The cat sat on the mat.", "unaffordable zzz", "x" * 3000]
    flat, lengths, _, _ = ours.token_array(text)
    want, want_lengths, _, _ = theirs.token_array(text)
    np.testing.assert_array_equal(flat, want)
    np.testing.assert_array_equal(lengths, want_lengths)


def test_a_model2vec_table_that_does_not_fit_its_vocabulary_is_model2vecs_error(tmp_path, vectors):
    from safetensors.numpy import save_file

    folder = _model2vec_folder(tmp_path / "m2v", vectors)
    save_file({"embeddings": vectors[:5]}, str(folder / "model.safetensors"))
    with pytest.raises(IsotropyError, match="model2vec cannot load it"):
        load_table(folder)


@pytest.mark.parametrize(("max_length", "normalize"), [(None, False), (64, True)])
def test_the_model2vec_root_is_what_static_model_saves(tmp_path, vectors, max_length, normalize):
    """calibrate writes a static model's root through model2vec's writer without building a StaticModel: the same
    files, byte for byte, as ``StaticModel(...).save_pretrained`` (its model card aside: isotropy writes its own)."""
    from model2vec import StaticModel

    from isotropy.calibration.static_export import save_model2vec
    from isotropy.encoders.static.table import UNK, word_tokenizer

    table = np.vstack([vectors, np.zeros((1, DIM), np.float32)])
    make = word_tokenizer([*WORDS, UNK], UNK, True)
    StaticModel(table, make(), normalize=normalize, max_length=max_length).save_pretrained(tmp_path / "theirs")
    save_model2vec(tmp_path / "ours", table, make(), max_length, normalize)
    ours = sorted(p.name for p in (tmp_path / "ours").iterdir())
    assert ours == sorted(p.name for p in (tmp_path / "theirs").iterdir() if p.name != "README.md")
    for name in ours:
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "theirs" / name).read_bytes(), name


def test_sentence_transformers_static_folder_matches_its_encode(tmp_path, vectors):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    from isotropy.encoders.static.table import UNK, word_tokenizer

    tokens = [*WORDS, UNK]
    emb = StaticEmbedding(word_tokenizer(tokens, UNK, True)(), embedding_weights=np.vstack([vectors, np.ones((1, DIM))]))
    folder = tmp_path / "st"
    SentenceTransformer(modules=[emb], device="cpu").save(str(folder))
    enc = Encoder(str(folder))
    text = ["The cat sat on the mat.", "a big red dog ran", "zzz the"]
    theirs = SentenceTransformer(str(folder), device="cpu").encode(text)
    np.testing.assert_allclose(enc.encode(text), theirs, atol=1e-6)  # the unknown row is averaged, as ST does
    assert enc.coverage.unknown == 1


def test_glove_default_encodes(tmp_path):
    enc = Encoder("glove-6b-50d")
    out = enc.encode(["The cat sat on the mat.", "A man is playing a guitar."])
    assert out.shape == (2, 50) and np.isfinite(out).all()
    assert enc.record()["model"] == "glove-6b-50d" and enc.record()["backend"] == "static"
    assert enc.coverage.unknown == 0
    assert json.dumps(enc.coverage.to_dict())


CORPUS = [
    f"the {a} {v} on a {b} mat." for a in ("cat", "dog", "big dog", "red cat") for v in ("sat", "ran") for b in ("big", "red")
] * 4


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _check_export(folder: Path, cal, sentences: list[str]) -> None:
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

    ours = cal.transform.transform(cal.encoder.encode(sentences))
    m2v = StaticModel.from_pretrained(folder).encode(sentences)
    st_model = SentenceTransformer(str(folder / "sentence-transformers"), device="cpu").encode(sentences)
    for theirs in (m2v, st_model):
        assert theirs.shape == ours.shape
        assert _cosines(ours, theirs).min() > 1 - 1e-5


@pytest.mark.parametrize("pooling", ["last-avg", "sif"])
def test_calibrate_folds_into_model2vec_and_sentence_transformers_folders(tmp_path, vectors, pooling):
    from isotropy.calibration import run_calibration

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    table = write_table(tmp_path, "word2vec", vectors)
    out = tmp_path / "calibrated"
    cal = run_calibration(corpus, out, model=str(table), pooling=pooling, method="center", show_progress=False)
    assert (out / "isotropy.json").is_file() and cal.info["coverage"]["oov_rate"] == 0.0
    _check_export(out, cal, ["the cat sat on a mat.", "a big red dog ran", "dog , mat", "the zzz cat qqq"])  # OOV: U21
    from helpers import run_cli  # again through the command line: an isotropy output is replaced, and it says how to load it

    args = ["calibrate", corpus, "-o", out, "--model", table, "--pooling", pooling, "--method", "center", "--no-progress"]
    code, _, err = run_cli(args)
    assert code == 0, err
    st_folder = out / "sentence-transformers"
    assert f'use it: StaticModel.from_pretrained("{out}") or SentenceTransformer("{st_folder}")' in err
    assert (st_folder / "modules.json").is_file()


def test_calibrate_refuses_what_does_not_fold(tmp_path, vectors):
    from isotropy.calibration import run_calibration

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    table = write_table(tmp_path, "glove", vectors)
    with pytest.raises(IsotropyError, match="not affine"):
        run_calibration(corpus, tmp_path / "out", model=str(table), method="flow", show_progress=False)
    with pytest.raises(IsotropyError, match="token count"):
        run_calibration(corpus, tmp_path / "out", model=str(table), pooling="sif:norm=weights", show_progress=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cli_round_trip_on_glove(tmp_path):
    from helpers import run_cli

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"{s} number {i}" for i, s in enumerate(CORPUS * 20)) + "\n", encoding="utf-8")
    code, _, err = run_cli(["encode", str(corpus), "-o", str(tmp_path / "v.npy"), "--model", "glove-6b-50d"])
    assert code == 0, err
    assert np.load(tmp_path / "v.npy").shape == (len(CORPUS) * 20, 50)
    out = tmp_path / "glove-white"  # the calibrate command itself is tested on small tables; this is the real table
    from isotropy.calibration import run_calibration

    cal = run_calibration(corpus, out, model="glove-6b-50d", method="abtt", show_progress=False)
    _check_export(out, cal, ["A man is playing a guitar.", "The cat sat on the mat.", "Stocks fell sharply today."])


def test_label_free_auto_whitens_a_static_table_and_folds_it(tmp_path, vectors):
    """#24: without labels, --method auto calibrates a static table (the encoder's kind decides) and says why."""
    from isotropy.calibration import run_calibration

    rng = np.random.default_rng(2)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(rng.choice(WORDS, size=7)) for _ in range(120)) + "\n", encoding="utf-8")
    table = write_table(tmp_path, "glove", vectors)
    from isotropy.selection import Selection

    cal = run_calibration(corpus, tmp_path / "auto", model=str(table), method="auto", show_progress=False)
    marker = json.loads((tmp_path / "auto" / "isotropy.json").read_text(encoding="utf-8"))["calibration"]
    sel = Selection.from_dict(marker["selection"])
    assert marker["method"] == "auto -> whitening-shrunk"
    assert sel.mode == "label-free" and sel.choice == "whitening-shrunk" and sel.signals["static_table"] == 1.0
    assert sel.fired.startswith("the encoder is a static table") and sel.expected.startswith("whitening-shrunk")
    card = (tmp_path / "auto" / "README.md").read_text(encoding="utf-8")
    assert "`--method auto` chose whitening-shrunk without labels, by the encoder's kind" in card
    _check_export(tmp_path / "auto", cal, ["the cat sat on a mat.", "a big red dog ran", "dog , mat"])


def _stopword_heavy(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A table whose three most frequent rows (the, ',', '.') are long vectors, a corpus, and dev pairs scored by the
    content words they share: the mean is swamped by the stopwords, SIF (Zipf weights: the first rows weigh least)
    is not, so the dev pairs favour sif clearly."""
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((len(WORDS), DIM)).astype(np.float32)
    vecs[:3] *= 6
    table = write_table(tmp_path, "glove", vecs)
    content = WORDS[3:]

    def sent(words) -> str:
        return " ".join([*words, *rng.choice(WORDS[:3], size=int(rng.integers(0, 6)))])

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(sent(rng.choice(content, 3)) for _ in range(200)) + "\n", encoding="utf-8")
    rows = []
    for _ in range(80):
        a, k = list(rng.choice(content, 3, replace=False)), int(rng.integers(0, 4))
        rows.append(f"{sent(a)}\t{sent(a[:k] + list(rng.choice(content, 3 - k, replace=False)))}\t{k}\n")
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence1\tsentence2\tscore\n" + "".join(rows), encoding="utf-8")
    return table, corpus, dev


def test_auto_pooling_chooses_sif_when_the_dev_pairs_favour_it_and_the_folder_is_sifs(tmp_path):
    """#24: --method auto --pooling auto --dev compares (pooling, candidate) and writes the chosen pooling's folder."""
    from helpers import run_cli
    from isotropy.calibration import run_calibration
    from isotropy.selection import Selection

    table, corpus, dev = _stopword_heavy(tmp_path)
    cands = "raw,center,whitening-shrunk,whitening"
    out = tmp_path / "auto"
    cal = run_calibration(corpus, out, model=str(table), method="auto", pooling="auto", dev=str(dev), candidates=cands)
    marker = json.loads((out / "isotropy.json").read_text(encoding="utf-8"))["calibration"]
    sel = Selection.from_dict(marker["selection"])
    assert cal.encoder.pooling == marker["pooling"] == sel.pooling["chosen"] == "sif" and sel.pooling["incumbent"] == "last-avg"
    assert sel.incumbent == "whitening-shrunk on pooling last-avg" and sel.p_beats_raw >= 0.9
    assert sel.pooling["best"]["sif"]["score"] > sel.pooling["best"]["last-avg"]["score"] + 5
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"chose {sel.choice} on pooling sif" in card and "pooling: sif, chosen over the incumbent pooling last-avg" in card
    _check_export(out, cal, ["the cat sat on a mat.", "a big red dog ran , the .", "dog , mat"])  # sif's vectors, folded
    probe = ["the cat sat , on the mat .", "a dog"]
    assert np.allclose(cal.encoder.encode(probe), Encoder(str(table), pooling="sif").encode(probe))  # sif itself
    plain = run_calibration(corpus, tmp_path / "rule", model=str(table), method="auto", pooling="auto", candidates=cands)
    rec = Selection.from_dict(plain.info["selection"]).pooling  # without --dev: the rule's pooling, said so
    assert plain.encoder.pooling == rec["chosen"] == "last-avg" and rec["by"] == "rule" and "pooling rule" in rec["said"]
    code, _, err = run_cli(["calibrate", corpus, "-o", tmp_path / "x", "--model", table, "--pooling", "auto", "--no-progress"])
    assert code == 2 and err.strip().count("\n") == 0 and "--pooling auto" in err and "--method auto" in err
    assert not (tmp_path / "x").exists()
