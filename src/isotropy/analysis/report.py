"""The analysis report: tables, the report folder, and the calls that make it all (layer 4).

* Tables as data (a header and rows of strings, :func:`_sentence_rows`, :func:`_word_rows`),
  rendered as Markdown (``report.md``) or as rich tables (:func:`rich_tables`, which
  the command line prints; the library itself prints nothing).
* :func:`write_report` writes one report folder atomically: ``report.json`` (with the
  artefact header), one PNG per figure and ``report.md`` embedding them;
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
from .recommend import recommendation, recommendation_markdown
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


# =========================================================================== tables


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, float) and value != 0 and abs(value) < 10 ** (-digits):
        return f"{value:.1e}"
    return f"{value:.{digits}f}"


def _sentence_rows(sentence: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    reps = sentence["representations"]
    names = list(reps)
    rows = [
        ["average cosine of random pairs (-1..1, isotropic 0)"] + [_fmt(reps[n]["average_cosine"]["mean"]) for n in names],
        ["  std of that cosine"] + [_fmt(reps[n]["average_cosine"]["std"]) for n in names],
        ["isotropy I(W) (Mu & Viswanath; 0..1, isotropic 1)"] + [_fmt(reps[n]["partition_isotropy"]) for n in names],
        ["IsoScore (Rudman et al.; 0..1, isotropic 1)"] + [_fmt(reps[n]["isoscore"]) for n in names],
        ["dims holding 90% of variance (1..d, isotropic 0.9 d)"]
        + [f"{reps[n]['dims_for_variance']['0.9']} / {reps[n]['dim']}" for n in names],
        ["norm of mean vector / mean norm (0..1, isotropic 0)"] + [_fmt(reps[n]["mean_vector_norm_ratio"]) for n in names],
        ["mean norm (scale only)"] + [_fmt(reps[n]["mean_norm"]) for n in names],
    ]
    return ["statistic", *names], rows


def _word_rows(word: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    bks = word["buckets"]
    header = ["statistic", *[b["name"] for b in bks]]
    rows = [["mean l2 norm"] + [_fmt(b["mean_norm"]) for b in bks]]
    for k in word["ks"]:
        rows.append([f"mean {k}-NN l2 distance"] + [_fmt(b["knn_l2"][str(k)] if b["knn_l2"] else None) for b in bks])
    for k in word["ks"]:
        rows.append([f"mean {k}-NN dot product"] + [_fmt(b["knn_dot"][str(k)] if b["knn_dot"] else None) for b in bks])
    rows.append(["tokens (seen in corpus)"] + [f"{b['n_tokens']} ({b['n_seen']})" for b in bks])
    return header, rows


def _rich(title: str, header: list[str], rows: list[list[str]]):
    from rich.table import Table

    table = Table(title=title)
    table.add_column(header[0], style="bold")
    for h in header[1:]:
        table.add_column(h, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def sentence_table(sentence: Mapping[str, Any]):
    """A rich Table: rows = statistic, columns = raw and each transform."""
    return _rich(
        f"Sentence vectors ({sentence['n_sentences']} sentences, {sentence['n_pairs']} random pairs)", *_sentence_rows(sentence)
    )


def word_table(word: Mapping[str, Any]):
    """A rich Table in the BERT-flow paper's layout: rows = statistic, columns = frequency-rank buckets."""
    return _rich(f"Token embeddings by frequency rank in the corpus ({word['model']})", *_word_rows(word))


def rich_tables(report: Mapping[str, Any]) -> list:
    """The report's tables as rich renderables (sentence level, then word level and its token-pair line).

    Print each with ``rich.console.Console().print(item)``; the library prints nothing itself.
    """
    out: list = []
    if report.get("sentence"):
        out.append(sentence_table(report["sentence"]))
    word = report.get("word")
    if word:
        out.append(word_table(word))
        cos = word["average_cosine"]
        out.append(
            f"random token pairs: average cosine {_fmt(cos['mean'])} (std {_fmt(cos['std'])}), "
            f"I(W) {_fmt(word['partition_isotropy'])}, IsoScore {_fmt(word['isoscore'])}"
        )
    return out


def print_tables(report: Mapping[str, Any], console: Any = None) -> None:
    """Print :func:`rich_tables` of the report with rich (on ``console``, or a new Console)."""
    if console is None:
        from rich.console import Console

        console = Console()
    for item in rich_tables(report):
        console.print(item)


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


