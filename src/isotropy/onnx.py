"""ONNX export of encoder + pooling + transform, and an onnxruntime backend for :class:`isotropy.Encoder`.

Layout of an export (decided here, written atomically as one folder)::

    OUT/                      isotropy export onnx -o OUT
      model.onnx              one graph: token ids -> calibrated sentence vectors
      isotropy_onnx.json      what the graph computes (model, pooling, max_length, transform, inputs, ...)
                              and a digest of each tokenizer file
      tokenizer.json, ...     the model's fast tokenizer (save_pretrained)

What must match the graph (position limit, pooling, dims, inputs, model fingerprint,
tokenizer digests: ``GRAPH_KEYS``) is also stamped into ``model.onnx``'s own
``metadata_props`` (``isotropy.KEY``, JSON values), and loading checks the JSON against
them and the tokenizer files against their digests: an edited ``max_length`` beyond the
graph's positions, a swapped or removed ``tokenizer.json`` or a JSON from another export
is one clear error instead of wrong vectors. Exports written before these records
existed load without those checks.

The graph's inputs are ``input_ids``, ``attention_mask`` and, when the model
takes them, ``token_type_ids`` (int64, batch x sequence, both axes dynamic); its
output ``sentence_embedding`` (float32, batch x dim) is
``transform(pool(encoder(ids)))``. The export is torch's own exporter
(``torch.onnx.export(..., dynamo=True)``), the int8 variant onnxruntime's dynamic
quantization (``quantize_dynamic``: int8 weights, one scale per output channel,
of the encoder's matrix products; one scale per tensor measured a mean cosine
of 0.970 to float32 on STS-B sentences, one per channel 0.994). The transform's
own products stay float32: a whitening kernel's columns span a wide range of scales.
Whitening also magnifies the encoder's int8 noise along its low-variance
directions, so int8 + whitening is further from float32 than int8 alone: see
docs/BENCHMARKS.md, section onnx).

``Encoder(model=OUT, backend="onnx")`` (``OUT`` or ``OUT/model.onnx``) runs the
graph with onnxruntime: same fast tokenizer, same length-sorted batches as the
torch path, vectors back in input order. Pooling and transform are baked into
the graph, so its ``encode`` returns calibrated vectors directly.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ._io import IsotropyError, ProgressBar, atomic_dir, check_output
from .encoding import Encoder, check_sentences, check_tokenizer_vocab, length_sorted_batches
from .pooling import parse_pooling

__all__ = ["export_onnx", "OnnxEncoder", "GRAPH_NAME", "CONFIG_NAME"]

GRAPH_NAME = "model.onnx"
CONFIG_NAME = "isotropy_onnx.json"
KIND = "onnx-encoder"
ONNX_VERSION = 1
QUANTIZATIONS = ("int8",)
INPUT_ORDER = ("input_ids", "attention_mask", "token_type_ids")
# isotropy_onnx.json entries the graph itself fixes: stamped into model.onnx's metadata_props at export
GRAPH_KEYS = ("model_name", "fingerprint", "pooling", "position_limit", "hidden_size", "dim", "inputs", "transform", "quantize", "tokenizer_files")
META_PREFIX = "isotropy."
# names of files that steer AutoTokenizer: one that appears after the export changes the tokenizer
TOKENIZER_NAMES = frozenset({
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.txt", "vocab.json",
    "merges.txt", "chat_template.jinja", "chat_template.json",
})


def _require_onnx():
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        raise IsotropyError("ONNX support needs onnx and onnxruntime: pip install 'isotropy[onnx]'") from None


# --------------------------------------------------------------------------- export


def _graph_module(encoder: Encoder, transform: Any):
    """The torch module exported: HF model -> :func:`isotropy.pooling.pool` -> transform (float32)."""
    import torch

    from .pooling import pool

    p = parse_pooling(encoder.pooling)
    need_all = p.needs_hidden_states
    tmap = None
    if transform is not None:
        from .ecosystem import transform_module

        tmap = transform_module(transform, dtype=torch.float32)

    class Graph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder.model
            self.transform = tmap

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids
            out = self.encoder(**kwargs, output_hidden_states=need_all, return_dict=True)
            hidden = out.hidden_states if need_all else (out.last_hidden_state,)
            vec = pool(p, hidden, attention_mask, getattr(out, "pooler_output", None))
            if self.transform is not None:
                vec = self.transform(vec)
            return vec

    return Graph().eval()


def _input_names(encoder: Encoder) -> list[str]:
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
    keep = {name for name in shapes if name.startswith("transform.")}
    # Measured alternative: keeping the feed-forward down-projections float32 too (their GELU inputs
    # have a long tail) raised the mean cosine to float32 from 0.9937 to 0.9964 and cost 0.07 fewer
    # STS-B points, but made int8 1.51x instead of 1.93x PyTorch's speed; speed is int8's point.
    exclude = [n.name for n in model.graph.node if n.op_type in ("MatMul", "Gemm") and keep.intersection(n.input)]
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its "consider pre-processing" advice goes to the root logger
    try:
        quantize_dynamic(
            str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True,
            op_types_to_quantize=["MatMul", "Gemm"], nodes_to_exclude=exclude,
        )
    finally:
        root.setLevel(level)


def _file_digest(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, lambda: hashlib.blake2b(digest_size=16)).hexdigest()


def _tokenizer_files(folder: Path) -> dict[str, str]:
    """``{name: digest}`` of the tokenizer files in an export folder (everything but the graph and its JSON)."""
    skip = {GRAPH_NAME, CONFIG_NAME}
    return {
        p.name: _file_digest(p)
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name not in skip and not p.name.startswith(".")
    }


def _stamp_graph(graph_path: Path, config: dict) -> None:
    """Record the settings the graph fixes (``GRAPH_KEYS``) in the ONNX file's own metadata_props."""
    import onnx

    model = onnx.load(str(graph_path), load_external_data=False)
    props = {p.key: p.value for p in model.metadata_props if not p.key.startswith(META_PREFIX)}
    props.update({META_PREFIX + k: json.dumps(config.get(k), sort_keys=True) for k in GRAPH_KEYS})
    onnx.helper.set_model_props(model, props)
    onnx.save(model, str(graph_path))


