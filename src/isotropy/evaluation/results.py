"""The tables (layer 5): every pooling x method row of an evaluation, saved and printed.

:class:`Results` is what :func:`~isotropy.evaluation.evaluate` returns: the scores, the
settings and timings that produced them, and the notes its caption carries. It saves as
JSON with the markdown table beside it, both atomically and only over isotropy results
(:func:`check_results_output`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from ..storage.artifacts import check_output, output_file, write_json
from .metrics import AGGREGATES, check_aggregate

__all__ = ["TaskScore", "ResultRow", "Results", "check_results_output"]


@dataclass
class TaskScore:
    """One task's figure for one row. ``score`` is the table's number: Spearman x 100
    (graded tasks) or ROC-AUC x 100 (0/1 tasks)."""

    task: str
    metric: str
    score: float
    n_pairs: int
    fit_on: str
    subsets: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ResultRow:
    model: str
    pooling: str
    method: str
    scores: dict[str, TaskScore]
    fit_seconds: float = 0.0

    @property
    def avg(self) -> float:
        vals = [s.score for s in self.scores.values()]
        return float(np.mean(vals)) if vals else float("nan")


def _fmt(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


@dataclass
class Results:
    """Every pooling x method row, with the settings and timings that produced them."""

    rows: list[ResultRow]
    tasks: list[str]
    metrics: dict[str, str]
    settings: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def row(self, pooling: str, method: str) -> ResultRow:
        for r in self.rows:
            if r.pooling == pooling and r.method == method:
                return r
        raise KeyError((pooling, method))

    def score(self, pooling: str, method: str, task: str) -> float:
        return self.row(pooling, method).scores[task].score

    def caption(self) -> str:
        s = self.settings
        parts = [
            f"Spearman x 100 of cosine similarity vs gold (model {s.get('model')}, max_length {s.get('max_length')})",
            f"transform fitted on: {s.get('fit_on_description')}",
        ]
        if any(m != "raw" and "whitening" in m for m in s.get("methods", [])):
            parts.append(f"whitening shrinkage: {s.get('shrinkage')}")
        parts.extend(self._aggregate_caption())
        if any(m == "binary" for m in self.metrics.values()):
            binary = [t for t, m in self.metrics.items() if m == "binary"]
            parts.append(f"{', '.join(binary)}: ROC-AUC x 100 (0/1 labels)")
        parts.extend(self.notes)
        return "; ".join(parts)

    def _aggregate_caption(self) -> list[str]:
        """How the tasks of several datasets were aggregated (results of isotropy 0.1 pooled them: ``all``)."""
        s = self.settings
        how = s.get("aggregate", "all")
        agg = s.get("aggregated_tasks")
        if agg is None:  # written before the aggregate setting existed: STS-12..16 were pooled
            agg = [t for t in self.tasks if t.startswith("STS-1")]
        if not agg:
            return []
        whole = [t for t in self.tasks if t not in agg and self.metrics.get(t) != "binary"]
        single = f"; {', '.join(whole)}: one correlation in every setting" if whole else ""
        return [f"aggregate {how}: {', '.join(agg)} = {AGGREGATES[how]} (per-subset figures in the JSON){single}"]

    def with_aggregate(self, how: str) -> Results:
        """The same results in another aggregation setting (``all``, ``mean``, ``wmean``), from the
        per-subset figures every score keeps; nothing is encoded or fitted again."""
        check_aggregate(how)
        rows = []
        for r in self.rows:
            scores = {}
            for t, sc in r.scores.items():
                extra = dict(sc.extra)
                score = sc.score
                if "aggregate" in extra and not math.isnan(score):
                    key = {"all": "pooled", "mean": "subset_mean", "wmean": "subset_wmean"}[how]
                    score, extra["aggregate"] = float(extra.get(key, extra["pooled"])), how
                scores[t] = TaskScore(sc.task, sc.metric, score, sc.n_pairs, sc.fit_on, dict(sc.subsets), extra)
            rows.append(ResultRow(r.model, r.pooling, r.method, scores, r.fit_seconds))
        settings = {**self.settings, "aggregate": how, "aggregate_description": AGGREGATES[how]}
        return Results(rows, list(self.tasks), dict(self.metrics), settings, dict(self.timings), list(self.notes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "metrics": self.metrics,
            "settings": self.settings,
            "timings": self.timings,
            "notes": self.notes,
            "rows": [
                {
                    "model": r.model,
                    "pooling": r.pooling,
                    "method": r.method,
                    "avg": r.avg,
                    "fit_seconds": r.fit_seconds,
                    "scores": {t: asdict(sc) for t, sc in r.scores.items()},
                }
                for r in self.rows
            ],
        }

    def to_markdown(self, caption: bool = True) -> str:
        head = ["model", "pooling", "method", *self.tasks, "avg"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(self.tasks) + 1)]
        for r in self.rows:
            cells = [r.model, r.pooling, r.method, *(_fmt(r.scores[t].score) for t in self.tasks), _fmt(r.avg)]
            lines.append("| " + " | ".join(cells) + " |")
        table = "\n".join(lines)
        return f"{table}\n\n{self.caption()}.\n" if caption else table + "\n"

    def rich_table(self) -> Any:
        from rich.table import Table

        table = Table(caption=self.caption(), caption_justify="left")
        for col in ("model", "pooling", "method"):
            table.add_column(col)
        for t in [*self.tasks, "avg"]:
            table.add_column(t, justify="right")
        best = {
            t: max((r.scores[t].score for r in self.rows if not math.isnan(r.scores[t].score)), default=None) for t in self.tasks
        }
        for r in self.rows:
            cells = []
            for t in self.tasks:
                v = r.scores[t].score
                cells.append(
                    f"[bold]{_fmt(v)}[/bold]" if best[t] is not None and v == best[t] and len(self.rows) > 1 else _fmt(v)
                )
            table.add_row(r.model, r.pooling, r.method, *cells, _fmt(r.avg))
        return table

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Results:
        """Rebuild results from :meth:`to_dict` output (e.g. a JSON file written by :meth:`save`)."""
        try:
            rows = [
                ResultRow(
                    r["model"],
                    r["pooling"],
                    r["method"],
                    {t: TaskScore(**sc) for t, sc in r["scores"].items()},
                    float(r.get("fit_seconds", 0.0)),
                )
                for r in data["rows"]
            ]
            return cls(
                rows=rows,
                tasks=list(data["tasks"]),
                metrics=dict(data["metrics"]),
                settings=dict(data["settings"]),
                timings=dict(data.get("timings", {})),
                notes=list(data.get("notes", [])),
            )
        except (KeyError, TypeError) as exc:
            raise IsotropyError(f"not an isotropy results file: missing or malformed {exc}") from None

    @classmethod
    def load(cls, path: str | os.PathLike) -> Results:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise IsotropyError(f"cannot read results from {path}: {exc}") from None
        return cls.from_dict(data)

    def save(self, out: str | os.PathLike, *, force: bool = False) -> tuple[Path, Path]:
        """Write ``out`` (JSON) and the markdown table beside it (same name, ``.md``); atomic.

        Existing files are overwritten only when they are isotropy results, unless ``force``.
        """
        out, md = check_results_output(out, force=force)
        write_json(out, self.to_dict(), kind="results", force=force)
        with output_file(md, "results-table", "w", force=force) as fh:
            fh.write(self.to_markdown())
        return out, md


def check_results_output(out: str | os.PathLike, *, force: bool = False, inputs: Sequence[Any] = ()) -> tuple[Path, Path]:
    """The JSON path and the markdown path beside it, checked before any work (see :func:`isotropy.storage.artifacts.check_output`)."""
    out = check_output(out, "results", force=force, inputs=inputs, option="--output")
    md = out.with_suffix(".md") if out.suffix.lower() != ".md" else out.with_name(out.name + ".md")
    check_output(md, "results-table", force=force, inputs=inputs, option="--output (its .md table)")
    return out, md
