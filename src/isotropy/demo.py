"""``isotropy demo``: calibration where it pays, and where it does not, on the embedded models.

Two embedded models on the same sentences: GloVe 6B 50d averaged per sentence (a static model,
strongly anisotropic) and all-MiniLM-L6-v2 (a transformer trained for similarity). The static
model is calibrated on a corpus with ``isotropy calibrate`` (the whitening folded into its table,
so it runs at the same speed) and scored before and after on pairs the calibration never saw;
``--method auto`` looks at the transformer's vectors and keeps them raw, saying why. The demo
ends by loading the calibrated model with plain sentence-transformers.

Its data: the STS Benchmark when a copy is found (``$ISOTROPY_DATA`` or ``../shared/data``;
the calibration reads the train split's sentences, never their scores, and the scores of the
test split are what it is judged on), else a corpus generated from templates whose pairs share
0-3 of their subject, action and place slots (gold = the number shared).
"""

from __future__ import annotations

import os
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
    source: str = "a generated corpus"


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
    return DemoData(corpus, pairs, "a generated corpus (templates; gold = shared slots 0-3)")


def find_stsb(data: str | os.PathLike | None = None) -> Path | None:
    """The STS Benchmark folder: under ``data``, ``$ISOTROPY_DATA`` or ``../shared/data`` (from the working folder)."""
    for root in (data, os.environ.get("ISOTROPY_DATA"), Path.cwd().parent / "shared" / "data"):
        if root is None:
            continue
        for folder in (Path(root), Path(root) / "sts" / "STSBenchmark", Path(root) / "STSBenchmark"):
            if (folder / "sts-train.csv").is_file() and (folder / "sts-test.csv").is_file():
                return folder
    return None


