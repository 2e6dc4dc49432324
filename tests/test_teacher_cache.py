"""The distill's teacher cache (issue #43): sealed, verified chunks of the teacher's vectors of the corpus, so a
rerun with other settings encodes nothing again and a killed run resumes (isotropy.distill.teacher_vectors)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli

pytest.importorskip("model2vec")

CORPUS = [
    f"the {a} {b} sat on the {c} mat"  # 8 words: every fitting line gives spans
    for a in ("red", "big", "old")
    for b in ("cat", "dog", "bird")
    for c in ("blue", "new", "soft", "flat")
]
CHUNK = 5  # 36 lines: 8 chunks, the last of one line
CHUNKS = -(-len(CORPUS) // CHUNK)


@pytest.fixture(scope="module")
def tiny_static():
    """A model2vec StaticModel over the default model's tokenizer with a random 16-d table (distill's token pass
    is not what is tested here)."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    from isotropy.encoders import default_model_path

    tok = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    rng = np.random.default_rng(0)
    table = rng.standard_normal((tok.get_vocab_size(), 16)) @ rng.standard_normal((16, 16)) + 3.0
    return StaticModel(table.astype(np.float32), tok, normalize=True)


@pytest.fixture(scope="module")
def teacher(tiny_model_dir):
    from isotropy.encoders import Encoder

    return Encoder(tiny_model_dir)


@pytest.fixture(autouse=True)
def _small(monkeypatch, tmp_path):
    import isotropy.distill.corpus_fit as fit_mod

    monkeypatch.setattr(fit_mod, "CHUNK", CHUNK)
    monkeypatch.setattr(fit_mod, "PART", 2 * CHUNK)
    monkeypatch.setenv("ISOTROPY_CACHE", str(tmp_path / "isotropy-cache"))


_ORIGINAL: dict = {}


class Calls:
    """Counts the teacher's encode calls (one per chunk that needs encoding); ``fail_after``: raise ``exc`` on the
    call after that many."""

    def __init__(self, monkeypatch, fail_after: int | None = None, exc: BaseException = KeyboardInterrupt()) -> None:
        from isotropy.encoders import Encoder

        self.n, self.texts = 0, 0
        original = _ORIGINAL.setdefault("encode", Encoder.encode)  # the real one, not an earlier Calls' wrapper

        def encode(enc, sentences, *args, **kwargs):
            if fail_after is not None and self.n >= fail_after:
                raise exc
            self.n += 1
            self.texts += len(sentences)
            return original(enc, sentences, *args, **kwargs)

        monkeypatch.setattr(Encoder, "encode", encode)


def _fit(static, teacher, corpus, cache, spans=True, **kw):
    from isotropy.distill.corpus_fit import fit_corpus
    from isotropy.encoders.cache import VectorCache

    cache = None if cache is None else VectorCache(cache)
    return fit_corpus(static, teacher, corpus, spans=spans, show_progress=False, cache=cache, **kw)


def _same(a, b, rtol=1e-12):
    """Two passes' statistics agree (the cache serves the float32 vectors the teacher gave)."""
    assert (a.sentences, a.spans, a.fit.n_, a.held.n_) == (b.sentences, b.spans, b.fit.n_, b.held.n_)
    np.testing.assert_allclose(a.teacher_map.moments_.scatter, b.teacher_map.moments_.scatter, rtol=rtol, atol=1e-12)
    for x, y in ((a.fit, b.fit), (a.held, b.held)):
        np.testing.assert_allclose(x.cross_, y.cross_, rtol=rtol, atol=1e-12)
        np.testing.assert_allclose(x.yy_, y.yy_, rtol=rtol)


def _entry(directory: Path, teacher, texts) -> Path:
    """The .npy of the entry that holds ``texts``'s vectors."""
    from isotropy.distill.teacher_vectors import TeacherVectors
    from isotropy.encoders.cache import VectorCache

    base = TeacherVectors(teacher, VectorCache(directory)).base
    return VectorCache(directory).paths(VectorCache.key(**base, sentences=list(texts)))[0]


