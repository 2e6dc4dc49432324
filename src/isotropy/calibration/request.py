"""What ``isotropy calibrate`` is asked to do, as one frozen value (issue #44): :class:`CalibrationRequest`.

The command line (``cli/calibrate_command.py``) and Python (:func:`isotropy.calibration.run_calibration`'s keyword
options) both build it with :meth:`CalibrationRequest.from_options`, the one door: the ``--method`` string is read
here and nowhere else (parsed by :func:`isotropy.transforms.methods.parse_method`, its options checked against
:data:`~isotropy.transforms.methods.PARAMETER_CONSTRAINTS`), ``--pooling auto`` and the options of ``--method auto``
are refused here for another method, and every value that needs neither a file nor the model is checked here.
It is then passed down whole, checked against the encoder once (``pipeline._check_against_model``), and saved into
the output's ``isotropy.json`` under ``calibration.request`` (:meth:`to_dict`; JSON, read back by
:meth:`from_dict`), the way sentence-transformers saves its ``config_keys``.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from .._checks import ENGINES, QUANTIZATIONS
from ..errors import IsotropyError
from ..transforms.methods import TOKEN_METHODS, Method, method_forms, modern_spelling, parse_method, refuse_auto_only

__all__ = [
    "CalibrationRequest",
    "EncoderOptions",
    "EngineOptions",
    "Outputs",
    "EvalGate",
    "AutoMethod",
    "OPTION_NAMES",
    "read_dev",
    "read_dev_pairs",
]

AUTO_POOLING = "auto"


@dataclass(frozen=True)
class EncoderOptions:
    """What the encoder is built from (``Encoder(model, pooling=..., ...)``); ``pooling="auto"``: auto chooses it."""

    model: Any = None
    pooling: str | None = None
    max_length: int | None = None
    batch_size: int = 64
    device: str | None = None
    pooling_stats: Any = None


@dataclass(frozen=True)
class EngineOptions:
    """``--engine dask`` and the cluster's ``--address`` (None: fitted in this process)."""

    engine: str | None = None
    address: Any = None


@dataclass(frozen=True)
class Outputs:
    """What is written beside the model: ONNX graphs (``quantize``: their int8 twins), and how."""

    onnx: bool = False
    quantize: str | None = None
    stock_only: bool = False
    normalize: bool = False
    force: bool = False


@dataclass(frozen=True)
class EvalGate:
    """``--eval DATA``: both models scored on it; ``--min-gain``: nothing written unless the calibration gains that much."""

    eval_data: Any = None
    min_gain: float | None = None


_GROUPS = {"encoder": EncoderOptions, "engine": EngineOptions, "outputs": Outputs, "gate": EvalGate}
METHOD_OPTIONS = ("n_components", "power", "shrinkage", "candidates", "dev", "task", "evidence")
# every keyword run_calibration takes, the method's and its options included
OPTION_NAMES = ("method", *METHOD_OPTIONS, *(f.name for g in _GROUPS.values() for f in fields(g)))


def _path_or_value(value: Any) -> Any:
    return str(value) if isinstance(value, os.PathLike) else value


PATHS = ("model", "pooling_stats", "eval_data", "dev")  # options that may name a local file or folder


def _portable(value: Any) -> Any:
    """A local file or folder as its name only (a calibrated folder is shared: no absolute path in it); a hub id, or
    anything else, as :func:`_jsonable` writes it."""
    if isinstance(value, (str, os.PathLike)) and (Path(value).is_absolute() or Path(value).exists()):
        return Path(value).name
    return _jsonable(value)


