"""``isotropy calibrate``: a corpus in, a calibrated sentence-transformers model folder out.

The steps, every check before the model runs:

1. options, output (:func:`isotropy.storage.artifacts.check_output`: an existing folder
   that is not an isotropy model folder is refused unless ``force``), the ONNX extra, the
   corpus (read once: its size against what the method needs, every line valid), ``--eval``
   data; with ``stock_only``, that the pooling and method can be stock modules;
2. encode the corpus a chunk at a time and fit (:mod:`.fit`; ``engine="dask"``: on a cluster);
3. the model in memory (:func:`isotropy.integrations.build_sentence_transformer`: stock
   modules where the math allows), the card's figures, ``--eval``;
4. the folder, atomically (one rename; an interrupted run leaves the old folder or none):
   the model's files, ``README.md`` (the card), ``isotropy.json`` (the marker and what was
   fitted), and with ``onnx`` ``onnx/model.onnx`` (+ int8) for sentence-transformers' ONNX
   backend and ``isotropy-onnx/`` (pooling + calibration in one graph) for
   ``Encoder(folder, backend="onnx")``;
5. the folder loaded back, as a user would load it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ..encoders import Encoder
from ..encoders.backends.onnx import SUBFOLDER
from ..encoders.models import quiet_transformers
from ..errors import IsotropyError
from ..integrations.onnx_export import export_onnx
from ..integrations.sentence_transformers import (
    ST_KIND,
    build_sentence_transformer,
    load_sentence_transformer,
    uses_isotropy_modules,
    write_model_files,
)
from ..integrations.st_onnx import ST_ONNX_DIR, ST_ONNX_INT8_NAME, ST_ONNX_NAME, export_token_states, st_onnx_supported
from ..integrations.st_stock import custom_parts
from ..storage.artifacts import check_output, output_dir
from ..transforms.base import AffineTransform
from .card import base_card_data, base_model_id, model_card
from .corpus import Corpus
from .fit import AutoMethod, Fitted, check_size, fit_auto, fit_dask, fit_local
from .pooling_fit import fit_auto_pooling
from .request import CalibrationRequest, auto_method, warn_notes
from .scoring import anisotropy, check_min_gain, evaluate_both, float32_gap, float32_warning, regression_warning, regressions
from .static_export import ST_SUBFOLDER, check_static_method, load_static_twin, write_static_model
from .token_fit import check_token_model, fit_token_calibration

__all__ = ["Calibration", "CalibrationRequest", "run_calibration", "ONNX_MODULES"]

ONNX_MODULES = ("onnx", "onnxruntime", "onnxscript")  # the [onnx] extra: graphs, runtime, torch's dynamo exporter


@dataclass
class Calibration:
    """What :func:`run_calibration` made: the folder loaded back (``model``: a ``SentenceTransformer``; a static
    model's is loaded on first use, which imports torch and sentence-transformers that its calibration never needed),
    the fitted transform, the encoder it calibrates, and ``info`` (what ``isotropy.json`` records under ``calibration``)."""

    path: Path
    loaded: Any = field(repr=False)  # the model, or a callable that loads it (:attr:`model`)
    transform: Any
    encoder: Any
    info: dict[str, Any]

    @property
    def model(self) -> Any:
        if isinstance(self.loaded, _Later):
            self.loaded = self.loaded.make()
        return self.loaded


@dataclass(frozen=True)
class _Later:
    make: Callable[[], Any]


def _check_onnx(onnx: bool, quantize: str | None) -> bool:
    """Whether ONNX graphs are written, and their extra installed (the ``quantize`` value: checked at the door)."""
    if not (onnx or quantize):
        return False
    import importlib

    missing = []
    for name in ONNX_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise IsotropyError(
            f"--onnx needs the onnx extra, which is not installed (missing: {', '.join(missing)}): pip install 'isotropy[onnx]'"
        )
    return True


def _check_engine(engine: str | None) -> None:
    """``--engine dask``'s extra installed (the name: checked at the door)."""
    if engine is None:
        return
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise IsotropyError("--engine dask needs the distributed extra: pip install 'isotropy[distributed]'") from None


def _check_eval(eval_data: Any) -> None:
    if eval_data is None:
        return
    from ..evaluation import load_tasks

    try:
        load_tasks(eval_data)  # a missing or malformed DATA is named before the corpus is encoded
    except IsotropyError as exc:
        raise IsotropyError(f"--eval: {exc}") from None


def _prepare(corpus: Any, output: Any, request: CalibrationRequest, token: bool):
    """Everything checkable before a model loads that reads a file or the environment (the request checked itself
    at the door); returns the corpus, its size (None: standard input, counted while encoding), the output, the
    unfitted transform (``auto``: its :class:`AutoMethod`, the dev labels read) and whether to write ONNX."""
    from ..integrations.sentence_transformers import require_st_installed

    method, outputs, eval_data = request.method, request.outputs, request.gate.eval_data
    want_onnx = _check_onnx(outputs.onnx, outputs.quantize)
    _check_engine(request.engine.engine)
    src = Corpus(corpus)
    out = check_output(output, ST_KIND, force=outputs.force, inputs=[*src.inputs, eval_data, *request.inputs()])
    if token:  # the model: a name, folder or file; None: the default transformer
        check_token_model(method, request.encoder.model)
    est = auto_method(method) if method.kind == "auto" else method.build()
    require_st_installed()
    _check_eval(eval_data)
    n = src.count()  # reads the files once: a bad line, or no sentence at all, is said now
    if n == 0:
        raise IsotropyError(f"{src.where} holds no sentence (it is empty or every line is blank): there is nothing to fit on")
    return src, n, out, est, want_onnx


def _check_against_model(est: Any, encoder: Any, src: Corpus, n: int | None, request: CalibrationRequest, onnx: bool) -> None:
    """The request checked against the encoder, once: what needs the model's kind, width and pooling, the corpus's
    size included (``n``; None: not checked, a token-level fit takes any size)."""
    stock_only = request.outputs.stock_only
    if getattr(encoder, "backend", "torch") not in ("torch", "static"):
        raise IsotropyError("calibrate needs a torch model (a Hugging Face folder or id) or a static model, not an ONNX export")
    if encoder.backend == "static":
        check_static_method(est, encoder, onnx, request.engine.engine)
    if isinstance(est, AutoMethod):  # every candidate is affine; a corpus too small for one skips it (the evidence says)
        parts = custom_parts(encoder.pooling) if stock_only else []
        if parts:
            raise IsotropyError(
                f"--stock-only: {' and '.join(parts)} cannot be written with stock sentence-transformers modules; "
                "drop --stock-only or use pooling cls, last-avg, pooler or a layers average"
            )
        return
    if isinstance(est, AffineTransform):
        est._check_params(int(encoder.dim))
    else:
        est._check_params()
    if stock_only:
        parts = custom_parts(encoder.pooling, est)
        if parts:
            raise IsotropyError(
                f"--stock-only: {' and '.join(parts)} cannot be written with stock sentence-transformers modules; "
                "drop --stock-only (the folder then needs isotropy and trust_remote_code=True), or use an affine "
                "method (whitening, center, abtt, ...) with pooling cls, last-avg, pooler or a layers average"
            )
    if n is not None:
        check_size(est, n, int(encoder.dim), src.where)


class _Raw:
    """What the card and the figures read of a calibration when ``--method auto`` kept the base model as it is."""

    kind = "raw"

    def __init__(self, dim: int) -> None:
        self.n_features_out_ = int(dim)

    def transform(self, X: Any) -> Any:
        return X

    def get_params(self) -> dict[str, Any]:
        return {}

    def describe(self) -> str:
        return "no calibration: auto kept the base model's vectors as they are"


def _common_info(out: Path, encoder: Any, fitted: Fitted, request: CalibrationRequest, src: Corpus) -> dict[str, Any]:
    """What isotropy.json and the card record of every calibration, a transformer's or a static model's."""
    from .. import __version__

    t = fitted.transform
    method = request.method.name
    info: dict[str, Any] = {"request": request.to_dict()}  # the whole request, read back by CalibrationRequest.from_dict
    if fitted.selection is not None:
        info["selection"] = fitted.selection.to_dict()
        method = f"auto -> {fitted.selection.choice}"  # the record's one form; U34's remark is in the notes
    return {
        "name": out.name,
        "method": method,
        "kind": t.kind,
        "params": {k: v for k, v in t.get_params().items() if isinstance(v, (int, float, str, bool, type(None)))},
        "describe": t.describe(),
        "base_name": Path(str(encoder.model_name)).name,
        "pooling": encoder.pooling,
        "max_length": int(encoder.max_length),
        "dim_in": int(encoder.dim),
        "dim_out": int(t.n_features_out_),
        "corpus": src.describe(),
        "fit": {"n_sentences": fitted.n_sentences, "n_fit": fitted.n_fit, "seconds": fitted.seconds},
        "warnings": fitted.warnings,
        "isotropy_version": __version__,
        **info,
    }


def _info(out: Path, encoder: Any, fitted: Fitted, request: CalibrationRequest, model: Any, src: Corpus, extra: dict) -> dict:
    stock = not uses_isotropy_modules(model)
    return {
        **_common_info(out, encoder, fitted, request, src),
        "base_model": base_model_id(encoder),
        "base_card": base_card_data(encoder),
        "stock": stock,
        "custom": [] if stock else custom_parts(encoder.pooling, fitted.transform),
        "modules": [type(m).__name__ for m in model],
        **extra,
    }


def _onnx_files(encoder: Any, quantize: str | None) -> dict[str, Any]:
    st = [f"{ST_ONNX_DIR}/{ST_ONNX_NAME}"] + ([f"{ST_ONNX_DIR}/{ST_ONNX_INT8_NAME}"] if quantize else [])
    return {"st": st if st_onnx_supported(encoder.pooling) else [], "isotropy": SUBFOLDER, "quantize": quantize}


def _write(out: Path, model: Any, info: dict[str, Any], encoder: Any, transform: Any, quantize: str | None, force: bool) -> None:
    with output_dir(out, ST_KIND, force=force) as tmp, quiet_transformers():
        write_model_files(model, tmp, out.name, marker={"calibration": info})
        (tmp / "README.md").write_text(model_card(info), encoding="utf-8")
        if info.get("onnx"):
            # the transformer is exported once: isotropy's graph is the token-states graph followed by its own head
            token_states = export_token_states(encoder, tmp, quantize=quantize)[-1] if info["onnx"]["st"] else None
            export_onnx(
                tmp / SUBFOLDER, encoder=encoder, transform=transform, quantize=quantize, show_progress=False,
                token_states=token_states,
            )  # fmt: skip


NORMALIZE_LEFT = (
    "the base model ends in Normalize (unit-length vectors); this folder does not: the calibration is fitted "
    "on the vectors before it, so its output is not unit-length (cosine similarity is the same either way; "
    "for dot products, normalize the vectors, or calibrate from Python with normalize=True to end in Normalize)"
)


NORMALIZE_LEFT_STATIC = (
    "the base model normalizes its vectors (model2vec's normalize: true); this folder does not: the calibration is "
    "folded into the table before it, so its output is not unit-length (cosine similarity is the same either way; "
    "for dot products, normalize the vectors, or calibrate from Python with normalize=True to keep it)"
)


def _ends_normalized(encoder: Any, fitted: Fitted, normalize: bool, left: str = NORMALIZE_LEFT) -> bool:
    """Whether a folder ends in ``Normalize`` (a static one: ``normalize: true``): asked (``normalize``), or raw kept
    on a base model that normalizes (its vectors exactly); a calibration written without the base's normalizing says
    so (U35; ``left``: the words for it)."""
    base = base_normalizes(encoder)
    if base and fitted.transform is not None and not normalize:
        fitted.warnings.append(left)
    return normalize or (fitted.transform is None and base)


def base_normalizes(encoder: Any) -> bool:
    """Whether the base model's own output is unit-length: a ``Normalize`` module in its ``modules.json``
    (sentence-transformers) or ``"normalize": true`` in its ``config.json`` (model2vec). A folder ``auto`` keeps raw
    then keeps that too, so that it gives the base model's vectors exactly."""
    import json

    folder = getattr(encoder, "folder", None)
    if folder is None:
        return False
    folder = Path(folder)
    try:
        if (folder / "modules.json").is_file():
            modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
            return any(str(m.get("type", "")).endswith("Normalize") for m in modules if isinstance(m, dict))
        if (folder / "config.json").is_file():
            return json.loads((folder / "config.json").read_text(encoding="utf-8")).get("normalize") is True
    except (OSError, ValueError, AttributeError):  # the loader has read this folder already; a quirk here keeps False
        return False
    return False


def _eval_gate(extra: dict, encoder: Any, t: Any, fitted: Fitted, eval_data: Any, min_gain: Any, show_progress: Any) -> None:
    """``--eval``: both models' scores into ``extra``; ``--min-gain`` refuses before anything is written; every score
    the calibration lowered (``--eval`` tasks, ``--dev``) becomes a warning, the same for a static model and a
    transformer."""
    if eval_data is not None:
        extra["eval"] = {"data": Path(str(eval_data)).name, **evaluate_both(encoder, t, eval_data, show_progress)}
        if min_gain is not None:
            check_min_gain(extra["eval"], min_gain)
    extra["regressions"] = regressions(extra.get("eval"), fitted.selection)
    fitted.warnings.extend(regression_warning(r) for r in extra["regressions"])


def _static_calibration(out, encoder, fitted, request: CalibrationRequest, src, show_progress, t0) -> Calibration:
    """A static model's calibration, folded into its table (:mod:`.static_export`)."""
    written = fitted.transform
    # raw kept: the base model's vectors, its normalizing too; a calibration: as asked, said when it drops it
    keep_norm = _ends_normalized(encoder, fitted, request.outputs.normalize, NORMALIZE_LEFT_STATIC)
    if written is None:
        fitted.transform = _Raw(encoder.dim)
    t = fitted.transform
    extra: dict[str, Any] = {"anisotropy": anisotropy(fitted)}
    if fitted.token is not None:
        extra["token_fit"] = fitted.token
    if encoder.coverage_total is not None:
        extra["coverage"] = encoder.coverage_total.to_dict()  # of every corpus chunk encoded for the fit
    _eval_gate(extra, encoder, t, fitted, request.gate.eval_data, request.gate.min_gain, show_progress)
    info = {
        **_common_info(out, encoder, fitted, request, src),
        "base_model": encoder.model_name,
        "stock": True,
        "custom": [],
        "modules": ["StaticModel (model2vec)", f"{ST_SUBFOLDER}/StaticEmbedding"],
        "static": True,
        **extra,
    }
    write_static_model(out, encoder, written, info, request.outputs.force, normalize=keep_norm)
    info["seconds"] = time.perf_counter() - t0
    return Calibration(out, _Later(partial(load_static_twin, out)), written, encoder, info)


def _fit(encoder: Any, src: Corpus, est: Any, request: CalibrationRequest, token: bool, total: int | None, progress: Any):
    """``(encoder, fit)``: ``est`` fitted the way the request says: on the table (a token-level method), by comparing
    candidates (auto; with ``--pooling auto``, poolings too: the encoder returned has the chosen pooling), on a
    cluster (dask) or here."""
    if token:
        return encoder, fit_token_calibration(encoder, src, request.method, est, total=total, show_progress=progress)
    if isinstance(est, AutoMethod):
        if request.auto_pooling:
            return fit_auto_pooling(encoder, src, est, total=total, show_progress=progress)
        return encoder, fit_auto(encoder, src, est, total=total, show_progress=progress)
    if request.engine.engine is not None:
        return encoder, fit_dask(encoder, src, est, address=request.engine.address, show_progress=progress)
    return encoder, fit_local(encoder, src, est, total=total, show_progress=progress)


def run_calibration(
    corpus: Any,
    output: str | os.PathLike,
    request: CalibrationRequest | None = None,
    progress: bool | None = None,
    **options: Any,
) -> Calibration:
    """The whole job (module docstring) for ``request`` (:class:`~isotropy.calibration.request.CalibrationRequest`;
    ``progress``: the bars, None: only on a terminal). The keyword options of ``isotropy calibrate`` (``model=``,
    ``method=``, ``n_components=``, ..., ``show_progress=``) build the request instead, through the same door.

    A calibration that lowers an ``eval_data`` or ``dev`` score is written with a warning (``info["regressions"]``);
    with ``min_gain`` it is not written at all unless it gains at least that many points on ``eval_data``
    (:class:`~isotropy.errors.InsufficientGain`). ``pooling="auto"`` (with ``method="auto"`` only) lets auto choose the
    pooling too (:mod:`.pooling_fit`). ``method="auto"``: ``task`` (``--for``) picks the rule tuned for similarity
    (default) or search; ``evidence`` also computes the label-free criteria (slow: word-deleted copies of a sample are
    encoded). The request is saved in the folder's ``isotropy.json`` under ``calibration.request``."""
    if "show_progress" in options:
        progress = options.pop("show_progress") if progress is None else progress
    if request is None:
        request = CalibrationRequest.from_options(**options)
        warn_notes(request)
    elif options:
        raise IsotropyError(f"run_calibration: give a request or keyword options, not both ({', '.join(sorted(options))})")
    token = request.method.level == "token"  # the one place the level is asked
    src, total, out, est, want_onnx = _prepare(corpus, output, request, token)
    t0 = time.perf_counter()
    encoder = Encoder(**request.encoder_kwargs())
    outputs, gate = request.outputs, request.gate
    _check_against_model(est, encoder, src, None if token else total, request, want_onnx)  # a token fit: any size
    encoder, fitted = _fit(encoder, src, est, request, token, total, progress)
    if encoder.backend == "static":
        return _static_calibration(out, encoder, fitted, request, src, progress, t0)
    st_model = build_sentence_transformer(
        encoder,
        fitted.transform,
        normalize=_ends_normalized(encoder, fitted, outputs.normalize),
        stock=True if outputs.stock_only else None,
    )
    written = fitted.transform  # None: auto kept the base model (the folder has no Dense modules)
    if written is None:
        fitted.transform = _Raw(encoder.dim)
    extra: dict[str, Any] = {"anisotropy": anisotropy(fitted), "float32": float32_gap(fitted)}
    note = float32_warning(extra["float32"]) if not uses_isotropy_modules(st_model) else None
    if note:
        fitted.warnings.append(note)
    _eval_gate(extra, encoder, fitted.transform, fitted, gate.eval_data, gate.min_gain, progress)
    if want_onnx:
        extra["onnx"] = _onnx_files(encoder, outputs.quantize)
    info = _info(out, encoder, fitted, request, st_model, src, extra)
    _write(out, st_model, info, encoder, written, outputs.quantize if want_onnx else None, outputs.force)
    info["seconds"] = time.perf_counter() - t0
    with quiet_transformers():
        if info["stock"]:
            from sentence_transformers import SentenceTransformer

            loaded = SentenceTransformer(str(out), device=request.encoder.device)
        else:
            loaded = load_sentence_transformer(out, device=request.encoder.device)
    return Calibration(out, loaded, written, encoder, info)
