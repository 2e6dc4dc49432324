"""The closed-form token fit (isotropy.transforms.token_regression): its sums, their merge and its solve."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isotropy.errors import IsotropyError
from isotropy.transforms.token_regression import TokenRegression, pooling_matrix

V, D = 12, 3


def problem(seed: int, n: int = 40, vocab: int = V, max_len: int = 6):
    """Random sentences over tokens 0..vocab-2 (the last token never appears), teacher vectors and a prior table."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len + 1, size=n)
    flat = rng.integers(0, vocab - 1, size=int(lengths.sum()))
    Y = rng.standard_normal((n, D))
    prior = rng.standard_normal((vocab, D))
    return flat, lengths, Y, prior


def dense_solution(flat, lengths, Y, prior, lam):
    """The same objective solved densely: (G + r I) E = A^T Y + r E0 on the seen tokens, r = lam * mean diag(G)."""
    A = pooling_matrix(flat, lengths, len(prior)).toarray()
    seen = np.flatnonzero((A != 0).any(axis=0))
    G = A.T @ A
    r = lam * np.mean(np.diag(G)[seen])
    E = prior.copy()
    Gs = G[np.ix_(seen, seen)]
    E[seen] = np.linalg.solve(Gs + r * np.eye(len(seen)), A[:, seen].T @ Y + r * prior[seen])
    return E, A


@pytest.mark.parametrize("lam", [0.05, 1.0])
def test_the_solve_is_the_dense_least_squares_solution(lam):
    flat, lengths, Y, prior = problem(0)
    E, info = TokenRegression(V, D).partial_fit(flat, lengths, Y).solve(prior, lam, rtol=1e-10, maxiter=500, dtype=np.float64)
    want, A = dense_solution(flat, lengths, Y, prior, lam)
    np.testing.assert_allclose(E, want, atol=1e-7)
    assert np.array_equal(E[V - 1], prior[V - 1])  # a token no sentence holds keeps its prior row exactly
    assert info["seen"] == V - 1 and info["residual"] <= 1e-10
    fast, _ = TokenRegression(V, D).partial_fit(flat, lengths, Y).solve(prior, lam)  # float32 iterations, rtol 1e-3
    assert np.linalg.norm(fast - want) <= 1e-2 * np.linalg.norm(want)
    # the objective from the sums is the objective on the sentences
    tr = TokenRegression(V, D).partial_fit(flat, lengths, Y)
    assert tr.error(E) == pytest.approx(float(np.sum((A @ E - Y) ** 2)), rel=1e-9)


def test_the_fit_lowers_the_error_and_a_weaker_prior_fits_closer():
    flat, lengths, Y, prior = problem(1, n=60)
    tr = TokenRegression(V, D).partial_fit(flat, lengths, Y)
    errors = [tr.error(tr.solve(prior, lam, rtol=1e-9, maxiter=500, dtype=np.float64)[0]) for lam in (10.0, 1.0, 0.1)]
    assert tr.error(prior) > errors[0] > errors[1] > errors[2]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), cut=st.integers(1, 29))
def test_merged_shards_equal_one_fit_on_their_concatenation(seed, cut):
    flat, lengths, Y, _ = problem(seed, n=30)
    split = int(lengths[:cut].sum())
    a = TokenRegression(V, D).partial_fit(flat[:split], lengths[:cut], Y[:cut])
    b = TokenRegression(V, D).partial_fit(flat[split:], lengths[cut:], Y[cut:])
    whole = TokenRegression(V, D).partial_fit(flat, lengths, Y)
    a.merge(b)
    np.testing.assert_allclose(a.gram_.toarray(), whole.gram_.toarray(), atol=1e-12)
    np.testing.assert_allclose(a.cross_, whole.cross_, atol=1e-12)
    np.testing.assert_allclose(a.yy_, whole.yy_, atol=1e-12)
    assert np.array_equal(a.counts_, whole.counts_) and a.n_ == whole.n_ == 30
    # A^T Y is kept for the seen tokens only (the last token never appears), the same ones either way
    assert np.array_equal(a.rows_, whole.rows_) and np.array_equal(whole.rows_, whole.seen) and V - 1 not in whole.rows_


def test_projected_sums_are_the_sums_of_projected_targets():
    flat, lengths, Y, _ = problem(2)
    P = np.random.default_rng(3).standard_normal((D, 2))
    got = TokenRegression(V, D).partial_fit(flat, lengths, Y).project(P)
    want = TokenRegression(V, 2).partial_fit(flat, lengths, Y @ P)
    np.testing.assert_allclose(got.cross_, want.cross_, atol=1e-12)
    np.testing.assert_allclose(got.yy_, want.yy_, atol=1e-12)


