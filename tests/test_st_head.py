"""sentence-transformers folders with a Dense head after the pooling (LaBSE, distiluse, GTR-style models).

The encoder applies the head with sentence-transformers' own Dense modules to the model's own
pooling, so ``Encoder(folder).encode`` is ``SentenceTransformer(folder).encode`` (before a trailing
Normalize); a folder ``isotropy calibrate`` writes keeps the head before the calibration.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from helpers import SENTENCES, assert_same_geometry, word_corpus
from isotropy.encoders import Encoder
from isotropy.errors import IsotropyError


def _unit(X: np.ndarray) -> np.ndarray:
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def head_folder(tiny_model_dir, tmp_path_factory):
    """The tiny DistilBERT + Pooling(mean) + Dense(32 -> 16, tanh) + Normalize, saved by sentence-transformers."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    torch.manual_seed(1)
    modules = [Transformer(str(tiny_model_dir), max_seq_length=32), Pooling(32, pooling_mode="mean"), Dense(32, 16), Normalize()]
    folder = tmp_path_factory.mktemp("st-head") / "model"
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    return folder


@pytest.fixture(scope="module")
def head_encoder(head_folder):
    return Encoder(head_folder, device="cpu")


def test_the_encoder_applies_the_head_as_sentence_transformers_does(head_folder, head_encoder):
    from sentence_transformers import SentenceTransformer

    assert head_encoder.pooling == "last-avg" and head_encoder.dim == 16 and head_encoder.record()["dim"] == 16
    ours = head_encoder.encode(SENTENCES)
    theirs = SentenceTransformer(str(head_folder), device="cpu").encode(SENTENCES)
    assert ours.shape == (len(SENTENCES), 16)
    assert not np.allclose(np.linalg.norm(ours, axis=1), 1.0)  # the vectors before the trailing Normalize
    np.testing.assert_allclose(_unit(ours), theirs, atol=1e-5)


def test_another_pooling_cannot_feed_the_head(head_folder, head_encoder):
    with pytest.raises(IsotropyError, match="Dense head trained on its own pooling 'last-avg'") as info:
        Encoder(head_folder, pooling="cls", device="cpu")
    assert "\n" not in str(info.value)
    with pytest.raises(IsotropyError, match="pooling 'first-last-avg' cannot feed it"):
        head_encoder.encode_multi(SENTENCES, ["last-avg", "first-last-avg"])
    from isotropy.selection.pooling_choice import offered_poolings

    assert offered_poolings(head_encoder) == ["last-avg"]  # --pooling auto offers only what the head takes


def test_a_head_on_a_pooling_isotropy_does_not_compute_is_refused(head_folder, tmp_path):
    import json

    other = tmp_path / "other"
    shutil.copytree(head_folder, other)
    (other / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 32, "pooling_mode": "max"}))
    for pooling in (None, "last-avg"):
        with pytest.raises(IsotropyError, match="Dense head trained on its own pooling, which isotropy does not compute"):
            Encoder(other, pooling=pooling, device="cpu")


def test_the_fingerprint_covers_the_head_weights(head_folder, head_encoder, tmp_path):
    from safetensors.torch import load_file, save_file

    other = tmp_path / "other"
    shutil.copytree(head_folder, other)
    weights = load_file(other / "2_Dense" / "model.safetensors")
    weights["linear.weight"][0, 0] += 0.01
    save_file(weights, other / "2_Dense" / "model.safetensors")
    changed = Encoder(other, device="cpu")
    assert changed.fingerprint() != head_encoder.fingerprint()
    assert Encoder(head_folder, device="cpu").fingerprint() == head_encoder.fingerprint()


def test_a_head_without_safetensors_weights_is_refused(head_folder, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(head_folder, other)
    (other / "2_Dense" / "model.safetensors").rename(other / "2_Dense" / "pytorch_model.bin")
    with pytest.raises(IsotropyError, match="2_Dense has no model.safetensors"):
        Encoder(other, device="cpu")


def test_a_folder_with_isotropys_modules_keeps_the_head(head_encoder):
    from isotropy.integrations import build_sentence_transformer

    model = build_sentence_transformer(head_encoder, stock=False, device="cpu")
    assert [type(m).__name__ for m in model] == ["Transformer", "IsotropyPooling", "Dense"]
    np.testing.assert_allclose(model.encode(SENTENCES), head_encoder.encode(SENTENCES), atol=1e-5)


def test_a_module_before_the_pooling_is_refused(head_folder, tmp_path):
    import json

    other = tmp_path / "other"
    shutil.copytree(head_folder, other)
    modules = json.loads((other / "modules.json").read_text())
    modules.insert(1, {**modules[2], "idx": 9})  # a Dense between the Transformer and the Pooling
    (other / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(IsotropyError, match=r"does not apply \(Dense \(2_Dense\)\)"):
        Encoder(other, device="cpu")


def test_calibrating_keeps_the_head_before_the_calibration(head_folder, head_encoder, tmp_path):
    from sentence_transformers import SentenceTransformer

    from isotropy.calibration import run_calibration

    out = tmp_path / "calibrated"
    c = run_calibration(word_corpus(120), out, model=head_folder, method="whitening", show_progress=False)
    assert c.transform.n_features_in_ == 16
    st = SentenceTransformer(str(out), device="cpu")
    assert [type(m).__name__ for m in st] == ["Transformer", "Pooling", "Dense", "Dense", "Dense"]
    want = c.transform.transform(head_encoder.encode(SENTENCES))
    assert_same_geometry(st.encode(SENTENCES), want, rtol=1e-4)
    assert_same_geometry(Encoder(out, device="cpu").encode(SENTENCES), want, rtol=1e-4)  # its Dense modules: a head too


def test_the_onnx_graph_applies_the_head(head_encoder):
    """The module export_onnx hands torch's exporter (the export itself: test_onnx.py, and the slow test below)."""
    import torch

    from isotropy.integrations.onnx_export import _graph_module

    batch = head_encoder.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        got = _graph_module(head_encoder, None)(batch["input_ids"], batch["attention_mask"]).numpy()
    np.testing.assert_allclose(got, head_encoder.encode(SENTENCES), atol=1e-5)


@pytest.mark.slow  # torch's ONNX exporter takes seconds even on the tiny model
def test_the_onnx_export_applies_the_head(head_encoder, tmp_path):
    pytest.importorskip("onnxruntime")
    from isotropy.integrations import export_onnx

    out = export_onnx(tmp_path / "onnx", encoder=head_encoder, show_progress=False)
    onnx = Encoder(out, backend="onnx")
    assert onnx.dim == 16
    np.testing.assert_allclose(onnx.encode(SENTENCES), head_encoder.encode(SENTENCES), atol=1e-5)
