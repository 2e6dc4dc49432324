"""scikit-learn's estimator contract, shared by Whitening, Flow and SentenceEncoder; and :func:`spell`, a
parameter as the caller's interface writes it (Python or the command line).

Written by hand rather than inheriting sklearn.base.BaseEstimator so that
scikit-learn stays an optional dependency; only ``__sklearn_tags__`` imports it,
and only scikit-learn itself calls that.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .errors import IsotropyError


class EstimatorParams:
    """``get_params``/``set_params``/``repr`` from the ``__init__`` signature, plus transformer tags.

    Subclasses store every ``__init__`` argument unmodified under its own name.
    """

    _preserves_dtype: tuple[str, ...] = ("float64", "float32")

    @classmethod
    def _get_param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params: Any):
        valid = self._get_param_names()
        for key, value in params.items():
            if key not in valid:
                raise IsotropyError(f"invalid parameter {key!r} for {type(self).__name__}; valid ones: {', '.join(valid)}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        defaults = {n: p.default for n, p in inspect.signature(type(self).__init__).parameters.items()}
        args = [f"{k}={v!r}" for k, v in self.get_params().items() if v != defaults.get(k)]
        return f"{type(self).__name__}({', '.join(args)})"

    def __sklearn_tags__(self):
        # scikit-learn (>= 1.6) asks every pipeline step for its tags (e.g. Pipeline.transform ->
        # check_is_fitted): default transformer tags.
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            transformer_tags=TransformerTags(preserves_dtype=list(self._preserves_dtype)),
            input_tags=InputTags(),
        )


# ----------------------------------------------------------------------------- how a parameter is spelled

# Messages that tell the user to change a parameter name it the way the user's interface spells it:
# shrinkage='auto' from Python, --shrinkage auto from the command line (which switches this on).
_COMMAND_LINE: ContextVar[bool] = ContextVar("isotropy_command_line_spelling", default=False)
_NO_VALUE = object()


def spell(name: str, value: Any = _NO_VALUE) -> str:
    """``name`` (and ``value``) as the caller's interface writes it: ``shrinkage='auto'`` or ``--shrinkage auto``."""
    if _COMMAND_LINE.get():
        flag = "--" + name.replace("_", "-")
        if value is _NO_VALUE or value is True:
            return flag
        return f"{flag} {value}"
    return name if value is _NO_VALUE else f"{name}={value!r}"


@contextmanager
def command_line_spelling() -> Iterator[None]:
    """Within this block, :func:`spell` writes command-line options (the ``isotropy`` command sets it)."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)
