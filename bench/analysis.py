"""Benchmark: ``isotropy analyze`` end to end, and the anisotropy numbers it reports on STS-B.

1. **Time.** The command on the embedded default model and a generated 1,000-line corpus, run as a subprocess
   (imports, model load, encoding, statistics, kNN over the 30,522-token vocabulary, five figures, report folder; the
   ``--recommend`` comparison of auto's candidates is on request and not included): wall and CPU time (user + system
   of the child). Reference measured in the same run: ``isotropy encode`` of the same corpus -- loading the model and
   encoding, the floor no analysis can go below. Target (issue #25): at most 15 s on 2 cores.
2. **Numbers.** STS-B (train+dev+test, unique sentences), default model, ``cls`` and ``last-avg`` pooling, max_length
   64: the sentence-level table, raw against whitening fitted on the same sentences (the papers' "target" setting),
   and the word-level table (BERT-flow paper, Table 1 layout) with STS-B as the corpus. The vectors come from the test
   suite's cache (``.cache/test-vectors``; encoded on the first run).

Writes the ``analysis`` section of docs/BENCHMARKS.md.

    .venv/bin/python bench/analysis.py              # both parts
    .venv/bin/python bench/analysis.py --no-write --skip-stsb
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402

from _report import DATA, ROOT, Section, machine, median_time  # noqa: E402
from isotropy import analysis as A  # noqa: E402

sys.path.append(str(ROOT / "tests"))  # the test suite's corpus generator and vector cache
BIN = Path(sys.executable).parent
SECTION = Section("BENCHMARKS.md", "analysis", _render.analysis, ROOT / "bench" / "results" / "analysis.json")
TARGET_S = 15  # issue #25: 1,000 lines in at most 15 s on 2 cores, default model


def make_corpus(n: int) -> list[str]:
    """tests/test_analysis.py's template sentences (seed 1)."""
    from test_analysis import make_corpus as templates

    return templates(n, seed=1)


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


def timing_section(lines: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(make_corpus(lines)) + "\n")
        cpu: dict[str, list[float]] = {"analyze": [], "encode": []}

        def timed(command: str, out: str) -> None:
            args = [str(BIN / "isotropy"), command, str(corpus), "-o", f"{tmp}/{out}", "--no-progress"]
            cpu[command].append(run_timed(args)[1])

        load0 = os.getloadavg()[0]
        t_enc, _ = median_time(lambda: timed("encode", "v.npy"), repeats)
        t_ana, _ = median_time(lambda: timed("analyze", "report"), repeats)
        load1 = os.getloadavg()[0]
        timings = json.loads((Path(tmp) / "report" / "report.json").read_text())["meta"]["timings"]
    c_ana, c_enc = statistics.median_high(cpu["analyze"]), statistics.median_high(cpu["encode"])
    return {
        "lines": lines,
        "repeats": repeats,
        "load": [load0, load1],
        "encode_s": t_enc,
        "encode_cpu_s": c_enc,
        "analyze_s": t_ana,
        "analyze_cpu_s": c_ana,
        "ratio": t_ana / t_enc,
        "inside": timings,
        "target_s": TARGET_S,
        "max_queries": A.MAX_QUERIES,
    }


def stsb_section() -> dict:
    from conftest import _encode_cached  # the test suite's vector cache: same model, same key

    from isotropy.encoders import Encoder
    from isotropy.evaluation import load_stsb
    from isotropy.transforms.whitening import Whitening

    folder = DATA / "sts" / "STSBenchmark"
    task = load_stsb(folder)
    uniq = list(dict.fromkeys(s for p in task.pairs() for s in (p.s1, p.s2)))
    out: dict = {"sentences": len(uniq), "poolings": {}}
    import warnings

    for pooling in ("cls", "last-avg"):
        X = _encode_cached(uniq, pooling)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rank-deficient cls vectors: whitening drops the null directions
            w = Whitening().fit(X)
        header, rows = A._sentence_rows(A.sentence_report(X, {"whitening": w}, n_pairs=20000))
        out["poolings"][pooling] = {"header": header, "rows": rows}
    enc = Encoder(max_length=64)
    word = A.word_report(enc, uniq, n_pairs=20000)
    header, rows = A._word_rows(word)
    keys = ("model", "ranked_tokens", "seen_tokens", "corpus_tokens", "max_queries", "average_cosine")
    out["word"] = {k: word[k] for k in keys} | {"partition_isotropy": word["partition_isotropy"], "isoscore": word["isoscore"]}
    out["word"].update(header=header, rows=rows)
    drop = A.word_report(enc, uniq, unseen="drop", n_pairs=20000)
    header, rows = A._word_rows(drop)
    out["drop"] = {"ranked_tokens": drop["ranked_tokens"], "header": header, "rows": rows}
    return out


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-stsb", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    args = ap.parse_args()
    if SECTION.rendered(args):
        return
    res = {"machine": machine()}
    if not args.skip_timing:
        res["timing"] = timing_section(args.lines, args.repeats)
    if not args.skip_stsb:
        res["stsb"] = stsb_section()
    SECTION.publish(res, args)


if __name__ == "__main__":
    main()
