"""The poolings of issue #14: sif and idf (token frequencies), prompt and prompt-denoised (PromptBERT), ditto.

Each is checked against a computation written out here from the papers' code (research notes
in the module docs of isotropy.encoders.poolings.*), through the Encoder, through the
sentence-transformers and ONNX exports, and in the artefacts that record an encoder.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import data_dir, run_cli, spearman_cos, tiny_bert
from isotropy import IsotropyError
from isotropy.encoders import Encoder, default_model_path, parse_pooling
from isotropy.encoders.poolings import POOLINGS, pool
from isotropy.encoders.poolings.prompt import DEFAULT_TEMPLATE, prompt_layout
from isotropy.encoders.token_stats import TokenFrequencies

WORDS = "cat dog market river guitar rain city child music storm bread train field house doctor the a of".split()
SENTENCES = [
    "A man is playing a guitar.",
    "The cat sat on the mat, quietly.",
    "",
    "hi",
    "Two dogs run through a field of tall green grass near the river.",
    "A literal [MASK] token in a sentence does not move the template's.",
]
CORPUS = [f"the {w} of the {v} and a {w}." for w in WORDS for v in WORDS[:6]]


def words(n: int, seed: int = 0) -> str:
    return " ".join(np.random.default_rng(seed).choice(WORDS, size=n))


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    """A tiny random BERT (2 layers, 4 heads, 32 dims) with the default model's tokenizer."""
    return tiny_bert(tmp_path_factory.mktemp("tiny-bert") / "bert")


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(default_model_path()))


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "name, canonical, kind",
    [
        ("sif", "sif", "weighted"),
        ("sif:a=1e-3", "sif", "weighted"),
        ("sif:a=0.0003,norm=weights", "sif:a=0.0003,norm=weights", "weighted"),
        ("idf", "idf", "weighted"),
        ("idf:norm=none", "idf:norm=none", "weighted"),
        ("prompt", "prompt", "prompt"),
        (f"prompt:{DEFAULT_TEMPLATE}", "prompt", "prompt"),
        ("PromptBERT", "prompt", "prompt"),
        ('prompt:This sentence of "[X]" means [MASK].', 'prompt:This sentence of "[X]" means [MASK].', "prompt"),
        ("prompt_denoised", "prompt-denoised", "prompt"),
        ("ditto", "ditto", "ditto"),
        ("ditto:layer=0,head=9", "ditto", "ditto"),
        ("ditto:layer=2,head=6", "ditto:layer=2,head=6", "ditto"),
    ],
)
def test_names_are_canonical(name, canonical, kind):
    p = parse_pooling(name)
    assert (p.name, p.kind) == (canonical, kind)
    assert parse_pooling(p.name) == p  # the canonical name reads back as the same pooling


@pytest.mark.parametrize(
    "bad, match",
    [
        ("prompt:This sentence means [MASK] .", r"no \[X\]"),
        ("prompt:[X] and [X] mean [MASK]", r"\[X\] more than once"),
        ('prompt:This sentence : "[X]" .', r"no \[MASK\]"),
        ("prompt-denoised:[X] [MASK] [MASK]", "more than one"),
        ("sif:a=0", "positive"),
        ("sif:b=1", "not an option"),
        ("sif:norm=mean", "norm must be one of"),
        ("ditto:head=-1", "head must be 0 or more"),
        ("ditto:layer=x", "not a valid int"),
    ],
)
def test_bad_pooling_options_are_one_line(bad, match):
    with pytest.raises(IsotropyError, match=match) as err:
        parse_pooling(bad)
    assert "\n" not in str(err.value)


def test_new_poolings_are_listed():
    for name in ("sif", "idf", "prompt", "prompt-denoised", "ditto"):
        assert any(p.startswith(name) for p in POOLINGS)


# --------------------------------------------------------------------------- sif and idf


