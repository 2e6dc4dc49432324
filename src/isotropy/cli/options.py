"""The command line's one language: every shared option defined once, the deprecated spellings, the global options.

A command declares ``model: Model = None`` instead of restating ``--model/-m`` and its help, so
a flag means the same thing in every command (``docs/CLI.md`` is generated from these and a
test walks the command tree for a short flag with two meanings). Options whose help names what
the command writes take it as an argument (:func:`Output`, :func:`Transform`).

Old spellings still work for one release, hidden from ``--help``, with a deprecation note on
stderr (:data:`DEPRECATED`, :func:`deprecated`, :func:`canonical_method`).
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = [
    "AllowOtherEncoder",
    "Address",
    "BatchSize",
    "CalibratePooling",
    "CacheDir",
    "Candidates",
    "DEPRECATED",
    "Device",
    "Engine",
    "Force",
    "Inputs",
    "MaxLength",
    "Model",
    "NComponents",
    "Output",
    "Pooling",
    "PoolingStats",
    "Poolings",
    "Power",
    "Progress",
    "Shrinkage",
    "Transform",
    "Transforms",
    "canonical_method",
    "choice",
    "command",
    "deprecated",
    "register_global_options",
]

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}  # inherited by every subcommand's context


@functools.cache
def choice(*names: str) -> type[enum.StrEnum]:
    """A fixed set of values as a type: typer lists it in ``--help`` as ``[a|b|c]`` and click checks it (exit 2,
    one line). Its members are ``str`` (a StrEnum), so the library receives the plain names."""
    return enum.StrEnum("Choice_" + "_".join(re.sub(r"\W", "_", n) for n in names), {n: n for n in names})


Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Hugging Face model id, local folder or static model (default: the embedded all-MiniLM-L6-v2).",
    ),
]
_POOLING_HELP = (
    "Pooling: cls, pooler, last-avg, first-last-avg, embed-last-avg, last2-avg, layers-avg:I,J,..., sif[:a=A], idf "
    "(these two need --pooling-stats), prompt[:TEMPLATE], prompt-denoised[:TEMPLATE], ditto[:layer=L,head=H]"
)
Pooling = Annotated[str | None, typer.Option("--pooling", "-p", help=f"{_POOLING_HELP} (default: the model's own).")]
CalibratePooling = Annotated[
    str | None,
    typer.Option(
        "--pooling",
        "-p",
        help=f"{_POOLING_HELP}, or auto (with --method auto only: the pooling rule's pooling; with --dev, the best by the "
        "dev labels of the poolings offered for the model's kind, mean or sif on a static table, the model's own or "
        "first-last-avg on a transformer, under the same do-no-harm rule: docs/AUTO.md) (default: the model's own).",
    ),
]
Poolings = Annotated[
    list[str] | None,
    typer.Option("--pooling", "-p", help=f"{_POOLING_HELP}; repeatable, to compare (default: the model's own)."),
]
MaxLength = Annotated[
    int | None,
    typer.Option(
        "--max-length",
        help="Tokens per sentence; longer sentences are truncated (default: the model's own maximum; "
        "the papers use 64: pass --max-length 64 to reproduce their tables).",
    ),
]
BatchSize = Annotated[int, typer.Option("--batch-size", help="Sentences per forward pass.")]
Progress = Annotated[
    bool | None, typer.Option("--progress/--no-progress", help="Show progress bars (default: only on a terminal).")
]
Force = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Replace an existing output even when it is not an isotropy output of the same kind (never an input).",
    ),
]
Device = Annotated[
    str | None,
    typer.Option(
        "--device",
        help="Where the model runs: cpu, cuda, cuda:N or mps (default: cuda when available, else cpu).",
    ),
]
Rerank = Annotated[
    int | None,
    typer.Option(
        "--rerank",
        help="ivfpq/opq built with --keep-vectors: re-score this many candidates with the exact vectors (0: off; "
        "default: the index's).",
    ),
]
NComponents = Annotated[
    int | None,
    typer.Option(
        "--n-components",
        "-k",
        help="Components kept (whitening: the k largest-variance directions) or removed (abtt, common-component).",
    ),
]
Power = Annotated[float | None, typer.Option("--power", help="Whitening's power: 1 full, 0.5 soft, 0 rotation only (PCA).")]
Shrinkage = Annotated[
    str | None,
    typer.Option(
        "--shrinkage",
        help="Whitening's covariance shrinkage towards a scaled identity: a number in [0, 1] or auto (Ledoit-Wolf); "
        "0 is the papers' exact whitening. Needed with fewer sentences than dimensions.",
    ),
]
Candidates = Annotated[
    str | None,
    typer.Option(
        "--candidates",
        help="--method auto: the candidates to compare, comma-separated (raw,center,abtt-4,soft-0.5,whitening-192,"
        "whitening-shrunk,...); default: the standard set.",
    ),
]


def ForTask(default: str) -> Any:
    """``--for``: which use ``--method auto``'s label-free rule was tuned for (docs/AUTO.md)."""
    return Annotated[
        choice("similarity", "search") | None,
        typer.Option(
            "--for",
            help=f"--method auto: the use the label-free rule is tuned for (default {default}): similarity (STS-B "
            "train split) or search (a seeded half of Cranfield's queries); docs/AUTO.md measures both on held-out data.",
        ),
    ]


