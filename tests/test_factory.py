"""The static factory at scale (issue #43, round 2): the distilled table cached beside the teacher's vectors
(isotropy.distill.table_cache), and token statistics that grow with the vocabulary, whose chunked sums equal the
one-shot ones (isotropy.transforms.token_regression)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli

pytest.importorskip("model2vec")

CORPUS = [f"the {a} {b} sat on the {c} mat" for a in ("red", "big", "old") for b in ("cat", "dog") for c in ("blue", "soft")]


@pytest.fixture(scope="module")
def tiny_static():
    """A model2vec StaticModel over the default model's tokenizer with a random 16-d table."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    from isotropy.encoders import default_model_path

    tok = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    rng = np.random.default_rng(0)
    return StaticModel(rng.standard_normal((tok.get_vocab_size(), 16)).astype(np.float32), tok, normalize=True)


def _key(fp: str = "f" * 32, pca=None):
    from isotropy.distill.table_cache import table_key

    return table_key(fp, pca)


def test_a_cached_table_is_the_distilled_one_and_is_not_distilled_again(tiny_static, tmp_path):
    from isotropy.distill.table_cache import TableCache, cached_table

    made = []

    def make():
        made.append(1)
        return copy.deepcopy(tiny_static)

    cache = TableCache(tmp_path / "tables")
    first, how = cached_table(make, cache, _key())
    assert how == "distilled" and len(made) == 1
    again, how = cached_table(make, cache, _key())
    assert how == "cached" and len(made) == 1
    np.testing.assert_array_equal(np.asarray(again.embedding), np.asarray(tiny_static.embedding))
    assert again.tokenizer.to_str() == tiny_static.tokenizer.to_str()
    # another PCA width or teacher is another entry
    _, how = cached_table(make, cache, _key(pca=8))
    _, how2 = cached_table(make, cache, _key("e" * 32))
    assert (how, how2) == ("distilled", "distilled") and len(made) == 3
    assert len(list((tmp_path / "tables").iterdir())) == 3


@pytest.mark.parametrize("damage", ["flip", "remove", "entry"])
def test_a_damaged_table_entry_is_distilled_again_with_one_warning(tiny_static, tmp_path, capsys, damage):
    from isotropy.distill.table_cache import TableCache, cached_table

    cache = TableCache(tmp_path / "tables")
    cached_table(lambda: copy.deepcopy(tiny_static), cache, _key())
    folder = cache.path(_key())
    if damage == "flip":
        data = bytearray((folder / "model.safetensors").read_bytes())
        data[-5] ^= 0x01
        (folder / "model.safetensors").write_bytes(bytes(data))
    elif damage == "remove":
        (folder / "tokenizer.json").unlink()
    else:
        (folder / "entry.json").write_text("{", encoding="utf-8")
    capsys.readouterr()
    made = []
    static, how = cached_table(lambda: made.append(1) or copy.deepcopy(tiny_static), cache, _key())
    err = capsys.readouterr().err
    assert how == "distilled" and made == [1]
    assert err.count("warning:") == 1 and str(folder) in err and "distilling it again" in err
    np.testing.assert_array_equal(np.asarray(static.embedding), np.asarray(tiny_static.embedding))
    again, how = cached_table(lambda: pytest.fail("distilled a third time"), cache, _key())  # replaced: served now
    assert how == "cached"
    np.testing.assert_array_equal(np.asarray(again.embedding), np.asarray(tiny_static.embedding))


def test_a_table_cache_that_cannot_be_written_warns_once_and_goes_on(tiny_static, tmp_path, capsys):
    from isotropy.distill.table_cache import TableCache, cached_table

    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    static, how = cached_table(lambda: copy.deepcopy(tiny_static), TableCache(tmp_path / "file" / "tables"), _key())
    err = capsys.readouterr().err
    assert how == "distilled" and err.count("warning:") == 1 and "cannot write the distilled-table cache" in err
    assert static.embedding.shape == tiny_static.embedding.shape


SUMS_NOTE = "the corpus pass's sums read from the cache (no chunk read or encoded)"


def test_a_rerun_with_other_dims_reads_the_table_and_the_teacher_vectors(tiny_static, tiny_model_dir, tmp_path, monkeypatch):
    import isotropy.distill.run as mod

    made = []
    monkeypatch.setattr(mod, "distill_static", lambda model, dims, show: made.append(dims) or copy.deepcopy(tiny_static))
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    cache = tmp_path / "cache"

    def distill(out, *args):
        code, _, err = run_cli(
            ["distill", "-m", tiny_model_dir, "-o", out, "--corpus", corpus, "--teacher-cache", cache, *map(str, args)]
        )
        assert code == 0, err
        return json.loads((Path(out) / "isotropy.json").read_text())["distill"]

    assert distill(tmp_path / "a", "--dims", 16)["table_cache"] == "distilled" and made == [None]
    for args in (["--dims", 8], ["--dims", 8, "--lam", 2.5], ["--dims", 8, "--target-whitening", 0]):
        info = distill(tmp_path / "b", *args)
        assert info["table_cache"] == "cached" and made == [None], args
        assert info["corpus_fit"]["teacher_cache"] == SUMS_NOTE  # the pass's sums: the corpus is not read again
        softened = "soft-whitened (power 0.5," in info["corpus_fit"]["teacher_projection"]  # the default
        assert softened == ("--target-whitening" not in args), info["corpus_fit"]["teacher_projection"]
        assert info["corpus_fit"]["target_whitening"] == (0.5 if softened else 0.0)
    assert str(cache) not in (tmp_path / "b" / "isotropy.json").read_text()  # no path of this machine recorded
    info = distill(tmp_path / "c", "--dims", 8, "--fit", "map")  # model2vec's PCA to 8: another entry
    assert info["table_cache"] == "distilled" and made == [None, 8]


