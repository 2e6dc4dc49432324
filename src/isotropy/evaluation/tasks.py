"""Sentence-pair tasks (layer 4): the STS folders, user pair files, Hugging Face datasets.

Everything here reads sentence-pair benchmarks: the STS folders in their original
formats (STS Benchmark, SICK, SemEval STS 2012-2016), a generic pair file a user
brings (TSV, CSV or JSON Lines), and Hugging Face datasets by name. Sentence files
(one sentence a line) are :func:`isotropy.storage.text.read_sentences`'.
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .._hub import hub_offline_reason
from ..errors import IsotropyError
from ..storage.text import iter_json_objects, read_sentences

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


# --------------------------------------------------------------------------- pairs and tasks


class Pair(NamedTuple):
    """One scored sentence pair. ``subset`` is the source file (STS-12..16) or genre (STS-B)."""

    s1: str
    s2: str
    score: float
    subset: str = ""


@dataclass
class Task:
    """A named set of sentence pairs, split by the dataset's own splits.

    ``metric`` is ``"spearman"`` (graded similarity scores) or ``"binary"``
    (0/1 labels: paraphrase, duplicate question). ``eval_splits`` are the splits
    whose pairs are scored (STS-B: test; SICK-R: test; STS-12..16: all pairs);
    ``train_split`` is the split ``--fit-on train`` fits on, or None when the task has none.
    ``aggregated`` is True when the subsets are separate datasets scored together (a SemEval
    year's files, a pair file's ``subset`` column): the ``aggregate`` setting of
    :func:`~isotropy.evaluation.evaluate` (all, mean, wmean) decides how their correlations
    combine. When False (STS-B, whose subsets are genres of one test set; SICK-R) the task is
    one correlation in every setting, as every paper scores it.
    """

    name: str
    splits: dict[str, list[Pair]]
    metric: str = "spearman"
    eval_splits: tuple[str, ...] = ("test",)
    train_split: str | None = None
    source: str = ""
    notes: list[str] = field(default_factory=list)
    aggregated: bool = False

    def pairs(self, splits: Iterable[str] | None = None) -> list[Pair]:
        """The pairs of ``splits`` (default: every split), in file order."""
        names = list(self.splits) if splits is None else list(splits)
        unknown = [s for s in names if s not in self.splits]
        if unknown:
            raise IsotropyError(f"task {self.name} has no split {unknown[0]!r}; its splits are {', '.join(self.splits)}")
        return [p for s in names for p in self.splits[s]]

    @property
    def eval_pairs(self) -> list[Pair]:
        return self.pairs(self.eval_splits)

    def sentences(self, splits: Iterable[str] | None = None) -> list[str]:
        """Unique sentences of ``splits`` (default: all), in order of first appearance."""
        # dict preserves insertion order: an order-stable de-duplication
        return list(dict.fromkeys(s for p in self.pairs(splits) for s in (p.s1, p.s2)))

    def counts(self) -> dict[str, int]:
        """Pairs per split."""
        return {name: len(pairs) for name, pairs in self.splits.items()}

    def subset_counts(self, splits: Iterable[str] | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.pairs(splits):
            out[p.subset] = out.get(p.subset, 0) + 1
        return out

    def __repr__(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.counts().items())
        return f"Task({self.name!r}, {self.metric}, {counts})"


# --------------------------------------------------------------------------- line reading


def _read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 file without terminators; errors name the file and line.

    The one sentence-file reader of :mod:`isotropy.storage.text`: it splits on ``\\n`` only (not
    ``str.splitlines``), because the STS files contain characters such as U+2028 that splitlines
    would treat as line breaks, which would shift the line pairing between input and gold files.
    """
    return read_sentences(path, allow_empty_file=True)


# The scale each STS task's annotators used (the task papers): a score outside it is a broken or
# edited file (a shifted column, a 0-100 scale), which would give a correlation without a word.
SCORE_RANGES = {"STS-B": (0.0, 5.0), "SICK-R": (1.0, 5.0), **{f"STS-{y}": (0.0, 5.0) for y in range(12, 17)}}


