"""Stock sentence-transformers modules for every pooling and calibration they can express (layer 5).

A folder made only of sentence-transformers' own modules loads with a plain
``SentenceTransformer(path)``: no ``trust_remote_code``, no isotropy installed. What each
part becomes:

===================================  =============================================================
isotropy                             stock modules
===================================  =============================================================
``cls``                              ``Pooling(pooling_mode="cls")``
``last-avg``                         ``Pooling(pooling_mode="mean")``
``first-last-avg``, ``last2-avg``,   ``WeightedLayerPooling`` with 0/1 layer weights (the average of
``embed-last-avg``,                  the chosen layers' token states, all other weights 0), then
``layers-avg:I,J,...``               ``Pooling("mean")``; the model config says ``output_hidden_states``
``pooler``                           ``Pooling("cls")`` + ``Dense`` (tanh) holding the model's pooler
every affine calibration             ``Dense`` (identity activation, weight I, bias ``-shift``), then
(``shift_kernel_()``)                ``Dense`` (weight ``kernel^T``, no bias): ``y = (x - shift) kernel``
===================================  =============================================================

Everything else -- a flow, and the poolings that read a prompt template, attention
weights or token statistics -- needs isotropy's own modules
(:mod:`isotropy.integrations.sentence_transformers`); :func:`custom_parts` says which part.

Precision: sentence-transformers casts every module after the first to the first one's
dtype, so the ``Dense`` modules compute in float32, where isotropy's transform computes in float64;
centring first and multiplying second keeps the gap at float32 rounding (bench/calibrate.py
prints the figures; docs/ECOSYSTEM.md quotes them).

Compatibility (:func:`make_portable`): sentence-transformers 6 saves ``modules.json`` with its
new module paths and ``1_Pooling/config.json`` with ``pooling_mode`` only. Text Embeddings
Inference reads neither (its ``ModuleType`` knows the ``sentence_transformers.models.*``
names, its ``PoolConfig`` the ``pooling_mode_*_token`` booleans: router/src/lib.rs and
backends/src/lib.rs of huggingface/text-embeddings-inference at 0d124dc), so the folder
names its modules by the ``sentence_transformers.models.*`` paths, which every
sentence-transformers release resolves (6.x through its deprecated-import map), and its
pooling config carries both spellings, plus ``max_seq_length`` in ``sentence_bert_config.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..encoders.poolings import parse_pooling
from ..errors import IsotropyError
from ._common import pooler_dense

__all__ = ["custom_parts", "build_stock", "head_modules", "pooled_dim", "make_portable", "STOCK_POOLINGS", "LEGACY_TYPES"]

# pooling kinds (isotropy.encoders.poolings) that stock modules compute exactly
STOCK_POOLINGS = ("cls", "avg", "pooler")
# what sentence-transformers 6 writes in modules.json -> the name every release (and TEI) reads
LEGACY_TYPES = {
    "sentence_transformers.base.modules.transformer.Transformer": "sentence_transformers.models.Transformer",
    "sentence_transformers.sentence_transformer.modules.pooling.Pooling": "sentence_transformers.models.Pooling",
    "sentence_transformers.base.modules.dense.Dense": "sentence_transformers.models.Dense",
    "sentence_transformers.base.modules.normalize.Normalize": "sentence_transformers.models.Normalize",
    "sentence_transformers.sentence_transformer.modules.weighted_layer_pooling.WeightedLayerPooling": (
        "sentence_transformers.models.WeightedLayerPooling"
    ),
}
_LEGACY_POOLING_KEYS = {
    "cls": "pooling_mode_cls_token",
    "mean": "pooling_mode_mean_tokens",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
    "weightedmean": "pooling_mode_weightedmean_tokens",
    "lasttoken": "pooling_mode_lasttoken",
}


def _is_affine(transform: Any) -> bool:
    from ..transforms.base import AffineTransform

    return isinstance(transform, AffineTransform)


def custom_parts(pooling: Any, transform: Any = None) -> list[str]:
    """What needs isotropy's own module classes, in words (empty: the folder can be all stock modules)."""
    p = parse_pooling(pooling)
    parts = []
    if (
        p.kind not in STOCK_POOLINGS
        or p.needs_attentions
        or getattr(p, "template", None) is not None
        or getattr(p, "needs_token_stats", False)
    ):
        parts.append(f"pooling {p.name!r}")
    if transform is not None and not _is_affine(transform):
        parts.append(f"the {transform.kind} (not an affine map)")
    return parts


def _pooling_modules(encoder: Any, p: Any, torch: Any) -> tuple[list[Any], bool]:
    """The stock modules computing pooling ``p`` on the Transformer's output, and whether they read every layer."""
    from sentence_transformers.sentence_transformer.modules import Pooling, WeightedLayerPooling

    dim = pooled_dim(encoder)
    if p.kind == "cls":
        return [Pooling(dim, pooling_mode="cls")], False
    if p.kind == "pooler":
        linear = pooler_dense(encoder)  # the model's dense + tanh pooler, or one clear error
        dense = _dense(linear.weight.detach().clone().float(), linear.bias.detach().clone().float(), torch.nn.Tanh())
        return [Pooling(dim, pooling_mode="cls"), dense], False
    if not p.needs_hidden_states:  # last-avg
        return [Pooling(dim, pooling_mode="mean")], False
    # The mean over layers of each layer's masked token average equals the masked average of the
    # layers' mean token states (one mask for all layers): WeightedLayerPooling with 0/1 weights.
    n_states = int(encoder.num_hidden_states)
    layers = p.resolve_layers(n_states)
    start = min(layers)
    weights = torch.zeros(n_states - start, dtype=torch.float32)
    weights[[i - start for i in layers]] = 1.0
    layer_pool = WeightedLayerPooling(
        dim, num_hidden_layers=n_states - 1, layer_start=start, layer_weights=torch.nn.Parameter(weights)
    )
    return [layer_pool, Pooling(dim, pooling_mode="mean")], True


