"""ONNX export: encoder + pooling (+ fitted transform) as one graph in one folder (layer 5).

What the folder holds and how it is verified on load is the onnxruntime backend's
(:mod:`isotropy.encoders.backends.onnx`, which also owns the format's constants); this
module writes it, atomically::

    OUT/                      isotropy export onnx -o OUT
      model.onnx              one graph: token ids -> calibrated sentence vectors
      isotropy_onnx.json      the artefact header, what the graph computes (model, pooling,
                              max_length, transform, inputs, ...) and a sha256 of each tokenizer file
      tokenizer.json, ...     the model's fast tokenizer (save_pretrained)

The settings the graph fixes (``GRAPH_KEYS``) are also stamped into ``model.onnx``'s own
``metadata_props`` (``isotropy.KEY``, JSON values), so a JSON from another export or an
edited ``max_length`` is caught on load.

The graph's inputs are ``input_ids``, ``attention_mask`` and, when the model takes them,
``token_type_ids`` (int64, batch x sequence, both axes dynamic); its output
``sentence_embedding`` (float32, batch x dim) is ``transform(pool(encoder(ids)))``. The
export is torch's own exporter (``torch.onnx.export(..., dynamo=True)``), the int8 variant
onnxruntime's dynamic quantization (``quantize_dynamic``: int8 weights, one scale per
output channel, of the encoder's matrix products; one scale per tensor measured a mean
cosine of 0.970 to float32 on STS-B sentences, one per channel 0.994). The transform's own
products stay float32: a whitening kernel's columns span a wide range of scales.
Whitening also magnifies the encoder's int8 noise along its low-variance directions, so
int8 + whitening is further from float32 than int8 alone: see docs/BENCHMARKS.md,
section onnx.

``Encoder(model=OUT, backend="onnx")`` (``OUT`` or ``OUT/model.onnx``) runs the graph.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any

from .._checks import QUANTIZATIONS
from .._progress import ProgressBar
from ..encoders.backends.onnx import (
    CONFIG_NAME,
    GRAPH_KEYS,
    GRAPH_NAME,
    KIND,
    META_PREFIX,
    ONNX_VERSION,
    require_onnx,
    tokenizer_digests,
)
from ..encoders.poolings import parse_pooling, pool
from ..errors import IsotropyError
from ..storage.artifacts import check_output, header, output_dir
from ._common import transform_for

__all__ = ["export_onnx", "composable", "QUANTIZATIONS"]


def _finish_parts(encoder: Any, transform: Any):
    """What runs after the forward pass in both graphs: the pooling, its constants, the Dense head, the transform."""
    import torch

    p = parse_pooling(encoder.pooling)
    tmap = None if transform is None else transform.to_torch(dtype=torch.float32)
    # the pooling's constants (token weights, template vectors: Pooling.state) become initializers
    state = {k: torch.from_numpy(v) for k, v in encoder.pooling_state(p).items()}

    class Finish(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.ModuleList(getattr(encoder.runtime, "head", ()))  # a Dense head after the pooling
            self.transform = tmap
            for k, v in state.items():
                self.register_buffer(f"pooling_{k}", v)

        def finish(self, hidden, attention_mask, pooler_output=None, input_ids=None, attentions=None):
            consts = {k: getattr(self, f"pooling_{k}") for k in state} or None
            vec = pool(p, hidden, attention_mask, pooler_output, input_ids=input_ids, attentions=attentions, state=consts)
            for module in self.head:  # sentence-transformers' Dense modules read and write a features dict
                vec = module({"sentence_embedding": vec})["sentence_embedding"]
            if self.transform is not None:
                vec = self.transform(vec)
            return vec

    return p, Finish


def _graph_module(encoder: Any, transform: Any):
    """The torch module exported: HF model -> :func:`isotropy.encoders.poolings.pool` -> the model's Dense head
    (sentence-transformers folders that have one) -> transform (float32)."""
    p, Finish = _finish_parts(encoder, transform)
    need_all, need_att = p.needs_hidden_states, p.needs_attentions

    class Graph(Finish):
        def __init__(self):
            super().__init__()
            self.encoder = encoder.model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids
            out = self.encoder(**kwargs, output_hidden_states=need_all, output_attentions=need_att, return_dict=True)
            hidden = out.hidden_states if need_all else (out.last_hidden_state,)
            attentions = out.attentions if need_att else None
            return self.finish(hidden, attention_mask, getattr(out, "pooler_output", None), input_ids, attentions)

    return Graph().eval()


def composable(pooling: Any) -> bool:
    """Whether the graph can be the token-states graph (the transformer alone) followed by a small head graph: the
    pooling reads the last layer's token states only (and the token ids), no other layer, attention or pooler output."""
    p = parse_pooling(pooling)
    return not (p.needs_hidden_states or p.needs_attentions or p.needs_pooler)


