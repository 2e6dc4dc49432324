"""Calibrate: a corpus in, a calibrated embedding model that every tool can load out (layer 6).

It sits above the features because it uses all of them: the encoder, a transform fitted on
streamed moments, the sentence-transformers and ONNX exports, the anisotropy figures and
the evaluation harness. :func:`calibrate` is ``isotropy calibrate`` in Python;
:mod:`.pipeline` holds the steps, :mod:`.corpus` the streamed input, :mod:`.fit` the
methods and the fit, :mod:`.scoring` the card's figures, :mod:`.card` the model card.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import IsotropyError
from .pipeline import Calibration, run_calibration
from .request import CalibrationRequest

__all__ = ["calibrate", "run_calibration", "Calibration", "CalibrationRequest"]


def _is_sentence_transformer(obj: Any) -> bool:
    return any(c.__module__.split(".")[0] == "sentence_transformers" for c in type(obj).__mro__)


def calibrate(corpus: Any, output: Any = None, **options: Any):
    """Fit a calibration on ``corpus`` and write a sentence-transformers model folder to ``output``; returns it loaded.

    ``corpus`` is a text file (one sentence a line), a glob of shards, ``"-"`` (standard
    input) or a list of sentences; ``output`` the model folder. Options (all keyword):
    ``model``, ``pooling`` (``"auto"`` with ``method="auto"``: the pooling rule's, or with ``dev`` the best
    (pooling, calibration) of the poolings offered for the model's kind), ``method`` (default ``"whitening"``; any registered transform or
    preset, or ``"auto"``: :func:`isotropy.selection.select_calibration` chooses among
    ``candidates``, by ``dev`` when given: scored pairs, or a retrieval folder whose qrels rank by nDCG@10), ``n_components``, ``power``, ``shrinkage``, ``max_length``, ``batch_size``,
    ``device``, ``onnx``, ``quantize`` (``"int8"``), ``eval_data`` (what ``isotropy eval --data``
    takes), ``pooling_stats`` (the sif and idf poolings' token frequencies), ``stock_only``, ``normalize``,
    ``engine`` (``"dask"``) and ``address``,
    ``show_progress``, ``force``. See :mod:`isotropy.calibration.pipeline`.

    The folder loads with plain ``SentenceTransformer(output)`` when the method is affine and
    the pooling is cls, last-avg, pooler or a layers average; otherwise it needs isotropy and
    ``trust_remote_code=True`` (its README says so), and ``stock_only=True`` refuses it.

    Compatibility: ``calibrate(st_model, transform, normalize=False)`` -- a ``SentenceTransformer``
    in memory and a fitted transform (or its folder) -- appends the transform to the model and
    returns it (:func:`isotropy.integrations.calibrate`), as isotropy 0.1 did.
    """
    if _is_sentence_transformer(corpus):
        from ..integrations import calibrate as append_transform

        return append_transform(corpus, output, **options)
    if not isinstance(output, (str, os.PathLike)):
        raise IsotropyError("calibrate(corpus, output, ...) needs output, the model folder to write")
    return run_calibration(corpus, output, **options).model
