"""Peak memory of the static factory's fit as the corpus grows (issue #43: the statistics must grow with the
vocabulary, not the corpus; target <= 2 GB at 1M lines).

    nice -n 5 .venv/bin/python bench/factory_memory.py                 # writes docs/BENCHMARKS.md (factory-memory)
    .venv/bin/python bench/factory_memory.py --sizes 12000 --no-write
    .venv/bin/python bench/factory_memory.py --render                # the section again from the saved results

Each size runs in a fresh process: potion-base-8M (``../shared/models``, 256 d, BERT's uncased vocabulary) as the
start table, and ``fit_on_corpus`` (what ``isotropy distill --corpus`` runs after the distill: the corpus pass with
today's default spans, the teacher map, the token sums, the strength chosen on held-out lines and the solve) over
evenly spaced lines of ``../shared/data/corpus/wiki-1m.txt`` read from a file (streamed, never held whole).

The teacher is a stand-in, so that the figure measures the statistics and the solve, not a transformer's
activations (those are bounded by one chunk and are the same at every size): each text gets a 384-d vector drawn
from a generator seeded by the text. The sums then have exactly the shape and sparsity the real teacher gives them
(the Gram of token co-occurrences depends only on the text; ``A^T Y`` is one dense row per token seen); only the
values differ, so the solve's iteration count can differ from a real run's. The peak is the process's maximum
resident set (``ru_maxrss``); "baseline" is the resident set after loading the start table and the libraries the
fit uses (torch, scipy), before the pass.

``--teacher LINES`` measures the real teacher's share instead: the default model on torch and its ``isotropy export
onnx --quantize int8`` graph, each encoding LINES evenly spaced ``wiki-1m.txt`` lines at its own max_length (as the
distill's pass does) in batches of 64 sentences (the encoder's default) and in batches of at most
``distill.teacher.BATCH_TOKENS`` padded tokens (the distill's teacher), each run in a fresh process, the settings
taking turns ``--repeats`` times: the resident set before and after the lines, the peak, and the speed (the median of
each setting's lines/s, against batches of 64 of the same runtime).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _render  # noqa: E402

from _report import DATA, POTION, Section, load_json  # noqa: E402

RESULTS = HERE / "results" / "factory_memory.json"
WIKI = DATA / "corpus" / "wiki-1m.txt"
SIZES = (12_000, 100_000, 999_998)


class SeededTeacher:
    """A stand-in teacher: each text's vector drawn from a generator seeded by the text (module docs)."""

    width = 384

    def encode(self, sentences, show_progress=None):
        import numpy as np

        out = np.empty((len(sentences), self.width), dtype=np.float32)
        for i, s in enumerate(sentences):
            out[i] = np.random.default_rng(zlib.crc32(s.encode("utf-8", "surrogatepass"))).standard_normal(self.width)
        return out


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(lines: int, out: Path, spans: bool = True) -> None:
    """One size, in this process: write the sample, fit, record the peak."""
    import copy

    from model2vec import StaticModel

    from isotropy.distill.run import fit_on_corpus

    step = max(1, 999_998 // lines)
    with tempfile.TemporaryDirectory(prefix="isotropy-factory-memory-") as scratch:
        sample = Path(scratch) / "sample.txt"
        n = 0
        with open(WIKI, encoding="utf-8") as src, open(sample, "w", encoding="utf-8") as dst:
            for i, line in enumerate(src, 1):
                if i % step == 0 and n < lines:
                    dst.write(line)
                    n += 1
        static = copy.deepcopy(StaticModel.from_pretrained(str(POTION)))
        import scipy.sparse  # noqa: F401  the libraries the fit loads, loaded before the baseline is read
        import torch  # noqa: F401

        baseline = _rss_mb()
        t0 = time.perf_counter()
        info = fit_on_corpus(static, SeededTeacher(), str(sample), 256, 0.0, "tokens", None, False, spans=spans)
        seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    record = {
        "lines": n,
        "baseline_mb": round(baseline, 1),
        "peak_mb": round(peak, 1),
        "seconds": round(seconds, 1),
        "spans": (info.get("spans") if isinstance(info, dict) else None) or "none (--spans none)",
    }
    out.write_text(json.dumps(record), encoding="utf-8")


def teacher_child(runtime: str, batching: str, lines: int, out: Path) -> None:
    """One teacher (``runtime``: torch, or an int8 export folder) on ``lines`` wiki lines, batched as asked."""
    from isotropy.distill.teacher import BATCH_TOKENS
    from isotropy.encoders import Encoder

    step = max(1, 999_998 // lines)
    with open(WIKI, encoding="utf-8") as src:
        texts = [line.rstrip("\n") for i, line in enumerate(src, 1) if i % step == 0][:lines]
    budget = BATCH_TOKENS if batching == "tokens" else None
    enc = Encoder(None, batch_tokens=budget) if runtime == "torch" else Encoder(runtime, backend="onnx", batch_tokens=budget)
    enc.encode(texts[:64], show_progress=False)  # the first run outside the figures
    baseline, t0 = _rss_mb(), time.perf_counter()
    for k in range(0, len(texts), 1024):
        enc.encode(texts[k : k + 1024], show_progress=False)
    seconds = time.perf_counter() - t0
    row = {"teacher": "torch fp32" if runtime == "torch" else "onnx int8", "batching": batching, "lines": len(texts)}
    row.update(baseline_mb=round(baseline), after_mb=round(_rss_mb()), seconds=round(seconds, 2))
    row.update(peak_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), budget=BATCH_TOKENS)
    row["lines_per_s"] = round(len(texts) / seconds, 1)
    out.write_text(json.dumps(row), encoding="utf-8")


def measure_teacher(lines: int, repeats: int) -> list[dict]:
    """``--teacher``: the int8 export written once, then each runtime and batching in turn, each run its own process."""
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        export = Path(scratch) / "int8"
        cmd = [sys.executable, "-m", "isotropy.cli", "export", "onnx", "-o", str(export), "--quantize", "int8"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        for _ in range(repeats):
            for runtime in ("torch", str(export)):
                for batching in ("sentences", "tokens"):
                    out = Path(scratch) / "r.json"
                    subprocess.run(
                        [sys.executable, __file__, "--teacher-child", runtime, batching, str(lines), str(out)], check=True
                    )
                    rows.append(json.loads(out.read_text(encoding="utf-8")))
                    print(rows[-1], flush=True)
    return rows


def measure(sizes, spans: bool = True) -> list[dict]:
    rows = []
    for lines in sizes:
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "r.json"
            extra = [] if spans else ["--no-spans"]
            subprocess.run([sys.executable, __file__, "--child", str(lines), str(out), *extra], check=True)
            rows.append(json.loads(out.read_text(encoding="utf-8")))
            print(rows[-1], flush=True)
    return rows


SECTION = Section("BENCHMARKS.md", "factory-memory", lambda rows: _render.factory_memory(rows, SIZES[-1]), RESULTS)


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--no-spans", action="store_true", help="fit without spans (--spans none)")
    ap.add_argument("--append", action="store_true", help="add the rows measured to the saved ones (by lines, spans)")
    ap.add_argument("--teacher", type=int, metavar="LINES", help="the teacher's memory and speed by batching (docs)")
    ap.add_argument("--repeats", type=int, default=3, help="with --teacher: runs of each setting, taking turns")
    ap.add_argument("--teacher-child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child:
        child(int(args.child[0]), Path(args.child[1]), not args.no_spans)
        return
    if args.teacher_child:
        runtime, batching, lines, out = args.teacher_child
        teacher_child(runtime, batching, int(lines), Path(out))
        return
    if SECTION.rendered(args):
        return
    saved = load_json(RESULTS) if RESULTS.is_file() else []
    fits, teacher = [r for r in saved if "batching" not in r], [r for r in saved if "batching" in r]
    if args.teacher:  # the fit's rows kept, the teacher's replaced
        SECTION.publish(fits + measure_teacher(args.teacher, args.repeats), args)
        return
    rows = measure(args.sizes, not args.no_spans)
    if args.append:

        def key(r: dict) -> tuple:
            return r["lines"], r["spans"].startswith("none")

        rows = sorted([r for r in fits if key(r) not in {key(r) for r in rows}] + rows, key=key)
    SECTION.publish(rows + teacher, args)


if __name__ == "__main__":
    main()
