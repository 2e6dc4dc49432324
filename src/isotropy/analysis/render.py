"""How an analysis report reads: its tables (rich, for the terminal) and ``report.md`` (layer 5).

The tables are data first (a header and rows of strings: :func:`_sentence_rows`,
:func:`_word_rows`), rendered as rich tables (:func:`rich_tables`, which the command line
prints; the library itself prints nothing) or as Markdown in :func:`markdown_report`, the text
of ``report.md``. :mod:`.report` writes the folder and runs the analysis.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .figures import FIGURES
from .recommend import recommendation_markdown

__all__ = ["sentence_table", "word_table", "rich_tables", "print_tables", "markdown_report"]


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


# =========================================================================== report.md


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


def markdown_report(report: Mapping[str, Any]) -> str:
    from ..selection.select import SAMPLE  # the selection sits below analysis

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
