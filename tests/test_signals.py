"""The label-free signals of the raw corpus vectors and the signal rule (isotropy.selection.signals)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isotropy.selection import Selection, select_calibration
from isotropy.selection.signals import (
    SIGNAL_NAMES,
    SIGNAL_RULE,
    corpus_signals,
    decide_by_signals,
    kneedle,
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


def test_the_rule_acts_only_when_its_signal_passes():
    name = SIGNAL_RULE["decide"]
    op, t = SIGNAL_RULE["thresholds"][name]
    above, below = {name: t + 1.0}, {name: t - 1.0}
    yes, no = (above, below) if op == ">" else (below, above)
    assert decide_by_signals(yes)["choice"] == SIGNAL_RULE["act"] and decide_by_signals(yes)["fired"]
    assert decide_by_signals(no)["choice"] == "raw" and not decide_by_signals(no)["fired"]
    assert decide_by_signals({name: float("nan")})["choice"] == "raw"  # a missing signal never acts


def test_label_free_selection_shows_signals_rule_and_effect(skewed, tmp_path):
    sel = select_calibration(skewed, seed=0)  # vectors only: the signal rule needs no encoder
    assert sel.mode == "label-free" and sel.p_beats_raw is None
    assert set(sel.signals) == set(SIGNAL_NAMES) and sel.fired and sel.expected
    assert sel.choice == decide_by_signals(sel.signals)["choice"]
    text = sel.table()
    assert "signals:" in text and "rule that fired:" in text and "expected effect:" in text
    assert "confidence" not in text and "confidence" not in sel.markdown()
    back = Selection.load(sel.save(tmp_path))
    assert back.to_dict() == sel.to_dict()
