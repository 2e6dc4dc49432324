"""The ``isotropy`` typer objects: the root command and its groups (``fit``, ``index``, ``export``).

Command modules register onto these (:mod:`.app` calls each module's ``register_*``); nothing
here imports a command module, so the command modules and :mod:`.app` sit above it.
"""

from __future__ import annotations

import typer

from .options import CONTEXT_SETTINGS, register_global_options

__all__ = ["app", "fit_app", "index_app", "export_app"]

app = typer.Typer(
    name="isotropy",
    help="Calibrate transformer sentence embeddings (BERT-whitening, BERT-flow), evaluate, analyse and search them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings=CONTEXT_SETTINGS,
)
register_global_options(app)  # --no-verify, --version

fit_app = typer.Typer(help="Fit a calibration transform on sentence vectors.", no_args_is_help=True)
app.add_typer(fit_app, name="fit")
index_app = typer.Typer(help="Build and extend a semantic-search index (encoder -> whitening -> faiss).", no_args_is_help=True)
app.add_typer(index_app, name="index")
export_app = typer.Typer(help="Export an encoder (+ pooling + fitted transform) for other runtimes.", no_args_is_help=True)
app.add_typer(export_app, name="export")
