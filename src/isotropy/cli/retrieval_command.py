"""The command line's part of retrieval quality (issue #26).

* ``isotropy eval --retrieval FOLDER [--kind K ...]``: :func:`eval_retrieval`;
* ``isotropy index build ... --eval-queries Q --qrels R``: :func:`index_eval_task` checks them
  before the build, :func:`report_index_eval` prints what the index costs after it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import IsotropyError
from .options import choice

__all__ = [
    "Retrieval",
    "Kinds",
    "EvalQueries",
    "Qrels",
    "eval_retrieval",
    "index_eval_task",
    "report_index_eval",
]

Retrieval = Annotated[
    Path | None,
    typer.Option(
        "--retrieval",
        help="Score search instead of STS: a folder of documents, queries and qrels (BEIR: corpus.jsonl, queries.jsonl, "
        "qrels/test.tsv; plain: documents.txt, queries.txt, qrels.tsv; SMART: Cranfield's cran.all.1400, cran.qry, "
        "cranqrel). nDCG@10, recall@100, MRR@10; --fit-on target (the documents), queries, or a file; methods also pca-K.",
    ),
]
EvalQueries = Annotated[
    Path | None,
    typer.Option(
        "--eval-queries",
        help="Queries, one a line, to score the index with (with --qrels): its recall of exact search, nDCG@10.",
    ),
]
Qrels = Annotated[
    Path | None,
    typer.Option("--qrels", help="TSV of 'query document gain': query = --eval-queries line - 1, document = corpus line - 1."),
]
Kinds = Annotated[
    list[choice("exact", "flat", "hnsw", "ivf", "sq8", "binary", "all")] | None,
    typer.Option(
        "--kind",
        help="With --retrieval, repeatable: exact (default), flat, hnsw, ivf, sq8 (int8), binary (sign bits), all.",
    ),
]


def eval_retrieval(folder: Path | None, opts: dict[str, Any]) -> None:
    """``isotropy eval --retrieval FOLDER``, given the eval command's options: the table on stdout,
    ``--output`` as JSON + markdown."""
    from ..retrieval import evaluate_retrieval
    from .pooling_commands import eval_encoder

    if folder is None:
        raise IsotropyError("--kind applies to --retrieval only")
    if opts["data"] is not None or opts["task"]:
        raise IsotropyError("--retrieval scores its own folder: drop --data and --task")
    if opts["aggregate"] != "all":
        raise IsotropyError("--aggregate applies to STS tasks, not to --retrieval")
    out, force = opts["output"], opts["force"]
    if out is not None:
        from ..evaluation import check_results_output

        check_results_output(out, force=force, inputs=[folder])
    model, pooling, max_length, batch_size = opts["model"], opts["pooling"], opts["max_length"], opts["batch_size"]
    results = evaluate_retrieval(
        folder,
        kinds=opts["kind"] or ["exact"],
        model=model,
        encoder=eval_encoder(model, pooling, max_length, batch_size, opts["pooling_stats"]),
        poolings=pooling or None,
        methods=opts["method"] or ("raw", "whitening"),
        fit_on=opts["fit_on"],
        max_length=max_length,
        batch_size=batch_size,
        shrinkage=opts["shrinkage"],
        cache=False if opts["no_cache"] else (opts["cache_dir"] or True),
        show_progress=opts["progress"],
    )
    typer.echo(results.to_markdown())
    if out is not None:
        json_path, md_path = results.save(out, force=force)
        typer.echo(f"wrote {json_path} and {md_path}", err=True)


def index_eval_task(corpus: str | os.PathLike, queries: str | os.PathLike | None, qrels: str | os.PathLike | None):
    """The queries and qrels of ``index build --eval-queries/--qrels``, checked before the build (None: not asked)."""
    if queries is None and qrels is None:
        return None
    if queries is None or qrels is None:
        raise IsotropyError("--eval-queries and --qrels go together: give both")
    from ..retrieval.index_eval import load_index_queries

    return load_index_queries(corpus, queries, qrels)


def report_index_eval(index: Any, task: Any, show_progress: bool | None) -> None:
    if task is None:
        return
    from ..retrieval.index_eval import describe, evaluate_index

    typer.echo(describe(evaluate_index(index, task, show_progress)), err=True)
