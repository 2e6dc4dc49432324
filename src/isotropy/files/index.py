"""Moved to :mod:`isotropy.search.build` (``index build`` lives next to :class:`isotropy.search.Index`); this old path still
answers every name, with a DeprecationWarning, and goes in 1.0."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_NEW = "isotropy.search.build"


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    value = getattr(importlib.import_module(_NEW), name)  # an unknown name: the AttributeError of the new module
    warnings.warn(f"{__name__}.{name} moved to {_NEW}.{name}; import it from there", DeprecationWarning, stacklevel=2)
    return value
