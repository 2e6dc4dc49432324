"""Calibration transforms (layer 2): fitted on sentence vectors, no labels.

Every transform follows one protocol (:class:`~isotropy.transforms.base.Transform`:
scikit-learn's estimator contract, ``n_features_in_``/``n_features_out_``, ``save``/``load``,
``to_torch``). The registry below maps a saved folder's ``kind`` to its class, so
:func:`load_transform` reads any of them. Adding a transform is one module under
``transforms/`` plus one entry in :data:`TRANSFORMS`; the classes are imported only when
used (a flow needs torch, a whitening does not).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..errors import IsotropyError
from ..storage.artifacts import read_config

__all__ = ["TRANSFORMS", "transform_class", "load_transform", "as_transform"]

# kind (the saved folder's "kind", the CLI's name) -> "module:Class"
TRANSFORMS: dict[str, str] = {
    "whitening": "isotropy.transforms.whitening:Whitening",
    "flow": "isotropy.transforms.flow:Flow",
}


def transform_class(kind: str) -> type:
    """The class registered for ``kind``; an unknown kind is one clear error."""
    target = TRANSFORMS.get(kind)
    if target is None:
        raise IsotropyError(f"{kind!r} is not a transform; the transforms are {', '.join(TRANSFORMS)}")
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def load_transform(path: str | os.PathLike, **transient: Any):
    """Load any saved transform folder, dispatching on the ``kind`` in its config."""
    kind = read_config(path).get("kind")
    if kind not in TRANSFORMS:
        raise IsotropyError(f"{path} holds a {kind!r}, which is not a transform ({', '.join(TRANSFORMS)})")
    return transform_class(kind).load(path, **transient)


def as_transform(transform: Any):
    """A fitted transform from a transform object or a saved folder; anything else is one clear error."""
    from .base import Transform

    if isinstance(transform, (str, os.PathLike)):
        return load_transform(transform)
    if not isinstance(transform, Transform):
        raise IsotropyError(
            f"expected a fitted isotropy transform ({', '.join(TRANSFORMS)}) or its folder, got {type(transform).__name__}"
        )
    transform._check_fitted()
    return transform
