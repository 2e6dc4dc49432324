"""Fit corpora (layer 5): what each task's transforms are fitted on, and the fits themselves.

``fit_on`` (``--fit-on``) is one of:

* ``target``: every pair of the task, all splits, both sentences, duplicates kept: the
  papers' setting (BERT-whitening ``eng/eval.py`` l.78-81, BERT-flow ``--use_full_for_training``);
* ``train``: the task's train split (a task without one falls back to ``target``, said in the caption);
* ``others``: the sentences of the OTHER evaluated tasks (all their splits, both sides), never
  the test task's: a general corpus that has not seen the test sentences. A sentence that also
  appears in the test task (compared after collapsing whitespace and case) is removed, and the
  count is reported: STS-B was built from the SemEval STS tasks of 2012-2017 (its readme.txt), so it
  overlaps STS-12..16;
* a text file of sentences (one a line): fitted once per pooling and used for every task.

The fitting rows of one (task, pooling) are gathered once (:class:`FitData`); the transforms
solved from moments alone (``AffineTransform``: centering, abtt, whitening, ...) share one
:class:`~isotropy.transforms.moments.Moments` of them instead of each summing the rows again.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from ..storage.text import read_sentences
from ..transforms.base import AffineTransform
from ..transforms.moments import Moments
from .tasks import Pair, Task

__all__ = [
    "KEYWORDS",
    "OthersCorpus",
    "FitData",
    "pair_sides",
    "fit_pairs",
    "overlap_key",
    "plan_others",
    "resolve_fit_on",
    "describe_fits",
    "fit_description",
    "fit_one",
]

KEYWORDS = ("target", "train", "others")


def pair_sides(pairs: Sequence[Pair]) -> list[str]:
    """Both sentences of every pair, in order, duplicates kept (what the papers fit on)."""
    return [s for p in pairs for s in (p.s1, p.s2)]


def fit_pairs(task: Task, fit_mode: str) -> list[Pair]:
    """The pairs a transform is fitted on for ``task`` (``fit_mode`` target or train)."""
    if fit_mode == "train" and task.train_split is not None:
        return task.splits[task.train_split]
    return task.pairs()


def overlap_key(sentence: str) -> str:
    """How ``others`` decides that two sentences are the same: whitespace collapsed, case folded."""
    return " ".join(sentence.split()).casefold()


@dataclass
class OthersCorpus:
    """One task's fitting rows under ``fit_on="others"``: rows of the other tasks' vectors."""

    parts: list[tuple[int, np.ndarray]]  # (position of the other task, rows of its task.sentences())
    sources: list[str]  # the other tasks' names
    rows: int  # sentences fitted on (pair sides, duplicates kept)
    removed: int  # pair sides dropped because the test task holds the same sentence
    removed_unique: int  # distinct sentences among them

    def describe(self, task: str) -> str:
        return (
            f"other tasks ({self.rows} sentences of {', '.join(self.sources)}; {self.removed} "
            f"({self.removed_unique} distinct) also in {task} removed)"
        )


def plan_others(tasks: Sequence[Task]) -> list[OthersCorpus]:
    """For each task, the rows of the other tasks it is fitted on under ``others`` (same order as ``tasks``)."""
    sides = [pair_sides(t.pairs()) for t in tasks]
    keys = [[overlap_key(s) for s in ss] for ss in sides]
    rows_of = []
    for t, ss in zip(tasks, sides):
        index = {s: i for i, s in enumerate(t.sentences())}
        rows_of.append(np.array([index[s] for s in ss], dtype=np.int64))
    held = [set(k) for k in keys]
    plans = []
    for i in range(len(tasks)):
        parts, removed, dropped = [], 0, set()
        for j in range(len(tasks)):
            if j == i:
                continue
            keep = np.array([k not in held[i] for k in keys[j]], dtype=bool)
            removed += int((~keep).sum())
            dropped.update(k for k, kept in zip(keys[j], keep) if not kept)
            parts.append((j, rows_of[j][keep]))
        n = sum(len(r) for _, r in parts)
        plans.append(OthersCorpus(parts, [tasks[j].name for j, _ in parts], n, removed, len(dropped)))
    return plans


def resolve_fit_on(fit_on: str, any_fit: bool) -> tuple[str, list[str] | None]:
    """``(fit mode, the --fit-on file's non-blank sentences)``; the file is read only when a method fits."""
    if fit_on in KEYWORDS:
        return fit_on, None
    path = Path(fit_on)
    if not path.is_file():
        raise IsotropyError(f"--fit-on {fit_on!r} is neither 'target', 'train', 'others' nor an existing sentence file")
    if not any_fit:
        return "file", None
    sentences = [s for s in read_sentences(path) if s.strip()]
    if not sentences:
        raise IsotropyError(f"--fit-on {path} has no non-blank lines to fit on")
    return "file", sentences


def describe_fits(run: Any) -> dict[str, str]:
    """``{task: what its transforms are fitted on}``, as the table's fit_on column says it."""
    fit_desc: dict[str, str] = {}
    for i, task in enumerate(run.tasks):
        if run.fit_mode == "file":
            fit_desc[task.name] = f"file {Path(run.fit_on).name} ({len(run.fit_sentences or [])} sentences)"
        elif run.fit_mode == "others":
            fit_desc[task.name] = run.others[i].describe(task.name) if run.others else "other tasks (none fitted)"
        elif run.fit_mode == "train" and task.train_split is not None:
            fit_desc[task.name] = f"train split ({len(task.splits[task.train_split])} pairs)"
        elif run.fit_mode == "train":
            fit_desc[task.name] = "target (no train split)"
        else:
            fit_desc[task.name] = "target"
    return fit_desc


def fit_description(run: Any) -> str:
    """What the caption says the transforms were fitted on."""
    if run.fit_mode == "train":
        fallback = [t for t, d in run.fit_desc.items() if d.startswith("target")]
        return "each task's train split" + (
            f" ({', '.join(fallback)}: no train split, fitted on the whole task instead)" if fallback else ""
        )
    if run.fit_mode == "file":
        return list(dict.fromkeys(run.fit_desc.values()))[0]
    if run.fit_mode == "others":
        removed = ", ".join(f"{t.name} {o.removed}" for t, o in zip(run.tasks, run.others or []))
        return (
            "others (each task's transforms fitted on the sentences of the other tasks, never its own; "
            f"sentences also in the test task removed: {removed or 'none'})"
        )
    return "target (every pair of the task, all splits)"


def fit_rows_needed(run: Any, task_index: int) -> tuple[int, str]:
    """How many sentences a task's transforms are fitted on, and where they come from (for messages)."""
    task = run.tasks[task_index]
    if run.fit_mode == "others":
        return run.others[task_index].rows, run.fit_desc[task.name]
    return len(pair_sides(fit_pairs(task, run.fit_mode))), run.fit_desc[task.name]


class FitData:
    """The fitting rows of one (task or file, pooling), gathered on first use, and their moments."""

    def __init__(self, gather: Callable[[], np.ndarray], name: str):
        self._gather, self.name = gather, name
        self._X: np.ndarray | None = None
        self._moments: Moments | None = None

    @property
    def X(self) -> np.ndarray:
        if self._X is None:
            self._X = self._gather()
        return self._X

    def moments(self) -> Moments:
        if self._moments is None:
            self._moments = Moments().update(self.X, name=self.name)
        return self._moments


def _fit_transform(transform: Any, data: FitData) -> Any:
    if isinstance(transform, AffineTransform):
        # every moments-based method of this pooling shares one pass over the rows
        return type(transform).from_moments(data.moments(), **transform.get_params())
    # the flow's own progress bar would clash with the fitting bar (rich shows one live display)
    if "show_progress" in inspect.signature(transform.fit).parameters:
        return transform.fit(data.X, show_progress=False)
    return transform.fit(data.X)


def fit_one(transform: Any, data: FitData, where: str, failures: dict, key: tuple, errors: str, warned: dict | None) -> Any:
    """Fit ``transform`` on ``data``; a failure raises (``errors="raise"``) or is recorded and returns None.
    Warnings (e.g. whitening dropping directions without variance) are recorded in ``warned``."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fitted = _fit_transform(transform, data)
        if caught and warned is not None:
            warned[key] = "; ".join(dict.fromkeys(str(w.message) for w in caught))
        return fitted
    except IsotropyError as exc:
        if errors == "raise":
            raise IsotropyError(f"fitting {where}: {exc}") from None
        failures[key] = str(exc)
        print(f"warning: fitting {where} failed, its cell is left empty: {exc}", file=sys.stderr)
        return None
