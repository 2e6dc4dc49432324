"""The distill's refusals that need no model and no encoding, made before the minutes-long vocabulary pass (the
command's options one by one, then together)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import IsotropyError
from .corpus_fit import FITS
from .targets import check_target_whitening
from .teacher import check_teacher, teacher_width

__all__ = [
    "check_dims",
    "check_alpha",
    "check_fit",
    "check_cluster",
    "check_before_work",
    "check_fit_options",
    "check_corpus_options",
]


def check_dims(dims: int | None) -> int | None:
    if dims is None or dims == 0:
        return None
    if isinstance(dims, bool) or not isinstance(dims, int | np.integer) or dims < 1:
        raise IsotropyError(f"--dims must be a positive number of dimensions (0: the model's own width), got {dims!r}")
    return int(dims)


def check_alpha(alpha: Any, corpus: Any) -> float:
    if alpha is None:
        return 0.0
    if corpus is None:
        raise IsotropyError(
            "--alpha is the ridge penalty of the teacher map fitted on --corpus: give --corpus, or leave --alpha out"
        )
    try:
        value = float(alpha)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(alpha, bool) or not np.isfinite(value) or value < 0:
        raise IsotropyError(f"--alpha must be a finite number >= 0, got {alpha!r}")
    return value


def check_fit(fit: str | None, corpus: Any, lam: float | None) -> str | None:
    if corpus is None:
        if fit is not None or lam is not None:
            raise IsotropyError(f"{'--fit' if fit is not None else '--lam'} needs --corpus: the fit is made on a corpus")
        return None
    fit = "tokens" if fit is None else str(fit).strip().lower()
    if fit not in FITS:
        raise IsotropyError(f"--fit must be one of {', '.join(FITS)}, got {fit!r}")
    if lam is not None:
        if fit != "tokens":
            raise IsotropyError("--lam is the strength of the token fit: use it with --fit tokens")
        if isinstance(lam, bool) or not np.isfinite(float(lam)) or float(lam) <= 0:
            raise IsotropyError(f"--lam must be a finite number > 0, got {lam!r}")
    return fit


def check_cluster(engine: Any, address: Any, corpus: Any) -> None:
    """``engine`` and ``address`` before any work (S1-045..047): they need a corpus, ``address`` needs ``engine``, the
    engine is dask, and an address is well formed and answers (distributed.cluster.probe, seconds at most)."""
    if (engine is not None or address is not None) and corpus is None:
        raise IsotropyError("--engine and --address run the corpus pass on a cluster: give --corpus, or leave them out")
    if address is not None and engine is None:
        raise IsotropyError("--address applies only with --engine dask (a cluster run): add --engine dask, or drop it")
    if engine is not None and str(engine).strip().lower() != "dask":
        raise IsotropyError(f"unknown engine {engine!r}; the corpus pass runs in one process or on dask (--engine dask)")
    if isinstance(address, str | os.PathLike):
        from ..distributed.cluster import CONNECT_TIMEOUT, probe

        probe(str(address), CONNECT_TIMEOUT)


def check_before_work(model: Any, dims: int | None, corpus: Any, alpha: Any, fit: str | None, lam: float | None):
    """Every refusal that needs no encoding, before the minutes-long vocabulary pass."""
    check_teacher(model)
    pca = check_dims(dims)
    alpha = check_alpha(alpha, corpus)
    fit = check_fit(fit, corpus, lam)
    width = teacher_width(model)
    if pca is not None and width is not None and pca > width:
        raise IsotropyError(f"--dims {pca} is wider than the model ({width} dimensions): use --dims {width} or less, or 0")
    return pca, alpha, fit


def check_fit_options(spans: Any, strength_by: Any, fit: str | None, lam: Any) -> tuple[tuple[str, ...], str]:
    """The span kinds and the strength criterion, checked before any model loads (S7-025, S7-026)."""
    from .corpus_fit import CRITERIA, span_kinds

    kinds = span_kinds(True if spans is None else spans)  # an unknown kind is refused before any model loads
    if spans is not None and kinds and fit != "tokens":
        raise IsotropyError("--spans adds equations to the token fit: use it with --corpus and --fit tokens")
    if strength_by is not None and (fit != "tokens" or lam is not None):
        raise IsotropyError("--strength-by chooses the token fit's strength: use it with --fit tokens and without --lam")
    criterion = "cosine" if strength_by is None else strength_by
    if criterion not in CRITERIA:
        raise IsotropyError(f"--strength-by must be one of {', '.join(sorted(CRITERIA))}, got {strength_by!r}")
    return (kinds if fit == "tokens" else ()), criterion


def check_corpus_options(corpus: Any, teacher_cache: Any, teacher_onnx: Any, target_whitening: Any, fit: Any) -> float:
    """The options that only a run with ``corpus`` takes, refused without one; returns the target whitening's power
    (:func:`~.targets.check_target_whitening`)."""
    if isinstance(teacher_cache, str | os.PathLike) and corpus is None:
        raise IsotropyError("--teacher-cache keeps the teacher's vectors of --corpus: give --corpus, or leave it out")
    if teacher_onnx is not None and corpus is None:
        raise IsotropyError("--teacher-onnx encodes --corpus for the token fit: give --corpus, or leave it out")
    return check_target_whitening(target_whitening, corpus, fit)
