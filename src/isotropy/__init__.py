"""isotropy: turn a pretrained transformer encoder into a good unsupervised sentence-embedding model.

Public names are imported lazily, so ``import isotropy`` stays fast and only
pulls in torch when an encoder or a flow is actually used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.3.0"  # the same as pyproject.toml's (tests/test_docs.py)

_EXPORTS = {
    "Encoder": "isotropy.encoders",
    "POOLINGS": "isotropy.encoders.poolings",
    "Whitening": "isotropy.transforms.whitening",
    "Flow": "isotropy.transforms.flow",
    "Index": "isotropy.search",
    "IndexSpec": "isotropy.search",
    "IsotropyError": "isotropy.errors",
    "NotFittedError": "isotropy.errors",
    "load_transform": "isotropy.transforms",
    "evaluate": "isotropy.evaluation",
    "to_sentence_transformer": "isotropy.integrations",
    "calibrate": "isotropy.calibration",
    "select_calibration": "isotropy.selection",
    "encode_file": "isotropy.files",
    "fit_file": "isotropy.files",
    "transform_file": "isotropy.files",
    "build_index": "isotropy.files",
    "build_auto_index": "isotropy.files",
    "add_to_index": "isotropy.files",
    "search_index": "isotropy.files",
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
