"""The sentence pairs a user brings: generic pair files (TSV, CSV, JSON Lines) and Hugging Face datasets (layer 5).

A pair file has the columns ``sentence1``, ``sentence2`` and ``score`` (graded) or ``label`` (0/1),
an optional ``subset``; a folder of them is split by file name (``train``, ``dev``/``validation``,
``test``). :mod:`.tasks` finds them beside the STS folders and loads them by name.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable
from pathlib import Path

from .._hub import hub_offline_reason
from ..errors import IsotropyError
from ..storage.text import iter_json_objects
from .pairs import Pair, Task, _number, _read_lines

__all__ = ["PAIR_SUFFIXES", "load_pairs", "load_pair_folder", "load_hf"]


PAIR_SUFFIXES = (".tsv", ".csv", ".jsonl", ".json")
_SPLIT_NAMES = {"train": "train", "dev": "dev", "validation": "dev", "valid": "dev", "test": "test"}


def _generic_split_files(folder: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix.lower() in PAIR_SUFFIXES and p.stem.lower() in _SPLIT_NAMES:
            found.setdefault(_SPLIT_NAMES[p.stem.lower()], p)
    return found


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
    for col, side in (("sentence1", 0), ("sentence2", 1)):
        if not any(p[side].strip() for p in pairs):  # a shifted or blanked column: every score would be noise
            raise IsotropyError(f"{path}: the {col} column is empty on every row ({len(pairs)} rows); fill it or fix the columns")
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
