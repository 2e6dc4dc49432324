"""``isotropy distill``: a static model2vec folder from a transformer (the command line; the work is
:func:`isotropy.distill.distill`)."""

from __future__ import annotations

from typing import Annotated

import typer

from .options import Address, Device, Engine, Force, Model, Output, Progress, check_device, choice, command

__all__ = ["register_distill_command"]

Spans = Annotated[
    str | None,
    typer.Option(
        "--spans",
        help="With --fit tokens: more equations from the same corpus, each with the teacher's own vector, for every "
        "sentence of 8 words or more: halves (its two halves), drop (a copy with a quarter of its words left out at "
        "random), cut (a copy with a run of a quarter of its words cut out); comma-separated, or none. Default: "
        "halves,drop,cut (the teacher then encodes about 3.5 times the corpus's text).",
    ),
]
StrengthBy = Annotated[
    choice("cosine", "mse") | None,
    typer.Option(
        "--strength-by",
        help="With --fit tokens and no --lam: choose the strength on held-out corpus lines by the agreement of "
        "the student's pairwise cosines with the teacher's (default) or by their squared error.",
    ),
]

TargetWhitening = Annotated[
    float | None,
    typer.Option(
        "--target-whitening",
        metavar="POWER",
        help="With --corpus: soft-whiten the teacher's vectors before the fit, power in [0, 1] (0 off, 1 full "
        "whitening; the targets' eigenvalue spread shrunk to its 1 - POWER power, their total variance kept), so the "
        "fit spreads the table over more of the teacher's directions. Default: 0.5 with --fit tokens (chosen on the STS-B "
        "train split; docs/RESULTS.md factory-curve), 0 with --fit map. A rerun with another power encodes nothing.",
    ),
]

TeacherCache = Annotated[
    str | None,  # not Path: typer would turn an empty value into "." (the working folder)
    typer.Option(
        "--teacher-cache",
        metavar="DIR",
        help="With --corpus: the folder that keeps the teacher's vectors of the corpus, chunk by chunk, so a rerun with "
        "other --dims, --lam, --fit, --alpha or --strength-by encodes nothing again (other --spans: only the spans) and a "
        "killed run resumes where it stopped; it also keeps model2vec's distilled table of the teacher (tables/), so such a "
        "rerun skips the vocabulary pass too, and the corpus pass's sums (sums/), so a rerun with other --dims, --lam, "
        "--alpha, --strength-by or --target-whitening reads no chunk either. "
        "Default: $ISOTROPY_CACHE/teacher (~/.cache/isotropy/teacher).",
    ),
]
TeacherOnnx = Annotated[
    str | None,
    typer.Option(
        "--teacher-onnx",
        metavar="DIR",
        help="With --corpus: encode the corpus with this folder from `isotropy export onnx` of the same model (its "
        "own pooling, no --method) instead of the model itself; with --quantize int8 about twice as fast on a CPU "
        "(RESULTS factory-curve shows its effect on the score). Refused when it is not an export of the model.",
    ),
]
Words = Annotated[
    int,
    typer.Option(
        "--words",
        metavar="N",
        help="With --corpus (a file): give the N most frequent corpus words that the model's tokenizer splits into "
        "two or more tokens a token of their own, its row the teacher's vector of the word (model2vec's vocabulary), "
        "then fitted like any other token. Default 0: none.",
    ),
]
NoTeacherCache = Annotated[
    bool,
    typer.Option("--no-teacher-cache", help="With --corpus: encode the corpus afresh and keep nothing on disk."),
]


def _teacher_cache(folder: str | None, off: bool):
    """What ``distill(teacher_cache=)`` takes: False (off), True (the default folder) or the folder given."""
    if off and folder is not None:
        from ..errors import IsotropyError

        raise IsotropyError("--teacher-cache and --no-teacher-cache contradict each other: give one of them")
    return False if off else (True if folder is None else folder)


def _what(corpus: str | None, fit: str | None) -> str:
    """What the closing line says was done to the table."""
    if corpus is None:
        return ""
    return ", token rows fitted on the corpus" if fit in (None, "tokens") else ", teacher map folded in"


def register_distill_command(app: typer.Typer) -> None:
    def distill(
        output: Output("The model2vec folder to write (replaced only when isotropy wrote it).") = ...,
        model: Model = None,
        dims: Annotated[
            int,
            typer.Option(
                "--dims",
                help="Width of the model written (model2vec's PCA, and with --corpus the teacher's vectors on their "
                "principal axes); 0 keeps the model's width.",
            ),
        ] = 256,
        corpus: Annotated[
            str | None,
            typer.Option(
                "--corpus",
                help="UTF-8 text, one sentence a line: fit the table to the teacher's vectors of these sentences (see --fit).",
            ),
        ] = None,
        fit: Annotated[
            str | None,
            typer.Option(
                "--fit",
                help="With --corpus: tokens (default) fits every token's row so sentence means match the teacher, "
                "regularised toward the mapped table; map folds only the sentence-level least-squares map.",
            ),
        ] = None,
        spans: Spans = None,
        strength_by: StrengthBy = None,
        target_whitening: TargetWhitening = None,
        lam: Annotated[
            float | None,
            typer.Option(
                "--lam",
                help="With --fit tokens: the regularisation strength (default: chosen on held-out corpus sentences).",
            ),
        ] = None,
        alpha: Annotated[
            float | None,
            typer.Option("--alpha", help="With --corpus: ridge penalty of the teacher map (default 0: least squares)."),
        ] = None,
        teacher_cache: TeacherCache = None,
        no_teacher_cache: NoTeacherCache = False,
        teacher_onnx: TeacherOnnx = None,
        words: Words = 0,
        engine: Engine = None,
        address: Address = None,
        device: Device = None,
        progress: Progress = None,
        force: Force = False,
    ) -> None:
        """Distill a static model (a token table averaged per sentence; model2vec) from a transformer."""
        from ..distill import distill as run
        from ..encoders import default_device

        with default_device(check_device(device)):
            out = run(
                output,
                model,
                dims=dims,
                corpus=corpus,
                fit=fit,
                alpha=alpha,
                lam=lam,
                spans=spans,
                strength_by=strength_by,
                target_whitening=target_whitening,
                engine=engine,
                address=address,
                teacher_cache=_teacher_cache(teacher_cache, no_teacher_cache),
                teacher_onnx=teacher_onnx,
                words=words,
                force=force,
                show_progress=progress,
            )
        typer.echo(f"wrote the static model {out} (model2vec folder{_what(corpus, fit)})", err=True)

    command(app, distill, "distill")
