"""The ``isotropy`` typer objects: the root command and its groups (``fit``, ``index``, ``export``).

Command modules register onto these (:mod:`.app` calls each module's ``register_*``); nothing
here imports a command module, so the command modules and :mod:`.app` sit above it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import typer
from typer.core import TyperGroup

from .options import CONTEXT_SETTINGS, register_global_options

__all__ = ["app", "fit_app", "index_app", "export_app", "LazyGroup", "LazyRoot"]


class LazyGroup(TyperGroup):
    """A group some of whose commands are built only when one is run or its own ``--help`` is asked (click's
    lazy-group pattern, as click's documentation describes it): ``fit NAME`` for every registered transform reads
    the class's signature, and importing a transform class imports scikit-learn, so building them all would make
    every start of the command line pay for it.

    ``lazy``: ``{name: (build, summary)}``, from the function that the registering module puts in ``provider``
    (called on first use, so not even the registry of names is imported to start): ``build()`` gives the typer
    callback, ``summary()`` the one line the group's ``--help`` lists (read without importing the class).
    """

    provider: ClassVar[Callable[[], dict[str, tuple[Callable[[], Any], Callable[[], str]]]] | None] = None
    _listing = False

    @property
    def lazy(self) -> dict[str, tuple[Callable[[], Any], Callable[[], str]]]:
        if "_lazy" not in self.__dict__:
            self._lazy = type(self).provider() if type(self).provider else {}
        return self._lazy

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in self.lazy if n not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            build, summary = self.lazy[cmd_name]
            if self._listing:  # the group's own --help lists the command: its line, nothing built
                return typer.core.TyperCommand(cmd_name, help=summary(), short_help=summary())
            info = typer.models.CommandInfo(name=cmd_name, callback=build())
            self.commands[cmd_name] = typer.main.get_command_from_info(
                info, pretty_exceptions_short=True, rich_markup_mode=self.rich_markup_mode
            )
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


class LazyRoot(LazyGroup):
    """The root group: every command (and the ``fit``, ``index``, ``export`` groups) is built only when it is run or
    its own ``--help`` is asked. Building all of them means importing every command module and reading some 30
    signatures and their type hints (~0.1 s), which ``isotropy --help`` does not need: it lists one line per command.

    ``lazy``: ``{name: (build, summary)}`` from :mod:`.app`; ``build()`` gives the click command itself.
    """

    provider: ClassVar[Callable[[], dict[str, tuple[Callable[[], Any], Callable[[], str]]]] | None] = None

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            build, summary = self.lazy[cmd_name]
            if self._listing:
                return typer.core.TyperCommand(cmd_name, help=summary())
            self.commands[cmd_name] = build()
        return TyperGroup.get_command(self, ctx, cmd_name)


app = typer.Typer(
    name="isotropy",
    cls=LazyRoot,
    help="Calibrate transformer sentence embeddings (BERT-whitening, BERT-flow), evaluate, analyse and search them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings=CONTEXT_SETTINGS,
)
register_global_options(app)  # --no-verify, --version

fit_app = typer.Typer(help="Fit a calibration transform on sentence vectors.", no_args_is_help=True, cls=LazyGroup)
index_app = typer.Typer(help="Build and extend a semantic-search index (encoder -> whitening -> faiss).", no_args_is_help=True)
export_app = typer.Typer(help="Export an encoder (+ pooling + fitted transform) for other runtimes.", no_args_is_help=True)
