"""What a search returns, and how the command line prints it (layer 5)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._terminal import printable

__all__ = ["SearchResults", "format_results"]


@dataclass
class SearchResults:
    """Results of :meth:`Index.search` for ``n`` queries.

    ``ids`` (n x k int64) and ``scores`` (n x k float32, cosine in the index's space,
    best first) are padded with ``-1`` / ``nan`` where fewer than ``k`` hits exist
    (k larger than the index, or an approximate index that found fewer);
    ``texts[i]`` holds query ``i``'s hit sentences without padding. ``warning`` is
    set (one line) when fewer hits than asked for could be returned. ``k`` is the depth searched: the ``k``
    asked, at most the index's size; an approximate index may find fewer (then ``warning`` says so).
    """

    ids: np.ndarray
    scores: np.ndarray
    texts: list[list[str]]
    queries: list[str] | None = None
    k: int = 10
    warning: str | None = None
    timings: dict[str, float] | None = None  # isotropy search: {"load_s", "search_s"}

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def hits(self, i: int) -> list[dict[str, Any]]:
        """Query ``i``'s hits as ``[{"rank", "id", "score", "text"}, ...]``."""
        out = []
        for rank, (j, s) in enumerate(zip(self.ids[i], self.scores[i]), start=1):
            if j < 0:
                break
            out.append({"rank": rank, "id": int(j), "score": float(s), "text": self.texts[i][rank - 1]})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "warning": self.warning,
            **({"timings": self.timings} if self.timings else {}),
            "results": [
                {"query": self.queries[i] if self.queries is not None else None, "hits": self.hits(i)} for i in range(len(self))
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)


def format_results(results: SearchResults) -> str:
    """Plain-text rendering for the terminal: one block per query, ``rank score id text``; queries and
    texts through :func:`~isotropy._terminal.printable` (an indexed document's escape sequences never reach
    the terminal; :meth:`SearchResults.to_json` keeps the text exact)."""
    lines = []
    for i in range(len(results)):
        if len(results) > 1 or results.queries:
            lines.append(f"query {i + 1}: {printable(results.queries[i]) if results.queries else ''}")
        for h in results.hits(i):
            lines.append(f"  {h['rank']:>3}  {h['score']:.4f}  [{h['id']}]  {printable(h['text'])}")
    return "\n".join(lines)
