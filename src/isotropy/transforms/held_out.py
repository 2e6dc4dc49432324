"""Held-out sums of the token fit that keep their sentences' token ids instead of their Gram (layer 3, beside
:mod:`.token_regression`).

The token fit holds out every tenth corpus sentence to choose its strength, and merges them into the fitting sums
for the final solve (:mod:`isotropy.distill.corpus_fit`). A held-out tenth shares most of its token pairs with the
rest, so its Gram's triangle is nearly as large as the fitting one's: ~15M pairs (~180 MB in float64, plus a 64 MB
buffer of triplets) at a million lines, for sentences whose ids take ~11 MB as int32. Nothing asks a held-out part
for its Gram until that final merge, so :class:`HeldOutSums` keeps the ids and computes what is asked of it from
them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import IsotropyError
from .gram_blocks import UpperBlocks
from .token_regression import TokenRegression, pooling_matrix

__all__ = ["HeldOutSums"]


class HeldOutSums(TokenRegression):
    """A :class:`TokenRegression` of held-out sentences that keeps their token ids instead of their Gram.

    A held-out tenth of a corpus shares most of its token pairs with the rest: its Gram's triangle held ~15M pairs
    (~180 MB in float64, and its 64 MB buffer of triplets) at a million lines, for sentences whose ids take ~11 MB
    (int32). What a held-out part is asked for reads the ids instead: :meth:`error` pools the table over the
    sentences (``||A E||^2`` in place of ``E^T G E``, equal to rounding), and the Gram is built from them only when
    it is asked for (``gram_``, ``_blocks``: a merge of this part into the fitting sums, at the end), never kept.
    The other sums (``A^T Y``, ``Y^T Y``, counts) are kept as in the base class. ``merge`` takes another held-out
    part (its sentences after this one's)."""

    ERROR_ROWS = 8192  # sentences pooled at a time by error(): a (rows, d) float64 temporary, not (n, d)

    def __init__(self, vocab_size: int, dim: int):
        super().__init__(vocab_size, dim)
        self._sentences: list[tuple[np.ndarray, np.ndarray]] = []  # (flat ids, lengths) per chunk, int32

    def _add_pairs(self, A: Any, flat: np.ndarray, lengths: np.ndarray) -> None:
        self._sentences.append((np.asarray(flat, dtype=np.int32), np.asarray(lengths, dtype=np.int32)))

    def drop_pairs(self) -> None:
        self._sentences = []

    def _pieces(self) -> Iterator[Any]:
        """The pooling matrices of the kept sentences, ``ERROR_ROWS`` at a time (the last fewer): small chunks
        joined, a large part (one read from a cache holds them all) cut, so no piece's Gram is large."""
        group: list[tuple[np.ndarray, np.ndarray]] = []
        rows = 0
        for flat, lengths in self._sentences:
            ends = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
            start = 0
            while start < len(lengths):
                stop = min(len(lengths), start + self.ERROR_ROWS - rows)
                group.append((flat[ends[start] : ends[stop]], lengths[start:stop]))
                rows, start = rows + stop - start, stop
                if rows == self.ERROR_ROWS:
                    yield self._pooling(group)
                    group, rows = [], 0
        if group:
            yield self._pooling(group)

    def _pooling(self, group: list[tuple[np.ndarray, np.ndarray]]) -> Any:
        flat, lengths = (np.concatenate(x) for x in zip(*group, strict=True))
        return pooling_matrix(flat, lengths, self.vocab_size)

    def _blocks(self) -> UpperBlocks:
        """The Gram's triangle, built from the kept sentences (a fresh one at each call: module docs)."""
        out = TokenRegression(self.vocab_size, self.dim)
        for A in self._pieces():
            out._add_upper((A.T @ A).tocoo())
        return out._blocks()

    @property
    def seen(self) -> np.ndarray:
        return np.flatnonzero(self.counts_ > 0)  # a token some kept sentence holds: its Gram's diagonal is > 0

    def merge(self, other: TokenRegression) -> TokenRegression:
        if not isinstance(other, HeldOutSums):
            raise IsotropyError("a held-out part merges only another held-out part of the same vocabulary and width")
        return super().merge(other)

    def _merge_pairs(self, other: TokenRegression) -> None:
        self._sentences = self._sentences + other._sentences  # its sentences after this part's

    def _share_pairs(self, out: TokenRegression) -> None:
        out._sentences = list(self._sentences)  # shared, never changed in place

    def _quadratic(self, E: np.ndarray) -> float:
        return sum(float(np.sum(np.square(A @ E))) for A in self._pieces())  # ||A E||^2, piece by piece

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_buf"] = self._kept().copy()
        return state

    @contextlib.contextmanager
    def spilled(self):
        yield self  # no Gram kept: nothing to move to disk