def _jsonable(value: Any) -> Any:
    """A value as isotropy.json records it: JSON's own types as they are, a path as its text, anything else
    (pairs, a task, a client, given from Python) as ``{"python": its type}``: named, not saved."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, os.PathLike):
        return str(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float, bool)) for v in value):
        return list(value)
    return {"python": type(value).__name__}


@dataclass(frozen=True)
class CalibrationRequest:
    """One calibration, asked: the method (its options in ``method.params``), the encoder, the engine, what is written
    and the evaluation gate. Build it with :meth:`from_options` (the checks) or read it with :meth:`from_dict`."""

    method: Method = field(default_factory=lambda: parse_method("whitening"))
    encoder: EncoderOptions = field(default_factory=EncoderOptions)
    engine: EngineOptions = field(default_factory=EngineOptions)
    outputs: Outputs = field(default_factory=Outputs)
    gate: EvalGate = field(default_factory=EvalGate)
    notes: tuple[str, ...] = field(default=(), compare=False)  # deprecated spellings met at the door

    @classmethod
    def from_options(cls, method: Any = "whitening", **options: Any) -> CalibrationRequest:
        """The request for ``run_calibration``'s keyword options (``isotropy calibrate``'s, by their Python names),
        every check that needs neither a file nor the model done now; an unknown keyword is one line too."""
        unknown = sorted(set(options) - set(OPTION_NAMES))
        if unknown:
            raise IsotropyError(f"unknown calibrate option {unknown[0]!r}; the options are {', '.join(OPTION_NAMES)}")
        m, notes = _modern(_parse(method))
        if m.kind == "raw":
            raise IsotropyError("method 'raw' calibrates nothing; choose a calibration such as whitening")
        m = m.with_options(**{k: _path_or_value(options.get(k)) for k in METHOD_OPTIONS})  # the auto-only check too
        groups = {
            name: group(**{f.name: _path_or_value(options[f.name]) for f in fields(group) if f.name in options})
            for name, group in _GROUPS.items()
        }
        request = cls(m, notes=notes, **groups)
        request._check()
        return request

    def _check(self) -> None:
        """What the request says of itself (no file read, no model loaded)."""
        m, eng, out, gate = self.method, self.engine, self.outputs, self.gate
        if gate.min_gain is not None and (gate.eval_data is None or not math.isfinite(gate.min_gain)):
            raise IsotropyError(
                f"--min-gain {gate.min_gain}: needs a finite number of points and --eval DATA, the pairs the gain is measured on"
            )
        if self.auto_pooling and m.kind != "auto":
            refuse_auto_only("--pooling auto", m.name, ": add --method auto, or name a pooling")
        if out.quantize is not None and out.quantize not in QUANTIZATIONS:
            raise IsotropyError(f"--quantize {out.quantize!r} is not a quantization; valid: {', '.join(QUANTIZATIONS)}")
        if eng.engine is not None and str(eng.engine).lower() not in ENGINES:
            raise IsotropyError(
                f"unknown engine {eng.engine!r}; the supported engine is dask (docs/DISTRIBUTED.md says why not Ray)"
            )
        if m.kind == "auto" and eng.engine is not None:
            raise IsotropyError("--method auto compares candidates on a sample encoded here: run it without --engine")
        cands = m.options.get("candidates")
        if cands is not None:
            from ..selection import parse_candidates

            parse_candidates(cands, 10**6)  # an unknown name is said before the model loads

    @property
    def auto_pooling(self) -> bool:
        """Whether ``--pooling auto`` asks ``--method auto`` to choose the pooling too."""
        p = self.encoder.pooling
        return isinstance(p, str) and p.strip().lower() == AUTO_POOLING

    def encoder_kwargs(self) -> dict[str, Any]:
        """``Encoder``'s keywords (``--pooling auto``: the encoder's default, auto reads the others off the same passes)."""
        enc = asdict(self.encoder)
        enc["pooling"] = None if self.auto_pooling else enc["pooling"]
        if enc["pooling_stats"] is None:
            del enc["pooling_stats"]
        return enc

    def inputs(self) -> list[Any]:
        """The files this request reads besides the corpus (the output may never replace them)."""
        dev = self.method.options.get("dev")
        return [x if isinstance(x, str) else None for x in (self.encoder.model, dev, self.encoder.pooling_stats)]

    def to_dict(self) -> dict[str, Any]:
        """The request as ``isotropy.json`` records it: JSON; a local file or folder by its name only (no absolute path
        in a folder that is shared), values given from Python that are not JSON by their type."""
        out: dict[str, Any] = {"method": self.method.to_dict()}
        out["method"]["params"] = {k: (_portable if k in PATHS else _jsonable)(v) for k, v in out["method"]["params"].items()}
        for name in _GROUPS:
            out[name] = {k: (_portable if k in PATHS else _jsonable)(v) for k, v in asdict(getattr(self, name)).items()}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CalibrationRequest:
        """A request read back from :meth:`to_dict` (a value recorded as ``{"python": ...}`` comes back as None)."""
        options = {k: v for k, v in (data["method"].get("params") or {}).items()}
        for name in _GROUPS:
            options.update(data.get(name) or {})
        options = {k: (None if isinstance(v, dict) and "python" in v else v) for k, v in options.items()}
        return cls.from_options(data["method"]["name"], **options)


def _parse(method: Any) -> Method:
    """Calibrate's ``--method``, read by the one grammar; an unknown name lists what calibrate takes."""
    try:
        return parse_method(method)
    except IsotropyError:
        from ..transforms import PRESETS, TRANSFORMS

        raise IsotropyError(
            f"{method!r} is not a transform; the transforms are {', '.join(TRANSFORMS)} (presets: {', '.join(PRESETS)}); "
            f"valid methods: {', '.join(method_forms())}; on a static model also {', '.join(TOKEN_METHODS)}"
        ) from None


