"""The command line's part of the token-weighted poolings (``sif``, ``idf``): fitting their token frequencies.

* ``isotropy fit token-frequencies CORPUS -o OUT [--model M]`` counts them on a sentence file
  with the model's tokenizer and saves the artefact (:class:`isotropy.encoders.token_stats.TokenFrequencies`);
* ``--pooling-stats FILE_OR_FOLDER`` on ``encode``, ``index build``, ``eval`` and ``export onnx``
  loads such a folder, or counts them on a sentence file there and then (:data:`.options.PoolingStats`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from .options import Device, Force, Model, Output, Progress, check_device

__all__ = ["register_pooling_commands", "fit_token_frequencies", "eval_encoder"]


def fit_token_frequencies(
    corpus: str | os.PathLike,
    output: str | os.PathLike,
    *,
    model: str | None = None,
    show_progress: bool | None = None,
    force: bool = False,
    device: str | None = "cpu",
):
    """Count the token frequencies of a sentence file with ``model``'s tokenizer and save them to ``output``."""
    from ..encoders.backends.torch import TorchBackend
    from ..encoders.token_stats import KIND, TokenFrequencies
    from ..storage.artifacts import check_output
    from ..storage.text import read_sentences

    check_output(output, KIND, force=force, inputs=[corpus, model])
    sentences = read_sentences(corpus)
    backend = TorchBackend(model, device=device or "cpu")  # only its tokenizer counts
    stats = TokenFrequencies.fit(
        backend.tokenizer, sentences, model_name=backend.model_name, source=Path(str(corpus)).name, show_progress=show_progress
    )
    stats.save(output, force=force)
    return stats


def eval_encoder(model: str | None, poolings: list[str] | None, max_length: int, batch_size: int, pooling_stats: Any):
    """The encoder ``isotropy eval`` hands to evaluate() when token frequencies are given (else None: its own)."""
    if pooling_stats is None:
        return None
    from ..encoders import Encoder

    pooling = poolings[0] if poolings else None
    return Encoder(model, pooling=pooling, max_length=max_length, batch_size=batch_size, pooling_stats=pooling_stats)


def register_pooling_commands(fit_app: typer.Typer) -> None:
    """Add ``fit token-frequencies`` to ``fit_app``."""

    @fit_app.command("token-frequencies")
    def fit_token_frequencies_cmd(
        corpus: Annotated[Path, typer.Argument(help="UTF-8 text file, one sentence a line, to count the tokens of.")],
        output: Output("Folder to write the token frequencies to (config.json + state.safetensors).") = ...,
        model: Model = None,
        device: Device = None,
        progress: Progress = None,
        force: Force = False,
    ) -> None:
        """Count token frequencies on a corpus for the sif and idf poolings (use them with --pooling-stats)."""
        stats = fit_token_frequencies(
            corpus, output, model=model, show_progress=progress, force=force, device=check_device(device)
        )
        typer.echo(f"wrote {stats.describe()} to {output}", err=True)
