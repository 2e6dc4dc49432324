"""ONNX backend vs PyTorch vs sentence-transformers: throughput and STS-B Spearman, in one run.

    .venv/bin/python bench/onnx_speed.py              # writes docs/BENCHMARKS.md, section "onnx"
    .venv/bin/python bench/onnx_speed.py --no-write   # print only
    .venv/bin/python bench/onnx_speed.py --repeats 1 --limit 300 --no-write   # a smoke run

Workload: the 2,758 sentences of the STS-B test pairs (1,379 pairs, both sides), default model (all-MiniLM-L6-v2),
last-avg pooling, max_length 64, batch 64, CPU. Pipelines timed, each encoding all sentences (median of ``--repeats``
rounds; within a round the pipelines take turns chunk by chunk, so that load from other users of the machine hits all
of them alike):

* torch      -- isotropy.Encoder (the reference of every ratio)
* st         -- sentence-transformers' own model of the same folder, Normalize removed
* onnx-fp32  -- Encoder(backend="onnx") on the float32 export
* onnx-int8  -- the same on the int8 export
* and, with whitening fitted on all STS-B sentences (train+dev+test, as in the papers' "target" setting): torch +
  Whitening.transform vs the ONNX graphs with the whitening inside.

Spearman x 100 of the cosine of each pipeline's vectors against the gold scores.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _render  # noqa: E402

from _report import DATA, ROOT, Section, machine, pair_spearman  # noqa: E402

SECTION = Section("BENCHMARKS.md", "onnx", _render.onnx, ROOT / "bench" / "results" / "onnx.json")

CHUNK = 256


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="only the first N test pairs (smoke runs)")
    args = ap.parse_args()
    if SECTION.rendered(args):
        return

    import numpy as np
    import torch

    from isotropy import Encoder, Whitening
    from isotropy.encoders import default_model_path
    from isotropy.encoders.models import quiet_transformers as _quiet_hf
    from isotropy.evaluation import load_stsb
    from isotropy.integrations import export_onnx

    task = load_stsb(DATA / "sts" / "STSBenchmark")
    pairs = task.pairs(["test"])[: args.limit]
    sents = [s for p in pairs for s in (p.s1, p.s2)]
    gold = np.array([p.score for p in pairs])
    fit_sents = list(dict.fromkeys(s for p in task.pairs() for s in (p.s1, p.s2)))
    n = len(sents)
    print(f"{n} sentences ({len(pairs)} pairs); {machine()}", file=sys.stderr)

    torch_enc = Encoder(pooling="last-avg", max_length=64, batch_size=64, device="cpu")
    t0 = time.perf_counter()
    # The fitting vectors come from the shared, verified vector cache (the same as `isotropy eval` uses):
    # encoding 15k sentences takes minutes on 2 cores and is not what this benchmark measures.
    from isotropy.encoders.cache import VectorCache, encode_cached

    cache = VectorCache(ROOT / ".cache" / "vectors")
    fit_vecs = encode_cached(torch_enc, fit_sents, ["last-avg"], cache)["last-avg"]
    print(f"encoded {len(fit_sents)} fitting sentences in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    whitening = Whitening(shrinkage="auto").fit(fit_vecs)

    from sentence_transformers import SentenceTransformer

    with _quiet_hf():
        st_model = SentenceTransformer(str(default_model_path()), device="cpu")
    st_model.max_seq_length = 64
    if type(st_model[-1]).__name__ == "Normalize":  # compare the same computation: pooled, unnormalised
        del st_model[len(st_model) - 1]

    tmp = Path(tempfile.mkdtemp(prefix="isotropy-bench-onnx-"))
    exports = {}
    for name, transform, quant in [
        ("fp32", None, None),
        ("int8", None, "int8"),
        ("fp32+w", whitening, None),
        ("int8+w", whitening, "int8"),
    ]:
        t0 = time.perf_counter()
        export_onnx(tmp / name, encoder=torch_enc, transform=transform, quantize=quant, show_progress=False)
        exports[name] = Encoder(tmp / name, backend="onnx", batch_size=64)
        print(f"exported {name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    pipelines = {
        "PyTorch (isotropy.Encoder)": lambda x: torch_enc.encode(x),
        "sentence-transformers": lambda x: st_model.encode(x, batch_size=64, convert_to_numpy=True),
        "ONNX fp32": lambda x: exports["fp32"].encode(x),
        "ONNX int8": lambda x: exports["int8"].encode(x),
        "PyTorch + whitening": lambda x: whitening.transform(torch_enc.encode(x)),
        "ONNX fp32 + whitening (in graph)": lambda x: exports["fp32+w"].encode(x),
        "ONNX int8 + whitening (in graph)": lambda x: exports["int8+w"].encode(x),
    }
    warm = sents[:64]  # warm-up: first-call allocations and thread pools are not throughput
    torch_enc.encode(warm), st_model.encode(warm, batch_size=64)
    for e in exports.values():
        e.encode(warm)
    # Fine-grained interleaving: the sentences are cut into chunks of CHUNK, and every pipeline
    # encodes each chunk in turn (starting pipeline rotating), so bursts of load from other users
    # of this shared machine fall on all pipelines alike; a pipeline's time for a round is the sum
    # over the chunks (all 2,758 sentences). CPU time of this process is recorded alongside.
    chunks = [sents[i : i + CHUNK] for i in range(0, n, CHUNK)]
    names = list(pipelines)
    times: dict[str, list[float]] = {k: [] for k in pipelines}
    cpu: dict[str, list[float]] = {k: [] for k in pipelines}
    vectors = {}
    for r in range(args.repeats):
        wall_r = dict.fromkeys(names, 0.0)
        cpu_r = dict.fromkeys(names, 0.0)
        parts: dict[str, list] = {k: [] for k in names}
        for c, chunk in enumerate(chunks):
            for j in range(len(names)):
                name = names[(c + j) % len(names)]
                t0, c0 = time.perf_counter(), time.process_time()
                parts[name].append(pipelines[name](chunk))
                wall_r[name] += time.perf_counter() - t0
                cpu_r[name] += time.process_time() - c0
        for k in names:
            times[k].append(wall_r[k])
            cpu[k].append(cpu_r[k])
            vectors[k] = np.concatenate(parts[k])
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f}s" for k, v in times.items()), file=sys.stderr)

    shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    # Ratios are taken within each round (same load for all pipelines), then the median over rounds.
    ref_raw = "PyTorch (isotropy.Encoder)"
    ratio = {k: statistics.median(times[ref_raw][i] / times[k][i] for i in range(args.repeats)) for k in names}
    cpu_ratio = {k: statistics.median(cpu[ref_raw][i] / cpu[k][i] for i in range(args.repeats)) for k in names}
    sp = {k: pair_spearman(v[0::2], v[1::2], gold) for k, v in vectors.items()}
    ref_w = "PyTorch + whitening"

    def cos_to(name, ref):
        from isotropy.evaluation import cosine_rows

        c = cosine_rows(vectors[name], vectors[ref])
        return [float(c.mean()), float(c.min())]

    rows = []
    for name in pipelines:
        ref = ref_w if "whitening" in name else ref_raw
        rows.append({"pipeline": name, "wall_s": med[name], "per_s": n / med[name], "ratio": ratio[name]})
        rows[-1].update(cpu_s=med_cpu[name], cpu_ratio=cpu_ratio[name], spearman=sp[name], change=sp[name] - sp[ref])
        rows[-1]["cosine"] = cos_to(name, ref) if name != ref else None
    res = {"n": n, "repeats": args.repeats, "chunk": CHUNK, "rows": rows, "loss": sp[ref_raw] - sp["ONNX int8"]}
    res["whitening_change"] = sp["ONNX int8 + whitening (in graph)"] - sp[ref_w]
    res["machine"] = f"{machine()}; onnxruntime {__import__('onnxruntime').__version__}, torch threads {torch.get_num_threads()}"
    SECTION.publish(res, args)


if __name__ == "__main__":
    main()
