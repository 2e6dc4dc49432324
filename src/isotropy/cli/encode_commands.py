"""``isotropy encode``, ``transform``, ``demo`` and ``export onnx``: sentences to vectors, vectors to vectors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from ..errors import IsotropyError
from .options import (
    Address,
    AllowOtherEncoder,
    BatchSize,
    Device,
    Engine,
    Force,
    Inputs,
    MaxLength,
    Model,
    Output,
    Pooling,
    PoolingStats,
    Progress,
    Transform,
    check_device,
    choice,
    command,
)

__all__ = ["register_encode_commands", "register_export_commands"]


def encode(
    input: Annotated[str | None, typer.Argument(help="UTF-8 text file, one sentence a line, or '-' for standard input.")] = None,
    output: Output(
        "Where to write the vectors (.npy, float32, row i = line i); with --engine, a folder of one .npy per shard."
    ) = ...,
    model: Model = None,
    pooling: Pooling = None,
    max_length: MaxLength = None,
    batch_size: BatchSize = 64,
    device: Device = None,
    progress: Progress = None,
    engine: Engine = None,
    inputs: Inputs = None,
    address: Address = None,
    transform: Transform("A fitted transform folder to apply to the vectors (with --engine: to each shard's)") = None,
    pooling_stats: PoolingStats = None,
    force: Force = False,
    precision: Annotated[
        choice("fp32", "bf16"),
        typer.Option(
            "--precision",
            help="fp32, or bf16: ~2x faster on CPUs with AMX/avx512_bf16 (docs/BENCHMARKS.md).",
        ),
    ] = "fp32",
) -> None:
    """Encode sentences into vectors. Empty lines are encoded too, so row numbers match line numbers.

    With --engine dask --input 'shards/*.txt', shards are encoded on a cluster into OUT/<shard>.npy
    (resumable: a rerun skips shards whose output verifies)."""
    if engine is not None or inputs is not None:
        from ..distributed import EncoderSpec
        from ..distributed import encode as encode_shards
        from .engine import check_engine

        check_engine(engine, inputs, input)
        if precision != "fp32":
            raise IsotropyError(f"--precision {precision} is not available with --engine yet; drop one of them")
        if device is not None:
            raise IsotropyError(f"--device {device} applies without --engine (the cluster's workers pick their own)")
        spec = EncoderSpec(model=model, pooling=pooling, max_length=max_length, batch_size=batch_size)
        report = encode_shards(inputs, output, spec, transform=transform, address=address, show_progress=progress, force=force)
        typer.echo(f"wrote {report.describe()}", err=True)
        return
    if input is None:
        raise typer.BadParameter("give a text file (or '-'), or --engine with --input")
    if address is not None:
        raise IsotropyError(
            f"--address {address} applies only with --engine dask (a cluster to encode on); drop it or add --engine"
        )
    from ..encoders import default_device
    from ..files import encode_file

    started = time.perf_counter()
    with default_device(check_device(device)):
        (rows, dims), enc = encode_file(
            input,
            output,
            model=model,
            pooling=pooling,
            max_length=max_length,
            batch_size=batch_size,
            show_progress=progress,
            force=force,
            pooling_stats=pooling_stats,
            precision=precision,
            transform=transform,
        )
    after = f", then {transform}" if transform is not None else ""
    took = time.perf_counter() - started
    rate = f"{rows / took:,.0f} sentences/s, reading and loading included"
    typer.echo(f"wrote {rows} x {dims} vectors ({enc.describe()}{after}) to {output} in {took:.1f} s ({rate})", err=True)
    coverage = enc.coverage_total  # a static model's: sentences without a known word are zero vectors (#31, U41)
    note = coverage.warning("sentences") if coverage is not None else None
    if note:
        typer.echo(f"warning: {note}", err=True)


def demo(output: Output("Folder for the demo's artefacts.") = "demo-output", force: Force = False) -> None:
    """Run the main job on the embedded default model and a corpus generated on the spot."""
    from ..demo import run_demo

    run_demo(output, force=force)


def transform(
    model_dir: Annotated[Path, typer.Argument(help="Folder of a fitted transform (whitening, flow, ...).")],
    vectors: Annotated[
        Path,
        typer.Argument(help="Vectors to transform: a .npy file or a folder of .npy shards (streamed; rows keep their order)."),
    ],
    output: Output("Where to write the transformed vectors (.npy, written atomically).") = ...,
    progress: Progress = None,
    force: Force = False,
    allow_other_encoder: AllowOtherEncoder = False,
) -> None:
    """Apply a fitted transform to vectors, streaming."""
    from ..files import transform_file

    rows, dims = transform_file(
        model_dir, vectors, output, show_progress=progress, force=force, allow_other_encoder=allow_other_encoder
    )
    typer.echo(f"wrote {rows} x {dims} vectors to {output}", err=True)


def export_onnx_cmd(
    output: Output(
        "Folder to write: model.onnx (token ids -> calibrated vectors, dynamic batch and sequence axes), isotropy_onnx.json "
        "and the tokenizer files. Run it with Encoder(model=FOLDER, backend='onnx')."
    ) = ...,
    model: Model = None,
    pooling: Pooling = None,
    max_length: MaxLength = None,
    transform: Transform(
        "Folder of a fitted transform (whitening or flow) to bake into the graph; its input dimension must match the encoder's"
    ) = None,
    quantize: Annotated[
        choice("int8") | None,
        typer.Option(
            "--quantize",
            help="int8: onnxruntime dynamic quantization of the encoder's weights (faster on CPU, slightly less exact).",
        ),
    ] = None,
    progress: Progress = None,
    pooling_stats: PoolingStats = None,
    force: Force = False,
) -> None:
    """Export encoder + pooling (+ transform) as one ONNX graph, with its tokenizer beside it (exported on the CPU)."""
    from ..integrations import export_onnx

    out = export_onnx(
        output,
        model=model,
        pooling=pooling,
        max_length=max_length,
        transform=transform,
        quantize=quantize,
        show_progress=progress,
        force=force,
        pooling_stats=pooling_stats,
    )
    typer.echo(f"wrote {out}/model.onnx (+ tokenizer, isotropy_onnx.json)", err=True)


def register_encode_commands(app: typer.Typer) -> None:
    """Add ``encode`` and ``transform`` to ``app``."""
    command(app, encode)
    command(app, transform)


def register_demo_command(app: typer.Typer) -> None:
    command(app, demo)


def register_export_commands(export_app: typer.Typer) -> None:
    """Add ``export onnx``."""
    command(export_app, export_onnx_cmd, "onnx")
