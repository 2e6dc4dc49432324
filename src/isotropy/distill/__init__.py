"""``isotropy distill``: a static model made from a transformer, fitted on a corpus (above ``calibration``).

A product of its own beside calibration: :mod:`.run` distills the table and writes the model2vec +
sentence-transformers folder, :mod:`.corpus_fit` is the one streamed pass over the corpus (teacher map, token
sums, spans; its token ids from ``encoders.static``'s word cache) and the token fit's solve. It uses ``calibration``'s corpus
reader and static folder layout, so it sits above it.
"""

from __future__ import annotations

from .run import KIND, distill, distill_static, fit_on_corpus, fold_static_model, teacher_width, write_distilled

__all__ = ["distill", "distill_static", "fold_static_model", "write_distilled", "teacher_width", "fit_on_corpus", "KIND"]