def export_onnx(
    output: str | os.PathLike,
    model: str | os.PathLike | None = None,
    pooling: str | None = None,
    max_length: int | None = None,
    transform: Any = None,
    quantize: str | None = None,
    *,
    encoder: Encoder | None = None,
    opset: int | None = None,
    show_progress: bool | None = None,
    force: bool = False,
) -> Path:
    """Export encoder + pooling (+ fitted transform) as one ONNX graph in folder ``output``.

    ``transform`` is a fitted Whitening/Flow or its folder; its input dimension must
    equal the encoder's. ``quantize="int8"`` writes onnxruntime's dynamically
    quantised graph instead of the float32 one. ``encoder`` (a torch
    :class:`Encoder`) replaces ``model``/``pooling``/``max_length``. Returns ``output``.
    """
    import warnings

    _require_onnx()
    sources = [model if model is not None and Path(str(model)).expanduser().exists() else None]
    if isinstance(transform, (str, os.PathLike)):
        sources.append(transform)
    output = check_output(output, KIND, force=force, inputs=sources)
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise IsotropyError(f"unknown quantization {quantize!r}; valid: {', '.join(QUANTIZATIONS)}")
    if encoder is None:
        encoder = Encoder(model, pooling=pooling, max_length=max_length, device="cpu")
    elif getattr(encoder, "backend", "torch") != "torch":
        raise IsotropyError("export_onnx needs a torch Encoder, not an ONNX one")
    tdesc = None
    if transform is not None:
        from .ecosystem import _kind, _transform_for

        transform = _transform_for(encoder, transform)
        tdesc = {"kind": _kind(transform), "describe": transform.describe() if hasattr(transform, "describe") else repr(transform)}

    import torch
    from torch.export import Dim

    graph = _graph_module(encoder, transform)
    names = _input_names(encoder)
    # Example of batch 2 x sequence 8: sizes 0 and 1 would be specialised away by torch.export.
    example = {n: torch.ones(2, 8, dtype=torch.long) for n in names}
    example["input_ids"] = torch.full((2, 8), encoder.tokenizer.unk_token_id or 1, dtype=torch.long)
    if "token_type_ids" in example:
        example["token_type_ids"] = torch.zeros(2, 8, dtype=torch.long)
    batch, seq = Dim("batch"), Dim("sequence")
    dynamic = {n: {0: batch, 1: seq} for n in names}
    steps = 3 if quantize else 2
    with ProgressBar(steps, show_progress, "exporting to ONNX", min_total=1) as bar, atomic_dir(output, kind=KIND, force=force) as tmp:
        graph_path = tmp / GRAPH_NAME
        fp32_path = tmp / ".fp32.onnx" if quantize else graph_path
        # The exporter prints its own progress lines and warnings about unrelated operators (torchvision).
        logger = logging.getLogger("torch.onnx")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                program = torch.onnx.export(
                    graph, (), kwargs=example, input_names=names, output_names=["sentence_embedding"],
                    dynamic_shapes=dynamic, dynamo=True, verbose=False, opset_version=opset, external_data=False,
                )
                program.save(str(fp32_path))
        except IsotropyError:
            raise
        except Exception as exc:  # the exporter raises many types; the user needs the first line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise IsotropyError(f"ONNX export of {encoder.model_name} failed: {first}") from None
        finally:
            logger.setLevel(level)
        bar.advance()
        if quantize:
            _quantize_int8(fp32_path, graph_path)
            for f in tmp.glob(".fp32.onnx*"):
                f.unlink()
            bar.advance()
        encoder.tokenizer.save_pretrained(str(tmp))
        from . import __version__
        from ._io import FORMAT_VERSION, LIBRARY_TAG

        config = {
            "library": LIBRARY_TAG,
            "kind": KIND,
            "format_version": FORMAT_VERSION,
            "isotropy_version": __version__,
            "onnx_version": ONNX_VERSION,
            "model_name": encoder.model_name,
            "fingerprint": encoder.fingerprint(),
            "pooling": encoder.pooling,
            "max_length": encoder.max_length,
            "position_limit": encoder._position_limit(),
            "hidden_size": encoder.dim,
            "dim": int(_output_dim(transform, encoder.dim)),
            "inputs": names,
            "output": "sentence_embedding",
            "transform": tdesc,
            "quantize": quantize,
            "graph": GRAPH_NAME,
            "tokenizer_files": _tokenizer_files(tmp),  # verified on load: another tokenizer encodes garbage
        }
        _stamp_graph(graph_path, config)
        (tmp / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        bar.advance()
    return output


def _output_dim(transform: Any, dim: int) -> int:
    if transform is None:
        return dim
    from .ecosystem import _dims

    return _dims(transform)[1]


# --------------------------------------------------------------------------- the onnxruntime backend


def _resolve_export(model: Any) -> tuple[Path, Path]:
    if model is None:
        raise IsotropyError("backend='onnx' needs model=<folder written by `isotropy export onnx`>")
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".onnx":
        folder, graph = path.parent, path
    elif path.is_dir():
        folder, graph = path, path / GRAPH_NAME
    else:
        raise IsotropyError(f"ONNX model {str(model)!r} does not exist (expected a folder written by `isotropy export onnx`)")
    if not (folder / CONFIG_NAME).is_file():
        raise IsotropyError(f"{folder} has no {CONFIG_NAME}; it was not written by `isotropy export onnx`")
    if not graph.is_file():
        raise IsotropyError(f"{folder} has no {graph.name}")
    return folder.resolve(), graph.resolve()


class OnnxEncoder(Encoder):
    """:class:`isotropy.Encoder` running an exported graph with onnxruntime (``Encoder(..., backend="onnx")``).

    ``pooling`` is baked into the graph (passing another one is an error);
    ``max_length`` defaults to the export's. ``dim`` is the graph's output width
    (the transform's, when one was exported). ``device``: ``None``/``"cpu"``, or
    ``"cuda"`` when onnxruntime's CUDA provider is installed.
    """

    backend = "onnx"

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        pooling: str | None = None,
        max_length: int | None = None,
        batch_size: int = 64,
        device: str | None = None,
        backend: str = "onnx",
        threads: int | None = None,
    ) -> None:
        _require_onnx()
        import onnxruntime as ort
        from transformers import AutoTokenizer

        if batch_size < 1:
            raise IsotropyError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.folder, self.graph_path = _resolve_export(model)
        cfg = self.config = self._config()
        self.model_name = str(cfg.get("model_name"))
        self.pooling = str(cfg["pooling"])
        if pooling is not None and parse_pooling(pooling).name != self.pooling:
            raise IsotropyError(
                f"the ONNX graph in {self.folder} was exported with pooling {self.pooling!r}, not {parse_pooling(pooling).name!r}; "
                "export it again with --pooling"
            )
        limit = int(cfg.get("position_limit", cfg["max_length"]))
        if int(cfg["max_length"]) > limit:
            raise IsotropyError(
                f"{self.folder / CONFIG_NAME}: max_length {cfg['max_length']} exceeds the {limit} positions of the graph "
                f"in {self.graph_path.name}; set it to at most {limit} or export again"
            )
        if max_length is None:
            self.max_length = int(cfg["max_length"])
        else:
            if int(max_length) < 2 or int(max_length) > limit:
                raise IsotropyError(f"max_length must be between 2 and {limit} for this model, got {max_length}")
            self.max_length = int(max_length)
        self.model_max_length = limit
        self.dim = int(cfg["dim"])
        self.inputs = list(cfg["inputs"])
        self.transform_description = (cfg.get("transform") or {}).get("describe")
        self.quantize = cfg.get("quantize")
        self._check_tokenizer_files()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)
        except (OSError, ValueError) as exc:
            if "instantiate the backend tokenizer" in str(exc):
                raise IsotropyError(f"the ONNX export {self.folder} has no tokenizer files (tokenizer.json, ...); export again") from None
            raise IsotropyError(f"cannot load the tokenizer saved in {self.folder}: {' '.join(str(exc).split())}") from None
        check_tokenizer_vocab(self.tokenizer, f"the ONNX export {self.folder}")
        providers = ["CPUExecutionProvider"]
        dev = (device or "cpu").lower()
        if dev.startswith("cuda"):
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise IsotropyError("device 'cuda' asked for, but this onnxruntime has no CUDA provider (pip install onnxruntime-gpu)")
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        elif dev != "cpu":
            raise IsotropyError(f"the ONNX backend runs on 'cpu' or 'cuda', not {device!r}")
        self.device = dev
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            options.intra_op_num_threads = int(threads)
        options.log_severity_level = 3
        try:
            self.model = ort.InferenceSession(str(self.graph_path), options, providers=providers)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise IsotropyError(f"onnxruntime cannot load {self.graph_path}: {str(exc).strip().splitlines()[0]}") from None
        self._check_graph_metadata(self.model.get_modelmeta().custom_metadata_map)
        self._fingerprint = None

    def _check_tokenizer_files(self) -> None:
        """The tokenizer files must be the ones exported with the graph (skipped for exports that recorded none)."""
        recorded = self.config.get("tokenizer_files")
        if recorded is None:
            return
        config_path = self.folder / CONFIG_NAME
        if not isinstance(recorded, dict):
            raise IsotropyError(f"{config_path}: tokenizer_files is malformed; export again")
        for name, digest in sorted(recorded.items()):
            path = self.folder / name
            if not path.is_file():
                raise IsotropyError(f"{path} is missing: it was exported with the graph; restore it or export again")
            if _file_digest(path) != digest:
                raise IsotropyError(
                    f"{path} is not the file exported with the graph (its digest differs): another tokenizer would "
                    f"encode wrong token ids; restore it or export again"
                )
        for p in sorted(self.folder.iterdir()):
            if p.name not in recorded and p.is_file() and (p.name in TOKENIZER_NAMES or p.suffix == ".model"):
                raise IsotropyError(
                    f"{p} was added after the export and would change the tokenizer; remove it or export again"
                )

    def _check_graph_metadata(self, meta: dict[str, str]) -> None:
        """isotropy_onnx.json must agree with what the graph records of itself (exports that recorded nothing skip this)."""
        config_path = self.folder / CONFIG_NAME
        for key in GRAPH_KEYS:
            if META_PREFIX + key not in meta:
                continue
            try:
                value = json.loads(meta[META_PREFIX + key])
            except json.JSONDecodeError:
                raise IsotropyError(f"{self.graph_path}: its metadata {META_PREFIX + key} is not JSON; export again") from None
            if self.config.get(key) != value:
                if key == "tokenizer_files":
                    raise IsotropyError(
                        f"{config_path} records other tokenizer files than {self.graph_path.name} was exported with: "
                        f"it belongs to another export; restore the export's own {CONFIG_NAME} or export again"
                    )
                raise IsotropyError(
                    f"{config_path} says {key} {self.config.get(key)!r}, but {self.graph_path.name} was exported with "
                    f"{value!r}; restore the export's own {CONFIG_NAME} or export again"
                )

    def _config(self) -> dict:
        path = self.folder / CONFIG_NAME
        try:
            cfg = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise IsotropyError(f"{path} is not valid JSON: {exc}") from None
        if not isinstance(cfg, dict) or cfg.get("kind") != KIND:
            raise IsotropyError(f"{path} does not describe an isotropy ONNX export")
        if cfg.get("onnx_version") != ONNX_VERSION:
            raise IsotropyError(
                f"{path} has export layout {cfg.get('onnx_version')!r}, this isotropy reads {ONNX_VERSION}; export again"
            )
        missing = [k for k in ("pooling", "max_length", "dim", "inputs") if k not in cfg]
        if missing:
            raise IsotropyError(f"{path} lacks {', '.join(missing)}; export again")
        return cfg

    # ------------------------------------------------------------------ identity

    def fingerprint(self) -> str:
        """Digest of the graph file and the tokenizer (a cache keyed on it never serves another graph's vectors)."""
        if self._fingerprint is None:
            h = hashlib.blake2b(digest_size=16)
            with open(self.graph_path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            h.update(json.dumps(self.tokenizer.get_vocab(), sort_keys=True).encode())
            h.update(str(self.max_length).encode())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def describe(self) -> str:
        parts = [f"ONNX {self.graph_path.name}{' (int8)' if self.quantize else ''} of model {self.model_name}",
                 f"pooling {self.pooling}", f"max_length {self.max_length}", f"{self.dim} dims"]
        if self.transform_description:
            parts.append(f"transform: {self.transform_description}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return (
            f"Encoder(model={str(self.folder)!r}, backend='onnx', pooling={self.pooling!r}, "
            f"max_length={self.max_length}, batch_size={self.batch_size})"
        )

    # ------------------------------------------------------------------ encoding

    def encode_multi(
        self, sentences: Sequence[str] | str, poolings: Iterable[str], show_progress: bool | None = None
    ) -> dict[str, np.ndarray]:
        """Like :meth:`Encoder.encode_multi`, but only the exported pooling is available."""
        sentences = check_sentences(sentences)
        requested = list(poolings)
        for name in requested:
            if parse_pooling(name).name != self.pooling:
                raise IsotropyError(
                    f"the ONNX graph computes pooling {self.pooling!r} only; {name!r} needs its own export"
                )
        n = len(sentences)
        result = np.empty((n, self.dim), dtype=np.float32)
        if n:
            self._run(sentences, result, show_progress)
        return {name: result if i == 0 else result.copy() for i, name in enumerate(requested)}

    def _run(self, sentences: list[str], out: np.ndarray, show_progress: bool | None) -> None:
        # The same batching as the torch path: tokenise once without padding, longest first,
        # pad each batch to its own longest sentence.
        total, batches = length_sorted_batches(self.tokenizer, sentences, self.max_length, self.batch_size)
        want_types = "token_type_ids" in self.inputs
        with ProgressBar(total, show_progress, "encoding (onnx)") as bar:
            for batch, feeds in batches:
                if want_types:
                    feeds.setdefault("token_type_ids", np.zeros_like(feeds["input_ids"]))
                else:
                    feeds.pop("token_type_ids", None)
                out[batch] = self.model.run(None, feeds)[0]
                bar.advance()
