"""Static encode speed (#23, #33): ours against model2vec, sentence-transformers and the pure gather bound.

    nice -n 5 .venv/bin/python bench/static_speed.py            # 100k and 1M sentences, writes docs/BENCHMARKS.md
    .venv/bin/python bench/static_speed.py --no-write           # print only
    .venv/bin/python bench/static_speed.py --sizes 20000 --repeats 1 --no-write   # a smoke run

Workload: the unique sentences of the 7 STS tasks (STS-12..16, STS-B, SICK-R), then sentences recombined from two of
them (the first half of one's words, the second half of another's, seed 0) up to each ``--sizes`` entry, shuffled.
Models (``--models``): ``glove`` (GloVe 6B 50d, 400k words, saved as a model2vec folder so every encoder runs the same
table and tokenizer) and ``distilled`` (the default model distilled by model2vec to 256 dimensions, a WordPiece table;
made by bench/static.py's ``distilled_folder`` when missing). Timed in turns within a round (load from other users
hits all alike), median of ``--repeats`` rounds, in one process:

* ours        -- ``isotropy.Encoder(folder).encode``: the word cache (encoders/static/wordcache.py), threads
* tokenizer   -- the path before #33: the table's Rust tokenizer, then one sparse product per chunk, one thread (first
  size only)
* model2vec   -- ``StaticModel.from_pretrained(folder).encode`` with its defaults (threads over batches above 10k)
* st-static   -- sentence-transformers' ``StaticEmbedding.from_model2vec(folder)`` in a ``SentenceTransformer``,
  ``encode`` with its defaults (it averages unknown tokens' rows, so its vectors differ on out-of-vocabulary text);
  timed on the first ``--st-max`` sentences only (default 100,000: it is two orders slower), its rate per sentence
* teacher     -- the default transformer (#23's comparison; GloVe, first size only) on ``--teacher-n`` sentences
* gather bound -- the pooling alone, from ids tokenised beforehand: the faster of our sparse product (threads over
  chunks, as ours) and a numpy gather + ``np.add.reduceat``; what no tokenisation could beat on this machine.

Also measured: ours on the first round (its word cache empty), and the peak memory of one encode (``tracemalloc``:
Python and numpy allocations; not the Rust tokenizer's or torch's). The load average is recorded before and after each
model; where it passed ``--quiet-load`` (default 2.5 on this 2-core machine) the figures are printed as taken UNDER
LOAD and are not results.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _render  # noqa: E402

from _report import DATA, Section, machine  # noqa: E402

RESULTS = HERE / "results" / "static_speed.json"  # the last run's figures (--render rewrites the section from them)
CHUNK = 8192


def workload(n: int, base: list[str], seed: int = 0) -> list[str]:
    """``n`` sentences: ``base`` (cycled when n is smaller), then recombined halves of two base sentences."""
    rng = random.Random(seed)
    out = list(base[:n])
    while len(out) < n:
        a, b = rng.choice(base).split(), rng.choice(base).split()
        out.append(" ".join(a[: len(a) // 2] + b[len(b) // 2 :]))
    rng.shuffle(out)
    return out


def sts_sentences() -> list[str]:
    from isotropy.evaluation import load_tasks

    return list(dict.fromkeys(s for t in load_tasks(DATA / "sts") for p in t.pairs() for s in (p.s1, p.s2)))


def model_folder(name: str, tmp: Path) -> Path:
    import numpy as np
    from model2vec import StaticModel

    from isotropy import Encoder

    if name == "distilled":
        from static import distilled_folder

        return distilled_folder(256)
    glove = Encoder("glove-6b-50d").model
    folder = tmp / "glove-m2v"
    StaticModel(np.asarray(glove.vectors), glove.tokenizer, normalize=False).save_pretrained(folder)
    return folder


def pipelines(folder: Path) -> tuple[dict, object]:
    """name -> encode function over a list of sentences; and our encoder."""
    import numpy as np
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    from isotropy import Encoder

    ours = Encoder(str(folder))
    table = ours.model
    m2v = StaticModel.from_pretrained(folder)
    st = SentenceTransformer(modules=[StaticEmbedding.from_model2vec(str(folder))], device="cpu")
    limit = ours.max_length

    def tokenizer_path(sentences):
        out = np.empty((len(sentences), table.dim), dtype=np.float32)
        for s in range(0, len(sentences), CHUNK):
            flat, lengths, _, _ = table.token_array(sentences[s : s + CHUNK], limit)
            out[s : s + len(lengths)] = table.pool_array(flat, lengths)
        return out

    return {
        "ours": lambda s: ours.encode(s, show_progress=False),
        "tokenizer": tokenizer_path,
        "model2vec": lambda s: m2v.encode(s),
        "st-static": lambda s: st.encode(s, show_progress_bar=False),
    }, ours


def teacher():
    """The default transformer (all-MiniLM-L6-v2, last-avg, max_length 128, batch 64), as #23 compared."""
    from isotropy import Encoder

    enc = Encoder(None, pooling="last-avg", max_length=128, batch_size=64, device="cpu")
    return lambda s: enc.encode(s, show_progress=False)


