"""``--method auto`` decides first (issue #34) and a calibrated static model is held to the transformer's rules (#31).

* Label-free, the rule reads the encoder's kind: on a transformer it keeps raw before reading the corpus, so only a
  seeded sample of at most 1,000 sentences is encoded (for the signals it reports), and the folder written gives the
  base model's vectors exactly, its ``Normalize`` included (U24); a model2vec base that normalizes stays so.
* A static model's ``--eval`` regression is warned of and recorded (U22); ``--min-gain`` is a bad-input row (W7).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import WORDS, run_cli, word_corpus
from isotropy.calibration import run_calibration
from isotropy.encoders import Encoder


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ISOTROPY_CACHE", str(tmp_path_factory.getbasetemp() / "auto-first-cache"))


@pytest.fixture(scope="module")
def st_normalized(tiny_model_dir, tmp_path_factory):
    """A sentence-transformers folder of the tiny model whose last module is ``Normalize`` (as the default model's)."""
    from isotropy.integrations.sentence_transformers import to_sentence_transformer

    folder = tmp_path_factory.mktemp("st-norm") / "base"
    enc = Encoder(str(tiny_model_dir), pooling="last-avg", max_length=32)
    return to_sentence_transformer(enc, None, folder, normalize=True)


def test_auto_on_a_transformer_reads_a_sample_and_writes_the_base_model_exactly(st_normalized, tmp_path):
    from sentence_transformers import SentenceTransformer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(word_corpus(1200, seed=4)) + "\n", encoding="utf-8")
    cal = run_calibration(corpus, tmp_path / "auto", model=str(st_normalized), method="auto", show_progress=False)
    info = cal.info
    sel = info["selection"]
    assert sel["choice"] == "raw" and info["fit"] == {**info["fit"], "n_sentences": 1200, "n_fit": 1000}
    assert any("1,000 of its 1,200 sentences" in n for n in sel["notes"]), sel["notes"]
    assert all(c.get("beats_raw") is None for c in sel["candidates"])  # no criterion without --evidence
    assert info["modules"][-1] == "Normalize"
    probe = ["the cat sat", "a storm over the river city", " ".join(WORDS * 6)]  # the last one is truncated
    base = SentenceTransformer(str(st_normalized), device="cpu").encode(probe)
    ours = SentenceTransformer(str(tmp_path / "auto"), device="cpu").encode(probe)
    np.testing.assert_allclose(ours, base, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def _m2v_normalized(folder, dim: int = 6):
    from model2vec import StaticModel

    from isotropy.encoders.static.table import UNK, word_tokenizer

    vectors = np.random.default_rng(5).standard_normal((len(WORDS) + 1, dim)).astype(np.float32) + 1.0
    vectors[-1] = 0.0
    StaticModel(vectors, word_tokenizer([*WORDS, UNK], UNK, True)(), normalize=True).save_pretrained(folder)
    return folder


def test_auto_keeping_raw_on_a_normalizing_model2vec_base_keeps_it_normalizing(tmp_path):
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

    base = _m2v_normalized(tmp_path / "m2v")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(word_corpus(80, seed=1)) + "\n", encoding="utf-8")
    out = tmp_path / "auto"
    run_calibration(corpus, out, model=str(base), method="auto", candidates="raw,center", show_progress=False)
    assert json.loads((out / "config.json").read_text(encoding="utf-8"))["normalize"] is True
    probe = ["cat dog market", "rain over the city", "doctor"]
    theirs = StaticModel.from_pretrained(base).encode(probe)
    np.testing.assert_allclose(StaticModel.from_pretrained(out).encode(probe), theirs, atol=1e-6)
    st = SentenceTransformer(str(out / "sentence-transformers"), device="cpu").encode(probe)
    np.testing.assert_allclose(st, theirs, atol=1e-5)


def test_a_static_eval_regression_is_warned_and_recorded(tmp_path):
    table = tmp_path / "t.glove.txt"
    rng = np.random.default_rng(7)
    table.write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in rng.standard_normal(6) + 1.5) + "\n" for w in WORDS))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(word_corpus(120, seed=2)) + "\n", encoding="utf-8")
    left, right = word_corpus(50, seed=8), word_corpus(50, seed=9)
    enc = Encoder(str(table))
    A, B = enc.encode(left), enc.encode(right)
    gold = (A * B).sum(1) / (np.linalg.norm(A, axis=1) * np.linalg.norm(B, axis=1))  # the base model scores 100
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{g:.6f}\n" for a, b, g in zip(left, right, gold)))
    out = tmp_path / "m"
    code, _, err = run_cli(["calibrate", corpus, "-o", out, "--model", table, "--eval", pairs, "--no-progress"])
    assert code == 0, err
    cal = json.loads((out / "isotropy.json").read_text(encoding="utf-8"))["calibration"]
    (reg,) = cal["regressions"]
    assert reg["base"] == pytest.approx(100.0) and reg["change"] < 0
    assert any("scores LOWER" in w for w in cal["warnings"])
    assert sum(line.startswith("warning: the calibrated model scores LOWER") for line in err.splitlines()) == 1
