"""Tests for isotropy.search (and the index jobs of isotropy.files): exact search vs numpy, persistence, add, encoder/transform safety, bad input, CLI."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isotropy.errors import IsotropyError
from isotropy.files import build_index as build_index_file
from isotropy.files import search_index
from isotropy.search import Index, SearchResults
from isotropy.search import store as index_store
from isotropy.transforms.whitening import Whitening

WORDS = ["cat", "dog", "stock", "market", "rain", "storm", "piano", "guitar", "river", "bridge"]
CORPUS = [f"the {a} and the {b} number {i}" for i, (a, b) in enumerate(zip(WORDS * 5, WORDS[3:] * 5 + WORDS[:3] * 5))]


@pytest.fixture(scope="module")
def tiny_encoder(tiny_model_dir):
    from isotropy.encoders import Encoder

    return Encoder(str(tiny_model_dir), max_length=32)


def numpy_topk(X: np.ndarray, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force reference: cosine of L2-normalised rows, best first (float64)."""
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
    S = Q.astype(np.float64) @ X.astype(np.float64).T
    ids = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return ids, np.take_along_axis(S, ids, axis=1)


# --------------------------------------------------------------------------- exact search


@pytest.mark.parametrize("whiten", [False, True])
def test_flat_search_matches_numpy_brute_force(tiny_encoder, whiten):
    transform = Whitening(n_components=16, shrinkage="auto") if whiten else None
    index = Index(tiny_encoder, transform).add(CORPUS)
    raw = tiny_encoder.encode(CORPUS)
    transform = index.transform  # the index fits a copy of an unfitted transform and keeps it
    X = transform.transform(raw) if whiten else raw
    queries = ["a dog by the river", "piano music", CORPUS[7]]
    rawq = tiny_encoder.encode(queries)
    Q = transform.transform(rawq) if whiten else rawq
    ref_ids, ref_scores = numpy_topk(X, Q, 5)
    res = index.search(queries, k=5)
    assert isinstance(res, SearchResults) and res.warning is None
    np.testing.assert_allclose(res.scores, ref_scores, atol=1e-5)
    # ids agree wherever the reference scores are not (near-)tied
    for row_ids, row_ref, row_s in zip(res.ids, ref_ids, ref_scores):
        distinct = np.concatenate([[True], np.diff(row_s) < -1e-5]) & np.concatenate([np.diff(row_s) < -1e-5, [True]])
        assert np.array_equal(row_ids[distinct], row_ref[distinct])
    assert res.texts[2][0] == CORPUS[7] and res.ids[2, 0] == 7  # a corpus sentence finds itself
    assert res.scores[2, 0] == pytest.approx(1.0, abs=1e-5)
    assert res.texts == [[CORPUS[j] for j in row] for row in res.ids]


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 60),
    nq=st.integers(1, 5),
    k=st.integers(1, 70),
    seed=st.integers(0, 2**16),
)
def test_property_flat_equals_brute_force(n, nq, k, seed):
    index = Index(_VECTOR_ENCODER, None)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, _VECTOR_ENCODER.dim)).astype(np.float32)
    Q = rng.normal(size=(nq, _VECTOR_ENCODER.dim)).astype(np.float32)
    index.add_encoded([f"s{i}" for i in range(n)], X)
    res = index.search_vectors(index._apply(Q), k)
    ref_ids, ref_scores = numpy_topk(X, Q, min(k, n))
    assert res.ids.shape == (nq, min(k, n))
    np.testing.assert_allclose(res.scores, ref_scores, atol=1e-5)
    assert np.all(np.diff(res.scores, axis=1) <= 1e-6)  # best first
    assert (res.warning is not None) == (k > n)
    same = np.isclose(res.scores, ref_scores[:, : res.ids.shape[1]], atol=1e-6)
    assert np.array_equal(res.ids[same], ref_ids[same]) or np.allclose(np.diff(ref_scores), 0, atol=1e-5)


