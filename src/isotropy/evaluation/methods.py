"""The calibrations a table compares (layer 5): method names and the transforms they build.

A method is named on the command line (``--method``) and in :func:`~isotropy.evaluation.evaluate`:
``raw``; ``whitening``, ``whitening-K`` (K components), ``soft-whitening-BETA`` (power BETA),
``flow``; every other registered transform by its kind (``center``, ``abtt``,
``common-component``), with ``KIND-K`` for ``n_components=K`` where the transform has that
parameter (``abtt-8``); and every preset (``soft-0.25``, ``soft-0.5``, ``soft-0.75``). The
transforms come from the registry (:mod:`isotropy.transforms`), so a transform added there is a
method here with no edit.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any

from .._spelling import spell
from ..errors import IsotropyError
from ..transforms import PRESETS, TRANSFORMS, transform_class

__all__ = ["METHOD_FORMS", "Method", "parse_method", "method_forms"]

_HAND = ("whitening", "flow")  # the forms of these two are spelled out below (whitening-K, soft-whitening-BETA)
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


@dataclass(frozen=True)
class Method:
    """A calibration named on the command line: its canonical ``name``, the registry ``kind`` it
    builds (``raw``: none), and the parameters the name fixes."""

    name: str
    kind: str  # raw, or a key of isotropy.transforms.TRANSFORMS
    n_components: int | None = None
    power: float = 1.0  # whitening only

    def build(self, shrinkage: float | str = 0.0, flow_params: dict[str, Any] | None = None) -> Any:
        """An unfitted transform for this method (None for ``raw``, and for ``auto``: chosen at fit time)."""
        if self.kind in ("raw", "auto"):
            return None
        cls = transform_class(self.kind)
        if self.kind == "whitening":
            return cls(n_components=self.n_components, power=self.power, shrinkage=shrinkage)
        if self.kind == "flow":
            return cls(**(flow_params or {}))
        return cls() if self.n_components is None else cls(n_components=self.n_components)

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

    def min_fit_rows(self, dim: int, shrinkage: float | str, flow_params: dict[str, Any] | None = None) -> int:
        """Fewest fitting sentences for a well-defined fit of ``dim``-dimensional vectors."""
        est = self.build(shrinkage, flow_params)
        return 0 if est is None else int(est.min_fit_rows(dim))

    def fit_hint(self) -> str:
        """What to do when there are too few fitting sentences (for the message of :meth:`min_fit_rows`)."""
        if self.kind == "flow":
            return "add sentences (a flow needs more sentences than dimensions)"
        if self.kind == "whitening":
            return f"add sentences, keep fewer components with whitening-K, or shrink the covariance ({spell('shrinkage', 0.1)})"
        if "n_components" in _params(self.kind):
            return f"add sentences, or remove fewer directions ({self.kind}-K with a smaller K)"
        return "add sentences"


def _params(kind: str) -> list[str]:
    return [p for p in inspect.signature(transform_class(kind)).parameters]


def method_forms() -> list[str]:
    """Every method spelling, the ``KIND-K`` forms included (imports the registered classes)."""
    forms = ["raw", "whitening", "whitening-K (K components, e.g. whitening-256)"]
    forms += ["soft-BETA (whitening of power BETA in [0, 1], e.g. soft-0.5; old spelling soft-whitening-BETA)", "flow"]
    for kind in TRANSFORMS:
        if kind not in _HAND:
            forms.append(kind)
            if "n_components" in _params(kind):
                forms.append(f"{kind}-K (n_components=K)")
    return forms + list(PRESETS) + ["auto (chosen label-free on the fit corpus: docs/AUTO.md)"]


def parse_method(name: str) -> Method:
    """Parse a method name; unknown names list the valid forms."""
    n = name.strip().lower()
    if n in ("raw", "none", "identity"):
        return Method("raw", "raw")
    if n == "auto":
        return Method("auto", "auto")
    if n in TRANSFORMS:
        return Method(n, n)
    if n in PRESETS:
        kind, fixed, _ = PRESETS[n]
        return Method(n, kind, n_components=fixed.get("n_components"), power=float(fixed.get("power", 1.0)))
    m = re.fullmatch(r"whitening-(\d+)", n)
    if m and int(m.group(1)) >= 1:
        return Method(n, "whitening", n_components=int(m.group(1)))
    m = re.fullmatch(r"soft-(whitening-)?(\d+(?:\.\d*)?|\.\d+)", n)
    if m and 0 <= float(m.group(2)) <= 1:  # soft-BETA, any power; soft-whitening-BETA is the old spelling, kept as named
        return Method(f"soft-{m.group(1) or ''}{float(m.group(2)):g}", "whitening", power=float(m.group(2)))
    m = re.fullmatch(r"(.+)-(\d+)", n)
    if m and m.group(1) in TRANSFORMS and m.group(1) not in _HAND and "n_components" in _params(m.group(1)):
        return Method(f"{m.group(1)}-{int(m.group(2))}", m.group(1), n_components=int(m.group(2)))
    raise IsotropyError(f"unknown method {name!r}; valid methods: {', '.join(method_forms())}")
