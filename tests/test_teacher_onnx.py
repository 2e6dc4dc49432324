"""``isotropy distill --teacher-onnx DIR`` (issue #43): the corpus read by an ONNX export of the model being distilled,
checked to be one, cached under its own graph's fingerprint, recorded in the folder's card."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import run_cli

pytest.importorskip("model2vec")
pytest.importorskip("onnxruntime")

CORPUS = [f"the {a} {b} sat on the {c} mat" for a in ("red", "big", "old") for b in ("cat", "dog") for c in ("blue", "new")]


@pytest.fixture(scope="module")
def export(tiny_model_dir, tmp_path_factory):
    """A float32 ONNX export of the tiny model."""
    from isotropy.encoders import Encoder
    from isotropy.integrations.onnx_export import export_onnx

    folder = tmp_path_factory.mktemp("teacher-onnx") / "fp32"
    export_onnx(folder, encoder=Encoder(tiny_model_dir), show_progress=False)
    return folder


def _distill(model, out, corpus, cache, *args):
    return run_cli(["distill", "-m", model, "-o", out, "--corpus", corpus, "--teacher-cache", cache, *map(str, args)])


def test_the_export_gives_the_statistics_the_model_gives_under_its_own_cache_key(tiny_model_dir, export, tmp_path):
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    from isotropy.distill.corpus_fit import fit_corpus
    from isotropy.distill.teacher import corpus_teacher, model_fingerprint
    from isotropy.distill.teacher_vectors import TeacherVectors
    from isotropy.encoders.cache import VectorCache

    tok = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    table = np.random.default_rng(0).standard_normal((tok.get_vocab_size(), 8)).astype(np.float32)
    static = StaticModel(table, tok, normalize=False)
    model, onnx = corpus_teacher(tiny_model_dir), corpus_teacher(tiny_model_dir, export)
    assert onnx.record()["backend"] == "onnx" and model.record()["backend"] == "torch"
    a, b = (fit_corpus(static, t, CORPUS, tokens=True, spans=False, show_progress=False) for t in (model, onnx))
    # the same weights in another runtime: float32 rounding apart, the same sums
    scale = np.abs(a.fit.cross_).max()
    np.testing.assert_allclose(b.fit.cross_, a.fit.cross_, rtol=1e-4, atol=1e-4 * scale)
    np.testing.assert_allclose(b.teacher_map.moments_.mean, a.teacher_map.moments_.mean, rtol=1e-4, atol=1e-5)
    # cached under the graph's fingerprint: neither run ever reads the other's chunks
    cache = VectorCache(tmp_path / "cache")
    assert TeacherVectors(model, cache).base["fingerprint"] != TeacherVectors(onnx, cache).base["fingerprint"]
    # model2vec's table of the model (the vocabulary pass) is the same whichever reads the corpus: one cache key
    assert model_fingerprint(onnx) == model_fingerprint(model) == model.fingerprint()


def test_a_distill_through_the_export_says_so_in_its_card(tiny_model_dir, export, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    code, _, err = _distill(
        tiny_model_dir,
        tmp_path / "out",
        corpus,
        tmp_path / "cache",
        "--dims",
        16,
        "--spans",
        "none",
        "--no-progress",
        "--teacher-onnx",
        export,
    )
    assert code == 0, err
    record = json.loads((tmp_path / "out" / "isotropy.json").read_text())["distill"]
    assert record["corpus_teacher"].startswith("ONNX model.onnx of model") and str(export) not in record["corpus_teacher"]
    assert record["corpus_fit"]["teacher_cache"] == "cached chunks used: 0 of 1"


def test_a_missing_export_is_refused_before_any_work(tiny_model_dir, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    r = _distill(
        tiny_model_dir, tmp_path / "out", corpus, tmp_path / "cache", "--dims", 16, "--teacher-onnx", tmp_path / "nothing"
    )
    code, _, err = r
    assert code == 2
    assert err.startswith("error: --teacher-onnx") and "not a folder" in err, err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_an_export_of_other_weights_or_settings_is_refused(export):
    from isotropy.distill.teacher import _check_export
    from isotropy.errors import IsotropyError

    cfg = json.loads((export / "isotropy_onnx.json").read_text())
    want = {"fingerprint": "0" * 32, "model_name": "other", "pooling": cfg["pooling"], "max_length": cfg["max_length"]}
    with pytest.raises(IsotropyError, match="exported from other weights"):
        _check_export(export, cfg, want)
    same = {**want, "fingerprint": cfg["fingerprint"]}
    with pytest.raises(IsotropyError, match="calibration in its graph"):
        _check_export(export, {**cfg, "transform": {"describe": "whitening"}}, same)
    with pytest.raises(IsotropyError, match="its max_length is 16"):
        _check_export(export, {**cfg, "max_length": 16}, same)
    with pytest.raises(IsotropyError, match="its pooling is cls"):
        _check_export(export, {**cfg, "pooling": "cls"}, same)
    _check_export(export, cfg, same)  # the export itself passes


def test_teacher_onnx_needs_a_corpus(export, tmp_path):
    r = run_cli(["distill", "-o", tmp_path / "out", "--teacher-onnx", export])
    assert r[0] == 2 and "--teacher-onnx encodes --corpus" in r[2], r[2]


@pytest.mark.parametrize("through", ["model", "export"])
def test_the_workers_spec_is_read_off_the_teacher_and_the_client_keeps_no_model(tiny_model_dir, export, through):
    """``--engine dask``: the client resolves the workers' spec from the teacher it built (no second load, nothing
    kept in the client's encoder cache), so dropping the teacher frees its model; the spec is the one a fresh load pins."""
    import gc
    import weakref

    from isotropy.distill.teacher import BATCH_TOKENS, corpus_teacher, teacher_spec
    from isotropy.distributed import workers
    from isotropy.distributed.spec import EncoderSpec

    workers._ENCODERS.clear()
    teacher = corpus_teacher(tiny_model_dir, None if through == "model" else export)
    assert teacher.batch_tokens == BATCH_TOKENS  # batches by padded tokens (distill/teacher.py)
    model = weakref.ref(teacher.runtime.model)
    spec = teacher_spec(tiny_model_dir, teacher)
    assert workers._ENCODERS == {}  # no copy of the model kept on the client
    del teacher
    gc.collect()
    assert model() is None  # the client's only copy is gone with the teacher
    fresh = EncoderSpec(model=str(export) if through == "export" else str(tiny_model_dir), backend=spec.backend).resolve()
    workers._ENCODERS.clear()
    assert spec.backend == ("torch" if through == "model" else "onnx")
    assert spec.batch_tokens == BATCH_TOKENS and spec.build().batch_tokens == BATCH_TOKENS  # the workers batch alike
    for name in ("model", "pooling", "max_length", "fingerprint", "dim", "verify"):
        assert getattr(spec, name) == getattr(fresh, name), name


