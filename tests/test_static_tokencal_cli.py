"""``isotropy calibrate --method token-whitening | zipfian-whitening | zipfian-whitening-rank`` on a static model (#23)."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from isotropy.errors import IsotropyError
from isotropy.transforms.token_whitening import fit_token_whitening, zipf_probabilities

WORDS = ["the", ",", ".", "cat", "sat", "on", "mat", "a", "dog", "ran", "it", "big", "red", "sun", "hot", "day"]
DIM = 5
CORPUS = [
    f"the {a} {v} on a {b} mat." for a in ("cat", "dog", "big dog", "red cat") for v in ("sat", "ran") for b in ("big", "red")
]
CHECK = ["the cat sat on a mat.", "a big red dog ran", "dog , mat", "the hot sun , a red day"]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ISOTROPY_CACHE", str(tmp_path_factory.getbasetemp() / "static-tokencal-cache"))


@pytest.fixture()
def files(tmp_path):
    vectors = np.random.default_rng(3).standard_normal((len(WORDS), DIM)).astype(np.float32) + 2.0  # a common direction
    table = tmp_path / "tiny.glove.txt"
    table.write_text("".join(w + " " + " ".join(f"{x:.6f}" for x in v) + "\n" for w, v in zip(WORDS, vectors)), encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return table, corpus, np.loadtxt(table, usecols=range(1, DIM + 1), comments=None, dtype=np.float64)


def _mean(vectors: np.ndarray, sentence: str) -> np.ndarray:
    return vectors[[WORDS.index(t) for t in re.findall(r"\w+|[^\w\s]", sentence.lower())]].mean(axis=0)


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("method", ["token-whitening", "zipfian-whitening", "zipfian-whitening-rank"])
def test_folded_model_equals_the_table_whitened_pooled_vectors(tmp_path, files, method):
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

    from isotropy.calibration import run_calibration

    table, corpus, E = files
    out = tmp_path / "calibrated"
    cal = run_calibration(corpus, out, model=str(table), method=method, show_progress=False)
    if method == "token-whitening":
        expected = fit_token_whitening(E, weighting="uniform")
    elif method == "zipfian-whitening":
        counts = Counter(t for s in CORPUS for t in re.findall(r"\w+|[^\w\s]", s))
        expected = fit_token_whitening(E, [counts.get(w, 0) for w in WORDS])
    else:
        expected = fit_token_whitening(E, zipf_probabilities(len(WORDS)))
    want = expected.transform(np.stack([_mean(E, s) for s in CHECK]))
    m2v = StaticModel.from_pretrained(out).encode(CHECK)
    st_vecs = SentenceTransformer(str(out / "sentence-transformers"), device="cpu").encode(CHECK)
    for got in (m2v, st_vecs, cal.transform.transform(cal.encoder.encode(CHECK))):
        assert got.shape == want.shape
        assert _cos(np.asarray(got, dtype=np.float64), want).min() > 1 - 1e-5
    info = cal.info
    assert info["token_fit"]["level"] == "token" and info["token_fit"]["table_rows"] == len(WORDS)
    assert info["coverage"]["oov_rate"] == 0.0 and info["method"] == method
    card = (out / "README.md").read_text(encoding="utf-8")  # isotropy's card, not model2vec's default one
    assert "StaticModel.from_pretrained" in card and f"`{method}`" in card
    assert "out-of-vocabulary tokens in the fit corpus: 0.00%" in card and "token-level: fitted on the 16 rows" in card


def test_zipfian_whitening_whitens_the_weighted_table(tmp_path, files):
    from isotropy.calibration import run_calibration

    table, corpus, E = files
    cal = run_calibration(corpus, tmp_path / "out", model=str(table), method="zipfian-whitening", show_progress=False)
    counts = Counter(t for s in CORPUS for t in re.findall(r"\w+|[^\w\s]", s))
    p = np.array([counts.get(w, 0) for w in WORDS], dtype=np.float64)
    p /= p.sum()
    Z = cal.transform.transform(E)
    mu = p @ Z
    cov = (Z - mu).T @ ((Z - mu) * p[:, None])  # identity up to the ddof convention's constant factor
    assert np.abs(mu).max() < 1e-6 * max(1.0, np.abs(Z).max())
    assert np.allclose(cov / np.trace(cov) * DIM, np.eye(DIM), atol=1e-6)


def test_token_methods_are_refused_on_a_transformer_and_need_a_known_token(tmp_path, files):
    from isotropy.calibration import run_calibration

    table, corpus, _ = files
    with pytest.raises(IsotropyError, match="transformer") as err:
        run_calibration(corpus, tmp_path / "out", model=None, method="zipfian-whitening", show_progress=False)
    assert "\n" not in str(err.value)
    unknown = tmp_path / "unknown.txt"
    unknown.write_text("zzz qqq\nxxx\n", encoding="utf-8")
    with pytest.raises(IsotropyError, match="no sentence holds a token"):
        run_calibration(unknown, tmp_path / "out", model=str(table), method="zipfian-whitening", show_progress=False)
    assert not (tmp_path / "out").exists()
