"""Fitting into what users already run: sentence-transformers models and scikit-learn pipelines.

sentence-transformers
---------------------
:func:`to_sentence_transformer` writes a model folder that ``sentence_transformers``
loads like any other: its ``modules.json`` lists the encoder's ``Transformer``
module, :class:`IsotropyPooling` (every pooling of :class:`isotropy.Encoder`, the
multi-layer ones included, read off the hidden states the Transformer module
returns when its config says ``output_hidden_states``; computed by
:func:`isotropy.pooling.pool`, the same code the Encoder runs) and
:class:`IsotropyTransform` (the fitted whitening or flow). No ``Normalize`` is
added unless asked (``normalize=True``), so ``model.encode(sentences)`` equals
``transform.transform(encoder.encode(sentences))``.

Loading such a folder needs ``isotropy`` installed, because the two module
classes live in :mod:`isotropy.ecosystem`. sentence-transformers 6 imports a
module class from outside its own package only with ``trust_remote_code=True``
(for local folders too); here that flag imports the *installed* ``isotropy``
package, no code is read from the folder. So::

    SentenceTransformer(path, trust_remote_code=True)        # or
    isotropy.ecosystem.load_sentence_transformer(path)       # checks first, then the same

What a user sees when something is missing:

* ``isotropy`` not installed: the folder's ``config_sentence_transformers.json``
  declares ``"requirements": {"isotropy": ...}``, which sentence-transformers checks
  before loading any module and reports as ``ImportError: The model '...' requires:
  - isotropy>=0.1.0, but it is not installed. ... pip install -U "isotropy>=0.1.0"``.
* ``trust_remote_code`` not given: sentence-transformers' ``ValueError: The model
  ... references the module class 'isotropy.ecosystem.IsotropyPooling', which is
  not part of Sentence Transformers ... pass the argument trust_remote_code=True``.
* :func:`check_sentence_transformer` (run by :func:`load_sentence_transformer`)
  turns either case into one :class:`isotropy.IsotropyError` line naming the
  package to install.

:func:`calibrate` appends a fitted transform to a ``SentenceTransformer`` already in
memory. It goes *after* every existing module, a trailing ``Normalize`` included,
so the calibrated model maps exactly what ``model.encode`` returned before (which
is what one fits a transform on); the output is then no longer unit-length,
unless ``normalize=True`` appends a fresh ``Normalize`` after the transform.
Cosine similarity (sentence-transformers' default) does not care.

scikit-learn
------------
:class:`Whitening` and :class:`Flow` follow the estimator contract (``get_params``,
``set_params``, ``clone``, ``fit`` returns self, not-fitted errors), so
``make_pipeline(Whitening(256), LogisticRegression())`` works on vectors.
:class:`SentenceEncoder` is the missing first step for text: a stateless
transformer from sentences to vectors, so a pipeline can start from raw text:
``make_pipeline(SentenceEncoder(pooling="first-last-avg"), Whitening(256), LogisticRegression())``.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._estimator import EstimatorParams
from ._io import IsotropyError, atomic_dir
from .pooling import parse_pooling

__all__ = [
    "IsotropyPooling",
    "IsotropyTransform",
    "to_sentence_transformer",
    "build_sentence_transformer",
    "save_sentence_transformer",
    "calibrate",
    "load_sentence_transformer",
    "check_sentence_transformer",
    "transform_module",
    "SentenceEncoder",
]

PACKAGE = "isotropy"


def _require_st():
    try:
        import sentence_transformers
    except ImportError:
        raise IsotropyError(
            "this needs sentence-transformers: pip install 'isotropy[st]' (or pip install sentence-transformers)"
        ) from None
    return sentence_transformers


def _st_module_base():
    _require_st()
    from sentence_transformers.base.modules.module import Module

    return Module


# --------------------------------------------------------------------------- torch forms of the transforms


def _torch():
    import torch

    return torch


class _WhiteningMap(_torch().nn.Module):
    """``(x - mean) @ kernel`` with the fitted arrays as buffers (computed in ``dtype``)."""

    def __init__(self, mean: np.ndarray, kernel: np.ndarray, dtype: Any = None):
        super().__init__()
        torch = _torch()
        self._dtype = dtype or torch.float64
        self._arrays = {"mean": np.asarray(mean, dtype=np.float64), "kernel": np.asarray(kernel, dtype=np.float64)}
        for name, arr in self._arrays.items():
            self.register_buffer(name, torch.as_tensor(arr, dtype=self._dtype))

    def _apply(self, fn, recurse=True):
        # Keep the fitted arrays in their own precision: sentence-transformers casts whole models to
        # float32, and a whitening kernel in float32 costs ~1e-5 absolute on the outputs. Moves
        # between devices still apply; the arrays are rebuilt from the float64 originals.
        super()._apply(fn, recurse)
        torch = _torch()
        device = self.kernel.device
        dtype = torch.float32 if device.type == "mps" else self._dtype  # MPS has no float64
        for name, arr in self._arrays.items():
            setattr(self, name, torch.as_tensor(arr, dtype=dtype, device=device))
        return self

    def forward(self, x):
        return ((x.to(self.kernel.dtype) - self.mean) @ self.kernel).to(x.dtype)


class _FixedLinear(_torch().nn.Module):
    """A flow step's invertible 1x1 convolution with its matrix ``W`` computed once (inference only)."""

    def __init__(self, weight):
        super().__init__()
        self.register_buffer("weight", weight.detach().clone())

    def forward(self, x):
        return x @ self.weight, x.new_zeros(x.shape[0])


