"""One typed request for an index build (issue #44): :class:`isotropy.search.IndexSpec`.

* the CLI's ``index build`` and the Python API build the same spec, and the builders take it whole;
* ``kind`` is checked once (a bad one is one line, before the model loads);
* the Dask build honours ``--pooling-stats`` and ``--batch-size`` and applies the index's own apply path, so
  one process and the cluster answer the same queries with the same neighbours;
* the old import paths (``isotropy.files.index``, ``.index_scale``, ``.index_shards``) still answer.

Small on purpose: the embedded glove-6b-50d (static, no forward pass) where the encoder does not matter, the
suite's tiny random DistilBERT with ``sif`` pooling where the token frequencies do.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings

import numpy as np
import pytest

from helpers import run_cli, word_corpus
from isotropy.errors import IsotropyError
from isotropy.search import Index, IndexCalibration, IndexSpec


class _Stop(Exception):
    """Raised by the patched Index.from_spec: the spec a build reached, once every option was checked."""


@pytest.fixture
def caught(monkeypatch):
    """Index.from_spec patched to record the spec it is given and stop the build there."""
    seen: list[IndexSpec] = []

    def fake(cls, encoder, transform, spec):
        seen.append(spec)
        raise _Stop

    monkeypatch.setattr(Index, "from_spec", classmethod(fake))
    return seen


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"{s} {i}\n" for i, s in enumerate(word_corpus(40))), encoding="utf-8")
    return path


def test_cli_and_python_build_the_same_spec(caught, corpus, tmp_path):
    cli = ["index", "build", corpus, "-o", tmp_path / "a", "--model", "glove-6b-50d", "--kind", "hnsw", "--hnsw-m", "16"]
    cli += ["--ef-search", "32", "--whiten", "8", "--power", "0.5", "--batch-size", "7", "--nprobe", "4", "--force"]
    with pytest.raises(_Stop):
        run_cli(cli)
    from isotropy.search.build import build_index

    kw = dict(model="glove-6b-50d", kind="hnsw", m=16, ef_search=32, whiten=8, power=0.5, batch_size=7, nprobe=4, force=True)
    with pytest.raises(_Stop):
        build_index(corpus, tmp_path / "b", **kw)  # an old keyword call: one spec made at the top
    cli_spec, python_spec = caught
    assert cli_spec == python_spec == IndexSpec.from_keywords(**kw)
    assert python_spec.calibration == IndexCalibration(whiten=8, power=0.5)
    assert python_spec.params["m"] == 16 and python_spec.batch_size == 7
    with pytest.raises(_Stop):
        build_index(corpus, tmp_path / "c", python_spec)  # the spec itself, as the CLI passes it
    assert caught[-1] is python_spec
    with pytest.raises(IsotropyError, match="not both"):
        build_index(corpus, tmp_path / "d", python_spec, kind="flat")
    with pytest.raises(TypeError, match="bogus_option"):
        build_index(corpus, tmp_path / "e", bogus_option=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        python_spec.kind = "flat"


def test_kind_checked_once_with_a_clear_line(monkeypatch, corpus, tmp_path):
    import isotropy.search.index as index_module
    import isotropy.search.spec as spec_module

    calls: list[str] = []
    real = spec_module.check_params

    def counted(kind, **params):
        calls.append(kind)
        return real(kind, **params)

    monkeypatch.setattr(spec_module, "check_params", counted)
    monkeypatch.setattr(index_module, "check_params", counted)  # Index(...) by hand: not on the build's path
    from isotropy.search.build import build_index

    index = build_index(corpus, tmp_path / "idx", model="glove-6b-50d", kind="hnsw", no_whiten=True)
    assert calls == ["hnsw"] and index.kind == "hnsw" and len(index) == 40
    code, _, err = run_cli(["index", "build", corpus, "-o", tmp_path / "bad", "--kind", "bogus", "--model", "no/such-model"])
    assert code == 2 and err == "error: unknown index kind 'bogus'; valid kinds: flat, hnsw, ivf, ivfpq, opq\n"
    assert not (tmp_path / "bad").exists()
    with pytest.raises(IsotropyError, match="--engine dask builds the compressed kinds"):
        IndexSpec(kind="hnsw", engine="dask")
    assert IndexSpec(engine="dask").kind == "ivfpq" and IndexSpec().kind == "flat"
    with pytest.raises(IsotropyError, match="--bytes-per-vector and --keep-vectors apply to --kind ivfpq or opq, not flat"):
        IndexSpec(bytes_per_vector=8)
    with pytest.raises(IsotropyError, match="choose one of --whiten/--power, --no-whiten"):
        IndexSpec(calibration=IndexCalibration(whiten=8, no_whiten=True))
    with pytest.raises(IsotropyError, match="--candidates applies to --method auto only"):
        IndexCalibration(candidates="raw")


def _tiny_sif_corpus(tmp_path, n: int = 300) -> tuple:
    corpus = tmp_path / "corpus.txt"
    sentences = [f"{s} {i}" for i, s in enumerate(word_corpus(n, seed=3))]
    corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return corpus, sentences


def test_dask_build_honours_pooling_stats_and_batch_size(tiny_model_dir, tmp_path):
    distributed = pytest.importorskip("distributed")
    from isotropy.encoders import Encoder
    from isotropy.search.build import build_index
    from isotropy.search.build_dask import build_index_dask

    corpus, sentences = _tiny_sif_corpus(tmp_path)
    n = len(sentences)
    # the shards: the corpus's sif vectors, weighted by the corpus's own token frequencies (--pooling-stats)
    raw = Encoder(str(tiny_model_dir), pooling="sif", pooling_stats=str(corpus)).encode(sentences)
    (tmp_path / "vecs").mkdir()
    for i, part in enumerate(np.array_split(raw, 2)):
        np.save(tmp_path / "vecs" / f"p{i}.npy", part)
    spec = IndexSpec(
        kind="ivfpq",
        bytes_per_vector=4,
        nlist=2,
        nprobe=2,
        keep_vectors=True,
        rerank=n,  # every row re-scored with the exact vectors: the answers are the calibrated cosines
        calibration=IndexCalibration(whiten=16, power=0.5),
        model=str(tiny_model_dir),
        pooling="sif",
        pooling_stats=str(corpus),
        batch_size=128,  # not the default 64: the Dask index's encoder must take it too
    )
    one = build_index(corpus, tmp_path / "one", spec)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0") as client:
        on_cluster, report = build_index_dask(
            corpus, tmp_path / "vecs", tmp_path / "dask", dataclasses.replace(spec, engine="dask"), address=client
        )
    assert [r["status"] for r in report] == ["added", "added"]
    assert on_cluster.encoder.batch_size == one.encoder.batch_size == 128
    assert on_cluster.encoder.pooling_stats is not None
    assert on_cluster.encoder.record() == one.encoder.record()  # the token frequencies' identity included
    # the same calibrated, normalised vectors: the one apply path, on the workers too
    np.testing.assert_allclose(np.asarray(on_cluster._exact), np.asarray(one._exact), rtol=1e-4, atol=1e-5)
    queries = sentences[:12] + ["cat dog table", "a house by the sea"]
    a = Index.load(tmp_path / "one", rerank=n).search(queries, 5)
    b = Index.load(tmp_path / "dask", rerank=n).search(queries, 5)
    assert a.ids[:, 0].tolist()[:12] == list(range(12))  # each corpus sentence finds itself first
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-4)


def test_dask_engine_refuses_what_it_cannot_do(tmp_path):
    with pytest.raises(IsotropyError, match="--method auto is not available with --engine dask"):
        IndexSpec(engine="dask", calibration=IndexCalibration(method="auto"))
    from isotropy.search.build import build_index

    with pytest.raises(IsotropyError, match="build_index_dask"):
        build_index(["a b", "c d"], tmp_path / "x", IndexSpec(engine="dask"))


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("isotropy.files.index", "isotropy.search.build", "build_index"),
        ("isotropy.files.index", "isotropy.search.build", "default_whitening"),
        ("isotropy.files.index_scale", "isotropy.search.build_dask", "build_index_dask"),
        ("isotropy.files.index_shards", "isotropy.search.shards", "WORK_MARKER"),
    ],
)
def test_old_import_paths_still_answer(old, new, name):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"moved to {new}.{name}"):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


def test_package_names_keep_their_place_without_a_warning():
    import isotropy
    import isotropy.files
    import isotropy.search.build as build

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert isotropy.files.build_index is build.build_index is isotropy.build_index
        assert isotropy.files.build_auto_index is build.build_auto_index
        assert isotropy.IndexSpec is IndexSpec


def test_the_index_calibration_is_one_method_of_the_grammar():
    """--whiten/--power, --no-whiten and --method auto are read as the one method grammar's Method; a bad --power is
    the method table's one line, when the spec is made."""
    from isotropy.errors import IsotropyError
    from isotropy.search import IndexCalibration
    from isotropy.search.build import default_whitening
    from isotropy.search.spec import DEFAULT_WHITEN_K, DEFAULT_WHITEN_POWER
    from isotropy.transforms.methods import Method

    default = IndexCalibration().as_method(50)
    assert isinstance(default, Method) and default.kind == "whitening"
    assert default.n_components == 50 and default.power == DEFAULT_WHITEN_POWER  # capped at the encoder's dims
    assert IndexCalibration().as_method().n_components == DEFAULT_WHITEN_K
    asked = IndexCalibration(whiten=16, power=0.25).as_method(384)
    assert (asked.n_components, asked.power, asked.options["shrinkage"]) == (16, 0.25, "auto")
    assert IndexCalibration(no_whiten=True).as_method().kind == "raw"
    assert IndexCalibration(method="auto").as_method().kind == "auto"
    assert IndexCalibration(transform="some/folder").as_method() is None
    built = asked.build()
    assert (built.n_components, built.power, built.shrinkage) == (16, 0.25, "auto")
    same = default_whitening(384, 16, 0.25)
    assert type(same) is type(built) and same.get_params() == built.get_params()
    with pytest.raises(IsotropyError, match="--power"):
        IndexCalibration(power=2.0)