def _markdown_meta(report: Mapping[str, Any]) -> list[str]:
    meta = report.get("meta", {})
    out = ["# Anisotropy report", ""]
    for key, label in (("corpus", "Corpus"), ("encoder", "Encoder"), ("created", "Created")):
        if meta.get(key):
            out.append(f"- {label}: {meta[key]}")
    for name, desc in (meta.get("transforms") or {}).items():
        out.append(f"- Transform `{name}`: {desc}")
    out.append("")
    if report.get("notes"):
        out += ["## Notes", ""] + [f"- {n}" for n in report["notes"]] + [""]
    return out


def _markdown_sentence(sentence: Mapping[str, Any]) -> list[str]:
    return [
        "## Sentence level",
        "",
        f"{sentence['n_sentences']} sentences, {sentence['dim']} dimensions; {sentence['n_pairs']} random pairs "
        f"(seed {sentence['seed']}), the same pairs for every column.",
        "",
        _markdown(*_sentence_rows(sentence)),
        "",
        "Each measure's range and isotropic end are in its row: **average cosine** -1..1, isotropic at 0 (well "
        "above 0 is the cone effect); **I(W)** 0..1, isotropic at 1; **IsoScore** 0..1, isotropic at 1 (1: every "
        "direction has the same variance); **dims for 90% of the variance** 1..d, isotropic at about 0.9 d; **norm of "
        "the mean vector / mean norm** 0..1, isotropic at 0; the mean norm is the scale, neither end isotropic.",
        "",
        "I(W) is computed on the vectors as given and is not scale-invariant: it reads exp(c . w), so with large norms "
        "(whitened vectors have unit variance in every direction: norms near sqrt(d)) a few extreme rows in a skewed "
        "direction decide it, and a whitening can lower it while IsoScore and the spectrum show a rounder covariance. "
        "Compare I(W) between columns of similar mean norm; IsoScore and the spectrum are scale-free.",
        "",
    ]


def _markdown_word(word: Mapping[str, Any]) -> list[str]:
    out = [
        "## Word level (input token embeddings)",
        "",
        f"Model {word['model']}: {word['ranked_tokens']} tokens ranked ({word['special_tokens_excluded']} special tokens "
        f"excluded), {word['seen_tokens']} of them seen in the corpus ({word['corpus_tokens']} token occurrences). "
        "Ranks are by frequency in **this corpus** (the BERT-flow paper ranks by the pre-training corpus); "
        + (
            "tokens that never occur come last, in a seeded random order."
            if word["unseen"] == "last"
            else "tokens that never occur are left out."
        )
        + f" kNN: exact l2 neighbours among the ranked tokens (faiss), averaged over at most {word['max_queries'] or 'all'} "
        "tokens per bucket.",
        "",
        _markdown(*_word_rows(word)),
        "",
        f"Average cosine of {word['average_cosine']['n_pairs']} random token pairs: "
        f"{_fmt(word['average_cosine']['mean'])} (std {_fmt(word['average_cosine']['std'])}); "
        f"I(W) {_fmt(word['partition_isotropy'])}; IsoScore {_fmt(word['isoscore'])}.",
        "",
    ]
    if word.get("top_tokens"):
        out += ["Most frequent tokens: " + ", ".join(f"`{t['token']}` ({t['count']})" for t in word["top_tokens"]), ""]
    return out


def _markdown_report(report: Mapping[str, Any]) -> str:
    from ..selection.select import SAMPLE

    out = _markdown_meta(report)
    sentence = report.get("sentence")
    if sentence:
        out += _markdown_sentence(sentence)
    word = report.get("word")
    if word:
        out += _markdown_word(word)
    out += recommendation_markdown(report.get("recommendation")) or [
        "## Recommendation",
        "",
        "Not computed: `isotropy analyze --recommend` (Python: `recommend=True`) also compares the candidate "
        "calibrations of `--method auto` on this corpus (it encodes three perturbed copies of up to "
        f"{SAMPLE:,} sentences, so it costs about three more encodings).",
        "",
    ]
    figs = report.get("figures") or []
    if figs:
        out += ["## Figures", ""]
        for f in figs:
            out += [f"### {FIGURES[f][2]}", "", f"![{FIGURES[f][2]}]({f})", ""]
    return "\n".join(out).rstrip() + "\n"


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
        (tmp / "report.md").write_text(_markdown_report(report), encoding="utf-8")
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