def test_sentences_without_tokens_give_no_equation_and_bad_input_is_refused():
    flat, lengths, Y, prior = problem(4, n=5)
    lengths = np.concatenate([lengths, [0]])
    Y = np.vstack([Y, np.ones((1, D))])
    tr = TokenRegression(V, D).partial_fit(flat, lengths, Y)
    assert tr.n_ == 5 and tr.skipped_ == 1
    with pytest.raises(IsotropyError, match="12 x 3"):
        tr.solve(prior[:, :2], 1.0)  # a prior of another width than the teacher's
    with pytest.raises(IsotropyError, match="> 0"):
        tr.solve(prior, 0.0)
    with pytest.raises(IsotropyError, match="3 wide"):
        tr.partial_fit(flat, lengths, Y[:, :2])
    with pytest.raises(IsotropyError, match="nothing to fit"):
        TokenRegression(V, D).partial_fit(np.zeros(0, dtype=int), np.zeros(2, dtype=int), Y[:2]).solve(prior, 1.0)
    with pytest.raises(IsotropyError, match="merge"):
        tr.merge(TokenRegression(V, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_threaded_sparse_product_is_scipys(dtype, monkeypatch):
    import builtins

    from scipy.sparse import random as sparse_random

    from isotropy.transforms.token_regression import sparse_product

    M = sparse_random(300, 300, density=0.05, random_state=0, format="csr")
    M = (M + M.T).astype(dtype)
    X = np.random.default_rng(0).standard_normal((300, 77)).astype(dtype)  # 77: two blocks of 32 columns and a part
    want = M @ X
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(sparse_product(M, dtype)(X), want, rtol=tol, atol=tol * np.abs(want).max())
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("no torch here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)  # the fallback: scipy's own product
    np.testing.assert_allclose(sparse_product(M, dtype)(X), want, rtol=tol, atol=tol * np.abs(want).max())


@settings(max_examples=30, deadline=None)
@given(peak=st.integers(0, 7), values=st.lists(st.floats(0.0, 1.0), min_size=8, max_size=8, unique=True), large=st.booleans())
def test_the_strength_grid_stops_past_its_peak_and_keeps_the_full_grids_choice(peak, values, large):
    """A criterion that rises to one peak over the strengths in increasing order and falls after it: the grid goes
    up from LAMBDAS[0] to the first strength that scores worse, and down through LOWER_LAMBDAS only when LAMBDAS[0]
    won on a corpus of LOWER_FROM lines or more, again to the first that scores worse; it keeps the strength the
    whole grid would have kept (the upward grid's, under that size)."""
    from isotropy.distill import corpus_fit as distill_fit

    ladder = sorted(distill_fit.LOWER_LAMBDAS) + list(distill_fit.LAMBDAS)  # every strength, increasing
    s = sorted(values)
    score = dict(zip(ladder, s[:peak] + [s[7]] + sorted(s[peak:7], reverse=True)))  # rises to ladder[peak], then falls
    first = ladder.index(distill_fit.LAMBDAS[0])
    up = ladder[first : max(peak + 2, first + 2)]  # up to the first worse one (or the top)
    down = ladder[max(peak - 1, 0) : first][::-1] if peak <= first else []  # only when LAMBDAS[0] won
    order = iter(up + down if large else up)
    flat, lengths, Y, prior = problem(2, n=50)
    cut = int(lengths[:30].sum())
    fit = TokenRegression(V, D).partial_fit(flat[:cut], lengths[:30], Y[:30])
    held = TokenRegression(V, D).partial_fit(flat[cut:], lengths[30:], Y[30:])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(distill_fit, "LOWER_FROM", 0 if large else 10**9)  # a corpus past the size, or under it
        _, info = distill_fit.solve_tokens(fit, held, prior, agreement=lambda E: score[next(order)], criterion="cosine")
    tried = [float(k) for k in info["held_out_agreement"]]
    if large:
        assert info["lambda"] == ladder[peak]
        assert tried == up + down
    else:  # the floor stays: the upward grid alone, its first strength kept where the peak lies below it
        assert info["lambda"] == ladder[max(peak, first)]
        assert tried == up


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), cut=st.integers(1, 39), empty=st.booleans(), rows=st.sampled_from([1, 7, 8192]))
def test_held_out_sums_keep_ids_and_answer_as_the_gram_does(seed, cut, empty, rows):
    """HeldOutSums (the held-out sentences' ids instead of their Gram) gives what a plain accumulator of the same
    sentences gives: the error of any table, the Gram, the merge into fitting sums, the projection, the merge of
    two parts in order, and a pickle (a Dask part's) of the same; ``rows`` cuts error()'s pooling into pieces."""
    import pickle

    from isotropy.transforms.held_out import HeldOutSums

    flat, lengths, Y, prior = problem(seed)
    if empty:  # a sentence without a token: no equation, counted in skipped_
        lengths = np.concatenate([[0], lengths[1:]])
        flat = flat[int(problem(seed)[1][0]) :]
    a = int(lengths[:cut].sum())
    plain = TokenRegression(V, D).partial_fit(flat, lengths, Y)
    held = HeldOutSums(V, D).partial_fit(flat[:a], lengths[:cut], Y[:cut])
    held.ERROR_ROWS = rows
    held.merge(pickle.loads(pickle.dumps(HeldOutSums(V, D).partial_fit(flat[a:], lengths[cut:], Y[cut:]))))
    E = np.random.default_rng(seed + 1).standard_normal((V, D))
    assert held.error(E) == pytest.approx(plain.error(E), rel=1e-9, abs=1e-9)
    assert abs(held.gram_ - plain.gram_).max() <= 1e-12
    assert (held.n_, held.skipped_) == (plain.n_, plain.skipped_) and np.array_equal(held.seen, plain.seen)
    P = np.random.default_rng(seed + 2).standard_normal((D, 2))
    Q = np.random.default_rng(seed + 3).standard_normal((V, 2))
    assert held.project(P).error(Q) == pytest.approx(plain.project(P).error(Q), rel=1e-9, abs=1e-9)
    fit = TokenRegression(V, D).partial_fit(flat, lengths, Y)
    both, want = TokenRegression(V, D).merge(fit).merge(held), TokenRegression(V, D).merge(fit).merge(plain)
    assert abs(both.gram_ - want.gram_).max() <= 1e-12 and np.allclose(both.cross_, want.cross_, rtol=0, atol=1e-12)
    held.drop_pairs()  # a consumed held-out part: its pairs gone, its other sums kept
    assert held.gram_.nnz == 0 and held.n_ == plain.n_


def test_held_out_sums_merge_only_held_out_sums():
    from isotropy.transforms.held_out import HeldOutSums

    with pytest.raises(IsotropyError, match="merges only another held-out part"):
        HeldOutSums(V, D).merge(TokenRegression(V, D))
