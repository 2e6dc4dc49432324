"""A saved flow, checked before it is rebuilt, and a fitted flow's frozen forward map (for exports).

:class:`~isotropy.transforms.flow.Flow` fits and applies the Glow; this room holds its two other
forms: what ``Flow._from_state`` checks a saved ``state.safetensors`` against before any tensor is
built from it (sizes read off the tensor names and shapes, permutations that are permutations), and
:class:`FlowMap`, the ``nn.Module`` that :meth:`Flow.to_torch` returns (the LU-parametrised 1x1
convolutions replaced by their matrices, so that an ONNX graph with a dynamic batch axis holds it).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..errors import IsotropyError
from .glow import Glow, InvConvLU

__all__ = ["FlowMap", "check_permutations", "check_structure"]


def check_permutations(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Every saved ``perm`` buffer must be a permutation of 0..n-1 (a corrupted one would mix up dimensions)."""
    for name, value in arrays.items():
        if name.endswith(".perm"):
            v = np.asarray(value).reshape(-1)
            if v.dtype.kind not in "iu" or not np.array_equal(np.sort(v), np.arange(v.shape[0])):
                raise IsotropyError(
                    f"{path}/state.safetensors: {name[len('model.') :]} is not a permutation of 0..{v.shape[0] - 1}; "
                    f"the flow is corrupt, refit it"
                )


def check_structure(path: Path, arrays: dict[str, np.ndarray], flow: Any, dim: int) -> None:
    """config.json's sizes against the saved tensors, before anything is built from them: an
    edited n_features_in of 10**6 would otherwise allocate (and QR-factorise) a 10**6 x 10**6 matrix."""
    held = _saved_structure(arrays)
    if held is None:
        raise IsotropyError(
            f"{path}/state.safetensors lacks the flow's first layers (model.levels.0.0.*); the artefact is corrupt, refit it"
        )
    said = {"n_features_in": dim, "levels": flow.levels, "depth": flow.depth, "hidden": flow.hidden, "coupling": flow.coupling}
    for key, value in said.items():
        if held[key] is not None and held[key] != value:
            raise IsotropyError(
                f"{path}: saved state does not match its config: config.json says {key} {value!r}, state.safetensors "
                f"holds a flow with {key} {held[key]!r}; the folder was edited or its files mixed up: restore it or refit"
            )


class _FixedLinear(nn.Module):
    """A flow step's invertible 1x1 convolution with its matrix ``W`` computed once (inference only)."""

    def __init__(self, weight):
        super().__init__()
        self.register_buffer("weight", weight.detach().clone())

    def forward(self, x):
        return x @ self.weight, x.new_zeros(x.shape[0])


class FlowMap(nn.Module):
    """The fitted Glow's forward map ``x -> z`` (what :meth:`Flow.to_torch` returns).

    A copy of the flow's model in which every LU-parametrised 1x1 convolution is
    replaced by its matrix: :class:`~isotropy.transforms.glow.InvConvLU` picks its formula
    by the batch size (rows >= dims), a branch that a graph with a dynamic batch axis
    (ONNX) cannot hold; for many rows the result is the same product ``x @ W``.
    """

    def __init__(self, model: Glow):
        super().__init__()
        model = copy.deepcopy(model).cpu().eval()
        with torch.no_grad():
            for module in list(model.modules()):
                for name, child in list(module.named_children()):
                    if isinstance(child, InvConvLU):
                        setattr(module, name, _FixedLinear(child.weight()))
        for p in model.parameters():
            p.requires_grad_(False)
        self.glow = model

    def forward(self, x):
        return self.glow(x.float())[0].to(x.dtype)


def _saved_structure(arrays: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """Sizes of the flow a saved state holds (n_features_in, levels, depth, hidden, coupling), read
    off its tensor names and shapes; None when even the first step's tensors are missing."""
    first = "model.levels.0.0."
    bias, w1, out = (arrays.get(first + k) for k in ("actnorm.bias", "coupling.net.w1", "coupling.net.out.weight"))
    if bias is None or w1 is None or out is None or bias.ndim != 1 or w1.ndim != 2 or out.ndim != 2:
        return None
    steps = {tuple(map(int, m.groups())) for k in arrays if (m := re.match(r"model\.levels\.(\d+)\.(\d+)\.", k))}
    d = int(bias.shape[0])
    n_move = d // 2
    coupling = "additive" if out.shape[1] == n_move else "affine" if out.shape[1] == 2 * n_move else None
    return {
        "n_features_in": d,
        "levels": 1 + max(i for i, _ in steps),
        "depth": 1 + max(j for i, j in steps if i == 0),
        "hidden": int(w1.shape[1]),
        "coupling": coupling,
    }
