"""The calibrations a table compares (layer 5): the one method grammar, :mod:`isotropy.transforms.methods`.

A method is named on the command line (``--method``) and in :func:`~isotropy.evaluation.evaluate`:
``raw``; ``whitening``, ``whitening-K`` (K components), ``soft-BETA`` (power BETA; ``soft-whitening-BETA``
the old spelling), ``flow``; every other registered transform by its kind (``center``, ``abtt``,
``common-component``), with ``KIND-K`` for ``n_components=K`` where the transform has that
parameter (``abtt-8``); and every preset (``soft-0.25``, ``soft-0.5``, ``soft-0.75``). The grammar and its
parameter table live in :mod:`isotropy.transforms.methods` (below every feature that names a method); this
module hands its names on under their old path.
"""

from __future__ import annotations

from ..transforms.methods import METHOD_FORMS, Method, method_forms, parse_method

__all__ = ["METHOD_FORMS", "Method", "parse_method", "method_forms"]
