"""Static encode speed: isotropy's static backend vs model2vec's own ``encode`` vs the teacher transformer, in one run.

    .venv/bin/python bench/static_speed.py               # writes docs/BENCHMARKS.md, section "static-speed"
    .venv/bin/python bench/static_speed.py --no-write    # print only
    .venv/bin/python bench/static_speed.py --n 5000 --repeats 1 --no-write   # a smoke run

Workload: ``--n`` sentences (default 100,000): the STS-B sentences (all splits) repeated and shuffled
(seed 0). The static table is GloVe 6B 50d (``glove-6b-50d``, 400k words) saved as a model2vec folder, so
both static encoders run the very same table and tokenizer; by default ``--distill`` is off (a distilled
subword model is the same arithmetic on another table). Timed, each in turns within a round (so load from
other users of the machine hits all alike), median of ``--repeats`` rounds:

* ours     -- ``isotropy.Encoder(folder)`` (the static backend: Rust tokenizer, one sparse product per chunk)
* model2vec -- ``StaticModel.from_pretrained(folder).encode`` with its defaults (threads over batches above 10k)
* teacher  -- the default transformer (all-MiniLM-L6-v2, last-avg, max_length 128, batch 64) on a subsample of
  ``--teacher-n`` sentences (it is too slow for all of them), rate extrapolated per sentence.

Peak memory: ``tracemalloc``'s peak of Python and numpy allocations during one encode (the Rust tokenizer's
and torch's own allocations are not traced, so the teacher's figure is a lower bound).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import DATA, machine, update_section  # noqa: E402


def _timed(fn, sentences):
    t0 = time.perf_counter()
    out = fn(sentences)
    return time.perf_counter() - t0, out


def _peak(fn, sentences) -> float:
    tracemalloc.start()
    fn(sentences)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--teacher-n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    import numpy as np
    from model2vec import StaticModel

    from isotropy import Encoder
    from isotropy.evaluation import load_stsb

    task = load_stsb(DATA / "sts" / "STSBenchmark")
    base = list(dict.fromkeys(s for p in task.pairs() for s in (p.s1, p.s2)))
    rng = random.Random(0)
    sents = [base[i % len(base)] for i in range(args.n)]
    rng.shuffle(sents)
    teacher_sents = sents[: args.teacher_n]

    glove = Encoder("glove-6b-50d").model
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "glove-m2v"
        StaticModel(np.asarray(glove.vectors), glove.tokenizer, normalize=False).save_pretrained(folder)
        ours_enc = Encoder(str(folder))
        m2v = StaticModel.from_pretrained(folder)
        teacher = Encoder(None, pooling="last-avg", max_length=128, batch_size=64, device="cpu")
        pipes = {
            "ours": lambda s: ours_enc.encode(s, show_progress=False),
            "model2vec": lambda s: m2v.encode(s),
            "teacher": lambda s: teacher.encode(s, show_progress=False),
        }
        inputs = {"ours": sents, "model2vec": sents, "teacher": teacher_sents}
        ours_out = pipes["ours"](sents[:2000])
        cos = (ours_out * m2v.encode(sents[:2000])).sum(1)
        norms = np.linalg.norm(ours_out, axis=1) * np.linalg.norm(m2v.encode(sents[:2000]), axis=1)
        agree = float(np.min(np.where(norms > 0, cos / np.where(norms > 0, norms, 1), 1.0)))
        for fn in pipes.values():  # warm-up: first-call costs (threads, tokenizer, torch kernels) are not timed
            fn(sents[:256])
        times: dict[str, list[float]] = {k: [] for k in pipes}
        for r in range(args.repeats):
            for name, fn in pipes.items():
                t, _ = _timed(fn, inputs[name])
                times[name].append(t)
                print(f"round {r + 1} {name}: {t:.2f} s", file=sys.stderr)
        peaks = {name: _peak(fn, inputs[name]) for name, fn in pipes.items()}
    rate = {k: len(inputs[k]) / statistics.median(v) for k, v in times.items()}
    rows = [
        "| encoder | sentences timed | median wall time (s) | sentences/s | ours vs it | peak traced memory (MiB) |",
        "|---|---|---|---|---|---|",
    ]
    for name in pipes:
        ratio = rate["ours"] / rate[name]
        rows.append(
            f"| {name} | {len(inputs[name]):,} | {statistics.median(times[name]):.2f} | {rate[name]:,.0f} | "
            f"{ratio:.2f}x | {peaks[name]:.0f} |"
        )
    vs_m2v, vs_teacher = rate["ours"] / rate["model2vec"], rate["ours"] / rate["teacher"]
    verdict = (
        f"Targets: >= 1.0x model2vec: **{vs_m2v:.2f}x** ({'met' if vs_m2v >= 1.0 else 'MISSED'}); "
        f">= 50x the teacher: **{vs_teacher:.0f}x** ({'met' if vs_teacher >= 50 else 'MISSED'})."
    )
    md = "\n".join(
        [
            "## Static encode speed (#23)",
            "",
            f"`bench/static_speed.py`: {args.n:,} sentences (STS-B's, repeated and shuffled), GloVe 6B 50d as a model2vec "
            f"folder for both static encoders, median of {args.repeats} rounds taken in turns; the teacher "
            f"(all-MiniLM-L6-v2, last-avg, max_length 128) timed on the first {args.teacher_n:,} sentences only. "
            f"Our vectors agree with model2vec's to cosine >= {agree:.7f} (on 2,000 sentences). {machine()}.",
            "",
            *rows,
            "",
            verdict,
            "",
            "Peak memory is tracemalloc's (Python and numpy allocations; not the Rust tokenizer's, not torch's).",
        ]
    )
    print(md)
    if not args.no_write:
        update_section("BENCHMARKS.md", "static-speed", md)


if __name__ == "__main__":
    main()
