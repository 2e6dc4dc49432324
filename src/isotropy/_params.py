"""scikit-learn's estimator contract, shared by the transforms and SentenceEncoder (:func:`spell` and
:func:`command_line_spelling` live in :mod:`isotropy._spelling`, which imports no scikit-learn; they are
re-exported here for the code that imported them from this module).

:class:`EstimatorParams` is scikit-learn's own ``BaseEstimator`` (``get_params``,
``set_params``, ``clone``, tags, the HTML repr), with two of isotropy's conventions on top:
an unknown parameter is one :class:`~isotropy.errors.IsotropyError` line naming the valid
ones, and ``repr`` stays on one line (it is what ``describe()`` and the model card print).
scikit-learn is therefore a core dependency.
"""

from __future__ import annotations

import inspect
from typing import Any

from sklearn.base import BaseEstimator

from ._spelling import command_line_spelling, spell
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
