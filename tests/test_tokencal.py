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
    assert a.n == pytest.approx(b.n, rel=1e-12)
    scale = max(np.abs(b.scatter).max(), 1e-300)
    np.testing.assert_allclose(a.mean, b.mean, rtol=0, atol=rtol * max(np.abs(b.mean).max(), 1.0))
    np.testing.assert_allclose(a.scatter, b.scatter, rtol=0, atol=rtol * scale)
    np.testing.assert_allclose(
        a.to_arrays()["third"], b.to_arrays()["third"], rtol=0, atol=rtol * max(np.abs(b.to_arrays()["third"]).max(), 1.0)
    )
    assert a.ledoit_wolf_shrinkage() == pytest.approx(b.ledoit_wolf_shrinkage(), rel=1e-7, abs=1e-12)


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
