"""Token-level calibrations of a static model for ``isotropy calibrate`` (layer 6).

A static model's sentence vector is the mean of its tokens' rows ``w_t E[t]`` (``w_t``: the pooling's
SIF/IDF weights, 1 for the mean). A token-level calibration is a whitening fitted on those rows
themselves, not on sentence vectors (:mod:`isotropy.transforms.token_whitening`), and folds into the
table exactly like a sentence-level one (:mod:`.static_export`):

* ``token-whitening``: uniform whitening, every row counted once;
* ``zipfian-whitening``: Zipfian whitening (Yokoi et al., 2024), rows weighted by the token counts of
  the corpus being calibrated (tokens it never holds weigh 0);
* ``zipfian-whitening-rank``: Zipfian whitening weighted by the table's own probabilities (its counts
  when it has them, else Zipf's law over the row order: right for GloVe/word2vec files sorted by
  frequency, arbitrary for a subword vocabulary such as a model2vec distill's).

The corpus is still encoded (coverage, the card's average cosine, ``--eval``); the fit itself reads
only the table and, for ``zipfian-whitening``, the corpus's token counts.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from .._progress import ProgressBar
from ..encoders.static.table import CHUNK
from ..errors import IsotropyError
from ..transforms.methods import TOKEN_METHODS, Method
from .corpus import Corpus, Reservoir
from .fit import ANALYSIS_ROWS, CHUNK_SENTENCES, Fitted

__all__ = ["TOKEN_METHODS", "is_token_method", "token_estimator", "effective_table", "token_counts", "fit_token_calibration"]


def is_token_method(method: Any) -> bool:
    """Deprecated: whether ``method`` names a token-level method; read ``Method.level`` of a parsed method instead."""
    warnings.warn(
        "is_token_method is deprecated: parse the method (isotropy.transforms.methods) and read its level",
        DeprecationWarning,
        stacklevel=2,
    )
    return isinstance(method, str) and method in TOKEN_METHODS


def token_estimator(method: str, **options: Any):
    """Deprecated: the unfitted whitening of a token-level ``method`` with calibrate's options; build a
    :class:`~isotropy.calibration.request.CalibrationRequest` and call its ``method.build()`` instead."""
    warnings.warn(
        "token_estimator is deprecated: build a CalibrationRequest and use request.method.build()",
        DeprecationWarning,
        stacklevel=2,
    )
    from .request import CalibrationRequest

    return CalibrationRequest.from_options(method, **options).method.build()


def check_token_model(method: Method, model: Any) -> None:
    """Refuse a token-level method on a transformer (``model``: a name, folder or file, or None), in one line,
    before it loads."""
    from ..encoders.static import is_static_model

    if not is_static_model(model):
        name = "the default model" if model is None else str(model)
        raise IsotropyError(
            f"--method {method.name}: fitted on a static model's token table, and {name} is a transformer (its token vectors "
            "depend on the sentence); use a sentence-level method such as whitening, or a static --model (glove-6b-50d, a model2vec folder)"
        )


def effective_table(encoder: Any) -> np.ndarray:
    """The rows a static encoder averages, ``w_t E[t]`` (float32, V x d): the table with the pooling's token weights folded in."""
    from .static_export import folded_table

    return folded_table(encoder, None).vectors


def token_counts(encoder: Any, sentences: list[str], counts: np.ndarray | None = None) -> np.ndarray:
    """``counts`` (int64, one per row; None: zeros) plus the occurrences of each row's token in ``sentences``,
    tokenised as the encoder does (unknown tokens and the max_length cut included)."""
    table = encoder.runtime.table
    out = np.zeros(len(table), dtype=np.int64) if counts is None else counts
    limit = None if encoder.max_length >= encoder.runtime.position_limit else int(encoder.max_length)
    words = encoder.runtime.word_cache()  # the encoder's own tokenisation: the table's ids through its word cache
    for start in range(0, len(sentences), CHUNK):  # the encoder's chunk: one huge batch is far slower to tokenise
        flat, _, _, _ = words.token_array(sentences[start : start + CHUNK], limit)
        out += np.bincount(np.asarray(flat, dtype=np.int64), minlength=len(table))[: len(table)]
    return out


