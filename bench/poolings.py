"""The poolings of issue #14 on STS-B test, and what they cost to encode.

Setting: the default model (all-MiniLM-L6-v2), max_length 64 (the papers'), raw vectors, cosine similarity, Spearman x
100 on the 1,379 STS-B test pairs. The token frequencies of ``sif`` and ``idf`` are counted on every STS-B sentence
(train + dev + test, both sides: the ``target`` fit of the whitening papers; no label is read). Nothing here is tuned:
every pooling runs with its paper's defaults (``sif`` a = 1e-3; ``prompt`` the template ``This sentence : "[X]" means
[MASK] .``; ``ditto`` layer 0, head 9, which the Ditto authors chose for bert-base-uncased, not for this model).

Speed: sentences per second encoding the first 1,000 test sentences (batch 64, the torch backend on this machine's
CPU; the median of interleaved rounds), each pooling alone, and all of them in one ``encode_multi`` call (one pass per
input: plain, prompt template, eager attention).

    .venv/bin/python bench/poolings.py
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402

from _report import DATA, ROOT, Section, machine, median_time, pair_spearman  # noqa: E402

MAX_LENGTH = 64
POOLINGS = ["last-avg", "cls", "first-last-avg", "sif", "idf", "prompt", "prompt-denoised", "ditto"]
NEW = {"sif", "idf", "prompt", "prompt-denoised", "ditto"}
SPEED_ROWS = 1000
SECTION = Section(
    "BENCHMARKS.md",
    "poolings",
    lambda result: _render.poolings(result, POOLINGS, NEW, SPEED_ROWS),
    ROOT / "bench" / "results" / "poolings.json",
)


def main() -> None:
    parser = SECTION.parser(__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    args = parser.parse_args()
    if SECTION.rendered(args):
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from isotropy.encoders import Encoder
    from isotropy.evaluation import load_stsb

    task = load_stsb(DATA / "sts" / "STSBenchmark")
    test = task.pairs(["test"])
    every = [s for p in task.pairs() for s in (p.s1, p.s2)]
    sents = [p.s1 for p in test] + [p.s2 for p in test]
    gold = np.array([p.score for p in test])
    n = len(test)

    enc = Encoder(max_length=MAX_LENGTH).fit_pooling(every)
    vectors = enc.encode_multi(sents, POOLINGS, show_progress=False)
    scores = {p: round(pair_spearman(v[:n], v[n:], gold), 2) for p, v in vectors.items()}

    sample = sents[:SPEED_ROWS]
    # interleaved rounds (every pooling once per round, then the next round), medians: a busy shared machine
    # slows every pooling of a round alike, so the ratios to last-avg are what to read
    runs = {p: [p] for p in POOLINGS} | {"all in one encode_multi": POOLINGS}
    times: dict[str, list[float]] = {k: [] for k in runs}
    enc.encode_multi(sample[:64], POOLINGS, show_progress=False)  # warm-up
    for _ in range(args.rounds):
        for key, which in runs.items():
            t, _ = median_time(lambda which=which: enc.encode_multi(sample, which, show_progress=False), repeats=1)
            times[key].append(t)
    speed = {k: round(len(sample) / statistics.median(v), 1) for k, v in times.items()}
    relative = {k: round(v / speed["last-avg"], 2) for k, v in speed.items()}
    result = {
        "setting": f"default model, max_length {MAX_LENGTH}, raw cosine, STS-B test ({n} pairs); "
        f"token frequencies counted on all {len(every)} STS-B sentences",
        "spearman": scores,
        "sentences_per_second": speed,
        "relative_to_last_avg": relative,
        "rounds": args.rounds,
        "machine": machine(),
    }
    SECTION.publish(result, args)


if __name__ == "__main__":
    main()
