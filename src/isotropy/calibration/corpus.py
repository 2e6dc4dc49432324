"""The corpus a calibration is fitted on, streamed; and a bounded uniform sample of its vectors.

A corpus is a UTF-8 text file (one sentence a line), a glob of such shards (read in sorted
order), ``-`` (standard input), or, from Python, a list of sentences. Blank lines are left
out (they would all encode to the same vector). Files are read one line at a time, twice:
once to count the sentences and find any bad line before the model runs (a corpus too small
for the method is said before an hour of encoding), once to encode; standard input once: what
:meth:`Corpus.head` reads of it ahead (a check before the work) is kept and streamed first.
"""

from __future__ import annotations

import glob as globmod
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from ..storage.text import iter_sentences

__all__ = ["Corpus", "Reservoir"]

_GLOB_CHARS = re.compile(r"[*?\[]")


class Corpus:
    """Where the sentences come from; :meth:`chunks` streams them, blank lines left out."""

    def __init__(self, source: Any) -> None:
        self.sentences: list[str] | None = None
        self.files: list[Path] = []
        self.stdin = False
        self._lines: Iterator[str] | None = None  # standard input's sentences, one stream for every reader
        self._head: list[str] = []  # read ahead of :meth:`chunks` by :meth:`head`, streamed first
        if isinstance(source, (str, os.PathLike)):
            text = str(source)
            if not text.strip():
                raise IsotropyError("the corpus is empty: give a text file, a glob of shards or '-'")
            if text == "-":
                self.stdin = True
            elif _GLOB_CHARS.search(text) and not Path(text).exists():
                self.files = [Path(p) for p in sorted(globmod.glob(os.path.expanduser(text)))]
                self.files = [p for p in self.files if p.is_file()]
                if not self.files:
                    raise IsotropyError(f"no file matches the corpus pattern {text!r}")
            else:
                path = Path(text).expanduser()
                if not path.is_file():
                    raise IsotropyError(f"corpus {path} does not exist or is not a file")
                self.files = [path]
            self.label = text
        elif isinstance(source, Sequence) and not isinstance(source, (bytes, bytearray)):
            if not all(isinstance(s, str) for s in source):
                raise IsotropyError("a corpus given as a list must hold sentences (str)")
            self.sentences = [s for s in source if s.strip()]
            self.label = f"a list of {len(source)} sentences"
        else:
            raise IsotropyError(
                f"the corpus must be a text file, a glob of shards, '-' or a list of sentences, not {type(source).__name__}"
            )

    @property
    def inputs(self) -> list[Path]:
        """The files read (an output must not be one of them)."""
        return list(self.files)

    @property
    def where(self) -> str:
        """The corpus as the user gave it, for error messages."""
        if self.stdin:
            return "standard input"
        return self.label if self.sentences is None else "the list of sentences"

    def describe(self) -> str:
        """For the model card: the corpus's name, never a folder above it."""
        if self.stdin:
            return "standard input"
        if self.sentences is not None:
            return self.label
        if len(self.files) == 1:
            return self.files[0].name
        return f"{len(self.files)} shards matching {Path(self.label).name!r}"

    def count(self) -> int | None:
        """Sentences (non-blank lines) the corpus holds, found by reading it once; None for standard input.

        Reading checks every line (UTF-8, no NUL byte), so a bad line is named before any encoding.
        """
        if self.stdin:
            return None
        if self.sentences is not None:
            return len(self.sentences)
        return sum(1 for f in self.files for _, text in iter_sentences(f) if text.strip())

    def _stdin(self) -> Iterator[str]:
        if self._lines is None:
            self._lines = (text for _, text in iter_sentences("-") if text.strip())
        return self._lines

    def head(self, n: int) -> list[str]:
        """The first ``n`` sentences (fewer when the corpus holds fewer). Standard input can be read only once,
        so what this reads of it is kept, and :meth:`chunks` streams it first: a check before the work takes
        no line from the pass (S1-011)."""
        if self.stdin:
            stream = self._stdin()
            while len(self._head) < n:
                text = next(stream, None)
                if text is None:
                    break
                self._head.append(text)
            return self._head[:n]
        return next(iter(self.chunks(n)), [])

    def chunks(self, size: int) -> Iterator[list[str]]:
        """The sentences, ``size`` at a time (the last chunk may be shorter), in corpus order (standard input:
        what :meth:`head` read ahead, then the rest, once)."""
        if self.sentences is not None:
            for start in range(0, len(self.sentences), size):
                yield self.sentences[start : start + size]
            return
        chunk: list[str] = []
        if self.stdin:
            ahead, self._head = self._head, []
            texts: Iterator[str] = (t for part in (ahead, self._stdin()) for t in part)
        else:
            texts = (text for source in self.files for _, text in iter_sentences(source) if text.strip())
        for text in texts:
            chunk.append(text)
            if len(chunk) == size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


class Reservoir:
    """A uniform random sample of at most ``capacity`` rows of a stream (Vitter's algorithm R), seeded.

    Every row seen so far is in the sample with the same probability ``capacity / seen``;
    memory is ``capacity`` rows whatever the stream's length.
    """

    def __init__(self, capacity: int, seed: int = 0) -> None:
        self.capacity = int(capacity)
        self.rng = np.random.default_rng(seed)
        self.rows: np.ndarray | None = None
        self.seen = 0

    def add(self, X: np.ndarray) -> None:
        X = np.asarray(X)
        if X.shape[0] == 0 or self.capacity == 0:
            return
        if self.rows is None:
            self.rows = np.empty((self.capacity, X.shape[1]), dtype=X.dtype)
        fill = min(max(self.capacity - self.seen, 0), X.shape[0])
        self.rows[self.seen : self.seen + fill] = X[:fill]
        rest = X[fill:]
        if rest.shape[0]:
            # row t (0-based, t >= capacity) replaces slot j ~ U{0..t} when j < capacity
            t = self.seen + fill + np.arange(rest.shape[0])
            j = self.rng.integers(0, t + 1)
            for k in np.flatnonzero(j < self.capacity):  # in stream order: a later row overwrites an earlier one
                self.rows[j[k]] = rest[k]
        self.seen += X.shape[0]

    def sample(self) -> np.ndarray:
        """The sampled rows (all of them while fewer than ``capacity`` were seen)."""
        if self.rows is None:
            return np.empty((0, 0), dtype=np.float32)
        return self.rows[: min(self.seen, self.capacity)]
