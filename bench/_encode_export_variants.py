"""Does the attention path traced into isotropy's ONNX export bound the int8 graph? (a bench/encode.py follow-up)

The default export traces transformers' sdpa attention; torch's sdpa decomposition guards fully
masked rows with ``Where(IsNaN(softmax), 0, softmax)`` on every [batch, heads, L, L] score tensor,
which onnxruntime's profiler shows as a large share of the int8 graph's time on long passages.
This exports the same encoder with eager attention (additive mask, no NaN guard), dynamic int8
both, and times the two graphs interleaved on bench/encode.py's workloads (1 thread, medians of
``--rounds``), with the cosine between their vectors and onnxruntime's op-type shares for each.

    .venv/bin/python bench/_encode_export_variants.py [--rounds 3]

Writes bench/results/encode_export_variants.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]
from _encode_data import long_passages, short_sentences, stsb_rows  # noqa: E402

WORK = Path(os.environ.get("ISOTROPY_BENCH_WORK", "/tmp/isotropy-bench-encode"))


def export_eager(folder: Path) -> Path:
    from isotropy.encoders import Encoder
    from isotropy.integrations.onnx_export import export_onnx

    if not (folder / "isotropy_onnx.json").exists():
        enc = Encoder(pooling="last-avg", device="cpu")
        with enc.runtime.attention("eager"):
            export_onnx(folder, encoder=enc, quantize="int8", force=True)
    return folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from _encode_ours import onnx_exports, profile_onnx

    from isotropy.encoders import Encoder

    graphs = {
        "sdpa export (default)": onnx_exports(WORK, poolings=("last-avg",))[("last-avg", "int8")],
        "eager-attention export": export_eager(WORK / "onnx-last-avg-int8-eager"),
    }
    short = short_sentences(stsb_rows("test"))
    probe = Encoder(graphs["sdpa export (default)"], backend="onnx", threads=1)
    long = long_passages(short, lambda t: len(probe.tokenizer(t)["input_ids"]))
    work = {("short", 256): short, ("long", 256): long, ("long", 64): long}
    encs = {n: {ml: Encoder(g, backend="onnx", threads=1, max_length=ml) for ml in (64, 256)} for n, g in graphs.items()}
    times: dict = {}
    for _ in range(args.rounds):
        for (wl, ml), texts in work.items():
            for name, per in encs.items():
                t0 = time.perf_counter()
                per[ml].encode(texts, show_progress=False)
                times.setdefault(f"{wl}@{ml}", {}).setdefault(name, []).append(time.perf_counter() - t0)
    a, b = (encs[n][256].encode(short[:512], show_progress=False) for n in graphs)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    result = {
        "median_s": {k: {n: statistics.median(v) for n, v in per.items()} for k, per in times.items()},
        "times": times,
        "cosine_min_mean": [float(cos.min()), float(cos.mean())],
        "profiles_long256": {n: profile_onnx(g, long, 256, 1, WORK) for n, g in graphs.items()},
    }
    out = HERE / "results" / "encode_export_variants.json"
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "times"}, indent=1))


if __name__ == "__main__":
    main()
