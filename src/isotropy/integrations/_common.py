"""What the sentence-transformers and ONNX exports share: one check that a transform fits an encoder."""

from __future__ import annotations

import os
from typing import Any

from ..errors import IsotropyError
from ..transforms import as_transform

__all__ = ["transform_for"]


def transform_for(encoder: Any, transform: Any) -> Any:
    """A fitted transform (object or folder) whose input width matches ``encoder``'s output, or one clear error."""
    source = str(transform) if isinstance(transform, (str, os.PathLike)) else None
    transform = as_transform(transform)
    d_in = int(transform.n_features_in_)
    if d_in != encoder.dim:
        raise IsotropyError(
            f"the {transform.kind}{f' in {source}' if source else ''} was fitted on {d_in}-dimensional "
            f"vectors, but model {encoder.model_name} with pooling {encoder.pooling} gives {encoder.dim}"
        )
    return transform
