"""How a parameter is spelled in a message: as the caller's interface writes it, Python (``shrinkage='auto'``)
or the command line (``--shrinkage auto``, which :func:`command_line_spelling` switches on).

Its own module, below everything that phrases an error, so that the storage layer and the command line's start
import no scikit-learn (``isotropy --help`` stays fast).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["spell", "command_line_spelling"]

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