Evidence = Annotated[
    bool,
    typer.Option(
        "--evidence",
        help="--method auto: also compute the label-free criteria of every candidate (encodes word-deleted copies of "
        "a sample: slow); shown as evidence, they never decide.",
    ),
]
Engine = Annotated[
    choice("dask") | None,
    typer.Option(
        "--engine",
        help="Run on a cluster engine (pip install 'isotropy\\[distributed]'); see docs/DISTRIBUTED.md.",
    ),
]
Inputs = Annotated[
    str | None,
    typer.Option(
        "--input",
        help="With --engine: the shards, a glob such as 'shards/*.txt' (one sentence a line) or, for fit, 'vecs/*.npy'.",
    ),
]
Address = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="With --engine: the scheduler of an existing cluster (tcp://host:8786); default: a local cluster, one worker per core.",
    ),
]
CacheDir = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help="Vector cache folder (default: $ISOTROPY_CACHE or ~/.cache/isotropy); a word-vector file's parse cache goes to its static/.",
    ),
]
AllowOtherEncoder = Annotated[
    bool,
    typer.Option(
        "--allow-other-encoder",
        help="Apply a transform to vectors (or an encoder) other than the model, pooling, max length or width it was fitted on.",
    ),
]
PoolingStats = Annotated[
    str | None,
    typer.Option(
        "--pooling-stats",
        help="Token frequencies for the sif and idf poolings: a folder written by 'isotropy fit token-frequencies', "
        "or a text file of sentences (one a line) to count them on now with the model's tokenizer.",
    ),
]


def Output(help: str, kind: type = str) -> Any:  # noqa: N802 - a type alias maker, spelled like one
    """``-o/--output``, the one spelling of every command's output; ``help`` says what is written."""
    return Annotated[kind, typer.Option("--output", "-o", help=help)]


def Transform(help: str) -> Any:  # noqa: N802
    """``-t/--transform``: a fitted transform folder (whitening, flow, ...)."""
    return Annotated[Path | None, typer.Option("--transform", "-t", help=help)]


def Transforms(help: str) -> Any:  # noqa: N802
    """``-t/--transform``, repeatable."""
    return Annotated[list[Path] | None, typer.Option("--transform", "-t", help=f"{help}; repeatable.")]


