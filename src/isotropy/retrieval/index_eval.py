"""What an index costs its user (layer 5.5): ``isotropy index build --eval-queries Q --qrels R``.

The queries (one a line; a query's id is its line number - 1) are searched in the built index and
scored against the qrels (``query document gain``, a document's id being its corpus line number - 1,
the index's own ids), and against exact search over the same calibrated vectors: the index's recall
of the exact top 10. An exact (``flat``) index is its own reference; for ``hnsw`` and ``ivf`` the
corpus is encoded a second time (the index does not hand back its vectors).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..storage.text import iter_sentences, read_sentences
from .data import RetrievalTask, build_task, read_qrels
from .metrics import mean_scores, rank_rows, run_from_ids, score_run

__all__ = ["load_index_queries", "evaluate_index", "describe"]


def load_index_queries(corpus: str | os.PathLike, queries: str | os.PathLike, qrels: str | os.PathLike) -> RetrievalTask:
    """The queries and qrels, checked against the corpus's line count before the index is built."""
    rows = len(read_sentences(corpus))
    docs = [(str(i), "", f"{corpus} line {i + 1}") for i in range(rows)]
    qs = [(str(n - 1), text, f"{queries} line {n}") for n, text in iter_sentences(queries)]
    return build_task("index", str(queries), docs, qs, read_qrels(qrels))


def evaluate_index(index: Any, task: RetrievalTask, show_progress: bool | None = None) -> dict:
    """``{"queries": n, "index": {metric: value}, "exact": {...}, "recall@10_vs_exact": r}`` (values x 1)."""
    Q = index.embed(task.queries, show_progress=show_progress)
    k = min(100, len(index))
    found = index.search_vectors(Q, k).ids
    if index.kind == "flat":
        exact = found
    else:
        D = index.embed(index.sentences, show_progress=show_progress)
        exact = rank_rows(Q @ D.T, k)
    out: dict[str, Any] = {"queries": len(task.queries), "kind": index.kind}
    for name, ranked in (("index", found), ("exact", exact)):
        out[name] = mean_scores(score_run(task.qrels, run_from_ids(task.query_ids, task.doc_ids, ranked)))
    hits = [len(set(a[:10]) & set(b[:10])) / min(10, k) for a, b in zip(exact, found)]
    out["recall@10_vs_exact"] = float(np.mean(hits))
    return out


def describe(report: dict) -> str:
    """Two lines for the command line."""
    i, e = report["index"], report["exact"]
    return (
        f"{report['kind']} index on {report['queries']} queries: recall of the exact top 10 {100 * report['recall@10_vs_exact']:.1f}%; "
        f"nDCG@10 {100 * i['ndcg@10']:.2f} (exact {100 * e['ndcg@10']:.2f}), recall@100 {100 * i['recall@100']:.2f} "
        f"(exact {100 * e['recall@100']:.2f}), MRR@10 {100 * i['mrr@10']:.2f} (exact {100 * e['mrr@10']:.2f})"
    )