def _head_module(encoder: Any, transform: Any):
    """The pooling, Dense head and transform as a module of their own: last-layer token states in, vector out."""
    _, Finish = _finish_parts(encoder, transform)

    class Head(Finish):
        def forward(self, last_hidden_state, attention_mask, input_ids):
            return self.finish((last_hidden_state,), attention_mask, None, input_ids)

    return Head().eval()


def _input_names(encoder: Any) -> list[str]:
    names = ["input_ids", "attention_mask"]
    takes_types = "token_type_ids" in inspect.signature(encoder.model.forward).parameters
    produces = "token_type_ids" in getattr(encoder.tokenizer, "model_input_names", [])
    type_vocab = getattr(encoder.model.config, "type_vocab_size", 0) or 0
    if takes_types and produces and type_vocab > 0:
        names.append("token_type_ids")
    return names


def _quantize_int8(src: Path, dst: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(src), load_external_data=False)
    shapes = {i.name: tuple(i.dims) for i in model.graph.initializer}
    keep = {name for name in shapes if name.removeprefix(HEAD_PREFIX).startswith("transform.")}
    # Measured alternative: keeping the feed-forward down-projections float32 too (their GELU inputs
    # have a long tail) raised the mean cosine to float32 from 0.9937 to 0.9964 and cost 0.07 fewer
    # STS-B points, but made int8 1.51x instead of 1.93x PyTorch's speed; speed is int8's point.
    exclude = [n.name for n in model.graph.node if n.op_type in ("MatMul", "Gemm") and keep.intersection(n.input)]
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its "consider pre-processing" advice goes to the root logger
    try:
        quantize_dynamic(
            str(src),
            str(dst),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Gemm"],
            nodes_to_exclude=exclude,
        )
    finally:
        root.setLevel(level)


HEAD_PREFIX = "head/"  # the head graph's node, edge and initializer names inside a composed graph


def _export_head(encoder: Any, transform: Any, path: Path, opset: int | None) -> None:
    """The head graph (:func:`_head_module`): ``last_hidden_state``, ``attention_mask``, ``input_ids`` -> vector."""
    ex = _example(encoder, ["input_ids", "attention_mask"], hidden=int(encoder.runtime.hidden_size))
    example = {k: ex[k] for k in ("last_hidden_state", "attention_mask", "input_ids")}  # forward's order
    _torch_export(_head_module(encoder, transform), encoder, list(example), path, opset, example=example)


INT8_OPS = ("DynamicQuantizeLinear", "MatMulInteger", "DynamicQuantizeMatMul")  # what quantize_dynamic writes


def _load_token_states(token_states: Path, quantized: bool) -> Any:
    """The token-states graph (an ``onnx.ModelProto``), refused when it is not of the precision asked."""
    import onnx

    model = onnx.load(str(token_states))
    if quantized != any(n.op_type in INT8_OPS for n in model.graph.node):
        want = "int8" if quantized else "float32"
        raise IsotropyError(f"token_states: {token_states} is not the {want} token-states graph this export needs")
    return model


