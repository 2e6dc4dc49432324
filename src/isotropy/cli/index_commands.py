"""``isotropy index build``, ``index add`` and ``search``: a semantic-search index on disk (serve: :mod:`.serve_command`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .._terminal import printable
from ..errors import IsotropyError
from . import retrieval_command as rcli
from .options import (
    Address,
    AllowOtherEncoder,
    BatchSize,
    Candidates,
    Device,
    Engine,
    Evidence,
    Force,
    ForTask,
    Inputs,
    MaxLength,
    Model,
    Output,
    Pooling,
    PoolingStats,
    Progress,
    Rerank,
    Transform,
    check_device,
    choice,
    command,
    deprecated,
    hidden,
)

__all__ = ["register_index_commands", "register_search_command"]

IndexDir = Annotated[Path, typer.Argument(help="Index folder written by 'isotropy index build'.")]
EfSearch = "--ef-search"
NProbe = "--nprobe"


def index_build(
    # long: typer declares every option as a parameter (encoder, calibration, faiss kind, evaluation)
    corpus: Annotated[Path, typer.Argument(help="UTF-8 text file, one sentence a line; a sentence's id is its line number - 1.")],
    output: Output("Index folder to write (an existing index is replaced atomically).") = ...,
    model: Model = None,
    pooling: Pooling = None,
    max_length: MaxLength = None,
    device: Device = None,
    transform: Transform(
        "A fitted transform folder (whitening or flow) to apply instead of fitting a whitening on the corpus"
    ) = None,
    whiten: Annotated[
        int | None,
        typer.Option(
            "--whiten",
            help="Whitening fitted on the corpus, keeping K dimensions (default: soft whitening, power 0.5, to 128 dims -- "
            "fewer on a corpus of <= 128 sentences; see docs/BENCHMARKS.md 'search').",
        ),
    ] = None,
    power: Annotated[
        float | None, typer.Option("--power", help="Power of that whitening: 1 full, 0.5 soft (default), 0 PCA only.")
    ] = None,
    no_whiten: Annotated[bool, typer.Option("--no-whiten", help="Index the raw encoder vectors (L2-normalised).")] = False,
    method: Annotated[
        choice("auto") | None,
        typer.Option(
            "--method",
            help="auto: compare candidate calibrations on the corpus (label-free) and index with the choice, raw unless one "
            "is better; the evidence is printed and saved in the index (docs/AUTO.md).",
        ),
    ] = None,
    candidates: Candidates = None,
    task: ForTask("search") = None,
    evidence: Evidence = False,
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            metavar="[flat|hnsw|ivf|ivfpq|opq]",  # checked once, by the IndexSpec built below (search.spec.INDEX_KINDS)
            help="flat (exact), hnsw or ivf (approximate), ivfpq or opq (compressed: product quantisation behind an "
            "inverted file, opq with faiss's learnt rotation; memory-mapped when searched).",
        ),
    ] = "flat",
    bytes_per_vector: Annotated[
        int | None,
        typer.Option(
            "--bytes-per-vector",
            help="ivfpq/opq: code size, one 8-bit sub-quantiser a byte; ivfpq needs the calibrated dimension divisible "
            "by it (default 32, or where 32 does not divide it the largest count below 32 that does, e.g. 25 for 50 dims).",
        ),
    ] = None,
    keep_vectors: Annotated[
        bool,
        typer.Option("--keep-vectors", help="ivfpq/opq: keep the exact float32 vectors beside the codes, for search --rerank."),
    ] = False,
    hnsw_m: Annotated[int, typer.Option("--hnsw-m", help="hnsw: links per node.")] = 32,
    ef_construction: Annotated[int, typer.Option("--ef-construction", help="hnsw: build-time beam width.")] = 200,
    ef_search: Annotated[int, typer.Option(EfSearch, help="hnsw: query-time beam width (also settable per search).")] = 64,
    nlist: Annotated[
        int | None,
        typer.Option("--nlist", help="ivf: number of lists, trained on the corpus (default min(4 sqrt(n), n/39))."),
    ] = None,
    nprobe: Annotated[
        int, typer.Option(NProbe, help="ivf, ivfpq, opq: lists visited per query (also settable per search).")
    ] = 16,
    batch_size: BatchSize = 64,
    progress: Progress = None,
    pooling_stats: PoolingStats = None,
    force: Force = False,
    allow_other_encoder: AllowOtherEncoder = False,
    eval_queries: rcli.EvalQueries = None,
    qrels: rcli.Qrels = None,
    engine: Engine = None,
    inputs: Inputs = None,
    address: Address = None,
) -> None:
    """Index a sentence file for semantic search (with --engine dask --input 'vecs/*.npy': an ivfpq/opq index
    filled shard by shard on a cluster from the corpus's vector shards and merged on disk)."""
    from ..encoders import default_device
    from ..search.spec import IndexCalibration, IndexSpec

    # the request, built and checked once, here (the one place that reads these options' raw values)
    spec = IndexSpec(
        kind=kind,
        m=hnsw_m,
        ef_construction=ef_construction,
        ef_search=ef_search,
        nlist=nlist,
        nprobe=nprobe,
        bytes_per_vector=bytes_per_vector,
        keep_vectors=keep_vectors,
        calibration=IndexCalibration(
            transform=transform,
            whiten=whiten,
            power=power,
            no_whiten=no_whiten,
            method=method,
            candidates=candidates,
            task=(task or "search") if method is not None else task,
            evidence=evidence,
        ),
        model=model,
        pooling=pooling,
        max_length=max_length,
        batch_size=batch_size,
        pooling_stats=pooling_stats,
        allow_other_encoder=allow_other_encoder,
        engine=engine,
        force=force,
        show_progress=progress,
    )
    if engine is not None or inputs is not None or address is not None:
        _build_on_cluster(corpus, output, spec, inputs, address, eval_queries)
        return
    from ..search.build import build_index

    judged = rcli.index_eval_task(corpus, eval_queries, qrels)
    with default_device(check_device(device)):
        index = build_index(corpus, output, spec)
        for warning in index.warnings:
            typer.echo(f"warning: {warning}", err=True)
        _pq_notes(index, spec)
        if index.selection:
            from ..selection import Selection

            typer.echo(Selection.from_dict(index.selection).table(), err=True)
        typer.echo(f"wrote index of {index.describe()} to {output}", err=True)
        rcli.report_index_eval(index, judged, progress)


def _pq_notes(index, spec) -> None:
    """A compressed index: the code size the default chose (when not 32) and a training sample below faiss's advice."""
    from ..search.pq import default_bytes_note, training_note

    if not spec.compressed:
        return
    notes = [default_bytes_note(index.kind, index.dim) if spec.bytes_per_vector is None else None]
    notes.append(training_note(index.kind, index.params, len(index)))
    for note in filter(None, notes):
        typer.echo(f"note: {note}", err=True)


def _build_on_cluster(corpus, output, spec, inputs, address, eval_queries) -> None:
    """``--engine dask``: :func:`isotropy.search.build_dask.build_index_dask`, a line per redone shard."""
    if spec.engine is None or inputs is None:
        raise IsotropyError(
            "--engine dask needs --input, the corpus's vector shards ('vecs/*.npy'), and --input/--address need --engine"
        )
    if eval_queries is not None:
        raise IsotropyError("--method and --eval-queries are not available with --engine dask yet; drop them")
    from ..search.build_dask import build_index_dask

    index, report = build_index_dask(corpus, inputs, output, spec, address=address)
    for r in report:
        if r["reason"]:
            typer.echo(f"shard {r['shard']}: {r['reason']}; added again", err=True)
    skipped = sum(r["status"] == "skipped" for r in report)
    typer.echo(f"{len(report)} shards, {skipped} already done (resumed)" if skipped else f"{len(report)} shards added", err=True)
    for warning in index.warnings:
        typer.echo(f"warning: {warning}", err=True)
    _pq_notes(index, spec)
    typer.echo(f"wrote index of {index.describe()} to {output}", err=True)


def index_add(
    index_dir: IndexDir,
    more: Annotated[
        Path, typer.Argument(help="UTF-8 text file of sentences to add, one a line (ids continue after the last one).")
    ],
    device: Device = None,
    progress: Progress = None,
) -> None:
    """Add sentences to an index, encoded exactly like its corpus; the folder is rewritten atomically."""
    from ..encoders import default_device
    from ..search.build import add_to_index

    with default_device(check_device(device)):
        index, added = add_to_index(index_dir, more, show_progress=progress)
    for warning in index.warnings:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(f"added {added} sentences; {index_dir} now holds {len(index)}", err=True)


def search(
    index_dir: IndexDir,
    query: Annotated[list[str] | None, typer.Argument(help="Query sentence(s).")] = None,
    queries: Annotated[
        Path | None, typer.Option("--queries", "-q", help="UTF-8 file of queries, one a line (batch mode).")
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", "-n", help="Hits per query (k nearest neighbours).")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    ef_search: Annotated[
        int | None, typer.Option(EfSearch, help="hnsw: query-time beam width (default: the index's; refused on other kinds).")
    ] = None,
    nprobe: Annotated[
        int | None,
        typer.Option(NProbe, help="ivf, ivfpq, opq: lists visited per query (default: the index's; refused on other kinds)."),
    ] = None,
    rerank: Rerank = None,
    device: Device = None,
    old_k: Annotated[int | None, hidden("-k")] = None,
) -> None:
    """Find the sentences of an index most similar to each query (cosine after the index's transform)."""
    from ..encoders import default_device
    from ..search import format_results
    from ..search.build import search_index

    k = deprecated("search", "-k", old_k, None if top_k == 10 else top_k)
    k = top_k if k is None else k
    with default_device(check_device(device)):
        results = search_index(index_dir, query, queries, k=k, ef_search=ef_search, nprobe=nprobe, rerank=rerank)
    if results.warning:
        typer.echo(f"warning: {printable(results.warning)}", err=True)
    t = results.timings or {}
    typer.echo(f"loaded the index and model in {t.get('load_s', 0):.2f} s, searched in {t.get('search_s', 0):.3f} s", err=True)
    typer.echo(results.to_json() if as_json else format_results(results))


def register_index_commands(index_app: typer.Typer) -> None:
    """Add ``index build`` and ``index add``."""
    command(index_app, index_build, "build")
    command(index_app, index_add, "add")


def register_search_command(app: typer.Typer) -> None:
    command(app, search)
