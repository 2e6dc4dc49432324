"""Token-level calibrations: weighted moments, uniform and Zipfian whitening of a table, the teacher map."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isotropy import IsotropyError
from isotropy.transforms.moments import Moments

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _rows(seed: int, n: int, d: int, loc: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return loc + rng.standard_normal((n, d)) @ rng.standard_normal((d, d))


def _close(a: Moments, b: Moments, rtol: float = 1e-9) -> None:
    """Equal statistics within rounding, tolerances scaled to the data (the scatter may be exactly 0)."""
    assert a.n == pytest.approx(b.n, rel=1e-12)
    size = max(np.abs(b.mean).max(), 1.0)
    scale = max(np.abs(b.scatter).max(), size**2)
    np.testing.assert_allclose(a.mean, b.mean, rtol=0, atol=rtol * size)
    np.testing.assert_allclose(a.scatter, b.scatter, rtol=0, atol=rtol * scale)
    third = b.to_arrays()["third"]
    np.testing.assert_allclose(a.to_arrays()["third"], third, rtol=0, atol=rtol * max(np.abs(third).max(), scale * size))
    if np.abs(b.scatter).max() > 1e-3 * size**2:  # the shrinkage is a ratio: meaningless on (near) constant rows
        assert a.ledoit_wolf_shrinkage() == pytest.approx(b.ledoit_wolf_shrinkage(), rel=1e-6, abs=1e-9)


# --------------------------------------------------------------------------- weighted moments


@FAST
@given(n=st.integers(2, 40), d=st.integers(1, 6), seed=st.integers(0, 10**6), loc=st.floats(-50, 50))
def test_unit_weights_give_the_unweighted_moments_exactly(n, d, seed, loc):
    X = _rows(seed, n, d, loc)
    a, b = Moments().update(X), Moments().update(X, weights=np.ones(n))
    assert a.n == b.n and isinstance(b.n, int)
    for key, value in a.to_arrays().items():
        assert np.array_equal(value, b.to_arrays()[key]), key


@FAST
@given(n=st.integers(1, 30), d=st.integers(1, 5), seed=st.integers(0, 10**6), loc=st.floats(-20, 20), data=st.data())
def test_integer_weights_equal_repeated_rows(n, d, seed, loc, data):
    X = _rows(seed, n, d, loc)
    w = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)))
    if w.sum() < 2:
        w[0] += 2
    weighted = Moments().update(X, weights=w)
    repeated = Moments().update(np.repeat(X, w, axis=0))
    assert isinstance(weighted.n, int)
    _close(weighted, repeated)


@FAST
@given(n=st.integers(4, 60), d=st.integers(1, 5), seed=st.integers(0, 10**6), cut=st.floats(0.1, 0.9))
def test_weighted_moments_stream_and_merge_exactly(n, d, seed, cut):
    rng = np.random.default_rng(seed)
    X = _rows(seed, n, d, 5.0)
    w = rng.random(n) * 3
    one = Moments().update(X, weights=w)
    k = max(1, int(cut * n))
    streamed = Moments().update(X[:k], weights=w[:k]).update(X[k:], weights=w[k:])
    merged = Moments().update(X[k:], weights=w[k:]).merge(Moments().update(X[:k], weights=w[:k]))
    for other in (streamed, merged):
        _close(other, one)
    # against the textbook weighted formulas
    mu = (w @ X) / w.sum()
    np.testing.assert_allclose(one.mean, mu, atol=1e-9 * max(1.0, np.abs(mu).max()))
    C = (X - mu).T @ ((X - mu) * w[:, None])
    np.testing.assert_allclose(one.scatter, C, atol=1e-9 * np.abs(C).max())
    assert one.n == pytest.approx(w.sum())
    again = Moments.from_arrays(one.to_arrays())
    assert isinstance(again.n, float) and again.n == one.n


def test_weighted_moments_small_blocks(monkeypatch):
    import isotropy.transforms.moments as mod

    X, w = _rows(1, 300, 7, 2.0), np.random.default_rng(1).random(300)
    big = Moments().update(X, weights=w)
    monkeypatch.setattr(mod, "BLOCK_BYTES", 8 * 7 * 16)  # 16 rows a block
    _close(Moments().update(X, weights=w), big)


@pytest.mark.parametrize(
    "weights, says",
    [
        (np.ones(3), "one number per row"),
        (np.array([1.0, -1.0, 1.0, 1.0]), "row 6 "),
        (np.array([1.0, 1.0, np.nan, 1.0]), "row 7 "),
        (["a", "b", "c", "d"], "numbers"),
    ],
)
def test_bad_weights_are_one_error_and_change_nothing(weights, says):
    m = Moments().update(_rows(0, 5, 3))
    before = m.to_arrays()
    with pytest.raises(IsotropyError, match=says):
        m.update(_rows(1, 4, 3), weights=weights)
    assert all(np.array_equal(v, m.to_arrays()[k]) for k, v in before.items())


# --------------------------------------------------------------------------- token-level whitening

from isotropy import load_transform  # noqa: E402
from isotropy.transforms.token_whitening import (  # noqa: E402
    ZipfianWhitening,
    fit_token_whitening,
    fold_into_table,
    zipf_probabilities,
)
from isotropy.transforms.whitening import Whitening  # noqa: E402


@pytest.fixture(scope="module")
def table() -> np.ndarray:
    """A small 'vocabulary' of 300 tokens in 8 dimensions with a common direction, as word vectors have."""
    rng = np.random.default_rng(7)
    E = rng.standard_normal((300, 8)) @ rng.standard_normal((8, 8)) + 4.0 * rng.standard_normal(8)
    return E.astype(np.float32)


def _weighted_cov(Z: np.ndarray, p: np.ndarray) -> np.ndarray:
    return Moments().update(Z, weights=p * (len(p) / p.sum())).covariance(ddof=1)


def test_zipf_probabilities_follow_the_rank_law():
    p = zipf_probabilities(5, offset=1.0)
    assert p.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(p / p[0], [1, 2 / 3, 2 / 4, 2 / 5, 2 / 6])
    for bad in (0, -3, 2.5, True):
        with pytest.raises(IsotropyError, match="positive integer"):
            zipf_probabilities(bad)
    with pytest.raises(IsotropyError, match="zipf_offset"):
        zipf_probabilities(3, offset=-1)


@FAST
@given(seed=st.integers(0, 10**6), alpha=st.floats(0.5, 2.0))
def test_zipfian_whitening_makes_the_weighted_table_isotropic(seed, alpha):
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((80, 5)) @ rng.standard_normal((5, 5)) + rng.standard_normal(5) * 3
    p = rng.random(80) ** (1 / alpha) + 1e-3
    z = fit_token_whitening(E, p)
    Z = fold_into_table(E, z).astype(np.float64)
    np.testing.assert_allclose(_weighted_cov(Z, p), np.eye(5), atol=1e-4)
    np.testing.assert_allclose(p @ Z / p.sum(), 0, atol=1e-4 * np.sqrt(5))  # the weighted mean goes to 0
    # counts on another scale are the same probabilities
    np.testing.assert_allclose(
        fit_token_whitening(E, p * 1e3).transform(E), z.transform(E), rtol=1e-5, atol=1e-6
    )  # scale-free; roundoff through the smallest eigenvalue


def test_zipfian_default_weights_are_zipf_over_the_row_order(table):
    by_rank = ZipfianWhitening(zipf_offset=1.5).fit(table)
    explicit = ZipfianWhitening().fit(table, sample_weight=zipf_probabilities(len(table), 1.5))
    np.testing.assert_allclose(by_rank.transform(table), explicit.transform(table), rtol=1e-6, atol=1e-6)
    uniform = fit_token_whitening(table, weighting="uniform")
    assert type(uniform) is Whitening
    np.testing.assert_allclose(uniform.transform(table), Whitening().fit(table).transform(table))
    # the two weightings differ: frequent rows dominate the Zipfian moments
    assert not np.allclose(uniform.mean_, by_rank.mean_, atol=1e-3)


def test_zipfian_whitening_saves_loads_and_folds(table, tmp_path):
    z = ZipfianWhitening(n_components=6, power=0.5).fit(table)
    assert isinstance(z.n_samples_seen_, float) and z.n_features_out_ == 6
    z.save(tmp_path / "z")
    again = load_transform(tmp_path / "z")
    assert type(again) is ZipfianWhitening and again.get_params() == z.get_params()
    np.testing.assert_array_equal(again.transform(table), z.transform(table))
    assert "Zipfian" in z.describe()
    import torch

    with torch.no_grad():
        np.testing.assert_allclose(z.to_torch()(torch.from_numpy(table)).numpy(), z.transform(table), rtol=1e-4, atol=1e-4)
    # folding: the mean of folded rows is the transform of the mean of raw rows, for any sentence
    folded = fold_into_table(table, z)
    rng = np.random.default_rng(0)
    sentences = [rng.integers(0, len(table), size=rng.integers(1, 12)) for _ in range(50)]
    raw = np.stack([table[ids].astype(np.float64).mean(0) for ids in sentences])
    pooled = np.stack([folded[ids].astype(np.float64).mean(0) for ids in sentences])
    np.testing.assert_allclose(pooled, z.transform(raw), atol=1e-5 * np.abs(pooled).max())


def test_token_whitening_refuses_bad_input(table):
    with pytest.raises(IsotropyError, match="one number per row"):
        fit_token_whitening(table, np.ones(3))
    with pytest.raises(IsotropyError, match=r"sample_weight .*: row 2 \(0-based\)"):
        fit_token_whitening(table, np.r_[1.0, 1.0, -1.0, np.ones(len(table) - 3)])
    with pytest.raises(IsotropyError, match="all 0"):
        fit_token_whitening(table, np.zeros(len(table)))
    with pytest.raises(IsotropyError, match="uniform"):
        fit_token_whitening(table, np.ones(len(table)), weighting="uniform")
    with pytest.raises(IsotropyError, match="weighting"):
        fit_token_whitening(table, weighting="tf-idf")
    with pytest.raises(IsotropyError, match="sample_weight"):
        ZipfianWhitening().partial_fit(table)
    with pytest.raises(IsotropyError, match="affine"):
        fold_into_table(table, object())


# --------------------------------------------------------------------------- the teacher map

from isotropy.transforms.teacher_map import TeacherMap  # noqa: E402


@FAST
@given(n=st.integers(12, 60), d_in=st.integers(1, 6), d_out=st.integers(1, 5), seed=st.integers(0, 10**6), loc=st.floats(-30, 30))
def test_teacher_map_recovers_an_exact_affine_map(n, d_in, d_out, seed, loc):
    rng = np.random.default_rng(seed)
    X = loc + rng.standard_normal((n, d_in))
    A, b = rng.standard_normal((d_in, d_out)), rng.standard_normal(d_out) * 5
    Y = X @ A + b
    k = n // 3
    tm = TeacherMap().partial_fit(X[:k], Y[:k]).merge(TeacherMap().fit(X[k:], Y[k:]))
    A2, b2 = tm.affine_()
    np.testing.assert_allclose(A2, A, atol=1e-6 * (1 + np.abs(A).max()))
    np.testing.assert_allclose(tm.transform(X), Y, atol=1e-6 * (1 + np.abs(Y).max()))


@pytest.mark.parametrize("alpha", [0.0, 0.3, 10.0])
def test_teacher_map_equals_scikit_learn(alpha, tmp_path):
    from sklearn.linear_model import LinearRegression, Ridge

    rng = np.random.default_rng(3)
    X = rng.standard_normal((70, 6)) @ rng.standard_normal((6, 6)) + 2.0
    Y = X @ rng.standard_normal((6, 4)) + 0.5 * rng.standard_normal((70, 4))
    ref = (Ridge(alpha=alpha) if alpha else LinearRegression()).fit(X, Y)
    tm = TeacherMap(alpha=alpha)
    for chunk in np.array_split(np.arange(70), 4):
        tm.partial_fit(X[chunk], Y[chunk])
    A, b = tm.affine_()
    np.testing.assert_allclose(A, ref.coef_.T, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(b, ref.intercept_, rtol=1e-7, atol=1e-9)
    # the moments as plain arrays and back (what a kept copy of a pass's sums reads): the same map
    back = TeacherMap.from_moments(Moments.from_arrays(tm.moments_.to_arrays()), tm.n_features_in_, alpha)
    assert (back.n_features_in_, back.n_features_out_) == (6, 4)
    for got, want in zip(back.affine_(), (A, b), strict=True):
        np.testing.assert_array_equal(got, want)
    # saved like every transform, loaded by load_transform
    tm.save(tmp_path / "tm")
    again = load_transform(tmp_path / "tm")
    assert type(again) is TeacherMap and again.alpha == alpha
    np.testing.assert_array_equal(again.transform(X), tm.transform(X))
    assert again.n_features_in_ == 6 and again.n_features_out_ == 4 and "\n" not in again.describe()
    import torch

    with torch.no_grad():
        np.testing.assert_allclose(tm.to_torch()(torch.from_numpy(X)).numpy(), tm.transform(X), atol=1e-10)


def test_teacher_map_rank_deficient_student_gives_the_minimum_norm_solution():
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(5)
    X = rng.standard_normal((50, 3)) @ rng.standard_normal((3, 5))  # rank 3 in 5 columns
    Y = X @ rng.standard_normal((5, 2)) + 1.0
    A, b = TeacherMap().fit(X, Y).affine_()
    ref = LinearRegression().fit(X, Y)
    np.testing.assert_allclose(X @ A + b, ref.predict(X), atol=1e-8)
    np.testing.assert_allclose(A, ref.coef_.T, atol=1e-6)


def test_teacher_map_refuses_bad_input():
    X = np.random.default_rng(0).standard_normal((10, 3))
    with pytest.raises(IsotropyError, match="teacher's vectors Y"):
        TeacherMap().fit(X)
    with pytest.raises(IsotropyError, match="same sentences"):
        TeacherMap().fit(X, X[:9])
    with pytest.raises(IsotropyError, match="alpha"):
        TeacherMap(alpha=-1).fit(X, X)
    with pytest.raises(IsotropyError, match="at least 2 pairs"):
        TeacherMap().fit(X[:1], X[:1])
    tm = TeacherMap().fit(X, X[:, :2])
    with pytest.raises(IsotropyError, match="merge"):
        tm.merge(TeacherMap().fit(X, X))
    with pytest.raises(IsotropyError, match="dimensions"):
        tm.partial_fit(X[:, :2], X[:, :2])
    for width in (0, 5):  # the student's columns must leave the teacher at least one
        with pytest.raises(IsotropyError, match="more than"):
            TeacherMap.from_moments(tm.moments_, width)
    with pytest.raises(IsotropyError, match="alpha"):
        TeacherMap.from_moments(tm.moments_, 3, alpha=-1.0)


# --------------------------------------------------------------------------- isotropy distill

CORPUS = [
    f"the {a} {b} sat on the {c} mat"
    for a in ("red", "big", "old")
    for b in ("cat", "dog", "bird")
    for c in ("blue", "new", "soft", "flat")
]


@pytest.fixture(scope="module")
def tiny_static():
    """A model2vec StaticModel over the default model's tokenizer with a random 16-d table (what
    distill returns, without its token pass: bench/static.py runs the real distill)."""
    StaticModel = pytest.importorskip("model2vec").StaticModel
    from tokenizers import Tokenizer

    from isotropy.encoders import default_model_path

    tok = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    rng = np.random.default_rng(0)
    table = rng.standard_normal((tok.get_vocab_size(), 16)) @ rng.standard_normal((16, 16)) + 3.0
    return StaticModel(table.astype(np.float32), tok, normalize=True)


def test_distilled_model_with_a_folded_teacher_map_encodes_as_the_map_of_the_raw_model(tiny_static, tiny_model_dir, tmp_path):
    import copy

    from model2vec import StaticModel

    from isotropy.distill.corpus_fit import fit_corpus
    from isotropy.distill.run import fold_static_model
    from isotropy.encoders import Encoder

    static = copy.deepcopy(tiny_static)
    assert static.dim == 16
    probe = CORPUS[::3] + ["a sentence the corpus never had", "mat"]
    raw = static.encode(probe, normalize=False)
    tm = fit_corpus(static, Encoder(tiny_model_dir), CORPUS, tokens=False, show_progress=False).teacher_map
    assert tm.n_features_in_ == 16 and tm.n_features_out_ == 32 and tm.moments_.n == len(CORPUS)
    fold_static_model(static, tm)
    static.save_pretrained(tmp_path / "m")
    again = StaticModel.from_pretrained(str(tmp_path / "m"))  # the saved folder, as model2vec loads it
    got, want = again.encode(probe).astype(np.float64), tm.transform(raw.astype(np.float64))
    cos = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    assert np.all(cos > 1 - 1e-5), cos.min()


def test_distill_command_writes_a_guarded_model2vec_folder(tiny_static, tiny_model_dir, tmp_path, monkeypatch):
    import json

    from model2vec import StaticModel

    import isotropy.distill.run as mod
    from helpers import run_cli

    monkeypatch.setattr(mod, "distill_static", lambda model, dims, show: __import__("copy").deepcopy(tiny_static))
    (tmp_path / "c.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    out = tmp_path / "static"
    code, _, err = run_cli(["distill", "-m", tiny_model_dir, "-o", out, "--dims", "16", "--corpus", tmp_path / "c.txt"])
    assert code == 0, err
    info = json.loads((out / "isotropy.json").read_text())
    fitted = info["distill"]["corpus_fit"]
    assert info["kind"] == "static-model" and fitted["sentences"] == len(CORPUS) and fitted["fit"] == "tokens"
    # spans on by default: halves, a dropped-word copy and a cut copy of every 8-word line but the held-out ones
    from isotropy.distill.corpus_fit import HELD_OUT, span_texts

    fitting = [s for i, s in enumerate(CORPUS) if i % HELD_OUT != HELD_OUT - 1]
    assert fitted["spans"].startswith(f"{len(span_texts(fitting))} spans") and "(halves, drop, cut)" in fitted["spans"]
    assert fitted["tokens"]["chosen"] == "held-out (cosine)" and set(fitted["tokens"]["held_out_agreement"]) == set(
        fitted["tokens"]["held_out_error"]
    )
    # --dims is the width written (the teacher's 32-d vectors on their 16 principal axes), and what is recorded
    m2v = StaticModel.from_pretrained(str(out))
    assert m2v.encode(["the red cat"]).shape == (1, 16) and info["distill"]["dims"] == 16
    assert json.loads((out / "config.json").read_text())["hidden_dim"] == 16
    card = (out / "README.md").read_text()
    assert "isotropy-" not in card and ".tmp" not in card and "static" in card and "held-out" in card
    # sentence-transformers loads the twin folder and agrees with model2vec
    from sentence_transformers import SentenceTransformer

    probe = CORPUS[::5] + ["a mat", "the old bird"]
    a = m2v.encode(probe).astype(np.float64)
    b = SentenceTransformer(str(out / "sentence-transformers"), device="cpu").encode(probe).astype(np.float64)
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert np.all(cos > 1 - 1e-5), cos.min()
    # replaced when isotropy wrote it; anything else is refused before any work
    code, _, err = run_cli(["distill", "-m", tiny_model_dir, "-o", out, "--dims", "16"])
    assert code == 0, err
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    code, _, err = run_cli(["distill", "-m", tiny_model_dir, "-o", tmp_path / "mine", "--dims", "16"])
    assert code == 2 and "refusing to replace" in err and (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    (tmp_path / "unk.txt").write_text("\u2603 \u2603\n\u2744\n", encoding="utf-8")  # only [UNK] tokens
    for args, says in (
        (["--dims", "-3"], "--dims"),
        (["--dims", "16", "--corpus", tmp_path / "missing.txt"], "missing.txt"),
        (["--dims", "33"], "wider than the model (32"),
        (["--dims", "16", "--corpus", tmp_path / "unk.txt"], "holds a token of the model's vocabulary"),
    ):
        code, _, err = run_cli(["distill", "-m", tiny_model_dir, "-o", tmp_path / "new", *args])
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "new").exists()


def test_distill_fit_map_and_an_interrupted_fit_leave_nothing(tiny_static, tiny_model_dir, tmp_path, monkeypatch):
    import json

    import isotropy.distill.corpus_fit as fit_mod
    import isotropy.distill.run as mod
    from helpers import run_cli

    monkeypatch.setattr(mod, "distill_static", lambda model, dims, show: __import__("copy").deepcopy(tiny_static))
    (tmp_path / "c.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    out = tmp_path / "mapped"
    code, _, err = run_cli(
        ["distill", "-m", tiny_model_dir, "-o", out, "--dims", "0", "--corpus", tmp_path / "c.txt", "--fit", "map"]
    )
    assert code == 0, err
    info = json.loads((out / "isotropy.json").read_text())["distill"]
    assert info["corpus_fit"]["fit"] == "map" and "tokens" not in info["corpus_fit"] and info["dims"] == 32

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fit_mod.TokenRegression, "solve", interrupt)  # Ctrl-C in the middle of the fit
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run_cli(
        ["distill", "-m", tiny_model_dir, "-o", tmp_path / "cut", "--dims", "16", "--corpus", tmp_path / "c.txt"]
    )
    assert code == 130 and "no partial output" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_quantized_static_model_is_refused_for_folding(tiny_static):
    import copy

    from isotropy.distill.run import fold_static_model

    static = copy.deepcopy(tiny_static)
    static.weights = np.ones(len(static.embedding), dtype=np.float32)
    with pytest.raises(IsotropyError, match="vocabulary quantization"):
        fold_static_model(static, TeacherMap().fit(np.eye(16), np.eye(16)))


class _HashTeacher:
    """A teacher whose vector of a text is a fixed pseudo-random function of the text (no model to load)."""

    def encode(self, sentences, show_progress=None):
        import zlib

        return np.stack([np.random.default_rng(zlib.crc32(s.encode())).standard_normal(8) for s in sentences])


def test_spans_add_pieces_of_fitting_lines_and_the_dask_pass_equals_one_process(tiny_static, monkeypatch):
    distributed = pytest.importorskip("distributed")
    import isotropy.distill.corpus_fit as fit_mod

    monkeypatch.setattr(fit_mod, "CHUNK", 5)
    monkeypatch.setattr(fit_mod, "PART", 10)
    monkeypatch.setattr(fit_mod, "HELD_SAMPLE", 2)
    corpus = [f"{s} and then it slept" if i % 2 else s for i, s in enumerate(CORPUS)]  # lines of 7 and 11 words
    one = fit_mod.fit_corpus(tiny_static, _HashTeacher(), corpus, spans=True, show_progress=False)
    fitting = [s for i, s in enumerate(corpus) if i % fit_mod.HELD_OUT != fit_mod.HELD_OUT - 1]
    long = sum(len(s.split()) >= fit_mod.SPAN_MIN_WORDS for s in fitting)
    assert one.spans == len(fit_mod.span_texts(fitting)) and 3 * long <= one.spans <= 4 * long and long > 0
    # each target is a unit vector times n ** -TARGET_POWER, so the fitting sums' trace of Y^T Y is sum(n ** -2p)
    n = np.concatenate([fit_mod.static_ids(tiny_static, t)[1] for t in (fitting, fit_mod.span_texts(fitting))])
    assert one.fit.yy_.trace() == pytest.approx(np.sum(np.maximum(n, 1) ** (-2 * fit_mod.TARGET_POWER)), rel=1e-9)
    assert one.fit.n_ == len(fitting) + one.spans and one.held.n_ == len(corpus) - len(fitting)
    assert one.teacher_map.moments_.n == len(corpus)  # the map sees whole lines only
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=":0") as client:
        many = fit_mod.fit_corpus(tiny_static, _HashTeacher(), corpus, spans=True, engine="dask", address=client)
    assert (many.sentences, many.empty, many.spans, many.fit.n_, many.held.n_) == (
        one.sentences,
        one.empty,
        one.spans,
        one.fit.n_,
        one.held.n_,
    )
    for a, b in ((one.fit, many.fit), (one.held, many.held)):
        assert abs(a.gram_ - b.gram_).max() <= 1e-10 * abs(a.gram_).max()  # sparse: V x V dense would be 7 GB
        np.testing.assert_allclose(a.cross_, b.cross_, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a.yy_, b.yy_, rtol=1e-10)
    np.testing.assert_allclose(one.teacher_map.moments_.scatter, many.teacher_map.moments_.scatter, rtol=1e-9, atol=1e-9)
    (A1, Y1), (A2, Y2) = one.held_sample(), many.held_sample()
    assert A1.shape[0] == 2 and np.array_equal(A1.toarray(), A2.toarray()) and np.array_equal(Y1, Y2)


def test_the_dask_pass_sends_the_static_model_to_the_cluster_once(tiny_static, monkeypatch):
    """Each part reads the static model from one task's result: passed to every part, its table was pickled into
    each task the client held (1M lines: 62 parts, 4.2 GB on the client before a chunk was encoded)."""
    distributed = pytest.importorskip("distributed")
    import isotropy.distill.corpus_fit as fit_mod

    monkeypatch.setattr(fit_mod, "CHUNK", 5)
    monkeypatch.setattr(fit_mod, "PART", 10)
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=":0") as client:
        calls = []
        submit = client.submit
        monkeypatch.setattr(client, "submit", lambda *a, **k: calls.append(a) or submit(*a, **k))
        many = fit_mod.fit_corpus(tiny_static, _HashTeacher(), CORPUS, engine="dask", address=client)
    parts = [a for a in calls if a[0] is fit_mod._part]
    assert len(parts) == -(-len(CORPUS) // 10) >= 3 and many.sentences == len(CORPUS)
    assert sum(any(x is tiny_static for x in a) for a in calls) == 1  # the one task that holds it
    assert all(isinstance(a[1], distributed.Future) and a[1].key == parts[0][1].key for a in parts)


def test_cosine_agreement_is_one_for_a_student_that_reproduces_the_teacher():
    from scipy.sparse import identity

    from isotropy.distill.corpus_fit import cosine_agreement

    rng = np.random.default_rng(1)
    Y = rng.standard_normal((6, 4))
    score = cosine_agreement(identity(6, format="csr"), Y, Y.mean(0), Y.mean(0))
    assert score(Y) == pytest.approx(1.0)
    assert score(rng.standard_normal((6, 4))) < 0.99


@settings(max_examples=60, deadline=None)
@given(words=st.lists(st.text("abc", min_size=1, max_size=3), min_size=1, max_size=30), parts=st.integers(2, 4))
def test_pieces_cut_a_sentence_into_even_runs_of_its_words(words, parts):
    from isotropy.distill.corpus_fit import pieces

    out = pieces([" ".join(words)], parts, parts)
    if len(words) < parts:
        assert out == []
        return
    runs = [p.split() for p in out]
    assert len(runs) == parts and [w for r in runs for w in r] == words
    assert max(map(len, runs)) - min(map(len, runs)) <= 1


@settings(max_examples=60, deadline=None)
@given(words=st.lists(st.text("abc", min_size=1, max_size=3), min_size=1, max_size=30))
def test_drop_and_cut_spans_keep_the_sentences_words_in_order_and_depend_on_the_line_alone(words):
    from isotropy.distill.corpus_fit import SPAN_MIN_WORDS, run_cut, word_drop

    line = " ".join(words)
    dropped, cut = word_drop([line]), run_cut([line])
    if len(words) < SPAN_MIN_WORDS:
        assert dropped == [] and cut == []
        return
    # drop: a proper, non-empty subsequence of the words (or nothing when the draw kept all or none)
    for d in dropped:
        it = iter(words)
        kept = d.split()
        assert 0 < len(kept) < len(words) and all(w in it for w in kept)
    # cut: the words with one run of max(1, n // 4) of them taken out
    n = max(1, len(words) // 4)
    (c,) = cut
    assert any(c.split() == words[:a] + words[a + n :] for a in range(len(words) - n + 1))
    # the draws are seeded by the line: the same spans alone, again, or among other lines
    assert word_drop(["x y", line, "u v"]) == dropped and run_cut([line, "x y", line]) == cut * 2


def test_span_kinds_are_parsed_and_an_unknown_one_is_named():
    from isotropy.distill.corpus_fit import DEFAULT_SPANS, span_kinds
    from isotropy.errors import IsotropyError

    assert span_kinds(True) == DEFAULT_SPANS == ("halves", "drop", "cut")
    assert span_kinds(" cut, Halves,cut") == ("cut", "halves") and span_kinds(["drop"]) == ("drop",)
    assert span_kinds("none") == span_kinds(False) == span_kinds(None) == ()
    with pytest.raises(IsotropyError, match="'thirds'"):
        span_kinds("halves,thirds")
