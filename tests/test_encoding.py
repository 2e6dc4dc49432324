import numpy as np
import pytest
import torch

from isotropy import Encoder, IsotropyError
from isotropy.encoders import default_model_path

SENTENCES = [
    "A man is playing a guitar.",
    "",
    "   ",
    "The quick brown fox jumps over the lazy dog near the riverbank while the sun sets.",
    "Un homme joue de la guitare.",
    "short",
    " ".join(["word"] * 400),  # longer than the model's 256 tokens: truncated
    "Emoji 🙂 and accents: café, naïve.",
]


def test_default_model_shape_dtype_and_pooling(encoder):
    assert encoder.pooling == "last-avg"  # from the model's own sentence-transformers config
    assert encoder.max_length == 256  # sentence_bert_config.json
    assert encoder.dim == 384
    out = encoder.encode(SENTENCES)
    assert out.shape == (len(SENTENCES), 384) and out.dtype == np.float32
    assert np.isfinite(out).all()


def test_matches_sentence_transformers_mean_pooling(encoder):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(default_model_path()), device="cpu")
    # The default folder's modules are Transformer -> Pooling(mean) -> Normalize. The Normalize
    # module runs even with normalize_embeddings=False, so compare against the first two modules.
    unnormalised = SentenceTransformer(modules=[st[0], st[1]], device="cpu")
    theirs = unnormalised.encode(SENTENCES, normalize_embeddings=False, batch_size=3)
    ours = encoder.encode(SENTENCES)
    assert np.abs(ours - theirs).max() < 1e-5
    normalised = st.encode(SENTENCES)
    assert np.abs(ours / np.linalg.norm(ours, axis=1, keepdims=True) - normalised).max() < 1e-5


def test_input_order_and_batching_do_not_change_vectors(encoder):
    full = encoder.encode(SENTENCES)
    rev = encoder.encode(SENTENCES[::-1])[::-1]
    single = np.vstack([encoder.encode([s]) for s in SENTENCES])
    assert np.abs(full - rev).max() < 1e-5
    assert np.abs(full - single).max() < 1e-5  # padding never counts


def test_encode_multi_equals_separate_encoders(encoder):
    names = ["cls", "pooler", "first-last-avg", "embed-last-avg", "last2-avg", "layers-avg:0,3,-1"]
    multi = encoder.encode_multi(SENTENCES[:4], names)
    for name in names:
        one = encoder.encode_multi(SENTENCES[:4], [name])[name]
        assert np.abs(multi[name] - one).max() < 1e-5, name


def test_poolings_match_a_manual_forward_pass(encoder):
    tok = encoder.tokenizer(["A man is playing a guitar."], return_tensors="pt")
    with torch.inference_mode():
        out = encoder.model(**tok, output_hidden_states=True)
    hs = out.hidden_states
    got = encoder.encode_multi(["A man is playing a guitar."], ["cls", "first-last-avg", "embed-last-avg", "last2-avg", "pooler"])
    np.testing.assert_allclose(got["cls"][0], hs[-1][0, 0].numpy(), atol=1e-5)
    np.testing.assert_allclose(got["first-last-avg"][0], ((hs[1][0].mean(0) + hs[-1][0].mean(0)) / 2).numpy(), atol=1e-5)
    np.testing.assert_allclose(got["embed-last-avg"][0], ((hs[0][0].mean(0) + hs[-1][0].mean(0)) / 2).numpy(), atol=1e-5)
    np.testing.assert_allclose(got["last2-avg"][0], ((hs[-2][0].mean(0) + hs[-1][0].mean(0)) / 2).numpy(), atol=1e-5)
    np.testing.assert_allclose(got["pooler"][0], out.pooler_output[0].numpy(), atol=1e-5)


def test_long_lines_are_truncated_to_max_length():
    enc = Encoder(max_length=16)
    long = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
    ids = enc.tokenizer(long, truncation=True, max_length=16)["input_ids"]
    truncated_text = enc.tokenizer.decode(ids[1:-1])
    np.testing.assert_allclose(enc.encode([long]), enc.encode([truncated_text]), atol=1e-5)


