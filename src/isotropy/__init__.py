"""isotropy: turn a pretrained transformer encoder into a good unsupervised sentence-embedding model.

Public names are imported lazily, so ``import isotropy`` stays fast and only
pulls in torch when an encoder or a flow is actually used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Encoder": "isotropy.encoding",
    "POOLINGS": "isotropy.pooling",
    "Whitening": "isotropy.whitening",
    "Flow": "isotropy.flow",
    "Index": "isotropy.search",
    "IsotropyError": "isotropy._io",
    "NotFittedError": "isotropy._io",
    "load_transform": "isotropy._io",
    "evaluate": "isotropy.evaluation",
    "to_sentence_transformer": "isotropy.ecosystem",
    "calibrate": "isotropy.ecosystem",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'isotropy' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