def test_token_frequencies_count_and_weight_as_documented(tokenizer):
    stats = TokenFrequencies.fit(tokenizer, ["the cat", "the the dog", ""], model_name="m")
    the, cat, dog, unseen = tokenizer.convert_tokens_to_ids(["the", "cat", "dog", "river"])
    assert stats.counts[the] == 3 and stats.counts[cat] == 1 and stats.counts.sum() == 5
    assert stats.doc_counts[the] == 2 and stats.doc_counts[dog] == 1 and stats.n_sentences == 3
    w = stats.weights("sif", a=1e-3, tokenizer=tokenizer)
    np.testing.assert_allclose(w[the], 1e-3 / (1e-3 + 3 / 5), rtol=1e-6)  # a / (a + p(w))
    assert w[unseen] == 1.0  # p = 0: weight 1, as SIF gives words absent from its frequency file
    assert all(w[i] == 0 for i in tokenizer.all_special_ids if i != tokenizer.unk_token_id)
    idf = stats.weights("idf", tokenizer=tokenizer)
    np.testing.assert_allclose(idf[the], np.log(4 / 3) + 1, rtol=1e-6)  # log((1 + N) / (1 + df)) + 1
    np.testing.assert_allclose(idf[unseen], np.log(4) + 1, rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 50), min_size=3, max_size=12),
    st.floats(1e-5, 1e-1),
    st.sampled_from(["tokens", "weights", "none"]),
    st.integers(0, 2**16),
)
def test_sif_vector_divides_as_documented(counts, a, norm, seed):
    """sum_i w_i h_i over the non-special tokens, divided by their number (SIF's code), the sum of
    the weights, or nothing; padding never counts; a row of special tokens only is their average."""
    from isotropy.encoders.poolings.weighted import FrequencyWeighted

    vocab = len(counts)
    counts = np.array(counts)
    counts[0] = 0
    p = counts / max(counts.sum(), 1)
    table = (a / (a + p)).astype(np.float32)
    table[0] = 0.0  # id 0 plays the special token
    rng = np.random.default_rng(seed)
    ids = torch.tensor(rng.integers(0, vocab, size=(3, 6)))
    ids[2] = 0  # a row of special tokens only
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]])
    h = torch.tensor(rng.standard_normal((3, 6, 4)), dtype=torch.float32)
    got = pool(FrequencyWeighted("sif", a, norm), (h,), mask, input_ids=ids, state={"weights": torch.from_numpy(table)})
    for r in range(2):
        keep = [i for i in range(6) if mask[r, i] and table[ids[r, i]] > 0]
        w = torch.tensor([float(table[ids[r, i]]) for i in keep])
        total = (h[r, keep] * w[:, None]).sum(0)
        z = {"tokens": max(len(keep), 1), "weights": float(w.sum()) or 1.0, "none": 1.0}[norm]
        if not keep:
            total, z = h[r, mask[r].bool()].sum(0), {"tokens": int(mask[r].sum()), "weights": int(mask[r].sum()), "none": 1}[norm]
        torch.testing.assert_close(got[r], total / z, rtol=1e-5, atol=1e-5)
    empty = h[2, :2].sum(0) / (1 if norm == "none" else 2)
    torch.testing.assert_close(got[2], empty, rtol=1e-5, atol=1e-5)


