"""What the sentence-transformers and ONNX exports share: one check that a transform fits an encoder,
and the model's pooler layer that both the custom and the stock sentence-transformers folders copy."""

from __future__ import annotations

import os
from typing import Any

from ..errors import IsotropyError
from ..transforms import as_transform

__all__ = ["transform_for", "pooler_dense"]


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


def pooler_dense(encoder: Any) -> Any:
    """The ``torch.nn.Linear`` of ``encoder``'s BERT-style dense + tanh pooler, or one clear error."""
    import torch

    pooler = getattr(encoder.model, "pooler", None)
    dense = getattr(pooler, "dense", None)
    act = getattr(pooler, "activation", None)
    if not isinstance(dense, torch.nn.Linear) or not isinstance(act, torch.nn.Tanh):
        raise IsotropyError(
            f"pooling 'pooler' of model {encoder.model_name} ({type(pooler).__name__}) is not a BERT-style "
            "dense + tanh pooler, so it cannot be exported; use 'cls'"
        )
    return dense
