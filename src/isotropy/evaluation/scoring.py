"""One task's score from its pairs' cosines, and whether its gold column can be scored at all (layer 5).

:func:`score_task` turns the cosines of a task's evaluated pairs into its figure: Spearman x 100
(aggregated over a task's subsets as ``aggregate`` says) or, for 0/1 labels, ROC-AUC x 100 and the
accuracy at a threshold tuned on another split; :func:`unscorable` says, before any encoding, why a
task's gold column gives no figure. :mod:`.harness` calls both for every cell of the table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .metrics import accuracy, aggregate_subsets, best_threshold, cross_fit_accuracy, roc_auc, spearman
from .results import TaskScore
from .tasks import Task

__all__ = ["score_task", "unscorable"]


def score_task(task: Task, cos_by_split: dict[str, np.ndarray], fit_on: str, aggregate: str = "all") -> TaskScore:
    eval_pairs = task.eval_pairs
    cos = np.concatenate([cos_by_split[s] for s in task.eval_splits])
    gold = np.array([p.score for p in eval_pairs], dtype=np.float64)
    subsets: dict[str, float] = {}
    names = list(dict.fromkeys(p.subset for p in eval_pairs))
    if task.metric == "binary":
        auc = roc_auc(cos, gold)
        others = [s for s in ("dev", "train") if s in task.splits and s not in task.eval_splits]
        if others:
            tune = others[0]
            t_cos = cos_by_split[tune]
            t_gold = np.array([p.score for p in task.splits[tune]])
            thr = best_threshold(t_cos, t_gold)
            extra = {"roc_auc": auc, "accuracy": accuracy(cos, gold, thr), "threshold": thr, "threshold_tuned_on": tune}
        else:
            acc, thrs = cross_fit_accuracy(cos, gold)
            extra = {"roc_auc": auc, "accuracy": acc, "threshold": thrs, "threshold_tuned_on": "2-fold cross-fitting"}
        return TaskScore(task.name, "binary", auc, len(eval_pairs), fit_on, {}, extra)
    counts: dict[str, int] = {}
    if len(names) > 1:
        sub = np.array([p.subset for p in eval_pairs])
        for name in names:
            m = sub == name
            subsets[name] = spearman(cos[m], gold[m])
            counts[name] = int(m.sum())
    pooled = spearman(cos, gold)
    extra: dict[str, Any] = {}
    if subsets:
        extra["subset_mean"] = aggregate_subsets(pooled, subsets, counts, "mean")
        extra["subset_wmean"] = aggregate_subsets(pooled, subsets, counts, "wmean")
        extra["subset_pairs"] = counts
    score = pooled
    if task.aggregated:
        extra["aggregate"] = aggregate
        extra["pooled"] = pooled
        score = aggregate_subsets(pooled, subsets, counts, aggregate)
    return TaskScore(task.name, "spearman", score, len(eval_pairs), fit_on, subsets, extra)


def unscorable(task: Task) -> str | None:
    """Why no score can be computed from ``task``'s gold column, whatever the vectors (None: it can).

    Spearman of a constant column is undefined (scipy returns NaN, shown as "-"), and so is
    ROC-AUC with one class; saying so before any encoding beats a table of dashes.
    """
    gold = np.array([p.score for p in task.eval_pairs], dtype=np.float64)
    where = f"task {task.name}" + (f" ({task.source})" if task.source and task.source != task.name else "")
    splits = "+".join(task.eval_splits)
    if len(gold) < 2:
        return f"{where} has {len(gold)} evaluated pair{'s' if len(gold) != 1 else ''} ({splits}); a correlation needs at least 2"
    if np.ptp(gold) == 0:
        what = "label" if task.metric == "binary" else "gold score"
        need = "both 0 and 1 labels" if task.metric == "binary" else "gold scores that differ"
        return (
            f"{where}: all {len(gold)} {what}s of its evaluated pairs ({splits}) are {gold[0]:g}, so no "
            f"{'ROC-AUC' if task.metric == 'binary' else 'Spearman correlation'} can be computed; it needs {need}"
        )
    return None
