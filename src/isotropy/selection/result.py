"""What a selection found: the choice, every candidate's score, the criterion, the signals and the rule that fired.

A :class:`Selection` is the evidence an artefact keeps beside the calibration it chose:
``to_dict`` / ``from_dict`` (plain JSON, with isotropy's artefact header, kind ``selection``),
``save`` / ``load`` (``selection.json``, atomic, never over a file isotropy did not write),
``table()`` (the text printed by the commands) and ``markdown()`` (for model cards and reports).
The fitted transform of the choice is held in ``transform`` (None for raw) but not serialised:
the artefact that embeds a selection saves the transform itself.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import IsotropyError
from ..storage.artifacts import check_header, header
from ..storage.atomic import atomic_file

__all__ = ["Selection", "CandidateScore", "SELECTION_KIND", "SELECTION_FILE"]

SELECTION_KIND = "selection"
SELECTION_FILE = "selection.json"


def _num(x: Any) -> float | None:
    """JSON has no NaN: a missing figure is None."""
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


@dataclass
class CandidateScore:
    """One candidate's evidence: its score by the deciding criterion, the bootstrap probability that
    it beats the selection's incumbent (``beats_raw``: raw, unless :attr:`Selection.incumbent` names another
    candidate), the other criteria's scores (``extra``), and a note (skipped, warned)."""

    name: str
    score: float | None = None
    beats_raw: float | None = None
    extra: dict[str, float | None] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "score": _num(self.score),
            "beats_raw": _num(self.beats_raw),
            "extra": {k: _num(v) for k, v in self.extra.items()},
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CandidateScore:
        return cls(d["name"], d.get("score"), d.get("beats_raw"), dict(d.get("extra") or {}), d.get("note", ""))


