"""The analysis report: the report folder, and the calls that make it all (layer 5).

* :func:`write_report` writes one report folder atomically: ``report.json`` (with the
  artefact header), one PNG per figure and ``report.md`` embedding them (its text and the
  terminal's tables are :mod:`.render`'s; :func:`rich_tables` and friends are re-exported here);
  :func:`check_report_dir` fails before any work when that folder cannot be written.
* :func:`analyze` does everything for a list of sentences and an encoder (the call the
  demo makes); :func:`analyze_file` is the ``isotropy analyze`` command.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from ..storage.artifacts import check_output, header, output_dir
from .figures import FIGURES
from .metrics import DEFAULT_PAIRS, DEFAULT_SEED, MIN_SENTENCES, RAW, check_pairs, sentence_report
from .recommend import recommendation
from .render import markdown_report, print_tables, rich_tables, sentence_table, word_table
from .words import MAX_QUERIES, WordLevelUnavailable, word_report

__all__ = [
    "AUTO_WHITENING",
    "REPORT_KIND",
    "sentence_table",
    "word_table",
    "rich_tables",
    "print_tables",
    "write_report",
    "check_report_dir",
    "analyze",
    "analyze_file",
]

AUTO_WHITENING = "auto-whitening"
REPORT_KIND = "report"


# =========================================================================== the report folder


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(float(obj)) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_report(out_dir: str | os.PathLike, report: Mapping[str, Any], *, force: bool = False) -> Path:
    """Write ``report.json``, one PNG per figure and ``report.md`` (embedding them) into ``out_dir``.

    ``report`` holds ``"sentence"`` (from :func:`sentence_report`) and/or ``"word"``
    (from :func:`word_report`), optionally ``"meta"`` and ``"notes"``. The folder is
    written atomically: it appears complete or not at all (an old report is replaced; any
    other existing folder only with ``force``).
    """
    report = dict(report)
    figures = [f for f, (part, _, _) in FIGURES.items() if report.get(part)]
    report["figures"] = figures
    head = header(REPORT_KIND)
    with output_dir(out_dir, REPORT_KIND, force=force) as tmp:
        for name in figures:
            part, draw, _ = FIGURES[name]
            fig = draw(report[part])
            fig.savefig(tmp / name, dpi=100)
        (tmp / "report.json").write_text(
            json.dumps(_jsonable({**report, **head}), indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
        (tmp / "report.md").write_text(markdown_report(report), encoding="utf-8")
    return Path(out_dir)


def check_report_dir(out_dir: str | os.PathLike, *, force: bool = False, inputs: Sequence[Any] = ()) -> Path:
    """Fail before any work when ``out_dir`` cannot be written: its parent must be a writable
    folder, and an existing ``out_dir`` must be an isotropy report (or empty) unless ``force``."""
    return check_output(out_dir, REPORT_KIND, force=force, inputs=inputs)


# =========================================================================== analyze


def _note(notes: list[str], message: str, quiet: bool) -> None:
    notes.append(message)
    if not quiet:
        print(f"note: {message}", file=sys.stderr)


def _nonblank(sentences: Sequence[str], source: str) -> list[str]:
    kept = [s for s in sentences if isinstance(s, str) and s.strip()]
    if len(kept) < MIN_SENTENCES:
        raise IsotropyError(
            f"{source} has {len(kept)} non-empty line{'s' if len(kept) != 1 else ''}; the analysis needs at least "
            f"{MIN_SENTENCES} (random pairs, a covariance spectrum and a 2-D projection)"
        )
    return kept


def _load_transforms(transforms: Any) -> dict[str, Any]:
    """A mapping name -> transform/path, or a sequence of folders (named after the folder)."""
    from ..transforms import load_transform

    if transforms is None:
        return {}
    items = transforms.items() if isinstance(transforms, Mapping) else [(Path(p).name or str(p), p) for p in transforms]
    out: dict[str, Any] = {}
    for name, t in items:
        name = str(name)
        base, i = name, 2
        while name in out or name == RAW:
            name, i = f"{base}-{i}", i + 1
        out[name] = load_transform(t) if isinstance(t, (str, os.PathLike)) else t
    return out


def _describe_transform(t: Any) -> str:
    if isinstance(t, np.ndarray):
        return f"precomputed vectors {t.shape}"
    describe = getattr(t, "describe", None)
    try:
        return str(describe()) if callable(describe) else repr(t)
    except Exception:  # a description is cosmetic; never fail the report over it
        return type(t).__name__


def _check_analyze_args(sentences: Any, source: str, seed: Any, n_pairs: Any, unseen_tokens: str) -> list[str]:
    """The non-blank sentences, once the arguments of :func:`analyze` are checked (cheap checks only)."""
    if isinstance(sentences, str):
        raise IsotropyError("sentences must be a list of strings, not one string")
    kept = _nonblank(list(sentences), source)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise IsotropyError(f"the seed must be a non-negative integer, got {seed!r}")
    check_pairs(n_pairs)
    if unseen_tokens not in ("last", "drop"):
        raise IsotropyError(f"unseen tokens must be ranked 'last' or 'drop'ped, got {unseen_tokens!r}")
    return kept


def _sample_sentences(kept: list[str], max_sentences: int | None, seed: int) -> list[str]:
    """A seeded sample of ``max_sentences`` of the lines (all of them when None or fewer)."""
    if max_sentences is None:
        return kept
    if int(max_sentences) < MIN_SENTENCES:
        raise IsotropyError(f"max_sentences must be at least {MIN_SENTENCES}, got {max_sentences}")
    if len(kept) <= int(max_sentences):
        return kept
    idx = np.sort(np.random.default_rng(seed).choice(len(kept), size=int(max_sentences), replace=False))
    return [kept[i] for i in idx]


def _auto_whitening(vectors: np.ndarray, notes: list[str], source: str) -> dict[str, Any]:
    """A whitening (Ledoit-Wolf shrinkage) fitted on the analysed vectors themselves, noted as in-sample."""
    from ..transforms.whitening import Whitening

    try:
        loaded = {AUTO_WHITENING: Whitening(shrinkage="auto").fit(vectors)}
    except IsotropyError as exc:
        raise IsotropyError(f"{source}: cannot fit the 'after' whitening: {exc}") from None
    _note(notes, "no transform given: 'auto-whitening' is a whitening fitted on these same sentences (in-sample)", True)
    return loaded


def _default_encoder() -> Any:
    from ..encoders import Encoder

    return Encoder()


def _coverage(encoder: Any, n: int, notes: list[str], quiet: bool) -> dict[str, Any] | None:
    """A static model's out-of-vocabulary accounting of the sentences just encoded (a note too); None for a transformer."""
    coverage = getattr(encoder, "coverage", None)
    if coverage is None:
        return None
    _note(notes, f"static model: {coverage.describe()} in the {n} sentences analysed", quiet)
    return coverage.to_dict()


