"""Benchmark: ``isotropy analyze`` end to end, and the anisotropy numbers it reports on STS-B.

1. **Time.** The command on the embedded default model and a generated 1,000-line
   corpus, run as a subprocess (imports, model load, encoding, statistics, kNN over
   the 30,522-token vocabulary, five figures, report folder; the ``--recommend``
   comparison of auto's candidates is on request and not included): wall and CPU time
   (user + system of the child). Reference measured in the same run:
   ``isotropy encode`` of the same corpus -- loading the model and encoding, the floor
   no analysis can go below. Target (issue #25): at most 15 s on 2 cores.
2. **Numbers.** STS-B (train+dev+test, unique sentences), default model, ``cls`` and
   ``last-avg`` pooling, max_length 64: the sentence-level table, raw against
   whitening fitted on the same sentences (the papers' "target" setting), and the
   word-level table (BERT-flow paper, Table 1 layout) with STS-B as the corpus.
   The vectors come from the test suite's cache (``.cache/test-vectors``; encoded on
   the first run).

Writes the ``analysis`` section of docs/BENCHMARKS.md.

    .venv/bin/python bench/analysis.py              # both parts
    .venv/bin/python bench/analysis.py --no-write --skip-stsb
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import DATA, ROOT, machine, median_time, update_section  # noqa: E402
from isotropy import analysis as A  # noqa: E402

BIN = Path(sys.executable).parent
TARGET_S = 15  # issue #25: 1,000 lines in at most 15 s on 2 cores, default model


def make_corpus(n: int, seed: int = 1) -> list[str]:
    """The same template generator as tests/test_analysis.py."""
    rng = random.Random(seed)
    subj = [
        "the cat",
        "a dog",
        "my neighbour",
        "the old man",
        "a young girl",
        "the committee",
        "our teacher",
        "the river",
        "a small bird",
        "the company",
        "every student",
        "the pilot",
    ]
    verb = [
        "runs across",
        "looks at",
        "talks about",
        "walks past",
        "writes to",
        "sings for",
        "thinks about",
        "waits near",
        "paints",
        "builds",
        "forgets",
        "remembers",
    ]
    obj = [
        "the house",
        "a red car",
        "the green field",
        "an empty street",
        "the market",
        "a long letter",
        "the mountains",
        "a quiet garden",
        "the station",
        "a new song",
        "the bridge",
        "an old map",
    ]
    adv = [
        "in the morning",
        "quietly",
        "after dinner",
        "every day",
        "with great care",
        "before the storm",
        "at night",
        "slowly",
        "again",
        "for hours",
        "in winter",
        "without a word",
    ]
    return [f"{rng.choice(subj)} {rng.choice(verb)} {rng.choice(obj)} {rng.choice(adv)}." for _ in range(n)]


def run_timed(args: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def timing_section(lines: int, repeats: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(make_corpus(lines)) + "\n")
        cpu: dict[str, list[float]] = {"analyze": [], "encode": []}

        def analyze():
            cpu["analyze"].append(
                run_timed([str(BIN / "isotropy"), "analyze", str(corpus), "-o", f"{tmp}/report", "--no-progress"])[1]
            )

        def encode():
            cpu["encode"].append(
                run_timed([str(BIN / "isotropy"), "encode", str(corpus), "-o", f"{tmp}/v.npy", "--no-progress"])[1]
            )

        load0 = os.getloadavg()[0]
        t_enc, _ = median_time(encode, repeats)
        t_ana, _ = median_time(analyze, repeats)
        load1 = os.getloadavg()[0]
        import json

        timings = json.loads((Path(tmp) / "report" / "report.json").read_text())["meta"]["timings"]
    c_ana = sorted(cpu["analyze"])[len(cpu["analyze"]) // 2]
    c_enc = sorted(cpu["encode"])[len(cpu["encode"]) // 2]
    verdict = (
        "met"
        if t_ana <= TARGET_S
        else ("met on CPU time, not on wall time (the machine was shared)" if c_ana <= TARGET_S else "missed")
    )
    return "\n".join(
        [
            f"`isotropy analyze` on the default model and a generated {lines}-line corpus "
            f"(median of {repeats}; load average {load0:.1f} before, {load1:.1f} after"
            + (": the 2 cores were shared with other jobs)." if max(load0, load1) > 2.5 else ")."),
            "",
            "| command | wall s | CPU s (user+sys) | wall vs encode |",
            "|---|---:|---:|---:|",
            f"| `isotropy encode` (reference: load + encode) | {t_enc:.1f} | {c_enc:.1f} | 1.00 |",
            f"| `isotropy analyze` (everything, word level and figures included) | {t_ana:.1f} | {c_ana:.1f} | {t_ana / t_enc:.2f} |",
            "",
            "Inside the last analyze run (wall s): "
            + ", ".join(f"{k.removesuffix('_s')} {v:.1f}" for k, v in timings.items())
            + ".",
            "",
            f"Target (at most {TARGET_S} s on 2 cores): {verdict}"
            + (
                f" on this run, with the machine loaded (load average {max(load0, load1):.1f} on 2 cores): "
                "wall time here is mostly waiting for a core; the CPU time is the better guide, though contention inflates it too"
                if max(load0, load1) > 2.5 and t_ana > TARGET_S
                else ""
            )
            + ". Encoding dominates; the statistics are "
            "d x d eigenproblems computed once per representation and a sampled exact kNN "
            f"(at most {A.MAX_QUERIES} queries per rank bucket).",
        ]
    )


def stsb_section() -> str:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import _encode_cached  # the test suite's vector cache: same model, same key

    from isotropy.encoders import Encoder
    from isotropy.evaluation import load_stsb
    from isotropy.transforms.whitening import Whitening

    folder = DATA / "sts" / "STSBenchmark"
    task = load_stsb(folder)
    uniq = list(dict.fromkeys(s for p in task.pairs() for s in (p.s1, p.s2)))
    out = [
        f"STS-B, all {len(uniq)} unique sentences (train+dev+test), default model, max_length 64; "
        "whitening fitted on the same sentences (shrinkage 0, the papers' setting). 20,000 random pairs, seed 0.",
        "",
    ]
    import warnings

    for pooling in ("cls", "last-avg"):
        X = _encode_cached(uniq, pooling)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rank-deficient cls vectors: whitening drops the null directions
            w = Whitening().fit(X)
        rep = A.sentence_report(X, {"whitening": w}, n_pairs=20000)
        header, rows = A._sentence_rows(rep)
        out += [f"**Pooling `{pooling}`**", "", A._markdown(header, rows), ""]
    enc = Encoder(max_length=64)
    word = A.word_report(enc, uniq, n_pairs=20000)
    header, rows = A._word_rows(word)
    out += [
        f"**Word level** ({word['model']}, {word['ranked_tokens']} tokens ranked, {word['seen_tokens']} seen in STS-B, "
        f"{word['corpus_tokens']} token occurrences; unseen tokens last in random order; kNN over at most {word['max_queries']} "
        "queries per bucket):",
        "",
        A._markdown(header, rows),
        "",
        f"Random token pairs: average cosine {word['average_cosine']['mean']:.3f} (std {word['average_cosine']['std']:.3f}), "
        f"I(W) {word['partition_isotropy']:.3f}, IsoScore {word['isoscore']:.3f}. "
        "For comparison, the BERT-flow paper reports for BERT-base (ranks by pre-training frequency) mean l2 norms "
        "0.95, 1.04, 1.22, 1.45 over the same four buckets.",
        "",
    ]
    drop = A.word_report(enc, uniq, unseen="drop", n_pairs=20000)
    header, rows = A._word_rows(drop)
    out += [
        f'The same with `unseen="drop"` (only the {drop["ranked_tokens"]} tokens seen in STS-B are ranked; kNN among them):',
        "",
        A._markdown(header, rows),
    ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-stsb", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    parts = [f"Machine: {machine()}", ""]
    if not args.skip_timing:
        parts += ["### Time", "", timing_section(args.lines, args.repeats), ""]
    if not args.skip_stsb:
        parts += ["### Anisotropy on STS-B", "", stsb_section(), ""]
    md = "## Analysis (`isotropy analyze`)\n\nRegenerate: `.venv/bin/python bench/analysis.py`.\n\n" + "\n".join(parts)
    print(md)
    if not args.no_write:
        print("wrote", update_section("BENCHMARKS.md", "analysis", md, title="Benchmarks"))


if __name__ == "__main__":
    main()
