"""Tests for isotropy.analysis: statistics with known answers, figures, report folder, CLI, bad input."""

from __future__ import annotations

import json
import math
import os
import random
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from isotropy import analysis as A
from isotropy.errors import IsotropyError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- helpers


def make_corpus(n: int, seed: int = 0) -> list[str]:
    """Template sentences: varied enough to encode differently, cheap to generate."""
    rng = random.Random(seed)
    subj = [
        "the cat",
        "a dog",
        "my neighbour",
        "the old man",
        "a young girl",
        "the committee",
        "our teacher",
        "the river",
        "a small bird",
        "the company",
        "every student",
        "the pilot",
    ]
    verb = [
        "runs across",
        "looks at",
        "talks about",
        "walks past",
        "writes to",
        "sings for",
        "thinks about",
        "waits near",
        "paints",
        "builds",
        "forgets",
        "remembers",
    ]
    obj = [
        "the house",
        "a red car",
        "the green field",
        "an empty street",
        "the market",
        "a long letter",
        "the mountains",
        "a quiet garden",
        "the station",
        "a new song",
        "the bridge",
        "an old map",
    ]
    adv = [
        "in the morning",
        "quietly",
        "after dinner",
        "every day",
        "with great care",
        "before the storm",
        "at night",
        "slowly",
        "again",
        "for hours",
        "in winter",
        "without a word",
    ]
    return [f"{rng.choice(subj)} {rng.choice(verb)} {rng.choice(obj)} {rng.choice(adv)}." for _ in range(n)]


def cone(n: int, d: int, mean_norm: float, noise_std: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=d)
    m *= mean_norm / np.linalg.norm(m)
    return m + noise_std * rng.normal(size=(n, d))


def check_png(path: Path) -> np.ndarray:
    import matplotlib.image as mpimg

    assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[2] in (3, 4), img.shape
    assert img.shape[0] >= 200 and img.shape[1] >= 300, img.shape
    assert float(np.ptp(img[..., :3])) > 0.1, "image is blank"
    return img


def check_axes_labelled(fig) -> None:
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert axes, "figure has no axes"
    for ax in axes:
        assert ax.get_xlabel().strip(), "x axis has no label"
        assert ax.get_ylabel().strip(), "y axis has no label"
        assert ax.get_title().strip() or fig.get_suptitle().strip()


class FakeTransform:
    """A transform without n_features_in_: doubles every vector."""

    def transform(self, X):
        return 2.0 * np.asarray(X)


# --------------------------------------------------------------------------- statistics with known answers


def test_average_cosine_isotropic_gaussian_is_near_zero():
    X = np.random.default_rng(0).normal(size=(4000, 128))
    cos = A.average_cosine(X, n_pairs=20000, seed=1)
    assert abs(cos["mean"]) < 4 * cos["sem"] + 1e-3
    # the cosine of two independent isotropic vectors has variance 1/d
    assert cos["std"] == pytest.approx(1 / math.sqrt(128), rel=0.05)
    assert cos["n_pairs"] == 20000


@pytest.mark.parametrize("mean_norm,noise_std,d", [(1.0, 1 / math.sqrt(256), 256), (1.0, 0.1, 400), (3.0, 0.05, 200)])
def test_average_cosine_of_planted_cone(mean_norm, noise_std, d):
    # x = m + e, e ~ N(0, s^2 I_d): for large d, cos(x, y) concentrates at |m|^2 / (|m|^2 + d s^2).
    X = cone(3000, d, mean_norm, noise_std)
    expected = mean_norm**2 / (mean_norm**2 + d * noise_std**2)
    got = A.average_cosine(X, n_pairs=20000)["mean"]
    assert got == pytest.approx(expected, abs=0.02)


def test_average_cosine_is_seeded_and_reproducible():
    X = np.random.default_rng(0).normal(size=(100, 8))
    assert A.average_cosine(X, 500, seed=3) == A.average_cosine(X, 500, seed=3)
    assert A.average_cosine(X, 500, seed=3)["mean"] != A.average_cosine(X, 500, seed=4)["mean"]


def test_partition_isotropy_near_one_for_isotropic_near_zero_for_cone():
    rng = np.random.default_rng(0)
    iso = rng.normal(size=(40000, 16))
    assert A.partition_isotropy(iso) > 0.9
    assert A.partition_isotropy(cone(5000, 64, 5.0, 0.5)) < 1e-3