def test_encoder_sif_equals_a_manual_weighted_average(encoder_with_stats):
    enc = encoder_with_stats
    got = enc.encode(SENTENCES[:2])
    table = enc.pooling_stats.weights("sif", 1e-3, enc.tokenizer)
    batch = enc.tokenizer(SENTENCES[:2], padding=True, truncation=True, max_length=enc.max_length, return_tensors="pt")
    with torch.inference_mode():
        last = enc.model(**batch).last_hidden_state.numpy()
    for r in range(2):
        ids = batch["input_ids"][r][batch["attention_mask"][r].bool()].numpy()
        w = table[ids]
        want = (last[r, : len(ids)] * w[:, None]).sum(0) / np.count_nonzero(w)
        np.testing.assert_allclose(got[r], want, rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def encoder_with_stats():
    return Encoder(pooling="sif", max_length=64).fit_pooling(CORPUS)


def test_token_frequencies_save_load_and_record(encoder_with_stats, tmp_path):
    stats = encoder_with_stats.pooling_stats
    stats.save(tmp_path / "tf")
    cfg = json.loads((tmp_path / "tf" / "config.json").read_text())
    assert cfg["kind"] == "token-frequencies" and cfg["library"] == "isotropy" and "digest" in cfg["tokenizer"]
    back = TokenFrequencies.load(tmp_path / "tf")
    assert back.digest() == stats.digest()
    rec = encoder_with_stats.record()
    assert rec["pooling_stats"]["digest"] == stats.digest() and rec["pooling_stats"]["kind"] == "token-frequencies"
    # another pooling does not depend on the table: not recorded, not in its key
    assert "pooling_stats" not in Encoder(pooling="last-avg", pooling_stats=tmp_path / "tf").record()
    assert encoder_with_stats.pooling_key("last-avg") == "last-avg"
    assert encoder_with_stats.pooling_key() == f"sif@{stats.digest()}"


def test_a_table_from_another_tokenizer_is_refused(tmp_path, encoder_with_stats):
    other = tiny_bert(tmp_path / "nomask", mask_token=False)
    enc = Encoder(other, pooling="sif").fit_pooling(["the cat sat on a mat"])
    enc.pooling_stats.save(tmp_path / "tf-other")
    with pytest.raises(IsotropyError, match=r"tf-other were counted with the tokenizer of .*nomask.*fit them again"):
        Encoder(pooling="sif", pooling_stats=tmp_path / "tf-other")


def test_a_sentence_file_counts_there_and_then(encoder_with_stats, tmp_path):
    (tmp_path / "c.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    enc = Encoder(pooling="sif", max_length=64, pooling_stats=tmp_path / "c.txt")
    assert enc.pooling_stats.digest() == encoder_with_stats.pooling_stats.digest()
    assert enc.pooling_stats.info["source"] == "c.txt"


def test_the_cache_keys_on_the_table(encoder_with_stats, tmp_path):
    from isotropy.encoders.cache import VectorCache, encode_cached

    cache = VectorCache(tmp_path / "cache")
    a = encode_cached(encoder_with_stats, SENTENCES, ["sif"], cache)["sif"]
    other = Encoder(pooling="sif", max_length=64).fit_pooling(CORPUS[:7])
    b = encode_cached(other, SENTENCES, ["sif"], cache)["sif"]
    assert cache.hits == 0 and cache.misses == 2 and not np.allclose(a, b)
    again = encode_cached(other, SENTENCES, ["sif"], cache)["sif"]
    assert cache.hits == 1 and np.array_equal(again, b)


def test_index_saves_and_reloads_the_table(encoder_with_stats, tmp_path):
    from isotropy.search import Index

    index = Index(encoder_with_stats, None).add(CORPUS)
    index.save(tmp_path / "idx")
    assert (tmp_path / "idx" / "pooling_stats" / "config.json").is_file()
    back = Index.load(tmp_path / "idx")
    assert back.encoder.pooling_stats.digest() == encoder_with_stats.pooling_stats.digest()
    assert back.search(["a cat"], k=3).ids.tolist() == index.search(["a cat"], k=3).ids.tolist()
    import shutil

    shutil.rmtree(tmp_path / "idx" / "pooling_stats")
    # the index's digests notice first (the files it recorded are gone); without them, the folder check does
    with pytest.raises(IsotropyError, match="is missing pooling_stats/config.json"):
        Index.load(tmp_path / "idx")
    with pytest.raises(IsotropyError, match="missing its token frequencies folder pooling_stats"):
        Index.load(tmp_path / "idx", verify=False)


def test_distributed_spec_refuses_a_pooling_that_needs_a_table():
    from isotropy.distributed import EncoderSpec

    with pytest.raises(IsotropyError, match="does not carry token frequencies"):
        EncoderSpec(pooling="sif").build()


def test_cli_fits_and_uses_token_frequencies(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    code, _, err = run_cli(["fit", "token-frequencies", corpus, "-o", tmp_path / "tf"])
    assert code == 0, err
    code, _, err = run_cli(["encode", corpus, "-o", tmp_path / "v.npy", "-p", "sif", "--pooling-stats", tmp_path / "tf"])
    assert code == 0, err
    code, _, err = run_cli(["encode", corpus, "-o", tmp_path / "w.npy", "-p", "sif", "--pooling-stats", corpus])
    assert code == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "v.npy"), np.load(tmp_path / "w.npy"))
    want = Encoder(pooling="sif", pooling_stats=tmp_path / "tf").encode(CORPUS)
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), want, atol=1e-5)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{i % 5}\n" for i, (a, b) in enumerate(zip(CORPUS, CORPUS[3:])))
    )
    args = [
        "eval",
        "--data",
        pairs,
        "-p",
        "sif",
        "-p",
        "idf",
        "--method",
        "raw",
        "--no-cache",
        "--pooling-stats",
        tmp_path / "tf",
    ]
    code, out, err = run_cli(args)
    assert code == 0, err
    assert "sif" in out and "idf" in out


