"""``isotropy distill --corpus``: the one pass over the corpus, the teacher map and the token fit (layer 6).

One streamed pass: each chunk of sentences is tokenised by the static model (the ids its ``encode``
averages, unknown tokens dropped, ``max_length`` kept), pooled from the distilled table, and encoded once
by the teacher (L2-normalised, as the sentence-transformers pipeline returns it). The chunk updates

* a :class:`~isotropy.transforms.teacher_map.TeacherMap` (the sentence-level least-squares map, ``--fit map``),
* with ``--fit tokens``, two :class:`~isotropy.transforms.token_regression.TokenRegression` accumulators: every
  tenth sentence (line number mod 10 == 9) into a held-out one, the others into the fitting one.

Output width: ``--dims`` is the width of the model written. When it is below the teacher's, the teacher's
vectors are projected on their ``dims`` principal axes (centred scatter of the corpus's teacher vectors, read
off the map's moments; the vectors are not centred by the projection): the map then goes to that space, and the
token sums are projected with it (they are linear in the targets, so the teacher is encoded once).

``--fit tokens`` then solves the token regression with the mapped table as the prior, for each strength in
``LAMBDAS`` on the fitting sentences, keeps the one with the least squared error on the held-out sentences
(from their sums; no label of any task is read), and solves again on all sentences at that strength,
warm-started at the held-out choice. An explicit ``lam`` skips the choice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._progress import ProgressBar
from ..errors import IsotropyError
from ..transforms.teacher_map import TeacherMap
from ..transforms.token_regression import TokenRegression, pooling_matrix
from .corpus import Corpus

__all__ = ["CorpusFit", "fit_corpus", "static_ids", "principal_axes", "LAMBDAS", "HELD_OUT", "FITS"]

CHUNK = 2048  # sentences per streamed step
HELD_OUT = 10  # every HELD_OUT-th sentence is held out to choose the regularisation
LAMBDAS = (0.3, 1.0, 3.0, 10.0, 30.0)  # token-fit strengths tried, relative to an average token's data weight
GRID_ITERATIONS = 10  # per strength tried (the held-out error settles within ~10 on the wiki corpus)
FITS = ("map", "tokens")
DEFAULT_LAMBDA = 3.0  # when the corpus is too small to hold sentences out


@dataclass
class CorpusFit:
    """What the pass gathered: the map, the token sums (fit and held out) and how long each part took."""

    teacher_map: TeacherMap
    fit: TokenRegression | None = None
    held: TokenRegression | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    sentences: int = 0
    empty: int = 0


def static_ids(static: Any, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(flat ids, tokens per sentence)`` as the static model's ``encode`` averages them (unknown tokens dropped,
    at most ``max_length`` each)."""
    ids = static.tokenize(sentences)
    limit = getattr(static, "max_length", None)
    if limit:
        ids = [row[:limit] for row in ids]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter((t for row in ids for t in row), dtype=np.int64, count=int(lengths.sum()))
    return flat, lengths