def _compose(a: Any, head: Path, path: Path) -> None:
    """Write to ``path`` the token-states graph ``a`` followed by the head graph: the head's inputs are the token graph's
    ``last_hidden_state`` output and its own ``attention_mask``/``input_ids`` inputs. ``onnx.compose.merge_models``
    connects an output of the first graph to an input of the second, not an input to both, so the graphs are
    joined here; the head's inner names are first prefixed (``HEAD_PREFIX``, :func:`onnx.compose.add_prefix`)."""
    import onnx
    from onnx.compose import add_prefix

    b = add_prefix(onnx.load(str(head)), HEAD_PREFIX, rename_inputs=False, rename_outputs=False)
    feeds = {i.name for i in a.graph.input} | {o.name for o in a.graph.output}
    missing = [i.name for i in b.graph.input if i.name not in feeds]
    if missing:
        raise IsotropyError(f"cannot compose the ONNX graphs: the head reads {missing}, which the token graph lacks")
    opsets = {o.domain: o.version for o in b.opset_import} | {o.domain: o.version for o in a.opset_import}
    graph = onnx.helper.make_graph(
        [*a.graph.node, *b.graph.node],
        a.graph.name,
        list(a.graph.input),
        list(b.graph.output),
        initializer=[*a.graph.initializer, *b.graph.initializer],
        value_info=[*a.graph.value_info, *b.graph.value_info],
    )
    model = onnx.helper.make_model(
        graph,
        opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in opsets.items()],
        functions=[*a.functions, *b.functions],
        ir_version=max(a.ir_version, b.ir_version),
        producer_name=a.producer_name,
        producer_version=a.producer_version,
    )
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _stamp_graph(graph_path: Path, config: dict) -> None:
    """Record the settings the graph fixes (``GRAPH_KEYS``) in the ONNX file's own metadata_props."""
    import onnx

    model = onnx.load(str(graph_path), load_external_data=False)
    props = {p.key: p.value for p in model.metadata_props if not p.key.startswith(META_PREFIX)}
    props.update({META_PREFIX + k: json.dumps(config.get(k), sort_keys=True) for k in GRAPH_KEYS})
    onnx.helper.set_model_props(model, props)
    onnx.save(model, str(graph_path))


def _example(encoder: Any, names: list[str], hidden: int | None = None) -> dict[str, Any]:
    """Example inputs of batch 2 x sequence 8 (sizes 0 and 1 would be specialised away by torch.export); ``hidden``:
    a ``last_hidden_state`` input of that width too (the head graph's)."""
    import torch

    example = {n: torch.ones(2, 8, dtype=torch.long) for n in names}
    example["input_ids"] = torch.full((2, 8), encoder.tokenizer.unk_token_id or 1, dtype=torch.long)
    if "token_type_ids" in example:
        example["token_type_ids"] = torch.zeros(2, 8, dtype=torch.long)
    if hidden is not None:
        example["last_hidden_state"] = torch.linspace(-1.0, 1.0, 2 * 8 * hidden, dtype=torch.float32).reshape(2, 8, hidden)
    return example


def _torch_export(
    graph: Any,
    encoder: Any,
    names: list[str],
    path: Path,
    opset: int | None,
    output: str = "sentence_embedding",
    example: dict[str, Any] | None = None,
) -> None:
    """``torch.onnx.export`` (dynamo) of ``graph`` to ``path`` (its output named ``output``), batch and sequence axes
    dynamic; ``example``: its inputs by name (default: the transformer's, :func:`_example`)."""
    import warnings

    import torch
    from torch.export import Dim

    example = _example(encoder, names) if example is None else example
    names = list(example)
    batch, seq = Dim("batch"), Dim("sequence")
    dynamic = {n: {0: batch, 1: seq} for n in names}
    # The exporter prints its own progress lines and warnings about unrelated operators (torchvision).
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                graph,
                (),
                kwargs=example,
                input_names=names,
                output_names=[output],
                dynamic_shapes=dynamic,
                dynamo=True,
                verbose=False,
                opset_version=opset,
                external_data=False,
            )
            program.save(str(path))
    except IsotropyError:
        raise
    except Exception as exc:  # the exporter raises many types; the user needs the first line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IsotropyError(f"ONNX export of {encoder.model_name} failed: {first}") from None
    finally:
        logger.setLevel(level)


def _export_config(encoder: Any, transform: Any, names: list[str], quantize: str | None, folder: Path) -> dict[str, Any]:
    """``isotropy_onnx.json``: the header plus what the graph computes (``folder`` holds the tokenizer by now)."""
    tdesc = None if transform is None else {"kind": transform.kind, "describe": transform.describe()}
    return {
        **header(KIND),
        "onnx_version": ONNX_VERSION,
        "model_name": encoder.model_name,
        "fingerprint": encoder.fingerprint(),
        "pooling": encoder.pooling,
        "max_length": encoder.max_length,
        "position_limit": int(encoder.runtime.position_limit),
        "hidden_size": encoder.dim,
        "dim": encoder.dim if transform is None else int(transform.n_features_out_),
        "inputs": names,
        "output": "sentence_embedding",
        "transform": tdesc,
        "quantize": quantize,
        "graph": GRAPH_NAME,
        "tokenizer_files": tokenizer_digests(folder),  # verified on load: another tokenizer encodes garbage
        "pooling_stats": encoder.record().get("pooling_stats"),  # the token frequencies baked in (sif, idf)
    }


