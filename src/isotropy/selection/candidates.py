"""The calibrations ``auto`` chooses among, all solved from ONE set of moments.

Every candidate but ``raw`` is an affine transform of the registry
(:data:`isotropy.transforms.TRANSFORMS`) built by ``transform_class(kind).from_moments(m, **params)``
on the same :class:`~isotropy.transforms.moments.Moments`: the corpus is summed once, and each
candidate costs one eigendecomposition at most. Flows are not candidates: they are not solved
from moments (each would be a training run of its own).

Names (what ``candidates=`` and ``--candidates`` take; the ``isotropy eval`` method spellings
where one exists):

* ``raw`` (no calibration), ``center``;
* ``abtt`` (all-but-the-top, D = d/100) and ``abtt-D``;
* ``common-component`` (SIF's, 1 direction) and ``common-component-K``;
* ``soft-0.25``, ``soft-0.5``, ``soft-0.75`` (presets) and ``soft-whitening-P`` (power P);
* ``whitening`` (full), ``whitening-K`` (K components), ``whitening-shrunk`` (Ledoit-Wolf shrinkage).

The default set (:func:`default_candidates`) scales with the width ``d``: ABTT with D = 1,
d/100 and 3d/100 (Mu & Viswanath's rule of thumb is d/100), whitening with k = d, d/2 and d/3
(BERT-whitening's 384 and 256 of 768).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import IsotropyError
from ..transforms import PRESETS, transform_class
from ..transforms.methods import parse_method
from ..transforms.moments import Moments

__all__ = ["Candidate", "parse_candidate", "parse_candidates", "default_candidates", "CANDIDATE_FORMS", "fit_candidates"]

CANDIDATE_FORMS = (
    "raw",
    "center",
    "abtt",
    "abtt-D",
    "common-component",
    "common-component-K",
    *PRESETS,
    "soft-whitening-P",
    "whitening",
    "whitening-K",
    "whitening-shrunk",
)


@dataclass(frozen=True)
class Candidate:
    """One calibration: its ``name``, the registry ``kind`` (None for raw) and the parameters it is built with."""

    name: str
    kind: str | None
    params: tuple[tuple[str, Any], ...] = ()

    def build(self, moments: Moments) -> Any:
        """The fitted transform on ``moments`` (None for raw); warnings (dropped directions) are the caller's to catch."""
        if self.kind is None:
            return None
        return transform_class(self.kind).from_moments(moments, **dict(self.params))

    def min_rows(self, d: int) -> int:
        """Fewest fitting sentences for a well-defined fit of ``d``-dimensional vectors (0 for raw)."""
        if self.kind is None:
            return 0
        est = transform_class(self.kind)(**dict(self.params))
        est._check_params(d)
        return int(est.min_fit_rows(d))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "params": dict(self.params)}


def _unknown(name: Any) -> IsotropyError:
    return IsotropyError(f"unknown candidate {name!r}; the candidates are {', '.join(CANDIDATE_FORMS)}")


def parse_candidate(name: str) -> Candidate:
    """A candidate by name, read by the one method grammar (:func:`isotropy.transforms.methods.parse_method`); an
    unknown name, or one auto cannot compare (``flow``, ``auto``, a token-level method), is one clear error."""
    try:
        m = parse_method(name)
    except IsotropyError:
        raise _unknown(name) from None
    if m.kind == "flow":
        raise IsotropyError(
            "flow is not a candidate of auto: auto compares the calibrations solved from one set of moments "
            f"({', '.join(CANDIDATE_FORMS)}); evaluate a flow with --method flow"
        )
    if m.kind == "auto" or m.level != "sentence":
        raise _unknown(name)
    return Candidate(m.name, None if m.kind == "raw" else m.kind, m.params)


def default_candidates(d: int) -> list[Candidate]:
    """The default set for ``d``-dimensional vectors (see the module docs); sizes beyond ``d`` are dropped."""
    names = ["raw", "center"]
    names += [f"abtt-{D}" for D in sorted({1, max(1, round(d / 100)), max(1, round(3 * d / 100))}) if D < d]
    names += ["common-component", *PRESETS, "whitening"]
    names += [f"whitening-{k}" for k in sorted({max(1, d // 2), max(1, d // 3)}, reverse=True) if k < d]
    names += ["whitening-shrunk"]
    return [parse_candidate(n) for n in dict.fromkeys(names)]


def parse_candidates(candidates: Sequence[str | Candidate] | str | None, d: int) -> list[Candidate]:
    """The candidates to compare: the default set, or the given names (``raw`` always added: it is the reference)."""
    if candidates is None:
        return default_candidates(d)
    if isinstance(candidates, str):
        candidates = [c for c in candidates.split(",") if c.strip()]
    parsed = [c if isinstance(c, Candidate) else parse_candidate(c) for c in candidates]
    for c in parsed:
        if c.kind is not None:
            try:
                c.min_rows(d)
            except IsotropyError as exc:
                raise IsotropyError(f"candidate {c.name} on {d}-dimensional vectors: {exc}") from None
    out = {"raw": Candidate("raw", None)}
    for c in parsed:
        out.setdefault(c.name, c)
    return list(out.values())


@dataclass
class Fitted:
    """The candidates that could be fitted (name -> transform, None for raw) and a note for each one skipped."""

    transforms: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    warned: dict[str, str] = field(default_factory=dict)


def fit_candidates(candidates: Sequence[Candidate], moments: Moments, source: str = "the corpus") -> Fitted:
    """Solve every candidate from ``moments``; one the corpus is too small for is skipped with a note."""
    out = Fitted()
    d, n = int(moments.dim), int(moments.n)
    for c in candidates:
        need = c.min_rows(d)
        if n < need:
            out.skipped[c.name] = f"skipped: needs at least {need} sentences, {source} has {n}"
            continue
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out.transforms[c.name] = c.build(moments)
        except IsotropyError as exc:
            out.skipped[c.name] = f"skipped: {exc}"
            continue
        if caught:
            out.warned[c.name] = "; ".join(dict.fromkeys(str(w.message) for w in caught))
    return out


def say_not_compared(sel: Any, candidates: Sequence[Candidate], fitted: Fitted) -> None:
    """Candidates named, no labels: the signal rule decides by the encoder's kind and compares nothing; say so, in
    the notes (the terminal's table, the record) and ``settings["candidates_compared"]`` (round 5, U34)."""
    listed = [c.name for c in candidates if c.name != "raw"]
    rule = sel.settings.get("rule_choice", "raw")
    if rule == "raw":
        took = "its choice for this kind of encoder is raw (the reference every list includes)"
    elif rule in fitted.transforms:
        took = f"its choice for this kind of encoder, {rule}, is in the list and was taken"
    else:
        took = f"its choice for this kind of encoder, {rule}, is not in the list, so raw was kept"
    sel.settings["candidates_compared"] = False
    sel.notes.append(
        f"the candidates listed ({', '.join(listed)}) were not compared: without dev labels auto decides by the "
        f"encoder's kind (docs/AUTO.md, 'Decide first'); {took}; give dev labels (--dev) to choose among the listed ones"
    )
