"""Retrieval quality (issue #26): loaders, bad input, metric parity, the CLI, Cranfield."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import data_dir, run_cli
from isotropy.errors import IsotropyError
from isotropy.retrieval import load_retrieval, rank_rows, run_from_ids, score_run
from isotropy.retrieval.kinds import search_kind, sign_bits

DOCS = [
    "the wing stalls at high angle of attack",
    "heat transfer in a hypersonic boundary layer",
    "turbulent flow over a flat plate",
    "buckling of thin cylindrical shells under pressure",
    "supersonic flutter of panels",
    "shock waves in a nozzle",
    "laminar boundary layer separation",
    "vibration of aircraft structures",
]
QUERIES = ["what happens when a wing stalls", "boundary layer heat transfer", "panel flutter at supersonic speed"]
QRELS = [("0", "0", 2), ("0", "7", 1), ("1", "1", 2), ("1", "6", 1), ("2", "4", 2), ("2", "3", 0)]


def write_beir(folder, docs=DOCS, queries=QUERIES, qrels=QRELS, extra_query=True):
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w") as fh:
        for i, d in enumerate(docs):
            fh.write(json.dumps({"_id": f"d{i}", "title": "", "text": d}) + "\n")
    with open(folder / "queries.jsonl", "w") as fh:
        for i, q in enumerate(queries):
            fh.write(json.dumps({"_id": f"q{i}", "text": q}) + "\n")
        if extra_query:  # a query of another split: read, not evaluated
            fh.write(json.dumps({"_id": "train-1", "text": "not in the test qrels"}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"q{q}\td{d}\t{g}" for q, d, g in qrels]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


def write_plain(folder, docs=DOCS, queries=QUERIES, qrels=QRELS):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "documents.txt").write_text("\n".join(docs) + "\n")
    (folder / "queries.txt").write_text("\n".join(queries) + "\n")
    (folder / "qrels.tsv").write_text("".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels))
    return folder


# --------------------------------------------------------------------------- loaders


def test_beir_and_plain_layouts_read_the_same_collection(tmp_path):
    beir = load_retrieval(write_beir(tmp_path / "beir"))
    plain = load_retrieval(write_plain(tmp_path / "plain"))
    assert beir.docs == plain.docs == DOCS
    assert beir.queries == plain.queries == QUERIES
    assert beir.dropped_queries == 1 and plain.dropped_queries == 0
    assert beir.qrels["q0"] == {"d0": 2, "d7": 1} and plain.qrels["0"] == {"0": 2, "7": 1}
    assert plain.qrels["2"] == {"4": 2, "3": 0}  # a gain of 0 is kept, as not relevant


def test_cranfield_smart_layout():
    folder = data_dir() / "retrieval" / "cranfield"
    if not folder.is_dir():
        pytest.skip(f"real data not found at {folder}")
    task = load_retrieval(folder)
    assert len(task.docs) == 1400 and len(task.queries) == 225
    # the qrels number the queries in file order: query "2" is the second (.I 002), "4" is .I 008
    assert task.queries[1].startswith("what are the structural and aeroelastic problems")
    assert task.queries[3].startswith("can a criterion be developed")
    assert task.qrels["1"]["184"] == 3 and task.qrels["1"]["12"] == 2  # codes 2 and 3 -> gains 5 - c
    assert sum(g > 0 for q in task.qrels.values() for g in q.values()) == 1612
    assert task.docs[0].startswith("experimental investigation of the aerodynamics of a wing in a slipstream")


def _bad(tmp_path, name, **change):
    return write_plain(tmp_path / name, **change)


@pytest.mark.parametrize(
    "change, file, line, words",
    [
        ({"qrels": QRELS + [("0", "99", 1)]}, "qrels.tsv", 7, "document '99'"),
        ({"qrels": QRELS + [("9", "1", 1)]}, "qrels.tsv", 7, "query '9'"),
        ({"qrels": QRELS + [("0", "0", 1)]}, "qrels.tsv", 7, "duplicate qrel"),
        ({"qrels": QRELS[:2] + [("1", "1", "high")]}, "qrels.tsv", 3, "not an integer"),
        ({"queries": QUERIES[:1] + ["  "] + QUERIES[2:]}, "queries.txt", 2, "is empty"),
    ],
)
def test_bad_input_names_the_file_and_line(tmp_path, change, file, line, words):
    folder = _bad(tmp_path, "bad", **change)
    with pytest.raises(IsotropyError, match=words) as exc:
        load_retrieval(folder)
    assert f"{folder / file} line {line}" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_duplicate_beir_id_names_both_lines(tmp_path):
    folder = write_beir(tmp_path / "dup", docs=DOCS)
    with open(folder / "corpus.jsonl", "a") as fh:
        fh.write(json.dumps({"_id": "d3", "text": "again"}) + "\n")
    with pytest.raises(IsotropyError, match=r"corpus.jsonl line 9: duplicate document id 'd3' \(first at .*line 4\)"):
        load_retrieval(folder)


# --------------------------------------------------------------------------- metrics


def _dcg(gains):
    return sum(g / math.log2(r + 2) for r, g in enumerate(gains))


def test_metrics_equal_the_textbook_reference_with_ties_broken_by_row():
    docs = [f"d{i}" for i in range(6)]
    qrels = {"a": {"d1": 3, "d2": 1, "d4": 0, "d5": 2}, "b": {"d3": 1}}
    scores = np.array([[0.5, 0.9, 0.5, 0.1, 0.5, 0.2], [0.3] * 6])
    ranked = rank_rows(scores, 100)
    assert ranked.tolist() == [[1, 0, 2, 4, 5, 3], [0, 1, 2, 3, 4, 5]]  # ties: lower row first
    got = score_run(qrels, run_from_ids(["a", "b"], docs, ranked))
    # the reference, written out: linear gains, log2(rank + 1) discount, ideal from every judged gain
    ndcg_a = _dcg([3, 0, 1, 0, 2, 0]) / _dcg([3, 2, 1])
    ndcg_b = _dcg([0, 0, 0, 1]) / _dcg([1])
    assert got["a"]["ndcg@10"] == pytest.approx(ndcg_a, abs=1e-6)
    assert got["b"]["ndcg@10"] == pytest.approx(ndcg_b, abs=1e-6)
    assert got["a"]["mrr@10"] == pytest.approx(1.0, abs=1e-6) and got["b"]["mrr@10"] == pytest.approx(0.25, abs=1e-6)
    assert got["a"]["recall@100"] == pytest.approx(1.0, abs=1e-6)
    # recall and MRR at a cut: the relevant document of "b" below the top 3 is not found
    short = score_run(qrels, run_from_ids(["a", "b"], docs, rank_rows(scores, 3)))
    assert short["b"]["recall@100"] == 0.0 and short["b"]["mrr@10"] == 0.0
    assert short["a"]["recall@100"] == pytest.approx(2 / 3, abs=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=30), st.integers(1, 40))
def test_rank_rows_is_a_stable_sort_by_descending_score(values, k):
    scores = np.array([values], dtype=np.float64)
    expected = sorted(range(len(values)), key=lambda j: (-values[j], j))[:k]
    assert rank_rows(scores, k)[0].tolist() == expected


def test_binary_codes_rank_by_hamming_distance_with_ties_by_row():
    rng = np.random.default_rng(0)
    D = rng.standard_normal((50, 20)).astype(np.float32)
    Q = rng.standard_normal((4, 20)).astype(np.float32)
    got = search_kind("binary", D, Q, 50).ranked
    bits_d, bits_q = np.unpackbits(sign_bits(D), axis=1), np.unpackbits(sign_bits(Q), axis=1)
    hamming = (bits_q[:, None, :] != bits_d[None, :, :]).sum(-1)
    assert got.tolist() == rank_rows(-hamming, 50).tolist()


# --------------------------------------------------------------------------- the command line


def test_eval_retrieval_round_trip_on_a_beir_folder(tmp_path, tiny_model_dir):
    folder = write_beir(tmp_path / "beir")
    out = tmp_path / "res.json"
    args = ["eval", "--retrieval", folder, "--model", tiny_model_dir, "--pooling", "cls", "--method", "raw"]
    code, stdout, stderr = run_cli([*args, "--method", "pca-4", "--kind", "all", "-o", out, "--no-cache", "--no-progress"])
    assert code == 0, stderr
    rows = json.loads(out.read_text())["rows"]
    assert {(r["method"], r["kind"]) for r in rows} == {
        (m, k) for m in ("raw", "pca-4") for k in ("exact", "flat", "hnsw", "ivf", "sq8", "binary")
    }
    exact = {r["method"]: r for r in rows if r["kind"] == "exact"}
    flat = {r["method"]: r for r in rows if r["kind"] == "flat"}
    for m in ("raw", "pca-4"):  # faiss's exact index agrees with numpy's exact search
        assert flat[m]["ndcg@10"] == pytest.approx(exact[m]["ndcg@10"], abs=1e-6)
        assert 0 <= exact[m]["ndcg@10"] <= 1 and exact[m]["recall@100"] == pytest.approx(1.0)  # 8 documents: all found
    assert exact["raw"]["bytes_per_vector"] == 4 * 32 and exact["pca-4"]["bytes_per_vector"] == 16
    assert "| cls | pca-4 | binary |" in stdout and out.with_suffix(".md").is_file()


def test_index_build_prints_its_cost_against_exact_search(tmp_path, tiny_model_dir):
    plain = write_plain(tmp_path / "plain", docs=DOCS * 6)  # 48 lines: ids 0..47
    args = ["index", "build", plain / "documents.txt", "-o", tmp_path / "idx", "--model", tiny_model_dir, "--kind", "hnsw"]
    code, _, stderr = run_cli([*args, "--no-whiten", "--eval-queries", plain / "queries.txt", "--qrels", plain / "qrels.tsv"])
    assert code == 0, stderr
    assert "hnsw index on 3 queries: recall of the exact top 10" in stderr and "nDCG@10" in stderr
    code, _, stderr = run_cli([*args, "--eval-queries", plain / "queries.txt", "--force"])
    assert code == 2 and "--eval-queries and --qrels go together" in stderr


def test_index_build_checks_the_qrels_before_building(tmp_path, tiny_model_dir):
    plain = write_plain(tmp_path / "plain", qrels=QRELS + [("0", "8", 1)])  # 8 documents: ids 0..7
    args = ["index", "build", plain / "documents.txt", "-o", tmp_path / "idx", "--model", tiny_model_dir, "--no-whiten"]
    code, _, stderr = run_cli([*args, "--eval-queries", plain / "queries.txt", "--qrels", plain / "qrels.tsv"])
    assert code == 2 and "qrels.tsv line 7" in stderr and "document '8'" in stderr
    assert not (tmp_path / "idx").exists()


# --------------------------------------------------------------------------- real data


def test_index_kinds_leave_the_callers_vectors_alone(tiny_model_dir):
    from isotropy.encoders import Encoder

    enc = Encoder(str(tiny_model_dir), pooling="cls")
    raw = enc.encode(DOCS * 6)
    before = raw.copy()
    D = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    for kind in ("flat", "hnsw", "ivf"):
        found = search_kind(kind, D, D[:3], 10, encoder=enc, transform=None, raw_docs=raw)
        assert found.ranked.shape == (3, 10)
    assert np.array_equal(raw, before)


@pytest.mark.slow
def test_cranfield_with_the_default_model():
    folder = data_dir() / "retrieval" / "cranfield"
    if not folder.is_dir():
        pytest.skip(f"real data not found at {folder}")
    from isotropy.retrieval import evaluate_retrieval

    res = evaluate_retrieval(folder, methods=["raw", "pca-128"], kinds=["exact", "sq8"], show_progress=False)
    by = {(r["method"], r["kind"]): r for r in res.rows}
    raw = by[("raw", "exact")]
    # all-MiniLM-L6-v2 mean pooling on Cranfield: a published-order nDCG@10 (low: a hard collection)
    assert 0.30 < raw["ndcg@10"] < 0.50 and raw["recall@100"] > 0.6
    # int8 codes keep the ranking nearly whole; PCA to a third of the dimensions costs little
    assert abs(by[("raw", "sq8")]["ndcg@10"] - raw["ndcg@10"]) < 0.02
    assert by[("pca-128", "exact")]["ndcg@10"] > raw["ndcg@10"] - 0.03
