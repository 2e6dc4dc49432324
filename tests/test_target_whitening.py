"""``isotropy distill --target-whitening``: the token fit's targets soft-whitened before their principal axes
(isotropy.distill.targets). What the maths guarantees is checked, never eigenvectors element by element."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import run_cli
from isotropy.distill.targets import check_target_whitening, principal_axes, softening, target_projection
from isotropy.errors import IsotropyError
from isotropy.transforms.teacher_map import TeacherMap


def _scatter(seed: int, d: int, spread: float) -> np.ndarray:
    """A well-conditioned scatter with eigenvalues spread over ``spread`` decades, in random axes."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (Q * np.logspace(0, -spread, d)) @ Q.T


def _map(seed: int, n: int = 400, d_in: int = 3, d_out: int = 6) -> TeacherMap:
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((n, d_out)) * np.logspace(0, -1.5, d_out) + 0.3
    return TeacherMap().partial_fit(rng.standard_normal((n, d_in)), Y)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), d=st.integers(2, 12), spread=st.floats(0.1, 4.0), power=st.floats(0.0, 1.0))
def test_softening_keeps_the_variance_and_shrinks_the_spread_to_its_power(seed, d, spread, power):
    S = _scatter(seed, d, spread)
    M = softening(S, power)
    T = M @ S @ M
    np.testing.assert_allclose(M, M.T, atol=1e-12)
    assert np.trace(T) == pytest.approx(np.trace(S), rel=1e-9)
    w, v = np.linalg.eigvalsh(S), np.linalg.eigvalsh(T)
    assert v.max() / v.min() == pytest.approx((w.max() / w.min()) ** (1 - power), rel=1e-6)
    # the teacher's axes are kept (zca): M commutes with S
    np.testing.assert_allclose(M @ S, S @ M, atol=1e-9 * np.abs(S).max())


def test_power_zero_is_the_principal_axes_and_full_width_is_no_projection():
    tm = _map(0)
    assert target_projection(tm, None, 0.0) is None
    assert target_projection(tm, 6, 0.0) is None
    P = target_projection(tm, 3, 0.0)
    Q = principal_axes(tm, 3)
    np.testing.assert_allclose(P @ P.T, Q @ Q.T, atol=1e-10)  # the same subspace
    np.testing.assert_allclose(P.T @ P, np.eye(3), atol=1e-10)


@pytest.mark.parametrize("power", [0.25, 0.5, 1.0])
def test_softened_targets_on_their_axes_are_uncorrelated_and_ordered(power):
    tm = _map(1)
    d = tm.n_features_in_
    S = tm.moments_.scatter[d:, d:]
    full = target_projection(tm, None, power)
    P = target_projection(tm, 4, power)
    T = P.T @ S @ P  # the projected targets' scatter
    off = T - np.diag(np.diag(T))
    assert np.abs(off).max() < 1e-9 * np.trace(T)
    top = np.sort(np.linalg.eigvalsh(full.T @ S @ full))[::-1][:4]
    np.testing.assert_allclose(np.diag(T), top, rtol=1e-8)


@pytest.mark.parametrize("power", [0.0, 0.5, 1.0])
def test_the_axes_kept_are_the_teachers_own_at_any_power(power):
    """Softening shares the scatter's eigenvectors, so the ``k`` axes kept span the teacher's top-``k`` principal
    subspace at every power; at power 1, where the softened variances are all equal, too."""
    tm = _map(3)
    P = target_projection(tm, 3, power)
    Q, _ = np.linalg.qr(P)  # an orthonormal basis of P's columns
    top = principal_axes(tm, 3)
    np.testing.assert_allclose(Q @ Q.T, top @ top.T, atol=1e-9)


def test_a_rank_deficient_scatter_blows_nothing_up():
    """Fewer lines than dimensions: the unresolved directions get the weakest resolved direction's factor."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((3, 8))
    S = (X - X.mean(0)).T @ (X - X.mean(0))  # rank 2 of 8
    M = softening(S, 1.0)
    assert np.isfinite(M).all()
    w, V = np.linalg.eigh(S)
    weakest = V[:, np.argmax(w > 1e-10 * w.max())]  # the resolved direction of least variance
    factor = weakest @ M @ weakest
    assert np.linalg.eigvalsh(M).max() <= factor * (1 + 1e-9)  # no direction scaled up more than it
    assert np.trace(M @ S @ M) == pytest.approx(np.trace(S), rel=1e-9)
    with pytest.raises(IsotropyError, match="do not vary"):
        softening(np.zeros((4, 4)), 0.5)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "strong", True])
def test_a_power_outside_zero_to_one_is_refused(bad):
    with pytest.raises(IsotropyError, match="--target-whitening"):
        check_target_whitening(bad, "corpus.txt")
    assert check_target_whitening(None, None) == check_target_whitening(None, "corpus.txt")
    assert check_target_whitening(0.5, "corpus.txt") == 0.5
    assert check_target_whitening(None, "corpus.txt", "map") == 0.0  # the default was measured on the token fit alone
    assert check_target_whitening(0.5, "corpus.txt", "map") == 0.5


def test_the_command_refuses_a_bad_power_before_any_model_loads(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("one line\nanother line\n", encoding="utf-8")
    for args, why in (
        (["--corpus", corpus, "--target-whitening", "2"], "must be in [0, 1]"),
        (["--target-whitening", "0.5"], "give --corpus"),
    ):
        code, _, err = run_cli(["distill", "-m", "no/such-model", "-o", tmp_path / "out", *map(str, args)])
        assert code == 2, err
        assert why in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