class _FlowMap(_torch().nn.Module):
    """The fitted Glow's forward map ``x -> z``.

    A copy of the flow's model in which every LU-parametrised 1x1 convolution is
    replaced by its matrix: :class:`isotropy.flow.InvConvLU` picks its formula by
    the batch size (rows >= dims), a branch that a graph with a dynamic batch axis
    (ONNX) cannot hold; for many rows the result is the same product ``x @ W``.
    """

    def __init__(self, model):
        super().__init__()
        torch = _torch()
        from .flow import InvConvLU

        model = copy.deepcopy(model).cpu().eval()
        with torch.no_grad():
            for module in list(model.modules()):
                for name, child in list(module.named_children()):
                    if isinstance(child, InvConvLU):
                        setattr(module, name, _FixedLinear(child.weight()))
        for p in model.parameters():
            p.requires_grad_(False)
        self.glow = model

    def forward(self, x):
        return self.glow(x.float())[0].to(x.dtype)


def transform_module(transform: Any, dtype: Any = None):
    """A ``torch.nn.Module`` computing ``transform.transform`` on a (batch x dim) tensor.

    ``transform`` is a fitted :class:`isotropy.Whitening` or :class:`isotropy.Flow`
    (or a folder holding one). Whitening runs in ``dtype`` (float64 by default, as
    ``Whitening.transform`` does; the ONNX export asks for float32).
    """
    transform = _as_transform(transform)
    kind = _kind(transform)
    if kind == "whitening":
        return _WhiteningMap(transform.mean_, transform.kernel_, dtype)
    return _FlowMap(transform.model_)


def _as_transform(transform: Any):
    from ._io import load_transform

    if isinstance(transform, (str, os.PathLike)):
        return load_transform(transform)
    kind = _kind(transform)
    if kind is None:
        raise IsotropyError(
            f"expected a fitted isotropy Whitening or Flow (or its folder), got {type(transform).__name__}"
        )
    transform._check_fitted()
    return transform


def _kind(transform: Any) -> str | None:
    from .whitening import Whitening

    if isinstance(transform, Whitening):
        return "whitening"
    try:
        from .flow import Flow
    except ImportError:  # pragma: no cover - flow needs torch, which is a core dependency
        return None
    if isinstance(transform, Flow):
        return "flow"
    return None