# --------------------------------------------------------------------------- prompt


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(16, 40), st.integers(0, 10_000))
def test_prompt_ids_keep_the_template_whole(tokenizer, n_words, max_length, seed):
    """head + the sentence cut to fit + tail, never longer than max_length, one mask at the computed position."""
    layout = prompt_layout(tokenizer, DEFAULT_TEMPLATE, "m", "prompt")
    ids, _ = layout.wrap(tokenizer, [words(n_words, seed)], max_length)
    row = ids[0]
    head, tail = list(layout.head), list(layout.tail)
    assert row[: len(head)] == head and row[-len(tail) :] == tail and len(row) <= max_length
    base, shift, template_len = layout.positions()
    n = len(row) - template_len
    assert [i for i, t in enumerate(row) if t == tokenizer.mask_token_id] == [base + shift * n]
    plain = tokenizer(words(n_words, seed), add_special_tokens=False)["input_ids"]
    assert row[len(head) : len(row) - len(tail)] == plain[: max_length - template_len]


def _manual_prompt(model, tokenizer, sentences, max_length):
    """PromptBERT by hand: [CLS] prefix sentence suffix [SEP] concatenated, last layer at the mask."""
    layout = prompt_layout(tokenizer, DEFAULT_TEMPLATE, "m", "prompt")
    room = max_length - len(layout.head) - len(layout.tail)
    out = []
    for s in sentences:
        sent = tokenizer(s, add_special_tokens=False)["input_ids"][:room]
        ids = torch.tensor([list(layout.head) + sent + list(layout.tail)])
        with torch.inference_mode():
            h = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0]
        out.append(h[len(layout.head) + len(sent) + layout.mask_index].numpy())
    return np.stack(out)


def test_prompt_reads_the_mask_for_every_length_truncation_included(bert_dir):
    max_length = 24  # the template takes 13 tokens: sentences of more than 11 are cut
    enc = Encoder(bert_dir, pooling="prompt", max_length=max_length, batch_size=4)
    sentences = [words(n, seed=n) for n in range(0, 20)] + SENTENCES
    want = _manual_prompt(enc.model, enc.tokenizer, sentences, max_length)
    np.testing.assert_allclose(enc.encode(sentences), want, atol=1e-5)


def test_denoised_differs_from_plain_by_exactly_the_template_vector(bert_dir):
    enc = Encoder(bert_dir, max_length=24, batch_size=3)
    sentences = [words(n, seed=n) for n in range(0, 16)]
    got = enc.encode_multi(sentences, ["prompt", "prompt-denoised"])
    layout = prompt_layout(enc.tokenizer, DEFAULT_TEMPLATE, "m", "prompt")
    head, tail = list(layout.head), list(layout.tail)
    for s, plain, denoised in zip(sentences, got["prompt"], got["prompt-denoised"]):
        n = min(len(enc.tokenizer(s, add_special_tokens=False)["input_ids"]), 24 - len(head) - len(tail))
        # the template alone, its tail at the positions it has after n sentence tokens (Prompt-BERT get_delta)
        ids = torch.tensor([head + tail])
        positions = torch.tensor([list(range(len(head))) + [len(head) + n + j for j in range(len(tail))]])
        with torch.inference_mode():
            h = enc.model(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=positions).last_hidden_state
        template = h[0, len(head) + layout.mask_index].numpy()
        np.testing.assert_allclose(plain - denoised, template, atol=1e-5)


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_denoised_empty_sentence_is_zero(tmp_path, bert_dir, kind):
    """With no sentence token the template-only pass is the plain pass itself: its positions must be the
    model's own (RoBERTa-style models start at padding_idx + 1), so the denoised vector is 0."""
    folder = bert_dir
    if kind == "roberta":
        from transformers import AutoTokenizer, RobertaConfig, RobertaModel

        torch.manual_seed(0)
        config = RobertaConfig(
            vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=40, pad_token_id=0,
        )  # fmt: skip
        folder = tmp_path / "roberta"
        RobertaModel(config).save_pretrained(folder)
        AutoTokenizer.from_pretrained(str(default_model_path())).save_pretrained(folder)
    enc = Encoder(folder, max_length=24)
    got = enc.encode_multi(["", "a cat"], ["prompt", "prompt-denoised"])
    np.testing.assert_allclose(got["prompt-denoised"][0], 0, atol=1e-5)
    assert np.abs(got["prompt-denoised"][1]).max() > 1e-3


