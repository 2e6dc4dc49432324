"""The ``isotropy`` commands (layer 5): parse, make one call into the library, print.

The calls go to :mod:`isotropy.cli.jobs` (file-level jobs) or straight to a feature's
entry point; errors are turned into one line by :func:`isotropy.cli.main`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from . import retrieval_command as rcli
from .calibrate_command import register_calibrate_command
from .fit_commands import register_fit_commands
from .options import AllowOtherOpt, register_global_options
from .pooling_commands import PoolingStatsOpt, eval_encoder, register_pooling_commands
from .serve_command import register_serve_command

app = typer.Typer(
    name="isotropy",
    help="Calibrate transformer sentence embeddings (BERT-whitening, BERT-flow), evaluate, analyse and search them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

register_global_options(app)  # --no-verify (cli/options.py)

fit_app = typer.Typer(help="Fit a calibration transform on sentence vectors.", no_args_is_help=True)
app.add_typer(fit_app, name="fit")

ModelOpt = typer.Option(
    None, "--model", "-m", help="Hugging Face model id or local folder (default: the embedded all-MiniLM-L6-v2)."
)
PoolingOpt = typer.Option(
    None,
    "--pooling",
    "-p",
    help="Pooling: cls, pooler, last-avg, first-last-avg, embed-last-avg, last2-avg, layers-avg:I,J,..., sif[:a=A], idf (these two need --pooling-stats), prompt[:TEMPLATE], prompt-denoised[:TEMPLATE], ditto[:layer=L,head=H] (default: the model's own).",
)
MaxLenOpt = typer.Option(
    None,
    "--max-length",
    help="Tokens per sentence (default: the model's maximum; the papers use 64). Longer sentences are truncated.",
)
BatchOpt = typer.Option(64, "--batch-size", help="Sentences per forward pass.")
EngineOpt = typer.Option(
    None, "--engine", help="Run on a cluster engine: dask (pip install 'isotropy\\[distributed]'); see docs/DISTRIBUTED.md."
)
InputsOpt = typer.Option(
    None,
    "--input",
    help="With --engine: the shards, a glob such as 'shards/*.txt' (one sentence a line) or, for fit, 'vecs/*.npy'.",
)
ForceOpt = typer.Option(
    False, "--force", help="Replace an existing output even when it is not an isotropy output of the same kind (never an input)."
)
CacheDirOpt = typer.Option(None, "--cache-dir", help="Vector cache folder (default: $ISOTROPY_CACHE or ~/.cache/isotropy).")
AddressOpt = typer.Option(
    None,
    "--address",
    help="With --engine: the scheduler of an existing cluster (tcp://host:8786); default: a local cluster, one worker per core.",
)


@app.command()
def encode(
    input: str | None = typer.Argument(None, help="UTF-8 text file, one sentence a line, or '-' for standard input."),
    output: str = typer.Option(
        ...,
        "--output",
        "-o",
        help="Where to write the vectors (.npy, float32, row i = line i); with --engine, a folder of one .npy per shard.",
    ),
    model: str | None = ModelOpt,
    pooling: str | None = PoolingOpt,
    max_length: int | None = MaxLenOpt,
    batch_size: int = BatchOpt,
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show a progress bar (default: only on a terminal)."
    ),
    engine: str | None = EngineOpt,
    inputs: str | None = InputsOpt,
    address: str | None = AddressOpt,
    transform: Path | None = typer.Option(
        None, "--transform", "-t", help="A fitted transform folder to apply to the vectors (with --engine: to each shard's)."
    ),
    pooling_stats: str | None = PoolingStatsOpt,
    force: bool = ForceOpt,
    precision: str = typer.Option(
        "fp32", "--precision", help="fp32, or bf16: ~2x faster on CPUs with AMX/avx512_bf16 (docs/BENCHMARKS.md)."
    ),
) -> None:
    """Encode sentences into vectors. Empty lines are encoded too, so row numbers match line numbers.

    With --engine dask --input 'shards/*.txt', shards are encoded on a cluster into OUT/<shard>.npy
    (resumable: a rerun skips shards whose output verifies)."""
    if engine is not None or inputs is not None:
        from ..distributed import EncoderSpec
        from ..distributed import encode as encode_shards
        from .engine import check_engine

        check_engine(engine, inputs, input)
        if precision != "fp32":
            from ..errors import IsotropyError

            raise IsotropyError(f"--precision {precision} is not available with --engine yet; drop one of them")
        spec = EncoderSpec(model=model, pooling=pooling, max_length=max_length, batch_size=batch_size)
        report = encode_shards(inputs, output, spec, transform=transform, address=address, show_progress=progress, force=force)
        typer.echo(f"wrote {report.describe()}", err=True)
        return
    if input is None:
        raise typer.BadParameter("give a text file (or '-'), or --engine with --input")
    if address is not None:
        from ..errors import IsotropyError

        raise IsotropyError(
            f"--address {address} applies only with --engine dask (a cluster to encode on); drop it or add --engine"
        )
    from ..files import encode_file

    (rows, dims), enc = encode_file(
        input,
        output,
        model=model,
        pooling=pooling,
        max_length=max_length,
        batch_size=batch_size,
        show_progress=progress,
        force=force,
        pooling_stats=pooling_stats,
        precision=precision,
        transform=transform,
    )
    after = f", then {transform}" if transform is not None else ""
    typer.echo(f"wrote {rows} x {dims} vectors ({enc.describe()}{after}) to {output}", err=True)


# `isotropy calibrate`: a corpus in, a calibrated model folder out (cli/calibrate_command.py)
register_calibrate_command(app)


@app.command()
def demo(
    output: str = typer.Option("demo-output", "--output", "-o", help="Folder for the demo's artefacts."),
    force: bool = ForceOpt,
) -> None:
    """Run the main job on the embedded default model and a corpus generated on the spot."""
    from ..demo import run_demo

    run_demo(output, force=force)


@fit_app.command("whitening")
def fit_whitening(
    vectors: Path | None = typer.Argument(
        None, help="Vectors to fit on: a .npy file (rows x dims) or a folder of .npy shards, streamed one chunk at a time."
    ),
    output: str = typer.Option(
        ..., "--output", "-o", help="Folder to write the fitted whitening to (config.json + state.safetensors)."
    ),
    n_components: int | None = typer.Option(
        None, "--n-components", "-k", help="Keep the k largest-variance directions (default: all)."
    ),
    power: float = typer.Option(
        1.0, "--power", help="Soft whitening: 1 full whitening, 0 pure rotation (PCA without scaling), between interpolates."
    ),
    shrinkage: str = typer.Option(
        "0",
        "--shrinkage",
        help="Covariance shrinkage towards a scaled identity: a number in [0, 1], or 'auto' (Ledoit-Wolf). Needed with fewer rows than dimensions.",
    ),
    method: str = typer.Option(
        "pca", "--method", help="pca (rotate to principal axes) or zca (rotate back to the original axes)."
    ),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show a progress bar (default: only on a terminal)."
    ),
    engine: str | None = EngineOpt,
    inputs: str | None = InputsOpt,
    address: str | None = AddressOpt,
    model: str | None = ModelOpt,
    pooling: str | None = PoolingOpt,
    max_length: int | None = MaxLenOpt,
    batch_size: int = BatchOpt,
    force: bool = ForceOpt,
) -> None:
    """Fit BERT-whitening (y = (x - mu) W) on sentence vectors (or, with --engine, on sentence shards encoded on a cluster)."""
    import warnings

    from ..files import fit_file
    from .engine import check_engine

    params = dict(n_components=n_components, power=power, shrinkage=shrinkage, method=method)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if engine is not None or inputs is not None:
            from ..distributed import EncoderSpec
            from ..distributed import fit_whitening as fit_shards

            check_engine(engine, inputs, vectors)
            spec = EncoderSpec(model=model, pooling=pooling, max_length=max_length, batch_size=batch_size)
            w = fit_shards(inputs, spec, params, output=output, address=address, show_progress=progress, force=force)
        elif vectors is None:
            raise typer.BadParameter("give VECTORS, or --engine with --input")
        else:
            from .engine import only_with_engine

            only_with_engine("VECTORS are already encoded", model=model, pooling=pooling, max_length=max_length, address=address)
            w = fit_file("whitening", vectors, output, params=params, show_progress=progress, force=force)
    for warning in caught:
        typer.echo(f"warning: {warning.message}", err=True)
    typer.echo(f"wrote {w.describe()} to {output}", err=True)


@fit_app.command("flow")
def fit_flow(
    vectors: Path = typer.Argument(..., help="Vectors to fit on: a .npy file (rows x dims) or a folder of .npy shards."),
    output: str = typer.Option(
        ..., "--output", "-o", help="Folder to write the fitted flow to (config.json + state.safetensors)."
    ),
    levels: int = typer.Option(
        2, "--levels", help="Glow levels (multi-scale: half the channels are factored out between levels)."
    ),
    depth: int = typer.Option(3, "--depth", help="Steps per level (actnorm -> invertible 1x1 conv -> coupling)."),
    hidden: int = typer.Option(32, "--hidden", help="Width of the coupling networks."),
    coupling: str = typer.Option("additive", "--coupling", help="additive (the paper's) or affine."),
    epochs: int = typer.Option(1, "--epochs", help="Passes over the vectors."),
    lr: float = typer.Option(1e-3, "--lr", help="Adam learning rate."),
    batch_size: int = typer.Option(32, "--batch-size", help="Rows per optimisation step."),
    seed: int = typer.Option(0, "--seed", help="Seed of initialisation and shuffling (same seed, same result)."),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show a progress bar with the running loss (default: only on a terminal)."
    ),
    force: bool = ForceOpt,
) -> None:
    """Fit BERT-flow (a Glow normalizing flow, Li et al. 2020) on sentence vectors."""
    from ..files import fit_file

    params = dict(
        levels=levels, depth=depth, hidden=hidden, coupling=coupling, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed
    )
    f = fit_file("flow", vectors, output, params=params, show_progress=progress, force=force)
    typer.echo(f"wrote {f.describe()} to {output}", err=True)


# every other registered transform and preset (center, abtt, common-component, soft-0.5, ...):
# `fit NAME`, its options generated from the class's __init__ (cli/fit_commands.py)
register_fit_commands(fit_app)
register_pooling_commands(fit_app)  # fit token-frequencies (the sif and idf poolings' statistics)


@app.command()
def transform(
    model_dir: Path = typer.Argument(..., help="Folder of a fitted transform (whitening or flow)."),
    vectors: Path = typer.Argument(
        ..., help="Vectors to transform: a .npy file or a folder of .npy shards (streamed; rows keep their order)."
    ),
    output: str = typer.Option(..., "--output", "-o", help="Where to write the transformed vectors (.npy, written atomically)."),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show a progress bar (default: only on a terminal)."
    ),
    force: bool = ForceOpt,
    allow_other_encoder: bool = AllowOtherOpt,
) -> None:
    """Apply a fitted transform to vectors, streaming."""
    from ..files import transform_file

    rows, dims = transform_file(
        model_dir, vectors, output, show_progress=progress, force=force, allow_other_encoder=allow_other_encoder
    )
    typer.echo(f"wrote {rows} x {dims} vectors to {output}", err=True)


@app.command("eval")
def eval_(
    # long: typer declares every option as a parameter; the STS table and --retrieval share them
    data: Path | None = typer.Option(
        None,
        "--data",
        "-d",
        help="Data folder (STS layouts: STSBenchmark/, SICK/, STS12/..STS16/, or train/dev/test.tsv pair files) or one pair file (.tsv/.csv/.jsonl with sentence1, sentence2, score|label). Without it, tasks are loaded from the Hugging Face hub.",
    ),
    task: list[str] | None = typer.Option(
        None,
        "--task",
        "-t",
        help="Task to evaluate, repeatable: STS-B, SICK-R, STS-12..STS-16, a pair file's name, a hub dataset id, or 'all' (default: all in --data).",
    ),
    model: str | None = ModelOpt,
    pooling: list[str] | None = typer.Option(
        None, "--pooling", "-p", help="Pooling to compare, repeatable (default: the model's own)."
    ),
    method: list[str] | None = typer.Option(
        None,
        "--method",
        help="Calibration, repeatable: raw, whitening, whitening-K, soft-whitening-BETA, flow, center, abtt, abtt-K, common-component, soft-0.25, soft-0.5, soft-0.75 (every transform of 'isotropy fit'), auto (chosen label-free on each fit corpus; the evidence goes into --json; docs/AUTO.md). Default: raw and whitening.",
    ),
    fit_on: str = typer.Option(
        "target",
        "--fit-on",
        help="'target' (every pair of the task, as the papers do), 'train' (the task's train split), 'others' (the other tasks' sentences, never the test task's; overlapping sentences removed and counted), or a text file of sentences (one a line) to fit on instead.",
    ),
    aggregate: str = typer.Option(
        "all",
        "--aggregate",
        help="STS-12..16, tasks of several datasets: 'all' (one correlation over the pooled pairs; SBERT, SimCSE), 'mean' or 'wmean' (plain or pair-weighted mean of the subset correlations; wmean is BERT-flow's and BERT-whitening's setting).",
    ),
    max_length: int | None = rcli.EvalMaxLengthOpt,
    batch_size: int = BatchOpt,
    shrinkage: str = typer.Option(
        "0",
        "--shrinkage",
        help="Whitening shrinkage in [0, 1] or 'auto' (Ledoit-Wolf); 0 is the papers' exact whitening. Needed to fit on fewer sentences than dimensions.",
    ),
    out: str | None = typer.Option(
        None, "--out", "-o", help="Write the results as JSON here, and the markdown table beside it (.md)."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Encode everything afresh and store nothing."),
    cache_dir: Path | None = CacheDirOpt,
    keep_going: bool = typer.Option(
        False, "--keep-going", help="A transform that cannot be fitted leaves its cells empty instead of stopping the run."
    ),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show progress bars (default: only on a terminal)."
    ),
    pooling_stats: str | None = PoolingStatsOpt,
    force: bool = ForceOpt,
    retrieval: Path | None = rcli.RetrievalOpt,
    kind: list[str] | None = rcli.KindOpt,
) -> None:
    """Spearman x 100 on STS tasks for every pooling x calibration (the papers' table layout), or search quality (--retrieval)."""
    from rich.console import Console

    from ..evaluation import check_results_output, evaluate

    if retrieval is not None or kind:  # search quality: its own harness (isotropy.retrieval)
        return rcli.eval_retrieval(retrieval, dict(locals()))
    max_length = 64 if max_length is None else max_length
    if out is not None:
        check_results_output(out, force=force, inputs=[data, model, pooling_stats, fit_on])
    results = evaluate(
        task or None,
        data=data,
        model=model,
        poolings=pooling or None,
        methods=method or ("raw", "whitening"),
        fit_on=fit_on,
        aggregate=aggregate,
        max_length=max_length,
        batch_size=batch_size,
        shrinkage=shrinkage,
        cache=False if no_cache else (cache_dir if cache_dir is not None else True),
        show_progress=progress,
        errors="record" if keep_going else "raise",
        encoder=eval_encoder(model, pooling, max_length, batch_size, pooling_stats),
    )
    Console().print(results.rich_table())
    if out is not None:
        json_path, md_path = results.save(out, force=force)
        typer.echo(f"wrote {json_path} and {md_path}", err=True)


index_app = typer.Typer(help="Build and extend a semantic-search index (encoder -> whitening -> faiss).", no_args_is_help=True)
app.add_typer(index_app, name="index")


@index_app.command("build")
def index_build(
    corpus: Path = typer.Argument(..., help="UTF-8 text file, one sentence a line; a sentence's id is its line number - 1."),
    output: str = typer.Option(..., "--output", "-o", help="Index folder to write (an existing index is replaced atomically)."),
    model: str | None = ModelOpt,
    pooling: str | None = PoolingOpt,
    max_length: int | None = MaxLenOpt,
    transform: Path | None = typer.Option(
        None,
        "--transform",
        help="A fitted transform folder (whitening or flow) to apply instead of fitting a whitening on the corpus.",
    ),
    whiten: int | None = typer.Option(
        None,
        "--whiten",
        help="Whitening fitted on the corpus, keeping K dimensions (default: soft whitening, power 0.5, to 128 dims -- fewer on a corpus of <= 128 sentences; see docs/BENCHMARKS.md 'search').",
    ),
    power: float | None = typer.Option(None, "--power", help="Power of that whitening: 1 full, 0.5 soft (default), 0 PCA only."),
    no_whiten: bool = typer.Option(False, "--no-whiten", help="Index the raw encoder vectors (L2-normalised)."),
    method: str | None = typer.Option(
        None,
        "--method",
        help="auto: compare candidate calibrations on the corpus (label-free) and index with the choice, raw unless one is better; the evidence is printed and saved in the index (docs/AUTO.md).",
    ),
    candidates: str | None = typer.Option(
        None, "--candidates", help="--method auto: the candidates, comma-separated (raw,center,abtt-4,soft-0.5,...)."
    ),
    kind: str = typer.Option("flat", "--kind", help="flat (exact), hnsw or ivf (approximate)."),
    hnsw_m: int = typer.Option(32, "--hnsw-m", help="hnsw: links per node."),
    ef_construction: int = typer.Option(200, "--ef-construction", help="hnsw: build-time beam width."),
    ef_search: int = typer.Option(64, "--ef-search", help="hnsw: query-time beam width (also settable per search)."),
    nlist: int | None = typer.Option(
        None, "--nlist", help="ivf: number of lists, trained on the corpus (default min(4 sqrt(n), n/39))."
    ),
    nprobe: int = typer.Option(16, "--nprobe", help="ivf: lists visited per query (also settable per search)."),
    batch_size: int = BatchOpt,
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show progress bars (default: only on a terminal)."
    ),
    pooling_stats: str | None = PoolingStatsOpt,
    force: bool = ForceOpt,
    allow_other_encoder: bool = AllowOtherOpt,
    eval_queries: Path | None = rcli.EvalQueriesOpt,
    qrels: Path | None = rcli.QrelsOpt,
) -> None:
    """Index a sentence file for semantic search."""
    from ..files import build_index

    auto = _index_method(method, candidates, transform=transform, whiten=whiten, power=power, no_whiten=no_whiten)
    judged = rcli.index_eval_task(corpus, eval_queries, qrels)
    index = (auto or build_index)(
        corpus,
        output,
        model=model,
        pooling=pooling,
        max_length=max_length,
        **(
            {"candidates": candidates}
            if auto
            else {"transform": transform, "whiten": whiten, "power": power, "no_whiten": no_whiten}
        ),
        kind=kind,
        batch_size=batch_size,
        show_progress=progress,
        m=hnsw_m,
        ef_construction=ef_construction,
        ef_search=ef_search,
        nlist=nlist,
        nprobe=nprobe,
        force=force,
        pooling_stats=pooling_stats,
        **({} if auto else {"allow_other_encoder": allow_other_encoder}),
    )
    for warning in index.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if index.selection:
        from ..selection import Selection

        typer.echo(Selection.from_dict(index.selection).table(), err=True)
    typer.echo(f"wrote index of {index.describe()} to {output}", err=True)
    rcli.report_index_eval(index, judged, progress)


