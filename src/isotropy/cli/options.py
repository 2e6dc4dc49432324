"""Options shared by several commands, and the global ones (``isotropy --no-verify COMMAND``)."""

from __future__ import annotations

import typer

AllowOtherOpt = typer.Option(
    False,
    "--allow-other-encoder",
    help="Apply a transform to vectors (or an encoder) other than the model, pooling, max length or width it was fitted on.",
)


def register_global_options(app: typer.Typer) -> None:
    """The options given before the command name."""

    @app.callback()
    def _options(
        ctx: typer.Context,
        no_verify: bool = typer.Option(
            False,
            "--no-verify",
            help="Read artefacts (transforms, indexes, exports, vector sidecars) without checking the sha256 of "
            "their files; for salvaging a damaged one. Also $ISOTROPY_NO_VERIFY=1.",
        ),
    ) -> None:
        """Calibrate transformer sentence embeddings (BERT-whitening, BERT-flow), evaluate, analyse and search them."""
        from ..storage.integrity import set_default_verification

        set_default_verification(not no_verify)
        # for this command only: main() may run again in the same process
        ctx.call_on_close(lambda: set_default_verification(True))
