"""The static backend: a table of token vectors averaged per sentence, on the CPU with numpy (layer 4).

Runs every static source of :mod:`isotropy.encoders.static` (model2vec and ``StaticEmbedding`` folders,
word-vector files, ``glove-6b-50d``). There is no forward pass: the :class:`~isotropy.encoders.Encoder`
hands whole chunks of sentences to :meth:`StaticBackend.encode` (``direct``), which tokenises them through a
word cache (:mod:`isotropy.encoders.static.wordcache`: the same ids as the table's Rust tokenizer, which it
falls back to) and pools with one sparse product per chunk, chunks in threads across the cores. Poolings: ``last-avg`` (alias ``mean``,
the default), ``sif[:a=A,norm=N]`` (weights ``a / (a + p)``; p counted on a corpus when the encoder has
``pooling_stats``, else Zipf's law on the table's frequency rank) and ``idf`` (needs counts).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..._math import usable_cores
from ...errors import IsotropyError
from ...storage.stamps import DigestMemo
from ..poolings import Pooling
from ..static.parsecache import fingerprint_dir
from ..static.sources import GLOVE_NAME, glove_root, load_table, static_kind
from ..static.table import CHUNK, Coverage, TableTokenizer
from ..static.wordcache import WordCache

__all__ = ["StaticBackend", "NO_LIMIT"]

NO_LIMIT = 1 << 20  # max_length of a table that does not truncate (sentence-transformers' StaticEmbedding)
FINGERPRINT_VERSION = 1
# a table's fingerprint while its files stay as they were, in this process and on disk (storage/stamps.py)
FINGERPRINTS = DigestMemo(folder=fingerprint_dir)
THREADS = usable_cores()


class StaticBackend:
    """A static table as an encoder backend (see the module docs)."""

    name = "static"
    pooling_in_graph = False
    direct = True  # the encoder hands it sentences, not padded batches
    position_limit = NO_LIMIT

    def __init__(self, model: str | os.PathLike | None = None, device: str | None = None, threads: int | None = None) -> None:
        if threads is not None:
            raise IsotropyError("threads= applies to the onnx backend, not to a static model")
        if model is None or static_kind(model) is None:
            raise IsotropyError(f"backend 'static' needs a static model (a model2vec folder, a word-vector file, {GLOVE_NAME!r})")
        self.table = load_table(model)
        self.kind = static_kind(model)
        self.model_name = GLOVE_NAME if self.kind == "glove" else str(self.table.source)
        self.folder = None if self.kind == "glove" else Path(os.path.realpath(str(model)))
        self.device = "cpu"
        self.tokenizer = TableTokenizer(self.table)
        self._fingerprint: str | None = None
        self.words: WordCache | None = None  # the word-cache tokenisation (encoders/static/wordcache.py), made on first use
        self.coverage: Coverage | None = None  # of the last encode
        self.coverage_total = Coverage()  # of every encode since the model was loaded (or reset_coverage())

    @property
    def model(self):
        return self.table

    # ------------------------------------------------------------------ what the encoder asks

    def default_pooling(self) -> str:
        return "last-avg"

    def default_max_length(self) -> int:
        return NO_LIMIT if self.table.max_length is None else int(self.table.max_length)

    def check_pooling(self, p: Pooling) -> None:
        if p.name != "last-avg" and getattr(p, "weighting", None) not in ("sif", "idf"):
            raise IsotropyError(
                f"pooling {p.name!r} reads a transformer's layers; a static model pools by mean (last-avg), sif[:a=A] or idf"
            )

    def output_dim(self, p: Pooling) -> int:
        return self.table.dim

    @contextlib.contextmanager
    def attention(self, implementation: str | None) -> Iterator[None]:
        yield

    def run(self, feeds: Any, poolings: Any, states: Any = None) -> list[np.ndarray]:  # pragma: no cover - direct
        raise IsotropyError("the static backend encodes sentences directly (Encoder.encode)")

    def token_weights(self, p: Pooling, stats: Any) -> np.ndarray | None:
        """Per-row weights of pooling ``p``: None for the mean; SIF from the corpus counts or the table's Zipf ranks."""
        kind = getattr(p, "weighting", None)
        if kind is None:
            return None
        if stats is not None:
            return stats.weights(kind, p.a, self.tokenizer).astype(np.float64)
        if kind == "idf":
            raise IsotropyError(
                f"pooling {p.name!r} needs document counts from a corpus: pass --pooling-stats CORPUS "
                "(Python: Encoder(..., pooling_stats=...) or encoder.fit_pooling(sentences)); sif works without"
            )
        return p.a / (p.a + self.table.probabilities)

    # ------------------------------------------------------------------ encoding

    def word_cache(self) -> WordCache:
        """The model's tokenisation (:class:`~isotropy.encoders.static.wordcache.WordCache` over its table: the
        table's ids, each word tokenised once), made on first use: what :meth:`encode` and calibrate's token
        counts (:func:`isotropy.calibration.token_fit.token_counts`) read."""
        if self.words is None:
            self.words = WordCache(self.table)
        return self.words

    def encode(
        self, sentences: Sequence[str], poolings: dict[str, Pooling], max_length: int, stats: Any, bar: Any
    ) -> dict[str, np.ndarray]:
        """Every pooling of ``sentences`` (float32, n x d), chunk by chunk; :attr:`coverage` is updated."""
        limit = None if max_length >= NO_LIMIT else int(max_length)
        weights = {p.name: self.token_weights(p, stats) for p in poolings.values()}
        out = {name: np.empty((len(sentences), self.table.dim), dtype=np.float32) for name in poolings}
        coverage = Coverage()
        words = self.word_cache()

        def chunk(start: int) -> tuple[int, np.ndarray, int, int]:  # numpy releases the GIL: chunks run on every core
            flat, lengths, total, unknown = words.token_array(sentences[start : start + CHUNK], limit)
            for name, p in poolings.items():
                norm = getattr(p, "norm", "tokens")
                out[name][start : start + len(lengths)] = self.table.pool_array(flat, lengths, weights[p.name], norm)
            return len(lengths), lengths, total, unknown

        starts = range(0, len(sentences), CHUNK)
        with ThreadPoolExecutor(min(THREADS, len(starts)) or 1) as pool:
            for n, lengths, total, unknown in pool.map(chunk, starts):
                coverage.add(lengths, total, unknown)
                bar.advance(n)
        self.coverage = coverage
        self.coverage_total.merge(coverage)
        return out

    def reset_coverage(self) -> None:
        self.coverage, self.coverage_total = None, Coverage()

    # ------------------------------------------------------------------ identity

    def fingerprint(self) -> str:
        """``static-`` and the table's digest (2-3 s for GloVe's 400k words: computed once per process while the
        files it was loaded from are unchanged)."""
        if self._fingerprint is None:  # once per backend, as torch's and onnx's: no walk of the files on each call
            files = glove_root() if self.folder is None else self.folder
            key = ("static", self.kind, str(files))
            self._fingerprint = FINGERPRINTS.get(key, [files], lambda: f"static-{self.table.digest()}")
        return self._fingerprint

    def describe_model(self) -> str:
        case = ", lower-cased" if self.table.lowercase else ""
        return f"static model {self.model_name} ({len(self.table)} tokens{case})"

    def record(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model_name, "fingerprint_version": FINGERPRINT_VERSION}
