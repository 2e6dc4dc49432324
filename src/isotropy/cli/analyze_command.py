"""``isotropy analyze``: diagnose anisotropy on a corpus, before and after calibration (the command line of :mod:`isotropy.analysis`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import (
    AllowOtherEncoder,
    BatchSize,
    Device,
    Force,
    MaxLength,
    Model,
    Output,
    Pooling,
    Progress,
    Transforms,
    check_device,
    choice,
    command,
)

__all__ = ["register_analyze_command"]


def analyze_cmd(
    # long: typer declares every option as a parameter
    corpus: Annotated[
        str, typer.Argument(help="UTF-8 text file, one sentence a line ('-' for standard input); blank lines are skipped.")
    ],
    output: Output("Report folder: report.json, report.md and PNG figures, written atomically.") = ...,
    model: Model = None,
    pooling: Pooling = None,
    max_length: MaxLength = None,
    batch_size: BatchSize = 64,
    device: Device = None,
    transform: Transforms("Folder of a fitted transform (whitening or flow) to show 'after'") = None,
    auto_whiten: Annotated[
        bool,
        typer.Option(
            "--auto-whiten/--no-auto-whiten",
            help="Without --transform, fit a whitening on the corpus itself to show 'after' (in-sample).",
        ),
    ] = True,
    word_level: Annotated[
        bool,
        typer.Option(
            "--word-level/--no-word-level",
            help="Also analyse the model's token-embedding matrix by frequency rank in the corpus (BERT-flow paper, Table 1).",
        ),
    ] = True,
    pairs: Annotated[int, typer.Option("--pairs", help="Random sentence (and token) pairs for the average cosine.")] = 10000,
    max_sentences: Annotated[
        int | None,
        typer.Option(
            "--max-sentences", help="Encode a seeded sample of this many lines (default: all); token counts use every line."
        ),
    ] = None,
    unseen_tokens: Annotated[
        choice("last", "drop"),
        typer.Option(
            "--unseen-tokens",
            help="Tokens absent from the corpus: last (ranked after the seen ones, in seeded random order) or drop.",
        ),
    ] = "last",
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="Seed of every random sample (pairs, projections, kNN queries).")
    ] = 0,
    recommend: Annotated[
        bool,
        typer.Option(
            "--recommend",
            help="Also compare --method auto's candidate calibrations on the corpus (about three more encodings).",
        ),
    ] = False,
    progress: Progress = None,
    force: Force = False,
    allow_other_encoder: AllowOtherEncoder = False,
) -> None:
    """Diagnose anisotropy: average cosine, isotropy scores, spectrum, figures; before and after calibration."""
    from rich.console import Console

    from ..analysis import analyze_file, rich_tables
    from ..encoders import default_device

    with default_device(check_device(device)):
        report = analyze_file(
            corpus,
            output,
            model=model,
            pooling=pooling,
            max_length=max_length,
            batch_size=batch_size,
            transforms=transform or (),
            auto_whiten=auto_whiten,
            word_level=word_level,
            n_pairs=pairs,
            max_sentences=max_sentences,
            unseen_tokens=unseen_tokens,
            seed=seed,
            recommend=recommend,
            show_progress=progress,
            force=force,
            allow_other_encoder=allow_other_encoder,
        )
    console = Console()
    for table in rich_tables(report):
        console.print(table)
    if report.get("recommendation"):
        typer.echo(report["recommendation"]["paragraph"].replace("**", "").replace("`", ""))
    typer.echo(f"wrote {Path(output) / 'report.md'} (+ report.json and {len(report['figures'])} figures)", err=True)


def register_analyze_command(app: typer.Typer) -> None:
    """Add ``analyze`` to ``app``."""
    command(app, analyze_cmd, "analyze")
