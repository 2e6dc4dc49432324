"""Encoders (layer 4): sentences to pooled sentence vectors.

* :class:`Encoder` -- tokenizer, batching, pooling, progress; composed with a backend;
* :mod:`.backends` -- torch (transformers) and onnxruntime, one registry;
* :mod:`.poolings` -- how a vector is read off a forward pass, one registry;
* :mod:`.models` -- finding and loading Hugging Face models, refusing broken ones;
* :mod:`.cache` -- encoded vectors on disk, verified before they are served.
"""

from __future__ import annotations

from .encoder import Encoder, default_device
from .models import DEFAULT_MODEL_NAME, default_model_path
from .poolings import POOLINGS, parse_pooling

__all__ = ["Encoder", "default_device", "DEFAULT_MODEL_NAME", "default_model_path", "POOLINGS", "parse_pooling"]
