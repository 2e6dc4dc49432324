"""The label-free signals of the raw corpus vectors and the signal rule (isotropy.selection.signals)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isotropy.selection import Selection, Selector, select_calibration
from isotropy.selection.signals import (
    POOLING_RULE,
    SIGNAL_NAMES,
    SIGNAL_RULE,
    corpus_signals,
    decide_by_signals,
    encoder_kind,
    incumbent_of,
    kneedle,
    pooling_note,
    signal_alone,
    spectemp_power,
)


@pytest.fixture(scope="module")
def flat() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(1200, 24))


@pytest.fixture(scope="module")
def skewed(flat) -> np.ndarray:
    return flat * np.geomspace(20.0, 0.2, flat.shape[1]) + 3.0  # a common offset and a steep spectrum


def test_flat_and_skewed_corpora_are_told_apart(flat, skewed):
    a, b = corpus_signals(flat), corpus_signals(skewed)
    assert set(a) == set(SIGNAL_NAMES) == set(b)
    assert abs(a["mean_cosine"]) < 0.05 < b["mean_cosine"]
    assert a["effective_rank"] > 0.9 > 0.6 > b["effective_rank"]
    assert a["top_share"] < b["top_share"]
    assert abs(a["heldout_gain"]) < 0.05 < 0.5 < b["heldout_gain"]
    assert 0.0 <= a["knn_stability"] <= 1.0 and 0.0 <= b["knn_stability"] <= 1.0


def test_signals_are_seeded_and_scale_free(skewed):
    a = corpus_signals(skewed, seed=3)
    assert corpus_signals(skewed, seed=3) == a
    b = corpus_signals(skewed * 7.5, seed=3)  # cosines, shares, ranks and likelihood gains ignore the scale
    for k in SIGNAL_NAMES:
        assert b[k] == pytest.approx(a[k], rel=1e-6, abs=1e-6), k


def test_kneedle_finds_the_elbow():
    y = np.concatenate([np.linspace(100, 10, 5), np.linspace(9, 0, 50)])
    assert 3 <= kneedle(y) <= 6


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(1e-3, 1e3), min_size=4, max_size=60), st.integers(1, 60))
def test_spectemp_power_is_a_power(values, width):
    lam = np.sort(np.asarray(values))[::-1]
    gamma, knee = spectemp_power(lam, min(width, len(lam)))
    assert 0.0 <= gamma <= 1.0 and 1 <= knee <= len(lam)


class _Kind:
    """An encoder as the rule sees it: only its backend's name."""

    def __init__(self, backend: str) -> None:
        self.backend = backend


_SIGNAL_VALUES = st.floats(allow_nan=True, allow_infinity=True, width=32) | st.none()


@settings(max_examples=60, deadline=None)
@given(st.fixed_dictionaries({k: _SIGNAL_VALUES for k in SIGNAL_NAMES}), st.sampled_from(["transformer", "unknown", "x"]))
def test_the_rule_keeps_raw_for_transformers_and_unknown_encoders_whatever_the_signals(sig, kind):
    """Safe by construction: no value of any vector signal makes the rule act on a transformer or unknown vectors."""
    got = decide_by_signals(sig, kind=kind)
    assert got["choice"] == "raw" and not got["fired"] and got["reason"] and got["expected"]


@settings(max_examples=30, deadline=None)
@given(st.fixed_dictionaries({k: _SIGNAL_VALUES for k in SIGNAL_NAMES}))
def test_the_rule_whitens_every_static_table(sig):
    got = decide_by_signals(sig, kind="static")
    assert got["choice"] == SIGNAL_RULE["act"]["static"] == "whitening-shrunk" and got["fired"]
    assert "static" in got["reason"] and got["expected"].startswith("whitening-shrunk")


def test_the_encoder_kind_comes_from_the_backend():
    assert encoder_kind(None) == "unknown" and encoder_kind(object()) == "unknown"
    assert encoder_kind(_Kind("static")) == "static"
    assert encoder_kind(_Kind("torch")) == encoder_kind(_Kind("onnx")) == "transformer"


def test_a_signal_alone_never_passes_when_missing():
    name = next(iter(SIGNAL_RULE["thresholds"]))
    assert not signal_alone({name: float("nan")}, name) and not signal_alone({}, name)


@pytest.fixture(scope="module")
def static_vectors() -> np.ndarray:
    """Means of 8 token vectors drawn from an anisotropic table (a shared offset, a steep spectrum): what a static
    model gives."""
    rng = np.random.default_rng(4)
    table = rng.normal(size=(500, 16)) * np.geomspace(4.0, 0.25, 16) + 2.0
    return table[rng.integers(0, 500, size=(1500, 8))].mean(axis=1)


def test_static_vectors_are_whitened_and_the_same_vectors_of_a_transformer_kept(static_vectors):
    static = select_calibration(static_vectors, encoder=_Kind("static"), seed=0)
    assert static.choice == "whitening-shrunk" and static.transform is not None
    assert static.signals["static_table"] == 1.0 and static.fired.startswith("the encoder is a static table")
    Y = static.transform.transform(static_vectors)  # shrunk whitening: a far flatter spectrum than the raw one
    spread = [np.ptp(np.log(np.linalg.eigvalsh(np.cov(Z, rowvar=False)))) for Z in (static_vectors, Y)]
    assert spread[1] < 0.25 * spread[0], spread
    for enc in (_Kind("torch"), None):  # the same vectors from a transformer, or from no known encoder: raw
        sel = select_calibration(static_vectors, encoder=enc, seed=0)
        assert sel.choice == "raw" and sel.transform is None and sel.p_beats_raw is None
        assert sel.signals["static_table"] == (0.0 if enc is not None else None)
        assert {k: sel.signals[k] for k in SIGNAL_NAMES} == {k: static.signals[k] for k in SIGNAL_NAMES}