def rank_probabilities(table: Any, offset: float) -> np.ndarray:
    """The table's token probabilities: its counts when it has them, else Zipf's law over the row order with
    Mandelbrot's ``offset`` (:func:`~isotropy.transforms.token_whitening.zipf_probabilities`); 0 for a dropped unknown row."""
    from ..transforms.token_whitening import zipf_probabilities

    if table.counts is not None:
        return table.probabilities
    p = np.zeros(len(table), dtype=np.float64)
    rows = np.arange(len(table))
    if table.unk_id is not None and table.drop_unknown:
        rows = rows[rows != table.unk_id]
    p[rows] = zipf_probabilities(len(rows), offset)
    return p


def fit_table_whitening(
    encoder: Any, est: Any, source: str, counts: np.ndarray | None = None, where: str = "the corpus"
) -> tuple[Any, dict[str, Any]]:
    """``est`` (an unfitted :func:`token_estimator`) fitted on the rows a static ``encoder`` averages, weighted by
    ``source``: ``uniform`` (every row the model can average, once), ``corpus`` (``counts``, one per row, counted on
    ``where`` by :func:`token_counts`) or ``rank`` (:func:`rank_probabilities`); and what the card says of the fit."""
    table = effective_table(encoder)
    tab = encoder.runtime.table
    skip = tab.unk_id is not None and tab.drop_unknown  # an unknown-token row the model leaves out of its means
    notes: dict[str, Any] = {"level": "token", "table_rows": len(tab) - int(skip)}
    if source == "uniform":
        notes["weights"] = "every token once"
        return est.fit(np.delete(table, tab.unk_id, axis=0) if skip else table), notes
    if source == "corpus":
        weights, notes["weights"] = counts, f"token counts of {where}"
    else:
        weights = rank_probabilities(tab, est.zipf_offset)
        notes["weights"] = (
            "the table's token counts"
            if tab.counts is not None
            else f"Zipf's law over the row order (offset {est.zipf_offset:g})"
        )
    if weights is None or not np.any(weights > 0):
        raise IsotropyError(f"{where}: no sentence holds a token of the table, so no token has a weight to whiten by")
    notes["weighted_rows"] = int(np.count_nonzero(weights))
    return est.fit(table, sample_weight=weights), notes


def fit_token_calibration(
    encoder: Any, corpus: Corpus, method: Method, est: Any, *, total: int | None, show_progress: bool | None
) -> Fitted:
    """Encode ``corpus`` (coverage, a sample for the card) and fit ``est`` on the encoder's table (module docs);
    ``Fitted.token`` says what the card reports of it (rows of the table, where the weights came from)."""
    source = method.token_weights
    analysis = Reservoir(ANALYSIS_ROWS, seed=1)
    counts = np.zeros(len(encoder.runtime.table), dtype=np.int64) if source == "corpus" else None
    t0, n = time.perf_counter(), 0
    with ProgressBar(total or 0, show_progress, "encoding", min_total=4 * encoder.batch_size, unit="sentences") as bar:
        for chunk in corpus.chunks(CHUNK_SENTENCES):
            analysis.add(encoder.encode(chunk, progress=bar))
            if counts is not None:
                token_counts(encoder, chunk, counts)
            n += len(chunk)
    seconds = {"encode_s": time.perf_counter() - t0}
    t1 = time.perf_counter()
    transform, notes = fit_table_whitening(encoder, est, source, counts, corpus.where)
    seconds["fit_s"] = time.perf_counter() - t1
    return Fitted(transform=transform, n_sentences=n, n_fit=n, sample=analysis.sample(), seconds=seconds, token=notes)
