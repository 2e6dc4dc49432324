"""``isotropy index build --method auto``: the index's calibration chosen on its own corpus, the evidence kept with it.

The corpus is encoded once; :func:`isotropy.selection.select_calibration` compares the
candidates on those vectors (label-free: the criteria encode word-deleted copies of a sample
of the sentences with the same encoder) and the chosen one (``raw``: none) is the index's
transform. The evidence (:meth:`Selection.to_dict`) is saved in the index's ``config.json``
under ``selection`` and read back by :meth:`Index.load` (``index.selection``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..encoders import Encoder
from ..errors import IsotropyError
from ..storage.artifacts import check_output
from ..storage.text import read_sentences
from .index import Index

__all__ = ["build_auto_index"]


def build_auto_index(
    corpus: str | os.PathLike,
    output: str | os.PathLike,
    *,
    model: str | os.PathLike | None = None,
    pooling: str | None = None,
    max_length: int | None = None,
    candidates: Any = None,
    kind: str = "flat",
    batch_size: int = 64,
    backend: str = "torch",
    pooling_stats: Any = None,
    seed: int = 0,
    show_progress: bool | None = None,
    force: bool = False,
    **params: Any,
) -> Index:
    """Index a sentence file (one a line; id = line number - 1) with the calibration ``auto`` chooses; saved to ``output``."""
    from ..selection import parse_candidates
    from ..selection.choose import choose

    if candidates is not None:
        parse_candidates(candidates, 10**6)  # an unknown name is said before the model loads
    stats = None if pooling_stats is None or not isinstance(pooling_stats, (str, os.PathLike)) else pooling_stats
    check_output(output, "index", force=force, inputs=[corpus, stats, model if isinstance(model, (str, os.PathLike)) else None])
    sentences = read_sentences(corpus)
    rows = [i for i, s in enumerate(sentences) if s.strip()]
    if not rows:
        raise IsotropyError(f"{corpus} holds no sentence (every line is empty): there is nothing to index")
    encoder = Encoder(
        model, pooling=pooling, max_length=max_length, batch_size=batch_size, backend=backend, pooling_stats=pooling_stats
    )
    raw = np.asarray(encoder.encode(sentences, show_progress=show_progress), dtype=np.float32)
    fit = [sentences[i] for i in rows]
    sel = choose(encoder, fit, raw[rows], candidates=candidates, seed=seed, source=str(corpus))
    index = Index(encoder, sel.transform, kind, **params)
    index.selection = sel.to_dict()
    try:
        index.add_encoded(sentences, raw, show_progress=show_progress)
    except IsotropyError as exc:
        raise IsotropyError(f"{corpus}: {exc}") from None
    index.save(output, force=force)
    return index