def pooled_dim(encoder: Any) -> int:
    """The width of ``encoder``'s pooled vectors, before its model's Dense head if it has one."""
    return int(getattr(encoder.runtime, "hidden_size", encoder.dim))


def head_modules(encoder: Any) -> list[Any]:
    """Copies of the sentence-transformers Dense head ``encoder`` applies after its pooling (none without one),
    in order: a folder written from ``encoder`` keeps them between its pooling and its calibration."""
    import copy

    return [copy.deepcopy(m).cpu() for m in getattr(encoder.runtime, "head", ())]


def _affine_dense(transform: Any, torch: Any) -> list[Any]:
    """Stock ``Dense`` modules computing ``(x - shift) @ kernel`` in float32, as sentence-transformers runs them:
    one ``Dense`` with identity weight and bias ``-shift`` (exact: x times 1 plus zeros), then one with weight
    ``kernel^T`` (out x in) and no bias. Folding the shift into one bias (``x @ A - shift @ A``) would subtract
    two large float32 terms when the kernel magnifies small-variance directions (measured: 1.7e-5 vs float64
    on a 384-dim whitening, against 2e-6 for the two-step form; bench/calibrate.py)."""
    shift, kernel = transform.shift_kernel_()
    d_in = int(kernel.shape[0])
    modules = []
    if np.any(shift != 0):
        modules.append(_dense(torch.eye(d_in, dtype=torch.float32), torch.tensor(-shift, dtype=torch.float32)))
    modules.append(_dense(torch.tensor(kernel.T, dtype=torch.float32)))
    return modules


def _dense(weight: Any, bias: Any = None, activation: Any = None) -> Any:
    """A stock ``Dense`` module computing ``activation(x @ weight.T + bias)``: ``weight`` out x in, float32
    tensors; without ``bias``, none; without ``activation``, the identity (``Dense``'s own default is tanh)."""
    import torch
    from sentence_transformers.base.modules import Dense

    d_out, d_in = (int(n) for n in weight.shape)
    return Dense(
        d_in,
        d_out,
        bias=bias is not None,
        activation_function=torch.nn.Identity() if activation is None else activation,
        init_weight=weight,
        **({} if bias is None else {"init_bias": bias}),
    )


def build_stock(encoder: Any, transform: Any, *, normalize: bool, device: str | None, stock: bool | None):
    """A ``SentenceTransformer`` of stock modules only computing ``encoder`` (+ ``transform``), or None.

    ``stock``: None builds it when the pooling and the transform allow it (else None: the
    caller uses isotropy's modules); True makes "they do not" one clear error; False returns None.
    """
    if stock is False:
        return None
    p = parse_pooling(encoder.pooling)
    parts = custom_parts(p, transform)
    if parts:
        if stock:
            raise IsotropyError(
                f"{' and '.join(parts)} cannot be written with stock sentence-transformers modules "
                "(the folder would need isotropy installed and trust_remote_code=True); drop --stock-only "
                "(stock=True), or use an affine method (whitening, ...) with pooling cls, last-avg, pooler or a layers average"
            )
        return None
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer

    source = str(encoder.folder) if encoder.folder is not None else encoder.model_name
    pooling, all_layers = _pooling_modules(encoder, p, torch)
    config_kwargs = {"output_hidden_states": True} if all_layers else None
    first = Transformer(source, max_seq_length=encoder.max_length, config_kwargs=config_kwargs)
    if all_layers:
        first.model.config.output_hidden_states = True  # saved in config.json: every loader returns all layers
    modules = [first, *pooling, *head_modules(encoder)]
    if transform is not None:
        modules.extend(_affine_dense(transform, torch))
    if normalize:
        modules.append(Normalize())
    return SentenceTransformer(modules=modules, device=device or str(encoder.device))


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _write(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def make_portable(folder: str | Path, max_seq_length: int | None = None) -> None:
    """Rewrite a saved folder's configs so that readers older or simpler than sentence-transformers 6 read
    them too (module docstring): legacy module names, both pooling spellings, ``max_seq_length``."""
    folder = Path(folder)
    modules = _read(folder / "modules.json")
    for m in modules:
        m["type"] = LEGACY_TYPES.get(m["type"], m["type"])
        cfg_path = folder / m["path"] / "config.json"
        if m["type"] == "sentence_transformers.models.Pooling" and cfg_path.is_file():
            cfg = _read(cfg_path)
            mode = cfg.get("pooling_mode", "mean")
            modes = (mode,) if isinstance(mode, str) else tuple(mode)
            cfg.update({key: name in modes for name, key in _LEGACY_POOLING_KEYS.items()})
            _write(cfg_path, cfg)
    _write(folder / "modules.json", modules)
    st_cfg = folder / "sentence_bert_config.json"
    if max_seq_length is not None and st_cfg.is_file():
        cfg = _read(st_cfg)
        cfg["max_seq_length"] = int(max_seq_length)
        _write(st_cfg, cfg)
