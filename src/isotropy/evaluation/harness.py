"""The benchmark harness (layer 5): :func:`evaluate`, one named step at a time.

An evaluation resolves its methods, fitting corpus and tasks (every problem with the
input is said before any encoding), loads the encoder, encodes each task's unique
sentences once through the vector cache (:mod:`isotropy.encoders.cache`), then fits
every method per pooling (per task, or once on a ``--fit-on`` file) and scores every
task (:mod:`.scoring`: one task's figure from its cosines); :class:`~isotropy.evaluation.results.Results`
holds the table.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._progress import ProgressBar
from ..encoders.cache import VectorCache, encode_cached
from ..encoders.poolings import parse_pooling
from ..errors import IsotropyError
from ..transforms.methods import METHOD_FORMS, Method, parse_method
from ..transforms.moments import parse_shrinkage
from .fitting import (
    FitData,
    OthersCorpus,
    describe_fits,
    fit_description,
    fit_one,
    fit_pairs,
    fit_rows_needed,
    pair_sides,
    plan_others,
    resolve_fit_on,
)
from .metrics import AGGREGATES, check_aggregate, cosine_rows
from .results import ResultRow, Results, TaskScore
from .scoring import score_task, unscorable
from .tasks import Task, load_tasks

__all__ = ["evaluate"]


# --------------------------------------------------------------------------- evaluate


def _prepare(tasks, data, methods, fit_on, aggregate, shrinkage, flow_params, cache, errors, show_progress) -> _Run:
    """Check the arguments, parse the methods, resolve the fit corpus and the tasks: all before any model loads."""
    if errors not in ("raise", "record"):
        raise IsotropyError(f"errors must be 'raise' or 'record', got {errors!r}")
    check_aggregate(aggregate)
    parsed = _parse_methods(methods)
    if any(m.kind == "whitening" for m in parsed):
        shrinkage = parse_shrinkage(shrinkage)
    any_fit = any(m.kind != "raw" for m in parsed)
    fit_mode, fit_sentences = resolve_fit_on(fit_on, any_fit)
    task_list, skipped = _resolve_tasks(tasks, data)
    others = None
    if fit_mode == "others" and any_fit:
        if len(task_list) < 2:
            raise IsotropyError(
                f"--fit-on others fits each task's transforms on the OTHER tasks' sentences, but only one task is "
                f"evaluated ({task_list[0].name}): nothing to fit on; evaluate several tasks (--task all) or use --fit-on target"
            )
        others = plan_others(task_list)
    return _Run(
        parsed,
        shrinkage,
        flow_params,
        fit_on,
        fit_mode,
        fit_sentences,
        task_list,
        skipped,
        _open_cache(cache),
        errors=errors,
        show_progress=show_progress,
        aggregate=aggregate,
        others=others,
    )


def evaluate(
    tasks: Sequence[Task | str] | None = None,
    *,
    data: str | os.PathLike | None = None,
    model: str | os.PathLike | None = None,
    poolings: Sequence[str] | None = None,
    methods: Sequence[str] = ("raw", "whitening"),
    fit_on: str = "target",
    aggregate: str = "all",
    max_length: int | None = None,
    batch_size: int = 64,
    shrinkage: float | str = 0.0,
    flow_params: dict[str, Any] | None = None,
    cache: bool | str | os.PathLike | VectorCache = True,
    encoder: Any = None,
    show_progress: bool | None = None,
    errors: str = "raise",
) -> Results:
    """Score every pooling x method on every task.

    Parameters
    ----------
    tasks:
        :class:`~isotropy.evaluation.Task` objects, or task names read from ``data``
        (None or ``["all"]``: every task there; see :func:`isotropy.evaluation.load_tasks`).
    model, max_length, batch_size:
        Passed to :class:`isotropy.Encoder` (ignored when ``encoder`` is given); ``max_length`` None is the
        model's own maximum, as in ``isotropy eval`` (the papers' STS tables, and docs/RESULTS.md, use 64).
    poolings:
        Poolings to compare (default: the model's own).
    methods:
        ``raw``, ``whitening``, ``whitening-K``, ``soft-whitening-BETA``, ``flow``, every other
        registered transform (``center``, ``abtt``, ``abtt-K``, ``common-component``) and preset
        (``soft-0.25``, ``soft-0.5``, ``soft-0.75``); see :mod:`isotropy.evaluation.methods`.
    fit_on:
        ``target`` (every pair of the task, all splits, both sentences, as the papers do),
        ``train`` (the task's train split; a task without one falls back to ``target``),
        ``others`` (the other tasks' sentences, never the test task's: sentences it also
        holds are removed and counted), or a text file of sentences (one a line) fitted
        once and used for every task. See :mod:`isotropy.evaluation.fitting`.
    aggregate:
        How a task of several datasets (STS-12..16) becomes one figure: ``all`` (default:
        one correlation over the pooled pairs), ``mean`` or ``wmean`` (the plain or
        pair-weighted mean of the per-subset correlations); see ``AGGREGATES``.
    shrinkage:
        Passed to :class:`isotropy.Whitening`: 0 (default, the papers' exact
        whitening; directions without variance are dropped with a warning, recorded
        in the results), a float in [0, 1] or ``"auto"`` (Ledoit-Wolf).
    cache:
        True (default folder, ``$ISOTROPY_CACHE`` or ``~/.cache/isotropy``), False,
        a folder, or a :class:`VectorCache`.
    errors:
        ``"raise"`` (default): a transform that cannot be fitted (singular covariance,
        diverged flow) stops with one clear error; ``"record"``: its cells become NaN
        (``-`` in the tables), the message is kept in the JSON and the caption.
    """
    t_start = time.perf_counter()
    run = _prepare(tasks, data, methods, fit_on, aggregate, shrinkage, flow_params, cache, errors, show_progress)
    _load_encoder(run, encoder, model, poolings, max_length, batch_size)
    run.fit_desc = describe_fits(run)
    _check_fit_sizes(run)  # too few sentences to fit a method: said before any encoding
    _encode_fit_file(run)
    rows = _fit_and_score(run, _encode_tasks(run))
    run.timings["total_s"] = time.perf_counter() - t_start
    return Results(
        notes=_notes(run),
        rows=[rows[(p, m.name)] for p in run.poolings for m in run.methods],
        tasks=[t.name for t in run.tasks],
        metrics={t.name: t.metric for t in run.tasks},
        settings=_settings(run),
        timings=run.timings,
    )


# --------------------------------------------------------------------------- the steps


@dataclass
class _Run:
    """One evaluation: its resolved settings, and what the steps of :func:`evaluate` found so far."""

    methods: list[Method]
    shrinkage: float | str
    flow_params: dict[str, Any] | None
    fit_on: str
    fit_mode: str  # target | train | others | file
    fit_sentences: list[str] | None  # the --fit-on FILE corpus (None: no file, or only raw)
    tasks: list[Task]
    skipped: list[tuple[Task, str]]
    cache: VectorCache
    errors: str = "raise"
    show_progress: bool | None = None
    aggregate: str = "all"
    others: list[OthersCorpus] | None = None  # per task (same order), under --fit-on others
    encoder: Any = None
    poolings: list[str] = field(default_factory=list)
    dim: int = 0
    fit_desc: dict[str, str] = field(default_factory=dict)
    file_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    file_data: dict[str, FitData] = field(default_factory=dict)  # --fit-on FILE: per pooling
    file_transforms: dict[tuple[str, str], Any] = field(default_factory=dict)
    failures: dict[tuple[str, str, str], str] = field(default_factory=dict)
    warned: dict[tuple[str, str, str], str] = field(default_factory=dict)
    auto: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # --method auto: choice, evidence
    timings: dict[str, float] = field(default_factory=lambda: {"encode_s": 0.0, "fit_s": 0.0})

    def fit_key(self, task: Task, pooling: str, method: Method) -> tuple[str, str, str]:
        """Where a fit's failure or warning is recorded: one fit per task, or one shared (``""``) for a file."""
        return (task.name if self.fit_mode != "file" else "", pooling, method.name)


def _parse_methods(methods: Sequence[str]) -> list[Method]:
    """The methods, parsed, duplicates (by canonical name) dropped; none at all is an error."""
    parsed: list[Method] = []
    for m in methods:
        pm = parse_method(m)
        if pm.level == "token":  # fitted on a static model's table: calibrate's, not a table's column
            raise IsotropyError(
                f"unknown method {m!r}; valid methods: {', '.join(METHOD_FORMS)} (token-level methods: isotropy calibrate)"
            )
        if pm.name not in [p.name for p in parsed]:
            parsed.append(pm)
    if not parsed:
        raise IsotropyError("no method given; valid methods: " + ", ".join(METHOD_FORMS))
    return parsed


def _resolve_tasks(
    tasks: Sequence[Task | str] | None, data: str | os.PathLike | None
) -> tuple[list[Task], list[tuple[Task, str]]]:
    """``(the tasks to score, the skipped ones with why)``: names are loaded from ``data``."""
    if tasks is None or any(isinstance(t, str) for t in tasks):
        names = [t for t in (tasks or []) if isinstance(t, str)]
        task_list = load_tasks(data, names) + [t for t in (tasks or []) if isinstance(t, Task)]
    else:
        task_list = list(tasks)
    if not task_list:
        raise IsotropyError("no task to evaluate")
    # a gold column that cannot be correlated (all scores equal) fails now, before any encoding; in
    # a run of several tasks the others are still evaluated and the caption says which was skipped
    skipped = [(t, why) for t in task_list if (why := unscorable(t)) is not None]
    if len(skipped) == len(task_list):
        why = skipped[0][1]
        others = f" (and {len(skipped) - 1} other tasks likewise)" if len(skipped) > 1 else ""
        raise IsotropyError(f"{why}{others}; nothing to evaluate")
    task_list = [t for t in task_list if all(t is not s for s, _ in skipped)]
    for _, why in skipped:
        print(f"warning: skipped {why}", file=sys.stderr)
    return task_list, skipped


def _open_cache(cache: bool | str | os.PathLike | VectorCache | None) -> VectorCache:
    if isinstance(cache, VectorCache):
        return cache
    if cache is True:
        return VectorCache()
    if cache is False or cache is None:
        return VectorCache(enabled=False)
    return VectorCache(cache)


def _load_encoder(
    run: _Run,
    encoder: Any,
    model: str | os.PathLike | None,
    poolings: Sequence[str] | None,
    max_length: int | None,
    batch_size: int,
) -> None:
    """The encoder (built unless given), the canonical pooling names, and the width every method must fit."""
    if encoder is None:
        from ..encoders.encoder import Encoder
        from ..encoders.static import parse_cache

        with parse_cache(run.cache):  # --no-cache / --cache-dir apply to a word-vector file's parse cache too
            encoder = Encoder(model, pooling=(poolings[0] if poolings else None), max_length=max_length, batch_size=batch_size)
    run.encoder = encoder
    run.poolings = list(dict.fromkeys(parse_pooling(p).name for p in (poolings or [encoder.pooling])))
    run.dim = dim = int(encoder.dim)
    for m in run.methods:
        m.check(dim)


def _check_fit_sizes(run: _Run) -> None:
    """Too few sentences to fit a method (on the --fit-on file, or on a task) is one error, before any encoding."""
    if run.fit_sentences is not None:
        for m in run.methods:
            need = m.min_fit_rows(run.dim, run.shrinkage, run.flow_params)
            if len(run.fit_sentences) < need:
                raise IsotropyError(
                    f"--fit-on {run.fit_on} has {len(run.fit_sentences)} sentences; {m.name} of {run.dim}-dimensional vectors "
                    f"needs at least {need} ({m.fit_hint()})"
                )
    if run.fit_mode == "file" or (run.fit_mode == "others" and run.others is None):
        return
    for i, task in enumerate(run.tasks):
        n_fit, where = fit_rows_needed(run, i)
        for m in run.methods:
            need = m.min_fit_rows(run.dim, run.shrinkage, run.flow_params)
            if n_fit < need:
                raise IsotropyError(
                    f"task {task.name} has {n_fit} sentences to fit {m.name} on ({where}); "
                    f"{run.dim}-dimensional vectors need at least {need} ({m.fit_hint()})"
                )


def _encode_fit_file(run: _Run) -> None:
    """The vectors of the fitting corpus shared by every task (--fit-on FILE), through the cache."""
    if run.fit_sentences is None:
        return
    t0 = time.perf_counter()
    run.file_vectors = encode_cached(run.encoder, run.fit_sentences, run.poolings, run.cache, run.show_progress)
    run.timings["encode_s"] += time.perf_counter() - t0
    name = f"vectors of {run.fit_on}"
    run.file_data = {p: FitData(lambda v=v: v, name) for p, v in run.file_vectors.items()}


def _encode_tasks(run: _Run) -> list[dict[str, np.ndarray]]:
    """``[{pooling: vectors of task.sentences()}]`` per task (same order), through the cache.

    Every task is encoded before any fit, so the encoder's progress bar and the
    fitting bar never overlap (rich shows one live display at a time).
    """
    encoded: list[dict[str, np.ndarray]] = []
    for task in run.tasks:
        t0 = time.perf_counter()
        encoded.append(encode_cached(run.encoder, task.sentences(), run.poolings, run.cache, run.show_progress))
        run.timings["encode_s"] += time.perf_counter() - t0
    return encoded


def _fit_and_score(run: _Run, encoded: list[dict[str, np.ndarray]]) -> dict[tuple[str, str], ResultRow]:
    """Fit every method on every pooling and score every task: ``{(pooling, method): row}``."""
    rows = {(p, m.name): ResultRow(str(run.encoder.model_name), p, m.name, {}) for p in run.poolings for m in run.methods}
    fits_per_method = 1 if run.fit_mode == "file" else len(run.tasks)
    n_fits = sum(1 for m in run.methods if m.kind != "raw") * len(run.poolings) * fits_per_method
    bar = ProgressBar(n_fits, run.show_progress, "fitting", min_total=2)
    try:
        for i in range(len(run.tasks)):
            _score_one_task(run, i, encoded, rows, bar)
            if run.others is None:
                encoded[i] = {}  # no other task reads these vectors: free them
    finally:
        bar.close()
    return rows


def _fit_data(run: _Run, i: int, encoded: list[dict[str, np.ndarray]], pooling: str) -> FitData:
    """The rows task ``i``'s transforms of ``pooling`` are fitted on (gathered when first needed)."""
    task = run.tasks[i]
    name = f"{pooling} vectors of {task.name}'s fitting sentences"
    if run.fit_mode == "file":
        return run.file_data.get(pooling) or FitData(lambda: run.file_vectors[pooling], name)
    if run.fit_mode == "others":  # gathered only when a method fits (run.others is None when none does)
        return FitData(lambda: np.concatenate([encoded[j][pooling][rows] for j, rows in run.others[i].parts]), name)
    index = {s: k for k, s in enumerate(task.sentences())}
    rows = np.array([index[s] for s in pair_sides(fit_pairs(task, run.fit_mode))], dtype=np.int64)
    return FitData(lambda: encoded[i][pooling][rows], name)


def _score_one_task(
    run: _Run, i: int, encoded: list[dict[str, np.ndarray]], rows: dict[tuple[str, str], ResultRow], bar: ProgressBar
) -> None:
    """Fill task ``i``'s cell of every row: calibrate its vectors, then score its pairs' cosines."""
    task = run.tasks[i]
    index = {s: k for k, s in enumerate(task.sentences())}
    split_idx = {
        s: (np.array([index[p.s1] for p in pairs], dtype=np.int64), np.array([index[p.s2] for p in pairs], dtype=np.int64))
        for s, pairs in task.splits.items()
    }
    fit_desc = run.fit_desc[task.name]
    for p in run.poolings:
        X = encoded[i][p]
        data = _fit_data(run, i, encoded, p)
        for m in run.methods:
            row = rows[(p, m.name)]
            Y = X if m.kind == "raw" else _calibrate(run, task, p, m, X, data, row, bar)
            if Y is None:
                row.scores[task.name] = TaskScore(
                    task.name,
                    task.metric,
                    float("nan"),
                    len(task.eval_pairs),
                    fit_desc,
                    extra={"error": run.failures[run.fit_key(task, p, m)]},
                )
                continue
            cos_by_split = {s: cosine_rows(Y[a], Y[b]) for s, (a, b) in split_idx.items()}
            score = score_task(task, cos_by_split, fit_desc, run.aggregate)
            w = run.warned.get(run.fit_key(task, p, m))
            if w:
                score.extra["warning"] = w
            score.extra.update(run.auto.get(run.fit_key(task, p, m), {}))
            row.scores[task.name] = score


def _calibrate(
    run: _Run, task: Task, pooling: str, m: Method, X: np.ndarray, data: FitData, row: ResultRow, bar: ProgressBar
) -> np.ndarray | None:
    """``X`` through method ``m``'s fitted transform (None: it could not be fitted); the time goes to the row."""
    t1 = time.perf_counter()
    key = run.fit_key(task, pooling, m)
    if run.fit_mode == "file" and (pooling, m.name) in run.file_transforms:
        transform = run.file_transforms[(pooling, m.name)]
    else:
        where = (
            f"{m.name} on {pooling} vectors of {run.fit_on}" if run.fit_mode == "file" else f"{m.name} on {task.name} ({pooling})"
        )
        if m.kind == "auto":
            from .auto import select_for_cell

            i = next(k for k, t in enumerate(run.tasks) if t is task)
            transform, run.auto[key] = select_for_cell(run, i, pooling, data.X, seed=0)
        else:
            transform = fit_one(m.build(run.shrinkage, run.flow_params), data, where, run.failures, key, run.errors, run.warned)
        if run.fit_mode == "file":
            run.file_transforms[(pooling, m.name)] = transform
        bar.advance(description=f"fitted {m.name}" + (f" on {task.name}" if run.fit_mode != "file" else "") + f" ({pooling})")
    if transform is None and m.kind == "auto" and key in run.auto:  # auto kept the raw vectors
        Y = X
    else:
        Y = None if transform is None else np.asarray(transform.transform(X))
    dt = time.perf_counter() - t1
    row.fit_seconds += dt
    run.timings["fit_s"] += dt
    return Y


# --------------------------------------------------------------------------- what the results say


def _settings(run: _Run) -> dict[str, Any]:
    tasks = {
        t.name: {
            "source": t.source,
            "eval_splits": list(t.eval_splits),
            "pairs": t.counts(),
            "unique_sentences": len(t.sentences()),
            "fit_on": run.fit_desc[t.name],
        }
        for t in run.tasks
    }
    for t, o in zip(run.tasks, run.others or []):
        tasks[t.name].update(fit_sentences=o.rows, fit_sources=o.sources, overlap_removed=o.removed)
        tasks[t.name]["overlap_removed_distinct"] = o.removed_unique
    settings = {
        "model": str(run.encoder.model_name),
        "max_length": int(run.encoder.max_length),
        "dim": run.dim,
        "poolings": run.poolings,
        "methods": [m.name for m in run.methods],
        "fit_on": run.fit_on,
        "fit_on_description": fit_description(run),
        "aggregate": run.aggregate,
        "aggregate_description": AGGREGATES[run.aggregate],
        "aggregated_tasks": [t.name for t in run.tasks if t.aggregated and t.metric != "binary"],
        "shrinkage": run.shrinkage,
        "cache": str(run.cache.directory) if run.cache.enabled else None,
        "cache_hits": run.cache.hits,
        "tasks": tasks,
    }
    if run.flow_params:
        settings["flow_params"] = dict(run.flow_params)
    return settings


def _notes(run: _Run) -> list[str]:
    """The caption's notes: skipped tasks, failed fits, and one line per method that warned."""
    notes = [f"skipped {why}" for _, why in run.skipped]
    notes += [
        f"{m} on {t + ' ' if t else ''}{p} could not be fitted ({msg.split(';')[0]})" for (t, p, m), msg in run.failures.items()
    ]
    by_method: dict[str, list[tuple[str, str, str]]] = {}
    for key, msg in run.warned.items():
        by_method.setdefault(key[2], []).append((key[0], key[1], msg))
    for m, items in by_method.items():
        t, p, msg = items[0]
        notes.append(
            f"{m} warned on {len(items)} of its fits, e.g. {t + ' ' if t else ''}{p}: {msg.split(';')[0]} "
            f"(every warning is in the JSON)"
        )
    return notes
