"""A scored sentence pair, a task (named pairs by split), and the checks of what a pair file holds (layer 5).

:class:`Pair` and :class:`Task` are what every loader returns (:mod:`.tasks`: the STS folders;
:mod:`.pair_files`: a user's pair files and Hugging Face datasets); the line reader and the score
check here are the ones they all use, so a file's problem reads the same whichever loader met it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..errors import IsotropyError
from ..storage.text import read_sentences

__all__ = ["Pair", "Task", "SCORE_RANGES"]


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
