"""Backends: what runs the model's forward pass for an :class:`~isotropy.encoders.Encoder` (layer 4).

An :class:`~isotropy.encoders.Encoder` owns tokenisation, batching, pooling names and
progress; a backend owns the model. Each backend has the same small surface:

* ``name``, ``tokenizer``, ``folder``, ``model_name``, ``model`` (the native object);
* ``default_pooling()``, ``check_pooling(p)``, ``output_dim(p)``, ``position_limit``,
  ``default_max_length()``;
* ``run(feeds, poolings) -> [float32 array per pooling]`` for one padded batch;
* ``fingerprint()`` (a digest of what determines the vectors), ``describe_model()``, and
  ``record()``: what an artefact stores to rebuild the same backend (``backend``, ``model``).

Adding a backend is one module here plus one entry in :data:`BACKENDS`.
"""

from __future__ import annotations

import importlib
from typing import Any

from ...errors import IsotropyError

__all__ = ["BACKENDS", "make_backend", "backend_for"]

BACKENDS: dict[str, str] = {
    "torch": "isotropy.encoders.backends.torch:TorchBackend",
    "onnx": "isotropy.encoders.backends.onnx:OnnxBackend",
    "static": "isotropy.encoders.backends.static:StaticBackend",
}


def make_backend(name: str, model: Any, **options: Any):
    """The backend ``name`` loaded on ``model``; an unknown name is one clear error."""
    target = BACKENDS.get(str(name))
    if target is None:
        raise IsotropyError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)(model, **options)


def backend_for(name: str, model: Any) -> str:
    """The backend that runs ``model``: ``static`` for a static model asked of the default ``torch`` backend."""
    if name == "torch":
        from ..static.sources import is_static_model

        if is_static_model(model):
            return "static"
    return name
