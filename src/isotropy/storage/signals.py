"""Signals: SIGTERM and SIGHUP end an isotropy command like Ctrl-C, never in the middle of a rename (layer 2).

* :func:`terminate_as_interrupt`: SIGTERM/SIGHUP raise :class:`~isotropy.errors.Terminated`.
* :func:`signals_deferred`: held back while a rename or a cleanup runs, in any thread.

:mod:`.atomic` (atomic writes) and :mod:`.locks` (releasing a lock) hold them back; the command
line installs the handlers around each command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from ..errors import Terminated

__all__ = ["terminate_as_interrupt", "signals_deferred"]

# SIGTERM (kill, timeout, systemd, Kubernetes, Dask) and SIGHUP end a process without
# running any ``finally``; while an isotropy command or an atomic write runs they raise
# :class:`Terminated` instead (a BaseException, like KeyboardInterrupt), so every cleanup
# that Ctrl-C runs runs for them too. Handlers set by the application itself are left alone.

_TERM_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))

# Python runs signal handlers on the main thread only, whichever thread renames: masking the
# signals in the renaming thread (pthread_sigmask) is not enough. So the handlers installed by
# terminate_as_interrupt ask first whether any thread is in a critical section (a rename, a
# cleanup); if one is, the signal is held in _PENDING and sent again when the last one ends.
_CRITICAL = [0]  # threads (and nesting levels) inside signals_deferred, process-wide
_CRITICAL_GUARD = threading.Lock()
_PENDING: list[int] = []


def _raise_terminated(signum: int, frame: Any) -> None:
    if _CRITICAL[0] > 0:
        _PENDING.append(signum)  # a rename or cleanup runs (maybe in another thread): later
        if _CRITICAL[0] > 0 or signum not in _PENDING:
            return
        _PENDING.remove(signum)  # the section ended while we looked: deliver it now
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated`, SIGINT KeyboardInterrupt, except
    while a rename or cleanup runs in any thread (then they wait for its end). Installed from the main
    thread only (Python's rule); a handler the application set itself is left alone; nests."""
    installed: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in _TERM_SIGNALS:
            if signal.getsignal(sig) == signal.SIG_DFL:
                installed[sig] = signal.signal(sig, _raise_terminated)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            installed[signal.SIGINT] = signal.signal(signal.SIGINT, _raise_terminated)
    try:
        yield
    finally:
        for sig, old in installed.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP back while a rename or a cleanup runs, in any thread, so it is never cut in half.

    The calling thread masks them (so the kernel hands them to another thread, or keeps them
    pending), and isotropy's handlers (:func:`terminate_as_interrupt`) defer them while any
    thread is inside such a block; on leaving the last one, the deferred signals are sent again.
    """
    block = {signal.SIGINT, *_TERM_SIGNALS}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, block) if hasattr(signal, "pthread_sigmask") else None
    with _CRITICAL_GUARD:
        _CRITICAL[0] += 1
    try:
        yield
    finally:
        with _CRITICAL_GUARD:
            _CRITICAL[0] -= 1
            pending = list(dict.fromkeys(_PENDING)) if _CRITICAL[0] == 0 else []
            if pending:
                _PENDING.clear()
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        for sig in pending:
            os.kill(os.getpid(), sig)  # now handled as if it had just arrived