def test_label_free_selection_shows_signals_rule_and_effect(skewed, tmp_path):
    sel = select_calibration(skewed, seed=0)  # vectors only: the signal rule needs no encoder
    assert sel.mode == "label-free" and sel.p_beats_raw is None
    assert set(sel.signals) == {*SIGNAL_NAMES, "static_table"} and sel.fired and sel.expected
    assert sel.choice == decide_by_signals(sel.signals)["choice"] == "raw"  # no encoder: raw
    text = sel.table()
    assert "signals:" in text and "rule that fired:" in text and "expected effect:" in text
    assert "confidence" not in text and "confidence" not in sel.markdown()
    back = Selection.load(sel.save(tmp_path))
    assert back.to_dict() == sel.to_dict()


# ---------------------------------------------------------------- few-label: the label-free choice is the incumbent


class _Pooled(_Kind):
    """An encoder with a pooling and its backend's default pooling, as the pooling rule reads it."""

    def __init__(self, backend: str, pooling: str, own: str) -> None:
        super().__init__(backend)
        self.pooling, self.runtime = pooling, type("Runtime", (), {"default_pooling": lambda _self: own})()


def _pairs_scored_by(X: np.ndarray, transform) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """60 pairs of rows of ``X`` whose gold is their cosine after ``transform`` (None: raw): that calibration is perfect."""
    rng = np.random.default_rng(9)
    i, j = rng.integers(0, len(X), 60), rng.integers(0, len(X), 60)
    Y = X if transform is None else transform.transform(X)
    u = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    return X[i], X[j], (u[i] * u[j]).sum(1)


def test_few_label_keeps_the_incumbent_when_nothing_beats_it(static_vectors):
    shrunk = select_calibration(static_vectors, encoder=_Kind("static"), seed=0).transform
    enc = _Pooled("static", "last-avg", "last-avg")
    sel = select_calibration(static_vectors, encoder=enc, dev_pairs=_pairs_scored_by(static_vectors, shrunk))
    assert sel.mode == "few-label" and sel.incumbent == sel.choice == "whitening-shrunk" and sel.p_beats_raw is None
    assert sel.fired.startswith("kept whitening-shrunk") and "static table" in sel.fired
    assert sel.rule.startswith("whitening-shrunk unless another candidate (raw included)")
    assert "beats whitening-shrunk" in sel.table() and Selection.from_dict(sel.to_dict()).incumbent == "whitening-shrunk"
    assert any(n.startswith("pooling last-avg: the pooling rule's choice for a static table") for n in sel.notes)


def test_few_label_replaces_a_harmful_incumbent_by_raw_and_is_seeded(static_vectors):
    dev = _pairs_scored_by(static_vectors, None)  # the raw cosines are the gold: the dev pairs say "whitening hurts"
    sel = select_calibration(static_vectors, encoder=_Kind("static"), dev_pairs=dev, seed=5, resamples=300)
    assert sel.incumbent == "whitening-shrunk" and sel.choice == "raw" and sel.transform is None
    assert sel.p_beats_raw >= 0.9 and sel.candidate("raw").beats_raw == sel.p_beats_raw
    assert sel.fired.startswith("raw replaced the incumbent whitening-shrunk") and "(beats whitening-shrunk in" in sel.summary()
    again = select_calibration(static_vectors, encoder=_Kind("static"), dev_pairs=dev, seed=5, resamples=300)
    assert again.to_dict() == sel.to_dict()
    assert [incumbent_of(e)[0] for e in (_Kind("torch"), None)] == ["raw", "raw"]  # transformer, no encoder: raw
    assert Selector(static_vectors).few_label(dev, resamples=200).incumbent == "raw"  # the Selector's default: raw
    odd = Selector(static_vectors, ["raw", "center"]).few_label(dev, resamples=100, incumbent="whitening-shrunk")
    assert odd.incumbent == "raw" and "whitening-shrunk could not be fitted here" in odd.fired  # not a candidate: raw


def test_the_pooling_rule_keeps_the_default_poolings_and_says_so():
    """docs/AUTO.md 'Zoo tuning': mean on a static table, the model's own on a transformer -- the encoders' defaults,
    so `--method auto` without --pooling uses the rule's pooling; a pooling given otherwise is reported as given."""
    assert POOLING_RULE["pooling"] == {"static": "last-avg", "transformer": None}
    assert pooling_note(_Pooled("static", "last-avg", "last-avg")).startswith("pooling last-avg: the pooling rule's")
    assert pooling_note(_Pooled("static", "sif", "last-avg")).startswith("pooling sif as given; the pooling rule's")
    assert "the model's own (last-avg)" in pooling_note(_Pooled("torch", "first-last-avg", "last-avg"))
    assert pooling_note(None) is None and pooling_note(_Kind("static")) is None