def _word_part(encoder: Any, kept: list[str], notes: list[str], quiet: bool, **kwargs: Any) -> dict[str, Any] | None:
    """:func:`word_report` with its notes moved to ``notes``; None (and a note) when the model has no embedding matrix."""
    try:
        word = word_report(encoder, kept, **kwargs)
    except WordLevelUnavailable as exc:
        _note(notes, str(exc), quiet)
        return None
    for n in word.pop("notes", []):
        _note(notes, f"word level: {n}", quiet)
    return word


def _meta(
    encoder: Any,
    corpus_name: str | None,
    sample: list[str],
    kept: list[str],
    loaded: dict[str, Any],
    transforms: Any,
    seed: int,
    timings: dict[str, float],
) -> dict[str, Any]:
    """The report's ``meta`` part (``timings`` is kept by reference: later steps add theirs)."""
    describe = getattr(encoder, "describe", None)
    return {
        "corpus": corpus_name,
        "lines_used": len(sample),
        "non_empty_lines": len(kept),
        "encoder": describe() if callable(describe) else type(encoder).__name__,
        "transforms": {name: _describe_transform(t) for name, t in loaded.items()},
        "auto_whitening": bool(AUTO_WHITENING in loaded and not transforms),
        "seed": int(seed),
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "timings": timings,
    }