def _transform_for(encoder: Any, transform: Any) -> Any:
    """A fitted transform (object or folder) whose input width matches ``encoder``'s output, or one clear error."""
    source = str(transform) if isinstance(transform, (str, os.PathLike)) else None
    transform = _as_transform(transform)
    d_in, _ = _dims(transform)
    if d_in != encoder.dim:
        raise IsotropyError(
            f"the {_kind(transform)}{f' in {source}' if source else ''} was fitted on {d_in}-dimensional "
            f"vectors, but model {encoder.model_name} with pooling {encoder.pooling} gives {encoder.dim}"
        )
    return transform


def _dims(transform: Any) -> tuple[int, int]:
    """(input, output) dimensions of a fitted transform."""
    d = int(transform.n_features_in_)
    if _kind(transform) == "whitening":
        return d, int(transform.n_components_)
    return d, d


# --------------------------------------------------------------------------- sentence-transformers modules


def _make_module_classes():
    """Define the sentence-transformers module classes (their base class needs sentence-transformers)."""
    import torch

    Module = _st_module_base()
    from sentence_transformers.util import load_dir_path

    class IsotropyPooling(Module):
        """Pool token states into a sentence vector with any :mod:`isotropy.pooling` option.

        Reads ``token_embeddings`` (the last layer) and, for multi-layer poolings,
        ``all_layer_embeddings`` (the Transformer module returns them when the model
        config has ``output_hidden_states=True``; :func:`to_sentence_transformer`
        sets it). ``pooler`` applies a copy of the model's BERT-style pooler
        (dense + tanh over the first token), saved with this module.
        """

        config_keys = ["pooling", "embedding_dimension", "pooler"]

        def __init__(self, pooling: str = "last-avg", embedding_dimension: int | None = None, pooler: bool = False):
            super().__init__()
            self.pooling = parse_pooling(pooling).name
            self.embedding_dimension = embedding_dimension
            self.pooler = bool(pooler)
            if self.pooler:
                if embedding_dimension is None:
                    raise IsotropyError("pooling 'pooler' needs embedding_dimension")
                self.dense = torch.nn.Linear(embedding_dimension, embedding_dimension)

        def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
            from .pooling import pool

            p = parse_pooling(self.pooling)
            tokens = features["token_embeddings"]
            if p.kind == "pooler":
                if not self.pooler:
                    raise IsotropyError("this IsotropyPooling module has no pooler weights; rebuild it with pooler=True")
                features["sentence_embedding"] = torch.tanh(self.dense(tokens[:, 0]))
                return features
            if p.needs_hidden_states:
                hidden = features.get("all_layer_embeddings")
                if hidden is None:
                    raise IsotropyError(
                        f"pooling {self.pooling!r} needs every layer's hidden states, but the Transformer module "
                        "returned none: set output_hidden_states=True in its config (config_kwargs)"
                    )
            else:
                hidden = (tokens,)
            features["sentence_embedding"] = pool(p, tuple(hidden), features["attention_mask"])
            return features

        def get_embedding_dimension(self) -> int | None:
            return self.embedding_dimension

        def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
            self.save_config(output_path)
            if self.pooler:
                self.save_torch_weights(output_path, safe_serialization=safe_serialization)

        @classmethod
        def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None,
                 revision=None, local_files_only: bool = False, **kwargs):
            hub = {"subfolder": subfolder, "token": token, "cache_folder": cache_folder,
                   "revision": revision, "local_files_only": local_files_only}
            config = cls.load_config(model_name_or_path, **hub)
            module = cls(**{k: v for k, v in config.items() if k in cls.config_keys})
            if module.pooler:
                cls.load_torch_weights(model_name_or_path, model=module, **hub)
            return module

    class IsotropyTransform(Module):
        """A fitted :class:`isotropy.Whitening` or :class:`isotropy.Flow` applied to ``sentence_embedding``.

        Saved as the transform's own artefact folder (``config.json`` +
        ``state.safetensors``, readable by :func:`isotropy.load_transform`).
        """

        def __init__(self, transform: Any):
            super().__init__()
            self.transform = _as_transform(transform)
            self.kind = _kind(self.transform)
            self.in_dim, self.out_dim = _dims(self.transform)
            self.map = transform_module(self.transform)

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
        def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None,
                 revision=None, local_files_only: bool = False, **kwargs):
            folder = load_dir_path(model_name_or_path=model_name_or_path, subfolder=subfolder, token=token,
                                   cache_folder=cache_folder, revision=revision, local_files_only=local_files_only)
            return cls(folder)

        def __repr__(self) -> str:
            return f"IsotropyTransform({self.transform.describe() if hasattr(self.transform, 'describe') else self.transform!r})"

    IsotropyPooling.__module__ = __name__
    IsotropyTransform.__module__ = __name__
    IsotropyPooling.__qualname__ = "IsotropyPooling"
    IsotropyTransform.__qualname__ = "IsotropyTransform"
    return IsotropyPooling, IsotropyTransform


