"""``isotropy demo``: the main job on the embedded default model, with a corpus made on the spot.

No downloaded data: the corpus is generated from templates (subject, action,
place), and sentence pairs get a gold similarity equal to the number of slots
they share (0-3), so the demo can score raw and calibrated vectors the way the
STS benchmarks do, in a few seconds.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SUBJECTS = [
    ["A man", "A guy"],
    ["A woman", "A lady"],
    ["A child", "A kid"],
    ["The chef", "The cook"],
    ["A dog", "A puppy"],
    ["Two friends", "A pair of friends"],
    ["An old farmer", "An elderly farmer"],
    ["A student", "A young pupil"],
]
ACTIONS = [
    ["is playing the guitar", "plays the guitar"],
    ["is cooking dinner", "is preparing a meal"],
    ["is reading a book", "reads a novel"],
    ["is riding a bicycle", "rides a bike"],
    ["is painting a picture", "paints a picture"],
    ["is eating an apple", "eats an apple"],
    ["is running", "is jogging"],
    ["is sleeping", "is taking a nap"],
    ["is swimming", "swims"],
    ["is talking on the phone", "is making a phone call"],
]
PLACES = [
    ["in the park", "at the park"],
    ["in the kitchen", "inside the kitchen"],
    ["on the beach", "by the sea"],
    ["in the garden", "out in the garden"],
    ["at the station", "at the train station"],
    ["in a small room", "in a tiny room"],
    ["near the river", "by the river"],
]


# Queries the demo searches for: paraphrases the templates never produce word for word.
DEMO_QUERIES = ["Someone strums a guitar outdoors.", "A cook makes food in the kitchen.", "A puppy naps near the water."]


@dataclass
class DemoData:
    corpus: list[str]
    pairs: list[tuple[str, str, float]]


def _sentence(rng: random.Random, s: int, a: int, p: int) -> str:
    return f"{rng.choice(SUBJECTS[s])} {rng.choice(ACTIONS[a])} {rng.choice(PLACES[p])}."


def make_demo_data(n_corpus: int = 600, n_pairs: int = 400, seed: int = 0) -> DemoData:
    """A generated corpus and scored pairs (gold = number of shared slots, 0-3)."""
    rng = random.Random(seed)
    slots = lambda: (rng.randrange(len(SUBJECTS)), rng.randrange(len(ACTIONS)), rng.randrange(len(PLACES)))  # noqa: E731
    unique: dict[str, None] = {}
    while len(unique) < n_corpus:  # distinct sentences (the templates allow thousands)
        unique[_sentence(rng, *slots())] = None
    corpus = list(unique)
    pairs = []
    for i in range(n_pairs):
        first = slots()
        shared = i % 4  # balanced gold scores 0..3
        keep = set(rng.sample(range(3), shared))
        second = tuple(
            first[j] if j in keep else rng.choice([v for v in range(n) if v != first[j]])
            for j, n in enumerate((len(SUBJECTS), len(ACTIONS), len(PLACES)))
        )
        pairs.append((_sentence(rng, *first), _sentence(rng, *second), float(shared)))
    return DemoData(corpus, pairs)


def run_demo(output: str | Path = "demo-output", seed: int = 0, *, force: bool = False) -> dict:
    """Encode, calibrate and score the generated data; write artefacts under ``output``.

    Returns the numbers it printed (Spearman x 100 per pooling and method, average cosine of
    random pairs), so tests can check the demo's claims.
    """
    from rich.console import Console

    from .encoders import Encoder
    from .storage.artifacts import check_output

    console = Console() if Console().is_terminal else Console(width=120)  # logs: no wrapped tables
    # fail before any work when the folder cannot be made, or holds anything but an earlier demo's output
    output = check_output(output, "demo", force=force)
    output.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    data = make_demo_data(seed=seed)
    console.print(
        f"[bold]isotropy demo[/bold]: a generated corpus of {len(data.corpus)} sentences and "
        f"{len(data.pairs)} scored pairs (gold = shared subject/action/place slots, 0-3)"
    )
    encoder = Encoder(max_length=64)
    console.print(f"encoder: {encoder.describe()}")
    poolings = ["cls", "last-avg", "first-last-avg"]
    texts = data.corpus + [a for a, _, _ in data.pairs] + [b for _, b, _ in data.pairs]
    vectors = encoder.encode_multi(texts, poolings)
    console.print(f"encoded {len(texts)} sentences x {len(poolings)} poolings in {time.perf_counter() - t0:.1f} s")

    results, whitenings = _score_poolings(console, data, vectors, poolings, seed)
    whitenings["cls"]["whitening"].save(output / "whitening-cls")
    results["whitening_dir"] = str(output / "whitening-cls")
    console.print(f"fitted whitening (cls pooling) saved to {output / 'whitening-cls'}")
    results["auto"], selections = _auto(console, data, encoder, vectors, ["cls", "last-avg"], seed)
    sel = selections.get(encoder.pooling, True)  # the report's recommendation: the selection just shown
    results["report"] = _report(console, data, encoder, whitenings[encoder.pooling]["whitening"], output, sel)
    results["search"] = _search(console, data, encoder, vectors[encoder.pooling][: len(data.corpus)], output)
    results["calibrated"] = _calibrated_model(console, data, output)
    results["seconds"] = time.perf_counter() - t0
    console.print(f"demo finished in {results['seconds']:.1f} s; artefacts in {output}/")
    return results


def _methods(seed: int) -> dict:
    # A templated corpus repeats its words, so its covariance is close to singular:
    # Ledoit-Wolf shrinkage keeps the whitening stable (the STS tables need none).
    from .transforms.flow import Flow
    from .transforms.whitening import Whitening

    return {
        "raw": None,
        "whitening": lambda: Whitening(shrinkage="auto"),
        "whitening-128": lambda: Whitening(n_components=128, shrinkage="auto"),
        "soft-whitening-0.5": lambda: Whitening(power=0.5, shrinkage="auto"),
        "flow": lambda: Flow(seed=seed),
    }


def _score_poolings(console, data: DemoData, vectors: dict, poolings: list[str], seed: int) -> tuple[dict, dict]:
    """Spearman x 100 of every method on every pooling (transforms fitted on the corpus), as a table."""
    from rich.table import Table

    from ._math import cosine_rows
    from .errors import IsotropyError
    from .evaluation.metrics import spearman
    from .transforms.whitening import Whitening

    methods = _methods(seed)
    n, m = len(data.corpus), len(data.pairs)
    gold = np.array([g for _, _, g in data.pairs])
    i, j = np.random.default_rng(seed).integers(0, n, size=(2, 2000))
    results: dict = {"spearman": {}, "avg_cosine": {}}
    whitenings: dict = {}
    table = Table(title="Spearman x 100 on the generated pairs (transforms fitted on the corpus)")
    table.add_column("pooling")
    for name in methods:
        table.add_column(name, justify="right")
    table.add_column("avg cos raw -> whitened", justify="right")
    for pooling in poolings:
        X = vectors[pooling]
        corpus, a, b = X[:n], X[n : n + m], X[n + m :]
        row, fitted = {}, {}
        for name, make in methods.items():
            try:
                t = fitted[name] = make().fit(corpus) if make is not None else None
            except IsotropyError as exc:  # pragma: no cover - shown, not fatal
                console.print(f"[yellow]{pooling}/{name}: {exc}")
                continue
            row[name] = spearman(cosine_rows(a, b) if t is None else cosine_rows(t.transform(a), t.transform(b)), gold)
        if fitted.get("whitening") is None:  # the report and the saved folder need one even if its column failed
            fitted["whitening"] = Whitening(shrinkage="auto").fit(corpus)
        whitenings[pooling] = fitted
        w = fitted["whitening"].transform(corpus)
        cos_raw, cos_w = float(cosine_rows(corpus[i], corpus[j]).mean()), float(cosine_rows(w[i], w[j]).mean())
        results["spearman"][pooling] = row
        results["avg_cosine"][pooling] = {"raw": cos_raw, "whitening": cos_w}
        table.add_row(pooling, *(f"{row.get(k, float('nan')):.2f}" for k in methods), f"{cos_raw:.2f} -> {cos_w:.2f}")
    console.print(table)
    for pooling, row in results["spearman"].items():
        best = max(row, key=row.get)
        verdict = "helps" if row.get("whitening", -1e9) > row["raw"] else "hurts"
        console.print(
            f"{pooling}: best is {best} ({row[best]:.2f}); full whitening {verdict} here "
            f"({row['raw']:.2f} -> {row.get('whitening', float('nan')):.2f}); average cosine of random "
            f"pairs {results['avg_cosine'][pooling]['raw']:.2f} raw, "
            f"{results['avg_cosine'][pooling]['whitening']:.2f} whitened"
        )
    return results, whitenings


def _auto(console, data: DemoData, encoder, vectors: dict, poolings: list[str], seed: int) -> tuple[dict, dict]:
    """``--method auto`` (label-free) on the corpus for each pooling: the evidence table, and what its choice scores."""
    import copy

    from ._math import cosine_rows
    from .evaluation.metrics import spearman
    from .selection import select_calibration

    n, m = len(data.corpus), len(data.pairs)
    gold = np.array([g for _, _, g in data.pairs])
    out, selections = {}, {}
    for pooling in poolings:
        t0 = time.perf_counter()
        enc = copy.copy(encoder)
        enc.pooling = pooling  # the same model read with this pooling (the criteria encode perturbed copies)
        X = vectors[pooling]
        sel = select_calibration(X[:n], data.corpus, encoder=enc, seed=seed, source="the demo corpus", show_progress=False)
        t = sel.transform
        a, b = (X[n : n + m], X[n + m :]) if t is None else (t.transform(X[n : n + m]), t.transform(X[n + m :]))
        raw = spearman(cosine_rows(X[n : n + m], X[n + m :]), gold)
        got = spearman(cosine_rows(a, b), gold)
        console.print(f"\n[bold]--method auto[/bold] on {pooling} pooling (no labels used):")
        console.print(sel.table(), markup=False, highlight=False)
        console.print(
            f"{pooling}: auto chose {sel.choice} in {time.perf_counter() - t0:.1f} s; on the scored pairs (which auto did "
            f"not see) {raw:.2f} raw -> {got:.2f}"
        )
        out[pooling] = {"choice": sel.choice, "p_beats_raw": sel.p_beats_raw, "raw": raw, "auto": got, "mode": sel.mode}
        selections[pooling] = sel
    return out, selections


def _report(console, data: DemoData, encoder, whitening, output: Path, recommend=True) -> str:
    from .analysis import analyze

    report = analyze(data.corpus, encoder, {"whitening": whitening}, output / "analysis", quiet=True, recommend=recommend)
    console.print(
        f"anisotropy report ({encoder.pooling} pooling, before and after whitening): {Path(report['path']) / 'report.md'}"
    )
    if report.get("recommendation"):
        console.print(f"its recommendation: {report['recommendation']['paragraph']}", markup=False, highlight=False)
    return report["path"]


def _search(console, data: DemoData, encoder, own: np.ndarray, output: Path) -> dict:
    """Semantic search over the corpus: soft whitening to 128 dims (the `index build` default), exact faiss index."""
    from .search import Index
    from .transforms.whitening import Whitening

    index = Index(encoder, transform=Whitening(n_components=128, power=0.5, shrinkage="auto"))
    index.add_encoded(data.corpus, own)  # reuse the vectors encoded above
    index.save(output / "index")
    hits = index.search(DEMO_QUERIES, k=3)
    for i, q in enumerate(DEMO_QUERIES):
        console.print(f"search {q!r}:")
        for hit in hits.hits(i):
            console.print(f"   {hit['score']:.3f}  {hit['text']}")
    console.print(f'index ({index.describe()}) saved to {output / "index"}; try: isotropy search {output / "index"} "a query"')
    return {q: hits.hits(i) for i, q in enumerate(DEMO_QUERIES)}


def _calibrated_model(console, data: DemoData, output: Path) -> dict:
    """`isotropy calibrate` on the corpus, then the folder loaded by plain sentence-transformers (stock modules only)."""
    from sentence_transformers import SentenceTransformer

    from .calibration import run_calibration
    from .encoders.models import quiet_transformers

    # Ledoit-Wolf shrinkage, as above: the templated corpus's covariance is close to singular
    c = run_calibration(data.corpus, output / "calibrated", max_length=64, shrinkage="auto", show_progress=False)
    with quiet_transformers():
        model = SentenceTransformer(str(c.path), device="cpu")  # what any sentence-transformers user runs
    got = model.encode(DEMO_QUERIES)
    diff = float(np.abs(got - c.transform.transform(c.encoder.encode(DEMO_QUERIES))).max())
    pair = ["A man is playing the guitar in the park.", "A guy plays the guitar at the park."]
    u = model.encode(pair)
    cosine = float(u[0] @ u[1] / (np.linalg.norm(u[0]) * np.linalg.norm(u[1])))
    chain = " -> ".join(type(m).__name__ for m in model)
    console.print(
        f"calibrated model ({c.info['method']}, fitted on {c.info['fit']['n_sentences']} sentences) written to "
        f"{c.path}: {chain}; plain SentenceTransformer({str(c.path)!r}) loads it, no isotropy or trust_remote_code "
        f"needed, and matches isotropy's vectors to {diff:.1e}; yours: isotropy calibrate corpus.txt -o my-model"
    )
    console.print(f"SentenceTransformer({str(c.path)!r}).encode({pair!r}): cosine {cosine:.3f}", markup=False, highlight=False)
    return {"path": str(c.path), "modules": chain, "max_abs_diff": diff, "stock": c.info["stock"], "cosine": cosine}