def _write_graph(
    tmp: Path, graph_path: Path, encoder: Any, transform: Any, names: list[str], quantize: str | None,
    opset: int | None, token_states: str | os.PathLike | None, bar: ProgressBar,
) -> None:  # fmt: skip
    """``graph_path``: the token-states graph followed by the head where that composes, else the whole export."""
    fp32_path = tmp / ".fp32.onnx" if quantize else graph_path
    if token_states is not None and composable(encoder.pooling):
        states = _load_token_states(Path(token_states), quantized=quantize is not None)
        head = tmp / ".head.onnx"
        _export_head(encoder, transform, head, opset)
        if quantize:
            _quantize_int8(head, tmp / ".head-int8.onnx")
            head = tmp / ".head-int8.onnx"
        _compose(states, head, graph_path)
        bar.advance(2 if quantize else 1)
    else:
        with encoder.runtime.attention("eager" if parse_pooling(encoder.pooling).needs_attentions else None):
            _torch_export(_graph_module(encoder, transform), encoder, names, fp32_path, opset)
        bar.advance()
        if quantize:
            _quantize_int8(fp32_path, graph_path)
            bar.advance()
    for f in [*tmp.glob(".fp32.onnx*"), *tmp.glob(".head*.onnx*")]:
        f.unlink()


def export_onnx(
    output: str | os.PathLike,
    model: str | os.PathLike | None = None,
    pooling: str | None = None,
    max_length: int | None = None,
    transform: Any = None,
    quantize: str | None = None,
    *,
    encoder: Any = None,
    opset: int | None = None,
    show_progress: bool | None = None,
    force: bool = False,
    pooling_stats: Any = None,
    token_states: str | os.PathLike | None = None,
) -> Path:
    """Export encoder + pooling (+ fitted transform) as one ONNX graph in folder ``output``.

    ``transform`` is a fitted transform or its folder; its input dimension must equal the
    encoder's. ``quantize="int8"`` writes onnxruntime's dynamically quantised graph instead
    of the float32 one. ``encoder`` (a torch :class:`isotropy.encoders.Encoder`) replaces
    ``model``/``pooling``/``max_length``; ``pooling_stats`` (token frequencies of a ``sif``/``idf``
    pooling: a fitted object, its folder or a sentence file) is passed to the encoder built here.
    Every pooling exports, its constants (token weights, template vectors) inside the graph;
    a prompt pooling's graph takes the template-wrapped ids that
    ``Encoder(OUT, backend="onnx")`` makes from the export's tokenizer. Returns ``output``.

    ``token_states``: the encoder's token-states graph already exported (:func:`.st_onnx.export_token_states`: its
    float32 file, or its int8 one with ``quantize="int8"``), which calibrate writes for sentence-transformers anyway:
    where the pooling reads only the last layer (:func:`composable`), the graph is then that graph followed by the
    pooling, head and transform, exported on their own, instead of a second export (and quantization) of the
    transformer. The head is quantized by the same rule as a whole graph.
    """
    from ..encoders import Encoder

    require_onnx()
    sources = [model if model is not None and Path(str(model)).expanduser().exists() else None]
    if isinstance(transform, (str, os.PathLike)):
        sources.append(transform)
    if isinstance(pooling_stats, (str, os.PathLike)):
        sources.append(pooling_stats)
    output = check_output(output, KIND, force=force, inputs=sources)
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise IsotropyError(f"unknown quantization {quantize!r}; valid: {', '.join(QUANTIZATIONS)}")
    if encoder is None:
        encoder = Encoder(model, pooling=pooling, max_length=max_length, device="cpu", pooling_stats=pooling_stats)
    elif getattr(encoder, "backend", "torch") != "torch":
        raise IsotropyError("export_onnx needs a torch Encoder, not an ONNX one")
    if transform is not None:
        transform = transform_for(encoder, transform)

    names = _input_names(encoder)
    with (
        ProgressBar(3 if quantize else 2, show_progress, "exporting to ONNX", min_total=1) as bar,
        output_dir(output, KIND, force=force) as tmp,
    ):
        graph_path = tmp / GRAPH_NAME
        _write_graph(tmp, graph_path, encoder, transform, names, quantize, opset, token_states, bar)
        encoder.tokenizer.save_pretrained(str(tmp))
        config = _export_config(encoder, transform, names, quantize, tmp)
        _stamp_graph(graph_path, config)
        (tmp / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        bar.advance()
    return output
