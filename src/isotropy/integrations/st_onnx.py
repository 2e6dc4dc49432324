"""The ONNX graph that sentence-transformers' own ONNX backend loads (layer 5).

``SentenceTransformer(path, backend="onnx")`` hands the folder to optimum's
``ORTModelForFeatureExtraction``, which runs ``onnx/model.onnx`` (another file with
``model_kwargs={"file_name": "onnx/NAME.onnx"}``), feeds it ``input_ids``, ``attention_mask``
and, when the graph takes it, ``token_type_ids``, and reads its output named
``last_hidden_state`` (huggingface/optimum-onnx, ``optimum/onnxruntime/modeling.py``,
``ORTModelForFeatureExtraction.forward``); the folder's Pooling and Dense modules then run in
torch as they do after the torch Transformer. So this graph is the transformer alone:
token ids in, token states out (batch x sequence x hidden, float32; both axes dynamic),
exported by the same exporter as isotropy's full graph (:mod:`.onnx_export`).

``quantize="int8"`` adds ``onnx/model_qint8_quantized.onnx``: onnxruntime's dynamic int8
quantization with one scale per output channel, as isotropy's own int8 graph
(``onnx_export._quantize_int8``); the name is the one sentence-transformers'
``export_dynamic_quantized_onnx_model`` gives a graph quantized with a custom configuration.

Only for poolings that read the last layer's token states: optimum returns no other layer,
so a layers-average pooling would silently fall back to the last layer there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..encoders.backends.onnx import require_onnx
from ..encoders.poolings import parse_pooling
from .onnx_export import _input_names, _quantize_int8, _torch_export

__all__ = ["ST_ONNX_DIR", "ST_ONNX_NAME", "ST_ONNX_INT8_NAME", "st_onnx_supported", "export_token_states"]

ST_ONNX_DIR = "onnx"
ST_ONNX_NAME = "model.onnx"
ST_ONNX_INT8_NAME = "model_qint8_quantized.onnx"
OUTPUT = "last_hidden_state"


def st_onnx_supported(pooling: Any) -> bool:
    """Whether the folder's modules can run after a graph that returns the last layer's token states only."""
    p = parse_pooling(pooling)
    return not (p.needs_hidden_states or p.needs_attentions or getattr(p, "template", None) is not None)


def _token_states_module(encoder: Any):
    import torch

    class TokenStates(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder.model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids
            return self.encoder(**kwargs, return_dict=True).last_hidden_state

    return TokenStates().eval()


def export_token_states(encoder: Any, folder: str | Path, quantize: str | None = None, opset: int | None = None) -> list[Path]:
    """Write ``folder/onnx/model.onnx`` (+ the int8 graph when ``quantize="int8"``); returns the files.

    ``folder`` is the (temporary) model folder being written: the caller makes it appear atomically.
    """
    require_onnx()
    out = Path(folder) / ST_ONNX_DIR
    out.mkdir(exist_ok=True)
    fp32 = out / ST_ONNX_NAME
    _torch_export(_token_states_module(encoder), encoder, _input_names(encoder), fp32, opset, output=OUTPUT)
    files = [fp32]
    if quantize == "int8":
        _quantize_int8(fp32, out / ST_ONNX_INT8_NAME)
        files.append(out / ST_ONNX_INT8_NAME)
    return files
