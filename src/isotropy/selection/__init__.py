"""Choosing the calibration for a model and a corpus (``--method auto``), and never making it worse.

:func:`select_calibration` scores every candidate calibration (:mod:`.candidates`: raw,
center, ABTT, common-component removal, soft and full whitening at a few k, whitening with
shrinkage; all solved from one set of moments) and returns a :class:`Selection`: the choice,
every candidate's score, the criterion, the signals and the rule that fired, and the fitted transform. With a few
scored dev pairs (or dev queries with relevance judgements: nDCG@10 of an exact search) it chooses
by them under a do-no-harm rule (:mod:`.dev`); without any, by a
label-free criterion (:mod:`.criteria`), whose measured reliability is in docs/AUTO.md.

Layer: between the features and the encoders. It imports only the encoders, transforms,
storage and basics, so every feature (evaluation's ``--method auto``, the index, the analysis
recommendation) and the commands above can use it.
"""

from __future__ import annotations

from .candidates import CANDIDATE_FORMS, Candidate, default_candidates, parse_candidate, parse_candidates
from .criteria import CRITERIA
from .dev import MIN_DEV_PAIRS, MIN_DEV_QUERIES, DevPairs, DevQrels, check_dev, check_dev_pairs, check_dev_qrels
from .result import SELECTION_FILE, CandidateScore, Selection
from .select import DEV_LEVEL, LABEL_FREE_RULE, Selector, select_calibration

__all__ = [
    "select_calibration",
    "Selector",
    "Selection",
    "CandidateScore",
    "Candidate",
    "CANDIDATE_FORMS",
    "CRITERIA",
    "LABEL_FREE_RULE",
    "DEV_LEVEL",
    "MIN_DEV_PAIRS",
    "MIN_DEV_QUERIES",
    "SELECTION_FILE",
    "DevPairs",
    "DevQrels",
    "check_dev",
    "check_dev_pairs",
    "check_dev_qrels",
    "default_candidates",
    "parse_candidate",
    "parse_candidates",
]
