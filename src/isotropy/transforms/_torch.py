"""torch forms of fitted transforms (what ``to_torch()`` returns), for the sentence-transformers and ONNX exports."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["AffineMap", "LinearMap"]


class _FittedArrays(torch.nn.Module):
    """Fitted arrays as buffers, computed in ``dtype`` (float64 by default) whatever the model is cast to."""

    def __init__(self, arrays: dict[str, np.ndarray], dtype: Any = None):
        super().__init__()
        self._dtype = dtype or torch.float64
        self._arrays = {name: np.asarray(arr, dtype=np.float64) for name, arr in arrays.items()}
        for name, arr in self._arrays.items():
            self.register_buffer(name, torch.as_tensor(arr, dtype=self._dtype))

    def _apply(self, fn, recurse=True):
        # Keep the fitted arrays in their own precision: sentence-transformers casts whole models to
        # float32, and a whitening kernel in float32 costs ~1e-5 absolute on the outputs. Moves
        # between devices still apply; the arrays are rebuilt from the float64 originals.
        super()._apply(fn, recurse)
        device = getattr(self, next(iter(self._arrays))).device
        dtype = torch.float32 if device.type == "mps" else self._dtype  # MPS has no float64
        for name, arr in self._arrays.items():
            setattr(self, name, torch.as_tensor(arr, dtype=dtype, device=device))
        return self


class AffineMap(_FittedArrays):
    """``(x - shift) @ kernel`` with the fitted arrays as buffers, computed in ``dtype`` (float64 by default)."""

    def __init__(self, shift: np.ndarray, kernel: np.ndarray, dtype: Any = None):
        super().__init__({"shift": shift, "kernel": kernel}, dtype)

    def forward(self, x):
        return ((x.to(self.kernel.dtype) - self.shift) @ self.kernel).to(x.dtype)


class LinearMap(_FittedArrays):
    """``x @ weight + bias`` with the fitted arrays as buffers (a teacher map), in ``dtype`` (float64 by default)."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray, dtype: Any = None):
        super().__init__({"weight": weight, "bias": bias}, dtype)

    def forward(self, x):
        return (x.to(self.weight.dtype) @ self.weight + self.bias).to(x.dtype)