def _chunks(corpus):
    return [corpus[i : i + CHUNK] for i in range(0, len(corpus), CHUNK)]


# --------------------------------------------------------------------------- reruns through the command line


def _distill(tiny_model_dir, out, corpus_file, *args):
    return run_cli(["distill", "-m", tiny_model_dir, "-o", out, "--corpus", corpus_file, *map(str, args)])


def _table(folder: Path) -> np.ndarray:
    from model2vec import StaticModel

    return np.asarray(StaticModel.from_pretrained(str(folder)).embedding, dtype=np.float64)


def test_a_rerun_with_other_fit_settings_encodes_nothing_and_fits_what_an_uncached_run_fits(
    tiny_static, tiny_model_dir, tmp_path, monkeypatch
):
    import isotropy.distill.run as mod

    monkeypatch.setattr(mod, "distill_static", lambda model, dims, show: __import__("copy").deepcopy(tiny_static))
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    calls = Calls(monkeypatch)
    code, _, err = _distill(tiny_model_dir, tmp_path / "a", corpus, "--dims", 16)  # the default cache folder
    assert code == 0, err
    assert calls.n == CHUNKS and len(list((tmp_path / "isotropy-cache" / "teacher").glob("*.npy"))) == 2 * CHUNKS
    info = json.loads((tmp_path / "a" / "isotropy.json").read_text())["distill"]["corpus_fit"]
    assert info["teacher_cache"] == f"cached chunks used: 0 of {CHUNKS}"
    sums = "the corpus pass's sums read from the cache (no chunk read or encoded)"  # the same sums: sums_cache.py
    for args, note in (
        (["--dims", 8], sums),
        (["--dims", 8, "--lam", 2.5], sums),
        (["--dims", 0, "--fit", "map", "--alpha", 0.5], f"cached chunks used: {CHUNKS} of {CHUNKS}"),  # other sums
        (["--dims", 0, "--fit", "map", "--alpha", 2.0], sums),  # the ridge acts after the pass
        (["--dims", 16, "--strength-by", "mse"], sums),
    ):
        calls.n = 0
        code, _, err = _distill(tiny_model_dir, tmp_path / "b", corpus, *args)
        assert code == 0 and calls.n == 0, (args, err)
        info = json.loads((tmp_path / "b" / "isotropy.json").read_text())["distill"]["corpus_fit"]
        assert info["teacher_cache"] == note, args
        assert "isotropy-cache" not in (tmp_path / "b" / "isotropy.json").read_text()  # no path recorded
    assert sums in (tmp_path / "b" / "README.md").read_text()
    code, _, err = _distill(tiny_model_dir, tmp_path / "b", corpus, "--dims", 8, "--lam", 2.5)
    assert code == 0, err
    calls.n = 0
    code, _, err = _distill(tiny_model_dir, tmp_path / "fresh", corpus, "--dims", 8, "--lam", 2.5, "--no-teacher-cache")
    assert code == 0 and calls.n == CHUNKS, err
    info = json.loads((tmp_path / "fresh" / "isotropy.json").read_text())["distill"]["corpus_fit"]
    assert info["teacher_cache"] == "off"
    np.testing.assert_allclose(_table(tmp_path / "b"), _table(tmp_path / "fresh"), rtol=1e-6, atol=1e-6)
    # other spans: the lines' vectors are kept, only the span texts are encoded
    calls.n = calls.texts = 0
    code, _, err = _distill(tiny_model_dir, tmp_path / "b", corpus, "--dims", 8, "--spans", "halves")
    assert code == 0, err
    info = json.loads((tmp_path / "b" / "isotropy.json").read_text())["distill"]["corpus_fit"]
    spans = int(info["spans"].split()[0])
    assert calls.texts == spans and 0 < calls.n < CHUNKS + 1
    assert info["teacher_cache"] == f"cached chunks used: 0 of {CHUNKS} (and the lines of {CHUNKS} more; their spans encoded)"


