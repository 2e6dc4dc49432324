"""Sentence-pair tasks (layer 5): the STS folders, and finding any task by name.

Everything here reads sentence-pair benchmarks: the STS folders in their original
formats (STS Benchmark, SICK, SemEval STS 2012-2016), and :func:`find_tasks` /
:func:`load_tasks`, which find them, a user's pair files and Hugging Face datasets by name.
The rooms beside it: :mod:`.pairs` (:class:`Pair`, :class:`Task`, the line and score checks),
:mod:`.pair_files` (generic pair files, Hugging Face datasets); their public names are
re-exported here. Sentence files (one sentence a line) are
:func:`isotropy.storage.text.read_sentences`'.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from ..errors import IsotropyError
from .pair_files import PAIR_SUFFIXES, _generic_split_files, load_hf, load_pair_folder, load_pairs
from .pairs import Pair, Task, _number, _read_lines

__all__ = [
    "Pair",
    "Task",
    "STS_TASKS",
    "TASK_NAMES",
    "HF_NAMES",
    "PAIR_SUFFIXES",
    "canonical_task_name",
    "find_tasks",
    "load_tasks",
    "load_stsb",
    "load_sick",
    "load_semeval",
    "load_pairs",
    "load_pair_folder",
    "load_hf",
]


# --------------------------------------------------------------------------- the STS folders


def load_stsb(folder: str | os.PathLike) -> Task:
    """STS Benchmark: ``sts-{train,dev,test}.csv``, tab-separated, no quoting.

    Columns: genre, file, year, id, score, sentence1, sentence2, and on some lines
    two more source columns (ignored). Quotes are literal characters, so the lines
    are split on tabs rather than read with a quoting csv dialect.
    """
    folder = Path(folder)
    splits: dict[str, list[Pair]] = {}
    for split in ("train", "dev", "test"):
        path = folder / f"sts-{split}.csv"
        if not path.is_file():
            raise IsotropyError(f"{folder} looks like STS Benchmark but lacks {path.name}")
        pairs = []
        for number, line in enumerate(_read_lines(path), start=1):
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) < 7:
                raise IsotropyError(
                    f"{path} line {number}: expected 7 tab-separated columns "
                    f"(genre, file, year, id, score, sentence1, sentence2), found {len(cols)}"
                )
            pairs.append(Pair(cols[5], cols[6], _number(cols[4], path, number, task="STS-B"), cols[0]))
        splits[split] = pairs
    return Task("STS-B", splits, eval_splits=("test",), train_split="train", source=str(folder))


def load_sick(folder: str | os.PathLike) -> Task:
    """SICK: ``SICK_{train,trial,test_annotated}.txt``, tab-separated with a header line."""
    folder = Path(folder)
    splits: dict[str, list[Pair]] = {}
    for split, filename in (("train", "SICK_train.txt"), ("trial", "SICK_trial.txt"), ("test", "SICK_test_annotated.txt")):
        path = folder / filename
        if not path.is_file():
            raise IsotropyError(f"{folder} looks like SICK but lacks {filename}")
        lines = _read_lines(path)
        header = lines[0].split("\t") if lines else []
        needed = ("sentence_A", "sentence_B", "relatedness_score")
        missing = [c for c in needed if c not in header]
        if missing:
            raise IsotropyError(
                f"{path} line 1: the header lacks {', '.join(missing)} (expected pair_ID, sentence_A, "
                f"sentence_B, relatedness_score, entailment_judgment)"
            )
        ia, ib, isc = (header.index(c) for c in needed)
        pairs = []
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) != len(header):
                raise IsotropyError(f"{path} line {number}: expected {len(header)} tab-separated columns, found {len(cols)}")
            pairs.append(Pair(cols[ia], cols[ib], _number(cols[isc], path, number, task="SICK-R"), "SICK"))
        splits[split] = pairs
    return Task("SICK-R", splits, eval_splits=("test",), train_split="train", source=str(folder))


_SEMEVAL_INPUT = re.compile(r"^STS\.input\.(.+)\.txt$")


def load_semeval(folder: str | os.PathLike, name: str) -> Task:
    """SemEval/SentEval layout: ``STS.input.NAME.txt`` (two tab-separated sentences a
    line) with ``STS.gs.NAME.txt`` (one gold score a line). Pairs whose gold line is
    empty are not scored and are skipped (most of STS-16). All pairs form one split, ``test``."""
    folder = Path(folder)
    inputs = sorted(p for p in folder.iterdir() if _SEMEVAL_INPUT.match(p.name))
    if not inputs:
        raise IsotropyError(f"{folder} has no STS.input.*.txt files")
    pairs = []
    for inp in inputs:
        subset = _SEMEVAL_INPUT.match(inp.name).group(1)
        gs = folder / f"STS.gs.{subset}.txt"
        if not gs.is_file():
            raise IsotropyError(f"{inp} has no gold file {gs.name} beside it")
        in_lines, gs_lines = _read_lines(inp), _read_lines(gs)
        if len(in_lines) != len(gs_lines):
            raise IsotropyError(f"{inp} has {len(in_lines)} lines but {gs.name} has {len(gs_lines)}; they must pair line by line")
        for number, (line, gold) in enumerate(zip(in_lines, gs_lines), start=1):
            if not gold.strip():
                continue
            cols = line.split("\t")
            if len(cols) != 2:
                raise IsotropyError(f"{inp} line {number}: expected 2 tab-separated sentences, found {len(cols)} columns")
            pairs.append(Pair(cols[0], cols[1], _number(gold, gs, number, "gold score", task=name), subset))
    return Task(name, {"test": pairs}, eval_splits=("test",), train_split=None, source=str(folder), aggregated=True)


# task name -> (folder name, loader)
STS_TASKS: dict[str, tuple[str, object]] = {
    "STS-B": ("STSBenchmark", load_stsb),
    "SICK-R": ("SICK", load_sick),
    **{f"STS-{y}": (f"STS{y}", None) for y in range(12, 17)},
}
TASK_NAMES = tuple(STS_TASKS)

# the Hugging Face copies of the same tasks (used when no --data folder is given)
HF_NAMES = {
    "STS-B": "mteb/stsbenchmark-sts",
    "SICK-R": "mteb/sickr-sts",
    **{f"STS-{y}": f"mteb/sts{y}-sts" for y in range(12, 17)},
}

_EXPECTED_LAYOUT = (
    "expected sub-folders STSBenchmark/ (sts-{train,dev,test}.csv), SICK/ (SICK_{train,trial,test_annotated}.txt) "
    "or STS12/..STS16/ (STS.input.NAME.txt + STS.gs.NAME.txt), directly or under sts/; or pair files "
    "{train,dev,test}.{tsv,csv,jsonl} with columns sentence1, sentence2 and score (or label)"
)


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name).lower()


_ALIASES = {
    **{_norm(n): n for n in TASK_NAMES},
    "stsbenchmark": "STS-B",
    "sick": "SICK-R",
    **{f"sts20{y}": f"STS-{y}" for y in range(12, 17)},
}


def canonical_task_name(name: str) -> str | None:
    """``stsb``, ``sts-b``, ``STSBenchmark`` -> ``STS-B``; None when it is none of the STS tasks."""
    return _ALIASES.get(_norm(name))


def _detect_task_folder(folder: Path) -> str | None:
    """The STS task a single folder holds, judged by its files (not by its name)."""
    if (folder / "sts-train.csv").is_file() or (folder / "sts-test.csv").is_file():
        return "STS-B"
    if (folder / "SICK_train.txt").is_file() or (folder / "SICK_test_annotated.txt").is_file():
        return "SICK-R"
    if any(_SEMEVAL_INPUT.match(p.name) for p in folder.iterdir()):
        name = canonical_task_name(folder.name)
        return name if name and name.startswith("STS-1") else f"STS-{folder.name}"
    return None


def find_tasks(data: str | os.PathLike) -> dict[str, object]:
    """The tasks that ``data`` holds, as ``{name: zero-argument loader}`` (nothing is read yet).

    ``data`` may be a folder of STS folders (or its parent holding ``sts/``), one STS
    task folder, a folder of generic split files (``train.tsv``, ``dev.tsv``,
    ``test.tsv``, ...), or one generic pair file.
    """
    root = Path(data)
    if not root.exists():
        raise IsotropyError(f"data path {root} does not exist")
    if root.is_file():
        return {root.stem: lambda: load_pairs(root)}
    found: dict[str, object] = {}
    for base in (root, root / "sts"):
        if not base.is_dir():
            continue
        for name, (folder_name, loader) in STS_TASKS.items():
            folder = base / folder_name
            if name not in found and folder.is_dir() and _detect_task_folder(folder) == name:
                found[name] = lambda f=folder, n=name, ld=loader: ld(f) if ld else load_semeval(f, n)
    if found:
        return found
    single = _detect_task_folder(root)
    if single is not None:
        loader = STS_TASKS.get(single, (None, None))[1]
        return {single: (lambda: loader(root)) if loader else (lambda: load_semeval(root, single))}
    if _generic_split_files(root):
        return {root.name: lambda: load_pair_folder(root)}
    raise IsotropyError(f"{root} has none of the known data layouts: {_EXPECTED_LAYOUT}")


def load_tasks(data: str | os.PathLike | None = None, names: Iterable[str] | None = None) -> list[Task]:
    """Load the tasks ``names`` (default or ``all``: every task ``data`` holds).

    Without ``data``, names are looked up on the Hugging Face hub: the STS task names
    map to the MTEB copies (``STS-B`` -> ``mteb/stsbenchmark-sts``), and a name with a
    ``/`` is taken as a dataset id.
    """
    names = [n for n in (names or []) if n]
    want_all = not names or any(n.lower() == "all" for n in names)
    if data is None:
        if want_all:
            names = list(TASK_NAMES)
        tasks = []
        for n in names:
            if "/" in n:
                tasks.append(load_hf(n))
                continue
            canon = canonical_task_name(n)
            if canon is None:
                raise IsotropyError(
                    f"unknown task {n!r}; valid tasks: {', '.join(TASK_NAMES)}, all, or a Hugging Face dataset id"
                )
            tasks.append(load_hf(HF_NAMES[canon], name=canon))
        return tasks
    available = find_tasks(data)
    if want_all:
        return [available[n]() for n in available]
    tasks = []
    for n in names:
        if "/" in n:
            tasks.append(load_hf(n))
            continue
        key = canonical_task_name(n) or n
        if key not in available:
            match = [a for a in available if _norm(a) == _norm(n)]
            if not match:
                raise IsotropyError(
                    f"unknown task {n!r} in {data}; valid tasks there: {', '.join(available)}, all"
                    + ("" if canonical_task_name(n) is None else f" ({canonical_task_name(n)} was not found there)")
                )
            key = match[0]
        tasks.append(available[key]())
    return tasks
