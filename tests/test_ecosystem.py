"""sentence-transformers modules, scikit-learn estimator checks and pipelines (isotropy.integrations)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.utils.estimator_checks import parametrize_with_checks

from helpers import word_corpus
from isotropy import integrations as eco
from isotropy.encoders import Encoder
from isotropy.errors import IsotropyError
from isotropy.transforms.flow import Flow
from isotropy.transforms.whitening import Whitening

SENTENCES = [
    "A man is playing a guitar.",
    "The cat sat on the mat, quietly.",
    "Stocks fell sharply on Monday after the report.",
    "hi",
    "Two dogs run through a field of tall green grass near the river.",
    "",
]


corpus = word_corpus


@pytest.fixture(scope="module")
def tiny_fit(tiny_model_dir):
    """Vectors of the tiny model for each pooling, and fitted whitening for each (32 dims, 200 rows)."""
    sents = corpus(200)
    out = {}
    for pooling in ("cls", "last-avg", "first-last-avg"):
        enc = Encoder(tiny_model_dir, pooling=pooling, max_length=32, device="cpu")
        X = enc.encode(sents)
        out[pooling] = (enc, X, Whitening(shrinkage="auto").fit(X))
    return out


def roundtrip(enc, transform, path, stock=None):
    eco.to_sentence_transformer(enc, transform, path, stock=stock)
    model = eco.load_sentence_transformer(path)
    got = model.encode(SENTENCES, convert_to_numpy=True)
    want = transform.transform(enc.encode(SENTENCES)) if transform is not None else enc.encode(SENTENCES)
    return model, got, want


# --------------------------------------------------------------------------- sentence-transformers


@pytest.mark.parametrize("pooling", ["cls", "last-avg", "first-last-avg"])
def test_st_roundtrip_whitening_stock(tiny_fit, tmp_path, pooling):
    """By default an affine transform and a stock-expressible pooling are sentence-transformers' own modules."""
    enc, _, w = tiny_fit[pooling]
    model, got, want = roundtrip(enc, w, tmp_path / "st")
    names = [type(m).__name__ for m in model]
    layers = ["WeightedLayerPooling"] if pooling == "first-last-avg" else []
    assert names == ["Transformer", *layers, "Pooling", "Dense", "Dense"]  # centring, then the kernel
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert [m["type"] for m in modules][-1] == "sentence_transformers.models.Dense"
    assert "trust_remote_code=True" not in (tmp_path / "st" / "README.md").read_text()
    # float32, as sentence-transformers runs every module after the first: equal up to float32 rounding of
    # y = (x - shift) K (the tiny random model's covariance is ill-conditioned; tests/test_calibrate.py says more)
    shift, K = w.shift_kernel_()
    X = enc.encode(SENTENCES).astype(np.float64)
    eps = np.finfo(np.float32).eps
    bound = (K.shape[0] + 2) * eps * (np.abs(X - shift) @ np.abs(K)) + eps * ((np.abs(X) + np.abs(shift)) @ np.abs(K))
    assert (np.abs(got - w.transform(X)) <= bound + 1e-6).all()
    assert model.get_embedding_dimension() == 32


@pytest.mark.parametrize("pooling", ["cls", "last-avg", "first-last-avg"])
def test_st_roundtrip_whitening(tiny_fit, tmp_path, pooling):
    """stock=False: isotropy's modules, the transform in float64."""
    enc, _, w = tiny_fit[pooling]
    model, got, want = roundtrip(enc, w, tmp_path / "st", stock=False)
    assert got.shape == want.shape == (len(SENTENCES), 32)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    names = [type(m).__name__ for m in model]
    assert names == ["Transformer", "IsotropyPooling", "IsotropyTransform"]  # no Normalize unless asked
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert [m["type"] for m in modules][1:] == [
        "isotropy.integrations.sentence_transformers.IsotropyPooling",
        "isotropy.integrations.sentence_transformers.IsotropyTransform",
    ]
    assert model.get_embedding_dimension() == 32


