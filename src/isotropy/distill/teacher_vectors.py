"""The teacher's vectors of the corpus pass, each chunk's sealed in a verified cache (the distill package's lowest room).

The teacher's encoding is the corpus fit's real cost (the statistics are cheap beside it), so each chunk's vectors
are kept on disk in :class:`~isotropy.encoders.cache.VectorCache` entries: a rerun with other fit settings
(``--dims``, ``--lam``, ``--fit``, ``--alpha``, ``--strength-by``) reads them instead of encoding, and a run that was
killed (SIGTERM, SIGINT, SIGKILL) loses at most the chunk being encoded: every entry is sealed (written atomically,
its key file last) as soon as its chunk is encoded, and the rerun reads every sealed one and encodes the rest.

An entry is keyed by what decides the vectors and nothing else: the teacher's fingerprint (its weights and
tokenizer), backend, pooling and ``max_length``, and a digest of the exact texts (order and count included). A
chunk's lines and its spans are two entries, so other ``--spans`` re-encode only the span texts, never the lines, and
a corpus that changed between two runs re-encodes the chunks whose text changed (the digest differs) and never
mixes the two. Every entry is verified before it is served (its key, a digest of its bytes, its shape): a damaged
one (a flipped byte, a truncated file) is encoded again, with one warning line naming it and why. A write that
fails (a full disk, a read-only folder) gives one warning line and the run goes on without writing the cache.

The cache lives in ``$ISOTROPY_CACHE/teacher`` (default ``~/.cache/isotropy/teacher``), or the folder given
(``isotropy distill --teacher-cache DIR``; ``--no-teacher-cache`` turns it off). On a Dask cluster every worker
reads and writes the client's folder (its absolute path, on the worker's machine) with the same keys as one process
(a folder shared by the workers' machines makes a rerun from any worker read it); a worker's warning lines travel back
with its part's sums and the client prints them. A teacher without a fingerprint (an object with ``encode`` alone) is never cached.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..encoders.cache import VectorCache, default_cache_dir
from ..errors import IsotropyError

__all__ = ["TeacherVectors", "teacher_cache", "teacher_key", "TEACHER_FOLDER"]

TEACHER_FOLDER = "teacher"  # the teacher cache's folder under $ISOTROPY_CACHE


def teacher_cache(option: Any = True) -> VectorCache | None:
    """The cache ``option`` asks for: True or None (``$ISOTROPY_CACHE/teacher``), False (none), or a folder; its
    path made absolute here, so Dask workers started in another folder use the same one."""
    if option is None or option is True:
        return VectorCache((default_cache_dir() / TEACHER_FOLDER).absolute())
    if option is False:
        return None
    if not isinstance(option, str | os.PathLike) or not str(option).strip():
        raise IsotropyError(f"--teacher-cache must be a folder, got {option!r}")
    folder = Path(option).expanduser()
    if folder.exists() and not folder.is_dir():
        raise IsotropyError(f"--teacher-cache {folder} is not a folder")
    return VectorCache(folder.absolute())


class _Bar:
    """A caller's progress bar advanced in lines while the teacher reads a chunk's texts batch by batch."""

    def __init__(self, bar: Any, lines: int, texts: int) -> None:
        self.bar, self.per_text, self.done = bar, lines / max(texts, 1), 0.0

    def advance(self, steps: int = 1, description: str | None = None) -> None:
        self.done += steps * self.per_text
        self.bar.advance(steps * self.per_text)


def teacher_key(teacher: Any) -> dict[str, Any] | None:
    """What decides ``teacher``'s vectors of a text (module docs): its fingerprint, pooling, ``max_length`` and
    backend; None for a teacher without a fingerprint (never cached)."""
    record = getattr(teacher, "record", None)
    if not callable(record) or not callable(getattr(teacher, "fingerprint", None)):
        return None
    rec = record()
    pooling = teacher.pooling_key() if callable(getattr(teacher, "pooling_key", None)) else rec["pooling"]
    return {
        "fingerprint": teacher.fingerprint(),
        "pooling": pooling,
        "max_length": rec["max_length"],
        "backend": rec.get("backend"),
    }


class TeacherVectors:
    """``teacher``'s vectors of a chunk's lines and spans, read from ``cache`` where it holds them (module docs).

    ``teacher``: an :class:`~isotropy.encoders.Encoder` (cached by its fingerprint) or any object with
    ``encode(texts, show_progress=False)`` (not cached); ``where``: the corpus's name, for warnings; ``warn``: what
    takes a warning line (default: printed on stderr; a Dask part keeps its lines for the client to print)."""

    def __init__(self, teacher: Any, cache: VectorCache | None, where: str = "the corpus", warn: Any = None) -> None:
        self.teacher, self.where = teacher, where
        self.warn = warn or (lambda line: print(line, file=sys.stderr))
        self.base: dict[str, Any] | None = None
        self.dim: int | None = None
        record = getattr(teacher, "record", None)
        self.takes_bar = callable(record)  # an Encoder advances a caller's bar batch by batch
        if cache is not None and cache.enabled:
            self.base = teacher_key(teacher)
            self.dim = record().get("dim") if self.base is not None else None
        self.cache = cache if self.base is not None else None
        self.writing = self.cache is not None

    def __call__(self, lines: list[str], spans: list[str], first: int, bar: Any = None) -> tuple[np.ndarray, str]:
        """``(vectors of lines + spans, in that order; how they came)``: ``"cached"`` (no text encoded), ``"lines"``
        (the lines read, the spans encoded) or ``"encoded"``; ``first``: the corpus's number of the chunk's first
        sentence (0-based), for warnings; ``bar``: a progress bar counting lines, advanced by the chunk's lines."""
        parts = {"lines": lines, "spans": spans} if spans else {"lines": lines}
        where = f"sentences {first + 1}..{first + len(lines)} of {self.where}"
        got: dict[str, np.ndarray | None] = dict.fromkeys(parts)
        keys: dict[str, dict] = {}
        if self.cache is not None:
            for name, texts in parts.items():
                keys[name] = VectorCache.key(**self.base, sentences=texts)
                got[name], reason = self.cache.lookup(keys[name], self.dim)
                if reason is not None:
                    npy = self.cache.paths(keys[name])[0]
                    self.warn(
                        f"warning: the teacher cache entry {npy} ({name} of {where}) is damaged ({reason}): encoding it again"
                    )
        todo = [name for name in parts if got[name] is None]
        if todo:
            texts = [t for name in todo for t in parts[name]]
            wrapped = None if bar is None else _Bar(bar, len(lines), len(texts))
            extra = {"progress": wrapped} if wrapped is not None and self.takes_bar else {}
            fresh = np.asarray(self.teacher.encode(texts, show_progress=False, **extra))
            if wrapped is not None and len(lines) > wrapped.done:
                bar.advance(len(lines) - wrapped.done)
            start = 0
            for name in todo:
                got[name], start = fresh[start : start + len(parts[name])], start + len(parts[name])
                self._store(keys.get(name), got[name])
        elif bar is not None:
            bar.advance(len(lines))
        how = "encoded" if "lines" in todo else ("lines" if todo else "cached")
        return np.concatenate([got[name] for name in parts]), how

    def _store(self, key: dict | None, vectors: np.ndarray) -> None:
        if not self.writing or key is None:
            return
        try:
            failed = self.cache.put(key, vectors, warn=False)
        except IsotropyError as exc:  # the atomic writer's own refusals (the folder vanished, vectors not finite)
            failed = exc
        if failed is not None:
            self.writing = False  # one warning for the run, not one per chunk
            self.warn(
                f"warning: cannot write the teacher cache in {self.cache.directory} ({failed}): "
                "the run goes on without caching the rest"
            )
