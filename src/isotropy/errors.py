"""The exceptions and warnings isotropy raises (layer 0: every module may import this one).

* :class:`IsotropyError` -- a problem with the user's input, reported as one clear line
  naming the file, row, option or artefact concerned. The command line prints only the
  message (``error: ...``) and exits with status 2.
* :class:`InsufficientGain` -- ``calibrate --min-gain``: the calibrated model gains less than asked
  on the evaluation pairs, so nothing is written (exit status 3).
* :class:`NotFittedError` -- ``transform`` (or similar) before ``fit``; also scikit-learn's
  ``NotFittedError``, so ``except sklearn.exceptions.NotFittedError`` catches it.
* :class:`Terminated` -- SIGTERM or SIGHUP arrived while a command or an atomic write ran;
  raised like Ctrl-C's KeyboardInterrupt so every cleanup runs (see :mod:`isotropy.storage.atomic`).
* :class:`RankDeficientWarning` -- a whitening dropped directions without variance.
"""

from __future__ import annotations

import signal
from typing import Any

__all__ = ["IsotropyError", "InsufficientGain", "NotFittedError", "Terminated", "RankDeficientWarning"]  # noqa: F822 (NotFittedError: made on first use, below)


class IsotropyError(ValueError):
    """A problem with the user's input, reported as one clear line (the CLI prints only the message)."""

    exit_code = 2  # the command line's exit status


class InsufficientGain(IsotropyError):
    """``min_gain`` was not reached on the evaluation pairs: nothing was written (the CLI exits 3)."""

    exit_code = 3


class Terminated(BaseException):
    """The process got SIGTERM or SIGHUP; raised, like Ctrl-C's KeyboardInterrupt, past ``except Exception``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class RankDeficientWarning(UserWarning):
    """The fitting vectors span fewer directions than were asked for; some were dropped."""


def _not_fitted_error() -> type:
    # scikit-learn's import takes a second or more (it loads scipy.stats and pandas): the command
    # line imports this module at start, so the class is made on first use (PEP 562), once.
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    class NotFittedError(IsotropyError, SklearnNotFittedError):
        """Raised when ``transform`` (or similar) is called before ``fit``.

        Subclasses scikit-learn's NotFittedError (so ValueError and AttributeError too).
        """

    NotFittedError.__module__, NotFittedError.__qualname__ = __name__, "NotFittedError"
    return NotFittedError


def __getattr__(name: str) -> Any:
    if name == "NotFittedError":
        cls = globals()["NotFittedError"] = _not_fitted_error()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
