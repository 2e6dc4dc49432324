"""The ``isotropy`` command line (layer 8): :data:`app` holds the commands, :func:`main` runs them.

Every command parses its options, makes one call into the library (:mod:`isotropy.files`,
the file-level jobs, or a feature's entry point) and prints. :func:`main` turns every failure into one line.
"""

from __future__ import annotations

import functools
import os
import sys

import typer

from .app import app

__all__ = ["app", "main"]


@functools.cache
def _command():
    """The click command typer builds from :data:`app`, built once per process. ``app(...)`` rebuilds it on every call
    from every command's signature and type hints (~50 ms): nothing for the ``isotropy`` command, which runs once,
    but the test suite runs some 400 commands in-process. Calling it directly skips only what ``Typer.__call__`` adds
    for pretty tracebacks, which :data:`app` switches off (``pretty_exceptions_enable=False``)."""
    return typer.main.get_command(app)


def _err(message: str) -> None:
    from .._terminal import printable  # a file name or a line quoted in the message may hold escape sequences

    typer.echo(f"error: {printable(message)}", err=True)


def _usage_line(exc) -> str:
    ctx = getattr(exc, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"{where}{' '.join(exc.format_message().split())}{hint}"


def _stopped(what: str, written: list) -> str:
    """What an interrupt left: nothing, or the outputs already renamed into place in full (S1-053: a signal right
    after the rename must not say the old output stayed)."""
    if not written:
        return f"{what}; no partial output was written"
    names = ", ".join(str(p) for p in dict.fromkeys(written))
    verb = "was" if len(dict.fromkeys(written)) == 1 else "were"
    return f"{what} after {names} {verb} written in full (the new output is in place); no partial output was left"


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``isotropy`` command.

    Every failure is one line on stderr: bad input (IsotropyError, a bad option) exits 2,
    Ctrl-C 130, SIGTERM 143 and SIGHUP 129 (after the same cleanup as Ctrl-C). OSError and
    ValueError from below are caught as a last net (ISOTROPY_DEBUG=1 shows the traceback).
    """
    try:  # typer >= 0.2x carries its own copy of click; older ones use click itself
        from typer._click import exceptions as click_exc
    except ImportError:  # pragma: no cover
        from click import exceptions as click_exc

    from ..errors import IsotropyError, Terminated
    from ..storage.atomic import recording_outputs
    from ..storage.locks import output_locks
    from ..storage.signals import terminate_as_interrupt

    debug = os.environ.get("ISOTROPY_DEBUG", "").strip() not in ("", "0")
    written: list = []  # the outputs renamed into place, for the message after an interrupt
    try:
        with terminate_as_interrupt(), output_locks(), recording_outputs() as written:  # one writer per output
            code = _command()(args=argv, standalone_mode=False, prog_name="isotropy")
    except IsotropyError as exc:
        _err(" ".join(str(exc).split()))
        sys.exit(exc.exit_code)  # 2; 3 for calibrate --min-gain
    except click_exc.NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(2)
    except click_exc.UsageError as exc:
        _err(_usage_line(exc))
        sys.exit(2)
    except typer.Abort:
        _err(_stopped("aborted", written))
        sys.exit(1)
    except Terminated as exc:
        _err(_stopped(f"terminated by {exc.name}", written))
        sys.exit(128 + exc.signum)
    except KeyboardInterrupt:
        _err(_stopped("interrupted", written))
        sys.exit(130)
    except MemoryError:
        if debug:
            raise
        _err("out of memory: lower the sizes asked for (--batch-size, --pairs, --max-sentences) or free memory")
        sys.exit(2)
    except (OSError, ValueError) as exc:
        if debug:
            raise
        where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename else ""
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _err(f"{where}{' '.join(detail.split()) or type(exc).__name__}")
        sys.exit(2)
    if code == 130:  # typer turns Ctrl-C into exit status 130
        _err(_stopped("interrupted", written))
    sys.exit(code if isinstance(code, int) else 0)
