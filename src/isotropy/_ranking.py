"""Ranking metrics shared by the search evaluation and auto's few-label mode (layer 1).

nDCG@10 (graded), recall@100 and MRR@10 computed by ``pytrec_eval`` (``pip install
'isotropy[retrieval]'``), the Python binding of NIST's ``trec_eval``, which BEIR and MTEB also use:
the reference implementation, compiled (no JIT warm-up, unlike ranx), so our figures are the ones
the literature's are. Gains are linear (trec_eval's ``ndcg_cut``: gain = the qrel's value; BEIR's
setting), a qrel above 0 is relevant, MRR@10 is trec_eval's ``recip_rank`` on the top 10 only.

Ties are ours to break, not the library's: a ranking is ordered by score (descending), then by the
document's row in the collection (ascending), and handed to trec_eval as strictly decreasing
pseudo-scores, so trec_eval's own tie rule (by document id, as a string) never applies.

It sits in the basics because two layers rank: :mod:`isotropy.retrieval` (``eval --retrieval``,
``index build --eval-queries``) and :mod:`isotropy.selection` (``--method auto --dev`` with qrels),
which sits below it; both call these functions, so the figures are the same code's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import IsotropyError

__all__ = ["METRICS", "rank_rows", "run_from_ids", "score_run", "mean_scores"]

METRICS = ("ndcg@10", "recall@100", "mrr@10")
_TREC = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100"}


def _pytrec_eval():
    try:
        import pytrec_eval
    except ImportError:  # pragma: no cover - an install without the extra
        raise IsotropyError("retrieval metrics need pytrec_eval: pip install 'isotropy[retrieval]'") from None
    return pytrec_eval


def rank_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best columns of each row of ``scores``: by score descending, then column ascending."""
    scores = np.asarray(scores)
    n = scores.shape[1]
    k = min(int(k), n)
    out = np.empty((scores.shape[0], k), dtype=np.int64)
    cols = np.arange(n)
    for i, row in enumerate(scores):
        if k < n:  # the k-th value, then everything at least as good: ties at the cut are kept whole
            kth = np.partition(-row, k - 1)[k - 1]
            cand = cols[-row <= kth]
        else:
            cand = cols
        order = np.lexsort((cand, -row[cand]))  # last key first: score, then column
        out[i] = cand[order][:k]
    return out


def run_from_ids(query_ids: Sequence[str], doc_ids: Sequence[str], ranked: np.ndarray) -> dict[str, dict[str, float]]:
    """A trec_eval run from ranked document rows (best first; -1 = no hit), as strictly decreasing scores."""
    run: dict[str, dict[str, float]] = {}
    for q, row in zip(query_ids, ranked):
        hits = [int(j) for j in row if j >= 0]
        run[q] = {doc_ids[j]: float(len(hits) - r) for r, j in enumerate(hits)}
    return run


def score_run(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """``{query: {metric: value}}`` for every query of ``qrels`` (a query with no hit scores 0)."""
    pte = _pytrec_eval()
    full = {q: run.get(q, {}) for q in qrels}
    top10 = {q: dict(sorted(r.items(), key=lambda kv: -kv[1])[:10]) for q, r in full.items()}
    # trec_eval skips a query whose run is empty; such a query found nothing: it scores 0
    present = {q for q, r in full.items() if r}
    main = pte.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate({q: full[q] for q in present})
    mrr = pte.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate({q: top10[q] for q in present})
    out = {}
    for q in qrels:
        out[q] = {m: float(main[q][t]) if q in main else 0.0 for m, t in _TREC.items()}
        out[q]["mrr@10"] = float(mrr[q]["recip_rank"]) if q in mrr else 0.0
    return out


def mean_scores(per_query: dict[str, dict[str, float]]) -> dict[str, float]:
    """The mean of each metric over the queries (x 1, not x 100)."""
    if not per_query:
        return {m: float("nan") for m in METRICS}
    return {m: float(np.mean([v[m] for v in per_query.values()])) for m in METRICS}
