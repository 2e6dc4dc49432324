"""Retrieval quality: documents, queries and qrels scored by nDCG@10, recall@100 and MRR@10.

* :mod:`.data`: tasks in the BEIR, plain and SMART (Cranfield) layouts;
* :mod:`.metrics`: trec_eval's metrics (``pytrec_eval``), with ties broken by document row;
* :mod:`.kinds`: exact search, the index kinds of :mod:`isotropy.search`, int8 and binary codes;
* :mod:`.harness`: :func:`evaluate_retrieval`, every pooling x calibration x search kind
  (``isotropy eval --retrieval FOLDER``);
* :mod:`.index_eval`: what an index costs against exact search (``index build --eval-queries``).

It sits (layer 5.5) above the features (layer 5) because it uses two of them: the evaluation's calibrations
and the search index.
"""

from __future__ import annotations

from .data import RetrievalTask, load_beir, load_cranfield, load_plain, load_retrieval, read_qrels
from .harness import RetrievalResults, evaluate_retrieval, parse_retrieval_method
from .metrics import METRICS, rank_rows, run_from_ids, score_run

__all__ = [
    "METRICS",
    "RetrievalResults",
    "RetrievalTask",
    "evaluate_retrieval",
    "load_beir",
    "load_cranfield",
    "load_plain",
    "load_retrieval",
    "parse_retrieval_method",
    "rank_rows",
    "read_qrels",
    "run_from_ids",
    "score_run",
]