def test_teacher_cache_options_are_checked_before_any_work(tiny_model_dir, tmp_path):
    (tmp_path / "c.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    (tmp_path / "a-file").write_text("not a folder")
    for args, says in (
        (["--corpus", tmp_path / "c.txt", "--teacher-cache", tmp_path / "x", "--no-teacher-cache"], "contradict"),
        (["--corpus", tmp_path / "c.txt", "--teacher-cache", tmp_path / "a-file"], "is not a folder"),
        (["--corpus", tmp_path / "c.txt", "--teacher-cache", " "], "must be a folder"),
        (["--teacher-cache", tmp_path / "x"], "give --corpus"),
    ):
        code, _, err = run_cli(["distill", "-m", tiny_model_dir, "-o", tmp_path / "out", "--dims", "16", *args])
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "out").exists() and not (tmp_path / "x").exists()


def test_a_terminated_distill_resumes_encoding_only_the_chunks_it_had_not_sealed(
    tiny_static, tiny_model_dir, tmp_path, monkeypatch
):
    import isotropy.distill.run as mod
    from isotropy.errors import Terminated

    monkeypatch.setattr(mod, "distill_static", lambda model, dims, show: __import__("copy").deepcopy(tiny_static))
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    Calls(monkeypatch, fail_after=3, exc=Terminated(signal.SIGTERM))  # SIGTERM while the 4th chunk is encoded
    code, _, err = _distill(tiny_model_dir, tmp_path / "a", corpus, "--dims", 16, "--teacher-cache", tmp_path / "tc")
    assert code == 143 and "no partial output" in err and not (tmp_path / "a").exists()
    assert len(list((tmp_path / "tc").glob("*.json"))) == 2 * 3  # lines and spans of 3 chunks, sealed
    calls = Calls(monkeypatch)
    code, _, err = _distill(tiny_model_dir, tmp_path / "a", corpus, "--dims", 16, "--teacher-cache", tmp_path / "tc")
    assert code == 0 and calls.n == CHUNKS - 3, err
    info = json.loads((tmp_path / "a" / "isotropy.json").read_text())["distill"]["corpus_fit"]
    assert info["teacher_cache"] == f"cached chunks used: 3 of {CHUNKS}"


# --------------------------------------------------------------------------- the pass itself


def test_an_interrupted_pass_resumes_and_gives_the_uncached_statistics(tiny_static, teacher, tmp_path, monkeypatch):
    fresh = _fit(tiny_static, teacher, CORPUS, None)
    Calls(monkeypatch, fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        _fit(tiny_static, teacher, CORPUS, tmp_path / "tc")
    calls = Calls(monkeypatch)
    again = _fit(tiny_static, teacher, CORPUS, tmp_path / "tc")
    assert calls.n == CHUNKS - 2 and (again.chunks, again.cached) == (CHUNKS, 2)
    _same(again, fresh)
    calls.n = 0
    third = _fit(tiny_static, teacher, CORPUS, tmp_path / "tc")
    assert calls.n == 0 and third.cached == CHUNKS
    _same(third, fresh)


def test_a_killed_process_loses_at_most_the_chunk_it_was_encoding(tiny_static, teacher, tiny_model_dir, tmp_path, monkeypatch):
    """SIGKILL (no cleanup at all) while the third chunk is encoded: the two sealed chunks are read back."""
    marker, corpus = tmp_path / "encoding-chunk-3", tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        import numpy as np
        import isotropy.distill.corpus_fit as fit_mod
        from model2vec import StaticModel
        from tokenizers import Tokenizer
        from isotropy.encoders import Encoder, default_model_path
        from isotropy.encoders.cache import VectorCache

        fit_mod.CHUNK = {CHUNK}
        tok = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
        static = StaticModel(np.zeros((tok.get_vocab_size(), 4), np.float32) + 1, tok, normalize=True)
        teacher, calls, original = Encoder({str(tiny_model_dir)!r}), [0], Encoder.encode

        def encode(self, texts, *a, **k):
            calls[0] += 1
            if calls[0] == 3:
                Path({str(marker)!r}).write_text("now")
                while True:
                    time.sleep(0.05)
            return original(self, texts, *a, **k)

        Encoder.encode = encode
        fit_mod.fit_corpus(static, teacher, {str(corpus)!r}, spans=True, show_progress=False,
                           cache=VectorCache({str(tmp_path / "tc")!r}))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"), *sys.path])}
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE)
    try:
        for _ in range(6000):  # synchronised on the marker; the bound only stops a broken child hanging the suite
            if marker.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert marker.exists(), child.stderr.read().decode() if child.poll() is not None else "no marker"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
        child.stderr.close()
    calls = Calls(monkeypatch)
    again = _fit(tiny_static, teacher, str(corpus), tmp_path / "tc")
    assert calls.n == CHUNKS - 2 and again.cached == 2
    _same(again, _fit(tiny_static, teacher, CORPUS, None))