def test_partition_isotropy_matches_direct_formula_and_is_sign_symmetric():
    X = np.random.default_rng(1).normal(size=(300, 5)) * [1, 2, 0.5, 1, 1] + 0.3
    _, C = np.linalg.eigh(X.T @ X)
    Z = np.concatenate([np.exp(X @ C).sum(0), np.exp(-X @ C).sum(0)])
    assert A.partition_isotropy(X) == pytest.approx(Z.min() / Z.max(), rel=1e-10)
    assert A.partition_isotropy(-X) == pytest.approx(A.partition_isotropy(X), rel=1e-10)


def test_partition_isotropy_does_not_overflow_on_large_norms():
    X = cone(200, 16, 5000.0, 10.0)
    value = A.partition_isotropy(X)
    assert value == 0.0 or 0 < value < 1e-100


def test_isoscore_known_values():
    d = 50
    assert A.isoscore(eigenvalues=np.ones(d)) == pytest.approx(1.0)
    assert A.isoscore(eigenvalues=np.r_[1.0, np.zeros(d - 1)]) == pytest.approx(0.0, abs=1e-12)
    # Rudman et al.: variance spread evenly over k of d dimensions scores (k - 1) / (d - 1)
    for k in (2, 10, 25):
        assert A.isoscore(eigenvalues=np.r_[np.ones(k), np.zeros(d - k)]) == pytest.approx((k - 1) / (d - 1))
    rng = np.random.default_rng(0)
    assert A.isoscore(rng.normal(size=(20000, 20))) > 0.95
    # a cone shifted far from the origin but with isotropic noise: IsoScore ignores the mean
    assert A.isoscore(cone(20000, 20, 50.0, 1.0)) > 0.95


def test_covariance_spectrum_matches_numpy_and_handles_few_rows():
    rng = np.random.default_rng(0)
    for n, d in ((200, 10), (6, 10)):
        X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d))
        ev = A.covariance_spectrum(X)
        ref = np.sort(np.clip(np.linalg.eigvalsh(np.cov(X.T)), 0, None))[::-1]
        np.testing.assert_allclose(ev, ref, atol=1e-9 * ref[0])
        assert ev.shape == (d,)


def test_dims_for_variance():
    assert A.dims_for_variance([4, 3, 2, 1], 0.9) == 3
    assert A.dims_for_variance([4, 3, 2, 1], 0.4) == 1
    assert A.dims_for_variance([4, 3, 2, 1], 0.41) == 2
    assert A.dims_for_variance(np.ones(100), 0.9) == 90
    assert A.dims_for_variance([0, 0], 0.9) == 0


def test_projection_keeps_a_cone_away_from_the_origin():
    xy_cone = A.projection_2d(cone(500, 64, 1.0, 0.05))
    assert np.linalg.norm(xy_cone.mean(0)) > 0.8
    xy_iso = A.projection_2d(np.random.default_rng(0).normal(size=(500, 64)))
    assert np.linalg.norm(xy_iso.mean(0)) < 0.1
    assert np.all(np.linalg.norm(xy_cone, axis=1) <= 1 + 1e-9)


# --------------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 50), n_pairs=st.integers(1, 300), seed=st.integers(0, 2**32 - 1))
def test_random_pairs_are_distinct_rows_in_range(n, n_pairs, seed):
    i, j = A.random_pairs(n, n_pairs, seed)
    assert len(i) == len(j) == n_pairs
    assert np.all(i != j)
    assert i.min() >= 0 and j.min() >= 0 and i.max() < n and j.max() < n