class _VectorOnlyEncoder:
    """Stands in for an Encoder where a test works on given vectors only."""

    dim = 8
    model_name = "vectors"
    pooling = "none"
    max_length = 2

    def describe(self) -> str:
        return "vectors"


_VECTOR_ENCODER = _VectorOnlyEncoder()


# --------------------------------------------------------------------------- persistence


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_save_load_gives_identical_results(tiny_encoder, tmp_path, kind):
    params = {"nlist": 2, "nprobe": 2} if kind == "ivf" else {}
    texts = CORPUS + ["a sentence\nwith a newline", "ünïcødé ✓ \t tab"]  # API sentences may hold newlines
    index = Index(tiny_encoder, Whitening(n_components=12, power=0.5, shrinkage="auto"), kind, **params).add(texts)
    queries = ["storm over the bridge", "guitar", texts[-2]]
    before = index.search(queries, k=4)
    index.save(tmp_path / "idx")
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == [
        "config.json",
        "index.faiss",
        "sentences.jsonl",
        "state.safetensors",
        "transform",
    ]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left behind
    loaded = Index.load(tmp_path / "idx")
    after = loaded.search(queries, k=4)
    assert np.array_equal(before.ids, after.ids)
    np.testing.assert_array_equal(before.scores, after.scores)
    assert loaded.sentences == texts and loaded.kind == kind and loaded.params == index.params
    assert after.texts[2][0] == "a sentence\nwith a newline"


def test_add_after_load(tiny_encoder, tmp_path):
    Index(tiny_encoder, Whitening(n_components=8, shrinkage="auto")).add(CORPUS[:30]).save(tmp_path / "idx")
    loaded = Index.load(tmp_path / "idx")
    kernel = loaded.transform.kernel_.copy()
    loaded.add(CORPUS[30:])
    np.testing.assert_array_equal(loaded.transform.kernel_, kernel)  # the corpus-fitted transform stays fixed
    assert len(loaded) == len(CORPUS)
    res = loaded.search([CORPUS[42]], k=1)
    assert res.ids[0, 0] == 42 and res.texts[0] == [CORPUS[42]]
    loaded.save(tmp_path / "idx")
    again = Index.load(tmp_path / "idx")
    assert again.sentences == CORPUS
    # the same as building on everything with the transform fitted on the first 30
    full = Index(tiny_encoder, Whitening(n_components=8, shrinkage="auto")).add(CORPUS[:30]).add(CORPUS[30:])
    q = ["dog and market", "rain"]
    np.testing.assert_allclose(again.search(q, 5).scores, full.search(q, 5).scores, atol=1e-6)


def test_interrupted_save_leaves_old_index(tiny_encoder, tmp_path, monkeypatch):
    import faiss

    index = Index(tiny_encoder).add(CORPUS[:10])
    index.save(tmp_path / "idx")
    index.add(CORPUS[10:20])

    def boom(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(faiss, "write_index", boom)
    with pytest.raises(KeyboardInterrupt):
        index.save(tmp_path / "idx")
    with pytest.raises(KeyboardInterrupt):
        index.save(tmp_path / "new")
    monkeypatch.undo()
    assert not (tmp_path / "new").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]
    assert len(Index.load(tmp_path / "idx")) == 10  # the old index, whole


# --------------------------------------------------------------------------- same encoding for queries and corpus


def test_queries_encoded_like_the_corpus(tiny_encoder, tmp_path):
    index = Index(tiny_encoder, Whitening(n_components=10, shrinkage="auto")).add(CORPUS)
    stored = index._index.reconstruct_n(0, len(CORPUS))
    np.testing.assert_allclose(index.embed(CORPUS), stored, atol=1e-6)
    index.save(tmp_path / "idx")
    loaded = Index.load(tmp_path / "idx")
    assert loaded.encoder.pooling == tiny_encoder.pooling and loaded.encoder.max_length == 32
    assert loaded.encoder.fingerprint() == tiny_encoder.fingerprint()
    np.testing.assert_allclose(loaded.embed(CORPUS), stored, atol=1e-6)


