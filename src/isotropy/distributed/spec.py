"""What the client sends and gets back: the encoder spec, the per-shard results, the inputs."""

from __future__ import annotations

import glob as globmod
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import IsotropyError
from ..storage.integrity import verifying
from ..storage.vectors import open_vector_file
from .workers import worker_encoder

__all__ = ["EncoderSpec", "ShardResult", "EncodeReport", "expand_inputs", "vector_width"]

_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class EncoderSpec:
    """What a worker needs to build an :class:`isotropy.encoders.Encoder` itself (no pickled model).

    ``model`` is a Hugging Face id or a folder every worker can read at the same path
    (``None``: the embedded default model, installed with isotropy on every worker).
    ``backend`` is the encoder's backend: ``"torch"``, or ``"onnx"`` with ``model`` the
    folder written by ``isotropy export onnx``. ``fingerprint`` is filled in by
    :meth:`resolve` on the client; workers check it.
    """

    model: str | None = None
    pooling: str | None = None
    max_length: int | None = None
    batch_size: int = 64
    batch_tokens: int | None = None  # a batch's padded tokens instead of batch_size sentences (Encoder's own option)
    device: str | None = None
    backend: str = "torch"
    fingerprint: str | None = field(default=None, compare=False)
    dim: int | None = field(default=None, compare=False)
    verify: bool | None = field(default=None, compare=False)  # the client's choice (--no-verify), pinned by resolve

    @classmethod
    def coerce(cls, value: EncoderSpec | dict | str | os.PathLike | None) -> EncoderSpec:
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, (str, os.PathLike)):
            return cls(model=str(value))
        if isinstance(value, dict):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                raise IsotropyError(f"unknown encoder spec fields: {', '.join(sorted(unknown))}")
            return cls(**value)
        raise IsotropyError(f"an encoder spec is an EncoderSpec, a dict or a model name, not {type(value).__name__}")

    def build(self):
        from ..encoders import Encoder, parse_pooling

        if self.pooling is not None and parse_pooling(self.pooling).needs_token_stats and self.backend == "torch":
            # a worker would need the client's table, and shard sidecars its digest: not carried (yet)
            raise IsotropyError(
                f"distributed encoding does not carry token frequencies, which pooling {self.pooling!r} needs: "
                f"encode on one machine (isotropy encode --pooling-stats ...), or on the cluster with an ONNX export of it "
                f"(EncoderSpec(backend='onnx'))"
            )
        return Encoder(
            self.model,
            pooling=self.pooling,
            max_length=self.max_length,
            batch_size=self.batch_size,
            batch_tokens=self.batch_tokens,
            device=self.device,
            backend=self.backend,
            verify=self.verify,
        )

    def resolve(self, encoder: Any = None) -> EncoderSpec:
        """Load the model here once: validates the spec before any cluster work, pins the
        pooling and max_length the model defaults to, and records its fingerprint.

        ``encoder``: the :class:`~isotropy.encoders.Encoder` the caller already built from this spec, read instead of
        loading the model again; it is not kept, so a client that needs the model only to resolve its spec frees it
        (``isotropy distill --engine dask``: the workers encode, and a model held by the client is memory the solve needs).
        """
        enc = worker_encoder(self) if encoder is None else encoder  # cached: one process loads the model once
        rec = enc.record()
        model = None if self.model is None else (str(enc.folder) if enc.folder is not None else enc.model_name)
        return replace(
            self,
            model=model,
            backend=rec["backend"],
            pooling=rec["pooling"],
            max_length=rec["max_length"],
            fingerprint=rec["fingerprint"],
            dim=rec["dim"],
            verify=verifying(self.verify),  # workers in other processes never see the client's --no-verify
        )

    def key(self) -> tuple:
        return (self.model, self.pooling, self.max_length, self.batch_size, self.batch_tokens, self.device, self.backend)


@dataclass
class ShardResult:
    source: str
    output: str | None
    rows: int
    status: str  # "encoded", or "skipped" (its existing output verified and kept)
    reason: str = ""  # why an existing output was redone


@dataclass
class EncodeReport:
    shards: list[ShardResult]
    dim: int
    output: str

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards)

    @property
    def encoded(self) -> list[ShardResult]:
        return [s for s in self.shards if s.status == "encoded"]

    @property
    def skipped(self) -> list[ShardResult]:
        return [s for s in self.shards if s.status == "skipped"]

    def describe(self) -> str:
        redone = sum(1 for s in self.encoded if s.reason)
        return (
            f"{len(self.shards)} shards, {self.rows} x {self.dim} vectors in {self.output}: "
            f"{len(self.encoded)} encoded ({redone} redone), {len(self.skipped)} verified and skipped"
        )


# --------------------------------------------------------------------------- inputs


def expand_inputs(inputs: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """Shard files from a glob pattern, a file, or a list of either; sorted, de-duplicated.

    A pattern that matches no file is one clear error naming it.
    """
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if not items:
        raise IsotropyError("no input shards given")
    out: list[Path] = []
    for item in items:
        text = os.path.expanduser(str(item))
        if _GLOB_CHARS.search(text):
            matches = sorted(p for p in globmod.glob(text, recursive=True) if Path(p).is_file())
            if not matches:
                raise IsotropyError(f"the pattern {str(item)!r} matches no file")
            out.extend(Path(p) for p in matches)
        else:
            p = Path(text)
            if not p.is_file():
                raise IsotropyError(f"input shard {item} does not exist or is not a file")
            out.append(p)
    seen: dict[Path, None] = {}
    for p in out:
        seen.setdefault(p.resolve(), None)
    return list(seen)


def vector_width(files: list[Path]) -> int:
    """Width shared by all .npy shards (read from headers only), or one clear error."""
    first: tuple[Path, int] | None = None
    for f in files:
        arr = open_vector_file(f)
        if first is None:
            first = (f, arr.shape[1])
        elif arr.shape[1] != first[1]:
            raise IsotropyError(f"vector shards differ in width: {f} has {arr.shape[1]} columns but {first[0]} has {first[1]}")
    assert first is not None
    return first[1]
