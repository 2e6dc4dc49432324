"""The benchmark harness: Spearman on the STS tasks for every pooling x calibration.

``evaluate(tasks, ...)`` encodes each task's unique sentences once (all requested
poolings from the same forward passes, cached on disk), fits each calibration
(every registered transform: centering, all-but-the-top, common-component removal,
whitening and its soft presets, flow) on the chosen corpus (``fit_on``: target, train,
others or a file; :mod:`.fitting`), and scores the cosine similarity of every evaluation
pair against the gold score:

* graded tasks (STS-B, SICK-R, STS-12..16, user ``score`` files): Spearman x 100;
  a task made of several datasets (a year of STS-12..16) is aggregated as ``aggregate``
  says: ``all`` (default: one correlation over the pooled pairs, SBERT's and SimCSE's
  setting), ``mean`` or ``wmean`` (the plain or pair-weighted mean of the subset
  correlations, SentEval's; BERT-flow and BERT-whitening report ``wmean``); every
  score keeps the subset figures, so :meth:`Results.with_aggregate` switches settings;
* 0/1 tasks (user ``label`` files): ROC-AUC x 100, plus accuracy at the cosine
  threshold tuned on another split (dev, else train) or, with one split only, by
  two-fold cross-fitting.
"""

from __future__ import annotations

from ..encoders.cache import CACHE_ENV, VectorCache, default_cache_dir, encode_cached, sentences_digest
from ..storage.text import read_sentences

# Re-exported, not restated: each module's __all__ is the list of its public names.
from . import methods, metrics, results, tasks
from .fitting import KEYWORDS as FIT_KEYWORDS
from .harness import evaluate
from .methods import *  # noqa: F403
from .metrics import *  # noqa: F403
from .results import *  # noqa: F403
from .tasks import *  # noqa: F403

__all__ = [
    "evaluate",  # the harness
    *tasks.__all__,  # tasks (what was isotropy.data)
    "read_sentences",
    "FIT_KEYWORDS",  # fit corpora
    *metrics.__all__,  # metrics and aggregation settings
    *methods.__all__,
    *results.__all__,
    # the vector cache (isotropy.encoders.cache)
    "VectorCache",
    "encode_cached",
    "default_cache_dir",
    "sentences_digest",
    "CACHE_ENV",
]