def test_st_roundtrip_flow(tiny_fit, tmp_path):
    enc, X, _ = tiny_fit["first-last-avg"]
    flow = Flow(levels=2, depth=1, hidden=8, batch_size=32, epochs=2, seed=0).fit(X)
    _, got, want = roundtrip(enc, flow, tmp_path / "st-flow")
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_st_roundtrip_default_model_pooler_and_normalize(tmp_path):
    """The embedded model: its pooler layer travels with IsotropyPooling; normalize=True adds Normalize."""
    enc = Encoder(pooling="pooler", max_length=32)
    eco.to_sentence_transformer(enc, None, tmp_path / "st", normalize=True)
    model = eco.load_sentence_transformer(tmp_path / "st")
    got = model.encode(SENTENCES)
    want = enc.encode(SENTENCES)
    want = want / np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    assert type(model[-1]).__name__ == "Normalize"


def test_calibrate_in_memory_keeps_trailing_normalize(tiny_fit, tmp_path):
    enc, _, _ = tiny_fit["last-avg"]
    model = eco.build_sentence_transformer(enc, None, normalize=True)  # like the default model's folder
    before = model.encode(corpus(120, seed=1))
    w = Whitening(shrinkage="auto").fit(before)  # fitted on what the model gave (unit vectors)
    expected = w.transform(model.encode(SENTENCES))
    eco.calibrate(model, w)
    names = [type(m).__name__ for m in model]
    assert names[-2:] == ["Normalize", "IsotropyTransform"]
    got = model.encode(SENTENCES)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0)  # documented: no longer unit length
    # saved with its requirement, loaded back the same
    eco.save_sentence_transformer(model, tmp_path / "cal")
    cfg = json.loads((tmp_path / "cal" / "config_sentence_transformers.json").read_text())
    assert "isotropy" in cfg["requirements"]
    np.testing.assert_allclose(eco.load_sentence_transformer(tmp_path / "cal").encode(SENTENCES), expected, atol=1e-5, rtol=0)
    eco.calibrate(model, Whitening().fit(np.random.default_rng(0).normal(size=(100, 32))), normalize=True)
    np.testing.assert_allclose(np.linalg.norm(model.encode(SENTENCES), axis=1), 1.0, atol=1e-5)


def test_dimension_mismatch_names_both_numbers(tiny_fit, tmp_path):
    enc, _, _ = tiny_fit["cls"]
    w16 = Whitening().fit(np.random.default_rng(0).normal(size=(50, 16)))
    with pytest.raises(IsotropyError, match=r"16-dimensional.*gives 32"):
        eco.to_sentence_transformer(enc, w16, tmp_path / "x")
    assert not (tmp_path / "x").exists()
    model = eco.build_sentence_transformer(enc, None)
    with pytest.raises(IsotropyError, match=r"16-dimensional.*gives 32"):
        eco.calibrate(model, w16)
    with pytest.raises(IsotropyError, match="not fitted"):
        eco.calibrate(model, Whitening())
    with pytest.raises(IsotropyError, match="expected a fitted isotropy transform"):
        eco.calibrate(model, object())