def analyze(
    sentences: Sequence[str],
    encoder: Any = None,
    transforms: Any = None,
    out_dir: str | os.PathLike | None = None,
    show_progress: bool | None = None,
    *,
    auto_whiten: bool = True,
    word_level: bool = True,
    n_pairs: int = DEFAULT_PAIRS,
    seed: int = DEFAULT_SEED,
    max_sentences: int | None = None,
    unseen_tokens: str = "last",
    max_queries: int | None = MAX_QUERIES,
    corpus_name: str | None = None,
    quiet: bool = False,
    force: bool = False,
    recommend: Any = False,
) -> dict[str, Any]:
    """Encode ``sentences``, compute the sentence- and word-level reports and write the folder.

    ``encoder``: an :class:`~isotropy.Encoder` (None: the default model).
    ``transforms``: ``{name: fitted transform or folder}`` or a list of folders; when
    none is given and ``auto_whiten`` is true, a whitening (Ledoit-Wolf shrinkage) fitted
    on these very vectors is shown as ``"auto-whitening"`` -- the "after" of an in-sample
    calibration. ``max_sentences`` encodes a seeded sample of that many lines (token
    frequencies still use every line). Notes (a skipped word-level part, few distinct
    tokens) go to the report and, unless ``quiet``, to stderr. Returns the report dict
    (as written to ``report.json``, plus ``"path"`` when ``out_dir`` is given). ``recommend``: the
    recommendation of ``--method auto`` (:mod:`.recommend`; False: none; a ``Selection``: that one).
    """
    if out_dir is not None:
        check_report_dir(out_dir, force=force)
    kept = _check_analyze_args(sentences, corpus_name or "the corpus", seed, n_pairs, unseen_tokens)
    sample = _sample_sentences(kept, max_sentences, seed)
    loaded = _load_transforms(transforms)
    encoder = _default_encoder() if encoder is None else encoder
    timings: dict[str, float] = {}
    notes: list[str] = []
    rec = None
    t0 = time.perf_counter()
    vectors = encoder.encode(sample, show_progress=show_progress)
    timings["encode_s"] = time.perf_counter() - t0
    coverage = _coverage(encoder, len(sample), notes, quiet)

    t0 = time.perf_counter()
    if not loaded and auto_whiten:
        loaded = _auto_whitening(vectors, notes, corpus_name or "the corpus")
    sentence = sentence_report(vectors, loaded, n_pairs=int(n_pairs), seed=seed, show_progress=show_progress)
    timings["sentence_s"] = time.perf_counter() - t0

    word = None
    if word_level:
        t0 = time.perf_counter()
        word = _word_part(
            encoder, kept, notes, quiet, unseen=unseen_tokens, max_queries=max_queries, n_pairs=int(n_pairs), seed=seed,
            show_progress=show_progress,
        )  # fmt: skip
        timings["word_s"] = time.perf_counter() - t0
    if recommend is not False:
        t0 = time.perf_counter()
        rec = recommendation(vectors, sample, encoder, seed=seed, selection=None if recommend is True else recommend, show_progress=show_progress)  # fmt: skip
        timings["recommend_s"] = time.perf_counter() - t0

    report: dict[str, Any] = {
        "meta": _meta(encoder, corpus_name, sample, kept, loaded, transforms, seed, timings),
        "notes": notes,
        "coverage": coverage,
        "sentence": sentence,
        "word": word,
        "recommendation": rec,
    }
    if out_dir is not None:
        t0 = time.perf_counter()
        write_report(out_dir, report, force=force)
        timings["write_s"] = time.perf_counter() - t0
        report["figures"] = [f for f, (part, _, _) in FIGURES.items() if report.get(part)]
        report["path"] = str(out_dir)
    return _jsonable(report)


def analyze_file(
    corpus: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    model: str | os.PathLike | None = None,
    pooling: str | None = None,
    max_length: int | None = None,
    batch_size: int = 64,
    transforms: Sequence[str | os.PathLike] = (),
    force: bool = False,
    allow_other_encoder: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """The ``isotropy analyze`` command: validate everything cheap first, then load the model and run :func:`analyze`.

    A transform fitted on vectors of another encoder (model weights, pooling, max length,
    width) than this one is refused unless ``allow_other_encoder``."""
    from ..storage.text import read_sentences

    check_pairs(kwargs.get("n_pairs", 1), "--pairs")  # an absurd count is said before the model loads
    check_report_dir(out_dir, force=force, inputs=[corpus, *transforms, model if isinstance(model, (str, os.PathLike)) else None])
    sentences = read_sentences(corpus)
    _nonblank(sentences, str(corpus))
    loaded = _load_transforms(list(transforms)) if transforms else None
    from ..encoders import Encoder

    encoder = Encoder(model, pooling=pooling, max_length=max_length, batch_size=batch_size)
    if any(getattr(t, "provenance", None) for t in (loaded or {}).values()):
        from ..storage.integrity import check_provenance, provenance_of_record

        mine = provenance_of_record(encoder.record(), encoder.dim)
        for path, t in zip(transforms, loaded.values()):
            check_provenance(t.provenance, mine, path, f"this encoder ({encoder.describe()})", allow=allow_other_encoder)
    return analyze(sentences, encoder, loaded, out_dir, corpus_name=str(corpus), force=force, **kwargs)