def _edit_config(folder: Path, edit) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    edit(cfg)
    (folder / "config.json").write_text(json.dumps(cfg))


@pytest.fixture
def saved_index(tiny_encoder, tmp_path):
    Index(tiny_encoder, Whitening(n_components=8, shrinkage="auto")).add(CORPUS[:20]).save(tmp_path / "idx")
    return tmp_path / "idx"


def test_hand_edited_pooling_or_max_length_is_refused(saved_index):
    _edit_config(saved_index, lambda c: c["encoder"].update(pooling="cls"))
    with pytest.raises(IsotropyError, match="pooling 'cls'.*no longer matches|no longer matches.*pooling 'cls'"):
        Index.load(saved_index)
    _edit_config(saved_index, lambda c: c["encoder"].update(pooling="last-avg", max_length=16))
    with pytest.raises(IsotropyError, match="no longer matches"):
        Index.load(saved_index)


def test_other_model_is_refused(saved_index, tmp_path, tiny_model_dir):
    import torch
    from transformers import DistilBertModel

    other = tmp_path / "other-model"
    shutil.copytree(tiny_model_dir, other)
    torch.manual_seed(1)
    DistilBertModel(DistilBertModel.from_pretrained(tiny_model_dir).config).save_pretrained(other)
    _edit_config(saved_index, lambda c: c["encoder"].update(model=str(other)))
    with pytest.raises(IsotropyError, match="other model weights"):
        Index.load(saved_index)


def test_swapped_transform_is_refused(saved_index, tiny_encoder):
    other = Whitening(n_components=8, power=0.0).fit(tiny_encoder.encode(CORPUS))
    other.save(saved_index / "transform")
    with pytest.raises(IsotropyError, match=r"transform/config.json does not match the sha256 recorded"):
        Index.load(saved_index)
    # without the digests, the encoding key still catches it
    with pytest.raises(IsotropyError, match="no longer matches"):
        Index.load(saved_index, verify=False)


def test_transform_of_wrong_width_is_refused(tiny_encoder):
    with pytest.raises(IsotropyError, match="fitted on 5-dimensional"):
        Index(tiny_encoder, Whitening().fit(np.random.default_rng(0).normal(size=(20, 5))))


# --------------------------------------------------------------------------- bad input


def test_empty_corpus(tiny_encoder, tmp_path):
    with pytest.raises(IsotropyError, match="corpus is empty"):
        Index(tiny_encoder).add([])
    with pytest.raises(IsotropyError, match="corpus is empty"):
        Index.build([], model=str(tmp_path))  # refused before any model is loaded
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(IsotropyError, match="empty"):
        build_index_file(empty, tmp_path / "idx", no_whiten=True)
    with pytest.raises(IsotropyError, match="index is empty"):
        Index(tiny_encoder).search(["x"])


def test_k_larger_than_corpus_returns_everything_with_a_warning(tiny_encoder):
    index = Index(tiny_encoder).add(CORPUS[:5])
    res = index.search(["dog", "cat"], k=50)
    assert res.ids.shape == (2, 5) and sorted(res.ids[0]) == [0, 1, 2, 3, 4]
    assert "larger than the index" in res.warning and "5 sentences" in res.warning
    assert json.loads(res.to_json())["warning"] == res.warning
    for bad in (0, -1, 2.5, True):
        with pytest.raises(IsotropyError, match="k must be a positive integer"):
            index.search(["dog"], k=bad)


def test_incompatible_version_is_refused(saved_index):
    _edit_config(saved_index, lambda c: c.update(format_version=99))
    with pytest.raises(IsotropyError, match="format version 99"):
        Index.load(saved_index)
    _edit_config(saved_index, lambda c: c.update(format_version=1, index_version=0))
    with pytest.raises(IsotropyError, match="incompatible isotropy.*rebuild"):
        Index.load(saved_index)
    with pytest.raises(IsotropyError, match="not a complete isotropy artefact|missing config.json"):
        Index.load(saved_index.parent)


