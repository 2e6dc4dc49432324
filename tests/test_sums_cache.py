"""The corpus pass's sums kept beside the teacher's vectors (isotropy.distill.sums_cache, issue #43): a rerun with
other fit settings reads them instead of the corpus, bit for bit the sums the pass gathered; a changed corpus, other
spans or a damaged entry gather them again; a failed write is one warning."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_teacher_cache import CHUNKS, CORPUS, Calls, _distill, _fit, _small, _table, teacher, tiny_static  # noqa: F401

pytest.importorskip("model2vec")

SUMS = "the corpus pass's sums read from the cache (no chunk read or encoded)"


def _note(folder: Path) -> str:
    return json.loads((folder / "isotropy.json").read_text())["distill"]["corpus_fit"]["teacher_cache"]


def test_stored_sums_come_back_bit_for_bit(tiny_static, teacher, tmp_path):  # noqa: F811
    from isotropy.calibration.corpus import Corpus
    from isotropy.distill.sums_cache import SumsCache, sums_key
    from isotropy.distill.teacher_vectors import teacher_key

    cf = _fit(tiny_static, teacher, CORPUS, None)
    key = sums_key(teacher_key(teacher), tiny_static, Corpus(CORPUS), ("halves", "drop", "cut"), True)
    cache = SumsCache(tmp_path / "sums")
    assert cache.lookup(key, 0.0) == (None, None)
    assert cache.put(key, cf) is None
    back, reason = cache.lookup(key, 0.5)
    assert reason is None and back.teacher_map.alpha == 0.5
    for name in ("sentences", "empty", "spans", "chunks", "first", "varied"):
        assert getattr(back, name) == getattr(cf, name), name
    for k, v in cf.teacher_map.moments_.to_arrays().items():
        np.testing.assert_array_equal(back.teacher_map.moments_.to_arrays()[k], v)
    for a, b in ((cf.fit, back.fit), (cf.held, back.held)):
        assert type(a) is type(b) and (a.n_, a.skipped_) == (b.n_, b.skipped_)
        assert (a.gram_ != b.gram_).nnz == 0
        np.testing.assert_array_equal(a.cross_, b.cross_)
        np.testing.assert_array_equal(a.yy_, b.yy_)
        np.testing.assert_array_equal(a.counts_, b.counts_)
    E = np.random.default_rng(0).standard_normal(np.shape(tiny_static.embedding)[:1] + (cf.fit.dim,))
    assert back.held.error(E) == cf.held.error(E)
    for (A, Y), (B, Z) in zip([cf.held_sample()], [back.held_sample()]):
        assert (A != B).nnz == 0 and np.array_equal(Y, Z)
    # what decides the sums is in the key: other spans, another corpus, another table
    assert sums_key(teacher_key(teacher), tiny_static, Corpus(CORPUS), ("halves",), True) != key
    assert sums_key(teacher_key(teacher), tiny_static, Corpus(CORPUS[:-1] + ["a cat"]), ("halves", "drop", "cut"), True) != key
    other = __import__("copy").deepcopy(tiny_static)
    other.embedding = other.embedding * 2
    assert sums_key(teacher_key(teacher), other, Corpus(CORPUS), ("halves", "drop", "cut"), True) != key
    assert sums_key(None, tiny_static, Corpus(CORPUS), (), True) is None  # a teacher without a fingerprint


def test_a_rerun_reads_the_sums_a_changed_corpus_or_a_damaged_entry_gathers_them_again(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    calls = Calls(monkeypatch)
    code, _, err = _distill(tiny_model_dir, tmp_path / "a", corpus, "--dims", 16, "--spans", "none")
    assert code == 0, err
    entries = list((tmp_path / "isotropy-cache" / "teacher" / "sums").iterdir())
    assert len(entries) == 1 and (entries[0] / "entry.json").is_file()
    code, _, err = _distill(tiny_model_dir, tmp_path / "b", corpus, "--dims", 8, "--spans", "none")
    assert code == 0 and _note(tmp_path / "b") == SUMS, err
    # the same table as a run that reads nothing from any cache
    code, _, err = _distill(tiny_model_dir, tmp_path / "c", corpus, "--dims", 8, "--spans", "none", "--no-teacher-cache")
    assert code == 0 and _note(tmp_path / "c") == "off", err
    np.testing.assert_allclose(_table(tmp_path / "b"), _table(tmp_path / "c"), rtol=1e-6, atol=1e-6)
    # one byte flipped in one array: one warning line naming the entry, the sums gathered from the chunks again
    victim = entries[0] / "fit.cross.npy"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    calls.n = 0
    code, _, err = _distill(tiny_model_dir, tmp_path / "b", corpus, "--dims", 8, "--spans", "none")
    assert code == 0 and calls.n == 0, err
    lines = [line for line in err.splitlines() if "warning:" in line]
    assert len(lines) == 1 and "sums cache entry" in lines[0] and "fit.cross.npy" in lines[0], err
    assert _note(tmp_path / "b") == f"cached chunks used: {CHUNKS} of {CHUNKS}"
    np.testing.assert_allclose(_table(tmp_path / "b"), _table(tmp_path / "c"), rtol=1e-6, atol=1e-6)
    code, _, err = _distill(tiny_model_dir, tmp_path / "b", corpus, "--dims", 8, "--spans", "none")
    assert code == 0 and _note(tmp_path / "b") == SUMS and "warning" not in err, err  # replaced
    # one line changed: other sums (the chunk that holds it encoded again), never the old ones
    corpus.write_text("\n".join(CORPUS[:-1] + ["the cat sat on a new mat today"]) + "\n", encoding="utf-8")
    calls.n = 0
    code, _, err = _distill(tiny_model_dir, tmp_path / "b", corpus, "--dims", 8, "--spans", "none")
    assert code == 0 and calls.n == 1, err
    assert _note(tmp_path / "b") == f"cached chunks used: {CHUNKS - 1} of {CHUNKS}"


def test_a_sums_cache_that_cannot_be_written_is_one_warning(tiny_model_dir, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "sums").write_text("not a folder", encoding="utf-8")  # the sums' folder cannot be made
    code, _, err = _distill(tiny_model_dir, tmp_path / "a", corpus, "--dims", 8, "--teacher-cache", cache)
    assert code == 0, err
    lines = [line for line in err.splitlines() if "warning:" in line]
    assert len(lines) == 1 and "cannot write the corpus sums cache" in lines[0], err
    assert _note(tmp_path / "a") == f"cached chunks used: 0 of {CHUNKS}"
    assert (cache / "sums").read_text(encoding="utf-8") == "not a folder"  # not ours: left alone


def test_a_corpus_changed_while_the_pass_read_it_keeps_no_sums(tiny_model_dir, tmp_path, monkeypatch):
    """The key's digest of the corpus is taken before the pass: an edit during the pass would store sums of another
    text under it. The key is made again after the pass; when it differs, nothing is stored (one warning)."""
    from isotropy.distill import corpus_fit

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    real = corpus_fit.fit_corpus

    def edited_during_the_pass(*args, **kwargs):
        got = real(*args, **kwargs)
        corpus.write_text("\n".join(CORPUS[:-1] + ["a line written while the pass ran"]) + "\n", encoding="utf-8")
        return got

    monkeypatch.setattr(corpus_fit, "fit_corpus", edited_during_the_pass)
    code, _, err = _distill(tiny_model_dir, tmp_path / "a", corpus, "--dims", 8, "--spans", "none")
    assert code == 0, err
    lines = [line for line in err.splitlines() if "warning:" in line]
    assert len(lines) == 1 and "changed while the pass read it" in lines[0], err
    assert not list((tmp_path / "isotropy-cache" / "teacher" / "sums").glob("*/entry.json"))
    monkeypatch.setattr(corpus_fit, "fit_corpus", real)
    code, _, err = _distill(tiny_model_dir, tmp_path / "b", corpus, "--dims", 8, "--spans", "none")
    assert code == 0 and "warning" not in err and _note(tmp_path / "b") != SUMS, err  # gathered, now kept
    assert len(list((tmp_path / "isotropy-cache" / "teacher" / "sums").glob("*/entry.json"))) == 1