def test_max_length_beyond_the_model_is_refused():
    with pytest.raises(IsotropyError, match="positions"):
        Encoder(max_length=4096)


def test_local_folder_without_sentence_transformers_config(tiny_model_dir):
    enc = Encoder(str(tiny_model_dir))
    assert enc.pooling == "first-last-avg"  # no pooling config: the papers' default
    assert enc.max_length == 128
    assert enc.encode(["hello", "world"]).shape == (2, 32)
    with pytest.raises(IsotropyError, match="no pooler"):
        Encoder(str(tiny_model_dir), pooling="pooler")


def test_fingerprint_identifies_the_weights(encoder, tiny_model_dir):
    again = Encoder(pooling="cls", max_length=32)
    assert encoder.fingerprint() == again.fingerprint()
    assert encoder.fingerprint() != Encoder(str(tiny_model_dir)).fingerprint()


def test_unreachable_hub_is_one_clear_line(monkeypatch):
    from huggingface_hub import constants

    # huggingface_hub reads HF_HUB_OFFLINE and HF_ENDPOINT once, at import: set its constants
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(IsotropyError) as err:
        Encoder("some-org/some-model-that-is-not-cached")
    msg = str(err.value)
    assert "unreachable" in msg and "local model folder" in msg and "\n" not in msg


def test_missing_local_folder_and_unknown_pooling():
    with pytest.raises(IsotropyError, match="does not exist"):
        Encoder("./no/such/folder")
    with pytest.raises(IsotropyError, match="valid poolings"):
        Encoder(pooling="max")


# --------------------------------------------------------------------------- model folders that would encode wrong vectors


def _copy_model(src, dst, edit=None):
    """A copy of a model folder; ``edit(state dict) -> state dict`` rewrites its model.safetensors."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    if edit is not None:
        state = edit(load_file(dst / "model.safetensors"))
        save_file({k: v.contiguous().clone() for k, v in state.items()}, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


@pytest.fixture(scope="module")
def tiny_bert_dirs(tmp_path_factory):
    """Tiny random BERT checkpoints as pre-training code saves them: with the heads AutoModel never
    builds (``cls.predictions.*``, ``cls.seq_relationship.*``), and an MLM one without the pooler."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertForPreTraining

    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    out = {}
    for name, cls in (("pretraining", BertForPreTraining), ("mlm", BertForMaskedLM)):
        folder = tmp_path_factory.mktemp(f"tiny-bert-{name}")
        torch.manual_seed(0)
        cls(config).save_pretrained(folder)
        tok.save_pretrained(folder)
        out[name] = folder
    return out


def test_embedded_and_test_models_load_without_missing_or_extra_tensors(encoder, tiny_model_dir):
    from transformers import AutoModel

    # position_ids is a buffer, not a weight: transformers before 5.4 (which model2vec[distill], in the test
    # extra, pins) lists the embedded checkpoint's copy of it as unexpected; every weight must still match
    buffers = {"embeddings.position_ids"}
    for folder in (default_model_path(), tiny_model_dir):
        _, info = AutoModel.from_pretrained(str(folder), output_loading_info=True)
        info["unexpected_keys"] = set(info["unexpected_keys"]) - buffers
        assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), (folder, info)
    assert encoder.runtime.missing_pooler == [] and Encoder(str(tiny_model_dir)).runtime.missing_pooler == []


def test_missing_weight_tensors_are_named(tiny_model_dir, tmp_path):
    def drop(state):
        return {
            k: v for k, v in state.items() if not k.startswith("transformer.layer.1.ffn.") and k != "embeddings.LayerNorm.bias"
        }

    folder = _copy_model(tiny_model_dir, tmp_path / "m", drop)
    with pytest.raises(IsotropyError) as err:
        Encoder(str(folder))
    msg = str(err.value)
    assert "\n" not in msg and str(folder) in msg and "lack 5 tensors" in msg and "and 2 more" in msg, msg
    assert "embeddings.LayerNorm.bias" in msg and "random" in msg and "save the model again" in msg


