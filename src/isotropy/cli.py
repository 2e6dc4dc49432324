"""The ``isotropy`` command line: a thin typer layer, every command is one call into the library.

Errors in the user's input (:class:`isotropy.IsotropyError`) print one line to
stderr and exit with status 2; Ctrl-C exits with 130 and leaves no half-written output.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(
    name="isotropy",
    help="Calibrate transformer sentence embeddings (BERT-whitening, BERT-flow), evaluate, analyse and search them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
fit_app = typer.Typer(help="Fit a calibration transform on sentence vectors.", no_args_is_help=True)
app.add_typer(fit_app, name="fit")

ModelOpt = typer.Option(None, "--model", "-m", help="Hugging Face model id or local folder (default: the embedded all-MiniLM-L6-v2).")
PoolingOpt = typer.Option(None, "--pooling", "-p", help="Pooling: cls, pooler, last-avg, first-last-avg, embed-last-avg, last2-avg, layers-avg:I,J,... (default: the model's own).")
MaxLenOpt = typer.Option(None, "--max-length", help="Tokens per sentence (default: the model's maximum; the papers use 64). Longer sentences are truncated.")
BatchOpt = typer.Option(64, "--batch-size", help="Sentences per forward pass.")


def _err(message: str) -> None:
    typer.echo(f"error: {message}", err=True)


@app.command()
def encode(
    input: str = typer.Argument(..., help="UTF-8 text file, one sentence a line, or '-' for standard input."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the vectors (.npy, float32, row i = line i)."),
    model: Optional[str] = ModelOpt,
    pooling: Optional[str] = PoolingOpt,
    max_length: Optional[int] = MaxLenOpt,
    batch_size: int = BatchOpt,
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Show a progress bar (default: only on a terminal)."),
) -> None:
    """Encode sentences into vectors. Empty lines are encoded too, so row numbers match line numbers."""
    from ._io import check_output_path, save_npy
    from .data import read_sentences
    from .encoding import Encoder

    check_output_path(output)
    sentences = read_sentences(input)
    enc = Encoder(model, pooling=pooling, max_length=max_length, batch_size=batch_size)
    vectors = enc.encode(sentences, show_progress=progress)
    save_npy(output, vectors)
    typer.echo(f"wrote {vectors.shape[0]} x {vectors.shape[1]} vectors ({enc.describe()}) to {output}", err=True)


@app.command()
def demo(
    output: Path = typer.Option(Path("demo-output"), "--output", "-o", help="Folder for the demo's artefacts."),
) -> None:
    """Run the main job on the embedded default model and a corpus generated on the spot."""
    from .demo import run_demo

    run_demo(output)


@fit_app.command("whitening")
def fit_whitening(
    vectors: Path = typer.Argument(..., help="Vectors to fit on: a .npy file (rows x dims) or a folder of .npy shards, streamed one chunk at a time."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder to write the fitted whitening to (config.json + state.safetensors)."),
    n_components: Optional[int] = typer.Option(None, "--n-components", "-k", help="Keep the k largest-variance directions (default: all)."),
    power: float = typer.Option(1.0, "--power", help="Soft whitening: 1 full whitening, 0 pure rotation (PCA without scaling), between interpolates."),
    shrinkage: str = typer.Option("0", "--shrinkage", help="Covariance shrinkage towards a scaled identity: a number in [0, 1], or 'auto' (Ledoit-Wolf). Needed with fewer rows than dimensions."),
    method: str = typer.Option("pca", "--method", help="pca (rotate to principal axes) or zca (rotate back to the original axes)."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Show a progress bar (default: only on a terminal)."),
) -> None:
    """Fit BERT-whitening (y = (x - mu) W) on sentence vectors."""
    from .whitening import fit_whitening_file

    w = fit_whitening_file(
        vectors, output, n_components=n_components, power=power, shrinkage=shrinkage, method=method, show_progress=progress
    )
    typer.echo(f"wrote {w.describe()} to {output}", err=True)


@app.command()
def transform(
    model_dir: Path = typer.Argument(..., help="Folder of a fitted transform (whitening or flow)."),
    vectors: Path = typer.Argument(..., help="Vectors to transform: a .npy file or a folder of .npy shards (streamed; rows keep their order)."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the transformed vectors (.npy, written atomically)."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Show a progress bar (default: only on a terminal)."),
) -> None:
    """Apply a fitted transform to vectors, streaming."""
    from .whitening import transform_file

    rows, dims = transform_file(model_dir, vectors, output, show_progress=progress)
    typer.echo(f"wrote {rows} x {dims} vectors to {output}", err=True)


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point of the ``isotropy`` command."""
    from ._io import IsotropyError

    try:
        app(args=argv, standalone_mode=True)
    except IsotropyError as exc:
        _err(str(exc))
        sys.exit(2)
    except KeyboardInterrupt:
        _err("interrupted; no partial output was written")
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
