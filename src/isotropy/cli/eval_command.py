"""``isotropy eval``: Spearman x 100 on STS tasks for every pooling x calibration, or search quality (``--retrieval``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import retrieval_command as rcli
from .options import (
    BatchSize,
    CacheDir,
    Device,
    Force,
    MaxLength,
    Model,
    Output,
    Poolings,
    PoolingStats,
    Progress,
    Shrinkage,
    canonical_method,
    check_device,
    choice,
    command,
    deprecated,
    hidden,
)
from .pooling_commands import eval_encoder

__all__ = ["register_eval_command"]

Data = Annotated[
    Path | None,
    typer.Option(
        "--data",
        "-d",
        help="Data folder (STS layouts: STSBenchmark/, SICK/, STS12/..STS16/, or train/dev/test.tsv pair files) or one pair "
        "file (.tsv/.csv/.jsonl with sentence1, sentence2, score|label). Without it, tasks are loaded from the Hugging Face hub.",
    ),
]
Tasks = Annotated[
    list[str] | None,
    typer.Option(
        "--task",
        help="Task to evaluate, repeatable: STS-B, SICK-R, STS-12..STS-16, a pair file's name, a hub dataset id, or 'all' "
        "(default: all in --data).",
    ),
]
Methods = Annotated[
    list[str] | None,
    typer.Option(
        "--method",
        help="Calibration, repeatable: raw, whitening, whitening-K, soft-BETA (power BETA in [0, 1], e.g. soft-0.5), flow, "
        "center, abtt, abtt-K, common-component, soft-0.25, soft-0.5, soft-0.75 (every transform of 'isotropy fit'), auto "
        "(chosen label-free on each fit corpus; the evidence goes into --output's JSON; docs/AUTO.md). Default: raw and whitening.",
    ),
]
FitOn = Annotated[
    str,
    typer.Option(
        "--fit-on",
        help="'target' (every pair of the task, as the papers do), 'train' (the task's train split), 'others' (the other "
        "tasks' sentences, never the test task's; overlapping sentences removed and counted), or a text file of sentences "
        "(one a line) to fit on instead.",
    ),
]
Aggregate = Annotated[
    choice("all", "mean", "wmean"),
    typer.Option(
        "--aggregate",
        help="STS-12..16, tasks of several datasets: all (one correlation over the pooled pairs; SBERT, SimCSE), mean or "
        "wmean (plain or pair-weighted mean of the subset correlations; wmean is BERT-flow's and BERT-whitening's setting).",
    ),
]


def eval_(
    # long: typer declares every option as a parameter; the STS table and --retrieval share them
    data: Data = None,
    task: Tasks = None,
    model: Model = None,
    pooling: Poolings = None,
    method: Methods = None,
    fit_on: FitOn = "target",
    aggregate: Aggregate = "all",
    max_length: MaxLength = None,
    batch_size: BatchSize = 64,
    device: Device = None,
    shrinkage: Shrinkage = "0",
    output: Output("Write the results as JSON here, and the markdown table beside it (.md).", str | None) = None,
    no_cache: Annotated[
        bool,
        typer.Option("--no-cache", help="Encode everything afresh and store nothing (a word-vector file is parsed in memory)."),
    ] = False,
    cache_dir: CacheDir = None,
    keep_going: Annotated[
        bool,
        typer.Option(
            "--keep-going", help="A transform that cannot be fitted leaves its cells empty instead of stopping the run."
        ),
    ] = False,
    progress: Progress = None,
    pooling_stats: PoolingStats = None,
    force: Force = False,
    retrieval: rcli.Retrieval = None,
    kind: rcli.Kinds = None,
    old_out: Annotated[str | None, hidden("--out")] = None,
    old_task: Annotated[list[str] | None, hidden("-t")] = None,
) -> None:
    """Spearman x 100 on STS tasks for every pooling x calibration (the papers' table layout), or search quality (--retrieval)."""
    from ..encoders import default_device
    from ..encoders.static import parse_cache

    output = deprecated("eval", "--out", old_out, output)
    task = deprecated("eval", "-t", old_task, task)
    method = [canonical_method(m) for m in method or ()]
    opts = dict(locals())
    parse = False if no_cache else (cache_dir or True)  # word-vector files' parse cache follows the vector cache's options
    with default_device(check_device(device)), parse_cache(parse):
        if retrieval is not None or kind:  # search quality: its own harness (isotropy.retrieval)
            return rcli.eval_retrieval(retrieval, opts)
        _eval_sts(opts)


def _eval_sts(o: dict) -> None:
    from rich.console import Console

    from ..evaluation import check_results_output, evaluate

    out, force = o["output"], o["force"]
    if out is not None:
        check_results_output(out, force=force, inputs=[o["data"], o["model"], o["pooling_stats"], o["fit_on"]])
    results = evaluate(
        o["task"] or None,
        data=o["data"],
        model=o["model"],
        poolings=o["pooling"] or None,
        methods=o["method"] or ("raw", "whitening"),
        fit_on=o["fit_on"],
        aggregate=o["aggregate"],
        max_length=o["max_length"],
        batch_size=o["batch_size"],
        shrinkage=o["shrinkage"],
        cache=False if o["no_cache"] else (o["cache_dir"] if o["cache_dir"] is not None else True),
        show_progress=o["progress"],
        errors="record" if o["keep_going"] else "raise",
        encoder=eval_encoder(o["model"], o["pooling"], o["max_length"], o["batch_size"], o["pooling_stats"]),
    )
    Console().print(results.rich_table())
    if out is not None:
        json_path, md_path = results.save(out, force=force)
        typer.echo(f"wrote {json_path} and {md_path}", err=True)


def register_eval_command(app: typer.Typer) -> None:
    """Add ``eval`` to ``app``."""
    command(app, eval_, "eval")