def fit_corpus(
    static: Any,
    teacher: Any,
    corpus: Any,
    *,
    alpha: float = 0.0,
    tokens: bool = True,
    show_progress: bool | None = None,
) -> CorpusFit:
    """The streamed pass (module docs) over ``corpus`` (a file, a glob of shards, or a list of sentences)."""
    source = Corpus(corpus)
    table = np.asarray(static.embedding, dtype=np.float64)
    V = len(table)
    tm = TeacherMap(alpha=alpha)
    out = CorpusFit(tm)
    t_teacher = t_stats = 0.0
    seen, first, varied = 0, None, False
    with ProgressBar(source.count() or 0, show_progress, "encoding the corpus with the teacher", unit="sentences") as bar:
        for chunk in source.chunks(CHUNK):
            first = chunk[0] if first is None else first
            varied = varied or any(s != first for s in chunk)
            t0 = time.perf_counter()
            Y = np.asarray(teacher.encode(chunk, show_progress=False), dtype=np.float64)
            Y /= np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12)
            t1 = time.perf_counter()
            flat, lengths = static_ids(static, chunk)
            X = pooling_matrix(flat, lengths, V) @ table
            tm.partial_fit(X, Y)
            if tokens:
                if out.fit is None:
                    out.fit, out.held = TokenRegression(V, Y.shape[1]), TokenRegression(V, Y.shape[1])
                held = (np.arange(seen, seen + len(chunk)) % HELD_OUT) == HELD_OUT - 1
                for acc, rows in ((out.fit, ~held), (out.held, held)):
                    if rows.any():
                        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
                        take = np.concatenate([np.arange(s, s + n) for s, n in zip(starts[rows], lengths[rows])] or [[]])
                        acc.partial_fit(flat[take.astype(np.int64)], lengths[rows], Y[rows])
            out.empty += int((lengths == 0).sum())
            seen += len(chunk)
            t_teacher += t1 - t0
            t_stats += time.perf_counter() - t1
            bar.advance(len(chunk))
    out.sentences = seen
    out.seconds = {"teacher": t_teacher, "statistics": t_stats}
    if seen < 2:
        raise IsotropyError(f"the corpus {source.where} has {seen} sentence(s): a fit needs at least 2")
    if out.empty == seen:
        raise IsotropyError(f"no sentence of the corpus {source.where} holds a token of the model's vocabulary")
    if not varied:
        raise IsotropyError(f"the corpus {source.where} repeats one sentence: it gives a single equation, nothing to fit")
    return out


def principal_axes(tm: TeacherMap, k: int) -> np.ndarray:
    """``(d_teacher, k)``: the top ``k`` eigenvectors of the centred scatter of the teacher's corpus vectors."""
    d = tm.n_features_in_
    S = tm.moments_.scatter[d:, d:]
    w, U = np.linalg.eigh((S + S.T) / 2)
    order = np.argsort(w)[::-1][:k]
    U = U[:, order]
    U *= np.where(U[np.abs(U).argmax(axis=0), np.arange(k)] < 0, -1.0, 1.0)  # a fixed sign per axis
    return U


def solve_tokens(
    fit: TokenRegression,
    held: TokenRegression,
    prior: np.ndarray,
    lam: float | None = None,
    show_progress: bool | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """The token fit (module docs): ``lam`` chosen on the held-out sums when None, then solved on all sentences."""
    t0 = time.perf_counter()
    tried: dict[str, float] = {}
    start = None
    chosen = "given" if lam is not None else "held-out"
    if lam is None and held.n_ == 0:
        lam, chosen = DEFAULT_LAMBDA, "default (too few sentences to hold any out)"
    if lam is None:
        best = None
        with ProgressBar(len(LAMBDAS), show_progress, "choosing the token fit's strength on held-out sentences") as bar:
            for value in LAMBDAS:
                E, _ = fit.solve(prior, value, x0=start, rtol=1e-2, maxiter=GRID_ITERATIONS)
                err = held.error(E) / max(held.n_, 1)
                tried[f"{value:g}"] = err
                if best is None or err < best[0]:
                    best, start = (err, value, E), E
                bar.advance(1)
        lam = best[1]
        start = best[2]
    both = TokenRegression(fit.vocab_size, fit.dim).merge(fit).merge(held)
    with ProgressBar(0, show_progress, "fitting the token rows", unit="iterations") as bar:
        E, info = both.solve(prior, lam, x0=start, rtol=1e-2, maxiter=100, progress=lambda i: bar.advance(1))
    info.update(
        {
            "lambda": float(lam),
            "chosen": chosen,
            "held_out_error": tried,
            "prior_held_out_error": held.error(prior) / max(held.n_, 1),
            "sentences": both.n_,
            "seconds": time.perf_counter() - t0,
        }
    )
    return E, info
