"""Integrations (layer 5): fitting into what users already run.

* :mod:`.sentence_transformers` -- calibrated model folders ``SentenceTransformer`` loads
  (:func:`to_sentence_transformer`), and :func:`calibrate` for a model in memory;
* :mod:`.sklearn` -- :class:`SentenceEncoder`, sentences as a pipeline's first step;
* :mod:`.onnx_export` -- :func:`export_onnx`, encoder + pooling + transform as one graph
  (run by :mod:`isotropy.encoders.backends.onnx`).

None of them imports its third-party package until used: the sentence-transformers module
classes (:class:`IsotropyPooling`, :class:`IsotropyTransform`) are created on first access.
"""

from __future__ import annotations

from typing import Any

from .onnx_export import export_onnx
from .sentence_transformers import *  # noqa: F403 (its USER_API is re-exported below)
from .sentence_transformers import USER_API
from .sklearn import SentenceEncoder

__all__ = ["IsotropyPooling", "IsotropyTransform", *USER_API, "SentenceEncoder", "export_onnx"]  # noqa: F405 (the classes: __getattr__)


def __getattr__(name: str) -> Any:
    # The module classes subclass sentence-transformers' Module: created on first access.
    if name in ("IsotropyPooling", "IsotropyTransform"):
        from . import sentence_transformers

        return getattr(sentence_transformers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
