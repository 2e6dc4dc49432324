"""ONNX export (encoder + pooling + transform in one graph) and the onnxruntime Encoder backend."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import word_corpus
from isotropy.cli import main
from isotropy.encoders import Encoder
from isotropy.encoders.backends.onnx import CONFIG_NAME, GRAPH_NAME, OnnxBackend
from isotropy.errors import IsotropyError
from isotropy.integrations import export_onnx
from isotropy.transforms.flow import Flow
from isotropy.transforms.whitening import Whitening

SENTENCES = [
    "A man is playing a guitar.",
    "Two dogs run through a field of tall green grass near the river, barking at the birds overhead.",
    "hi",
    "",
    "Stocks fell sharply on Monday after the report.",
    "The cat sat on the mat.",
]


corpus = word_corpus


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    enc = Encoder(tiny_model_dir, pooling="first-last-avg", max_length=32, device="cpu")
    X = enc.encode(corpus(150))
    return enc, X


@pytest.fixture(scope="module")
def whitening_export(tiny, tmp_path_factory):
    """The tiny model, first-last-avg, with a fitted whitening, exported through the CLI."""
    enc, X = tiny
    w = Whitening(n_components=16, shrinkage="auto").fit(X)
    folder = tmp_path_factory.mktemp("onnx")
    w.save(folder / "w")
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "export",
                "onnx",
                "-o",
                str(folder / "exp"),
                "--model",
                str(enc.folder),
                "--pooling",
                "first-last-avg",
                "--max-length",
                "32",
                "--transform",
                str(folder / "w"),
                "--no-progress",
            ]
        )
    assert exit_info.value.code in (0, None)
    return folder / "exp", w


def test_export_layout_and_fp32_equals_torch(tiny, whitening_export):
    enc, _ = tiny
    folder, w = whitening_export
    assert (folder / GRAPH_NAME).is_file() and (folder / "tokenizer.json").is_file()
    cfg = json.loads((folder / CONFIG_NAME).read_text())
    assert cfg["pooling"] == "first-last-avg" and cfg["max_length"] == 32 and cfg["dim"] == 16
    assert cfg["transform"]["kind"] == "whitening" and cfg["quantize"] is None
    onnx_enc = Encoder(folder, backend="onnx", batch_size=4)  # several batches, sorted by length
    assert isinstance(onnx_enc.runtime, OnnxBackend) and isinstance(onnx_enc, Encoder) and onnx_enc.dim == 16
    assert onnx_enc.backend == "onnx"
    got = onnx_enc.encode(SENTENCES)
    want = w.transform(enc.encode(SENTENCES))
    assert got.dtype == np.float32 and got.shape == (len(SENTENCES), 16)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
    # the graph file itself is accepted too; order of rows follows the input
    again = Encoder(folder / GRAPH_NAME, backend="onnx").encode(SENTENCES[::-1])
    np.testing.assert_allclose(again[::-1], got, atol=1e-5, rtol=0)
    assert Encoder(folder, backend="onnx").encode([]).shape == (0, 16)
    assert "whitening" in onnx_enc.describe() and len(onnx_enc.fingerprint()) == 32


def test_onnx_graph_has_dynamic_axes(whitening_export):
    import onnx

    model = onnx.load(str(whitening_export[0] / GRAPH_NAME))
    for inp in model.graph.input:
        dims = inp.type.tensor_type.shape.dim
        assert len(dims) == 2 and all(d.dim_param and not d.dim_value for d in dims), inp
    assert [i.name for i in model.graph.input][:2] == ["input_ids", "attention_mask"]
    assert [o.name for o in model.graph.output] == ["sentence_embedding"]


def test_flow_export_equals_torch(tiny, tmp_path):
    enc, X = tiny
    flow = Flow(levels=2, depth=1, hidden=8, batch_size=32, epochs=2, seed=0).fit(X)
    export_onnx(tmp_path / "exp", encoder=enc, transform=flow)
    got = Encoder(tmp_path / "exp", backend="onnx").encode(SENTENCES)
    np.testing.assert_allclose(got, flow.transform(enc.encode(SENTENCES)), atol=1e-4, rtol=0)


def test_index_on_onnx_export_saves_and_reloads(whitening_export, tmp_path):
    """An Index over an ONNX export records its backend: reloaded, it encodes queries on onnxruntime again."""
    from isotropy.search import Index

    folder, _ = whitening_export
    docs = corpus(40, seed=7) + [s for s in SENTENCES if s]
    queries = ["a man plays guitar", "dogs near the river", "stock report"]
    index = Index(Encoder(folder, backend="onnx"), transform=None).add(docs)
    before = index.search(queries, k=5)
    index.save(tmp_path / "index")
    loaded = Index.load(tmp_path / "index")
    assert loaded.encoder.backend == "onnx" and isinstance(loaded.encoder.runtime, OnnxBackend)
    assert len(loaded) == len(docs)
    after = loaded.search(queries, k=5)
    assert after.ids.tolist() == before.ids.tolist()
    np.testing.assert_allclose(after.scores, before.scores, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_int8_default_model_close_to_fp32(encoder, tmp_path):
    """int8 (default model, last-avg, raw): the export runs and stays close to float32 torch."""
    export_onnx(tmp_path / "q", pooling="last-avg", max_length=64, quantize="int8")
    q = Encoder(tmp_path / "q", backend="onnx")
    assert json.loads((tmp_path / "q" / CONFIG_NAME).read_text())["quantize"] == "int8"
    sents = [s for s in SENTENCES if s] + corpus(20, seed=5)
    a, b = q.encode(sents), Encoder(max_length=64).encode(sents)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    # Very short sentences ("hi") average few tokens, so they keep the most int8 noise.
    assert cos.mean() > 0.99 and cos.min() > 0.97, cos
    assert (tmp_path / "q" / GRAPH_NAME).stat().st_size < 65e6  # float32: ~90 MB (47 MB of it word embeddings)


def test_bad_input(tiny, tmp_path, whitening_export):
    enc, _ = tiny
    w_big = Whitening().fit(np.random.default_rng(0).normal(size=(60, 48)))
    with pytest.raises(IsotropyError, match=r"fitted on 48-dimensional vectors.*gives 32"):
        export_onnx(tmp_path / "x", encoder=enc, transform=w_big)
    assert not (tmp_path / "x").exists()
    w_big.save(tmp_path / "wb")
    with pytest.raises(SystemExit) as exit_info:  # the CLI prints the one line and exits 2
        main(["export", "onnx", "-o", str(tmp_path / "x"), "--model", str(enc.folder), "--transform", str(tmp_path / "wb")])
    assert exit_info.value.code == 2
    with pytest.raises(IsotropyError, match="unknown quantization 'int4'"):
        export_onnx(tmp_path / "x", encoder=enc, quantize="int4")
    with pytest.raises(IsotropyError, match="not fitted"):
        export_onnx(tmp_path / "x", encoder=enc, transform=Whitening())
    folder, _ = whitening_export
    with pytest.raises(IsotropyError, match="computes pooling 'first-last-avg' only; 'cls' needs its own export"):
        Encoder(folder, backend="onnx", pooling="cls")
    with pytest.raises(IsotropyError, match="pooling 'first-last-avg' only"):
        Encoder(folder, backend="onnx").encode_multi(["a"], ["cls"])
    with pytest.raises(IsotropyError, match="not written by `isotropy export onnx`"):
        Encoder(enc.folder, backend="onnx")
    with pytest.raises(IsotropyError, match="needs model="):
        Encoder(backend="onnx")
    with pytest.raises(IsotropyError, match="backend must be one of torch, onnx"):
        Encoder(backend="tensorrt")
    with pytest.raises(IsotropyError, match="max_length 100000 exceeds the 128 positions"):
        Encoder(folder, backend="onnx", max_length=100000)


# --------------------------------------------------------------------------- exports that would encode wrong vectors


def _tampered(export, tmp_path, edit):
    import shutil

    folder = tmp_path / "exp"
    shutil.copytree(export, folder)
    edit(folder)
    return folder


def _edit_config(**changes):
    def edit(folder):
        cfg = json.loads((folder / CONFIG_NAME).read_text())
        cfg.update(changes)
        (folder / CONFIG_NAME).write_text(json.dumps(cfg))

    return edit


def _swap_two_tokens(folder):
    path = folder / "tokenizer.json"
    tok = json.loads(path.read_text())
    vocab = tok["model"]["vocab"]
    vocab["cat"], vocab["dog"] = vocab["dog"], vocab["cat"]
    path.write_text(json.dumps(tok))


def test_export_records_its_tokenizer_and_graph_settings(whitening_export):
    import onnx

    folder, _ = whitening_export
    cfg = json.loads((folder / CONFIG_NAME).read_text())
    assert set(cfg["tokenizer_files"]) == {p.name for p in folder.iterdir() if p.name not in (GRAPH_NAME, CONFIG_NAME)}
    assert "tokenizer.json" in cfg["tokenizer_files"]
    meta = {p.key: json.loads(p.value) for p in onnx.load(str(folder / GRAPH_NAME), load_external_data=False).metadata_props}
    assert meta["isotropy.position_limit"] == cfg["position_limit"] == 128
    assert meta["isotropy.pooling"] == "first-last-avg" and meta["isotropy.dim"] == 16
    assert meta["isotropy.tokenizer_files"] == cfg["tokenizer_files"]


@pytest.mark.parametrize(
    "name, edit, match",
    [
        (
            "tokenizer.json removed",
            lambda f: (f / "tokenizer.json").unlink(),
            r"tokenizer\.json is missing: it was exported with the graph",
        ),
        ("tokenizer.json swapped", _swap_two_tokens, r"tokenizer\.json is not the file exported with the graph"),
        ("vocab.txt added", lambda f: (f / "vocab.txt").write_text("[PAD]\n[UNK]\n"), r"vocab\.txt was added after the export"),
        (
            "max_length beyond the positions",
            _edit_config(max_length=1000),
            r"max_length 1000 exceeds the 128 positions of the graph in model\.onnx",
        ),
        (
            "position limit edited too",
            _edit_config(max_length=1000, position_limit=1000),
            r"says position_limit 1000, but model\.onnx was exported with 128",
        ),
        (
            "pooling edited",
            _edit_config(pooling="cls"),
            r"says pooling 'cls', but model\.onnx was exported with 'first-last-avg'",
        ),
        (
            "digests dropped from the JSON",
            _edit_config(tokenizer_files=None),
            r"records other tokenizer files than model\.onnx was exported with",
        ),
    ],
)
def test_tampered_export_fails_on_load(whitening_export, tmp_path, name, edit, match):
    folder = _tampered(whitening_export[0], tmp_path, edit)
    with pytest.raises(IsotropyError, match=match) as err:
        Encoder(folder, backend="onnx")
    assert "\n" not in str(err.value) and str(folder) in str(err.value), name


def test_export_without_records_still_loads(whitening_export, tmp_path):
    """An export written before digests and graph metadata were recorded skips those checks."""
    import onnx

    def strip(folder):
        cfg = json.loads((folder / CONFIG_NAME).read_text())
        del cfg["tokenizer_files"]
        (folder / CONFIG_NAME).write_text(json.dumps(cfg))
        model = onnx.load(str(folder / GRAPH_NAME), load_external_data=False)
        del model.metadata_props[:]
        onnx.save(model, str(folder / GRAPH_NAME))

    folder, _ = whitening_export
    old = _tampered(folder, tmp_path, strip)
    np.testing.assert_array_equal(
        Encoder(old, backend="onnx").encode(SENTENCES), Encoder(folder, backend="onnx").encode(SENTENCES)
    )
    # its max_length is still checked against the JSON's own position limit
    _edit_config(max_length=129)(old)
    with pytest.raises(IsotropyError, match="max_length 129 exceeds the 128 positions"):
        Encoder(old, backend="onnx")


def test_a_graph_composed_on_the_token_states_graph_gives_the_encoders_vectors(tiny_model_dir, tmp_path):
    """calibrate's path: the transformer exported once (sentence-transformers' token-states graph), isotropy's graph
    that graph followed by the pooling (sif: it reads the token ids too) and the whitening. calibrate --onnx runs it
    on cls pooling (tests/test_calibrate.py, test_onnx_graphs_match_the_torch_folder) and in int8 on the default model
    (test_real_model_onnx_and_int8: the same vectors as sentence-transformers' int8 graph followed by the pooling)."""
    from isotropy.integrations.onnx_export import composable
    from isotropy.integrations.st_onnx import export_token_states

    (tmp_path / "c.txt").write_text("\n".join(corpus(60)) + "\n", encoding="utf-8")
    enc = Encoder(tiny_model_dir, pooling="sif", max_length=32, pooling_stats=tmp_path / "c.txt")
    w = Whitening(n_components=8, shrinkage="auto").fit(enc.encode(corpus(150)))
    (tmp_path / "st").mkdir()
    [token_states] = export_token_states(enc, tmp_path / "st")
    out = export_onnx(tmp_path / "composed", encoder=enc, transform=w, show_progress=False, token_states=token_states)
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporary left
    got = Encoder(out, backend="onnx").encode(SENTENCES)
    np.testing.assert_allclose(got, w.transform(enc.encode(SENTENCES)), atol=1e-4, rtol=0)
    with pytest.raises(IsotropyError, match="is not the int8 token-states graph"):  # int8 asked, float32 given
        export_onnx(tmp_path / "x", encoder=enc, transform=w, quantize="int8", show_progress=False, token_states=token_states)
    assert not (tmp_path / "x").exists()
    # a pooling that reads more than the last layer's token states (other layers, the pooler) is exported whole
    assert composable("last-avg") and composable("cls") and not composable("first-last-avg") and not composable("pooler")


@pytest.mark.parametrize(
    "env, threads, want",
    [("1", None, 1), ("3", None, 3), ("1", 2, 2), ("", None, 0), ("0", None, 0), ("two", None, 0)],
)
def test_the_session_threads_follow_omp_num_threads_unless_given(whitening_export, monkeypatch, env, threads, want):
    """A Dask worker (OMP_NUM_THREADS=1 from its nanny) gets a one-thread session, not one thread per core; an
    explicit ``threads`` wins; unset or not a positive number: onnxruntime's own default (0 in its options)."""
    folder, _ = whitening_export
    monkeypatch.setenv("OMP_NUM_THREADS", env)
    enc = Encoder(folder, backend="onnx", threads=threads)
    assert enc.runtime.model.get_session_options().intra_op_num_threads == want
    monkeypatch.delenv("OMP_NUM_THREADS")
    np.testing.assert_allclose(enc.encode(SENTENCES), Encoder(folder, backend="onnx").encode(SENTENCES), atol=1e-5)
