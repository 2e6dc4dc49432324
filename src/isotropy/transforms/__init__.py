"""Calibration transforms (layer 3): fitted on sentence vectors, no labels.

Every transform follows one protocol (:class:`~isotropy.transforms.base.Transform`:
scikit-learn's estimator contract, ``n_features_in_``/``n_features_out_``, ``save``/``load``,
``to_torch``). The registry below maps a saved folder's ``kind`` to its class, so
:func:`load_transform` reads any of them. Adding a transform is one module under
``transforms/`` plus one entry in :data:`TRANSFORMS`; the classes are imported only when
used (a flow needs torch, a whitening does not). :data:`PRESETS` names settings of a
registered transform (``soft-0.5`` is a whitening with ``power=0.5``), usable wherever a
transform is named (``isotropy fit soft-0.5``, ``--method soft-0.5``).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..errors import IsotropyError
from ..storage.artifacts import read_config

__all__ = [
    "TRANSFORMS",
    "PAIRED",
    "PRESETS",
    "transform_class",
    "resolve_transform",
    "make_transform",
    "load_transform",
    "as_transform",
]

# kind (the saved folder's "kind", the CLI's name) -> "module:Class"
TRANSFORMS: dict[str, str] = {
    "whitening": "isotropy.transforms.whitening:Whitening",
    "flow": "isotropy.transforms.flow:Flow",
    "center": "isotropy.transforms.center:Center",
    "abtt": "isotropy.transforms.abtt:AllButTheTop",
    "common-component": "isotropy.transforms.common_component:CommonComponentRemoval",
}

# Transforms saved and loaded like the others but not fitted on sentence vectors alone, so not a
# method of `fit`/`eval`/`calibrate` (which fit on sentence vectors): a teacher map is fitted on
# pairs (student and teacher vectors of the same sentences); a Zipfian whitening on a token table
# whose rows are in frequency order or come with their probabilities (a static model's table).
PAIRED: dict[str, str] = {
    "teacher-map": "isotropy.transforms.teacher_map:TeacherMap",
    "zipfian-whitening": "isotropy.transforms.token_whitening:ZipfianWhitening",
}

# Named settings of a registered transform: name -> (kind, the parameters the name fixes, what it is).
# Soft whitening, W = U diag(eigenvalues)^(-power/2), interpolates between PCA (power 0: rotation
# only) and full whitening (power 1); it saves as a whitening with that power. 0.5 is also what
# `isotropy index build` fits by default (docs/BENCHMARKS.md, section search).
PRESETS: dict[str, tuple[str, dict[str, Any], str]] = {
    "soft-0.25": ("whitening", {"power": 0.25}, "soft whitening, power 0.25: eigenvalue spread shrunk to its 4th root"),
    "soft-0.5": ("whitening", {"power": 0.5}, "soft whitening, power 0.5: eigenvalue spread shrunk to its square root"),
    "soft-0.75": ("whitening", {"power": 0.75}, "soft whitening, power 0.75: closer to full whitening"),
}


def _names() -> str:
    return f"{', '.join(TRANSFORMS)} (presets: {', '.join(PRESETS)})"


def transform_class(kind: str) -> type:
    """The class registered for ``kind``; an unknown kind is one clear error."""
    target = TRANSFORMS.get(kind)
    if target is None:
        hint = f" (a preset of {PRESETS[kind][0]})" if kind in PRESETS else ""
        raise IsotropyError(f"{kind!r} is not a transform kind{hint}; the transforms are {_names()}")
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def resolve_transform(name: str) -> tuple[type, dict[str, Any]]:
    """``(class, the parameters the name fixes)`` for a kind or a preset name."""
    if name in PRESETS:
        kind, fixed, _ = PRESETS[name]
        return transform_class(kind), dict(fixed)
    if name not in TRANSFORMS:
        raise IsotropyError(f"{name!r} is not a transform; the transforms are {_names()}")
    return transform_class(name), {}


def make_transform(name: str, **params: Any):
    """An unfitted transform for a kind or a preset (``make_transform("soft-0.5", n_components=128)``);
    a parameter that contradicts what the preset fixes is one clear error."""
    cls, fixed = resolve_transform(name)
    for key, value in fixed.items():
        if key in params and params[key] != value:
            raise IsotropyError(f"{name} fixes {key}={value!r}; use {cls.kind} with {key}={params[key]!r} instead")
    return cls(**{**params, **fixed})


def load_transform(path: str | os.PathLike, *, verify: bool | None = None, **transient: Any):
    """Load any saved transform folder, dispatching on the ``kind`` in its config (``verify``: see ``Transform.load``)."""
    kind = read_config(path).get("kind")
    if kind in PAIRED:
        module, _, name = PAIRED[kind].partition(":")
        return getattr(importlib.import_module(module), name).load(path, **transient)
    if kind not in TRANSFORMS:
        raise IsotropyError(f"{path} holds a {kind!r}, which is not a transform ({', '.join(TRANSFORMS)})")
    return transform_class(kind).load(path, verify=verify, **transient)


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