def test_query_file_not_utf8(saved_index, tmp_path):
    bad = tmp_path / "queries.txt"
    bad.write_bytes(b"fine query\nbad \xff\xfe query\n")
    with pytest.raises(IsotropyError, match=r"queries.txt line 2 is not valid UTF-8"):
        search_index(saved_index, queries_file=bad)


def test_ivf_needs_enough_vectors(tiny_encoder):
    with pytest.raises(IsotropyError, match="nlist=100.*only 20 sentences"):
        Index(tiny_encoder, None, "ivf", nlist=100).add(CORPUS[:20])
    with pytest.raises(IsotropyError, match="unknown index kind"):
        Index(tiny_encoder, None, "annoy")
    with pytest.raises(IsotropyError, match="ef_search must be"):
        Index(tiny_encoder, None, "hnsw", ef_search=0)


def test_failed_first_add_leaves_transform_unfitted(tiny_encoder):
    index = Index(tiny_encoder, Whitening(n_components=4, shrinkage="auto"), "ivf", nlist=100)
    with pytest.raises(IsotropyError):
        index.add(CORPUS[:20])
    assert len(index) == 0 and not hasattr(index.transform, "moments_")


# --------------------------------------------------------------------------- CLI


def run_cli(args: list[str]) -> int:
    from isotropy.cli import main

    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_cli_build_add_search(tiny_model_dir, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS[:40]) + "\n", encoding="utf-8")
    more = tmp_path / "more.txt"
    more.write_text("\n".join(CORPUS[40:]) + "\n", encoding="utf-8")
    out = tmp_path / "idx"
    assert (
        run_cli(
            [
                "index",
                "build",
                str(corpus),
                "-o",
                str(out),
                "--model",
                str(tiny_model_dir),
                "--max-length",
                "32",
                "--kind",
                "hnsw",
                "--no-progress",
            ]
        )
        == 0
    )
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["transform"]["kind"] == "whitening" and cfg["dim"] == 32  # default K capped at the model's 32 dims
    assert run_cli(["index", "add", str(out), str(more)]) == 0
    capsys.readouterr()
    assert run_cli(["search", str(out), CORPUS[45], "-n", "3", "--json"]) == 0
    captured = capsys.readouterr()
    got = json.loads(captured.out)
    assert re.search(r"loaded the index and model in \d+\.\d+ s, searched in \d+\.\d+ s", captured.err)
    assert set(got["timings"]) == {"load_s", "search_s"} and got["timings"]["load_s"] >= 0
    assert got["results"][0]["hits"][0] == {"rank": 1, "id": 45, "score": pytest.approx(1.0, abs=1e-4), "text": CORPUS[45]}
    qfile = tmp_path / "q.txt"
    qfile.write_text("dog\nriver bridge\n", encoding="utf-8")
    assert run_cli(["search", str(out), "--queries", str(qfile), "-n", "100"]) == 0
    captured = capsys.readouterr()
    assert "warning: k=100 is larger than the index, which holds 50 sentences" in captured.err
    assert "query 1: dog" in captured.out and "query 2: river bridge" in captured.out
    assert captured.out.count("[") == 100  # every one of the 50 sentences, for each of the 2 queries