finite_rows = hnp.arrays(
    np.float64,
    st.tuples(st.integers(10, 30), st.integers(2, 6)),
    elements=st.floats(-100, 100, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=40, deadline=None)
@given(X=finite_rows, scale=st.floats(0.01, 100), seed=st.integers(0, 1000))
def test_average_cosine_invariant_under_row_scaling_and_rotation(X, scale, seed):
    if np.any(np.linalg.norm(X, axis=1) < 1e-3):
        return
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(X.shape[1], X.shape[1])))
    base = A.average_cosine(X, 200, seed=seed)["mean"]
    assert A.average_cosine(X * scale, 200, seed=seed)["mean"] == pytest.approx(base, abs=1e-9)
    assert A.average_cosine(X @ Q, 200, seed=seed)["mean"] == pytest.approx(base, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(ev=hnp.arrays(np.float64, st.integers(2, 40), elements=st.floats(0, 1e6)), scale=st.floats(1e-3, 1e3))
def test_isoscore_in_unit_interval_and_scale_free(ev, scale):
    s = A.isoscore(eigenvalues=ev)
    assert 0.0 <= s <= 1.0
    assert A.isoscore(eigenvalues=ev * scale) == pytest.approx(s, abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(X=finite_rows)
def test_partition_isotropy_in_unit_interval(X):
    v = A.partition_isotropy(X / 10)
    assert 0.0 <= v <= 1.0


# --------------------------------------------------------------------------- token ranking and kNN


def test_frequency_ranking_orders_seen_tokens_and_places_unseen():
    counts = np.array([0, 5, 9, 5, 0, 1, 0, 7])
    special = [2, 6]
    drop = A.frequency_ranking(counts, special, unseen="drop")
    assert drop.tolist() == [7, 1, 3, 5]  # 9 is special; 5-5 tie broken by id
    last = A.frequency_ranking(counts, special, unseen="last", seed=0)
    assert last[:4].tolist() == [7, 1, 3, 5]
    assert sorted(last[4:].tolist()) == [0, 4]
    assert A.frequency_ranking(counts, special, "last", seed=0).tolist() == last.tolist()
    with pytest.raises(IsotropyError, match="'last' or 'drop'"):
        A.frequency_ranking(counts, special, unseen="first")


def test_knn_stats_match_brute_force():
    import faiss

    rng = np.random.default_rng(0)
    E = rng.normal(size=(300, 12)).astype(np.float32) * rng.uniform(0.5, 2, size=(300, 1)).astype(np.float32)
    index = faiss.IndexFlatL2(12)
    index.add(E)
    q = np.arange(0, 300, 7)
    got = A._knn_stats(E, q, (3, 5), index)
    E64 = E.astype(np.float64)
    D = np.linalg.norm(E64[q, None, :] - E64[None, :, :], axis=2)
    D[np.arange(len(q)), q] = np.inf  # exclude the query itself
    nn = np.argsort(D, axis=1)
    for k in (3, 5):
        dist = np.take_along_axis(D, nn[:, :k], axis=1).mean()
        dots = np.einsum("qd,qkd->qk", E64[q], E64[nn[:, :k]]).mean()
        assert got["knn_l2"][str(k)] == pytest.approx(dist, rel=1e-4)
        assert got["knn_dot"][str(k)] == pytest.approx(dots, rel=1e-4)


class TinyEncoder:
    """An encoder stand-in with a real tokenizer and a tiny embedding matrix we control."""

    def __init__(self, tokenizer, weight):
        import torch

        self.tokenizer = tokenizer
        self.model = torch.nn.Module()
        emb = torch.nn.Embedding(*weight.shape)
        emb.weight.data = torch.from_numpy(weight)
        self.model.get_input_embeddings = lambda: emb
        self.model_name = "tiny"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from isotropy.encoders import default_model_path

    return AutoTokenizer.from_pretrained(str(default_model_path()))


def test_word_report_bucket_statistics_are_exact(tokenizer):
    V = len(tokenizer)
    rng = np.random.default_rng(0)
    # Planted: norms grow with token id, so ranks by frequency must see what we planted.
    W = rng.normal(size=(V, 16)).astype(np.float32)
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    corpus = make_corpus(300)
    counts = A.token_frequencies(tokenizer, corpus, V)
    enc = TinyEncoder(tokenizer, W * 1.0)
    rep = A.word_report(enc, corpus, unseen="drop", buckets=(0, 10, 20), ks=(1, 2), max_queries=None, n_pairs=500)
    order = A.frequency_ranking(counts, tokenizer.all_special_ids, "drop")
    assert rep["ranked_tokens"] == len(order) == rep["seen_tokens"]
    assert rep["corpus_tokens"] == int(counts.sum())
    assert [b["name"] for b in rep["buckets"]] == ["[0, 10)", "[10, 20)", "[20, end)"]
    assert rep["buckets"][0]["mean_norm"] == pytest.approx(1.0, abs=1e-5)
    assert rep["buckets"][2]["n_tokens"] == len(order) - 20
    # kNN distances against brute force within the ranked (seen) tokens
    E = W[order].astype(np.float64)
    D = np.linalg.norm(E[:, None] - E[None], axis=2)
    np.fill_diagonal(D, np.inf)
    d1 = np.sort(D, axis=1)[:, 0]
    assert rep["buckets"][0]["knn_l2"]["1"] == pytest.approx(d1[:10].mean(), rel=1e-4)
    assert rep["buckets"][1]["knn_l2"]["1"] == pytest.approx(d1[10:20].mean(), rel=1e-4)
    top_counts = [t["count"] for t in rep["top_tokens"]]
    assert top_counts == sorted(top_counts, reverse=True) and top_counts[0] == counts.max()
    assert all(t["id"] not in tokenizer.all_special_ids for t in rep["top_tokens"])


def test_word_report_sees_planted_norm_by_frequency(tokenizer):
    V = len(tokenizer)
    rng = np.random.default_rng(1)
    corpus = make_corpus(200)
    counts = A.token_frequencies(tokenizer, corpus, V)
    W = rng.normal(size=(V, 8)).astype(np.float32)
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    W[counts == 0] *= 3.0  # unseen tokens lie far from the origin, seen ones on the unit sphere
    rep = A.word_report(TinyEncoder(tokenizer, W), corpus, buckets=(0, 100, 1000), max_queries=200, n_pairs=500)
    norms = [b["mean_norm"] for b in rep["buckets"]]
    n_seen = rep["seen_tokens"]
    assert 20 < n_seen < 100
    assert norms[1] == pytest.approx(3.0, rel=1e-5) and norms[2] == pytest.approx(3.0, rel=1e-5)
    assert norms[0] == pytest.approx((n_seen * 1.0 + (100 - n_seen) * 3.0) / 100, rel=1e-5)
    assert rep["notes"] and "distinct tokens" in rep["notes"][0]


def test_word_report_without_embedding_matrix_raises_clear_error(tokenizer):
    enc = TinyEncoder(tokenizer, np.zeros((10, 4), dtype=np.float32))

    def no_embeddings():
        raise NotImplementedError

    enc.model.get_input_embeddings = no_embeddings
    with pytest.raises(A.WordLevelUnavailable, match="word-level analysis skipped"):
        A.word_report(enc, ["a b c"])
    enc.model.get_input_embeddings = lambda: None
    with pytest.raises(A.WordLevelUnavailable, match="no 2-D input-embedding weight"):
        A.word_report(enc, ["a b c"])


# --------------------------------------------------------------------------- reports, figures, folder


@pytest.fixture(scope="module")
def synthetic_report(tokenizer):
    from isotropy.transforms.whitening import Whitening

    X = cone(600, 32, 1.0, 0.15)
    sentence = A.sentence_report(X, {"whitening": Whitening().fit(X), "doubled": FakeTransform()}, n_pairs=3000)
    W = np.random.default_rng(0).normal(size=(len(tokenizer), 8)).astype(np.float32)
    word = A.word_report(TinyEncoder(tokenizer, W), make_corpus(200), max_queries=100, n_pairs=1000)
    return {"meta": {"corpus": "synthetic", "encoder": "none"}, "notes": ["a note"], "sentence": sentence, "word": word}


def test_sentence_report_before_and_after(synthetic_report):
    reps = synthetic_report["sentence"]["representations"]
    assert list(reps) == ["raw", "whitening", "doubled"]
    expected = 1.0 / (1.0 + 32 * 0.15**2)
    assert reps["raw"]["average_cosine"]["mean"] == pytest.approx(expected, abs=0.03)
    assert abs(reps["whitening"]["average_cosine"]["mean"]) < 0.02
    assert reps["whitening"]["isoscore"] > 0.99
    assert reps["whitening"]["partition_isotropy"] > reps["raw"]["partition_isotropy"]
    assert reps["whitening"]["dims_for_variance"]["0.9"] >= reps["raw"]["dims_for_variance"]["0.9"]
    # scaling changes neither cosines nor the spectrum's shape
    assert reps["doubled"]["average_cosine"] == reps["raw"]["average_cosine"]
    assert reps["doubled"]["dims_for_variance"] == reps["raw"]["dims_for_variance"]
    json.dumps(A._jsonable(synthetic_report))  # JSON-ready


def test_figure_functions_return_labelled_axes(synthetic_report):
    for part, draw, _caption in A.FIGURES.values():
        fig = draw(synthetic_report[part])
        check_axes_labelled(fig)
    fig = A.plot_projection(synthetic_report["sentence"])
    assert len(fig.axes) == 3  # one panel per representation


def test_write_report_writes_pngs_json_and_markdown(tmp_path, synthetic_report):
    out = A.write_report(tmp_path / "report", synthetic_report)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["report.json", "report.md", *A.FIGURES])
    for f in A.FIGURES:
        check_png(out / f)
    data = json.loads((out / "report.json").read_text())
    assert data["sentence"]["representations"]["raw"]["average_cosine"]["mean"] == pytest.approx(
        synthetic_report["sentence"]["representations"]["raw"]["average_cosine"]["mean"]
    )
    assert [b["name"] for b in data["word"]["buckets"]] == ["[0, 100)", "[100, 500)", "[500, 5000)", "[5000, end)"]
    md = (out / "report.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert sorted(links) == sorted(A.FIGURES)
    assert all(not Path(link).is_absolute() and (out / link).is_file() for link in links)
    assert "| statistic | raw | whitening | doubled |" in md
    assert "| statistic | [0, 100) | [100, 500) | [500, 5000) | [5000, end) |" in md
    assert "a note" in md and "this corpus" in md
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_spectrum_is_floored_at_the_numerical_rank_and_the_report_says_which_end_is_isotropic(tmp_path):
    """A rank-deficient representation (eigenvalues ~1e-20 past its rank) does not squash the log axis."""
    from isotropy.transforms.whitening import Whitening

    X = cone(400, 16, 1.0, 0.3)
    X[:, 12:] = X[:, :4] @ np.random.default_rng(1).normal(size=(4, 4))  # rank 12 of 16
    with pytest.warns(Warning):
        white = Whitening().fit(X)
    rep = A.sentence_report(X, {"whitening": white}, n_pairs=500)
    fig = A.plot_spectrum(rep)
    spectrum = fig.axes[0]
    for line, name in zip(spectrum.get_lines(), rep["representations"]):
        ev = np.asarray(rep["representations"][name]["eigenvalues"])
        share = line.get_ydata()
        assert len(share) == 12 and f"numerical rank 12 of {len(ev)}" in line.get_label()  # raw: 12 of 16
        assert share.min() > 1e-12 and len(share) == (ev / ev.sum() > 16 * np.finfo(float).eps * ev.max() / ev.sum()).sum()
    assert spectrum.get_ylim()[0] > 1e-13
    md = A._markdown_report({"sentence": rep})
    for words in (
        "(-1..1, isotropic 0)",
        "I(W) (Mu & Viswanath; 0..1, isotropic 1)",
        "IsoScore (Rudman et al.; 0..1, isotropic 1)",
    ):
        assert words in md
    assert "not scale-invariant" in md and "--recommend" in md  # I(W)'s caveat; the recommendation is on request


def test_write_report_is_atomic(tmp_path, synthetic_report, monkeypatch):
    out = tmp_path / "report"
    A.write_report(out, {"sentence": synthetic_report["sentence"]})
    before = sorted(p.name for p in out.iterdir())
    assert "token_norms.png" not in before

    def broken(_):
        raise RuntimeError("drawing failed")

    monkeypatch.setitem(A.FIGURES, "token_norms.png", ("word", broken, "broken"))
    with pytest.raises(RuntimeError):
        A.write_report(out, synthetic_report)
    assert sorted(p.name for p in out.iterdir()) == before  # the old report is intact
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_sentence_report_rejects_bad_input():
    X = np.random.default_rng(0).normal(size=(50, 8))
    with pytest.raises(IsotropyError, match="at least 10"):
        A.sentence_report(X[:5])
    bad = X.copy()
    bad[7, 2] = np.nan
    with pytest.raises(IsotropyError, match="row 7"):
        A.sentence_report(bad)

    class Narrow:
        n_features_in_ = 16

        def transform(self, X):
            return X

    with pytest.raises(IsotropyError, match="fitted on 16-dimensional vectors but these have 8"):
        A.sentence_report(X, {"w": Narrow()})
    with pytest.raises(IsotropyError, match="reserved"):
        A.sentence_report(X, {"raw": FakeTransform()})


def test_tables_have_paper_layout(synthetic_report):
    from rich.console import Console

    t = A.word_table(synthetic_report["word"])
    assert [c.header for c in t.columns] == ["statistic", "[0, 100)", "[100, 500)", "[500, 5000)", "[5000, end)"]
    stats = list(t.columns[0]._cells)
    assert stats[0] == "mean l2 norm"
    assert [s for s in stats if "NN" in s] == [f"mean {k}-NN l2 distance" for k in (3, 5, 7)] + [
        f"mean {k}-NN dot product" for k in (3, 5, 7)
    ]
    console = Console(record=True, width=140)
    A.print_tables(synthetic_report, console)
    text = console.export_text()
    assert "average cosine of random pairs" in text and "mean 7-NN dot product" in text


# --------------------------------------------------------------------------- analyze(): the demo's call, bad input


def test_analyze_with_tiny_model_and_transform_folder(tmp_path, tiny_model_dir):
    from isotropy.encoders import Encoder
    from isotropy.transforms.whitening import Whitening

    enc = Encoder(tiny_model_dir, pooling="last-avg", max_length=32)
    corpus = make_corpus(60)
    vecs = enc.encode(corpus)
    Whitening(shrinkage="auto").fit(vecs).save(tmp_path / "my-whitening")
    rep = A.analyze(corpus + ["", "   "], enc, [tmp_path / "my-whitening"], tmp_path / "out", show_progress=False, n_pairs=2000)
    assert rep["meta"]["non_empty_lines"] == 60 and rep["meta"]["lines_used"] == 60
    assert list(rep["sentence"]["representations"]) == ["raw", "my-whitening"]
    assert rep["meta"]["auto_whitening"] is False
    assert rep["word"]["vocab_size"] == len(enc.tokenizer)
    assert sorted(rep["figures"]) == sorted(A.FIGURES)
    for f in A.FIGURES:
        check_png(tmp_path / "out" / f)
    on_disk = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (
        on_disk["sentence"]["representations"]["my-whitening"]["average_cosine"]
        == rep["sentence"]["representations"]["my-whitening"]["average_cosine"]
    )


def test_analyze_auto_whitens_and_skips_missing_embeddings(tmp_path, tiny_model_dir, capsys):
    from isotropy.encoders import Encoder

    enc = Encoder(tiny_model_dir, pooling="cls", max_length=32)

    def no_embeddings():
        raise NotImplementedError("no embeddings here")

    enc.model.get_input_embeddings = no_embeddings
    rep = A.analyze(make_corpus(40), enc, None, tmp_path / "out", show_progress=False, n_pairs=1000, max_sentences=30)
    assert list(rep["sentence"]["representations"]) == ["raw", A.AUTO_WHITENING]
    assert rep["meta"]["lines_used"] == 30 and rep["meta"]["auto_whitening"] is True
    assert abs(rep["sentence"]["representations"][A.AUTO_WHITENING]["average_cosine"]["mean"]) < 0.1
    assert rep["word"] is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "word-level analysis skipped" in err
    md = (tmp_path / "out" / "report.md").read_text()
    assert "word-level analysis skipped" in md and "## Word level" not in md
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        ["report.json", "report.md", "cosine_histogram.png", "spectrum.png", "projection.png"]
    )


class ExplodingEncoder:
    def encode(self, *a, **k):
        raise AssertionError("encoded before checking the output folder")


def test_unwritable_output_fails_before_any_work(tmp_path, monkeypatch):
    corpus = make_corpus(20)
    with pytest.raises(IsotropyError, match="does not exist"):
        A.analyze(corpus, ExplodingEncoder(), None, tmp_path / "missing" / "report")
    (tmp_path / "file").write_text("x")
    with pytest.raises(IsotropyError, match="exists and is not a folder"):
        A.analyze(corpus, ExplodingEncoder(), None, tmp_path / "file")
    with pytest.raises(IsotropyError, match="does not exist"):
        A.analyze(corpus, ExplodingEncoder(), None, tmp_path / "file" / "report")
    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    with pytest.raises(IsotropyError, match="not writable"):
        A.analyze(corpus, ExplodingEncoder(), None, ro / "report")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc (a folder nobody, root included, can write)")
def test_unwritable_output_even_for_root():
    with pytest.raises(IsotropyError, match="not writable"):
        A.analyze(make_corpus(20), ExplodingEncoder(), None, "/proc/isotropy-report")


def test_too_small_corpus_says_how_many_lines(tmp_path):
    with pytest.raises(IsotropyError, match=r"has 3 non-empty lines; the analysis needs at least 10"):
        A.analyze(["a", "", "b", "c"], ExplodingEncoder(), None, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _cli(args, capsys):
    from isotropy.cli import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    small = tmp_path / "small.txt"
    small.write_text("one\ntwo\n\nthree\n")
    code, out, err = _cli(["analyze", str(small), "-o", str(tmp_path / "r")], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: ") and "small.txt has 3 non-empty lines" in err and "at least 10" in err
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(make_corpus(20)) + "\n")
    code, out, err = _cli(["analyze", str(corpus), "-o", str(tmp_path / "nope" / "r")], capsys)
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err
    code, out, err = _cli(["analyze", str(corpus), "-o", str(tmp_path / "r"), "-t", str(tmp_path / "no-transform")], capsys)
    assert code == 2 and err.count("\n") == 1 and "no-transform" in err


def test_cli_runs_with_a_local_model(tmp_path, tiny_model_dir, capsys):

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(make_corpus(50)) + "\n")
    code, stdout, stderr = _cli(
        [
            "analyze",
            str(corpus),
            "-o",
            str(tmp_path / "r"),
            "--model",
            str(tiny_model_dir),
            "--pairs",
            "500",
            "--no-auto-whiten",
            "--unseen-tokens",
            "drop",
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0
    assert "average cosine of random pairs" in stdout and "mean 3-NN l2 distance" in stdout
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert list(rep["sentence"]["representations"]) == ["raw"]
    assert rep["word"]["unseen"] == "drop" and rep["word"]["ranked_tokens"] == rep["word"]["seen_tokens"]
    assert "wrote" in stderr and "distinct tokens" in stderr


# --------------------------------------------------------------------------- end to end (slow)


@pytest.mark.slow
def test_cli_default_model_1000_lines(tmp_path, capsys):
    """The default model on 1,000 lines, end to end (its time is a benchmark: bench/analysis.py)."""
    from isotropy.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(make_corpus(1000, seed=1)) + "\n")
    with pytest.raises(SystemExit) as exc:
        main(["analyze", str(corpus), "-o", str(tmp_path / "report"), "--no-progress"])
    assert exc.value.code == 0
    rep = json.loads((tmp_path / "report" / "report.json").read_text())
    raw = rep["sentence"]["representations"]["raw"]
    white = rep["sentence"]["representations"][A.AUTO_WHITENING]
    assert raw["average_cosine"]["mean"] > 0.1  # the default model's vectors share a direction
    assert abs(white["average_cosine"]["mean"]) < 0.01
    assert white["dims_for_variance"]["0.9"] > raw["dims_for_variance"]["0.9"]
    assert rep["word"]["vocab_size"] == 30522
    for f in A.FIGURES:
        check_png(tmp_path / "report" / f)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::isotropy.errors.RankDeficientWarning")  # cls vectors: rank 381 of 384
def test_cone_effect_on_stsb_cls(stsb_cls):
    """Default model, cls pooling, the fixture's STS-B sentences (conftest.py): the cone, and whitening removing it."""
    from isotropy.transforms.whitening import Whitening

    X = stsb_cls["fit"]
    rep = A.sentence_report(X, {"whitening": Whitening().fit(X)}, n_pairs=20000)
    raw = rep["representations"]["raw"]["average_cosine"]["mean"]
    white = rep["representations"]["whitening"]["average_cosine"]["mean"]
    assert 0.45 < raw < 0.65, raw  # measured 0.54
    assert abs(white) < 0.02, white
