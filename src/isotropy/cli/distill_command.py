"""``isotropy distill``: a static model2vec folder from a transformer (the command line; the work is
:func:`isotropy.calibration.distill.distill`)."""

from __future__ import annotations

import typer

__all__ = ["register_distill_command"]


def register_distill_command(app: typer.Typer) -> None:
    @app.command()
    def distill(
        output: str = typer.Option(
            ..., "--output", "-o", help="The model2vec folder to write (replaced only when isotropy wrote it)."
        ),
        model: str | None = typer.Option(
            None,
            "--model",
            "-m",
            help="The transformer to distill: a folder or a cached Hugging Face id (default: the embedded all-MiniLM-L6-v2).",
        ),
        dims: int = typer.Option(
            256, "--dims", help="PCA to this many dimensions (model2vec's default 256); 0 keeps the model's width."
        ),
        corpus: str | None = typer.Option(
            None,
            "--corpus",
            help="UTF-8 text, one sentence a line: fit the least-squares map from the static vectors to the teacher's on it, folded into the table.",
        ),
        alpha: float = typer.Option(0.0, "--alpha", help="With --corpus: ridge penalty of the teacher map (0: least squares)."),
        progress: bool | None = typer.Option(
            None, "--progress/--no-progress", help="Show progress (default: only on a terminal)."
        ),
        force: bool = typer.Option(False, "--force", help="Replace an output that isotropy did not write."),
    ) -> None:
        """Distill a static model (a token table averaged per sentence; model2vec) from a transformer."""
        from ..calibration.distill import distill as run

        out = run(output, model, dims=dims, corpus=corpus, alpha=alpha, force=force, show_progress=progress)
        typer.echo(f"wrote the static model {out} (model2vec folder{', teacher map folded in' if corpus else ''})", err=True)
