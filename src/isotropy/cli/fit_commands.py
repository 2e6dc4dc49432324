"""``isotropy fit NAME`` for every registered transform and preset, generated from the registry.

Each command's options come from the transform class's ``__init__`` signature (types from
its annotations, help from the "Parameters" section of its docstring), so a transform added
to :data:`isotropy.transforms.TRANSFORMS` (or a preset to ``PRESETS``) gets its fit command
with no edit here. ``fit whitening`` and ``fit flow`` stay hand-written in :mod:`.app` (they
have short options and the distributed ``--engine``).
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from pathlib import Path
from typing import Any

import typer

__all__ = ["register_fit_commands"]

_OWN = ("vectors", "output", "progress", "force")  # the options every fit command has


def _param_docs(cls: type) -> dict[str, str]:
    """``{name: one-line help}`` from the numpydoc "Parameters" section of ``cls``'s docstring."""
    doc = inspect.getdoc(cls) or ""
    match = re.search(r"^Parameters\n-+\n(.*?)(?:\n\n(?=\S)|\Z)", doc, re.S | re.M)
    out: dict[str, str] = {}
    name = None
    for line in (match.group(1) if match else "").splitlines():
        head = re.match(r"^(\w+)\s*:", line)
        if head:
            name = head.group(1)
            out[name] = ""
        elif name and line.strip():
            out[name] = (out[name] + " " + line.strip().replace("``", "")).strip()
    return out


def _option_type(annotation: Any, default: Any) -> tuple[Any, bool]:
    """``(the click-facing type, whether None is allowed)`` for one ``__init__`` parameter."""
    if annotation is inspect.Parameter.empty:
        return (type(default) if default is not None else str), default is None
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [a for a in args if a is not type(None)]
        optional = len(kinds) < len(args)
        # a value of several types (shrinkage: a number or 'auto') is passed as text; the class parses it
        return (kinds[0] if len(kinds) == 1 else str), optional
    return annotation, False


def _fit_parameters(name: str) -> tuple[type, list[inspect.Parameter], list[str]]:
    """The class, the command's typer parameters, and the names of the transform's own ones."""
    from ..transforms import resolve_transform

    cls, fixed = resolve_transform(name)
    hints = typing.get_type_hints(cls.__init__)
    docs = _param_docs(cls)
    params = [
        inspect.Parameter(
            "vectors",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=Path,
            default=typer.Argument(..., help="Vectors to fit on: a .npy file (rows x dims) or a folder of .npy shards."),
        ),
        inspect.Parameter(
            "output",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=str,
            default=typer.Option(
                ..., "--output", "-o", help=f"Folder to write the fitted {cls.kind} to (config.json + state.safetensors)."
            ),
        ),
    ]
    own = []
    for p in inspect.signature(cls).parameters.values():
        if p.name in fixed or p.name in getattr(cls, "transient_params", ()):
            continue
        if p.name in _OWN:  # pragma: no cover - a registry mistake, caught by the CLI tests
            raise RuntimeError(f"transform {name}: parameter {p.name!r} clashes with a fit command option")
        kind, optional = _option_type(hints.get(p.name, inspect.Parameter.empty), p.default)
        flag = "--" + p.name.replace("_", "-")
        decls = (f"{flag}/--no-{flag[2:]}",) if kind is bool else (flag,)
        ann = kind | None if optional else kind
        opt = typer.Option(p.default, *decls, help=docs.get(p.name, ""))
        params.append(inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ann, default=opt))
        own.append(p.name)
    params += [
        inspect.Parameter(
            "progress",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=bool | None,
            default=typer.Option(None, "--progress/--no-progress", help="Show a progress bar (default: only on a terminal)."),
        ),
        inspect.Parameter(
            "force",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=bool,
            default=typer.Option(
                False,
                "--force",
                help="Replace an existing output even when it is not an isotropy output of the same kind (never an input).",
            ),
        ),
    ]
    return cls, params, own


def _command(name: str):
    """The typer callback of ``isotropy fit NAME``."""
    from ..transforms import PRESETS

    cls, params, own = _fit_parameters(name)

    def command(**kw: Any) -> None:
        import warnings

        from ..files import fit_file

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = fit_file(
                name, kw["vectors"], kw["output"], params={k: kw[k] for k in own}, show_progress=kw["progress"], force=kw["force"]
            )
        for warning in caught:
            typer.echo(f"warning: {warning.message}", err=True)
        typer.echo(f"wrote {est.describe()} to {kw['output']}", err=True)

    module_doc = inspect.getdoc(inspect.getmodule(cls)) or inspect.getdoc(cls) or cls.__name__
    first = module_doc.splitlines()[0].rstrip(".")
    if name in PRESETS:
        kind, fixed, what = PRESETS[name]
        fixed_s = ", ".join(f"{k}={v!r}" for k, v in fixed.items())
        command.__doc__ = f"Fit the preset {name}: {what} (a {kind} with {fixed_s}; saved as a {kind})."
    else:
        command.__doc__ = f"Fit {name} on sentence vectors. {first}."
    command.__signature__ = inspect.Signature(params)  # typer reads the options from here
    command.__annotations__ = {}
    command.__name__ = f"fit_{name.replace('-', '_').replace('.', '_')}"
    return command


def register_fit_commands(fit_app: typer.Typer, skip: tuple[str, ...] = ("whitening", "flow")) -> None:
    """Add ``fit NAME`` to ``fit_app`` for every registered transform and preset not in ``skip``."""
    from ..transforms import PRESETS, TRANSFORMS

    for name in [*TRANSFORMS, *PRESETS]:
        if name not in skip:
            fit_app.command(name)(_command(name))
