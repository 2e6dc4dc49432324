"""The one grammar of method names (layer 3): what ``--method`` (calibrate, eval, index build), ``auto``'s
``--candidates`` and :func:`isotropy.evaluation.evaluate` take, parsed into one frozen :class:`Method`.

Names: ``raw`` (also ``none``, ``identity``); ``auto``; every registered transform by its kind
(:data:`isotropy.transforms.TRANSFORMS`: ``whitening``, ``flow``, ``center``, ``abtt``, ``common-component``);
``whitening-K`` (K components), ``soft-BETA`` (a whitening of power BETA in [0, 1]; ``soft-whitening-BETA`` is the
old spelling, kept as named), ``whitening-shrunk`` (Ledoit-Wolf shrinkage), ``KIND-K`` for ``n_components=K`` where
the kind has that parameter (``abtt-8``), every preset (``soft-0.25``, ``soft-0.5``, ``soft-0.75``); and the
token-level methods of a static model's table (``token-whitening``, ``zipfian-whitening``,
``zipfian-whitening-rank``: ``level="token"``).

The parameters a method takes, and the values each takes, are ONE table, :data:`PARAMETER_CONSTRAINTS`, in
scikit-learn's ``_parameter_constraints`` style (a list of constraints per parameter; a value is valid when it
satisfies one). It is written here by hand, not with scikit-learn's ``Interval``/``StrOptions``: this module is
imported by the command line's start, which imports no scikit-learn (``tests/test_cli_start.py``). The transform
classes are imported only when a method builds one (:meth:`Method.build`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from .._spelling import spell
from ..errors import IsotropyError
from . import PRESETS, TRANSFORMS

__all__ = [
    "modern_spelling",
    "Interval",
    "Options",
    "PARAMETER_CONSTRAINTS",
    "FLAGS",
    "TOKEN_METHODS",
    "METHOD_FORMS",
    "Method",
    "parse_method",
    "method_forms",
    "check_value",
    "refuse_auto_only",
]


@dataclass(frozen=True)
class Interval:
    """Numbers of ``type`` (``Integral`` or ``Real``; a bool is neither) in ``[left, right]`` (None: unbounded).
    ``strings``: a numeric string (the command line's ``--shrinkage 0.1``) is read as its number."""

    type: type
    left: float | None
    right: float | None
    strings: bool = False

    def is_satisfied_by(self, value: Any) -> bool:
        if self.strings and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                return False
        if isinstance(value, bool) or not isinstance(value, self.type):
            return False
        if self.type is Real and not math.isfinite(float(value)):
            return False
        return (self.left is None or value >= self.left) and (self.right is None or value <= self.right)

    def __str__(self) -> str:
        what = "an integer" if self.type is Integral else "a number"
        if self.right is None:
            return f"{what} >= {self.left:g}" if self.left is not None else what
        return f"{what} in [{self.left:g}, {self.right:g}]"


@dataclass(frozen=True)
class Options:
    """One of ``values`` (strings compared case-insensitively)."""

    values: tuple[Any, ...]

    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, str):
            value = value.strip().lower()
        return any(value == v and type(value) is type(v) for v in self.values)

    def __str__(self) -> str:
        return "one of " + ", ".join(str(v) for v in self.values)


@dataclass(frozen=True)
class Kind:
    """Values of Python type ``type`` (``names``: sequences whose items are ``type``)."""

    type: type
    label: str
    items: bool = False

    def is_satisfied_by(self, value: Any) -> bool:
        if self.items:
            return isinstance(value, (list, tuple)) and all(isinstance(v, self.type) for v in value)
        return isinstance(value, self.type) and not (self.type is not bool and isinstance(value, bool))

    def __str__(self) -> str:
        return self.label


_ANY = Kind(object, "anything")
_WHITENING = {
    "n_components": [Interval(Integral, 1, None), None],
    "power": [Interval(Real, 0, 1)],
    "shrinkage": [Interval(Real, 0, 1, strings=True), Options(("auto",))],
}
_REMOVAL = {"n_components": [Interval(Integral, 0, None), None]}

# kind -> parameter -> constraints (scikit-learn's _parameter_constraints): the one table of what each method
# takes. A flow's own parameters (levels, depth, ...) are Flow's to check when it fits; calibrate, eval and index
# build set none of them. auto's parameters are the options that apply to --method auto only.
PARAMETER_CONSTRAINTS: dict[str, dict[str, list[Any]]] = {
    "raw": {},
    "whitening": _WHITENING,
    "zipfian-whitening": _WHITENING,
    "center": {},
    "abtt": _REMOVAL,
    "common-component": {"n_components": [Interval(Integral, 0, None)]},
    "flow": {},
    "auto": {
        "candidates": [
            Kind(str, "a comma-separated string of candidate names"),
            Kind(object, "a list of names", items=True),
            None,
        ],
        "dev": [_ANY, None],
        "task": [Options(("similarity", "search")), None],
        "evidence": [Kind(bool, "True or False"), None],
    },
}

