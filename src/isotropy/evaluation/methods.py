"""The calibrations a table compares (layer 4): method names and the transforms they build.

A method is named on the command line (``--method``) and in :func:`~isotropy.evaluation.evaluate`:
``raw``, ``whitening``, ``whitening-K``, ``soft-whitening-BETA`` or ``flow``. Its transform
comes from the transforms registry (:func:`isotropy.transforms.transform_class`), so a
method builds whatever class the registry holds for its kind.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any

from ..errors import IsotropyError
from ..transforms import transform_class

__all__ = ["METHOD_FORMS", "Method", "parse_method"]

METHOD_FORMS = ("raw", "whitening", "whitening-K", "soft-whitening-BETA", "flow")


@dataclass(frozen=True)
class Method:
    """A calibration named on the command line: ``raw``, ``whitening``, ``whitening-K``
    (keep K components), ``soft-whitening-BETA`` (whitening with ``power=BETA``) or ``flow``."""

    name: str
    kind: str  # raw | whitening | flow (the transforms registry's key; raw is none)
    n_components: int | None = None
    power: float = 1.0

    def build(self, shrinkage: float | str = 0.0, flow_params: dict[str, Any] | None = None) -> Any:
        """An unfitted transform for this method (None for ``raw``)."""
        if self.kind == "whitening":
            return transform_class("whitening")(n_components=self.n_components, power=self.power, shrinkage=shrinkage)
        if self.kind == "flow":
            return transform_class("flow")(**(flow_params or {}))
        return None

    def min_fit_rows(self, dim: int, shrinkage: float | str, flow_params: dict[str, Any] | None = None) -> int:
        """Fewest fitting sentences for a well-defined fit of ``dim``-dimensional vectors."""
        if self.kind == "raw":
            return 0
        if self.kind == "whitening" and shrinkage == 0 and self.power > 0:
            # a covariance from n centred rows has rank n - 1: K kept directions need n >= K + 1
            return (self.n_components or dim) + 1
        if self.kind == "flow":
            # more rows than dimensions, and one batch (see Flow._check_fit_input for the measurements)
            batch = (flow_params or {}).get("batch_size", _default_param("flow", "batch_size"))
            return max(dim + 1, batch if isinstance(batch, int) else 0)  # a bad batch_size is Flow's to name
        return 2

    def fit_hint(self) -> str:
        """What to do when there are too few fitting sentences (for the message of :meth:`min_fit_rows`)."""
        if self.kind == "flow":
            return "add sentences (a flow needs more sentences than dimensions)"
        return "add sentences, keep fewer components with whitening-K, or shrink the covariance (shrinkage=0.1, --shrinkage 0.1)"


def _default_param(kind: str, name: str) -> Any:
    """The default of hyper-parameter ``name`` of the transform registered for ``kind``."""
    return inspect.signature(transform_class(kind)).parameters[name].default


def parse_method(name: str) -> Method:
    """Parse a method name; unknown names list the valid forms."""
    raw = name.strip()
    n = raw.lower()
    if n in ("raw", "none", "identity"):
        return Method("raw", "raw")
    if n == "whitening":
        return Method("whitening", "whitening")
    if n == "flow":
        return Method("flow", "flow")
    m = re.fullmatch(r"whitening-(\d+)", n)
    if m and int(m.group(1)) >= 1:
        return Method(n, "whitening", n_components=int(m.group(1)))
    m = re.fullmatch(r"soft-whitening-(\d+(?:\.\d*)?|\.\d+)", n)
    if m and 0 <= float(m.group(1)) <= 1:
        return Method(f"soft-whitening-{float(m.group(1)):g}", "whitening", power=float(m.group(1)))
    raise IsotropyError(
        f"unknown method {name!r}; valid methods: raw, whitening, whitening-K (K components, e.g. whitening-256), "
        f"soft-whitening-BETA (BETA in [0, 1], e.g. soft-whitening-0.5), flow"
    )