def test_missing_package_messages(tiny_fit, tmp_path, monkeypatch):
    """What a user sees when the folder's module classes cannot be imported."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import environment

    enc, _, w = tiny_fit["cls"]
    path = tmp_path / "st"
    eco.to_sentence_transformer(enc, w, path, stock=False)
    assert "trust_remote_code=True" in (path / "README.md").read_text()

    # 1. isotropy not installed: sentence-transformers checks the declared requirement first.
    real = environment.get_installed_version
    monkeypatch.setattr(environment, "get_installed_version", lambda name: None if name == "isotropy" else real(name))
    with pytest.raises(ImportError, match=r"(?s)requires:.*isotropy>=.*not installed.*pip install -U \"isotropy"):
        SentenceTransformer(str(path), trust_remote_code=True)
    monkeypatch.undo()

    # 2. without trust_remote_code, sentence-transformers 6 refuses any class outside its package.
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        SentenceTransformer(str(path))

    # 3. our check names the package to install, in one line.
    modules = json.loads((path / "modules.json").read_text())
    modules[2]["type"] = "isotropy_gone.integrations.sentence_transformers.IsotropyTransform"
    (path / "modules.json").write_text(json.dumps(modules))
    cfg = json.loads((path / "config_sentence_transformers.json").read_text())
    cfg["requirements"]["isotropy_gone"] = {"specifier": ">=9"}
    (path / "config_sentence_transformers.json").write_text(json.dumps(cfg))
    with pytest.raises(IsotropyError, match=r"needs the Python package 'isotropy_gone'.*pip install 'isotropy_gone>=9'") as info:
        eco.load_sentence_transformer(path)
    assert "\n" not in str(info.value)
    with pytest.raises(IsotropyError, match="not a sentence-transformers model folder"):
        eco.check_sentence_transformer(tmp_path)


def test_ecosystem_module_hands_out_the_integrations():
    """isotropy 0.1's module name still resolves (folders it wrote name isotropy.ecosystem.* classes)."""
    import isotropy.ecosystem as old
    from isotropy.integrations import sentence_transformers as st_mod

    assert old.IsotropyPooling is st_mod.IsotropyPooling and old.IsotropyTransform is st_mod.IsotropyTransform
    assert old.to_sentence_transformer is eco.to_sentence_transformer and old.SentenceEncoder is eco.SentenceEncoder
    with pytest.raises(AttributeError, match="to_torch"):
        old.transform_module  # noqa: B018


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(3, 40),
    d=st.integers(1, 12),
    seed=st.integers(0, 2**16),
    power=st.sampled_from([0.0, 0.5, 1.0]),
    method=st.sampled_from(["pca", "zca"]),
)
def test_to_torch_equals_transform(n, d, seed, power, method):
    """The torch form used by sentence-transformers and ONNX computes Whitening.transform."""
    import torch

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 3, size=d) + rng.normal(size=d)
    w = Whitening(power=power, method=method, shrinkage=0.1).fit(X)
    Y = rng.normal(size=(7, d)).astype(np.float32)
    got = w.to_torch()(torch.from_numpy(Y)).numpy()
    np.testing.assert_allclose(got, w.transform(Y), rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- scikit-learn

# Checks each class fails on purpose, with the reason (sklearn.utils.estimator_checks names). They run
# strict: a listed check that starts passing fails the suite, so the list only shrinks.
_COMMON_FAILS = {
    "check_n_features_in_after_fitting": "the dimension-mismatch message is isotropy's one-line wording "
    "('X has 3 dimensions but 4 were expected'), not scikit-learn's exact sentence",
    "check_complex_data": "complex input is refused in isotropy's words ('X has complex values'), "
    "not 'Complex data not supported'",
    "check_dtype_object": "object arrays of dicts are an IsotropyError (a ValueError: the CLI's one line), "
    "not the TypeError the check wants",
    "check_estimators_empty_data_messages": "zero-column input is rejected with isotropy's wording, not '0 feature(s)'",
    "check_estimator_sparse_tag": "sparse input is not supported (dense sentence vectors only); the error "
    "does not use the exact wording the check looks for",
    "check_estimator_sparse_array": "same: sparse input unsupported, wording differs",
    "check_estimator_sparse_matrix": "same: sparse input unsupported, wording differs",
    "check_fit2d_predict1d": "a 1-D row of the fitted width is accepted as one row on purpose (check_matrix)",
}
_ONE_ROW = "one row cannot be fitted; the error says so in isotropy's words ('at least 2 rows' / 'fewer than one batch')"
_ONE_COLUMN = (
    "one dimension cannot be fitted (nothing would be left, or a flow cannot split it); the error says so in isotropy's words"
)
ESTIMATOR_FAILS: dict[str, dict[str, str]] = {
    "Whitening": {**_COMMON_FAILS, "check_fit2d_1sample": _ONE_ROW},
    "Center": dict(_COMMON_FAILS),
    "AllButTheTop": {
        **_COMMON_FAILS,
        "check_fit2d_1sample": _ONE_ROW,
        "check_fit2d_1feature": _ONE_COLUMN,
    },
    "CommonComponentRemoval": {
        **_COMMON_FAILS,
        "check_fit2d_1feature": _ONE_COLUMN,
    },
    "Flow": {
        **_COMMON_FAILS,
        "check_fit2d_1sample": _ONE_ROW,
        "check_fit2d_1feature": _ONE_COLUMN,
        "check_methods_subset_invariance": "score_samples in float32 differs by ~1e-6 between batch sizes "
        "(different BLAS blocking), above the check's 1e-7",
    },
}


def _estimators():
    from isotropy.transforms import TRANSFORMS, transform_class

    tiny = {"flow": {"levels": 1, "depth": 1, "hidden": 4, "batch_size": 4}}  # seconds, not minutes
    return [transform_class(kind)(**tiny.get(kind, {})) for kind in sorted(TRANSFORMS)]


def _expected_fails(estimator) -> dict[str, str]:
    return ESTIMATOR_FAILS[type(estimator).__name__]


@pytest.mark.filterwarnings("ignore")
@parametrize_with_checks(_estimators(), expected_failed_checks=_expected_fails, xfail_strict=True)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_every_transform_has_its_list_of_expected_failures():
    assert {type(e).__name__ for e in _estimators()} == set(ESTIMATOR_FAILS)


@pytest.mark.parametrize("estimator", _estimators(), ids=lambda e: type(e).__name__)
def test_set_output_and_feature_names(estimator):
    """scikit-learn's TransformerMixin: set_output(transform="pandas") and get_feature_names_out."""
    pd = pytest.importorskip("pandas")
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 6)) * [5, 3, 2, 1, 0.5, 0.2]
    with pytest.raises(SklearnNotFittedError):
        clone(estimator).transform(X)
    est = clone(estimator).set_output(transform="pandas")
    Z = est.fit(X).transform(X)
    names = est.get_feature_names_out()
    prefix = type(estimator).__name__.lower()
    assert isinstance(Z, pd.DataFrame) and list(Z.columns) == list(names) and len(names) == est.n_features_out_
    assert all(str(n).startswith(prefix) for n in names)
    np.testing.assert_array_equal(Z.to_numpy(), clone(estimator).set_params(**est.get_params()).fit(X).transform(X))


