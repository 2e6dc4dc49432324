"""Ranking metrics (layer 5.5): nDCG@10 (graded), recall@100 and MRR@10, computed by trec_eval.

The code is :mod:`isotropy._ranking` (in the basics, because ``--method auto --dev`` with qrels,
in the selection layer below this one, scores rankings with the same functions); this module
hands its names on to the retrieval package. See that module for the gains, the MRR cut and how
ties are broken.
"""

from __future__ import annotations

from .._ranking import METRICS, mean_scores, rank_rows, run_from_ids, score_run

__all__ = ["METRICS", "rank_rows", "run_from_ids", "score_run", "mean_scores"]