def _index_method(method: str | None, candidates: str | None, **others: object):
    """``isotropy.search.build_auto_index`` for ``--method auto`` (None: the other options decide)."""
    from ..errors import IsotropyError

    if method is None:
        if candidates is not None:
            raise IsotropyError("--candidates applies to --method auto only")
        return None
    if method != "auto":
        raise IsotropyError(f"index build --method takes auto only, not {method!r}; use --transform or --whiten for a fixed one")
    given = [f"--{k.replace('_', '-')}" for k, v in others.items() if v not in (None, False)]
    if given:
        raise IsotropyError(f"--method auto chooses the calibration itself: drop {', '.join(given)}")
    from ..files import build_auto_index

    return build_auto_index


@index_app.command("add")
def index_add(
    index_dir: Path = typer.Argument(..., help="Index folder written by 'isotropy index build'."),
    more: Path = typer.Argument(..., help="UTF-8 text file of sentences to add, one a line (ids continue after the last one)."),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show progress bars (default: only on a terminal)."
    ),
) -> None:
    """Add sentences to an index, encoded exactly like its corpus; the folder is rewritten atomically."""
    from ..files import add_to_index

    index, added = add_to_index(index_dir, more, show_progress=progress)
    typer.echo(f"added {added} sentences; {index_dir} now holds {len(index)}", err=True)