def test_cli_errors_are_one_line(tiny_model_dir, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS[:10]) + "\n", encoding="utf-8")
    assert (
        run_cli(
            [
                "index",
                "build",
                str(corpus),
                "-o",
                str(tmp_path / "i"),
                "--model",
                str(tiny_model_dir),
                "--whiten",
                "8",
                "--no-whiten",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("error: choose one of") and err.count("\n") == 1
    assert run_cli(["search", str(tmp_path / "nowhere"), "query"]) == 2
    err = capsys.readouterr().err
    assert "is not a folder" in err and err.count("\n") == 1


# --------------------------------------------------------------------------- real data


@pytest.mark.slow
def test_real_stsb_retrieval(stsb_mean):
    """On STS-B test pairs with gold >= 4, sentence2 is usually in sentence1's top 10,
    and soft whitening to 128 dims (fitted on the fixture's STS-B sentences) keeps that."""
    a, b, gold = stsb_mean["a"], stsb_mean["b"], stsb_mean["gold"]
    keep = gold >= 4.0
    docs = b[keep]
    texts = [f"doc {i}" for i in range(len(docs))]

    class Enc(_VectorOnlyEncoder):
        dim = docs.shape[1]

    recalls = {}
    for name, t in {"raw": None, "soft-128": Whitening(n_components=128, power=0.5, shrinkage="auto")}.items():
        if t is not None:
            t.fit(stsb_mean["fit"])
        index = Index(Enc(), t).add_encoded(texts, docs)
        hits = index.search_vectors(index._apply(a[keep]), 10).ids
        recalls[name] = float(np.mean([i in row for i, row in enumerate(hits)])) * 100
    assert recalls["raw"] > 95  # measured 99.1 (338 pairs)
    assert recalls["soft-128"] > recalls["raw"] - 2  # measured 99.4


def test_default_whitening_needs_more_sentences_than_dims(tiny_model_dir, tmp_path):
    # the tiny model has 32 dims: the default soft whitening keeps min(128, 32) of them and needs > 32 sentences
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS[:12]) + "\n", encoding="utf-8")
    index = build_index_file(corpus, tmp_path / "idx", model=str(tiny_model_dir), max_length=32)
    assert index.transform is None and index.dim == 32
    assert len(index.warnings) == 1 and "12 sentences, too few" in index.warnings[0] and "raw vectors" in index.warnings[0]
    assert Index.load(tmp_path / "idx").search([CORPUS[3]], k=1).ids[0, 0] == 3
    big = tmp_path / "big.txt"
    big.write_text("\n".join(f"{s} (variant {i})" for i in range(3) for s in CORPUS) + "\n", encoding="utf-8")
    index = build_index_file(big, tmp_path / "idx2", model=str(tiny_model_dir), max_length=32)
    assert index.dim == 32 and index.transform.power == 0.5 and index.transform.shrinkage == "auto" and not index.warnings
    with pytest.raises(IsotropyError, match="needs more than 16 sentences.*--no-whiten"):
        build_index_file(corpus, tmp_path / "idx1", model=str(tiny_model_dir), whiten=16)
    assert not (tmp_path / "idx1").exists()
    assert len(build_index_file(corpus, tmp_path / "idx1", model=str(tiny_model_dir), no_whiten=True)) == 12


def test_an_index_of_isotropy_0_1_whose_fingerprint_cannot_be_compared_is_verified_by_reencoding(tiny_encoder, tmp_path):
    # isotropy 0.1 hashed the model folder's path into the fingerprint: on another machine it never matches
    import json

    Index(tiny_encoder, None).add(CORPUS).save(tmp_path / "idx")
    cfg_path = tmp_path / "idx" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    del cfg["encoder"]["fingerprint_version"]
    cfg["encoder"]["model"] = str(tiny_encoder.folder)
    cfg["encoder"]["fingerprint"] = "0" * 32
    cfg["encoding_key"] = index_store.encoding_key("0" * 32, tiny_encoder.pooling, tiny_encoder.max_length, None)
    cfg_path.write_text(json.dumps(cfg))
    loaded = Index.load(tmp_path / "idx")  # the stored vectors match a fresh encoding: accepted
    assert loaded.search([CORPUS[3]], k=1).ids[0, 0] == 3
    cfg["encoder"]["fingerprint_version"] = 2  # a current record whose fingerprint differs is refused
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(IsotropyError, match="other model weights"):
        Index.load(tmp_path / "idx")


def test_adding_encoded_vectors_leaves_the_callers_array_alone():
    from isotropy import Index

    raw = np.random.default_rng(3).standard_normal((6, 384)).astype(np.float32)  # the default model's width
    before = raw.copy()
    Index(None, None).add_encoded([f"s{i}" for i in range(6)], raw)
    np.testing.assert_array_equal(raw, before)