# how a parameter is named in a message: the command line's flag, which the Python keyword maps to one to one
FLAGS = {
    "n_components": "--n-components",
    "power": "--power",
    "shrinkage": "--shrinkage",
    "candidates": "--candidates",
    "dev": "--dev",
    "task": "--for",
    "evidence": "--evidence",
}

# token-level methods of a static model's table: name -> (the transform kind it builds, where the token weights
# come from: every row once, the corpus's token counts, or the table's own rank order)
TOKEN_METHODS: dict[str, tuple[str, str]] = {
    "token-whitening": ("whitening", "uniform"),  # ZipfianWhitening is not a sentence-level method (transforms.PAIRED)
    "zipfian-whitening": ("zipfian-whitening", "corpus"),
    "zipfian-whitening-rank": ("zipfian-whitening", "rank"),
}

_HAND = ("whitening", "flow")  # the forms of these two are spelled out (whitening-K, soft-BETA)
METHOD_FORMS = (
    "raw",
    "whitening",
    "whitening-K",
    "soft-whitening-BETA",
    "flow",
    *(k for k in TRANSFORMS if k not in _HAND),
    *PRESETS,
    "auto",
)


def check_value(name: str, value: Any, constraints: list[Any]) -> None:
    """``value`` satisfies one of ``constraints`` (None: None is allowed), else one line naming the option."""
    for c in constraints:
        if (c is None and value is None) or (c is not None and c.is_satisfied_by(value)):
            return
    allowed = " or ".join("None" if c is None else str(c) for c in constraints)
    raise IsotropyError(f"{FLAGS.get(name, name)} {value!r}: must be {allowed}")


def refuse_auto_only(flag: str, method: str, hint: str = "") -> None:
    """The one place that says an option applies to ``--method auto`` only."""
    raise IsotropyError(f"{flag} applies to --method auto only (method {method!r} was given){hint}")


@dataclass(frozen=True)
class Method:
    """A method named by the user: its canonical ``name``, the ``kind`` it builds (a key of
    :data:`PARAMETER_CONSTRAINTS`: ``raw`` builds none, ``auto`` is chosen when fitted), its ``level`` (``sentence``:
    fitted on sentence vectors; ``token``: on a static model's token table) and ``params``, the parameters the name
    and the options fix, as sorted ``(name, value)`` pairs."""

    name: str
    kind: str
    level: str = "sentence"
    params: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, name: Any) -> Method:
        return parse_method(name)

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def n_components(self) -> int | None:
        return self.options.get("n_components")

    @property
    def power(self) -> float:
        return float(self.options.get("power", 1.0))

    @property
    def token_weights(self) -> str | None:
        """Where a token-level method's row weights come from (None: a sentence-level method)."""
        return TOKEN_METHODS[self.name][1] if self.level == "token" else None

    def with_options(self, **options: Any) -> Method:
        """This method with the options given (None: not given) checked against :data:`PARAMETER_CONSTRAINTS`:
        an option the kind does not take, a value outside its constraints, or one that contradicts what a preset's
        name fixes, is one line naming the option."""
        given = {k: v for k, v in options.items() if v is not None and not (k == "evidence" and v is False)}
        table = PARAMETER_CONSTRAINTS[self.kind]
        for key, value in given.items():
            if key not in table:
                if key in PARAMETER_CONSTRAINTS["auto"]:
                    refuse_auto_only(FLAGS[key], self.name)
                if self.kind == "auto":
                    raise IsotropyError(
                        f"{FLAGS.get(key, key)} does not apply to method 'auto' (it compares candidates; name them with --candidates)"
                    )
                takes = ", ".join(FLAGS[k] for k in table)
                takes = f"it takes {takes}" if takes else "it takes none of --n-components, --power, --shrinkage"
                raise IsotropyError(f"{FLAGS.get(key, key)} does not apply to method {self.name!r} ({takes})")
            check_value(key, value, table[key])
            if self.name in PRESETS and key in self.options and self.options[key] != value:
                raise IsotropyError(
                    f"{self.name} fixes {key}={self.options[key]!r}; use {self.kind} with {key}={value!r} instead"
                )
        return Method(self.name, self.kind, self.level, tuple(sorted({**self.options, **given}.items())))

    def build(self, shrinkage: float | str | None = None, flow_params: dict[str, Any] | None = None) -> Any:
        """An unfitted transform for this method (None for ``raw``, and for ``auto``: chosen at fit time).
        ``shrinkage``: a whitening's, when the name and options do not fix it (``isotropy eval --shrinkage``)."""
        if self.kind in ("raw", "auto"):
            return None
        params = self.options
        if self.kind == "flow":
            from . import transform_class

            return transform_class("flow")(**(flow_params or {}))
        if shrinkage is not None and "shrinkage" in PARAMETER_CONSTRAINTS[self.kind]:
            params.setdefault("shrinkage", shrinkage)
        if self.kind == "zipfian-whitening":
            from .token_whitening import ZipfianWhitening

            return ZipfianWhitening(**params)
        from . import transform_class

        return transform_class(self.kind)(**params)

    def check(self, dim: int) -> None:
        """Say now (before any encoding) when the method cannot run on ``dim``-dimensional vectors."""
        est = self.build()
        if est is None or self.kind == "flow":  # a flow's parameters are Flow's to check when it fits
            return
        if self.kind == "whitening" and self.n_components is not None and self.n_components > dim:
            raise IsotropyError(f"{self.name} keeps {self.n_components} components but the model's vectors have {dim} dimensions")
        try:
            est._check_params(dim)
        except IsotropyError as exc:
            raise IsotropyError(f"method {self.name} on the model's {dim}-dimensional vectors: {exc}") from None

    def min_fit_rows(self, dim: int, shrinkage: float | str = 0.0, flow_params: dict[str, Any] | None = None) -> int:
        """Fewest fitting sentences for a well-defined fit of ``dim``-dimensional vectors."""
        est = self.build(shrinkage, flow_params)
        return 0 if est is None else int(est.min_fit_rows(dim))

    def fit_hint(self) -> str:
        """What to do when there are too few fitting sentences (for the message of :meth:`min_fit_rows`)."""
        if self.kind == "flow":
            return "add sentences (a flow needs more sentences than dimensions)"
        if self.kind == "whitening":
            return f"add sentences, keep fewer components with whitening-K, or shrink the covariance ({spell('shrinkage', 0.1)})"
        if "n_components" in PARAMETER_CONSTRAINTS.get(self.kind, {}):
            return f"add sentences, or remove fewer directions ({self.kind}-K with a smaller K)"
        return "add sentences"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "level": self.level, "params": _jsonable(self.options)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Method:
        """A method read back from :meth:`to_dict` (``isotropy.json``): parsed again by name, its options checked."""
        return parse_method(data["name"]).with_options(**{k: v for k, v in dict(data.get("params") or {}).items()})


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}


