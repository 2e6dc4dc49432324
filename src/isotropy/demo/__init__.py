"""``isotropy demo``: calibration where it pays, and where it does not, on the embedded models.

Two embedded models on the same sentences: GloVe 6B 50d averaged per sentence (a static model,
strongly anisotropic) and all-MiniLM-L6-v2 (a transformer trained for similarity). The static
model is calibrated on a corpus with ``isotropy calibrate`` (the whitening folded into its table,
so it runs at the same speed) and scored before and after on pairs the calibration never saw;
``--method auto`` looks at the transformer's vectors and keeps them raw, saying why. The demo
ends by loading the calibrated model with plain sentence-transformers, when its own figures say
that it pays (never a model they put below raw).

Its data (:mod:`.data`): the STS Benchmark on disk (``$ISOTROPY_DATA``, ``../shared/data``), else
from the Hugging Face hub (cached), else no scored pairs: then it says so and how to get them,
shows only the cone before and after on real sentences, and recommends nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from . import data as _data
from .data import DEMO_PAIRS, DemoData, find_stsb, make_demo_data

__all__ = ["run_demo", "demo_data", "find_stsb", "make_demo_data", "DemoData", "DEMO_PAIRS"]

TRANSFORMER_CORPUS = 500  # corpus sentences the transformer's auto reads (its encoding is the demo's cost)
PARAPHRASE = ["A man is playing the guitar in the park.", "A guy plays the guitar at the park."]


def demo_data(data=None, seed: int = 0) -> DemoData:
    """The demo's data (see :func:`isotropy.demo.data.demo_data`)."""
    return _data.demo_data(data, seed)


def run_demo(output: str | Path = "demo-output", seed: int = 0, *, force: bool = False, data: str | None = None) -> dict:
    """Calibrate the static model, let ``auto`` judge the transformer, score both on unseen pairs.

    Writes the calibrated static model under ``output`` and ``demo.json`` (what it printed);
    returns the numbers it printed (Spearman x 100, average cosine of random pairs, speeds), so
    tests can check its claims. Without scored pairs, no Spearman figure and no recommendation.
    """
    from rich.console import Console
    from rich.markup import escape

    from ..storage.artifacts import check_output
    from ..storage.atomic import atomic_file

    console = Console() if Console().is_terminal else Console(width=120)  # logs: no wrapped tables
    # fail before any work when the folder cannot be made, or holds anything but an earlier demo's output
    output = check_output(output, "demo", force=force)
    output.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    demo = demo_data(data, seed)
    console.print(
        f"[bold]isotropy demo[/bold] on {escape(demo.source)}: {len(demo.corpus)} corpus sentences, {len(demo.pairs)} scored pairs",
        highlight=False,
    )
    if demo.licence:
        console.print(f"  data licence: {demo.licence}", markup=False, highlight=False)
    if demo.missing:
        console.print(f"  {demo.missing}", markup=False, highlight=False)
    results: dict = {"source": demo.source, "licence": demo.licence, "scored": bool(demo.pairs), "missing": demo.missing}
    results["static"] = _static(console, demo, output, seed)
    results["transformer"] = _transformer(console, demo, seed)
    results["loaded"] = _verdict(console, results["static"])
    results["seconds"] = time.perf_counter() - t0
    with atomic_file(output / "demo.json", "w") as fh:  # the figures this run printed, and where they came from
        fh.write(json.dumps(results, indent=2, sort_keys=True) + "\n")
    console.print(f"demo finished in {results['seconds']:.1f} s; artefacts in {output}/", highlight=False)
    return results


def _pairs_score(vectors_a: np.ndarray, vectors_b: np.ndarray, gold: np.ndarray) -> float:
    from .._math import cosine_rows
    from ..evaluation.metrics import spearman

    return float(spearman(cosine_rows(vectors_a, vectors_b), gold))


def _random_pair_cosine(X: np.ndarray, seed: int) -> float:
    from .._math import cosine_rows

    i, j = np.random.default_rng(seed).integers(0, len(X), size=(2, 2000))
    keep = i != j
    return float(cosine_rows(X[i[keep]], X[j[keep]]).mean())


