"""``isotropy distill``: a static model from a transformer, optionally mapped onto it on a corpus (layer 6).

1. **Distill** through model2vec's ``distill`` (the ``model2vec[distill]`` extra): one forward
   pass per token of the transformer's vocabulary, PCA to ``dims``, SIF-weighted rows. The table
   is kept in float32 (model2vec's default float16 would cost ~1e-3 on a folded table).
2. With a corpus, fit a :class:`~isotropy.transforms.teacher_map.TeacherMap` from the static
   model's sentence vectors (model2vec's own ``encode`` of the fresh in-memory model, unnormalised)
   to the teacher's (:class:`~isotropy.encoders.Encoder`, L2-normalised, as the
   sentence-transformers pipeline of the teacher returns them), streamed chunk by chunk, and fold
   it into the table: model2vec's ``encode`` is a plain mean of token rows, so
   ``mean_t(E[t] A + b) = mean_t(E[t]) A + b`` holds exactly and the mapped model is the same size
   and speed. Its output normalisation is switched off (a normalised mean would not fold).
3. Write a model2vec folder with model2vec's own ``save_pretrained``, atomically and guarded
   (:func:`~isotropy.storage.artifacts.output_dir`), plus ``isotropy.json`` (the marker that lets
   a later run replace it, and what was done).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import ProgressBar
from ..encoders.models import resolve_model
from ..errors import IsotropyError
from ..storage.artifacts import check_output, header, output_dir
from ..transforms.teacher_map import TeacherMap
from ..transforms.token_whitening import fold_into_table
from .corpus import Corpus

__all__ = ["distill", "distill_static", "fit_teacher_map", "fold_static_model", "KIND"]

KIND = "static-model"
CHUNK = 2048  # sentences per streamed step of the teacher map


@contextlib.contextmanager
def _quiet(show: bool | None) -> Iterator[None]:
    """Silence transformers' loading notes, and model2vec's tqdm bar of its token pass when
    progress is off (tqdm reads TQDM_DISABLE only at import, so the bar is wrapped instead)."""
    from ..encoders.models import quiet_transformers

    module = None
    if show is False:
        with contextlib.suppress(ImportError):
            import model2vec.distill.inference as module
    bar = getattr(module, "tqdm", None)
    with quiet_transformers():
        if bar is not None:
            module.tqdm = functools.partial(bar, disable=True)
        try:
            yield
        finally:
            if bar is not None:
                module.tqdm = bar


def _check_dims(dims: int | None) -> int | None:
    if dims is None or dims == 0:
        return None
    if isinstance(dims, bool) or not isinstance(dims, int | np.integer) or dims < 1:
        raise IsotropyError(f"--dims must be a positive number of dimensions (0: the model's own width), got {dims!r}")
    return int(dims)


def distill_static(model: str | os.PathLike | None = None, dims: int | None = 256, show_progress: bool | None = None):
    """A ``model2vec.StaticModel`` distilled from ``model`` (None: the embedded default), PCA to
    ``dims`` (None or 0: keep the model's width), float32 table."""
    try:
        from model2vec.distill import distill as m2v_distill
    except ImportError:
        raise IsotropyError("distill needs model2vec with its distill extra: pip install 'isotropy[distill]'") from None
    pca = _check_dims(dims)
    path, name = resolve_model(model)
    with _quiet(show_progress):
        try:
            static = m2v_distill(model_name=str(path) if path is not None else name, pca_dims=pca, quantize_to="float32")
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise IsotropyError(f"cannot distill {name!r}: {first}") from None
    if pca is not None and static.dim != pca:
        raise IsotropyError(
            f"{name} could not be reduced to {pca} dimensions (it has {static.dim}); use --dims {static.dim} or 0"
        )
    return static


def _static_encode(static: Any, sentences: list[str]) -> np.ndarray:
    return np.asarray(static.encode(sentences, normalize=False, show_progress_bar=False), dtype=np.float32)


def fit_teacher_map(
    static: Any,
    teacher: Any,
    corpus: Any,
    *,
    alpha: float = 0.0,
    normalize_teacher: bool = True,
    show_progress: bool | None = None,
) -> TeacherMap:
    """The least-squares map from ``static``'s sentence vectors to ``teacher``'s (an
    :class:`~isotropy.encoders.Encoder`) on ``corpus`` (a text file, a glob of shards, or a list
    of sentences; blank lines left out), streamed ``CHUNK`` sentences at a time."""
    source = Corpus(corpus)
    total = source.count()
    tm = TeacherMap(alpha=alpha)
    with ProgressBar(total or 0, show_progress, "teacher map", unit="sentences") as bar:
        for chunk in source.chunks(CHUNK):
            X = _static_encode(static, chunk)
            Y = teacher.encode(chunk, show_progress=False)
            if normalize_teacher:
                Y = Y / np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12)
            tm.partial_fit(X, Y)
            bar.advance(len(chunk))
    if not hasattr(tm, "moments_") or tm.moments_.n < 2:
        raise IsotropyError(f"the corpus {source.where} has fewer than 2 sentences: a teacher map needs more")
    tm.affine_()  # solved now, so a problem surfaces before anything is written
    return tm


def fold_static_model(static: Any, transform: Any) -> Any:
    """``static`` with the affine ``transform`` folded into its table (in place; returned)."""
    if getattr(static, "weights", None) is not None or getattr(static, "token_mapping", None) is not None:
        raise IsotropyError(
            "this static model uses vocabulary quantization (per-token weights): an affine map does not fold into it"
        )
    static.embedding = fold_into_table(static.embedding, transform)
    static.normalize = False  # a normalised mean would not be the mapped mean
    return static


def distill(
    output: str | os.PathLike,
    model: str | os.PathLike | None = None,
    *,
    dims: int | None = 256,
    corpus: Any = None,
    alpha: float = 0.0,
    force: bool = False,
    show_progress: bool | None = None,
) -> Path:
    """Distill ``model`` into a static model2vec folder at ``output``; with ``corpus``, the teacher
    map fitted on it is folded into the table first. Returns the folder."""
    _check_dims(dims)
    inputs = [] if corpus is None or not isinstance(corpus, str | os.PathLike) else Corpus(corpus).inputs
    out = check_output(output, KIND, force=force, inputs=[*inputs, model] if model is not None else inputs)
    source = None
    if corpus is not None:
        source = Corpus(corpus)
        n = source.count()
        if n is not None and n < 2:
            raise IsotropyError(f"the corpus {source.where} has {n} sentence(s): a teacher map needs at least 2")
    static = distill_static(model, dims, show_progress)
    info: dict[str, Any] = {"teacher": resolve_model(model)[1], "dims": static.dim, "vocabulary": len(static.embedding)}
    if source is not None:
        from ..encoders import Encoder

        tm = fit_teacher_map(static, Encoder(model), corpus, alpha=alpha, show_progress=show_progress)
        fold_static_model(static, tm)
        info["teacher_map"] = {"corpus": source.describe(), "sentences": tm.moments_.n, "alpha": float(alpha)}
    with output_dir(out, KIND, force=force) as tmp:
        static.save_pretrained(tmp)
        (tmp / "isotropy.json").write_text(json.dumps({**header(KIND), "distill": info}, indent=2) + "\n", encoding="utf-8")
    return out
