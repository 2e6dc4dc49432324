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
    from rich.table import Table

    from ._io import IsotropyError, check_output
    from .analysis import analyze
    from .encoding import Encoder
    from .evaluation import cosine_rows, spearman
    from .flow import Flow
    from .search import Index
    from .whitening import Whitening

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
    left = [a for a, _, _ in data.pairs]
    right = [b for _, b, _ in data.pairs]
    gold = np.array([g for _, _, g in data.pairs])
    texts = data.corpus + left + right
    vectors = encoder.encode_multi(texts, poolings)
    n, m = len(data.corpus), len(data.pairs)
    console.print(f"encoded {len(texts)} sentences x {len(poolings)} poolings in {time.perf_counter() - t0:.1f} s")

    # A templated corpus repeats its words, so its covariance is close to singular:
    # Ledoit-Wolf shrinkage keeps the whitening stable (the STS tables need none).
    methods = {
        "raw": None,
        "whitening": lambda: Whitening(shrinkage="auto"),
        "whitening-128": lambda: Whitening(n_components=128, shrinkage="auto"),
        "soft-whitening-0.5": lambda: Whitening(power=0.5, shrinkage="auto"),
        "flow": lambda: Flow(seed=seed),
    }
    whitenings = {}
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, n, size=(2, 2000))
    results: dict = {"spearman": {}, "avg_cosine": {}}
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
            if make is None:
                ta, tb = a, b
            else:
                try:
                    fitted[name] = t = make().fit(corpus)
                except IsotropyError as exc:  # pragma: no cover - shown, not fatal
                    console.print(f"[yellow]{pooling}/{name}: {exc}")
                    continue
                ta, tb = t.transform(a), t.transform(b)
            row[name] = spearman(cosine_rows(ta, tb), gold)
        whitenings[pooling] = fitted
        whitening = fitted.get("whitening") or Whitening(shrinkage="auto").fit(corpus)
        if pooling == "cls":
            whitening.save(output / "whitening-cls")
        cos_raw = float(cosine_rows(corpus[i], corpus[j]).mean())
        w = whitening.transform(corpus)
        cos_w = float(cosine_rows(w[i], w[j]).mean())
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
    results["whitening_dir"] = str(output / "whitening-cls")
    console.print(f"fitted whitening (cls pooling) saved to {output / 'whitening-cls'}")
    own = vectors[encoder.pooling][:n]
    report = analyze(
        data.corpus, encoder, {"whitening": whitenings[encoder.pooling]["whitening"]}, output / "analysis", quiet=True
    )
    results["report"] = report["path"]
    console.print(
        f"anisotropy report ({encoder.pooling} pooling, before and after whitening): "
        f"{Path(report['path']) / 'report.md'}"
    )

    # Semantic search over the corpus: soft whitening to 128 dims (the `index build` default), exact faiss index.
    index = Index(encoder, transform=Whitening(n_components=128, power=0.5, shrinkage="auto"))
    index.add_encoded(data.corpus, own)  # reuse the vectors encoded above
    index.save(output / "index")
    hits = index.search(DEMO_QUERIES, k=3)
    results["search"] = {q: hits.hits(i) for i, q in enumerate(DEMO_QUERIES)}
    for i, q in enumerate(DEMO_QUERIES):
        console.print(f"search {q!r}:")
        for hit in hits.hits(i):
            console.print(f"   {hit['score']:.3f}  {hit['text']}")
    console.print(f"index ({index.describe()}) saved to {output / 'index'}; try: isotropy search {output / 'index'} \"a query\"")
    results["seconds"] = time.perf_counter() - t0
    console.print(f"demo finished in {results['seconds']:.1f} s; artefacts in {output}/")
    return results
