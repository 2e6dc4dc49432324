"""Static embedding models (layer 4): a table of token vectors averaged per sentence.

* :mod:`.table` -- :class:`StaticTable` (tokens, vectors, probabilities, ``fold``), pooling, OOV accounting;
* :mod:`.wordvectors` -- GloVe / word2vec / fastText files, parsed;
* :mod:`.parsecache` -- their parse cache: memory-mapped, verified, never stale (:func:`parse_cache`: where, or not at all);
* :mod:`.sources` -- telling static models apart and loading them (model2vec, ``StaticEmbedding``, the
  embedded ``glove-6b-50d``).

The :class:`~isotropy.encoders.Encoder` runs them through the ``static`` backend
(:mod:`isotropy.encoders.backends.static`).
"""

from __future__ import annotations

from .parsecache import parse_cache
from .sources import GLOVE_NAME, is_static_model, load_table
from .table import Coverage, StaticTable, zipf_probabilities

__all__ = ["StaticTable", "Coverage", "load_table", "is_static_model", "GLOVE_NAME", "zipf_probabilities", "parse_cache"]
