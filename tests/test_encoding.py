import numpy as np
import pytest
import torch

from isotropy import Encoder, IsotropyError
from isotropy.encoding import default_model_path

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
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(IsotropyError) as err:
        Encoder("some-org/some-model-that-is-not-cached")
    msg = str(err.value)
    assert "unreachable" in msg and "local model folder" in msg and "\n" not in msg


def test_missing_local_folder_and_unknown_pooling():
    with pytest.raises(IsotropyError, match="does not exist"):
        Encoder("./no/such/folder")
    with pytest.raises(IsotropyError, match="valid poolings"):
        Encoder(pooling="max")
