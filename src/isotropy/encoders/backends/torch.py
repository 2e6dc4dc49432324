"""The torch backend: any Hugging Face encoder through transformers' ``AutoModel`` (layer 4)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ...errors import IsotropyError
from ...storage.stamps import DigestMemo
from ..models import (
    DEFAULT_MODEL_NAME,
    default_model_path,
    load_hf_model,
    load_st_head,
    position_limit,
    position_offset,
    resolve_model,
    st_default_pooling,
    st_file,
    st_head_modules,
)
from ..poolings import ForwardOutput, ModelInfo, Pooling
from ..static.parsecache import fingerprint_dir

__all__ = ["TorchBackend", "FINGERPRINT_VERSION"]

FINGERPRINT_VERSION = 2  # 1: isotropy 0.1's, which hashed the model's folder path too
# config entries that say where and how a model was loaded, not what it computes
VOLATILE_CONFIG_KEYS = frozenset({"_name_or_path", "transformers_version", "_commit_hash", "_attn_implementation_autoset"})
# a folder's fingerprint while its files stay as they were, in this process and on disk (storage/stamps.py)
FINGERPRINTS = DigestMemo(folder=fingerprint_dir)


def _first(keys: Sequence[str], n: int = 3) -> str:
    shown = ", ".join(keys[:n])
    return shown + (f" and {len(keys) - n} more" if len(keys) > n else "")


class TorchBackend:
    """transformers' ``AutoModel`` in torch; every pooling is read off its forward pass.

    ``model`` is a Hugging Face model id, a local folder, or None (the embedded default);
    ``device`` a torch device name (None: CUDA when available, else CPU).
    """

    name = "torch"
    pooling_in_graph = False  # poolings run here, their constants (Pooling.state) handed in

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        device: str | None = None,
        threads: int | None = None,
        precision: str = "fp32",
    ) -> None:
        import torch

        if threads is not None:
            raise IsotropyError("threads= applies to the onnx backend; torch's are set with torch.set_num_threads")
        self.precision = precision  # "bf16": the forward pass under torch.autocast (checked by Encoder)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.folder, self.model_name = resolve_model(model)
        head = st_head_modules(self.folder)  # modules isotropy would not apply (a calibration's, ...): refused
        self.tokenizer, self.model, self.missing_pooler = load_hf_model(self.folder, self.model_name)
        self.model.to(self.device).eval()
        # A sentence-transformers Dense head after the pooling: applied, in float32, to the model's own pooling only
        self.head = [m.to(self.device) for m in load_st_head(self.folder, head)] if head else []
        self.head_pooling = self._head_pooling() if self.head else None
        config = self.model.config
        self.hidden_size = int(config.hidden_size)
        self.info = ModelInfo(
            self.model_name,
            int(getattr(config, "num_hidden_layers", 0)) + 1,
            getattr(self.model, "pooler", None) is not None,
            num_attention_heads=getattr(config, "num_attention_heads", None),
            mask_token=getattr(self.tokenizer, "mask_token", None),
        )
        self.position_limit = position_limit(config)
        self._fingerprint: str | None = None

    # ------------------------------------------------------------------ what the encoder asks

    def default_pooling(self) -> str:
        """The model's own sentence-transformers pooling (mean -> last-avg), else the papers' first-last-avg."""
        if self.head:  # its head's pooling (check_pooling says so in one line when isotropy does not compute it)
            return self.head_pooling or "last-avg"
        return st_default_pooling(self.folder) or "first-last-avg"

    def default_max_length(self) -> int:
        """sentence-transformers' max_seq_length, else the tokenizer's maximum, capped at the positions."""
        st = st_file(self.folder, "sentence_bert_config.json")
        if isinstance(st, dict) and st.get("max_seq_length"):
            return int(min(st["max_seq_length"], self.position_limit))
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if tok_max and tok_max < 100_000:
            return int(min(tok_max, self.position_limit))
        return self.position_limit

    def _head_pooling(self) -> str | None:
        try:
            return st_default_pooling(self.folder)
        except IsotropyError:  # a pooling mode isotropy does not compute: no pooling can feed the head
            return None

    def check_pooling(self, p: Pooling) -> None:
        if self.head and p.name != self.head_pooling:
            own = (
                f"its own pooling {self.head_pooling!r}"
                if self.head_pooling
                else "its own pooling, which isotropy does not compute"
            )
            use = f"use {self.head_pooling}" if self.head_pooling else "load the model with sentence-transformers"
            raise IsotropyError(
                f"model {self.model_name} has a Dense head trained on {own}: pooling {p.name!r} cannot feed it; {use}"
            )
        p.validate(self.info)
        if p.needs_pooler and self.missing_pooler:
            raise IsotropyError(
                f"the weights of model {self.model_name} lack its pooler layer ({_first(self.missing_pooler)}), which would "
                f"be random, so pooling 'pooler' is unavailable; use 'cls'"
            )

    def output_dim(self, p: Pooling) -> int:
        return int(self.head[-1].get_embedding_dimension()) if self.head else self.hidden_size

    def apply_head(self, vectors: Any) -> Any:
        """The model's Dense head (sentence-transformers' own modules, in order) on its pooled vectors (float32 tensors)."""
        features = {"sentence_embedding": vectors}
        for module in self.head:
            features = module(features)
        return features["sentence_embedding"]

    # ------------------------------------------------------------------ running

    def run(
        self, feeds: dict[str, np.ndarray], poolings: Sequence[Pooling], states: dict[str, dict] | None = None
    ) -> list[np.ndarray]:
        """One forward pass over a padded batch; every pooling read off it (float32, batch x dim).

        ``states`` holds each pooling's constants (numpy, by pooling name); poolings that read
        attention weights must run inside :meth:`attention` ``("eager")``.
        """
        import torch

        need_all = any(p.needs_hidden_states for p in poolings)
        need_att = any(p.needs_attentions for p in poolings)
        with torch.inference_mode():
            inputs = {name: torch.from_numpy(arr).to(self.device) for name, arr in feeds.items()}
            with self.autocast():
                result = self.model(**inputs, output_hidden_states=need_all, output_attentions=need_att, return_dict=True)
            f32 = lambda ts: None if ts is None else tuple(t.float() for t in ts)  # noqa: E731 (bf16 -> float32 before pooling)
            pooler = getattr(result, "pooler_output", None) if any(p.needs_pooler for p in poolings) else None
            out = ForwardOutput(
                hidden_states=f32(result.hidden_states if need_all else (result.last_hidden_state,)),
                attention_mask=inputs["attention_mask"],
                input_ids=inputs["input_ids"],
                pooler_output=None if pooler is None else pooler.float(),
                attentions=f32(getattr(result, "attentions", None)) if need_att else None,
            )
            vectors = []
            for p in poolings:
                state = (states or {}).get(p.name)
                tensors = None if state is None else {k: torch.from_numpy(v).to(self.device) for k, v in state.items()}
                pooled = p(out, tensors).float()
                vectors.append((self.apply_head(pooled) if self.head else pooled).cpu().numpy())
            return vectors

    def autocast(self) -> contextlib.AbstractContextManager:
        """The precision of the forward pass: fp32 as loaded, or bf16 matrix products under ``torch.autocast``."""
        import torch

        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def attention(self, implementation: str | None) -> Iterator[None]:
        """Run the block with transformers' ``implementation`` of attention (None: as loaded), then switch back.

        Attention weights exist only on the eager path (sdpa computes them inside one fused
        kernel); ``set_attn_implementation`` switches a loaded model between the two, the
        weights untouched, so only the poolings that read attention weights pay for eager.
        """
        before = self.model.config._attn_implementation
        if implementation is None or implementation == before:
            yield
            return
        from ..models import quiet_transformers

        with quiet_transformers():
            self.model.set_attn_implementation(implementation)
        try:
            if self.model.config._attn_implementation != implementation:
                raise IsotropyError(
                    f"model {self.model_name} cannot switch to {implementation} attention, which a pooling reading "
                    f"attention weights needs (ditto); use another pooling"
                )
            yield
        finally:
            with quiet_transformers():
                self.model.set_attn_implementation(before)

    def forward_last(self, input_ids: np.ndarray, attention_mask: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The last layer's states (float32 numpy) with explicit 0-based ``positions`` (template denoising)."""
        import torch

        offset = position_offset(self.model.config)
        with torch.inference_mode():
            t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(self.device)
            kwargs = {"input_ids": t(input_ids), "attention_mask": t(attention_mask), "position_ids": t(positions + offset)}
            if "token_type_ids" in getattr(self.tokenizer, "model_input_names", ()):
                kwargs["token_type_ids"] = torch.zeros_like(kwargs["input_ids"])
            with self.autocast():
                last = self.model(**kwargs, return_dict=True).last_hidden_state
            return last.float().cpu().numpy()

    # ------------------------------------------------------------------ identity

    def fingerprint(self) -> str:
        """Digest of the model's weights, config and tokenizer, and of its Dense head if any (not of pooling or max_length).

        Hashing the weights themselves (well under a second for base-sized models) means a
        cache keyed on it can never serve vectors from other weights. Pooler weights the
        checkpoint lacked are left out: they are initialised at random on each load. So are
        the config's records of where and by which transformers version it was loaded
        (``_name_or_path``, ``transformers_version``): isotropy 0.1 hashed them, so the same
        model in another folder, venv or machine got another fingerprint (version 1).

        It is the fingerprint of the model as its files load it: a model loaded again from a local folder whose
        files are unchanged (storage/stamps.py) gets the digest computed the first time in this process.
        """
        if self._fingerprint is None:
            if self.folder is None:  # a hub id: transformers' cache decides which files it read
                self._fingerprint = self._digest()
            else:
                self._fingerprint = FINGERPRINTS.get(("torch", str(self.folder)), [self.folder], self._digest)
        return self._fingerprint

    def _digest(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        config = {k: v for k, v in self.model.config.to_dict().items() if k not in VOLATILE_CONFIG_KEYS}
        h.update(json.dumps(config, sort_keys=True, default=str).encode())
        h.update(json.dumps(self.tokenizer.get_vocab(), sort_keys=True).encode())
        h.update(repr((self.tokenizer.do_lower_case if hasattr(self.tokenizer, "do_lower_case") else None,)).encode())
        random = set(self.missing_pooler or ())
        for name, tensor in self.model.state_dict().items():
            if name in random:
                continue
            h.update(name.encode())
            h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        for i, module in enumerate(self.head):  # a Dense head: its config and weights (none: as before)
            h.update(json.dumps([i, type(module).__name__, module.get_config_dict()], sort_keys=True, default=str).encode())
            for name, tensor in module.state_dict().items():
                h.update(f"head.{i}.{name}".encode())
                h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()

    def describe_model(self) -> str:
        return f"model {self.model_name}"

    def record(self) -> dict[str, Any]:
        """How an artefact names this model: None for the embedded default, so it moves between machines."""
        default = default_model_path()
        is_default = (
            self.model_name == DEFAULT_MODEL_NAME and self.folder is not None and self.folder.resolve() == default.resolve()
        )
        return {
            "backend": self.name,
            "model": None if is_default else self.model_name,
            "fingerprint_version": FINGERPRINT_VERSION,
        }