@dataclass
class Selection:
    """The outcome of :func:`~isotropy.selection.select_calibration`.

    ``choice`` is a candidate name (``raw``: no calibration); ``mode`` ``label-free`` or
    ``few-label``; ``criterion`` the figure that decided (``dev-spearman`` / ``dev-auc`` in
    few-label mode, ``signals`` when the label-free signal rule decided); ``incumbent`` the candidate
    kept unless another beats it (raw, except in few-label mode, where it is the label-free rule's
    choice for the encoder's kind); ``p_beats_raw`` ONE meaning everywhere: the bootstrap probability
    that the CHOICE beats the incumbent by the deciding criterion (None when the choice is the
    incumbent, or when no bootstrap decided: the signal rule); each candidate's own probability is
    its ``beats_raw``; the text says "beats <incumbent>". ``rule`` says the decision in words;
    ``signals`` holds the label-free signals of the raw corpus vectors (:mod:`.signals`), ``fired``
    the part of the rule that decided, and ``expected`` the effect measured for that branch of the rule.
    ``pooling`` (``--pooling auto`` only, else empty): the pooling ``chosen``, the ``incumbent`` pooling (the pooling
    rule's), the poolings ``offered``, ``by`` ("rule" or "dev") and ``said`` (why, in words); the candidates are then
    the chosen pooling's, and the incumbent names its pooling ("whitening-shrunk on pooling last-avg").
    """

    choice: str
    mode: str
    criterion: str
    p_beats_raw: float | None
    rule: str
    candidates: list[CandidateScore]
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    signals: dict[str, float | None] = field(default_factory=dict)
    fired: str = ""
    expected: str = ""
    incumbent: str = "raw"
    pooling: dict[str, Any] = field(default_factory=dict)
    transform: Any = field(default=None, repr=False, compare=False)

    # ---------------------------------------------------------------- access

    def candidate(self, name: str) -> CandidateScore:
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def scores(self) -> dict[str, float | None]:
        return {c.name: c.score for c in self.candidates}

    # ---------------------------------------------------------------- (de)serialise

    def to_dict(self) -> dict[str, Any]:
        return {
            **header(SELECTION_KIND),
            "choice": self.choice,
            "mode": self.mode,
            "criterion": self.criterion,
            "p_beats_raw": _num(self.p_beats_raw),
            "signals": {k: _num(v) for k, v in self.signals.items()},
            "fired": self.fired,
            "expected": self.expected,
            "incumbent": self.incumbent,
            **({"pooling": self.pooling} if self.pooling else {}),
            "rule": self.rule,
            "candidates": [c.to_dict() for c in self.candidates],
            "settings": self.settings,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: Any, where: str = "selection") -> Selection:
        if not isinstance(d, dict):
            raise IsotropyError(f"{where} does not hold a selection (expected a JSON object)")
        check_header(d, Path(where), SELECTION_KIND)
        try:
            cands = [CandidateScore.from_dict(c) for c in d["candidates"]]
            sel = cls(d["choice"], d["mode"], d["criterion"], d.get("p_beats_raw"), d["rule"], cands, d.get("settings") or {})
            sel.notes = list(d.get("notes") or [])
            sel.signals = dict(d.get("signals") or {})
            sel.fired, sel.expected = str(d.get("fired") or ""), str(d.get("expected") or "")
            sel.incumbent = str(d.get("incumbent") or "raw")  # records written before the incumbent existed: raw
            sel.pooling = dict(d.get("pooling") or {})
        except (KeyError, TypeError, AttributeError) as exc:
            raise IsotropyError(f"{where} is an incomplete selection record ({exc!r}); run the selection again") from None
        if sel.choice not in [c.name for c in cands]:
            raise IsotropyError(f"{where}: the choice {sel.choice!r} is not among its candidates; the file was edited")
        return sel

    def save(self, path: str | os.PathLike, *, force: bool = False) -> Path:
        """Write ``selection.json`` (``path`` a folder, or the file itself), atomically; an existing file is
        replaced only when it is a selection record, unless ``force``."""
        path = Path(path)
        if path.is_dir():
            path = path / SELECTION_FILE

        def check() -> None:
            if force or not path.exists():
                return
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                old = None
            if not (isinstance(old, dict) and old.get("library") == "isotropy" and old.get("kind") == SELECTION_KIND):
                raise IsotropyError(
                    f"{path} exists and is not a selection record written by isotropy; choose another path or pass force"
                )

        check()
        with atomic_file(path, "w", check=check) as fh:
            json.dump(self.to_dict(), fh, indent=2, sort_keys=True)
            fh.write("\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Selection:
        path = Path(path)
        if path.is_dir():
            path = path / SELECTION_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise IsotropyError(f"{path} does not exist; it holds no selection record") from None
        except (OSError, ValueError) as exc:
            raise IsotropyError(f"{path} is not a readable selection record: {exc}") from None
        return cls.from_dict(data, str(path))

    # ---------------------------------------------------------------- show

    def _rows(self) -> tuple[list[str], list[list[str]]]:
        extra = list(dict.fromkeys(k for c in self.candidates for k in c.extra))
        head = ["candidate", str(self.settings.get("score_column", self.criterion)), f"beats {self.incumbent}", *extra, "note"]
        rows = []
        for c in self.candidates:
            mark = " <- chosen" if c.name == self.choice else ""
            rows.append(
                [
                    c.name + mark,
                    "-" if c.score is None else f"{c.score:.4g}",
                    "-" if c.beats_raw is None else f"{100 * c.beats_raw:.0f}%",
                    *("-" if c.extra.get(k) is None else f"{c.extra[k]:.4g}" for k in extra),
                    c.note,
                ]
            )
        return head, rows

    def summary(self) -> str:
        """One line: what was chosen, how, how sure."""
        p = self.p_beats_raw
        sure = "" if p is None else f" (beats {self.incumbent} in {100 * p:.0f}% of the bootstrap resamples)"
        what = f"{self.choice} on pooling {self.pooling['chosen']}" if self.pooling else self.choice
        return f"auto ({self.mode}, {self.criterion}) chose {what}{sure}: {self.rule}"

    def explain(self) -> list[str]:
        """The signals with their values, the rule that fired and the expected effect (empty when none were computed)."""
        out = []
        if self.pooling:
            out.append(f"pooling: {self.pooling.get('said') or self.pooling.get('chosen')}")
        if self.signals:
            out.append("signals: " + ", ".join(f"{k} = {'-' if v is None else f'{v:.3g}'}" for k, v in self.signals.items()))
        if self.fired:
            out.append(f"rule that fired: {self.fired}")
        if self.expected:
            out.append(f"expected effect: {self.expected}")
        return out

    def table(self) -> str:
        """A plain-text table of the evidence, the summary line first."""
        head, rows = self._rows()
        long: dict[str, int] = {}  # a long note (a fit's warning) becomes a footnote: the table stays one line a row
        for r in rows:
            if len(r[-1]) > 40:
                r[-1] = f"[{long.setdefault(r[-1], len(long) + 1)}]"
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        fmt = lambda r: "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip()
        lines = [self.summary(), *self.explain(), fmt(head), fmt(["-" * w for w in widths])]
        lines += [fmt(r) for r in rows]
        lines += [f"[{k}] {n}" for n, k in long.items()]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def markdown(self) -> str:
        """The evidence as a Markdown table (model cards, reports)."""
        head, rows = self._rows()
        esc = lambda x: x.replace("|", "\\|")
        out = [self.summary(), "", *(f"- {x}" for x in self.explain()), ""] if self.explain() else [self.summary(), ""]
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(esc(x) for x in r) + " |" for r in rows]
        out += [f"\nNote: {n}" for n in self.notes]
        return "\n".join(out)
