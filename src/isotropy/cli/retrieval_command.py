"""The command line's part of retrieval quality (issue #26).

* ``isotropy eval --retrieval FOLDER [--kind K ...]``: :func:`eval_retrieval`;
* ``isotropy index build ... --eval-queries Q --qrels R``: :func:`index_eval_task` checks them
  before the build, :func:`report_index_eval` prints what the index costs after it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from ..errors import IsotropyError

__all__ = ["RetrievalOpt", "KindOpt", "eval_retrieval", "index_eval_task", "report_index_eval"]

RetrievalOpt = typer.Option(
    None,
    "--retrieval",
    help="Score search instead of STS: a folder of documents, queries and qrels (BEIR: corpus.jsonl, queries.jsonl, qrels/test.tsv; plain: documents.txt, queries.txt, qrels.tsv; SMART: Cranfield's cran.all.1400, cran.qry, cranqrel). nDCG@10, recall@100, MRR@10; --fit-on target (the documents), queries, or a file; methods also pca-K.",
)
KindOpt = typer.Option(
    None, "--kind", help="With --retrieval, repeatable: exact (default), flat, hnsw, ivf, sq8 (int8), binary (sign bits), all."
)


def eval_retrieval(
    folder: Path, *, data: Any, task: Any, kind: list[str] | None, out: str | None, force: bool, max_length: int | None, **kw: Any
) -> None:
    """``isotropy eval --retrieval FOLDER``: the table on stdout, ``--out`` as JSON + markdown."""
    from ..retrieval import evaluate_retrieval

    if data is not None or task:
        raise IsotropyError("--retrieval scores its own folder: drop --data and --task")
    if kw.pop("aggregate") != "all":
        raise IsotropyError("--aggregate applies to STS tasks, not to --retrieval")
    if out is not None:
        from ..evaluation import check_results_output

        check_results_output(out, force=force, inputs=[folder])
    results = evaluate_retrieval(folder, kinds=kind or ["exact"], max_length=max_length, **kw)
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