def test_a_corpus_changed_after_a_killed_run_is_never_mixed_with_its_vectors(tiny_static, teacher, tmp_path, monkeypatch):
    Calls(monkeypatch, fail_after=4)
    with pytest.raises(KeyboardInterrupt):
        _fit(tiny_static, teacher, CORPUS, tmp_path / "tc")  # chunks 1-4 sealed
    changed = list(CORPUS)
    changed[7] = "the red cat sat on the warm flat mat"  # in chunk 2, sealed
    changed[31] = "a dog that is new"  # in chunk 7, never encoded
    calls = Calls(monkeypatch)
    again = _fit(tiny_static, teacher, changed, tmp_path / "tc")
    assert calls.n == 1 + (CHUNKS - 4) and again.cached == 3
    _same(again, _fit(tiny_static, teacher, changed, None))
    calls.n = 0  # and the first corpus's vectors are still its own: only its chunk 7 was never sealed
    back = _fit(tiny_static, teacher, CORPUS, tmp_path / "tc")
    assert calls.n == 1 and back.cached == CHUNKS - 1
    _same(back, _fit(tiny_static, teacher, CORPUS, None))


@pytest.mark.parametrize(
    "damage, reason",
    [
        ("flip", "its bytes differ from the digest recorded"),
        ("truncate", "its bytes differ from the digest recorded"),
        ("delete", "its vectors file is missing"),
        ("key", "cannot be read"),
    ],
)
def test_a_damaged_chunk_is_encoded_again_with_one_warning_naming_it(
    tiny_static, teacher, tmp_path, monkeypatch, capsys, damage, reason
):
    _fit(tiny_static, teacher, CORPUS, tmp_path / "tc", spans=False)
    npy = _entry(tmp_path / "tc", teacher, _chunks(CORPUS)[2])
    if damage == "flip":
        data = bytearray(npy.read_bytes())
        data[-7] ^= 0x10  # a byte of the vectors, the header intact
        npy.write_bytes(bytes(data))
    elif damage == "truncate":
        npy.write_bytes(npy.read_bytes()[:-40])
    elif damage == "delete":
        npy.unlink()
    else:
        npy.with_suffix(".json").write_text('{"key": ')
    capsys.readouterr()
    calls = Calls(monkeypatch)
    again = _fit(tiny_static, teacher, CORPUS, tmp_path / "tc", spans=False)
    err = capsys.readouterr().err
    assert calls.n == 1 and again.cached == CHUNKS - 1
    assert len(err.strip().splitlines()) == 1 and str(npy) in err and reason in err and "sentences 11..15" in err, err
    _same(again, _fit(tiny_static, teacher, CORPUS, None, spans=False))
    calls.n = 0  # rewritten: the next run reads it
    assert _fit(tiny_static, teacher, CORPUS, tmp_path / "tc", spans=False).cached == CHUNKS and calls.n == 0


