"""The benchmark harness: Spearman on the STS tasks for every pooling x calibration.

``evaluate(tasks, ...)`` encodes each task's unique sentences once (all requested
poolings from the same forward passes, cached on disk), fits each calibration
(every registered transform: centering, all-but-the-top, common-component removal,
whitening and its soft presets, flow) on the chosen corpus (``fit_on``: target, train,
others or a file; :mod:`.fitting`), and scores the cosine similarity of every evaluation
pair against the gold score:

* graded tasks (STS-B, SICK-R, STS-12..16, user ``score`` files): Spearman x 100;
  a task made of several datasets (a year of STS-12..16) is aggregated as ``aggregate``
  says: ``all`` (default: one correlation over the pooled pairs, SBERT's and SimCSE's
  setting), ``mean`` or ``wmean`` (the plain or pair-weighted mean of the subset
  correlations, SentEval's; BERT-flow and BERT-whitening report ``wmean``); every
  score keeps the subset figures, so :meth:`Results.with_aggregate` switches settings;
* 0/1 tasks (user ``label`` files): ROC-AUC x 100, plus accuracy at the cosine
  threshold tuned on another split (dev, else train) or, with one split only, by
  two-fold cross-fitting.
"""

from __future__ import annotations

from ..encoders.cache import CACHE_ENV, VectorCache, default_cache_dir, encode_cached, sentences_digest
from ..storage.text import read_sentences
from .fitting import KEYWORDS as FIT_KEYWORDS
from .harness import evaluate
from .methods import METHOD_FORMS, Method, method_forms, parse_method
from .metrics import (
    AGGREGATES,
    accuracy,
    aggregate_subsets,
    best_threshold,
    check_aggregate,
    cosine_rows,
    cross_fit_accuracy,
    roc_auc,
    spearman,
)
from .results import ResultRow, Results, TaskScore, check_results_output
from .tasks import (
    HF_NAMES,
    PAIR_SUFFIXES,
    STS_TASKS,
    TASK_NAMES,
    Pair,
    Task,
    canonical_task_name,
    find_tasks,
    load_hf,
    load_pair_folder,
    load_pairs,
    load_semeval,
    load_sick,
    load_stsb,
    load_tasks,
)

__all__ = [
    # the harness
    "evaluate",
    # tasks (what was isotropy.data)
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
    "read_sentences",
    # fit corpora and aggregation settings
    "FIT_KEYWORDS",
    "AGGREGATES",
    "check_aggregate",
    "aggregate_subsets",
    # metrics
    "cosine_rows",
    "spearman",
    "roc_auc",
    "best_threshold",
    "accuracy",
    "cross_fit_accuracy",
    # methods
    "METHOD_FORMS",
    "method_forms",
    "Method",
    "parse_method",
    # results
    "TaskScore",
    "ResultRow",
    "Results",
    "check_results_output",
    # the vector cache (isotropy.encoders.cache)
    "VectorCache",
    "encode_cached",
    "default_cache_dir",
    "sentences_digest",
    "CACHE_ENV",
]
