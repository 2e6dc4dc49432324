"""What the static-factory scripts share: the cached teacher, one fit, the scores."""

from __future__ import annotations

import copy
import os
import time

import numpy as np


class CachedTeacher:
    """Serves the cached teacher vectors of known texts (lines and spans), looked up by text."""

    def __init__(self, texts: list[str], Y: np.ndarray):
        self.row = {t: i for i, t in enumerate(texts)}
        self.Y = Y

    def encode(self, sentences, show_progress=None):
        return self.Y[[self.row[s] for s in sentences]]


def fit(start, sentences: list[str], teacher: CachedTeacher, how: str, **kw) -> tuple:
    """(the fitted StaticModel, what was recorded, seconds of statistics + solve)."""
    import torch  # noqa: F401  the product's teacher is a torch model, loaded before its fit; the cached one is not

    from isotropy.distill.run import fit_on_corpus

    static = copy.deepcopy(start)
    t0 = time.perf_counter()
    info = fit_on_corpus(static, teacher, sentences, 256, 0.0, how, None, False, **kw)
    return static, info, time.perf_counter() - t0 - info["seconds"]["teacher"]


def encode(static, sentences: list[str]) -> np.ndarray:
    return np.asarray(static.encode(sentences, normalize=False, show_progress_bar=False), dtype=np.float64)


def sts(static, tasks) -> list[float]:
    from static import score

    return [score(t, encode(static, t.sentences())) for t in tasks]


def cranfield(static, task) -> dict[str, float]:
    from isotropy._ranking import mean_scores, rank_rows, run_from_ids, score_run

    def unit(X):
        return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)

    D, Q = unit(encode(static, list(task.docs))), unit(encode(static, list(task.queries)))
    ranked = rank_rows(Q @ D.T, 100)
    scores = mean_scores(score_run(task.qrels, run_from_ids(task.query_ids, task.doc_ids, ranked)))
    return {k: 100 * v for k, v in scores.items()}


def evaluate(static, tasks, cran_task) -> dict:
    s = sts(static, tasks)
    return {"sts": s, "avg": float(np.mean(s)), "cranfield": cranfield(static, cran_task)}


def stsb_train(static, tasks) -> float:
    """Spearman x 100 on the STS-B train split (5749 pairs; the reported STS-B figure is its test split)."""
    from _report import pair_spearman

    pairs = next(t for t in tasks if t.name == "STS-B").pairs(["train"])
    return pair_spearman(encode(static, [p.s1 for p in pairs]), encode(static, [p.s2 for p in pairs]), [p.score for p in pairs])


def tokenlearn_fit(start, sentences: list[str], Y: np.ndarray) -> tuple:
    import logging

    from tokenlearn.train import train_model

    logging.getLogger("tokenlearn").setLevel(logging.WARNING)
    os.environ.setdefault("TQDM_DISABLE", "1")
    t0 = time.perf_counter()
    model = train_model(copy.deepcopy(start), list(sentences), np.asarray(Y, dtype=np.float32), device="cpu", pca_dims=256)
    return model, time.perf_counter() - t0
