"""Tests of isotropy.transforms.flow and .glow: the BERT-flow Glow (layers, log-determinants, training, API, errors)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isotropy import IsotropyError, NotFittedError
from isotropy.transforms import flow as F
from isotropy.transforms import glow as G
from isotropy.transforms import load_transform
from isotropy.transforms.flow import Flow
from isotropy.transforms.glow import ActNorm, Coupling, Glow, InvConvLU, Split

PAPER_CONFIGS = {  # the configs shipped with the paper's code: l{levels}_d{depth}_w{width}
    "l2_d3_w32": (2, 3, 32),
    "l2_d2_w32": (2, 2, 32),
    "l2_d3_w16": (2, 3, 16),
    "l3_d2_w32": (3, 2, 32),
    "l3_d3_w16": (3, 3, 16),
    "l3_d3_w32": (3, 3, 32),
}


def _data(n: int = 96, d: int = 12, seed: int = 0) -> np.ndarray:
    """Anisotropic, shifted, correlated Gaussian data (like sentence vectors, in miniature)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((d, d)) * np.linspace(0.05, 1.0, d)
    return (rng.standard_normal((n, d)) @ A + rng.standard_normal(d) * 3).astype(np.float32)


def _perturb(module: torch.nn.Module, seed: int = 0, scale: float = 0.3) -> torch.nn.Module:
    """Random non-trivial parameters (zero-initialised layers would make the checks vacuous)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * scale)
    return module


def _jacobian_logdet(fn, x: torch.Tensor) -> float:
    J = torch.autograd.functional.jacobian(lambda r: fn(r[None])[0], x)
    return float(torch.linalg.slogdet(J)[1])


# --------------------------------------------------------------------------- log-determinants


LAYERS = {
    "actnorm": lambda d, g: ActNorm(d),
    "invconv-lu": lambda d, g: InvConvLU(d, g),
    "additive-coupling": lambda d, g: Coupling(d, 8, "additive", g),
    "affine-coupling": lambda d, g: Coupling(d, 8, "affine", g),
}


@pytest.mark.parametrize("d", [6, 7])
@pytest.mark.parametrize("kind", list(LAYERS))
def test_layer_logdet_matches_autograd_jacobian(kind, d):
    layer = _perturb(LAYERS[kind](d, torch.Generator().manual_seed(1)).double(), seed=d)
    x = torch.randn(5, d, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y, logdet = layer(x)
    assert y.shape == x.shape and logdet.shape == (5,)
    for i in range(5):
        assert logdet[i].item() == pytest.approx(_jacobian_logdet(lambda r: layer(r)[0], x[i]), abs=1e-9)
    torch.testing.assert_close(layer.inverse(y), x, atol=1e-10, rtol=0)


@pytest.mark.parametrize("d", [6, 7])
def test_split_logdet_matches_autograd_jacobian(d):
    split = _perturb(Split(d).double(), seed=d)
    x = torch.randn(4, d, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    x1, eps, logdet = split(x)
    assert x1.shape[1] == d - d // 2 and eps.shape[1] == d // 2
    for i in range(4):
        fn = lambda r: torch.cat(split(r)[:2], dim=1)  # noqa: E731
        assert logdet[i].item() == pytest.approx(_jacobian_logdet(fn, x[i]), abs=1e-9)
    # log N(eps) + logdet is the conditional Gaussian log-density of x2 given x1
    h = split.prior(x1)
    mean, log_scale = h[:, 0::2], h[:, 1::2]
    direct = torch.distributions.Normal(mean, log_scale.exp()).log_prob(x[:, x1.shape[1] :]).sum(1)
    std_normal = -0.5 * (eps**2 + math.log(2 * math.pi)).sum(1)
    torch.testing.assert_close(std_normal + logdet, direct)
    torch.testing.assert_close(split.inverse(x1, eps), x, atol=1e-12, rtol=0)


@pytest.mark.parametrize("coupling", ["additive", "affine"])
@pytest.mark.parametrize("d", [6, 7])
def test_whole_flow_logdet_and_density_match_autograd(d, coupling):
    glow = _perturb(
        Glow(d, levels=2, depth=2, hidden=8, coupling=coupling, generator=torch.Generator().manual_seed(0)).double(),
        seed=5,
        scale=0.2,
    )
    x = torch.randn(4, d, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    z, logdet = glow(x)
    assert z.shape == x.shape
    log_prob = glow.log_prob(x)
    for i in range(4):
        ld = _jacobian_logdet(lambda r: glow(r)[0], x[i])
        assert logdet[i].item() == pytest.approx(ld, abs=1e-8)
        expected = -0.5 * float((z[i].detach() ** 2).sum()) - 0.5 * d * math.log(2 * math.pi) + ld
        assert log_prob[i].item() == pytest.approx(expected, abs=1e-8)
    torch.testing.assert_close(glow.inverse(z), x, atol=1e-10, rtol=0)


def test_invconv_weight_and_factor_paths_agree():
    conv = _perturb(InvConvLU(10, torch.Generator().manual_seed(0)).double())
    x = torch.randn(40, 10, dtype=torch.float64)  # rows >= dim: the materialised W path
    y_w, _ = conv(x)
    y_f = torch.cat([conv(x[i : i + 5])[0] for i in range(0, 40, 5)])  # rows < dim: the factor path
    torch.testing.assert_close(y_w, y_f)
    W = conv.weight()
    assert float(torch.linalg.slogdet(W.detach())[1]) == pytest.approx(float(conv.log_s.detach().sum()), abs=1e-10)


# --------------------------------------------------------------------------- actnorm initialisation


def test_actnorm_data_dependent_init_gives_zero_mean_unit_variance():
    x = torch.from_numpy(_data(32, 9)) * 7 + 4
    act = ActNorm(9)
    act.ddi = True
    y, _ = act(x)
    torch.testing.assert_close(y.mean(0), torch.zeros(9), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(0, unbiased=False), torch.ones(9), atol=1e-4, rtol=0)
    assert act.ddi is False
    y2, _ = act(x * 2)  # later calls use the stored parameters
    assert not torch.allclose(y2.var(0, unbiased=False), torch.ones(9), atol=0.1)


def test_glow_data_init_normalises_every_actnorm_input_on_the_first_batch():
    batch = torch.from_numpy(_data(32, 10)) * 5
    glow = Glow(10, levels=2, depth=2, hidden=8, generator=torch.Generator().manual_seed(0))
    seen = {}

    def hook(module, inputs, output):
        seen.setdefault(module, output[0].detach().clone())

    handles = [m.register_forward_hook(hook) for m in glow.modules() if isinstance(m, ActNorm)]
    glow.data_init(batch)
    for h in handles:
        h.remove()
    assert len(seen) == 2 * 2 * 3  # every step: actnorm + two in the coupling network
    for out in seen.values():
        torch.testing.assert_close(out.mean(0), torch.zeros(out.shape[1]), atol=1e-4, rtol=0)
        torch.testing.assert_close(out.var(0, unbiased=False), torch.ones(out.shape[1]), atol=1e-3, rtol=0)
    assert not any(m.ddi for m in glow.modules() if isinstance(m, ActNorm))


def test_constant_channels_do_not_make_training_diverge():
    # all-MiniLM-L6-v2's cls vectors have three near-constant channels (std < 1e-8, yet not one
    # value); max likelihood must not blow up on them. Exactly constant ones are refused (below).
    X = _data(256, 8)
    rng = np.random.default_rng(1)
    X[:, 3] = (1e-9 * rng.standard_normal(256)).astype(np.float32)
    X[:, 5] = (0.25 + 1e-7 * rng.standard_normal(256)).astype(np.float32)
    assert np.ptp(X[:, 3]) > 0 and np.ptp(X[:, 5]) > 0
    flow = Flow(epochs=3, batch_size=32).fit(X)
    assert np.isfinite(flow.loss_curve_).all()
    assert np.abs(flow.inverse_transform(flow.transform(X)) - X).max() < 1e-4


# --------------------------------------------------------------------------- configurations


@pytest.mark.parametrize("name", list(PAPER_CONFIGS))
def test_paper_configs_build_are_invertible_and_keep_the_dimension(name):
    levels, depth, width = PAPER_CONFIGS[name]
    X = _data(64, 24)
    flow = Flow(levels=levels, depth=depth, hidden=width, batch_size=32).fit(X)
    glow = flow.model_
    assert len(glow.levels) == levels and all(len(steps) == depth for steps in glow.levels)
    assert len(glow.splits) == levels - 1
    assert glow.levels[0][0].coupling.net.w1.shape[1] == width
    Z = flow.transform(X)
    assert Z.shape == X.shape and Z.dtype == np.float32
    assert np.abs(flow.inverse_transform(Z) - X).max() < 1e-4


def test_default_is_the_papers_l2_d3_w32_additive():
    p = Flow().get_params()
    assert (p["levels"], p["depth"], p["hidden"], p["coupling"]) == (2, 3, 32, "additive")
    assert (p["epochs"], p["lr"], p["batch_size"]) == (1, 1e-3, 32)


def test_untrained_additive_flow_is_actnorm_and_rotation_only():
    # zero-initialised coupling outputs and split priors: z is an orthogonal map of standardised x
    glow = Glow(8, levels=2, depth=3, hidden=8, generator=torch.Generator().manual_seed(0))
    x = torch.randn(5, 8)
    z, _ = glow(x)
    torch.testing.assert_close(z.norm(dim=1), x.norm(dim=1), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- training behaviour


def test_same_seed_gives_bit_identical_parameters_and_outputs():
    X = _data(128, 10)
    a, b = Flow(seed=3, epochs=2).fit(X), Flow(seed=3, epochs=2).fit(X)
    for (ka, va), (kb, vb) in zip(a.model_.state_dict().items(), b.model_.state_dict().items()):
        assert ka == kb and torch.equal(va, vb), ka
    assert np.array_equal(a.transform(X), b.transform(X))
    assert np.array_equal(a.loss_curve_, b.loss_curve_)
    c = Flow(seed=4, epochs=2).fit(X)
    assert not np.array_equal(a.transform(X), c.transform(X))


def test_seed_does_not_touch_global_rng():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    Flow(epochs=1).fit(_data(64, 6))
    assert torch.equal(torch.rand(3), expected)


def test_training_lowers_the_loss_and_makes_z_standard_normal():
    X = _data(384, 8, seed=1)
    flow = Flow(epochs=10, batch_size=32, lr=3e-3).fit(X)
    curve = flow.loss_curve_
    assert curve.shape == (10 * 12,) and flow.n_iter_ == curve.shape[0]
    assert curve[-12:].mean() < curve[:12].mean() - 0.25
    Z = flow.transform(X)
    assert np.abs(Z.mean(0)).max() < 0.25
    assert np.abs(Z.std(0) - 1).max() < 0.3
    # and the fitted likelihood beats the (data-initialised) untrained model's
    untrained = Flow(epochs=1, lr=1e-12).fit(X)
    assert flow.score(X) > untrained.score(X)


def test_score_samples_is_log_density_with_logdet_in_nats():
    X = _data(64, 6)
    flow = Flow(epochs=2).fit(X)
    s = flow.score_samples(X[:2])
    g64 = Glow(6, 2, 3, 32).double()
    g64.load_state_dict(flow.model_.state_dict())
    for i in range(2):
        x = torch.from_numpy(X[i]).double()
        z, _ = g64(x[None])
        ld = _jacobian_logdet(lambda r: g64(r)[0], x)
        expected = -0.5 * float((z.detach() ** 2).sum()) - 3 * math.log(2 * math.pi) + ld
        assert s[i] == pytest.approx(expected, rel=1e-4, abs=1e-3)
    assert s.dtype == np.float64


def test_partial_fit_continues_and_is_deterministic():
    X = _data(128, 8)
    a = Flow(seed=1).partial_fit(X).partial_fit(X)
    b = Flow(seed=1).partial_fit(X).partial_fit(X)
    assert a.n_iter_ == 8 and np.array_equal(a.transform(X), b.transform(X))
    one = Flow(seed=1).partial_fit(X)
    assert np.array_equal(Flow(seed=1).fit(X).transform(X), one.transform(X))  # first pass == fit(epochs=1)
    with pytest.raises(IsotropyError, match="9 dimensions but 8"):
        a.partial_fit(_data(64, 9))


def test_progress_bar_when_asked(capsys):
    Flow().fit(_data(64, 6), show_progress=True)
    Flow().fit(_data(64, 6), show_progress=False)


# --------------------------------------------------------------------------- properties


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    d=st.integers(3, 13),
    levels=st.integers(1, 3),
    depth=st.integers(1, 2),
    coupling=st.sampled_from(["additive", "affine"]),
    seed=st.integers(0, 2**16),
)
def test_property_random_flows_are_invertible_with_consistent_logdet(d, levels, depth, coupling, seed):
    if G.level_channels(d, levels)[-1] < 2:
        with pytest.raises(IsotropyError, match="at least"):
            Glow(d, levels, depth, 4, coupling)
        return
    glow = _perturb(
        Glow(d, levels, depth, 4, coupling, generator=torch.Generator().manual_seed(seed)).double(), seed=seed, scale=0.2
    )
    x = torch.randn(3, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed + 1))
    z, logdet = glow(x)
    assert z.shape == x.shape
    torch.testing.assert_close(glow.inverse(z), x, atol=1e-9, rtol=0)
    assert logdet[0].item() == pytest.approx(_jacobian_logdet(lambda r: glow(r)[0], x[0]), abs=1e-7)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 1000), shift=st.floats(-50, 50), scale=st.floats(0.01, 100))
def test_property_fitted_roundtrip_float32(seed, shift, scale):
    X = (_data(64, 7, seed) * scale + shift).astype(np.float32)
    flow = Flow(epochs=1, seed=seed).fit(X)
    back = flow.inverse_transform(flow.transform(X))
    assert np.abs(back - X).max() <= 1e-4 * max(1.0, np.abs(X).max())


# --------------------------------------------------------------------------- bad input


def test_nan_and_inf_rows_are_named():
    X = _data(64, 6)
    X[17, 2] = np.nan
    with pytest.raises(IsotropyError, match="row 17"):
        Flow().fit(X)
    flow = Flow().fit(_data(64, 6))
    Y = _data(5, 6)
    Y[3, 0] = np.inf
    with pytest.raises(IsotropyError, match="row 3"):
        flow.transform(Y)
    with pytest.raises(IsotropyError, match="row 3"):
        flow.inverse_transform(Y)


def test_dimension_mismatch_names_both_widths():
    flow = Flow().fit(_data(64, 6))
    with pytest.raises(IsotropyError, match=r"5 dimensions but 6"):
        flow.transform(_data(4, 5))
    with pytest.raises(IsotropyError, match=r"5 dimensions but 6"):
        flow.score_samples(_data(4, 5))


def test_fewer_rows_than_one_batch():
    with pytest.raises(IsotropyError, match=r"31 rows, fewer than one batch \(batch_size=32\)"):
        Flow().fit(_data(31, 6))
    Flow(batch_size=8).fit(_data(31, 6))


def test_not_fitted():
    for call in (
        lambda f: f.transform(_data(4, 6)),
        lambda f: f.inverse_transform(_data(4, 6)),
        lambda f: f.score_samples(_data(4, 6)),
        lambda f: f.save("x"),
    ):
        with pytest.raises(NotFittedError, match="not fitted"):
            call(Flow())


def test_odd_dimension_end_to_end(tmp_path):
    X = _data(96, 7)
    flow = Flow().fit(X)
    Z = flow.transform(X)
    assert Z.shape == (96, 7)
    assert np.abs(flow.inverse_transform(Z) - X).max() < 1e-4
    assert [s.n_keep for s in flow.model_.splits] == [4]
    flow.save(tmp_path / "f")
    assert np.array_equal(Flow.load(tmp_path / "f").transform(X), Z)


def test_too_few_dimensions_for_the_levels():
    with pytest.raises(IsotropyError, match="3-level flow needs vectors of at least 5 dimensions, X has 4"):
        Flow(levels=3).fit(_data(64, 4))
    with pytest.raises(IsotropyError, match="at least 2 dimensions"):
        Flow(levels=1).fit(_data(64, 1))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"levels": 0}, "levels must be a positive integer"),
        ({"depth": 1.5}, "depth must be a positive integer"),
        ({"hidden": True}, "hidden must be a positive integer"),
        ({"coupling": "spline"}, "coupling must be one of additive, affine"),
        ({"lr": -1.0}, "lr must be a positive number"),
        ({"lr": float("nan")}, "lr must be a positive number"),
        ({"batch_size": 1}, "batch_size must be at least 2"),
        ({"seed": -1}, "seed must be a non-negative integer"),
        ({"device": "nonsense"}, "not a torch device"),
    ],
)
def test_invalid_hyper_parameters_are_stored_and_rejected_in_fit(params, match):
    flow = Flow(**params)  # sklearn contract: __init__ stores, fit validates
    assert all(flow.get_params()[k] is v or flow.get_params()[k] == v for k, v in params.items() if k != "lr")
    with pytest.raises(IsotropyError, match=match):
        flow.fit(_data(64, 6))


def test_divergence_is_one_clear_error():
    X = _data(64, 6) * 1e3
    with pytest.raises(IsotropyError, match="diverged"):
        Flow(lr=1e6, epochs=5).fit(X)


def test_get_set_params_and_repr():
    f = Flow(levels=3, hidden=16)
    assert f.get_params()["levels"] == 3 and set(f.get_params()) == {
        "levels",
        "depth",
        "hidden",
        "coupling",
        "epochs",
        "lr",
        "batch_size",
        "seed",
        "device",
    }
    assert f.set_params(depth=2) is f and f.depth == 2
    assert repr(f) == "Flow(levels=3, depth=2, hidden=16)"
    with pytest.raises(IsotropyError, match="invalid parameter 'width' for Flow"):
        f.set_params(width=3)
    sklearn = pytest.importorskip("sklearn.base")
    clone = sklearn.clone(f)
    assert clone.get_params() == f.get_params() and not hasattr(clone, "model_")


# --------------------------------------------------------------------------- persistence


def test_save_load_roundtrip_and_load_transform(tmp_path):
    X = _data(96, 10)
    flow = Flow(coupling="affine", levels=2, depth=2, hidden=16, seed=7).fit(X)
    path = flow.save(tmp_path / "flow")
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "state.safetensors"]
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["kind"] == "flow" and cfg["params"]["coupling"] == "affine" and cfg["n_features_in"] == 10
    for loaded in (Flow.load(path), load_transform(path)):
        assert isinstance(loaded, Flow) and loaded.get_params() == flow.get_params()
        assert np.array_equal(loaded.transform(X), flow.transform(X))
        assert np.array_equal(loaded.loss_curve_, flow.loss_curve_)
        assert np.allclose(loaded.inverse_transform(loaded.transform(X)), X, atol=1e-4)
    assert np.array_equal(Flow.load(path).partial_fit(X).transform(X), Flow.load(path).partial_fit(X).transform(X))


def test_corrupt_or_incompatible_folders(tmp_path):
    flow = Flow(levels=2, depth=1, hidden=8).fit(_data(64, 6))
    good = flow.save(tmp_path / "good")

    with pytest.raises(IsotropyError, match="is not a folder"):
        Flow.load(tmp_path / "missing")
    (tmp_path / "trunc").mkdir()
    (tmp_path / "trunc" / "config.json").write_text((good / "config.json").read_text())
    (tmp_path / "trunc" / "state.safetensors").write_bytes((good / "state.safetensors").read_bytes()[:100])
    with pytest.raises(IsotropyError, match="corrupt"):
        Flow.load(tmp_path / "trunc")

    def variant(name: str, edit) -> str:
        d = tmp_path / name
        d.mkdir()
        cfg = json.loads((good / "config.json").read_text())
        edit(cfg)
        (d / "config.json").write_text(json.dumps(cfg))
        (d / "state.safetensors").write_bytes((good / "state.safetensors").read_bytes())
        return d

    with pytest.raises(IsotropyError, match="does not match its config"):
        Flow.load(variant("dim", lambda c: c.update(n_features_in=7)))
    with pytest.raises(IsotropyError, match="does not match its config"):
        Flow.load(variant("depth", lambda c: c["params"].update(depth=2)))
    with pytest.raises(IsotropyError, match="coupling must be one of"):
        Flow.load(variant("coupling", lambda c: c["params"].update(coupling="spline")))
    with pytest.raises(IsotropyError, match="holds a 'whitening', not a 'flow'"):
        Flow.load(variant("kind", lambda c: c.update(kind="whitening")))
    with pytest.raises(IsotropyError, match="missing or unknown flow parameters"):
        Flow.load(variant("params", lambda c: c.pop("params")))
    with pytest.raises(IsotropyError, match="format version"):
        Flow.load(variant("version", lambda c: c.update(format_version=99)))
    (tmp_path / "badjson").mkdir()
    (tmp_path / "badjson" / "config.json").write_text("{not json")
    with pytest.raises(IsotropyError, match="not valid JSON"):
        Flow.load(tmp_path / "badjson")


# --------------------------------------------------------------------------- interruption


def test_keyboard_interrupt_leaves_the_previous_state(monkeypatch, tmp_path):
    X = _data(128, 6)
    fitted = Flow(seed=0).fit(X)
    before_state = {k: v.clone() for k, v in fitted.model_.state_dict().items()}
    before_z = fitted.transform(X)

    calls = {"n": 0}
    real = Glow.log_prob

    def flaky(self, x):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self, x)

    monkeypatch.setattr(Glow, "log_prob", flaky)
    fresh = Flow(seed=1)
    with pytest.raises(KeyboardInterrupt):
        fresh.fit(X)
    assert not hasattr(fresh, "model_") and not hasattr(fresh, "loss_curve_")  # still unfitted
    for method in ("fit", "partial_fit"):
        calls["n"] = 0
        with pytest.raises(KeyboardInterrupt):
            getattr(fitted, method)(X)
        assert all(torch.equal(v, before_state[k]) for k, v in fitted.model_.state_dict().items())
        assert np.array_equal(fitted.transform(X), before_z)
    # Adam's moments were not advanced by the interrupted pass either: resuming equals a clean run
    monkeypatch.setattr(Glow, "log_prob", real)
    clean = Flow(seed=0).fit(X)
    assert np.array_equal(fitted.partial_fit(X).transform(X), clean.partial_fit(X).transform(X))
    assert list(tmp_path.iterdir()) == []  # and fit wrote nothing anywhere we gave it
    assert torch.get_num_threads() >= 1


def test_interrupted_save_keeps_the_old_folder(monkeypatch, tmp_path):
    X = _data(64, 6)
    Flow(seed=0).fit(X).save(tmp_path / "f")
    old = (tmp_path / "f" / "state.safetensors").read_bytes()
    import safetensors.numpy

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(safetensors.numpy, "save_file", boom)
    with pytest.raises(KeyboardInterrupt):
        Flow(seed=1).fit(X).save(tmp_path / "f")
    assert (tmp_path / "f" / "state.safetensors").read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_training_threads_are_restored():
    before = torch.get_num_threads()
    Flow().fit(_data(64, 6))
    assert torch.get_num_threads() == before


# --------------------------------------------------------------------------- CLI


def test_cli_fit_flow_then_transform(tmp_path, capsys):
    from isotropy.cli import main

    X = _data(96, 8)
    np.save(tmp_path / "v.npy", X)
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "fit",
                "flow",
                str(tmp_path / "v.npy"),
                "-o",
                str(tmp_path / "fl"),
                "--levels",
                "2",
                "--depth",
                "2",
                "--hidden",
                "16",
                "--coupling",
                "affine",
                "--epochs",
                "2",
                "--lr",
                "0.002",
                "--batch-size",
                "16",
                "--seed",
                "3",
            ]
        )
    assert exc.value.code in (0, None)
    err = capsys.readouterr().err
    assert "wrote flow l2_d2_w16 (affine coupling) on 8 dims, 12 steps" in err
    loaded = Flow.load(tmp_path / "fl")
    expected = Flow(levels=2, depth=2, hidden=16, coupling="affine", epochs=2, lr=0.002, batch_size=16, seed=3).fit(X)
    assert np.array_equal(loaded.transform(X), expected.transform(X))


def test_cli_fit_flow_errors_are_one_line(tmp_path, capsys):
    from isotropy.cli import main

    X = _data(20, 8)
    np.save(tmp_path / "few.npy", X)
    with pytest.raises(SystemExit) as exc:
        main(["fit", "flow", str(tmp_path / "few.npy"), "-o", str(tmp_path / "out")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "few.npy" in err and "fewer than one batch" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit) as exc:
        main(["fit", "flow", str(tmp_path / "few.npy"), "-o", str(tmp_path / "no" / "such" / "dir")])
    assert exc.value.code == 2 and "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["fit", "flow", str(tmp_path / "few.npy"), "-o", str(tmp_path / "out"), "--coupling", "spline"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()  # a choice of the command line: its parser names the option and the choices
    assert err.count("\n") == 0 and err.startswith("error: ") and "--coupling" in err and "'spline'" in err
    assert "additive" in err and "affine" in err


def test_read_only_memory_mapped_input(tmp_path):
    import warnings

    np.save(tmp_path / "v.npy", _data(64, 6))
    X = np.load(tmp_path / "v.npy", mmap_mode="r")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flow = Flow().fit(X)
        assert flow.transform(X).shape == (64, 6)


# --------------------------------------------------------------------------- real data


@pytest.mark.slow
def test_flow_beats_raw_cls_on_stsb(stsb_cls, tmp_path):
    from helpers import spearman_cos

    flow = Flow(seed=0).fit(stsb_cls["fit"])
    raw = spearman_cos(stsb_cls["a"], stsb_cls["b"], stsb_cls["gold"])
    calibrated = spearman_cos(flow.transform(stsb_cls["a"]), flow.transform(stsb_cls["b"]), stsb_cls["gold"])
    print(f"STS-B test Spearman x100, cls, target setting: raw {raw:.2f}, flow {calibrated:.2f} (+{calibrated - raw:.2f})")
    assert calibrated >= raw + 3.0
    X = stsb_cls["fit"]
    assert np.abs(flow.inverse_transform(flow.transform(X)) - X).max() < 1e-4
    assert np.isfinite(flow.score_samples(X[:100])).all()


# --------------------------------------------------------------------------- fits that would serve absurd latents


def test_no_more_rows_than_dimensions_is_refused():
    # the reported failure: a handful of rows, loss 6e20 bits/dim accepted, then infinite latents written
    rng = np.random.default_rng(0)
    with pytest.raises(
        IsotropyError, match=r"X has 4 rows for 384 dimensions: a flow needs more rows than dimensions.*at least 385"
    ) as exc:
        Flow(batch_size=2).fit(rng.standard_normal((4, 384)).astype(np.float32))
    assert "\n" not in str(exc.value)
    with pytest.raises(IsotropyError, match="X has 12 rows for 12 dimensions"):
        Flow(batch_size=12).fit(_data(12, 12))
    assert Flow(batch_size=13).fit(_data(13, 12)).n_features_in_ == 12
    # the first partial_fit of a stream sees one chunk only: more chunks follow, so it is not refused
    assert Flow(batch_size=8).partial_fit(_data(40, 32)).n_iter_ == 5


def test_identical_rows_and_constant_columns_are_named():
    X = np.repeat(_data(1, 6), 64, axis=0)
    with pytest.raises(IsotropyError, match="all 64 rows of X are identical") as exc:
        Flow().fit(X)
    assert "lr" not in str(exc.value)  # not the divergence hint it used to get
    X = _data(64, 6)
    X[:, 4] = 0.5
    with pytest.raises(IsotropyError, match=r"column 4 of X holds the same value \(0\.5\) in every row: a flow cannot model"):
        Flow().fit(X)
    X[:, 1] = 0.0
    with pytest.raises(IsotropyError, match=r"column 1 .*, and 1 more columns too"):
        Flow().fit(X)


def test_a_fit_that_ends_far_worse_than_it_started_is_divergence():
    # finite but absurd: accepted before, then its latents were written out as huge or infinite values
    X = np.random.default_rng(0).standard_normal((600, 32)).astype(np.float32)
    with pytest.raises(
        IsotropyError,
        match=r"loss on its training rows reached \S+ bits/dim .*lower lr \(now 0\.03\), raise batch_size \(now 4\)",
    ) as exc:
        Flow(lr=0.03, batch_size=4).fit(X)
    assert "\n" not in str(exc.value)
    # the rule: the loss on the training rows before and after training, and every step's loss
    F._check_fit(np.array([0.5, 30.0, 2.0]), 0.5, 0.2, 1e-3, 32)  # a spike during training that recovers is fine
    with pytest.raises(IsotropyError, match=r"ended at 4\.5 bits/dim, 4 above the 0\.5 it started from"):
        F._check_fit(np.array([0.5, 4.5]), 0.5, 4.5, 1e-3, 32)
    with pytest.raises(IsotropyError, match=r"reached 6e\+20 bits/dim \(it was 0\.5 before training\)"):
        F._check_fit(np.array([0.5, 1.0]), 0.5, 6e20, 1e-3, 32)
    with pytest.raises(IsotropyError, match="reached nan bits/dim"):
        F._check_fit(np.array([0.5, 1.0]), 0.5, float("nan"), 1e-3, 32)
    with pytest.raises(IsotropyError, match="loss not finite at step 2"):
        F._check_fit(np.array([0.5, 1.0, np.inf]), 0.5, float("nan"), 1e-3, 32)


def test_load_names_what_disagrees_between_config_and_state(tmp_path):
    good = Flow(levels=2, depth=2, hidden=8).fit(_data(64, 6)).save(tmp_path / "good")

    def variant(name: str, edit):
        import shutil

        d = tmp_path / name
        shutil.copytree(good, d)
        cfg = json.loads((d / "config.json").read_text())
        edit(cfg)
        (d / "config.json").write_text(json.dumps(cfg))
        return d

    for name, edit, said, held in [
        ("dim", lambda c: c.update(n_features_in=7), "n_features_in 7", "n_features_in 6"),
        ("huge", lambda c: c.update(n_features_in=10**6), "n_features_in 1000000", "n_features_in 6"),  # never built
        ("depth", lambda c: c["params"].update(depth=3), "depth 3", "depth 2"),
        ("levels", lambda c: c["params"].update(levels=1), "levels 1", "levels 2"),
        ("hidden", lambda c: c["params"].update(hidden=16), "hidden 16", "hidden 8"),
        ("coupling", lambda c: c["params"].update(coupling="affine"), "coupling 'affine'", "coupling 'additive'"),
    ]:
        d = variant(name, edit)
        with pytest.raises(IsotropyError) as exc:
            Flow.load(d)
        msg = str(exc.value)
        assert msg.startswith(f"{d}: saved state does not match its config") and f"config.json says {said}" in msg, msg
        assert f"holds a flow with {held}" in msg and "\n" not in msg
