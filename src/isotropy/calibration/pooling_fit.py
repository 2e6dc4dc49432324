"""``--method auto --pooling auto``: the pooling chosen with the calibration (issue #24).

Without ``--dev`` the pooling rule's pooling is used (today each encoder's default: mean on a static
table, the model's own on a transformer) and the selection records that the rule chose it. With ``--dev``
the seeded sample auto compares on (:func:`.fit.select_sample`, at most ``SELECT_ROWS`` sentences: memory
stays bounded) is encoded ONCE for every pooling offered (``Encoder.encode_multi`` reads them all off the
same forward pass, or the same table lookups), and so are the dev texts;
:func:`isotropy.selection.pooling_choice.choose_pooling` decides, and the choice is fitted on the whole
corpus, streamed, by the encoder with the chosen pooling (:func:`.fit.fit_choice`). Everything written
downstream (folder, card, ``isotropy.json``, terminal) reads that encoder.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from .corpus import Corpus
from .fit import AutoMethod, Fitted, fit_auto, fit_choice, select_sample
from .request import AUTO_POOLING, CalibrationRequest

__all__ = ["AUTO_POOLING", "check_auto_pooling", "fit_auto_pooling"]


def check_auto_pooling(pooling: Any, method: str) -> bool:
    """Deprecated: whether ``pooling`` asks auto to choose it (:attr:`.request.CalibrationRequest.auto_pooling`, where
    ``--pooling auto`` without ``--method auto`` is refused)."""
    warnings.warn("check_auto_pooling is deprecated: read CalibrationRequest.auto_pooling", DeprecationWarning, stacklevel=2)
    return CalibrationRequest.from_options(method, pooling=pooling).auto_pooling


def fit_auto_pooling(
    encoder: Any, corpus: Corpus, auto: AutoMethod, *, total: int | None, show_progress: bool | None
) -> tuple[Any, Fitted]:
    """``(encoder with the chosen pooling, its fit)`` (module docstring)."""
    from ..selection.pooling_choice import choose_pooling, offered_poolings, pooled_dev, rule_pooling, rule_pooling_record
    from ..selection.signals import incumbent_of, pooling_note

    rule = rule_pooling(encoder)
    if auto.dev is None:
        enc = encoder.with_pooling(rule)
        fitted = fit_auto(enc, corpus, auto, total=total, show_progress=show_progress)
        sel = fitted.selection
        sel.pooling = rule_pooling_record(enc)
        sel.notes = [n for n in sel.notes if n != pooling_note(enc)]  # the record says the same, once
        return enc, fitted
    offered = offered_poolings(encoder)
    t0 = time.perf_counter()
    sentences, total = select_sample(corpus, total)
    Xs = encoder.encode_multi(sentences, offered, show_progress=show_progress)
    devs = pooled_dev(auto.dev, encoder, offered, show_progress=show_progress)
    seconds = {"encode_s": time.perf_counter() - t0}
    t1 = time.perf_counter()
    incumbent, why = incumbent_of(encoder, task=auto.task)
    sel = choose_pooling(
        {p: np.asarray(Xs[p], dtype=np.float64) for p in offered},
        devs,
        incumbent_pooling=rule,
        incumbent=incumbent,
        why=why,
        candidates=auto.candidates,
        source=corpus.where,
        dev_source=auto.dev_source,
    )
    seconds["select_s"] = time.perf_counter() - t1
    chosen = sel.pooling["chosen"]
    enc = encoder.with_pooling(chosen)
    X = np.asarray(Xs[chosen], dtype=np.float64)
    del Xs  # the other poolings' vectors are not needed any more
    return enc, fit_choice(enc, corpus, sentences, X, sel, total=total, seconds=seconds, show_progress=show_progress)