def _modern(m: Method) -> tuple[Method, tuple[str, ...]]:
    """The method under its current name, with the deprecation note of an old spelling (the grammar's rule)."""
    new, note = modern_spelling(m)
    return new, (() if note is None else (note,))


def warn_notes(request: CalibrationRequest) -> None:
    """A Python caller hears of a deprecated spelling as a ``DeprecationWarning``."""
    for note in request.notes:
        warnings.warn(note, DeprecationWarning, stacklevel=3)


# ----------------------------------------------------------------------------- --method auto's unfitted form


@dataclass
class AutoMethod:
    """``--method auto``: the candidates to compare (None: the default set) and the checked dev labels, pairs or
    search qrels (None: label-free)."""

    candidates: Any = None
    dev: Any = None
    dev_source: str = "the dev pairs"
    kind: str = "auto"
    task: str | None = None  # --for: similarity (None) or search, the rule tuned for that use
    evidence: bool = False  # --evidence: the label-free criteria too (encodes word-deleted copies: slow)


def auto_method(method: Method) -> AutoMethod:
    """The unfitted ``auto`` of a request's method: its dev labels read and checked now, before the model loads."""
    opts = method.options
    dev = opts.get("dev")
    src = _dev_name(dev)
    cands = opts.get("candidates")
    cands = list(cands) if isinstance(cands, tuple) else cands
    return AutoMethod(
        cands, None if dev is None else read_dev(dev, src), src, task=opts.get("task"), evidence=bool(opts.get("evidence"))
    )


def _dev_name(dev: Any) -> str:
    """How messages name ``dev``: its path, or briefly what Python gave (never the whole list: U45, S7-033)."""
    if dev is None or isinstance(dev, (str, os.PathLike)):
        return f"--dev {dev}"
    try:
        size = f" of {len(dev)} items"
    except TypeError:
        size = ""
    return f"dev (a {type(dev).__name__}{size})"


def read_dev_pairs(path: Any) -> list[tuple[str, str, float]]:
    """``--dev pairs.tsv`` (any pairs file ``isotropy eval --data`` reads) as ``(s1, s2, score)`` triples."""
    from ..evaluation import load_tasks

    try:
        tasks = load_tasks(path)
    except IsotropyError as exc:
        raise IsotropyError(f"--dev: {exc}") from None
    return [(p.s1, p.s2, float(p.score)) for t in tasks for p in t.pairs()]


def read_dev(dev: Any, source: str) -> Any:
    """``--dev``, checked (:func:`isotropy.selection.check_dev`): a pairs file (:func:`read_dev_pairs`), a
    retrieval folder (BEIR, plain or Cranfield layout: its queries, documents and qrels; auto then ranks
    by nDCG@10), or, from Python, the pairs or a retrieval task themselves."""
    from ..selection import check_dev

    if isinstance(dev, (str, os.PathLike)):
        from ..retrieval.data import find_retrieval_folder, layout_names, load_retrieval

        if Path(dev).is_dir():
            if find_retrieval_folder(dev) is not None:
                return check_dev(load_retrieval(dev, "--dev"), source)
            from ..evaluation.tasks import find_tasks

            try:
                find_tasks(dev)
            except IsotropyError as exc:
                raise IsotropyError(
                    f"--dev {dev}: neither a retrieval folder ({layout_names()}) nor scored pairs: {exc}"
                ) from None
        return check_dev(read_dev_pairs(dev), source)
    return check_dev(dev, source)