def _number(text: str, path: Path, line: int, what: str = "score", task: str | None = None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise IsotropyError(f"{path} line {line}: {what} {text.strip()[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise IsotropyError(f"{path} line {line}: {what} {text.strip()!r} is not a finite number")
    low, high = SCORE_RANGES.get(task or "", (-math.inf, math.inf))
    if not low <= value <= high:
        raise IsotropyError(f"{path} line {line}: {what} {text.strip()} is outside {task}'s range [{low:g}, {high:g}]")
    return value


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


PAIR_SUFFIXES = (".tsv", ".csv", ".jsonl", ".json")
_SPLIT_NAMES = {"train": "train", "dev": "dev", "validation": "dev", "valid": "dev", "test": "test"}


def _generic_split_files(folder: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix.lower() in PAIR_SUFFIXES and p.stem.lower() in _SPLIT_NAMES:
            found.setdefault(_SPLIT_NAMES[p.stem.lower()], p)
    return found


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


# --------------------------------------------------------------------------- generic pair files


def _pair_from_record(rec: dict, path: Path, line: int, kind: str | None) -> tuple[Pair, str]:
    for col in ("sentence1", "sentence2"):
        if not isinstance(rec.get(col), str):
            raise IsotropyError(f"{path} line {line}: missing or non-text {col!r}")
    if kind is None:
        kind = "score" if "score" in rec else "label" if "label" in rec else None
        if kind is None:
            raise IsotropyError(f"{path} line {line}: needs a 'score' (graded) or 'label' (0/1) field")
    if kind not in rec or rec[kind] is None or rec[kind] == "":
        raise IsotropyError(f"{path} line {line}: missing {kind!r}")
    value = rec[kind]
    if isinstance(value, bool):
        value = float(value)
    elif isinstance(value, (int, float)):
        value = float(value)
        if not math.isfinite(value):
            raise IsotropyError(f"{path} line {line}: {kind} {value!r} is not a finite number")
    else:
        value = _number(str(value), path, line, kind)
    if kind == "label" and value not in (0.0, 1.0):
        raise IsotropyError(f"{path} line {line}: label {rec[kind]!r} must be 0 or 1")
    return Pair(rec["sentence1"], rec["sentence2"], value, str(rec.get("subset", "") or "")), kind


def _read_pair_file(path: Path) -> tuple[list[Pair], str]:
    """Pairs of one generic file and its kind (``score`` or ``label``)."""
    suffix = path.suffix.lower()
    pairs: list[Pair] = []
    kind: str | None = None
    if suffix in (".jsonl", ".json"):
        for number, rec in iter_json_objects(path, "sentence1, sentence2, score"):
            pair, kind = _pair_from_record(rec, path, number, kind)
            pairs.append(pair)
    elif suffix in (".tsv", ".csv"):
        lines = _read_lines(path)
        if suffix == ".tsv":
            # TSV has no quoting convention: quotes inside sentences are literal
            rows: Iterable[list[str]] = (line.split("\t") for line in lines)
        else:
            rows = csv.reader(lines, strict=True)
        rows = iter(rows)
        try:
            header = [h.strip() for h in next(rows)]
        except StopIteration:
            raise IsotropyError(f"{path} is empty; expected a header line sentence1, sentence2, score (or label)") from None
        except csv.Error as exc:
            raise IsotropyError(f"{path} line 1: {exc}") from None
        missing = [c for c in ("sentence1", "sentence2") if c not in header]
        if missing or not ({"score", "label"} & set(header)):
            raise IsotropyError(
                f"{path} line 1: the header must name sentence1, sentence2 and score (or label); found {', '.join(header)}"
            )
        kind = "score" if "score" in header else "label"
        number = 1
        while True:
            try:
                cols = next(rows)
            except StopIteration:
                break
            except csv.Error as exc:
                raise IsotropyError(f"{path} line {number + 1}: {exc}") from None
            number += 1
            if not cols or (len(cols) == 1 and not cols[0].strip()):
                continue
            if len(cols) != len(header):
                raise IsotropyError(
                    f"{path} line {number}: expected {len(header)} {'tab-separated' if suffix == '.tsv' else 'comma-separated'} "
                    f"columns, found {len(cols)}"
                )
            pair, kind = _pair_from_record(dict(zip(header, cols)), path, number, kind)
            pairs.append(pair)
    else:
        raise IsotropyError(f"{path}: unknown pair file type {suffix!r}; use .tsv, .csv or .jsonl")
    if not pairs:
        raise IsotropyError(f"{path} has no sentence pairs")
    return pairs, kind or "score"


def load_pairs(path: str | os.PathLike, name: str | None = None, split: str = "test") -> Task:
    """One generic pair file (TSV, CSV or JSON Lines with ``sentence1``, ``sentence2``,
    ``score`` or ``label``) as a task with a single split."""
    path = Path(path)
    if not path.is_file():
        raise IsotropyError(f"{path} does not exist or is not a file")
    pairs, kind = _read_pair_file(path)
    return Task(
        name or path.stem,
        {split: pairs},
        metric="binary" if kind == "label" else "spearman",
        eval_splits=(split,),
        train_split=split if split == "train" else None,
        source=str(path),
        aggregated=any(p.subset for p in pairs),
    )


def load_pair_folder(folder: str | os.PathLike, name: str | None = None) -> Task:
    """A folder of generic split files: ``train``, ``dev`` (or ``validation``) and ``test``
    with suffix ``.tsv``, ``.csv`` or ``.jsonl``. The test split is evaluated (else dev, else train)."""
    folder = Path(folder)
    files = _generic_split_files(folder)
    if not files:
        raise IsotropyError(f"{folder} has no pair files named train/dev/test with suffix .tsv, .csv or .jsonl")
    splits: dict[str, list[Pair]] = {}
    kinds = set()
    for split in ("train", "dev", "test"):
        if split in files:
            splits[split], kind = _read_pair_file(files[split])
            kinds.add(kind)
    if len(kinds) > 1:
        raise IsotropyError(f"{folder}: some split files have a 'score' column and others a 'label' column")
    eval_split = "test" if "test" in splits else "dev" if "dev" in splits else "train"
    return Task(
        name or folder.name,
        splits,
        metric="binary" if kinds == {"label"} else "spearman",
        eval_splits=(eval_split,),
        train_split="train" if "train" in splits and eval_split != "train" else None,
        source=str(folder),
        aggregated=any(p.subset for p in splits[eval_split]),
    )


# --------------------------------------------------------------------------- Hugging Face datasets


def load_hf(dataset: str, name: str | None = None) -> Task:
    """A sentence-pair dataset from the Hugging Face hub (``sentence1``, ``sentence2``,
    ``score`` or ``label`` columns), e.g. ``mteb/stsbenchmark-sts``. Needs the optional
    ``datasets`` package (``pip install 'isotropy[hf]'``) and a reachable hub;
    otherwise one clear error pointing to ``--data DIR``."""
    local = "download it and pass --data DIR (a folder in the STS layouts or with train/dev/test.tsv pair files)"
    reason = hub_offline_reason()
    if reason is not None:
        raise IsotropyError(f"cannot load {dataset!r} from the Hugging Face hub: {reason}; {local}")
    try:
        import datasets as hf_datasets
    except ImportError:
        raise IsotropyError(
            f"loading {dataset!r} from the Hugging Face hub needs the 'datasets' package (pip install 'isotropy[hf]'); or {local}"
        ) from None
    try:
        dd = hf_datasets.load_dataset(dataset)
    except Exception as exc:  # network, missing dataset, auth: all become one line
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IsotropyError(f"cannot load {dataset!r} from the Hugging Face hub ({msg}); {local}") from None
    splits: dict[str, list[Pair]] = {}
    kind = None
    for split_name, ds in dd.items():
        split = _SPLIT_NAMES.get(split_name, split_name)
        pairs = []
        for i, rec in enumerate(ds, start=1):
            pair, kind = _pair_from_record(dict(rec), Path(f"{dataset}[{split_name}]"), i, kind)
            pairs.append(pair)
        splits[split] = pairs
    eval_split = "test" if "test" in splits else "dev" if "dev" in splits else next(iter(splits))
    return Task(
        name or dataset,
        splits,
        metric="binary" if kind == "label" else "spearman",
        eval_splits=(eval_split,),
        train_split="train" if "train" in splits and eval_split != "train" else None,
        source=f"hf:{dataset}",
        aggregated=any(p.subset for p in splits[eval_split]),
    )