def test_pipelines_clone_and_grid_search():
    from sklearn.base import clone
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6)) * [5, 3, 1, 1, 0.5, 0.1]
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    pipe = make_pipeline(Whitening(4), LogisticRegression())
    assert pipe.fit(X, y).score(X, y) > 0.9
    c = clone(pipe)
    assert c.get_params()["whitening__n_components"] == 4 and not hasattr(c.steps[0][1], "moments_")
    grid = GridSearchCV(pipe, {"whitening__n_components": [2, 4], "whitening__power": [0.5, 1.0]}, cv=3).fit(X, y)
    assert grid.best_params_["whitening__n_components"] in (2, 4)
    f = clone(Flow(levels=1, depth=1, hidden=4, batch_size=8, epochs=1))
    assert make_pipeline(f).fit(X).transform(X).shape == X.shape


def test_sentence_encoder_pipeline(tiny_model_dir):
    from sklearn.base import clone
    from sklearn.pipeline import make_pipeline

    sents = corpus(80, seed=3)
    pipe = make_pipeline(eco.SentenceEncoder(str(tiny_model_dir), pooling="first-last-avg", max_length=32), Whitening(8))
    Z = pipe.fit_transform(sents)
    assert Z.shape == (80, 8)
    np.testing.assert_allclose(Z.T @ Z / 79, np.eye(8), atol=1e-5)  # whitened on its own fitting data
    c = clone(pipe)
    assert c.steps[0][1].get_params()["pooling"] == "first-last-avg" and not hasattr(c.steps[0][1], "encoder_")
    with pytest.raises(IsotropyError, match="invalid parameter 'poolng'"):
        eco.SentenceEncoder().set_params(poolng="cls")


@pytest.mark.parametrize("kind", ["whitening", "center"])
def test_columns_in_another_order_are_refused_as_scikit_learn_does(kind, tmp_path):
    """W14 of #31: fitted on a DataFrame, an affine transform records feature_names_in_ and refuses the same
    columns in another order (scikit-learn's own check and message), as every scikit-learn transformer does."""
    pd = pytest.importorskip("pandas")
    from isotropy.transforms import transform_class

    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(40, 4)) * [3, 2, 1, 0.5], columns=["a", "b", "c", "d"])
    est = transform_class(kind)().fit(df)
    assert list(est.feature_names_in_) == ["a", "b", "c", "d"]
    with pytest.warns(UserWarning, match="does not have valid feature names"):  # scikit-learn's own warning
        plain = est.transform(df.to_numpy())
    np.testing.assert_allclose(est.transform(df), plain)
    with pytest.raises(ValueError, match="feature names"):
        est.transform(df[["b", "a", "c", "d"]])
    streamed = transform_class(kind)().partial_fit(df.iloc[:20])
    with pytest.raises(ValueError, match="feature names"):
        streamed.partial_fit(df.iloc[20:][["d", "c", "b", "a"]])
    assert streamed.n_samples_seen_ == 20  # the refused chunk changed nothing
    back = transform_class(kind).load(est.save(tmp_path / "t"))  # the column names survive save and load
    assert list(back.feature_names_in_) == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="feature names"):
        back.transform(df[["b", "a", "c", "d"]])