def test_prompt_on_the_default_model_and_a_custom_template(encoder):
    enc = Encoder(pooling='prompt:This sentence of "[X]" means [MASK].', max_length=32)
    want = _manual_prompt_template(enc, SENTENCES)
    np.testing.assert_allclose(enc.encode(SENTENCES), want, atol=1e-4)


def _manual_prompt_template(enc, sentences):
    """String splicing, as Prompt-BERT's evaluation does, for sentences that fit (no truncation)."""
    template = parse_pooling(enc.pooling).template.replace("[MASK]", enc.tokenizer.mask_token)
    out = []
    for s in sentences:
        batch = enc.tokenizer(template.replace("[X]", s), return_tensors="pt")
        with torch.inference_mode():
            h = enc.model(**batch).last_hidden_state[0]
        at = (batch["input_ids"][0] == enc.tokenizer.mask_token_id).nonzero()[-1, 0]  # the template's mask is the last
        out.append(h[at].numpy())
    return np.stack(out)


def test_a_template_longer_than_max_length_is_one_error(bert_dir):
    with pytest.raises(IsotropyError, match="leaves no room for the sentence"):
        Encoder(bert_dir, pooling="prompt", max_length=10).encode(["a cat"])


# --------------------------------------------------------------------------- ditto


def test_ditto_reads_the_right_layer_and_head(bert_dir):
    enc = Encoder(bert_dir, max_length=32)
    names = ["ditto:layer=0,head=1", "ditto:layer=1,head=3", "ditto:layer=1,head=3,norm=none"]
    got = enc.encode_multi(SENTENCES, names)
    enc.model.set_attn_implementation("eager")
    try:
        batch = enc.tokenizer(SENTENCES, padding=True, return_tensors="pt")
        with torch.inference_mode():
            out = enc.model(**batch, output_hidden_states=True, output_attentions=True)
    finally:
        enc.model.set_attn_implementation("sdpa")
    mask = batch["attention_mask"].float()
    states = (out.hidden_states[0] + out.hidden_states[-1]) / 2  # embedding layer + last (Ditto's att_first_last)
    for name, (layer, head) in zip(names, [(0, 1), (1, 3), (1, 3)]):
        w = torch.diagonal(out.attentions[layer][:, head], dim1=1, dim2=2) * mask
        total = (states * w[..., None]).sum(1)
        want = total if name.endswith("norm=none") else total / w.sum(1, keepdim=True)
        np.testing.assert_allclose(got[name], want.numpy(), atol=1e-5)
    assert not np.allclose(got[names[0]], got[names[1]])


def test_ditto_defaults_fit_the_default_model(encoder):
    p = parse_pooling("ditto")
    assert (p.layer, p.head) == (0, 9) and encoder.model.config.num_attention_heads == 12
    encoder.runtime.check_pooling(p)


@pytest.mark.parametrize(
    "name, match", [("ditto:layer=0,head=4", "head 4, but .* 4 heads"), ("ditto:layer=2,head=0", "layer 2, but .* 2 transformer")]
)
def test_ditto_out_of_range(bert_dir, name, match):
    with pytest.raises(IsotropyError, match=match):
        Encoder(bert_dir, pooling=name)


def test_plain_poolings_unchanged_by_a_ditto_pass(encoder):
    before = encoder.encode_multi(SENTENCES, ["last-avg", "cls"])
    ditto = encoder.encode_multi(SENTENCES, ["ditto"])["ditto"]
    after = encoder.encode_multi(SENTENCES, ["last-avg", "cls"])
    assert encoder.model.config._attn_implementation == "sdpa"  # back on the fast path
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])
    assert np.isfinite(ditto).all()