def demo_data(data: str | os.PathLike | None = None, seed: int = 0) -> DemoData:
    """STS-B (corpus: the train split's sentences, no scores; pairs: the test split) when found, else generated."""
    folder = find_stsb(data)
    if folder is None:
        return make_demo_data(seed=seed)
    from .evaluation.tasks import load_stsb

    task = load_stsb(folder)
    corpus = list(dict.fromkeys(s for p in task.splits["train"] for s in (p.s1, p.s2)))
    test = task.splits["test"]
    step = max(1, len(test) // DEMO_PAIRS)
    pairs = [(p.s1, p.s2, p.score) for p in test[::step][:DEMO_PAIRS]]
    return DemoData(
        corpus,
        pairs,
        f"STS Benchmark ({folder}): the train split's sentences as the corpus, {len(pairs)} test pairs as the judge",
    )


# The demo's budget is a minute on 2 cores, and the transformer's encoding is its cost: at most this many
# scored pairs (spread evenly over the test split) and corpus sentences for the transformer's auto.
DEMO_PAIRS = 500
TRANSFORMER_CORPUS = 500
PARAPHRASE = ["A man is playing the guitar in the park.", "A guy plays the guitar at the park."]


def run_demo(output: str | Path = "demo-output", seed: int = 0, *, force: bool = False, data: str | None = None) -> dict:
    """Calibrate the static model, let ``auto`` judge the transformer, score both on unseen pairs.

    Writes the calibrated static model under ``output``; returns the numbers it printed
    (Spearman x 100, average cosine of random pairs, speeds), so tests can check its claims.
    """
    from rich.console import Console

    from .storage.artifacts import check_output

    console = Console() if Console().is_terminal else Console(width=120)  # logs: no wrapped tables
    # fail before any work when the folder cannot be made, or holds anything but an earlier demo's output
    output = check_output(output, "demo", force=force)
    output.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    demo = demo_data(data, seed)
    console.print(
        f"[bold]isotropy demo[/bold] on {demo.source}: {len(demo.corpus)} corpus sentences, {len(demo.pairs)} scored pairs"
    )
    results: dict = {"source": demo.source}
    results["static"] = _static(console, demo, output, seed)
    results["transformer"] = _transformer(console, demo, seed)
    results["loaded"] = _copyable(console, results["static"]["path"])
    results["seconds"] = time.perf_counter() - t0
    console.print(f"demo finished in {results['seconds']:.1f} s; artefacts in {output}/")
    return results


def _pairs_score(vectors_a: np.ndarray, vectors_b: np.ndarray, gold: np.ndarray) -> float:
    from ._math import cosine_rows
    from .evaluation.metrics import spearman

    return float(spearman(cosine_rows(vectors_a, vectors_b), gold))


def _random_pair_cosine(X: np.ndarray, seed: int) -> float:
    from ._math import cosine_rows

    i, j = np.random.default_rng(seed).integers(0, len(X), size=(2, 2000))
    keep = i != j
    return float(cosine_rows(X[i[keep]], X[j[keep]]).mean())


def _static(console, demo: DemoData, output: Path, seed: int) -> dict:
    """GloVe 6B 50d: raw, then `isotropy calibrate` (whitening folded into the table), scored as a user loads it."""
    from model2vec import StaticModel

    from .calibration import run_calibration
    from .encoders import Encoder

    a, b, gold = [p[0] for p in demo.pairs], [p[1] for p in demo.pairs], np.array([p[2] for p in demo.pairs])
    enc = Encoder("glove-6b-50d")
    t = time.perf_counter()
    A, B = enc.encode(a, show_progress=False), enc.encode(b, show_progress=False)
    speed = 2 * len(a) / max(time.perf_counter() - t, 1e-9)
    raw = _pairs_score(A, B, gold)
    cos_raw = _random_pair_cosine(enc.encode(demo.corpus, show_progress=False), seed)
    cal = run_calibration(demo.corpus, output / "static-model", model="glove-6b-50d", method="whitening", show_progress=False)
    model = StaticModel.from_pretrained(str(cal.path))  # the calibrated table, as model2vec loads it
    A2, B2 = model.encode(a), model.encode(b)
    after = _pairs_score(A2, B2, gold)
    cos_after = _random_pair_cosine(model.encode(demo.corpus), seed)
    console.print(
        f"\n[bold]static model[/bold] ({enc.describe()}, {speed:,.0f} sentences/s here):\n"
        f"  Spearman x 100 on the {len(a)} scored pairs: raw {raw:.2f} -> calibrated {after:.2f} ({after - raw:+.2f})\n"
        f"  average cosine of random corpus pairs: {cos_raw:.2f} raw (a narrow cone) -> {cos_after:.2f}\n"
        f"  `isotropy calibrate` fitted whitening on the {len(demo.corpus)} corpus sentences (no scores) and folded it "
        f"into the table: {cal.path} (same size and speed as the raw model)"
    )
    return {
        "raw": raw,
        "calibrated": after,
        "cos_raw": cos_raw,
        "cos_calibrated": cos_after,
        "speed": speed,
        "path": str(cal.path),
    }


def _transformer(console, demo: DemoData, seed: int) -> dict:
    """The default transformer: `--method auto` (label-free) on its corpus vectors, and the score it gets."""
    from .encoders import Encoder
    from .selection import select_calibration
    from .transforms.whitening import Whitening

    a, b, gold = [p[0] for p in demo.pairs], [p[1] for p in demo.pairs], np.array([p[2] for p in demo.pairs])
    corpus = demo.corpus[:TRANSFORMER_CORPUS]
    enc = Encoder()
    t = time.perf_counter()
    A, B = enc.encode(a, show_progress=False), enc.encode(b, show_progress=False)
    speed = 2 * len(a) / max(time.perf_counter() - t, 1e-9)
    X = enc.encode(corpus, show_progress=False)
    # the encoder tells auto its kind; without the sentences, no perturbed copies are encoded (the demo's minute)
    sel = select_calibration(X, encoder=enc, seed=seed, source=f"{len(corpus)} corpus sentences", show_progress=False)
    raw = _pairs_score(A, B, gold)
    chosen = raw if sel.transform is None else _pairs_score(sel.transform.transform(A), sel.transform.transform(B), gold)
    w = Whitening(shrinkage="auto").fit(X)
    whitened = _pairs_score(w.transform(A), w.transform(B), gold)
    console.print(f"\n[bold]transformer[/bold] ({enc.describe()}, {speed:,.0f} sentences/s here):")
    console.print(sel.table(), markup=False, highlight=False)
    verdict = (
        "kept raw: this model is trained for similarity and calibration has little to fix"
        if sel.choice == "raw"
        else f"calibrated with {sel.choice} ({chosen - raw:+.2f} on the scored pairs)"
    )
    console.print(
        f"  --method auto without labels: {verdict}; on the scored pairs raw {raw:.2f}, auto's choice {chosen:.2f}, "
        f"full whitening {whitened:.2f} ({whitened - raw:+.2f})",
        markup=False,
        highlight=False,
    )
    return {"choice": sel.choice, "raw": raw, "auto": chosen, "whitening": whitened, "speed": speed, "mode": sel.mode}


def _copyable(console, path: str) -> dict:
    """The calibrated static model loaded by plain sentence-transformers: what a user copies."""
    from sentence_transformers import SentenceTransformer

    from .calibration.static_export import ST_SUBFOLDER
    from .encoders.models import quiet_transformers

    folder = str(Path(path) / ST_SUBFOLDER)
    with quiet_transformers():
        model = SentenceTransformer(folder, device="cpu")  # no isotropy, no trust_remote_code
    u = model.encode(PARAPHRASE)
    cosine = float(u[0] @ u[1] / (np.linalg.norm(u[0]) * np.linalg.norm(u[1])))
    console.print("\n[bold]use it[/bold] (plain sentence-transformers, no isotropy needed):")
    console.print(
        f"  from sentence_transformers import SentenceTransformer\n"
        f"  model = SentenceTransformer({folder!r})\n"
        f"  model.encode({PARAPHRASE!r})   # cosine {cosine:.3f}\n"
        "  yours: isotropy calibrate your-corpus.txt -o my-model --model glove-6b-50d",
        markup=False,
        highlight=False,
    )
    return {"folder": folder, "cosine": cosine, "modules": " -> ".join(type(m).__name__ for m in model)}