def command(group: typer.Typer, fn: Callable[..., Any], name: str | None = None) -> None:
    """Register ``fn`` as ``group``'s command ``name``; the values of :func:`choice` options reach it as plain ``str``."""

    @functools.wraps(fn)  # typer reads the signature and annotations through __wrapped__
    def plain(*args: Any, **kwargs: Any) -> Any:
        def unwrap(v: Any) -> Any:
            if isinstance(v, enum.Enum):
                return v.value
            return [unwrap(x) for x in v] if isinstance(v, list) else v

        return fn(*(unwrap(a) for a in args), **{k: unwrap(v) for k, v in kwargs.items()})

    group.command(name)(plain)


# ----------------------------------------------------------------------------- deprecated spellings

# (command path, old spelling) -> the spelling that replaces it; hidden from --help, listed in docs/CLI.md
DEPRECATED: dict[tuple[str, str], str] = {
    ("eval", "--out"): "--output",
    ("eval", "-t"): "--task",
    ("search", "-k"): "--top-k (-n)",
}


def hidden(*decls: str) -> Any:
    """A hidden option for a deprecated spelling (its value goes through :func:`deprecated`)."""
    return typer.Option(*decls, hidden=True)


def deprecated(command: str, old: str, value: Any, current: Any) -> Any:
    """``current``, or ``value`` given under the deprecated spelling ``old`` (with a note on stderr)."""
    if value is None or value == []:
        return current
    new = DEPRECATED[(command, old)]
    typer.echo(f"note: '{command} {old}' is deprecated and will be removed; say {new}", err=True)
    if current not in (None, []):
        raise typer.BadParameter(f"give {new} once: {old} is its deprecated spelling", param_hint=f"'{old}'")
    return value


def canonical_method(name: str) -> str:
    """A method's one spelling (the Python name): ``soft-whitening-0.5`` becomes ``soft-0.5``, with a note (the
    grammar's rule, :func:`isotropy.transforms.methods.modern_spelling`); a name the grammar does not know is left
    for the command to refuse."""
    from ..errors import IsotropyError
    from ..transforms.methods import modern_spelling, parse_method

    try:
        new, note = modern_spelling(parse_method(name))
    except IsotropyError:
        return name
    if note is None:
        return name
    typer.echo(f"note: {note}", err=True)
    return new.name


_DEVICE = re.compile(r"cpu|mps|cuda(:\d+)?")


def check_device(device: str | None) -> str | None:
    """``--device`` checked before any model loads (one line, exit 2, for a name torch would not take)."""
    if device is None:
        return None
    if not _DEVICE.fullmatch(device):
        raise typer.BadParameter(f"{device!r} is not a device: cpu, cuda, cuda:N or mps", param_hint="'--device'")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise typer.BadParameter(f"{device}: no CUDA device is available here; use cpu", param_hint="'--device'")
    return device


# ----------------------------------------------------------------------------- global options


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"isotropy {__version__}")
        raise typer.Exit()


def register_global_options(app: typer.Typer) -> None:
    """The options given before the command name (``isotropy --no-verify COMMAND``, ``--version``)."""

    @app.callback()
    def _options(
        ctx: typer.Context,
        no_verify: bool = typer.Option(
            False,
            "--no-verify",
            help="Read artefacts (transforms, indexes, exports, vector sidecars) without checking the sha256 of "
            "their files; for salvaging a damaged one. Also $ISOTROPY_NO_VERIFY=1.",
        ),
        version: bool = typer.Option(False, "--version", is_eager=True, callback=_version, help="Print the version and exit."),
    ) -> None:
        """Calibrate transformer sentence embeddings (BERT-whitening, BERT-flow), evaluate, analyse and search them."""
        from .._spelling import command_line_spelling
        from ..storage.integrity import set_default_verification

        set_default_verification(not no_verify)
        ctx.with_resource(command_line_spelling())  # messages name options as --shrinkage auto, not shrinkage='auto'
        # for this command only: main() may run again in the same process
        ctx.call_on_close(lambda: set_default_verification(True))