@pytest.mark.parametrize("through", ["model", "export"])
def test_the_teacher_is_freed_before_the_solve(tiny_model_dir, export, tmp_path, monkeypatch, through):
    """distill lends the teacher to the corpus fit (distill/teacher.py ``Lent``), which drops it after the pass: the
    model (or the onnxruntime session and its arena) is gone when the pass's sums are written to the cache and when
    the solve starts, the two other peaks of a large run."""
    import gc
    import weakref

    from isotropy.distill import corpus_fit, run, sums_cache

    built, seen = [], []

    def teacher(model, onnx=None):
        got = run_teacher(model, onnx)
        built.append(weakref.ref(got.runtime.model))
        return got

    def solve(*args, **kwargs):
        gc.collect()
        seen.append([ref() is None for ref in built])
        return real_solve(*args, **kwargs)

    def put(*args, **kwargs):  # the sums written to the cache: the pass's arrays beside what it leaves
        gc.collect()
        kept.append([ref() is None for ref in built])
        return real_put(*args, **kwargs)

    run_teacher, real_solve, real_put, kept = run.corpus_teacher, corpus_fit.solve_tokens, sums_cache.SumsCache.put, []
    monkeypatch.setattr(run, "corpus_teacher", teacher)
    monkeypatch.setattr(corpus_fit, "solve_tokens", solve)
    monkeypatch.setattr(sums_cache.SumsCache, "put", put)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    onnx = None if through == "model" else export
    for _ in range(2):  # the pass, then the sums read from the cache: a teacher built and dropped either way
        run.distill(tmp_path / "out", tiny_model_dir, corpus=corpus, teacher_cache=tmp_path / "cache", teacher_onnx=onnx,
                    spans="none", dims=8, force=True, show_progress=False)  # fmt: skip
    assert len(built) == 2 and seen == [[True], [True, True]] and kept == [[True]]
