"""scikit-learn's estimator contract, shared by the transforms and SentenceEncoder; and :func:`spell`, a
parameter as the caller's interface writes it (Python or the command line).

:class:`EstimatorParams` is scikit-learn's own ``BaseEstimator`` (``get_params``,
``set_params``, ``clone``, tags, the HTML repr), with two of isotropy's conventions on top:
an unknown parameter is one :class:`~isotropy.errors.IsotropyError` line naming the valid
ones, and ``repr`` stays on one line (it is what ``describe()`` and the model card print).
scikit-learn is therefore a core dependency.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sklearn.base import BaseEstimator

from .errors import IsotropyError

__all__ = ["EstimatorParams", "spell", "command_line_spelling"]


class EstimatorParams(BaseEstimator):
    """scikit-learn's ``BaseEstimator``; subclasses store every ``__init__`` argument unmodified under its own name."""

    def set_params(self, **params: Any):
        valid = self._get_param_names()
        for key in params:
            if key not in valid:
                raise IsotropyError(f"invalid parameter {key!r} for {type(self).__name__}; valid ones: {', '.join(valid)}")
        return super().set_params(**params)

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        # in the signature's order (get_params sorts the names), only what differs from the default
        params = self.get_params(deep=False)
        signature = inspect.signature(type(self).__init__).parameters.items()
        args = [f"{k}={params[k]!r}" for k, p in signature if k in params and params[k] != p.default]
        return f"{type(self).__name__}({', '.join(args)})"


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