@pytest.mark.parametrize("fails", ["vectors", "key file", "folder"])
def test_a_cache_that_cannot_be_written_gives_one_warning_and_the_run_goes_on(
    tiny_static, teacher, tmp_path, monkeypatch, capsys, fails
):
    import isotropy.encoders.cache as cache_mod

    where = tmp_path / "tc"
    writes = {"n": 0}
    if fails == "folder":
        (tmp_path / "a-file").write_text("x")
        where = tmp_path / "a-file" / "tc"  # its parent is a file: the folder cannot be made
    else:
        target = "save_npy" if fails == "vectors" else "atomic_file"
        original = getattr(cache_mod, target)

        def full(*args, **kwargs):
            writes["n"] += 1
            if writes["n"] > 2:  # the third write on: the disk is full
                raise OSError(errno.ENOSPC, "No space left on device")
            return original(*args, **kwargs)

        monkeypatch.setattr(cache_mod, target, full)
    capsys.readouterr()
    got = _fit(tiny_static, teacher, CORPUS, where, spans=False)
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "cannot write the teacher cache" in err and "goes on without" in err, err
    assert got.chunks == CHUNKS
    _same(got, _fit(tiny_static, teacher, CORPUS, None, spans=False))
    monkeypatch.undo()  # the disk has room again
    monkeypatch.setenv("ISOTROPY_CACHE", str(tmp_path / "isotropy-cache"))
    monkeypatch.setattr("isotropy.distill.corpus_fit.CHUNK", CHUNK)
    if fails == "folder":
        return
    calls = Calls(monkeypatch)
    again = _fit(tiny_static, teacher, CORPUS, where, spans=False)
    assert again.cached == 2 and calls.n == CHUNKS - 2 and not capsys.readouterr().err  # nothing half-written served
    _same(again, got)


def test_the_progress_bar_counts_every_line_once_whether_encoded_or_read(teacher, tmp_path):
    from isotropy.distill.teacher_vectors import TeacherVectors
    from isotropy.encoders.cache import VectorCache

    class Bar:
        done = 0.0

        def advance(self, steps=1, description=None):
            self.done += steps

    vectors, lines, spans = TeacherVectors(teacher, VectorCache(tmp_path / "tc")), CORPUS[:7], ["red cat", "a mat"]
    for want in ("encoded", "cached"):
        bar = Bar()
        Y, how = vectors(lines, spans, 0, bar)
        assert how == want and Y.shape == (len(lines) + len(spans), teacher.dim)
        assert bar.done == pytest.approx(len(lines))
    np.testing.assert_array_equal(Y, teacher.encode(lines + spans))


def test_a_teacher_without_a_fingerprint_is_never_cached(tiny_static, tmp_path):
    class Plain:
        def encode(self, sentences, show_progress=None):
            return np.random.default_rng(len(sentences)).standard_normal((len(sentences), 8))

    got = _fit(tiny_static, Plain(), CORPUS, tmp_path / "tc")
    assert got.cached == 0 and not (tmp_path / "tc").exists()


def test_a_dask_pass_uses_the_same_cache_so_its_rerun_encodes_nothing(
    tiny_static, tiny_model_dir, teacher, tmp_path, monkeypatch
):
    distributed = pytest.importorskip("distributed")
    from isotropy.distributed.spec import EncoderSpec

    spec = EncoderSpec(model=str(tiny_model_dir)).resolve()
    calls = Calls(monkeypatch)
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=":0") as client:
        first = _fit(tiny_static, spec, CORPUS, tmp_path / "tc", engine="dask", address=client)
        assert calls.n == CHUNKS and first.cached == 0
        calls.n = 0
        again = _fit(tiny_static, spec, CORPUS, tmp_path / "tc", engine="dask", address=client)
        assert calls.n == 0 and (again.chunks, again.cached) == (CHUNKS, CHUNKS)
    one = _fit(tiny_static, teacher, CORPUS, tmp_path / "tc")  # one process reads the workers' entries: same keys
    assert calls.n == 0 and one.cached == CHUNKS
    _same(again, first)
    _same(one, first, rtol=1e-9)