def test_extra_tensors_of_the_base_model_mean_the_config_does_not_match(tiny_model_dir, tmp_path):
    import json

    folder = _copy_model(tiny_model_dir, tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["n_layers"] = 1  # the weights hold 2 layers
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(IsotropyError, match=r"hold 16 tensors of the model's own layers .*transformer\.layer\.1\.") as err:
        Encoder(str(folder))
    assert "config.json" in str(err.value) and "\n" not in str(err.value)


def test_shape_mismatch_is_named(tiny_model_dir, tmp_path):
    def shrink(state):
        state["transformer.layer.1.ffn.lin1.weight"] = torch.zeros(3, 3)
        return state

    folder = _copy_model(tiny_model_dir, tmp_path / "m", shrink)
    with pytest.raises(IsotropyError, match=r"transformer\.layer\.1\.ffn\.lin1\.weight 3x3 in the weights, 64x32 in the model"):
        Encoder(str(folder))


def test_unused_heads_are_silent_and_a_missing_pooler_only_matters_to_pooling_pooler(tiny_bert_dirs):
    # cls.predictions.* / cls.seq_relationship.*: heads AutoModel never builds, normal in BERT checkpoints
    full = Encoder(str(tiny_bert_dirs["pretraining"]), pooling="pooler")
    assert full.encode(["a cat"]).shape == (1, 32)
    # an MLM checkpoint has no pooler: transformers would fill it with random values
    mlm = str(tiny_bert_dirs["mlm"])
    enc = Encoder(mlm, pooling="cls")
    assert enc.runtime.missing_pooler == ["pooler.dense.bias", "pooler.dense.weight"]
    assert enc.encode(["a cat"]).shape == (1, 32)
    assert enc.fingerprint() == Encoder(mlm).fingerprint()  # the random pooler is no part of the identity
    for call in (lambda: Encoder(mlm, pooling="pooler"), lambda: enc.encode_multi(["a cat"], ["cls", "pooler"])):
        with pytest.raises(
            IsotropyError, match=r"lack its pooler layer \(pooler\.dense\.bias, pooler\.dense\.weight\).*use 'cls'"
        ):
            call()


def test_truncated_empty_and_incomplete_model_folders(tiny_model_dir, tmp_path):
    folder = _copy_model(tiny_model_dir, tmp_path / "trunc")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(IsotropyError, match=rf"{weights} is truncated or corrupt .*save the model again") as err:
        Encoder(str(folder))
    assert "\n" not in str(err.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(IsotropyError) as err:
        Encoder(str(tmp_path / "empty"))
    assert str(err.value) == (
        f"model folder {tmp_path / 'empty'} is empty; pass a folder written by save_pretrained "
        "(config.json, weights, tokenizer files) or a model id"
    )
    folder = _copy_model(tiny_model_dir, tmp_path / "noconfig")
    (folder / "config.json").unlink()
    with pytest.raises(IsotropyError, match=r"has no config\.json, so it is not a Hugging Face model folder"):
        Encoder(str(folder))
    # without tokenizer files transformers builds an empty tokenizer: every word would be [UNK]
    folder = _copy_model(tiny_model_dir, tmp_path / "notok")
    for p in folder.iterdir():
        if p.name.startswith(("tokenizer", "vocab", "special_tokens")):
            p.unlink()
    with pytest.raises(IsotropyError, match=r"has no tokenizer files .*knows no word"):
        Encoder(str(folder))


@pytest.mark.parametrize(
    "bad, match",
    [
        (None, "sentences must be a string or a list of strings, got None"),
        (3, "got int"),
        (b"a cat", r"got bytes \(decode them to str first\)"),
        ({"a cat", "a dog"}, "a set has no order"),
        (["a cat", 7], "sentence 1 is a int, not a string"),
    ],
)
def test_encode_rejects_what_is_not_a_list_of_strings(encoder, bad, match):
    with pytest.raises(IsotropyError, match=match) as err:
        encoder.encode(bad)
    assert "\n" not in str(err.value)