def gather_bounds(ours, sentences: list[str]) -> dict:
    """The pooling alone on ids tokenised beforehand: our sparse product over chunks in threads, and numpy's gather."""
    import numpy as np

    from isotropy.encoders.static.wordcache import WordCache

    table, cache = ours.model, WordCache(ours.model)
    ids = [cache.token_array(sentences[s : s + CHUNK], ours.max_length)[:2] for s in range(0, len(sentences), CHUNK)]
    vectors = np.asarray(table.vectors)
    threads = ThreadPoolExecutor(max(1, min(len(os.sched_getaffinity(0)), 8)))

    def sparse(_):
        return list(threads.map(lambda fl: table.pool_array(*fl), ids))

    def reduceat(_):
        def one(fl):
            flat, lengths = fl
            at = np.cumsum(lengths) - lengths
            sums = np.add.reduceat(vectors[flat], np.minimum(at, max(flat.size - 1, 0)), axis=0) if flat.size else None
            out = np.zeros((lengths.size, vectors.shape[1]), dtype=np.float32)
            if sums is not None:
                nz = lengths > 0
                out[nz] = sums[nz] / lengths[nz, None]
            return out

        return list(threads.map(one, ids))

    return {"bound: sparse": sparse, "bound: reduceat": reduceat}


def min_cosine(a, b) -> float:
    import numpy as np

    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    both = (na > 0) & (nb > 0)
    if not np.array_equal(na > 0, nb > 0):
        return float("nan")  # a zero vector on one side only
    return float(((a * b).sum(1)[both] / (na * nb)[both]).min()) if both.any() else 1.0


def peak(fn, sentences) -> float:
    tracemalloc.start()
    fn(sentences)
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top / 2**20


def run_model(name: str, folder: Path, sizes: list[int], repeats: dict, base: list[str], caps: dict) -> dict:  # long: one run
    from isotropy import Encoder

    pipes, ours = pipelines(folder)
    out = {"name": name, "sizes": {}}
    for n in sizes:
        sentences = workload(n, base)
        load_before = os.getloadavg()
        check = sentences[:20000]
        ref = pipes["ours"](check)
        agree = {k: min_cosine(ref, pipes[k](check)) for k in ("tokenizer", "model2vec", "st-static")}
        cold = Encoder(str(folder))  # ours with its word cache empty: the first encode pays every miss
        t0 = time.perf_counter()
        cold.encode(sentences, show_progress=False)
        cold_s = time.perf_counter() - t0
        del cold
        timed = {**pipes, **gather_bounds(ours, sentences)}
        if n != sizes[0]:  # the path before #33 is timed at the first size only
            del timed["tokenizer"]
        if caps["teacher"] and n == sizes[0] and name.startswith("GloVe"):
            timed["teacher"] = teacher()
        inputs = {k: sentences[: caps.get(k, n)] for k in timed}
        times: dict[str, list[float]] = {k: [] for k in timed}
        rounds = repeats["large"] if n >= 1_000_000 else repeats["small"]
        for r in range(rounds):
            for k, fn in timed.items():
                t0 = time.perf_counter()
                fn(inputs[k])
                times[k].append(time.perf_counter() - t0)
                print(f"{name} {n:,} round {r + 1} {k}: {times[k][-1]:.2f} s", file=sys.stderr)
        peaks = {k: peak(fn, inputs[k]) for k, fn in timed.items() if not k.startswith("bound")}
        out["sizes"][n] = {
            "median": {k: statistics.median(v) for k, v in times.items()},
            "counts": {k: len(v) for k, v in inputs.items()},
            "rounds": rounds,
            "cold": cold_s,
            "agree": agree,
            "peaks": peaks,
            "load": (load_before, os.getloadavg()),
        }
    return out


SECTION = Section("BENCHMARKS.md", "static-speed", _render.static_speed, RESULTS)


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--models", nargs="+", default=["glove", "distilled"], choices=["glove", "distilled"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--repeats-1m", type=int, default=None, help="rounds at 1M sentences and more (default: --repeats)")
    ap.add_argument("--quiet-load", type=float, default=2.5)
    ap.add_argument("--st-max", type=int, default=100_000, help="st-static is timed on at most this many sentences")
    ap.add_argument("--teacher-n", type=int, default=1000, help="sentences the teacher transformer is timed on (0: not)")
    args = ap.parse_args()
    if SECTION.rendered(args):
        return
    base = sts_sentences()
    caps = {"st-static": args.st_max, "teacher": args.teacher_n}
    repeats = {"small": args.repeats, "large": args.repeats if args.repeats_1m is None else args.repeats_1m}
    saved = {"machine": machine(), "quiet_load": args.quiet_load, "results": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            label = {"glove": "GloVe 6B 50d (model2vec folder)", "distilled": "default model distilled to 256 d"}[name]
            saved["results"].append(run_model(label, model_folder(name, Path(tmp)), args.sizes, repeats, base, caps))
    SECTION.publish(saved, args, indent=1)


if __name__ == "__main__":
    main()
