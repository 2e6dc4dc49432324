"""The encoder that reads the corpus for the token fit: the model itself, or an ONNX export of it.

The teacher's pass is the factory's real cost on a CPU. ``isotropy export onnx --quantize int8`` of the same model
runs it about twice as fast on a CPU without bf16 arithmetic (BENCHMARKS ``onnx``), with vectors at a mean cosine
of about 0.99 to the model's float32 ones; RESULTS ``factory-curve`` shows what it does to the distilled model's
score. The export is accepted only when it is a plain export of the model being distilled: the same weights (the
model's fingerprint, recorded in the export), its own pooling and ``max_length``, and no transform in the graph;
anything else would fit the table to another model's vectors. Its vectors are cached under the graph's own
fingerprint, so an int8 run never reads a float32 run's chunks or the other way round.

Either teacher reads the corpus in batches of at most ``BATCH_TOKENS`` padded tokens (the encoder's length-sorted
batches, :func:`~isotropy.encoders.batching.token_budget_cuts`) rather than 64 sentences: a batch of 64 long lines
pads to 64 x 256 tokens, whose attention alone is hundreds of MB, and onnxruntime's arena keeps the largest blocks it
ever allocated for the session's life. On 8,192 evenly spaced wiki lines the budget read the int8 export 1.45 times
as fast with a peak resident set of ~730 MB instead of ~1,550, and the float32 model 1.21 times as fast, ~850 MB
instead of ~1,160 (BENCHMARKS ``factory-memory``, the teacher's share; medians of 3 runs each, taking turns). The
vectors are the same up to float rounding (padding differs), so the teacher cache's keys do not hold the batching.
"""

from __future__ import annotations

import os
from typing import Any

from ..encoders.models import resolve_model
from ..errors import IsotropyError

__all__ = ["corpus_teacher", "model_fingerprint", "teacher_spec", "teacher_width", "check_teacher", "Lent", "BATCH_TOKENS"]

BATCH_TOKENS = 1024  # padded tokens per batch of the corpus teacher (module docs; chosen on wiki lines' speed and memory)


def corpus_teacher(model: Any, onnx: str | os.PathLike | None = None) -> Any:
    """The :class:`~isotropy.encoders.Encoder` that encodes the corpus: ``model`` on torch, or (``onnx``) the
    export folder of it, checked to compute the same vectors up to its arithmetic."""
    from ..encoders import Encoder

    if onnx is not None and not os.path.isdir(onnx):  # before the model loads
        raise IsotropyError(f"--teacher-onnx {onnx}: not a folder (write one with: isotropy export onnx -o {onnx})")
    teacher = Encoder(model, batch_tokens=BATCH_TOKENS)
    if onnx is None:
        return teacher
    export = Encoder(onnx, backend="onnx", batch_tokens=BATCH_TOKENS)
    _check_export(onnx, export.runtime.config, teacher.record())
    return export


class Lent:
    """The corpus teacher handed over with no reference left to the one who built it: :meth:`take` gives it once and
    keeps none. :func:`~.run.distill` lends it to :func:`~.run.fit_on_corpus`, which drops it after the corpus pass,
    so the model and onnxruntime's arena (which keeps the largest blocks a long pass ever asked for) are freed before
    the solve, the other peak of a large run (RESULTS ``factory-curve``). Passing the teacher itself would not do:
    a caller's frame holds its arguments until the call returns."""

    def __init__(self, teacher: Any) -> None:
        self._teacher = teacher

    def take(self) -> Any:
        teacher, self._teacher = self._teacher, None
        return teacher


def model_fingerprint(teacher: Any) -> str:
    """The fingerprint of the model ``teacher`` reads the corpus for: its own, or for an export (:func:`corpus_teacher`
    checked it is one) the one it was exported from, which keys model2vec's table of that model (:mod:`.table_cache`)."""
    if teacher.record()["backend"] == "onnx":
        return str(teacher.runtime.config["fingerprint"])
    return teacher.fingerprint()


def _check_export(folder: Any, cfg: dict, want: dict) -> None:
    """The export in ``folder`` (its ``isotropy_onnx.json``, ``cfg``) against the model's record ``want``."""
    problems = []
    if cfg.get("fingerprint") != want["fingerprint"]:
        problems.append(f"it was exported from other weights ({cfg.get('model_name')}, not {want['model_name']})")
    if cfg.get("transform"):
        problems.append("it has a calibration in its graph")
    if str(cfg.get("pooling")) != str(want["pooling"]):
        problems.append(f"its pooling is {cfg.get('pooling')}, the model's is {want['pooling']}")
    if int(cfg.get("max_length", -1)) != int(want["max_length"]):
        problems.append(f"its max_length is {cfg.get('max_length')}, the model's is {want['max_length']}")
    if problems:
        raise IsotropyError(
            f"--teacher-onnx {folder} is not a plain export of the model being distilled: {'; '.join(problems)} "
            "(write one with: isotropy export onnx -o DIR [--model M] [--quantize int8])"
        )


def teacher_spec(model: Any, teacher: Any) -> Any:
    """What Dask workers build ``teacher`` (:func:`corpus_teacher`'s for ``model``) from, resolved on the client from
    ``teacher`` itself: an :class:`~isotropy.distributed.spec.EncoderSpec` (the export folder, or the model as given).
    No other copy of the model is loaded or kept here, so the caller frees the model by dropping ``teacher``."""
    from ..distributed.spec import EncoderSpec

    rec, batching = teacher.record(), {"batch_tokens": teacher.batch_tokens}
    if rec["backend"] == "onnx":
        return EncoderSpec(model=str(rec["model"]), backend="onnx", **batching).resolve(encoder=teacher)
    return EncoderSpec(model=None if model is None else str(model), **batching).resolve(encoder=teacher)


def teacher_width(model: Any) -> int | None:
    """The transformer's hidden width from its config (None when it cannot be read cheaply)."""
    from ..encoders.models import quiet_transformers

    path, name = resolve_model(model)
    try:
        from transformers import AutoConfig

        with quiet_transformers():
            config = AutoConfig.from_pretrained(str(path) if path is not None else name)
        width = getattr(config, "hidden_size", None)
    except Exception:  # noqa: BLE001 - only an early check: the distill itself reports a model it cannot read
        return None
    return int(width) if isinstance(width, int) and width > 0 else None


def check_teacher(model: Any) -> None:
    """A static model (GloVe, a model2vec or distilled folder, a StaticEmbedding folder) has no transformer to distill."""
    from ..encoders.models import DEFAULT_MODEL_NAME
    from ..encoders.static.sources import static_kind

    kind = static_kind(model)
    if kind is not None:
        what = {"glove": "GloVe word vectors", "model2vec": "a model2vec folder", "st-static": "a StaticEmbedding folder"}
        raise IsotropyError(
            f"cannot distill {str(model)!r}: it is a static model ({what.get(kind, 'word vectors')}), and distill needs "
            f"a transformer teacher (a Hugging Face model id or folder; the default is {DEFAULT_MODEL_NAME})"
        )
