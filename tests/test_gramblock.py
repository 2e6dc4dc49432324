"""The token Gram kept in row blocks (isotropy.transforms.gram_blocks): the same sums and the same solve as the plain
one-matrix Gram, whatever the blocking, the flushes, the merges and the spill to disk."""

from __future__ import annotations

import pickle
import tempfile
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isotropy.transforms.gram_blocks as gb
import isotropy.transforms.token_regression as tr
from isotropy.transforms.token_regression import NormalEquations, TokenRegression, pooling_matrix


def _problem(seed: int, n: int, V: int, d: int = 4):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 7, n)  # some empty sentences: no equation
    flat = rng.integers(0, V - 2, int(lengths.sum()))  # the last two tokens never appear
    return flat, lengths, rng.standard_normal((n, d)), rng.standard_normal((V, d))


def _chunked(flat, lengths, Y, V, step):
    """Sums added ``step`` sentences at a time."""
    out = TokenRegression(V, Y.shape[1])
    ends = np.concatenate([[0], np.cumsum(lengths)])
    for lo in range(0, len(lengths), step):
        hi = min(lo + step, len(lengths))
        out.partial_fit(flat[ends[lo] : ends[hi]], lengths[lo:hi], Y[lo:hi])
    return out


def _plain_solve(G, reg: TokenRegression, prior, lam, dtype=np.float64):
    """The solve on the plain full Gram (one matrix, no blocks): what the blocked system must reproduce."""
    seen = np.flatnonzero(G.diagonal() > 0)
    system = NormalEquations(G[seen][:, seen], reg.cross_[seen], prior, seen, dtype)
    return system.solve(lam, rtol=1e-12, maxiter=500)[0]


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(2, 60),
    V=st.integers(3, 30),
    block=st.integers(1, 40),
    flush=st.integers(1, 50),
    step=st.integers(1, 20),
)
def test_blocked_sums_and_solve_equal_the_plain_ones(seed, n, V, block, flush, step):
    flat, lengths, Y, prior = _problem(seed, n, V)
    if not (lengths > 0).any():
        return
    A = pooling_matrix(flat, lengths, V).toarray()
    G = A.T @ A
    with mock.patch.object(gb, "BLOCK_NNZ", block), mock.patch.object(tr, "FLUSH_TRIPLETS", flush):
        reg = _chunked(flat, lengths, Y, V, step)
        tri = reg._blocks()
        assert all(M.nnz <= block or b - a == 1 for a, b, M in tri.blocks)  # cut where they grew past the limit
        assert [a for a, _, _ in tri.blocks] == sorted({a for a, _, _ in tri.blocks})
        assert tri.blocks[0][0] == 0 and tri.blocks[-1][1] == V
        assert all(x[1] == y[0] for x, y in zip(tri.blocks, tri.blocks[1:]))  # consecutive, covering 0..V
        np.testing.assert_allclose(reg.upper_().toarray(), np.triu(G), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(reg.gram_.toarray(), G, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(tri.diagonal(), np.diag(G), rtol=1e-12, atol=1e-14)
        E = np.random.default_rng(seed + 1).standard_normal((V, Y.shape[1]))
        assert tri.quadratic(E) == pytest.approx(float(np.sum(E * (G @ E))), rel=1e-9, abs=1e-9)
        keep = lengths > 0
        assert reg.error(E) == pytest.approx(float(np.sum((A[keep] @ E - Y[keep]) ** 2)), rel=1e-9, abs=1e-9)
        seen = reg.seen
        U, diag = gb.strict_upper(tri, seen, np.float64)  # the solver's system: strict triangle + diagonal
        Gs = G[np.ix_(seen, seen)]
        np.testing.assert_allclose(U.toarray(), np.triu(Gs, 1), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(diag, np.diag(Gs), rtol=1e-12, atol=1e-14)
        X = E[seen]
        product = gb.symmetric_product(U, diag, np.float64, tr.sparse_product, tr._by_columns)
        np.testing.assert_allclose(product(X), Gs @ X, rtol=1e-10, atol=1e-12)
        from scipy.sparse import csr_matrix

        blocked = reg.solve(prior, 0.7, rtol=1e-12, maxiter=500, dtype=np.float64)[0]
        plain = _plain_solve(csr_matrix(G), reg, prior, 0.7)
        np.testing.assert_allclose(blocked, plain, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("block", [1, 5, 10**9])
def test_merging_differently_blocked_triangles_sums_them(block, monkeypatch):
    """Two shards whose blocks were cut at other rows merge block by block into the sums of both."""
    V = 25
    flat, lengths, Y, _ = _problem(3, 80, V)
    cut = int(lengths[:50].sum())
    monkeypatch.setattr(gb, "BLOCK_NNZ", block)
    a = _chunked(flat[:cut], lengths[:50], Y[:50], V, 7)
    monkeypatch.setattr(gb, "BLOCK_NNZ", 3 * block)  # the other shard's blocks end elsewhere
    b = _chunked(flat[cut:], lengths[50:], Y[50:], V, 4)
    whole = TokenRegression(V, Y.shape[1]).partial_fit(flat, lengths, Y)
    a.merge(b)
    np.testing.assert_allclose(a.upper_().toarray(), whole.upper_().toarray(), rtol=1e-12, atol=1e-14)
    again = pickle.loads(pickle.dumps(a))  # a Dask part's sums travel as their blocks
    np.testing.assert_array_equal(again.upper_().toarray(), a.upper_().toarray())


def test_the_spilled_triangle_solves_alike_and_comes_back(tmp_path, monkeypatch):
    """While spilled, the blocks are files (their memory freed) and the solve is the same, bit for bit; on the way
    out they are read back and the files go; a disk that refuses keeps them in memory."""
    V = 30
    flat, lengths, Y, prior = _problem(7, 120, V)
    monkeypatch.setattr(gb, "BLOCK_NNZ", 8)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    reg = _chunked(flat, lengths, Y, V, 9)
    before = reg.upper_().toarray()
    want = reg.solve(prior, 1.0, rtol=1e-10, maxiter=300)[0]
    with reg.spilled():
        assert len(reg._tri.blocks) > 1 and all(isinstance(M, gb._Spilled) for _, _, M in reg._tri.blocks)
        assert len(list(tmp_path.rglob("*.npz"))) == len(reg._tri.blocks)
        np.testing.assert_array_equal(reg.solve(prior, 1.0, rtol=1e-10, maxiter=300)[0], want)
    assert not any(isinstance(M, gb._Spilled) for _, _, M in reg._tri.blocks)
    assert not list(tmp_path.iterdir())  # the temporary directory removed
    np.testing.assert_array_equal(reg.upper_().toarray(), before)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("scipy.sparse.save_npz", full)
    with reg.spilled():
        assert not any(isinstance(M, gb._Spilled) for _, _, M in reg._tri.blocks)
        np.testing.assert_array_equal(reg.solve(prior, 1.0, rtol=1e-10, maxiter=300)[0], want)
    np.testing.assert_array_equal(reg.upper_().toarray(), before)


def test_the_strength_choice_and_table_do_not_depend_on_the_blocking(monkeypatch, tmp_path):
    """``solve_tokens`` (grid on held-out sums, merge, final solve, the float64 sums spilled meanwhile) gives the
    same strength and, to float32 rounding, the same table with one block or many."""
    from isotropy.distill.corpus_fit import solve_tokens

    V = 40
    flat, lengths, Y, prior = _problem(11, 200, V)
    cut = int(lengths[:170].sum())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def run(block):
        monkeypatch.setattr(gb, "BLOCK_NNZ", block)
        fit = _chunked(flat[:cut], lengths[:170], Y[:170], V, 11)
        held = _chunked(flat[cut:], lengths[170:], Y[170:], V, 6)
        return solve_tokens(fit, held, prior, criterion="mse", consume=True)

    one, info_one = run(10**9)
    many, info_many = run(6)
    assert info_one["lambda"] == info_many["lambda"]
    assert info_one["held_out_error"].keys() == info_many["held_out_error"].keys()
    for k, v in info_one["held_out_error"].items():
        assert info_many["held_out_error"][k] == pytest.approx(v, rel=1e-5)
    np.testing.assert_allclose(many, one, rtol=1e-4, atol=1e-5 * np.abs(one).max())
    assert not list(tmp_path.iterdir())


def _small_blocks(tmp_path, monkeypatch) -> TokenRegression:
    """Sums of 60 sentences in blocks of at most 5 entries, spilled (when asked) under ``tmp_path``."""
    V = 20
    flat, lengths, Y, _ = _problem(5, 60, V)
    monkeypatch.setattr(gb, "BLOCK_NNZ", 5)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return _chunked(flat, lengths, Y, V, 8)


def test_an_interrupt_while_spilled_brings_the_blocks_back(tmp_path, monkeypatch):
    """Ctrl-C during the solve: the blocks are read back (the sums intact) and the temporary folder goes."""
    reg = _small_blocks(tmp_path, monkeypatch)
    before = reg.upper_().toarray()
    with pytest.raises(KeyboardInterrupt), reg.spilled():
        assert list(tmp_path.rglob("*.npz"))
        raise KeyboardInterrupt
    assert not list(tmp_path.iterdir())
    np.testing.assert_array_equal(reg.upper_().toarray(), before)


def test_a_block_changed_on_disk_while_spilled_is_one_error_naming_its_file(tmp_path, monkeypatch):
    """Each spilled block's sha256 is kept when it is written: a file changed while it waited is refused, not summed."""
    from isotropy import IsotropyError

    reg = _small_blocks(tmp_path, monkeypatch)
    with pytest.raises(IsotropyError, match=r"gram-.*\.npz: a block of the token fit's sums changed on disk"):
        with reg.spilled():
            victim = sorted(tmp_path.rglob("*.npz"))[0]
            data = bytearray(victim.read_bytes())
            data[len(data) // 2] ^= 0x01
            victim.write_bytes(bytes(data))
    assert not list(tmp_path.iterdir())  # the folder still goes


def test_the_spill_folder_of_a_killed_run_is_removed_by_the_next_one(tmp_path, monkeypatch):
    """SIGKILL leaves a spill folder behind (~600 MB at a million lines); the next spill removes it, and only it: a
    folder in use (its owner's lock held), one holding anything but blocks, one without an owner file stay."""
    import os
    import signal
    import subprocess
    import sys

    code = (
        "import isotropy.transforms.gram_blocks as gb, pathlib, sys, time\n"
        "with gb.spill_folder() as path:\n"
        "    (pathlib.Path(path) / 'gram-1-s0.npz').write_bytes(b'block')\n"
        "    print(path, flush=True)\n"
        "    time.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp_path)}
    )
    killed = child.stdout.readline().strip()  # the folder is there and locked once this line comes
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    assert os.path.isdir(killed) and os.path.dirname(killed) == str(tmp_path)
    kept = []
    for name, files in (("user", {".owner": b"", "notes.txt": b"mine"}), ("no-owner", {"gram-2-s0.npz": b"x"})):
        (tmp_path / f"{gb.SPILL_PREFIX}{name}").mkdir()
        for file, data in files.items():
            (tmp_path / f"{gb.SPILL_PREFIX}{name}" / file).write_bytes(data)
        kept.append(str(tmp_path / f"{gb.SPILL_PREFIX}{name}"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with gb.spill_folder() as live:
        (tmp_path / "other").mkdir()
        with gb.spill_folder() as new:
            assert not os.path.exists(killed)
            assert all(os.path.isdir(p) for p in (*kept, live, new))
            assert sorted(os.listdir(new)) == [".owner"]
        assert not os.path.exists(new) and os.path.isdir(live)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([os.path.basename(p) for p in kept] + ["other"])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), V=st.integers(1, 40), parts=st.integers(1, 5), density=st.floats(0.0, 0.6))
def test_the_threaded_transposed_product_is_the_transposed_product(seed, V, parts, density):
    """``U^T X`` as a sum over row ranges of ``U`` on threads: the CSC product's value (to float32 rounding: the
    ranges sum in another order), from views of ``U``'s arrays, never a copy of the pairs."""
    from scipy.sparse import random as sparse_random
    from scipy.sparse import triu

    rng = np.random.default_rng(seed)
    U = triu(sparse_random(V, V, density=density, format="csr", dtype=np.float32, random_state=seed), 1).tocsr()
    X = rng.standard_normal((V, 3)).astype(np.float32)
    want = U.T @ X
    product = gb._transposed_product(U, parts)
    got = product(X)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * (1 + np.abs(want).max()))
    for _, _, part in getattr(product, "ranges", []):  # views: no copy of the pairs
        assert part.nnz == 0 or (np.shares_memory(part.data, U.data) and np.shares_memory(part.indices, U.indices))