# --------------------------------------------------------------------------- statistics that grow with the vocabulary


def _sentences(seed: int, n: int, V: int = 40):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 9, n)  # some empty sentences: no equation
    flat = rng.integers(0, V - 1, int(lengths.sum()))  # the last token never appears
    return flat, lengths, rng.standard_normal((n, 5))


@pytest.mark.parametrize("flush", [1, 7, 10**9])
def test_chunked_statistics_equal_the_one_shot_ones(monkeypatch, flush):
    """Chunk by chunk (the Gram's triangle buffered as triplets and summed in every ``flush`` of them), merged and
    projected: the same sums as one call on all sentences, to float64 rounding; the solve on them alike."""
    import isotropy.transforms.token_regression as tr

    V = 40
    flat, lengths, Y = _sentences(0, 120, V)
    whole = tr.TokenRegression(V, 5).partial_fit(flat, lengths, Y)  # one chunk: one flush at the end
    monkeypatch.setattr(tr, "FLUSH_TRIPLETS", flush)
    a, b = tr.TokenRegression(V, 5), tr.TokenRegression(V, 5)
    ends = np.concatenate([[0], np.cumsum(lengths)])
    for lo in range(0, 120, 13):
        hi = min(lo + 13, 120)
        (a if lo < 60 else b).partial_fit(flat[ends[lo] : ends[hi]], lengths[lo:hi], Y[lo:hi])
    a.merge(b)
    dense = lambda X: X.toarray()  # noqa: E731
    A = tr.pooling_matrix(flat, lengths, V).toarray()
    np.testing.assert_allclose(dense(a.gram_), A.T @ A, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dense(a.gram_), dense(whole.gram_), rtol=1e-12, atol=1e-14)
    assert np.array_equal(dense(a.gram_), dense(a.gram_).T)  # the full matrix from the triangle is symmetric
    np.testing.assert_allclose(a.cross_, whole.cross_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.yy_, whole.yy_, rtol=1e-12)
    assert np.array_equal(a.counts_, whole.counts_) and a.n_ == whole.n_ and a.skipped_ == whole.skipped_
    assert np.array_equal(a.seen, whole.seen) and V - 1 not in a.seen
    prior = np.random.default_rng(1).standard_normal((V, 5))
    E = np.random.default_rng(2).standard_normal((V, 5))
    keep = lengths > 0  # an empty sentence gives no equation
    assert a.error(E) == pytest.approx(float(np.sum((A[keep] @ E - Y[keep]) ** 2)), rel=1e-10)
    x, _ = a.solve(prior, 1.0, rtol=1e-10, maxiter=500, dtype=np.float64)
    y, _ = whole.solve(prior, 1.0, rtol=1e-10, maxiter=500, dtype=np.float64)
    np.testing.assert_allclose(x, y, atol=1e-8)
    P = np.random.default_rng(3).standard_normal((5, 2))
    pa, pw = a.project(P), whole.project(P)
    np.testing.assert_allclose(dense(pa.gram_), dense(pw.gram_), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pa.cross_, whole.cross_ @ P, rtol=1e-10, atol=1e-12)


def test_a_consumed_fit_gives_the_table_of_a_copied_one():
    """``solve_tokens(consume=True)`` merges the held-out sums into the fitting ones in place: the same table."""
    from isotropy.distill.corpus_fit import solve_tokens
    from isotropy.transforms.token_regression import TokenRegression

    V = 40
    flat, lengths, Y = _sentences(4, 90, V)
    cut = int(lengths[:80].sum())
    prior = np.random.default_rng(5).standard_normal((V, 5))

    def pair():
        fit = TokenRegression(V, 5).partial_fit(flat[:cut], lengths[:80], Y[:80])
        return fit, TokenRegression(V, 5).partial_fit(flat[cut:], lengths[80:], Y[80:])

    fit, held = pair()
    kept, info = solve_tokens(fit, held, prior, criterion="mse")
    assert fit.n_ == int((lengths[:80] > 0).sum())  # not consumed: unchanged
    fit2, held2 = pair()
    used, info2 = solve_tokens(fit2, held2, prior, criterion="mse", consume=True)
    np.testing.assert_array_equal(kept, used)
    assert info["lambda"] == info2["lambda"] and fit2.n_ == int((lengths > 0).sum())
