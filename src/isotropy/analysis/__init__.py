"""Seeing anisotropy: statistics and pictures of embeddings, before and after calibration.

Two levels, as in the papers:

* **Sentence level** (:func:`sentence_report`): for the raw sentence vectors and for
  each calibration (whitening, flow, ...) applied to them,

  - the average cosine similarity of random sentence pairs (the "cone effect":
    Ethayarajh 2019; Li et al. 2020), mean and standard deviation over a fixed
    number of pairs drawn with a seeded generator (the same pairs for every
    representation, so before/after is a paired comparison);
  - Mu & Viswanath's (2018, "All-but-the-top", eq. 7-8) partition-function isotropy
    ``I(W) = min_c Z(c) / max_c Z(c)`` with ``Z(c) = sum_i exp(c^T w_i)``, ``c`` over the
    eigenvectors of ``W^T W`` (:func:`partition_isotropy`);
  - IsoScore (Rudman et al. 2022, Findings of ACL) from the covariance spectrum
    (:func:`isoscore`);
  - the covariance eigenvalue spectrum and how many dimensions hold 50 / 90 / 99 %
    of the variance;
  - a histogram of the pairwise cosines and a 2-D projection.

* **Word level** (:func:`word_report`), from the BERT-flow paper (Li et al. 2020, Table 1),
  on the model's input token-embedding matrix, tokens ranked by their frequency in
  *the user's corpus* (the paper ranks by the pre-training corpus): the mean l2 norm
  per frequency-rank bucket ``[0, 100) [100, 500) [500, 5000) [5000, end)``, the mean l2
  distance and dot product to the k = 3, 5, 7 nearest neighbours (exact kNN with
  faiss), the average cosine of random token pairs ("Learning to Remove", Liang et
  al. 2021) and a projection coloured by rank.

:func:`write_report` renders one report folder (``report.json``, ``report.md`` and
one PNG per figure, written atomically); :func:`analyze` does everything for a list
of sentences and an encoder (the call the demo makes); :func:`analyze_file` is the
``isotropy analyze`` command. Statistics and drawing are separate: every figure is
drawn from the numbers in ``report.json`` alone, by functions that return a
matplotlib ``Figure`` (Agg canvas, no display needed).

Decisions, documented once (docs/ANALYSIS.md explains them at more length):

* Blank lines of a corpus are skipped (they would all encode to the same vector).
* Random pairs are pairs of *different* rows ``i != j``, drawn independently with
  replacement (``numpy.random.default_rng(seed)``).
* ``I(W)`` is computed on the vectors as given (it is not scale-invariant), with
  ``log Z`` by ``scipy.special.logsumexp`` so large norms cannot overflow, and over
  both signs ``+c`` and ``-c`` of every eigenvector: an eigenvector's sign is arbitrary,
  taking both makes the score independent of the solver's choice.
* IsoScore uses the covariance eigenvalues (= the variances after Rudman et al.'s PCA
  re-orientation step), all ``d`` of them (zeros when there are fewer rows than dims).
* Projections are onto the top two right singular vectors of the *uncentred* matrix
  (sentence vectors first scaled to unit length), so the origin stays put and a
  cone shows as a cloud away from it; after whitening the cloud sits on the origin.
* Token ranks: tokens seen in the corpus are ranked by descending count (ties by
  token id); with ``unseen="last"`` (default) the tokens that never occur follow, in a
  seeded random order (token-id order would put blocks of related ids, such as BERT's
  ``[unused]`` tokens, into one bucket: the corpus says nothing about their frequency,
  so every bucket past the seen tokens gets a like sample of them); with
  ``unseen="drop"`` they are left out. Special tokens
  (``tokenizer.all_special_ids``) are never ranked. kNN neighbours are searched among
  the ranked tokens (exact L2, ``faiss.IndexFlatL2``), the query itself excluded; the
  dot product is taken with those same l2 neighbours. Each bucket's kNN statistics are
  averaged over at most ``max_queries`` tokens of the bucket, sampled with the seed
  (``None``: all); norms use every token.

The package: :mod:`.metrics` (the sentence-level statistics), :mod:`.words` (the word
level), :mod:`.figures` (the figures and :data:`FIGURES`), :mod:`.render` (the tables and
``report.md``) and :mod:`.report` (the report folder, :func:`analyze` and :func:`analyze_file`); everything public is
importable from ``isotropy.analysis`` itself.
"""

from __future__ import annotations

from . import metrics
from .figures import (
    FIGURES,
)
from .figures import (
    plot_cosine_histograms as plot_cosine_histograms,
)
from .figures import (
    plot_projection as plot_projection,
)
from .figures import (
    plot_spectrum as plot_spectrum,
)
from .figures import (
    plot_token_norms as plot_token_norms,
)
from .figures import (
    plot_token_projection as plot_token_projection,
)
from .metrics import *  # noqa: F403 (metrics.__all__, re-exported)
from .metrics import HIST_BINS as HIST_BINS
from .metrics import SCATTER_POINTS as SCATTER_POINTS
from .metrics import VARIANCE_FRACTIONS as VARIANCE_FRACTIONS
from .render import (
    _markdown as _markdown,
)
from .render import (
    _sentence_rows as _sentence_rows,
)
from .render import (
    _word_rows as _word_rows,
)
from .render import markdown_report as _markdown_report  # noqa: F401 (tests read it here)
from .report import (
    AUTO_WHITENING as AUTO_WHITENING,
)
from .report import (
    REPORT_KIND as REPORT_KIND,
)
from .report import (
    _jsonable as _jsonable,
)
from .report import (
    analyze,
    analyze_file,
    rich_tables,
    sentence_table,
    word_table,
    write_report,
)
from .report import (
    check_report_dir as check_report_dir,
)
from .report import (
    print_tables as print_tables,
)
from .words import (
    BUCKET_EDGES as BUCKET_EDGES,
)
from .words import (
    KNN_KS as KNN_KS,
)
from .words import (
    MAX_QUERIES as MAX_QUERIES,
)
from .words import (
    TOKEN_SCATTER_POINTS as TOKEN_SCATTER_POINTS,
)
from .words import (
    WordLevelUnavailable,
    frequency_ranking,
    token_frequencies,
    word_report,
)
from .words import (
    _knn_stats as _knn_stats,
)
from .words import (
    input_embedding_matrix as input_embedding_matrix,
)

__all__ = [
    *metrics.__all__,  # the sentence-level statistics: re-exported, not restated
    "WordLevelUnavailable",
    "token_frequencies",
    "frequency_ranking",
    "word_report",
    "write_report",
    "analyze",
    "analyze_file",
    "sentence_table",
    "word_table",
    "rich_tables",
    "FIGURES",
]
