"""``isotropy calibrate``: a corpus in, a calibrated sentence-transformers model folder out (the command line)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .options import (
    Address,
    BatchSize,
    CalibratePooling,
    Candidates,
    Device,
    Evidence,
    Force,
    ForTask,
    MaxLength,
    Model,
    NComponents,
    Output,
    PoolingStats,
    Power,
    Progress,
    Shrinkage,
    check_device,
    choice,
    command,
)

__all__ = ["register_calibrate_command"]

CorpusArg = typer.Argument(
    ...,
    help="UTF-8 text, one sentence a line (blank lines are skipped): a file, a glob of shards ('shards/*.txt', quoted), or '-' for standard input. Streamed: memory does not grow with its length.",
)
MethodOpt = typer.Option(
    "whitening",
    "--method",
    help="The calibration: whitening, center, abtt, common-component, a preset (soft-0.5, ...), flow (which needs isotropy to load), or auto (compare candidates on the corpus and keep the base model unless one is better: docs/AUTO.md). Affine methods give a folder of stock sentence-transformers modules. A static --model also takes token-level methods, fitted on its table rather than on sentence vectors: token-whitening (every token once), zipfian-whitening (tokens weighted by their counts in CORPUS), zipfian-whitening-rank (by Zipf's law over the table's frequency order).",
)
DevOpt = typer.Option(
    None,
    "--dev",
    help="--method auto: labels to choose by, under the do-no-harm rule (the label-free choice for the encoder's kind, whitening-shrunk on a static table and raw on a transformer, unless another candidate beats it in 90 percent of bootstrap resamples): scored pairs (at least 20; a pairs file as 'isotropy eval --data' takes), or a retrieval folder (what 'isotropy eval --retrieval' takes: BEIR, plain or Cranfield; at least 10 queries with a relevant document), where each candidate calibrates the queries and documents and is scored by the nDCG@10 of an exact search, resampling the queries.",
)
OnnxOpt = typer.Option(
    False,
    "--onnx",
    help="Also write onnx/model.onnx (sentence-transformers' ONNX backend) and isotropy-onnx/ (pooling and calibration in one graph); needs pip install 'isotropy\\[onnx]'.",
)
QuantizeOpt = typer.Option(
    None,
    "--quantize",
    help="int8: also the int8 graphs (onnxruntime dynamic quantization); implies --onnx.",
)
EvalOpt = typer.Option(
    None,
    "--eval",
    help="Score the base and the calibrated model on these pairs (what 'isotropy eval --data' takes) and write both into the model card.",
)
MinGainOpt = typer.Option(
    None,
    "--min-gain",
    help="With --eval: write the model only if it gains at least this many points (Spearman x 100, mean over the tasks) over the base model; else exit 3, nothing written.",
)
StockOnlyOpt = typer.Option(
    False,
    "--stock-only",
    help="Refuse a method or pooling that needs isotropy's own modules: the folder must load without isotropy or trust_remote_code.",
)


def _report(output: str, info: dict[str, Any]) -> None:
    if info.get("selection"):
        from ..selection import Selection

        typer.echo(Selection.from_dict(info["selection"]).table(), err=True)
    for note in info["warnings"]:
        typer.echo(f"warning: {note}", err=True)
    fit = info["fit"]
    how = "fitted" if info["kind"] != "raw" else "(the base model's vectors as they are; signals read)"
    if (info.get("selection") or {}).get("settings", {}).get("candidates_compared") is False:  # U34
        how += " (by the encoder's kind; the --candidates list was not compared: see the note)"
    typer.echo(
        f"wrote {output} ({' -> '.join(info['modules'])}): {info['method']} {how} on {fit['n_fit']:,} sentences "
        f"of {info['corpus']}, {info['dim_in']} -> {info['dim_out']} dims",
        err=True,
    )
    for name, row in (info.get("eval") or {}).get("tasks", {}).items():
        typer.echo(f"{name}: {row['base']:.2f} base model -> {row['calibrated']:.2f} calibrated", err=True)
    if info.get("static"):  # a model2vec folder; sentence-transformers loads the subfolder written beside it
        from pathlib import Path

        from ..calibration.static_export import ST_SUBFOLDER

        load = f'StaticModel.from_pretrained("{output}") or SentenceTransformer("{Path(output) / ST_SUBFOLDER}")'
    else:
        load = f'SentenceTransformer("{output}"{"" if info["stock"] else ", trust_remote_code=True"})'
    typer.echo(f"use it: {load}  (README.md in the folder says more)", err=True)


def register_calibrate_command(app: typer.Typer) -> None:
    """Add ``calibrate`` to ``app``."""

    def calibrate_cmd(
        corpus: str = CorpusArg,
        output: Output(
            "The model folder to write (sentence-transformers layout, README.md model card); an existing folder is "
            "replaced only when isotropy wrote it."
        ) = ...,
        model: Model = None,
        pooling: CalibratePooling = None,
        method: str = MethodOpt,
        n_components: NComponents = None,
        power: Power = None,
        shrinkage: Shrinkage = None,
        max_length: MaxLength = None,
        batch_size: BatchSize = 64,
        device: Device = None,
        onnx: bool = OnnxOpt,
        quantize: choice("int8") | None = QuantizeOpt,
        eval_data: str | None = EvalOpt,
        min_gain: float | None = MinGainOpt,
        pooling_stats: PoolingStats = None,
        stock_only: bool = StockOnlyOpt,
        candidates: Candidates = None,
        dev: str | None = DevOpt,
        task: ForTask("similarity") = None,
        evidence: Evidence = False,
        engine: Annotated[
            choice("dask") | None,
            typer.Option(
                "--engine",
                help="dask: encode the shards and compute the statistics on a cluster (affine methods); "
                "pip install 'isotropy\\[distributed]'.",
            ),
        ] = None,
        address: Address = None,
        progress: Progress = None,
        force: Force = False,
    ) -> None:
        """Fit a calibration on a corpus and write a calibrated model that sentence-transformers, MTEB, faiss and inference servers load."""
        options = dict(locals())  # every option above, by its name in CalibrationRequest.from_options
        corpus, output, progress = options.pop("corpus"), options.pop("output"), options.pop("progress")
        options["device"] = check_device(device)
        from ..calibration import run_calibration
        from ..calibration.request import CalibrationRequest

        request = CalibrationRequest.from_options(**options)  # the one door: --method is read there and only there
        for note in request.notes:
            typer.echo(f"note: {note}", err=True)
        _report(output, run_calibration(corpus, output, request, progress).info)

    command(app, calibrate_cmd, "calibrate")