@app.command()
def search(
    index_dir: Path = typer.Argument(..., help="Index folder written by 'isotropy index build'."),
    query: list[str] | None = typer.Argument(None, help="Query sentence(s)."),
    queries: Path | None = typer.Option(None, "--queries", "-q", help="UTF-8 file of queries, one a line (batch mode)."),
    k: int = typer.Option(10, "-k", "--top-k", help="Hits per query."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    ef_search: int | None = typer.Option(None, "--ef-search", help="hnsw: query-time beam width (default: the index's)."),
    nprobe: int | None = typer.Option(None, "--nprobe", help="ivf: lists visited per query (default: the index's)."),
) -> None:
    """Find the sentences of an index most similar to each query (cosine after the index's transform)."""
    from ..files import search_index
    from ..search import format_results

    results = search_index(index_dir, query, queries, k=k, ef_search=ef_search, nprobe=nprobe)
    if results.warning:
        typer.echo(f"warning: {results.warning}", err=True)
    t = results.timings or {}
    typer.echo(f"loaded the index and model in {t.get('load_s', 0):.2f} s, searched in {t.get('search_s', 0):.3f} s", err=True)
    typer.echo(results.to_json() if as_json else format_results(results))


register_serve_command(app)


@app.command("analyze")
def analyze_cmd(
    corpus: str = typer.Argument(
        ..., help="UTF-8 text file, one sentence a line ('-' for standard input); blank lines are skipped."
    ),
    output: str = typer.Option(
        ..., "--output", "-o", help="Report folder: report.json, report.md and PNG figures, written atomically."
    ),
    model: str | None = ModelOpt,
    pooling: str | None = PoolingOpt,
    max_length: int | None = MaxLenOpt,
    batch_size: int = BatchOpt,
    transform: list[Path] | None = typer.Option(
        None, "--transform", "-t", help="Folder of a fitted transform (whitening or flow) to show 'after', repeatable."
    ),
    auto_whiten: bool = typer.Option(
        True,
        "--auto-whiten/--no-auto-whiten",
        help="Without --transform, fit a whitening on the corpus itself to show 'after' (in-sample).",
    ),
    word_level: bool = typer.Option(
        True,
        "--word-level/--no-word-level",
        help="Also analyse the model's token-embedding matrix by frequency rank in the corpus (BERT-flow paper, Table 1).",
    ),
    pairs: int = typer.Option(10000, "--pairs", help="Random sentence (and token) pairs for the average cosine."),
    max_sentences: int | None = typer.Option(
        None, "--max-sentences", help="Encode a seeded sample of this many lines (default: all); token counts use every line."
    ),
    unseen_tokens: str = typer.Option(
        "last",
        "--unseen-tokens",
        help="Tokens absent from the corpus: 'last' (ranked after the seen ones, in seeded random order) or 'drop'.",
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of every random sample (pairs, projections, kNN queries)."),
    recommend: bool = typer.Option(
        False,
        "--recommend",
        help="Also compare --method auto's candidate calibrations on the corpus (about three more encodings).",
    ),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show progress bars (default: only on a terminal)."
    ),
    force: bool = ForceOpt,
    allow_other_encoder: bool = AllowOtherOpt,
) -> None:
    """Diagnose anisotropy: average cosine, isotropy scores, spectrum, figures; before and after calibration."""
    from rich.console import Console

    from ..analysis import analyze_file, rich_tables

    report = analyze_file(
        corpus,
        output,
        model=model,
        pooling=pooling,
        max_length=max_length,
        batch_size=batch_size,
        transforms=transform or (),
        auto_whiten=auto_whiten,
        word_level=word_level,
        n_pairs=pairs,
        max_sentences=max_sentences,
        unseen_tokens=unseen_tokens,
        seed=seed,
        recommend=recommend,
        show_progress=progress,
        force=force,
        allow_other_encoder=allow_other_encoder,
    )
    console = Console()
    for table in rich_tables(report):
        console.print(table)
    if report.get("recommendation"):
        typer.echo(report["recommendation"]["paragraph"].replace("**", "").replace("`", ""))
    typer.echo(f"wrote {Path(output) / 'report.md'} (+ report.json and {len(report['figures'])} figures)", err=True)


export_app = typer.Typer(help="Export an encoder (+ pooling + fitted transform) for other runtimes.", no_args_is_help=True)
app.add_typer(export_app, name="export")


@export_app.command("onnx")
def export_onnx_cmd(
    output: str = typer.Option(
        ...,
        "--output",
        "-o",
        help="Folder to write: model.onnx (token ids -> calibrated vectors, dynamic batch and sequence axes), isotropy_onnx.json and the tokenizer files. Run it with Encoder(model=FOLDER, backend='onnx').",
    ),
    model: str | None = ModelOpt,
    pooling: str | None = PoolingOpt,
    max_length: int | None = MaxLenOpt,
    transform: Path | None = typer.Option(
        None,
        "--transform",
        "-t",
        help="Folder of a fitted transform (whitening or flow) to bake into the graph; its input dimension must match the encoder's.",
    ),
    quantize: str | None = typer.Option(
        None,
        "--quantize",
        help="int8: onnxruntime dynamic quantization of the encoder's weights (faster on CPU, slightly less exact).",
    ),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show a progress bar (default: only on a terminal)."
    ),
    pooling_stats: str | None = PoolingStatsOpt,
    force: bool = ForceOpt,
) -> None:
    """Export encoder + pooling (+ transform) as one ONNX graph, with its tokenizer beside it."""
    from ..integrations import export_onnx

    out = export_onnx(
        output,
        model=model,
        pooling=pooling,
        max_length=max_length,
        transform=transform,
        quantize=quantize,
        show_progress=progress,
        force=force,
        pooling_stats=pooling_stats,
    )
    typer.echo(f"wrote {out}/model.onnx (+ tokenizer, isotropy_onnx.json)", err=True)
