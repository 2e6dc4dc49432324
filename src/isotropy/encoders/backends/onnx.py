"""The onnxruntime backend: runs a graph written by ``isotropy export onnx`` (layer 4).

Layout of an export (written by :mod:`isotropy.integrations.onnx_export`, atomically, as one folder)::

    OUT/
      model.onnx              one graph: token ids -> (calibrated) sentence vectors
      isotropy_onnx.json      what the graph computes (model, pooling, max_length, transform,
                              inputs, ...), a digest of each tokenizer file, the artefact header
      tokenizer.json, ...     the model's fast tokenizer (save_pretrained)

What must match the graph (position limit, pooling, dims, inputs, model fingerprint,
tokenizer digests: :data:`GRAPH_KEYS`) is also stamped into ``model.onnx``'s own
``metadata_props`` (``isotropy.KEY``, JSON values); loading checks the JSON against them
and the tokenizer files against their digests, so an edited ``max_length`` beyond the
graph's positions, a swapped or removed ``tokenizer.json`` or a JSON from another export
is one clear error instead of wrong vectors. Exports written before these records existed
load without those checks.

The pooling (and any transform) is baked into the graph: this backend computes that
pooling only, and its output width is the graph's.

A model folder written by ``isotropy calibrate --onnx`` holds such an export in its
``isotropy-onnx/`` subfolder (:data:`SUBFOLDER`); ``model=`` the model folder finds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import IsotropyError
from ...storage.artifacts import file_sha256, read_config
from ...storage.stamps import DigestMemo
from ..models import check_tokenizer_vocab, one_line
from ..poolings import Pooling
from ..static.parsecache import fingerprint_dir

__all__ = [
    "OnnxBackend",
    "GRAPH_NAME",
    "SUBFOLDER",
    "CONFIG_NAME",
    "KIND",
    "ONNX_VERSION",
    "GRAPH_KEYS",
    "META_PREFIX",
    "TOKENIZER_NAMES",
    "require_onnx",
    "tokenizer_digests",
]

GRAPH_NAME = "model.onnx"
CONFIG_NAME = "isotropy_onnx.json"
SUBFOLDER = "isotropy-onnx"  # where `isotropy calibrate --onnx` puts the export inside a model folder
KIND = "onnx-encoder"
ONNX_VERSION = 1
# an export's fingerprint while its files stay as they were, in this process and on disk (storage/stamps.py)
FINGERPRINTS = DigestMemo(folder=fingerprint_dir)
# isotropy_onnx.json entries the graph itself fixes: stamped into model.onnx's metadata_props at export
GRAPH_KEYS = (
    "model_name",
    "fingerprint",
    "pooling",
    "position_limit",
    "hidden_size",
    "dim",
    "inputs",
    "transform",
    "quantize",
    "tokenizer_files",
    "pooling_stats",
)
META_PREFIX = "isotropy."
# names of files that steer AutoTokenizer: one that appears after the export changes the tokenizer
TOKENIZER_NAMES = frozenset(
    {
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.txt",
        "vocab.json",
        "merges.txt",
        "chat_template.jinja",
        "chat_template.json",
    }
)


def require_onnx() -> None:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        raise IsotropyError("ONNX support needs onnx and onnxruntime: pip install 'isotropy[onnx]'") from None


def tokenizer_digests(folder: Path) -> dict[str, str]:
    """``{name: sha256}`` of the tokenizer files in an export folder (everything but the graph and its JSON)."""
    skip = {GRAPH_NAME, CONFIG_NAME}
    return {
        p.name: file_sha256(p)
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name not in skip and not p.name.startswith(".")
    }


def _resolve_export(model: Any) -> tuple[Path, Path]:
    if model is None:
        raise IsotropyError("backend='onnx' needs model=<folder written by `isotropy export onnx`>")
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".onnx":
        folder, graph = path.parent, path
    elif path.is_dir():
        if not (path / CONFIG_NAME).is_file() and (path / SUBFOLDER / CONFIG_NAME).is_file():
            path = path / SUBFOLDER  # a model folder written by `isotropy calibrate --onnx`
        folder, graph = path, path / GRAPH_NAME
    else:
        raise IsotropyError(f"ONNX model {str(model)!r} does not exist (expected a folder written by `isotropy export onnx`)")
    if not (folder / CONFIG_NAME).is_file():
        raise IsotropyError(
            f"{folder} has no {CONFIG_NAME} (nor {SUBFOLDER}/{CONFIG_NAME}); it was not written by "
            "`isotropy export onnx` or `isotropy calibrate --onnx`"
        )
    if not graph.is_file():
        raise IsotropyError(f"{folder} has no {graph.name}")
    return folder.resolve(), graph.resolve()


def _read_export_config(folder: Path) -> dict[str, Any]:
    cfg = read_config(folder, KIND, name=CONFIG_NAME)
    path = folder / CONFIG_NAME
    if cfg.get("onnx_version") != ONNX_VERSION:
        raise IsotropyError(
            f"{path} has export layout {cfg.get('onnx_version')!r}, this isotropy reads {ONNX_VERSION}; export again"
        )
    missing = [k for k in ("pooling", "max_length", "dim", "inputs") if k not in cfg]
    if missing:
        raise IsotropyError(f"{path} lacks {', '.join(missing)}; export again")
    limit = int(cfg.get("position_limit", cfg["max_length"]))
    if int(cfg["max_length"]) > limit:
        raise IsotropyError(
            f"{path}: max_length {cfg['max_length']} exceeds the {limit} positions of the graph "
            f"in {GRAPH_NAME}; set it to at most {limit} or export again"
        )
    return cfg


def default_threads() -> int | None:
    """``OMP_NUM_THREADS`` as a positive int, or None (unset or not one). onnxruntime's own pool ignores it and
    starts one thread per core; a Dask worker (its nanny sets ``OMP_NUM_THREADS=1``, isotropy's local cluster runs
    one single-threaded worker per core) then spins n threads on each core. Measured on 2 cores, int8 MiniLM on
    2,048 wiki lines: two workers' sessions at onnxruntime's default read 210 lines/s together, at 1 thread each 267
    (one process with both cores: 257)."""
    raw = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


class OnnxBackend:
    """onnxruntime running an exported graph; ``model`` is the export folder (or its ``model.onnx``).

    ``device``: None/``"cpu"``, or ``"cuda"`` when onnxruntime's CUDA provider is installed;
    ``threads``: onnxruntime's intra-op threads (None: ``OMP_NUM_THREADS`` when it is set to a positive number, as
    torch reads it, else onnxruntime's default, one per core; :func:`default_threads`).
    """

    name = "onnx"
    pooling_in_graph = True  # the pooling and its constants (token weights, template vectors) are in the graph

    def __init__(self, model: str | os.PathLike | None = None, device: str | None = None, threads: int | None = None) -> None:
        require_onnx()
        self.folder, self.graph_path = _resolve_export(model)
        cfg = self.config = _read_export_config(self.folder)
        self.model_name = str(cfg.get("model_name"))
        self.fixed_pooling = str(cfg["pooling"])
        self.position_limit = int(cfg.get("position_limit", cfg["max_length"]))
        self.dim = int(cfg["dim"])
        self.inputs = list(cfg["inputs"])
        self.transform_description = (cfg.get("transform") or {}).get("describe")
        self.quantize = cfg.get("quantize")
        self._check_tokenizer_files()
        self.tokenizer = self._load_tokenizer()
        self.device, self.model = self._session(device, threads)
        self._check_graph_metadata(self.model.get_modelmeta().custom_metadata_map)
        self._fingerprint: str | None = None

    def _load_tokenizer(self):
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)
        except (OSError, ValueError) as exc:
            if "instantiate the backend tokenizer" in str(exc):
                raise IsotropyError(
                    f"the ONNX export {self.folder} has no tokenizer files (tokenizer.json, ...); export again"
                ) from None
            raise IsotropyError(f"cannot load the tokenizer saved in {self.folder}: {one_line(exc)}") from None
        check_tokenizer_vocab(tokenizer, f"the ONNX export {self.folder}")
        return tokenizer

    def _session(self, device: str | None, threads: int | None):
        import onnxruntime as ort

        providers = ["CPUExecutionProvider"]
        dev = (device or "cpu").lower()
        if dev.startswith("cuda"):
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise IsotropyError(
                    "device 'cuda' asked for, but this onnxruntime has no CUDA provider (pip install onnxruntime-gpu)"
                )
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        elif dev != "cpu":
            raise IsotropyError(f"the ONNX backend runs on 'cpu' or 'cuda', not {device!r}")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        threads = threads or default_threads()
        if threads:
            options.intra_op_num_threads = int(threads)
        try:
            return dev, ort.InferenceSession(str(self.graph_path), options, providers=providers)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise IsotropyError(f"onnxruntime cannot load {self.graph_path}: {str(exc).strip().splitlines()[0]}") from None

    # ------------------------------------------------------------------ verification

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
            if file_sha256(path) != digest:
                raise IsotropyError(
                    f"{path} is not the file exported with the graph (its digest differs): another tokenizer would "
                    f"encode wrong token ids; restore it or export again"
                )
        for p in sorted(self.folder.iterdir()):
            if p.name not in recorded and p.is_file() and (p.name in TOKENIZER_NAMES or p.suffix == ".model"):
                raise IsotropyError(f"{p} was added after the export and would change the tokenizer; remove it or export again")

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

    # ------------------------------------------------------------------ what the encoder asks

    def default_pooling(self) -> str:
        return self.fixed_pooling

    def default_max_length(self) -> int:
        return int(self.config["max_length"])

    def check_pooling(self, p: Pooling) -> None:
        if p.name != self.fixed_pooling:
            raise IsotropyError(
                f"the ONNX graph in {self.folder} computes pooling {self.fixed_pooling!r} only; {p.name!r} needs its own "
                f"export (isotropy export onnx --pooling {p.name})"
            )

    def output_dim(self, p: Pooling) -> int:
        return self.dim

    def run(
        self, feeds: dict[str, np.ndarray], poolings: Sequence[Pooling], states: dict[str, dict] | None = None
    ) -> list[np.ndarray]:
        if "token_type_ids" in self.inputs:
            feeds.setdefault("token_type_ids", np.zeros_like(feeds["input_ids"]))
        else:
            feeds.pop("token_type_ids", None)
        out = self.model.run(None, feeds)[0]
        return [out] + [out.copy() for _ in poolings[1:]]

    @contextlib.contextmanager
    def attention(self, implementation: str | None) -> Iterator[None]:
        """The graph's attention path was fixed at export (eager where its pooling reads attention weights)."""
        yield

    # ------------------------------------------------------------------ identity

    def fingerprint(self) -> str:
        """Digest of the graph file and the tokenizer (a cache keyed on it never serves another graph's vectors)."""
        if self._fingerprint is None:
            self._fingerprint = FINGERPRINTS.get(("onnx", str(self.graph_path)), [self.folder], self._digest)
        return self._fingerprint

    def _digest(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        with open(self.graph_path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        h.update(json.dumps(self.tokenizer.get_vocab(), sort_keys=True).encode())
        return h.hexdigest()

    def describe_model(self) -> str:
        text = f"ONNX {self.graph_path.name}{' (int8)' if self.quantize else ''} of model {self.model_name}"
        return text + (f" (transform: {self.transform_description})" if self.transform_description else "")

    def record(self) -> dict[str, Any]:
        return {"backend": self.name, "model": str(self.folder)}
