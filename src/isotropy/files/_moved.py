"""The old module paths of the index builders (``isotropy.files.index``, ``.index_scale``, ``.index_shards``), which
moved next to :class:`isotropy.search.Index`: each answers every name of its new module with a DeprecationWarning,
and goes in 1.0."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def forward(old: str, new: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``old`` that hands each name on from ``new``, warning once per use."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(importlib.import_module(new), name)  # an unknown name: the AttributeError of the new module
        warnings.warn(f"{old}.{name} moved to {new}.{name}; import it from there", DeprecationWarning, stacklevel=2)
        return value

    return __getattr__