def _static(console, demo: DemoData, output: Path, seed: int) -> dict:
    """GloVe 6B 50d: raw, then `isotropy calibrate` (whitening folded into the table), scored as a user loads it."""
    from model2vec import StaticModel

    from ..calibration import run_calibration
    from ..encoders import Encoder

    enc = Encoder("glove-6b-50d")
    cone = demo.held_out or demo.corpus  # unscored: the cone is measured on sentences the calibration did not see
    t = time.perf_counter()
    raw_cone = enc.encode(cone, show_progress=False)
    speed = len(cone) / max(time.perf_counter() - t, 1e-9)
    cos_raw = _random_pair_cosine(raw_cone, seed)
    cal = run_calibration(demo.corpus, output / "static-model", model="glove-6b-50d", method="whitening", show_progress=False)
    model = StaticModel.from_pretrained(str(cal.path))  # the calibrated table, as model2vec loads it
    cos_after = _random_pair_cosine(model.encode(cone), seed)
    out = {"cos_raw": cos_raw, "cos_calibrated": cos_after, "speed": speed, "path": str(cal.path), "describe": enc.describe()}
    lines = [f"\n[bold]static model[/bold] ({enc.describe()}, {speed:,.0f} sentences/s here):"]
    if demo.pairs:
        a, b, gold = [p[0] for p in demo.pairs], [p[1] for p in demo.pairs], np.array([p[2] for p in demo.pairs])
        raw = _pairs_score(enc.encode(a, show_progress=False), enc.encode(b, show_progress=False), gold)
        after = _pairs_score(model.encode(a), model.encode(b), gold)
        out.update(raw=raw, calibrated=after)
        lines.append(
            f"  Spearman x 100 on the {len(a)} scored pairs: raw {raw:.2f} -> calibrated {after:.2f} ({after - raw:+.2f})"
        )
    where = "corpus pairs" if not demo.held_out else f"pairs of {len(cone)} sentences it was not fitted on"
    lines += [
        f"  average cosine of random {where}: {cos_raw:.2f} raw (a narrow cone) -> {cos_after:.2f}",
        f"  `isotropy calibrate` fitted whitening on the {len(demo.corpus)} corpus sentences (no scores) and folded it "
        f"into the table: {cal.path} (same size and speed as the raw model)",
    ]
    console.print("\n".join(lines), highlight=False)
    return out


def _transformer(console, demo: DemoData, seed: int) -> dict:
    """The default transformer: `--method auto` (label-free) on its corpus vectors, and the score it gets."""
    from ..encoders import Encoder
    from ..selection import select_calibration
    from ..transforms.whitening import Whitening

    corpus = demo.corpus[:TRANSFORMER_CORPUS]
    enc = Encoder()
    t = time.perf_counter()
    X = enc.encode(corpus, show_progress=False)
    speed = len(corpus) / max(time.perf_counter() - t, 1e-9)
    # the encoder tells auto its kind; without the sentences, no perturbed copies are encoded (the demo's minute)
    sel = select_calibration(X, encoder=enc, seed=seed, source=f"{len(corpus)} corpus sentences", show_progress=False)
    console.print(f"\n[bold]transformer[/bold] ({enc.describe()}, {speed:,.0f} sentences/s here):", highlight=False)
    console.print(sel.table(), markup=False, highlight=False)
    out = {"choice": sel.choice, "speed": speed, "mode": sel.mode}
    kept = "kept raw: this model is trained for similarity and calibration has little to fix"
    if not demo.pairs:
        verdict = kept if sel.choice == "raw" else f"would calibrate with {sel.choice}"
        console.print(
            f"  --method auto without labels: {verdict} (not judged here: no scored pairs)", markup=False, highlight=False
        )
        return out
    a, b, gold = [p[0] for p in demo.pairs], [p[1] for p in demo.pairs], np.array([p[2] for p in demo.pairs])
    A, B = enc.encode(a, show_progress=False), enc.encode(b, show_progress=False)
    raw = _pairs_score(A, B, gold)
    chosen = raw if sel.transform is None else _pairs_score(sel.transform.transform(A), sel.transform.transform(B), gold)
    w = Whitening(shrinkage="auto").fit(X)
    whitened = _pairs_score(w.transform(A), w.transform(B), gold)
    verdict = kept if sel.choice == "raw" else f"calibrated with {sel.choice} ({chosen - raw:+.2f} on the scored pairs)"
    console.print(
        f"  --method auto without labels: {verdict}; on the scored pairs raw {raw:.2f}, auto's choice {chosen:.2f}, "
        f"full whitening {whitened:.2f} ({whitened - raw:+.2f})",
        markup=False,
        highlight=False,
    )
    out.update(raw=raw, auto=chosen, whitening=whitened)
    return out


def _verdict(console, static: dict) -> dict:
    """The demo's last word: the calibrated static model to copy, only when its own figures say it pays."""
    from rich.markup import escape

    if "raw" not in static:
        console.print(
            "\n[bold]not judged[/bold]: without scored pairs the demo recommends no model. The calibrated folder "
            f"{escape(static['path'])} is written; judge it on scored pairs of your own text before using it:\n"
            "  isotropy eval --data pairs.tsv --model glove-6b-50d --method raw --method whitening   "
            "# pairs.tsv: sentence1, sentence2, score",
            highlight=False,
        )
        return {"recommended": False, "why": "no scored pairs"}
    if static["calibrated"] <= static["raw"]:
        console.print(
            f"\n[bold]not recommended[/bold]: on these pairs the calibrated model scores {static['calibrated']:.2f}, "
            f"below the raw model's {static['raw']:.2f}: keep glove-6b-50d raw here, or calibrate on a corpus of your "
            "own text and judge it on your own pairs (isotropy eval --data pairs.tsv ...)",
            highlight=False,
        )
        return {"recommended": False, "why": "calibrated scored below raw"}
    return {"recommended": True, **_copyable(console, static["path"])}


def _copyable(console, path: str) -> dict:
    """The calibrated static model loaded by plain sentence-transformers: what a user copies."""
    from sentence_transformers import SentenceTransformer

    from ..calibration.static_export import ST_SUBFOLDER
    from ..encoders.models import quiet_transformers

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
