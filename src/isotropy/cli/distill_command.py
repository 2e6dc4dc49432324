"""``isotropy distill``: a static model2vec folder from a transformer (the command line; the work is
:func:`isotropy.calibration.distill.distill`)."""

from __future__ import annotations

from typing import Annotated

import typer

from .options import Device, Force, Model, Output, Progress, check_device, command

__all__ = ["register_distill_command"]


def register_distill_command(app: typer.Typer) -> None:
    def distill(
        output: Output("The model2vec folder to write (replaced only when isotropy wrote it).") = ...,
        model: Model = None,
        dims: Annotated[
            int, typer.Option("--dims", help="PCA to this many dimensions (model2vec's default 256); 0 keeps the model's width.")
        ] = 256,
        corpus: Annotated[
            str | None,
            typer.Option(
                "--corpus",
                help="UTF-8 text, one sentence a line: fit the least-squares map from the static vectors to the "
                "teacher's on it, folded into the table.",
            ),
        ] = None,
        alpha: Annotated[
            float, typer.Option("--alpha", help="With --corpus: ridge penalty of the teacher map (0: least squares).")
        ] = 0.0,
        device: Device = None,
        progress: Progress = None,
        force: Force = False,
    ) -> None:
        """Distill a static model (a token table averaged per sentence; model2vec) from a transformer."""
        from ..calibration.distill import distill as run
        from ..encoders import default_device

        with default_device(check_device(device)):
            out = run(output, model, dims=dims, corpus=corpus, alpha=alpha, force=force, show_progress=progress)
        typer.echo(f"wrote the static model {out} (model2vec folder{', teacher map folded in' if corpus else ''})", err=True)

    command(app, distill, "distill")