# --------------------------------------------------------------------------- one pass per input


def test_encode_multi_groups_poolings_by_their_input(bert_dir, monkeypatch):
    enc = Encoder(bert_dir, max_length=32, batch_size=4).fit_pooling(CORPUS)
    names = ["last-avg", "cls", "sif", "idf", "prompt", "prompt-denoised", "ditto:layer=1,head=0"]
    calls = []
    run = enc.runtime.run
    monkeypatch.setattr(
        enc.runtime, "run", lambda feeds, ps, states=None: calls.append([p.name for p in ps]) or run(feeds, ps, states)
    )
    together = enc.encode_multi(SENTENCES, names)
    batches = -(-len(SENTENCES) // 4)
    # plain (4 poolings), prompt (2: the same template), attention (1): three passes over the data
    assert len(calls) == 3 * batches
    assert sorted(map(tuple, calls[::batches])) == sorted(
        [("last-avg", "cls", "sif", "idf"), ("prompt", "prompt-denoised"), ("ditto:layer=1,head=0",)]
    )
    monkeypatch.undo()
    for name in names:
        alone = enc.encode_multi(SENTENCES, [name])[name]
        np.testing.assert_allclose(together[name], alone, atol=1e-5)


# --------------------------------------------------------------------------- exports

NEW = ["sif", "idf:norm=weights", "prompt", "prompt-denoised", "ditto:layer=1,head=3"]


@pytest.fixture(scope="module")
def new_encoders(bert_dir):
    out = {}
    for name in NEW:
        enc = Encoder(bert_dir, pooling=name, max_length=24, device="cpu")
        if enc_needs_stats(name):
            enc.fit_pooling(CORPUS)
        out[name] = enc
    return out


def enc_needs_stats(name: str) -> bool:
    return parse_pooling(name).needs_token_stats


@pytest.mark.parametrize("name", NEW)
def test_sentence_transformers_export_equals_the_encoder(new_encoders, tmp_path, name):
    from isotropy import integrations as eco

    enc = new_encoders[name]
    sentences = SENTENCES + [words(30, 1)]  # truncated
    eco.to_sentence_transformer(enc, None, tmp_path / "st")
    model = eco.load_sentence_transformer(tmp_path / "st")
    np.testing.assert_allclose(model.encode(sentences, convert_to_numpy=True), enc.encode(sentences), atol=1e-5)


@pytest.mark.parametrize("name", NEW)
def test_onnx_export_equals_the_encoder(new_encoders, tmp_path, name):
    pytest.importorskip("onnxruntime")
    from isotropy.integrations import export_onnx

    enc = new_encoders[name]
    sentences = SENTENCES + [words(30, 1)]
    out = export_onnx(tmp_path / "onnx", encoder=enc)
    cfg = json.loads((out / "isotropy_onnx.json").read_text())
    assert cfg["pooling"] == enc.pooling
    assert (cfg["pooling_stats"] or {}).get("digest") == (enc.record().get("pooling_stats") or {}).get("digest")
    np.testing.assert_allclose(Encoder(out, backend="onnx").encode(sentences), enc.encode(sentences), atol=1e-5)


# --------------------------------------------------------------------------- real data


@pytest.mark.slow
def test_prompt_runs_end_to_end_on_stsb(capsys):
    from isotropy.evaluation import load_stsb

    folder = data_dir() / "sts" / "STSBenchmark"
    if not folder.is_dir():
        pytest.skip(f"real data not found at {folder}")
    # every third test pair (460): the whole split's figures are bench/poolings.py's (docs/BENCHMARKS.md, poolings);
    # this checks that both prompt poolings run end to end on real sentences and give a finite, positive score
    test = load_stsb(folder).pairs(["test"])[::3]
    enc = Encoder(max_length=64)
    got = enc.encode_multi([p.s1 for p in test] + [p.s2 for p in test], ["prompt", "prompt-denoised"])
    n = len(test)
    gold = np.array([p.score for p in test])
    for name, vecs in got.items():
        rho = spearman_cos(vecs[:n], vecs[n:], gold)
        with capsys.disabled():
            print(f"\nSTS-B test (every third pair), default model, {name}: Spearman x 100 = {rho:.2f}")
        assert np.isfinite(vecs).all() and 0 < rho <= 100
