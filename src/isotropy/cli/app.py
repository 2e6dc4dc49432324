"""The ``isotropy`` commands (layer 8), assembled: each module registers its commands on a typer object, and the root
group (:class:`.root.LazyRoot`) builds a command only when it is run or its own ``--help`` is asked.

Every command parses, makes one call into the library (:mod:`isotropy.files`, the file-level
jobs, or a feature's entry point) and prints; :func:`isotropy.cli.main` turns errors into one line.
The shared options (one definition each, one meaning per short flag) live in :mod:`.options`;
``docs/CLI.md`` is generated from this app (``python bench/cli_doc.py``).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import typer

from .root import LazyRoot, app, export_app, fit_app, index_app

__all__ = ["app", "COMMANDS", "GROUPS"]

# The top-level commands in the order ``isotropy --help`` lists them: name -> (module, registrar, the line listed).
# The line is the first paragraph of the command's own help, kept here so that listing imports no command module;
# tests/test_cli_start.py checks that the listing equals the one the built commands give.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "encode": (
        "encode_commands",
        "register_encode_commands",
        "Encode sentences into vectors. Empty lines are encoded too, so row numbers match line numbers.",
    ),
    "transform": ("encode_commands", "register_encode_commands", "Apply a fitted transform to vectors, streaming."),
    "calibrate": (
        "calibrate_command",
        "register_calibrate_command",
        "Fit a calibration on a corpus and write a calibrated model that sentence-transformers, MTEB, faiss and "
        "inference servers load.",
    ),
    "distill": (
        "distill_command",
        "register_distill_command",
        "Distill a static model (a token table averaged per sentence; model2vec) from a transformer.",
    ),
    "demo": (
        "encode_commands",
        "register_demo_command",
        "Run the main job on the embedded default model and a corpus generated on the spot.",
    ),
    "eval": (
        "eval_command",
        "register_eval_command",
        "Spearman x 100 on STS tasks for every pooling x calibration (the papers' table layout), or search quality "
        "(--retrieval).",
    ),
    "search": (
        "index_commands",
        "register_search_command",
        "Find the sentences of an index most similar to each query (cosine after the index's transform).",
    ),
    "serve": (
        "serve_command",
        "register_serve_command",
        "Load an index and its model once and answer searches over HTTP: GET /search?q=...&k=10[&rerank=N], POST "
        "/search, GET /health.",
    ),
    "analyze": (
        "analyze_command",
        "register_analyze_command",
        "Diagnose anisotropy: average cosine, isotropy scores, spectrum, figures; before and after calibration.",
    ),
}

# The groups: name -> (their typer object, the (module, registrar) pairs that fill it).
GROUPS: dict[str, tuple[typer.Typer, tuple[tuple[str, str], ...]]] = {
    "fit": (
        fit_app,  # fit whitening, fit flow, one per registered transform and preset; fit token-frequencies
        (("fit_commands", "register_fit_commands"), ("pooling_commands", "register_pooling_commands")),
    ),
    "index": (index_app, (("index_commands", "register_index_commands"),)),  # index build, index add
    "export": (export_app, (("encode_commands", "register_export_commands"),)),  # export onnx
}


def _register(module: str, registrar: str, target: typer.Typer) -> None:
    getattr(importlib.import_module(f"{__package__}.{module}"), registrar)(target)


def _built(name: str) -> Any:
    """The click command (or group) ``name``, from a private typer object its module registers onto."""
    holder = typer.Typer(rich_markup_mode=app.rich_markup_mode)
    if name in GROUPS:
        group, registrars = GROUPS[name]
        if not group.registered_commands:  # once per process: the groups are module-level objects
            for module, registrar in registrars:
                _register(module, registrar, group)
        holder.add_typer(group, name=name)
    else:
        module, registrar, _ = COMMANDS[name]
        _register(module, registrar, holder)
    holder.callback()(lambda: None)  # a callback makes typer build a group even from one command
    return typer.main.get_group(holder).commands[name]


def _summary(name: str) -> str:
    return COMMANDS[name][2] if name in COMMANDS else (GROUPS[name][0].info.help or "")


def _lazy() -> dict[str, tuple[Any, Any]]:
    names = [*COMMANDS, *GROUPS]
    return {n: (functools.partial(_built, n), functools.partial(_summary, n)) for n in names}


LazyRoot.provider = _lazy