_CLASSES: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    # The module classes subclass sentence-transformers' Module, so they are created on first use:
    # `import isotropy.ecosystem` works (and the scikit-learn helpers with it) without sentence-transformers.
    if name in ("IsotropyPooling", "IsotropyTransform"):
        if not _CLASSES:
            pooling_cls, transform_cls = _make_module_classes()
            _CLASSES.update(IsotropyPooling=pooling_cls, IsotropyTransform=transform_cls)
            globals().update(_CLASSES)
        return _CLASSES[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _requirement() -> dict[str, Any]:
    from . import __version__

    return {
        PACKAGE: {
            "specifier": f">={__version__}",
            "reason": "The model's pooling and calibration modules are classes of the isotropy package "
            "(isotropy.ecosystem); load it with SentenceTransformer(path, trust_remote_code=True).",
        }
    }


def _pooler_weights(encoder) -> Any:
    torch = _torch()
    pooler = getattr(encoder.model, "pooler", None)
    dense = getattr(pooler, "dense", None)
    act = getattr(pooler, "activation", None)
    if not isinstance(dense, torch.nn.Linear) or not isinstance(act, torch.nn.Tanh):
        raise IsotropyError(
            f"pooling 'pooler' of model {encoder.model_name} ({type(pooler).__name__}) is not a BERT-style "
            "dense + tanh pooler, so it cannot be exported; use 'cls'"
        )
    return dense


class _quiet_hf:
    """transformers' weight-loading/writing progress bars and notices are not for end users."""

    def __enter__(self):
        from transformers.utils import logging as hf_logging

        self._verbosity = hf_logging.get_verbosity()
        self._bars = hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        return self

    def __exit__(self, *exc):
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity(self._verbosity)
        if self._bars:
            hf_logging.enable_progress_bar()


def build_sentence_transformer(encoder, transform: Any = None, *, normalize: bool = False, device: str | None = None):
    """An in-memory ``SentenceTransformer`` computing ``encoder`` (+ ``transform``) (+ Normalize if asked)."""
    with _quiet_hf():
        return _build(encoder, transform, normalize, device)


def _build(encoder, transform, normalize, device):
    _require_st()
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer

    classes = (__getattr__("IsotropyPooling"), __getattr__("IsotropyTransform"))
    if getattr(encoder, "backend", "torch") != "torch":
        raise IsotropyError("to_sentence_transformer needs a torch Encoder (backend='torch'), not an ONNX one")
    p = parse_pooling(encoder.pooling)
    if transform is not None:
        transform = _transform_for(encoder, transform)
    source = str(encoder.folder) if encoder.folder is not None else encoder.model_name
    config_kwargs = {"output_hidden_states": True} if p.needs_hidden_states else None
    first = Transformer(source, max_seq_length=encoder.max_length, config_kwargs=config_kwargs)
    if p.needs_hidden_states:
        first.model.config.output_hidden_states = True
    pooling = classes[0](p.name, embedding_dimension=encoder.dim, pooler=p.kind == "pooler")
    if p.kind == "pooler":
        pooling.dense.load_state_dict(_pooler_weights(encoder).state_dict())
    modules = [first, pooling]
    if transform is not None:
        modules.append(classes[1](transform))
    if normalize:
        modules.append(Normalize())
    return SentenceTransformer(modules=modules, device=device or str(encoder.device))


def save_sentence_transformer(model, path: str | os.PathLike, *, force: bool = False) -> Path:
    """``model.save(path)`` atomically, plus the ``isotropy`` requirement in its config when it holds our modules.

    Use it (rather than ``model.save``) for a model :func:`calibrate` changed, so
    that a machine without isotropy gets sentence-transformers' "requires isotropy"
    error instead of a bare import failure. An existing ``path`` is replaced only when it
    is a model folder isotropy wrote (or empty), unless ``force``.
    """
    path = Path(path)
    with atomic_dir(path, kind=ST_KIND, force=force) as tmp, _quiet_hf():
        model.save(str(tmp), create_model_card=False)
        uses_isotropy = any(type(m).__module__ == __name__ for m in model._modules.values())
        cfg_path = tmp / "config_sentence_transformers.json"
        cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
        if uses_isotropy:
            cfg["requirements"] = {**cfg.get("requirements", {}), **_requirement()}
            (tmp / "README.md").write_text(
                "# Calibrated sentence-embedding model (isotropy)\n\n"
                "Needs the Python package `isotropy` (`pip install isotropy`), whose modules it uses:\n\n"
                "```python\nfrom sentence_transformers import SentenceTransformer\n"
                f"model = SentenceTransformer({str(path.name)!r}, trust_remote_code=True)\n"
                "vectors = model.encode(sentences)\n```\n\n"
                "`trust_remote_code=True` lets sentence-transformers import the module classes of the installed "
                "`isotropy` package (isotropy.ecosystem); no code is read from this folder.\n",
                encoding="utf-8",
            )
        cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (tmp / MARKER_NAME).write_text(json.dumps(_marker(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


ST_KIND = "sentence-transformers"
MARKER_NAME = "isotropy.json"  # says that isotropy wrote the folder (so it may replace it); stock tools ignore it


def _marker() -> dict[str, Any]:
    from . import __version__
    from ._io import FORMAT_VERSION, LIBRARY_TAG

    return {"library": LIBRARY_TAG, "kind": ST_KIND, "format_version": FORMAT_VERSION, "isotropy_version": __version__}


def to_sentence_transformer(
    encoder, transform: Any, path: str | os.PathLike, *, normalize: bool = False, force: bool = False
) -> Path:
    """Write a sentence-transformers model folder computing ``transform.transform(encoder.encode(s))``.

    ``encoder`` is an :class:`isotropy.Encoder` (any model and pooling), ``transform``
    a fitted Whitening or Flow (or its folder; ``None`` for the raw pooled vectors).
    Load the result with ``SentenceTransformer(path, trust_remote_code=True)`` or
    :func:`load_sentence_transformer`. ``normalize=True`` appends a Normalize module.
    """
    from ._io import check_output

    check_output(path, ST_KIND, force=force, inputs=[transform if isinstance(transform, (str, os.PathLike)) else None])
    model = build_sentence_transformer(encoder, transform, normalize=normalize)
    return save_sentence_transformer(model, path, force=force)


def calibrate(model, transform: Any, *, normalize: bool = False):
    """Append a fitted transform to a ``SentenceTransformer`` in memory; returns the same model.

    The transform goes after every existing module, a trailing ``Normalize``
    included: afterwards ``model.encode(s)`` equals ``transform.transform(<what
    model.encode(s) returned before>)``, i.e. the transform applies to the vectors
    it was fitted on. The result is no longer unit-length unless ``normalize=True``
    (a new ``Normalize`` after the transform). Save it with
    :func:`save_sentence_transformer` so the folder declares its isotropy requirement.
    """
    _require_st()
    from sentence_transformers.base.modules import Normalize

    transform = _as_transform(transform)
    d_in, _ = _dims(transform)
    dim = (getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension)()
    if dim is not None and dim != d_in:
        raise IsotropyError(
            f"the {_kind(transform)} was fitted on {d_in}-dimensional vectors, but the model gives {dim}"
        )
    device = model.device
    model.append(__getattr__("IsotropyTransform")(transform).to(device))
    if normalize:
        model.append(Normalize())
    return model


def check_sentence_transformer(path: str | os.PathLike) -> list[str]:
    """Check that every module class a sentence-transformers folder names can be imported here.

    Returns the class paths. Raises one :class:`IsotropyError` line naming the
    package to install (from the folder's declared requirements, else the module's
    top-level package) when one cannot be imported.
    """
    path = Path(path)
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        raise IsotropyError(f"{path} is not a sentence-transformers model folder (no modules.json)")
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
        types = [str(m["type"]) for m in modules]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise IsotropyError(f"{modules_file} is not a valid modules.json: {exc}") from None
    requirements: dict[str, Any] = {}
    cfg_file = path / "config_sentence_transformers.json"
    if cfg_file.is_file():
        try:
            requirements = json.loads(cfg_file.read_text(encoding="utf-8")).get("requirements") or {}
        except (json.JSONDecodeError, AttributeError):
            requirements = {}
    for class_ref in types:
        module_name, _, class_name = class_ref.rpartition(".")
        top = module_name.split(".")[0]
        try:
            ok = hasattr(importlib.import_module(module_name), class_name)
        except ImportError as exc:
            ok, why = False, str(exc)
        else:
            why = f"{module_name} has no {class_name}"
        if not ok:
            req = requirements.get(top)
            spec = (req.get("specifier", "") if isinstance(req, dict) else str(req or "")) if req else ""
            raise IsotropyError(
                f"{path} needs the Python package '{top}' for its module {class_ref} ({why}): "
                f"pip install '{top}{spec}', then load it with SentenceTransformer(path, trust_remote_code=True)"
            )
    return types


def load_sentence_transformer(path: str | os.PathLike, **kwargs: Any):
    """``SentenceTransformer(path, trust_remote_code=True, **kwargs)`` after :func:`check_sentence_transformer`.

    The flag only lets sentence-transformers import the installed ``isotropy``
    package's module classes; nothing is read from the folder but weights and configs.
    """
    _require_st()
    from sentence_transformers import SentenceTransformer

    check_sentence_transformer(path)
    kwargs.setdefault("trust_remote_code", True)
    with _quiet_hf():
        return SentenceTransformer(str(path), **kwargs)


# --------------------------------------------------------------------------- scikit-learn


class SentenceEncoder(EstimatorParams):
    """scikit-learn transformer from sentences to vectors: an :class:`isotropy.Encoder` as a pipeline step.

    Stateless (``fit`` only loads the model), so it can lead a pipeline:
    ``make_pipeline(SentenceEncoder(), Whitening(256), LogisticRegression())``.
    Parameters are the Encoder's.
    """

    def __init__(self, model=None, pooling=None, max_length=None, batch_size=64, device=None, backend="torch"):
        self.model = model
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self.backend = backend

    def set_params(self, **params: Any) -> "SentenceEncoder":
        super().set_params(**params)
        self.__dict__.pop("encoder_", None)  # the loaded model no longer matches the parameters
        return self

    def fit(self, X: Any = None, y: Any = None) -> "SentenceEncoder":
        from .encoding import Encoder

        kwargs = {"backend": self.backend} if self.backend != "torch" else {}
        self.encoder_ = Encoder(self.model, pooling=self.pooling, max_length=self.max_length,
                                batch_size=self.batch_size, device=self.device, **kwargs)
        self.n_features_out_ = int(self.encoder_.dim)
        return self

    def transform(self, X: Sequence[str]) -> np.ndarray:
        if not hasattr(self, "encoder_"):
            self.fit()
        if isinstance(X, str):
            raise IsotropyError("SentenceEncoder.transform takes a list of sentences, not one string")
        sentences = [x[0] if isinstance(x, (list, tuple, np.ndarray)) and len(x) == 1 else x for x in list(X)]
        return self.encoder_.encode(sentences)

    def fit_transform(self, X: Sequence[str], y: Any = None) -> np.ndarray:
        return self.fit(X).transform(X)

    def __sklearn_tags__(self):
        # Only scikit-learn calls this; imported lazily so scikit-learn stays optional.
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            transformer_tags=TransformerTags(preserves_dtype=[]),
            input_tags=InputTags(two_d_array=False, string=True),
            requires_fit=False,
        )
