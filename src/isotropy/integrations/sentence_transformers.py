"""sentence-transformers: calibrated model folders that ``SentenceTransformer`` loads like any other (layer 5).

:func:`to_sentence_transformer` writes a model folder whose ``modules.json`` lists the
encoder's ``Transformer`` module, :class:`IsotropyPooling` (every pooling of
:class:`isotropy.encoders.Encoder`, the multi-layer ones included, read off the hidden
states the Transformer module returns when its config says ``output_hidden_states``;
computed by :func:`isotropy.encoders.poolings.pool`, the same code the Encoder runs) and
:class:`IsotropyTransform` (the fitted transform's ``to_torch()`` form). No ``Normalize``
is added unless asked (``normalize=True``), so ``model.encode(sentences)`` equals
``transform.transform(encoder.encode(sentences))``.

Loading such a folder needs ``isotropy`` installed, because the two module classes live
in :mod:`isotropy.integrations.sentence_transformers` (folders written by isotropy 0.1
name them ``isotropy.ecosystem.*``; that module still hands them out). Their code is
:mod:`.st_modules`'; this module makes them on first use and names them as its own.
sentence-transformers 6 imports a module class from outside its own package only with
``trust_remote_code=True`` (for local folders too); here that flag imports the
*installed* ``isotropy`` package, no code is read from the folder. So::

    SentenceTransformer(path, trust_remote_code=True)        # or
    isotropy.integrations.load_sentence_transformer(path)    # checks first, then the same

What a user sees when something is missing:

* ``isotropy`` not installed: the folder's ``config_sentence_transformers.json``
  declares ``"requirements": {"isotropy": ...}``, which sentence-transformers checks
  before loading any module and reports as ``ImportError: The model '...' requires:
  - isotropy>=0.1.0, but it is not installed. ... pip install -U "isotropy>=0.1.0"``.
* ``trust_remote_code`` not given: sentence-transformers' ``ValueError: The model ...
  references the module class '...IsotropyPooling', which is not part of Sentence
  Transformers ... pass the argument trust_remote_code=True``.
* :func:`check_sentence_transformer` (run by :func:`load_sentence_transformer`) turns
  either case into one :class:`isotropy.errors.IsotropyError` line naming the package to install.

:func:`calibrate` appends a fitted transform to a ``SentenceTransformer`` already in
memory. It goes *after* every existing module, a trailing ``Normalize`` included, so the
calibrated model maps exactly what ``model.encode`` returned before (which is what one
fits a transform on); the output is then no longer unit-length, unless ``normalize=True``
appends a fresh ``Normalize`` after the transform. Cosine similarity (sentence-transformers'
default) does not care.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

from ..encoders.models import quiet_transformers
from ..encoders.poolings import parse_pooling
from ..errors import IsotropyError
from ..storage.artifacts import check_output, header, output_dir
from ..transforms import as_transform
from ._common import pooler_dense, transform_for
from .st_stock import build_stock, head_modules, make_portable, pooled_dim

# Also public, but created on first access (module __getattr__): IsotropyPooling, IsotropyTransform.
# What isotropy.integrations re-exports (with the module classes, created on first access).
USER_API = [
    "to_sentence_transformer",
    "build_sentence_transformer",
    "save_sentence_transformer",
    "calibrate",
    "load_sentence_transformer",
    "check_sentence_transformer",
]
__all__ = [
    *USER_API,
    "write_model_files",
    "uses_isotropy_modules",
    "ST_KIND",
    "MARKER_NAME",
]

PACKAGE = "isotropy"
ST_KIND = "sentence-transformers"
MARKER_NAME = "isotropy.json"  # says that isotropy wrote the folder (so it may replace it); stock tools ignore it


_ST_MISSING = "this needs sentence-transformers: pip install 'isotropy[st]' (or pip install sentence-transformers)"


def _require_st():
    try:
        import sentence_transformers
    except ImportError:
        raise IsotropyError(_ST_MISSING) from None
    return sentence_transformers


def require_st_installed() -> None:
    """:func:`_require_st` without the import (about 10 s of CPU, torch's included): for a check at the door."""
    import importlib.util
    import sys

    name = "sentence_transformers"
    if (sys.modules[name] is None) if name in sys.modules else importlib.util.find_spec(name) is None:
        raise IsotropyError(_ST_MISSING)  # (None in sys.modules: an import blocked on purpose, as a missing one)


def _make_module_classes() -> dict[str, type]:
    """Define the sentence-transformers module classes (their base class needs sentence-transformers)."""
    import torch

    _require_st()
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.base.modules.module import Module
    from sentence_transformers.util import load_dir_path

    from .st_input import input_class
    from .st_modules import pooling_class, transform_class

    classes = {
        "IsotropyPooling": pooling_class(Module, torch),
        "IsotropyTransform": transform_class(Module, load_dir_path),
        "IsotropyTransformer": input_class(Transformer, torch),  # prompt templates and attention weights
    }
    for name, cls in classes.items():
        cls.__module__ = __name__  # what modules.json records: the class's home, importable by name
        cls.__qualname__ = name
    return classes


_CLASSES: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    # The module classes subclass sentence-transformers' Module, so they are created on first use:
    # importing this module works (and isotropy.integrations with it) without sentence-transformers.
    if name in ("IsotropyPooling", "IsotropyTransform", "IsotropyTransformer"):
        if not _CLASSES:
            _CLASSES.update(_make_module_classes())
            globals().update(_CLASSES)
        return _CLASSES[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- building and saving


def _requirement() -> dict[str, Any]:
    from .. import __version__

    return {
        PACKAGE: {
            "specifier": f">={__version__}",
            "reason": "The model's pooling and calibration modules are classes of the isotropy package "
            f"({__name__}); load it with SentenceTransformer(path, trust_remote_code=True).",
        }
    }


def _readme(path: Path) -> str:
    return (
        "# Calibrated sentence-embedding model (isotropy)\n\n"
        "Needs the Python package `isotropy` (`pip install isotropy`), whose modules it uses:\n\n"
        "```python\nfrom sentence_transformers import SentenceTransformer\n"
        f"model = SentenceTransformer({str(path.name)!r}, trust_remote_code=True)\n"
        "vectors = model.encode(sentences)\n```\n\n"
        "`trust_remote_code=True` lets sentence-transformers import the module classes of the installed "
        f"`isotropy` package ({__name__}); no code is read from this folder.\n"
    )


def _stock_readme(name: str) -> str:
    return (
        "# Calibrated sentence-embedding model (isotropy)\n\n"
        "Made of sentence-transformers' own modules only: no `isotropy` and no `trust_remote_code` needed.\n\n"
        "```python\nfrom sentence_transformers import SentenceTransformer\n"
        f"model = SentenceTransformer({name!r})\nvectors = model.encode(sentences)\n```\n"
    )


def build_sentence_transformer(
    encoder, transform: Any = None, *, normalize: bool = False, device: str | None = None, stock: bool | None = None
):
    """An in-memory ``SentenceTransformer`` computing ``encoder`` (+ ``transform``) (+ Normalize if asked).

    ``stock``: None (default) uses sentence-transformers' own modules when the pooling and the
    transform allow it (:mod:`.st_stock`), else isotropy's; True requires stock modules (one
    clear error naming what they cannot express); False always uses isotropy's modules.
    """
    with quiet_transformers():
        return _build(encoder, transform, normalize, device, stock)


def _build(encoder, transform, normalize, device, stock=None):
    import torch

    _require_st()
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer

    if getattr(encoder, "backend", "torch") != "torch":
        raise IsotropyError("to_sentence_transformer needs a torch Encoder (backend='torch'), not an ONNX one")
    p = parse_pooling(encoder.pooling)
    if transform is not None:
        transform = transform_for(encoder, transform)
    stock_model = build_stock(encoder, transform, normalize=normalize, device=device, stock=stock)
    if stock_model is not None:  # every part is a stock module: no isotropy needed to load it
        return stock_model
    source = str(encoder.folder) if encoder.folder is not None else encoder.model_name
    config_kwargs = {"output_hidden_states": True} if p.needs_hidden_states else None
    if p.template is not None or p.needs_attentions:  # sentences in a template, or attention weights
        first = __getattr__("IsotropyTransformer")(
            source,
            max_seq_length=encoder.max_length,
            config_kwargs=config_kwargs,
            isotropy_template=p.template,
            isotropy_attentions=p.needs_attentions,
        )
    else:
        first = Transformer(source, max_seq_length=encoder.max_length, config_kwargs=config_kwargs)
    if p.needs_hidden_states:
        first.model.config.output_hidden_states = True
    state = encoder.pooling_state(p)
    spec = {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in state.items()}
    pooling = __getattr__("IsotropyPooling")(
        p.name, embedding_dimension=pooled_dim(encoder), pooler=p.kind == "pooler", state=spec
    )
    for k, v in state.items():
        getattr(pooling, f"state_{k}").copy_(torch.from_numpy(v))
    if p.kind == "pooler":
        pooling.dense.load_state_dict(pooler_dense(encoder).state_dict())
    modules = [first, pooling, *head_modules(encoder)]  # the model's Dense head, if any, before the calibration
    if transform is not None:
        modules.append(__getattr__("IsotropyTransform")(transform))
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
    with output_dir(path, ST_KIND, force=force) as tmp, quiet_transformers():
        write_model_files(model, tmp, path.name)
    return path


def uses_isotropy_modules(model) -> bool:
    """Whether ``model`` holds a module class of isotropy's (loading it then needs isotropy and trust_remote_code)."""
    return any(type(m).__module__ == __name__ for m in model._modules.values())


def write_model_files(model, folder: Path, name: str, marker: dict[str, Any] | None = None) -> bool:
    """Save ``model`` into the (temporary) ``folder``: the modules, the isotropy requirement when it holds
    isotropy's modules (else configs every reader understands: :func:`.st_stock.make_portable`), a
    README and the ``isotropy.json`` marker (+ ``marker``). Returns whether it uses isotropy's modules."""
    model.save(str(folder), create_model_card=False)
    uses_isotropy = uses_isotropy_modules(model)
    cfg_path = folder / "config_sentence_transformers.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
    if uses_isotropy:
        cfg["requirements"] = {**cfg.get("requirements", {}), **_requirement()}
        (folder / "README.md").write_text(_readme(Path(name)), encoding="utf-8")
    else:
        make_portable(folder, model.max_seq_length)
        (folder / "README.md").write_text(_stock_readme(name), encoding="utf-8")
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    meta = {**header(ST_KIND), **(marker or {})}
    (folder / MARKER_NAME).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return uses_isotropy


def to_sentence_transformer(
    encoder,
    transform: Any,
    path: str | os.PathLike,
    *,
    normalize: bool = False,
    force: bool = False,
    stock: bool | None = None,
) -> Path:
    """Write a sentence-transformers model folder computing ``transform.transform(encoder.encode(s))``.

    ``encoder`` is a torch :class:`isotropy.encoders.Encoder` (any model and pooling),
    ``transform`` a fitted transform (or its folder; ``None`` for the raw pooled vectors).
    By default (``stock=None``) an affine transform with a stock-expressible pooling (cls,
    last-avg, pooler, layer averages) is written with sentence-transformers' own modules only
    (:mod:`.st_stock`): load it with plain ``SentenceTransformer(path)``, isotropy not needed.
    Otherwise (a flow, a prompt or attention pooling; or ``stock=False``) the folder uses
    isotropy's modules: load it with ``SentenceTransformer(path, trust_remote_code=True)`` or
    :func:`load_sentence_transformer`. ``stock=True`` refuses anything but stock modules.
    ``normalize=True`` appends a Normalize module.
    """
    check_output(path, ST_KIND, force=force, inputs=[transform if isinstance(transform, (str, os.PathLike)) else None])
    model = build_sentence_transformer(encoder, transform, normalize=normalize, stock=stock)
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

    transform = as_transform(transform)
    d_in = int(transform.n_features_in_)
    dim = (getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension)()
    if dim is not None and dim != d_in:
        raise IsotropyError(f"the {transform.kind} was fitted on {d_in}-dimensional vectors, but the model gives {dim}")
    device = model.device
    model.append(__getattr__("IsotropyTransform")(transform).to(device))
    if normalize:
        model.append(Normalize())
    return model


# --------------------------------------------------------------------------- loading


def _requirements(path: Path) -> dict[str, Any]:
    cfg_file = path / "config_sentence_transformers.json"
    if not cfg_file.is_file():
        return {}
    try:
        return json.loads(cfg_file.read_text(encoding="utf-8")).get("requirements") or {}
    except (json.JSONDecodeError, AttributeError):
        return {}


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
    requirements = _requirements(path)
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
    with quiet_transformers():
        return SentenceTransformer(str(path), **kwargs)
