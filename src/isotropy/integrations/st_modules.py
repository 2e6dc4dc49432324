"""The two sentence-transformers module classes isotropy defines: its pooling and its transform (layer 5).

:func:`pooling_class` builds ``IsotropyPooling`` (every pooling of :class:`isotropy.encoders.Encoder`,
read off the features a ``Transformer`` module returns) and :func:`transform_class` builds
``IsotropyTransform`` (a fitted transform's ``to_torch()`` form, saved as its own artefact folder).
They are built from sentence-transformers' ``Module`` when first asked for, so that importing isotropy
never needs sentence-transformers; :mod:`isotropy.integrations.sentence_transformers` makes them
(with :mod:`.st_input`'s input module), names them as its own (what ``modules.json`` records) and
writes, saves and loads the folders.
"""

from __future__ import annotations

from typing import Any

from ..encoders.poolings import parse_pooling, pool
from ..errors import IsotropyError
from ..transforms import as_transform

__all__ = ["pooling_class", "transform_class"]


def _hub_module(Module: type) -> type:
    """sentence-transformers' ``Module`` with the one ``load`` both classes share: the hub arguments
    gathered once, handed to the class's own ``_load(model_name_or_path, hub)``."""

    class _HubModule(Module):
        @classmethod
        def load(
            cls,
            model_name_or_path: str,
            subfolder: str = "",
            token=None,
            cache_folder=None,
            revision=None,
            local_files_only: bool = False,
            **kwargs,
        ):
            hub = {
                "subfolder": subfolder,
                "token": token,
                "cache_folder": cache_folder,
                "revision": revision,
                "local_files_only": local_files_only,
            }
            return cls._load(model_name_or_path, hub)

    return _HubModule


def _pool_features(p: Any, features: dict[str, Any], state: dict[str, Any] | None) -> Any:
    """The sentence vectors of pooling ``p`` from a Transformer module's features (see IsotropyPooling)."""
    if p.needs_hidden_states:
        hidden = features.get("all_layer_embeddings")
        if hidden is None:
            raise IsotropyError(
                f"pooling {p.name!r} needs every layer's hidden states, but the Transformer module "
                "returned none: set output_hidden_states=True in its config (config_kwargs)"
            )
    else:
        hidden = (features["token_embeddings"],)
    if p.needs_attentions and not features.get("attentions"):
        raise IsotropyError(
            f"pooling {p.name!r} needs attention weights, but the input module returned none: build the "
            "model with isotropy.integrations.to_sentence_transformer (its IsotropyTransformer returns them)"
        )
    return pool(
        p,
        tuple(hidden),
        features["attention_mask"],
        input_ids=features.get("input_ids"),
        attentions=features.get("attentions"),
        state=state,
    )


def pooling_class(Module: type, torch: Any) -> type:
    class IsotropyPooling(_hub_module(Module)):
        """Pool token states into a sentence vector with any :mod:`isotropy.encoders.poolings` option.

        Reads ``token_embeddings`` (the last layer) and, for multi-layer poolings,
        ``all_layer_embeddings`` (the Transformer module returns them when the model
        config has ``output_hidden_states=True``; :func:`to_sentence_transformer`
        sets it). ``pooler`` applies a copy of the model's BERT-style pooler
        (dense + tanh over the first token), saved with this module.
        """

        config_keys = ["pooling", "embedding_dimension", "pooler", "state"]

        def __init__(
            self,
            pooling: str = "last-avg",
            embedding_dimension: int | None = None,
            pooler: bool = False,
            state: dict[str, dict] | None = None,
        ):
            super().__init__()
            self.pooling = parse_pooling(pooling).name
            self.embedding_dimension = embedding_dimension
            self.pooler = bool(pooler)
            if self.pooler:
                if embedding_dimension is None:
                    raise IsotropyError("pooling 'pooler' needs embedding_dimension")
                self.dense = torch.nn.Linear(embedding_dimension, embedding_dimension)
            # the pooling's constants (isotropy.encoders.poolings: Pooling.state), saved with this module:
            # {name: {"shape": [...], "dtype": "float32"|"int64"}} here, the values in model.safetensors
            self.state = {k: {"shape": list(v["shape"]), "dtype": str(v["dtype"])} for k, v in (state or {}).items()}
            for k, v in self.state.items():
                self.register_buffer(f"state_{k}", torch.zeros(v["shape"], dtype=getattr(torch, v["dtype"])))

        def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
            p = parse_pooling(self.pooling)
            tokens = features["token_embeddings"]
            if p.kind == "pooler":
                if not self.pooler:
                    raise IsotropyError("this IsotropyPooling module has no pooler weights; rebuild it with pooler=True")
                features["sentence_embedding"] = torch.tanh(self.dense(tokens[:, 0]))
                return features
            state = {k: getattr(self, f"state_{k}") for k in self.state} or None
            features["sentence_embedding"] = _pool_features(p, features, state)
            return features

        def get_embedding_dimension(self) -> int | None:
            return self.embedding_dimension

        def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
            self.save_config(output_path)
            if self.pooler or self.state:
                self.save_torch_weights(output_path, safe_serialization=safe_serialization)

        @classmethod
        def _load(cls, model_name_or_path: str, hub: dict[str, Any]):
            config = cls.load_config(model_name_or_path, **hub)
            module = cls(**{k: v for k, v in config.items() if k in cls.config_keys})
            if module.pooler or module.state:
                cls.load_torch_weights(model_name_or_path, model=module, **hub)
            return module

    return IsotropyPooling


def transform_class(Module: type, load_dir_path: Any) -> type:
    class IsotropyTransform(_hub_module(Module)):
        """A fitted isotropy transform (whitening, flow, ...) applied to ``sentence_embedding``.

        Saved as the transform's own artefact folder (``config.json`` +
        ``state.safetensors``, readable by :func:`isotropy.transforms.load_transform`).
        """

        def __init__(self, transform: Any):
            super().__init__()
            self.transform = as_transform(transform)
            self.kind = self.transform.kind
            self.in_dim, self.out_dim = int(self.transform.n_features_in_), int(self.transform.n_features_out_)
            self.map = self.transform.to_torch()

        def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
            x = features["sentence_embedding"]
            if x.shape[-1] != self.in_dim:
                raise IsotropyError(
                    f"the {self.kind} expects {self.in_dim}-dimensional sentence vectors, the model gives {x.shape[-1]}"
                )
            features["sentence_embedding"] = self.map(x)
            return features

        def get_embedding_dimension(self) -> int:
            return self.out_dim

        def get_config_dict(self) -> dict[str, Any]:
            return {"kind": self.kind, "in_dim": self.in_dim, "out_dim": self.out_dim}

        def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
            # The module folder is the transform's own artefact folder (config.json + state.safetensors).
            self.transform.save(output_path)

        @classmethod
        def _load(cls, model_name_or_path: str, hub: dict[str, Any]):
            return cls(load_dir_path(model_name_or_path=model_name_or_path, **hub))

        def __repr__(self) -> str:
            return f"IsotropyTransform({self.transform.describe()})"

    return IsotropyTransform