def method_forms() -> list[str]:
    """Every method spelling, the ``KIND-K`` forms included."""
    forms = ["raw", "whitening", "whitening-K (K components, e.g. whitening-256)"]
    forms += ["soft-BETA (whitening of power BETA in [0, 1], e.g. soft-0.5; old spelling soft-whitening-BETA)", "flow"]
    for kind in TRANSFORMS:
        if kind not in _HAND:
            forms.append(kind)
            if "n_components" in PARAMETER_CONSTRAINTS.get(kind, {}):
                forms.append(f"{kind}-K (n_components=K)")
    return forms + list(PRESETS) + ["auto (chosen label-free on the fit corpus: docs/AUTO.md)"]


def modern_spelling(m: Method) -> tuple[Method, str | None]:
    """``soft-whitening-BETA`` is the deprecated spelling of ``soft-BETA``: the method under its current name, and
    the note to say (None: the name is current)."""
    if not m.name.startswith("soft-whitening-"):
        return m, None
    new = m.name.replace("soft-whitening-", "soft-", 1)
    return Method(new, m.kind, m.level, m.params), f"method {m.name} is deprecated and will be removed; say {new}"


def _unknown(name: Any) -> IsotropyError:
    return IsotropyError(f"unknown method {name!r}; valid methods: {', '.join(method_forms())}")


def parse_method(name: Any) -> Method:
    """Parse a method name (module docstring); an unknown name lists the valid forms."""
    if not isinstance(name, str):
        raise _unknown(name)
    n = name.strip().lower()
    if n in ("raw", "none", "identity"):
        return Method("raw", "raw")
    if n == "auto":
        return Method("auto", "auto")
    if n in TOKEN_METHODS:
        return Method(n, TOKEN_METHODS[n][0], "token")
    if n in TRANSFORMS:
        return Method(n, n)
    if n in PRESETS:
        kind, fixed, _ = PRESETS[n]
        return Method(n, kind, params=tuple(sorted(fixed.items())))
    if n == "whitening-shrunk":
        return Method(n, "whitening", params=(("shrinkage", "auto"),))
    m = re.fullmatch(r"whitening-(\d+)", n)
    if m and int(m.group(1)) >= 1:
        return Method(n, "whitening", params=(("n_components", int(m.group(1))),))
    m = re.fullmatch(r"soft-(whitening-)?(\d+(?:\.\d*)?|\.\d+)", n)
    if m and 0 <= float(m.group(2)) <= 1:  # soft-BETA, any power; soft-whitening-BETA is the old spelling, kept as named
        return Method(f"soft-{m.group(1) or ''}{float(m.group(2)):g}", "whitening", params=(("power", float(m.group(2))),))
    m = re.fullmatch(r"(.+)-(\d+)", n)
    if m and m.group(1) in TRANSFORMS and m.group(1) not in _HAND and "n_components" in PARAMETER_CONSTRAINTS[m.group(1)]:
        return Method(f"{m.group(1)}-{int(m.group(2))}", m.group(1), params=(("n_components", int(m.group(2))),))
    raise _unknown(name)
