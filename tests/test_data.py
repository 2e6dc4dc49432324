"""Pair-set loaders: the real STS folders (exact published counts), generic pair files, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isotropy.errors import IsotropyError
from isotropy.evaluation import (
    Pair,
    Task,
    canonical_task_name,
    find_tasks,
    load_hf,
    load_pair_folder,
    load_pairs,
    load_tasks,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("ISOTROPY_DATA", ROOT.parent / "shared" / "data"))
needs_data = pytest.mark.skipif(not (DATA / "sts").is_dir(), reason=f"no STS data in {DATA}")

# the counts in ../shared/data/README.md (the ones the published tables evaluate on)
SPLITS = {
    "STS-B": {"train": 5749, "dev": 1500, "test": 1379},
    "SICK-R": {"train": 4500, "trial": 500, "test": 4927},
    "STS-12": {"test": 3108},
    "STS-13": {"test": 1500},
    "STS-14": {"test": 3750},
    "STS-15": {"test": 3000},
    "STS-16": {"test": 1186},
}
SUBSETS = {
    "STS-12": {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "surprise.OnWN": 750, "surprise.SMTnews": 399},
    "STS-13": {"FNWN": 189, "headlines": 750, "OnWN": 561},
    "STS-14": {"deft-forum": 450, "deft-news": 300, "headlines": 750, "images": 750, "OnWN": 750, "tweet-news": 750},
    "STS-15": {"answers-forums": 375, "answers-students": 750, "belief": 375, "headlines": 750, "images": 750},
    "STS-16": {"answer-answer": 254, "headlines": 249, "plagiarism": 230, "postediting": 244, "question-question": 209},
}
EVAL = {"STS-B": 1379, "SICK-R": 4927, "STS-12": 3108, "STS-13": 1500, "STS-14": 3750, "STS-15": 3000, "STS-16": 1186}


@pytest.fixture(scope="module")
def real_tasks():
    return {t.name: t for t in load_tasks(DATA)}


@needs_data
def test_every_published_count(real_tasks):
    assert list(real_tasks) == list(SPLITS)
    for name, counts in SPLITS.items():
        task = real_tasks[name]
        assert task.counts() == counts, name
        assert len(task.eval_pairs) == EVAL[name], name
        assert task.metric == "spearman"
    for name, subsets in SUBSETS.items():
        assert real_tasks[name].subset_counts() == subsets, name
    assert real_tasks["STS-B"].train_split == "train" and real_tasks["SICK-R"].train_split == "train"
    assert real_tasks["STS-12"].train_split is None


@needs_data
def test_real_rows_are_parsed_right(real_tasks):
    stsb = real_tasks["STS-B"]
    first = stsb.splits["train"][0]
    assert first == Pair("A plane is taking off.", "An air plane is taking off.", 5.0, "main-captions")
    # lines with two extra source columns keep the right sentences and score
    assert all(0 <= p.score <= 5 and "\t" not in p.s1 + p.s2 for p in stsb.pairs())
    sick = real_tasks["SICK-R"]
    assert all(1 <= p.score <= 5 for p in sick.pairs())
    assert sick.splits["test"][0].s1 == "There is no boy playing outdoors and there is no man smiling"
    assert all(0 <= p.score <= 5 for t in ("STS-12", "STS-16") for p in real_tasks[t].pairs())


@needs_data
def test_data_path_forms(real_tasks):
    # the parent of sts/, sts/ itself, and one task folder all work
    assert list(find_tasks(DATA / "sts")) == list(SPLITS)
    one = load_tasks(DATA / "sts" / "STS16")
    assert [t.name for t in one] == ["STS-16"] and len(one[0].eval_pairs) == 1186
    picked = load_tasks(DATA, ["stsb", "sick", "STS2013"])
    assert [t.name for t in picked] == ["STS-B", "SICK-R", "STS-13"]


def test_task_names():
    assert canonical_task_name("sts-b") == "STS-B"
    assert canonical_task_name("STSBenchmark") == "STS-B"
    assert canonical_task_name("SICK_R") == "SICK-R"
    assert canonical_task_name("sts12") == "STS-12"
    assert canonical_task_name("mrpc") is None


@needs_data
def test_unknown_task_lists_valid_ones():
    with pytest.raises(IsotropyError, match=r"unknown task 'STS-99'.*STS-B, SICK-R, STS-12.*all"):
        load_tasks(DATA, ["STS-99"])


def test_sentences_unique_and_order_stable():
    t = Task("x", {"train": [Pair("a", "b", 1.0), Pair("b", "c", 2.0)], "test": [Pair("c", "a", 0.0), Pair("d", "a", 1.0)]})
    assert t.sentences() == ["a", "b", "c", "d"]
    assert t.sentences(["test"]) == ["c", "a", "d"]
    assert t.eval_pairs == t.splits["test"]
    with pytest.raises(IsotropyError, match="no split 'dev'"):
        t.pairs(["dev"])


@given(st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=30))
@settings(max_examples=50, deadline=None)
def test_sentences_property(pairs):
    t = Task("x", {"test": [Pair(a, b, 0.0) for a, b in pairs]})
    got = t.sentences()
    assert len(got) == len(set(got))
    flat = [s for ab in pairs for s in ab]
    assert set(got) == set(flat)
    assert got == sorted(set(flat), key=flat.index)


# --------------------------------------------------------------------------- generic files


def test_generic_tsv_csv_jsonl(tmp_path):
    tsv = tmp_path / "a.tsv"
    tsv.write_text('sentence1\tsentence2\tscore\nHe said "hi\tShe said hi\t3.5\nx\ty\t1\n', encoding="utf-8")
    t = load_pairs(tsv)
    assert t.name == "a" and t.metric == "spearman"
    assert t.pairs() == [Pair('He said "hi', "She said hi", 3.5, ""), Pair("x", "y", 1.0, "")]

    csv_ = tmp_path / "b.csv"
    csv_.write_text('label,sentence1,sentence2\n1,"a, b",c\n0,d,e\n', encoding="utf-8")
    t = load_pairs(csv_)
    assert t.metric == "binary" and t.pairs()[0] == Pair("a, b", "c", 1.0, "")

    jl = tmp_path / "c.jsonl"
    jl.write_text(
        json.dumps({"sentence1": "a", "sentence2": "b", "score": 2})
        + "\n\n"
        + json.dumps({"sentence1": "c", "sentence2": "d", "score": "4.5"})
        + "\n",
        encoding="utf-8",
    )
    assert [p.score for p in load_pairs(jl).pairs()] == [2.0, 4.5]
    assert [t.name for t in load_tasks(jl)] == ["c"]


def test_generic_split_folder(tmp_path):
    for split in ("train", "validation", "test"):
        (tmp_path / f"{split}.tsv").write_text(f"sentence1\tsentence2\tlabel\n{split} a\t{split} b\t1\nq\tr\t0\n")
    t = load_pair_folder(tmp_path)
    assert t.counts() == {"train": 2, "dev": 2, "test": 2}
    assert t.metric == "binary" and t.eval_splits == ("test",) and t.train_split == "train"
    assert [x.name for x in load_tasks(tmp_path)] == [tmp_path.name]


# --------------------------------------------------------------------------- bad input: one clear line each


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_unknown_layout_lists_what_was_expected(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(IsotropyError) as exc:
        load_tasks(tmp_path)
    msg = _one_line(exc)
    assert "none of the known data layouts" in msg
    for expected in ("STSBenchmark/", "SICK/", "STS12/", "sentence1", "score"):
        assert expected in msg
    with pytest.raises(IsotropyError, match="does not exist"):
        load_tasks(tmp_path / "missing")


def _stsb(tmp_path, test_line):
    folder = tmp_path / "STSBenchmark"
    folder.mkdir()
    good = "main-news\tf\t2012\t0001\t2.5\tA b.\tC d.\n"
    (folder / "sts-train.csv").write_text(good)
    (folder / "sts-dev.csv").write_text(good)
    (folder / "sts-test.csv").write_text(good + test_line)
    return folder


def test_malformed_line_names_file_and_line(tmp_path):
    folder = _stsb(tmp_path, "main-news\tf\t2012\t0002\t2.5\tonly one sentence\n")
    with pytest.raises(IsotropyError) as exc:
        load_tasks(tmp_path)
    msg = _one_line(exc)
    assert "sts-test.csv line 2" in msg and "7 tab-separated columns" in msg and str(folder) in msg


def test_score_not_a_number_names_file_and_line(tmp_path):
    _stsb(tmp_path, "main-news\tf\t2012\t0002\tabc\tA.\tB.\n")
    with pytest.raises(IsotropyError) as exc:
        load_tasks(tmp_path)
    assert "sts-test.csv line 2: score 'abc' is not a number" in _one_line(exc)


def test_semeval_errors(tmp_path):
    folder = tmp_path / "STS13"
    folder.mkdir()
    (folder / "STS.input.x.txt").write_text("a\tb\nc\td\ne\tf\n")
    (folder / "STS.gs.x.txt").write_text("1\n\n2\n")
    t = load_tasks(tmp_path)[0]
    assert t.name == "STS-13" and [p.score for p in t.pairs()] == [1.0, 2.0]  # empty gold line skipped
    (folder / "STS.gs.x.txt").write_text("1\nfive\n2\n")
    with pytest.raises(IsotropyError, match=r"STS\.gs\.x\.txt line 2: gold score 'five' is not a number"):
        load_tasks(tmp_path)
    (folder / "STS.gs.x.txt").write_text("1\n2\n")
    with pytest.raises(IsotropyError, match="has 3 lines but STS.gs.x.txt has 2"):
        load_tasks(tmp_path)
    (folder / "STS.gs.x.txt").write_text("1\n2\n3\n")
    (folder / "STS.input.x.txt").write_text("a\tb\nc d\ne\tf\n")
    with pytest.raises(IsotropyError, match=r"STS\.input\.x\.txt line 2: expected 2 tab-separated"):
        load_tasks(tmp_path)


@pytest.mark.parametrize(
    "name, text, pattern",
    [
        ("p.tsv", "sentence1\tsentence2\tscore\na\tb\t1\na\tb\n", r"p\.tsv line 3: expected 3 tab-separated columns, found 2"),
        ("p.tsv", "sentence1\tsentence2\tscore\na\tb\tn/a\n", r"p\.tsv line 2: score 'n/a' is not a number"),
        ("p.tsv", "s1\ts2\tscore\na\tb\t1\n", r"p\.tsv line 1: the header must name sentence1, sentence2"),
        ("p.csv", "sentence1,sentence2,label\na,b,2\n", r"p\.csv line 2: label '2' must be 0 or 1"),
        ("p.jsonl", '{"sentence1": "a", "sentence2": "b", "score": 1}\n{"sentence1": "a"\n', r"p\.jsonl line 2: not valid JSON"),
        ("p.jsonl", '{"sentence1": "a", "sentence2": "b", "score": "x"}\n', r"p\.jsonl line 1: score 'x' is not a number"),
        ("p.jsonl", '{"sentence1": "a", "sentence2": "b"}\n', r"p\.jsonl line 1: needs a 'score'"),
        ("p.xml", "<a/>", r"unknown pair file type '\.xml'"),
    ],
)
def test_generic_bad_input(tmp_path, name, text, pattern):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(IsotropyError, match=pattern) as exc:
        load_pairs(path)
    _one_line(exc)


def test_invalid_utf8_names_line(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_bytes(b"sentence1\tsentence2\tscore\na\t\xff\t1\n")
    with pytest.raises(IsotropyError, match=r"p\.tsv line 2 is not valid UTF-8"):
        load_pairs(path)


# --------------------------------------------------------------------------- Hugging Face hub


def test_hub_offline_is_one_line_pointing_to_data(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # huggingface_hub reads HF_HUB_OFFLINE once, at import
    with pytest.raises(IsotropyError) as exc:
        load_hf("mteb/stsbenchmark-sts")
    msg = _one_line(exc)
    assert "mteb/stsbenchmark-sts" in msg and "HF_HUB_OFFLINE is set" in msg and "--data DIR" in msg
    # without --data, STS task names go to the hub copies and fail the same way
    with pytest.raises(IsotropyError, match=r"mteb/sickr-sts.*--data DIR"):
        load_tasks(None, ["SICK-R"])


def test_hub_unreachable_is_one_line_naming_the_host(monkeypatch):

    from huggingface_hub import constants

    for var in ("HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    # huggingface_hub reads HF_HUB_OFFLINE and HF_ENDPOINT once, at import: set its constants
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "https://nonexistent.invalid")
    with pytest.raises(IsotropyError, match=r"nonexistent\.invalid is unreachable|no answer") as exc:
        load_hf("mteb/sts12-sts")
    assert "--data DIR" in _one_line(exc)
