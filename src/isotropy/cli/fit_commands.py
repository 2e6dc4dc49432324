"""``isotropy fit NAME`` for every registered transform and preset, generated from the registry.

Each command's options come from the transform class's ``__init__`` signature (types from
its annotations, help from the "Parameters" section of its docstring), so a transform added
to :data:`isotropy.transforms.TRANSFORMS` (or a preset to ``PRESETS``) gets its fit command
with no edit here. ``fit whitening`` and ``fit flow`` are written by hand below (whitening has
the distributed ``--engine``; flow its training options). Shared options come from :mod:`.options`.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any

import typer

from .options import (
    Address,
    BatchSize,
    Engine,
    Force,
    Inputs,
    MaxLength,
    Model,
    NComponents,
    Output,
    Pooling,
    Progress,
    Shrinkage,
    choice,
    command,
)
from .root import LazyGroup

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
            annotation=Output(f"Folder to write the fitted {cls.kind} to (config.json + state.safetensors)."),
            default=...,
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
        decls += ("-k",) if p.name == "n_components" else ()  # -k means --n-components in every command
        ann = kind | None if optional else kind
        opt = typer.Option(p.default, *decls, help=docs.get(p.name, ""))
        params.append(inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ann, default=opt))
        own.append(p.name)
    params += [
        inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Progress, default=None),
        inspect.Parameter("force", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Force, default=False),
    ]
    return cls, params, own


def _command(name: str):
    """The typer callback of ``isotropy fit NAME``."""
    cls, params, own = _fit_parameters(name)

    def command(**kw: Any) -> None:
        import warnings

        from ..files import fit_file

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = fit_file(
                name, kw["vectors"], kw["output"], params={k: kw[k] for k in own}, show_progress=kw["progress"], force=kw["force"]
            )
        _echo_warnings(caught)
        typer.echo(f"wrote {est.describe()} to {kw['output']}", err=True)

    command.__doc__ = _summary(name)
    command.__signature__ = inspect.Signature(params)  # typer reads the options from here
    command.__annotations__ = {}
    command.__name__ = f"fit_{name.replace('-', '_').replace('.', '_')}"
    return command


def _echo_warnings(caught: list) -> None:
    for warning in caught:
        typer.echo(f"warning: {warning.message}", err=True)


def fit_whitening(
    vectors: Annotated[
        Path | None,
        typer.Argument(
            help="Vectors to fit on: a .npy file (rows x dims) or a folder of .npy shards, streamed one chunk at a time."
        ),
    ] = None,
    output: Output("Folder to write the fitted whitening to (config.json + state.safetensors).") = ...,
    n_components: NComponents = None,
    power: Annotated[
        float,
        typer.Option(
            "--power", help="Soft whitening: 1 full whitening, 0 pure rotation (PCA without scaling), between interpolates."
        ),
    ] = 1.0,
    shrinkage: Shrinkage = "0",
    method: Annotated[
        choice("pca", "zca"),
        typer.Option("--method", help="pca (rotate to principal axes) or zca (rotate back to the original axes)."),
    ] = "pca",
    progress: Progress = None,
    engine: Engine = None,
    inputs: Inputs = None,
    address: Address = None,
    model: Model = None,
    pooling: Pooling = None,
    max_length: MaxLength = None,
    batch_size: BatchSize = 64,
    force: Force = False,
) -> None:
    """Fit BERT-whitening (y = (x - mu) W) on sentence vectors (or, with --engine, on sentence shards encoded on a cluster)."""
    import warnings

    from ..files import fit_file
    from .engine import check_engine

    params = dict(n_components=n_components, power=power, shrinkage=shrinkage, method=method)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if engine is not None or inputs is not None:
            from ..distributed import EncoderSpec
            from ..distributed import fit_whitening as fit_shards

            check_engine(engine, inputs, vectors)
            spec = EncoderSpec(model=model, pooling=pooling, max_length=max_length, batch_size=batch_size)
            w = fit_shards(inputs, spec, params, output=output, address=address, show_progress=progress, force=force)
        elif vectors is None:
            raise typer.BadParameter("give VECTORS, or --engine with --input")
        else:
            from .engine import only_with_engine

            only_with_engine("VECTORS are already encoded", model=model, pooling=pooling, max_length=max_length, address=address)
            w = fit_file("whitening", vectors, output, params=params, show_progress=progress, force=force)
    _echo_warnings(caught)
    typer.echo(f"wrote {w.describe()} to {output}", err=True)


def fit_flow(
    vectors: Annotated[Path, typer.Argument(help="Vectors to fit on: a .npy file (rows x dims) or a folder of .npy shards.")],
    output: Output("Folder to write the fitted flow to (config.json + state.safetensors).") = ...,
    levels: Annotated[
        int, typer.Option("--levels", help="Glow levels (multi-scale: half the channels are factored out between levels).")
    ] = 2,
    depth: Annotated[int, typer.Option("--depth", help="Steps per level (actnorm -> invertible 1x1 conv -> coupling).")] = 3,
    hidden: Annotated[int, typer.Option("--hidden", help="Width of the coupling networks.")] = 32,
    coupling: Annotated[
        choice("additive", "affine"), typer.Option("--coupling", help="additive (the paper's) or affine.")
    ] = "additive",
    epochs: Annotated[int, typer.Option("--epochs", help="Passes over the vectors.")] = 1,
    lr: Annotated[float, typer.Option("--lr", help="Adam learning rate.")] = 1e-3,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Rows per optimisation step.")] = 32,
    seed: Annotated[int, typer.Option("--seed", help="Seed of initialisation and shuffling (same seed, same result).")] = 0,
    progress: Progress = None,
    force: Force = False,
) -> None:
    """Fit BERT-flow (a Glow normalizing flow, Li et al. 2020) on sentence vectors."""
    from ..files import fit_file

    params = dict(
        levels=levels, depth=depth, hidden=hidden, coupling=coupling, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed
    )
    f = fit_file("flow", vectors, output, params=params, show_progress=progress, force=force)
    typer.echo(f"wrote {f.describe()} to {output}", err=True)


def register_fit_commands(fit_app: typer.Typer) -> None:
    """Add ``fit whitening``, ``fit flow`` and ``fit NAME`` for every other registered transform and preset; those
    are built when one is used (:class:`~.root.LazyGroup`: building one imports its class, hence scikit-learn)."""
    command(fit_app, fit_whitening, "whitening")
    command(fit_app, fit_flow, "flow")
    LazyGroup.provider = _lazy_fit_commands


def _lazy_fit_commands() -> dict:
    """``{name: (build, summary)}`` for every registered transform and preset but whitening and flow."""
    from ..transforms import PRESETS, TRANSFORMS

    names = [n for n in [*TRANSFORMS, *PRESETS] if n not in ("whitening", "flow")]
    return {n: (functools.partial(_command, n), functools.partial(_summary, n)) for n in names}


def _summary(name: str) -> str:
    """What ``_command(name)``'s help says, read without importing the class: a preset's own description, or the
    first line of the docstring of the module that defines the transform (read from its source with ``ast``)."""
    import ast
    import importlib.util

    from ..transforms import PRESETS, TRANSFORMS

    if name in PRESETS:
        kind, fixed, what = PRESETS[name]
        fixed_s = ", ".join(f"{k}={v!r}" for k, v in fixed.items())
        return f"Fit the preset {name}: {what} (a {kind} with {fixed_s}; saved as a {kind})."
    module = TRANSFORMS[name].partition(":")[0]
    source = Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source)) or name
    return f"Fit {name} on sentence vectors. {doc.splitlines()[0].rstrip('.')}."
