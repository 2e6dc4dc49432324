"""Encoding throughput against sentence-transformers' CPU backends, and against what the cores can do.

One process, interleaved rounds (every round runs every workload on every backend in turn), medians of >= 3, the same
texts and max_length for everyone, the embedded default model (all-MiniLM-L6-v2), batch size 64, 1 thread by default
(torch.set_num_threads, onnxruntime intra_op_num_threads, OpenVINO INFERENCE_NUM_THREADS;
TOKENIZERS_PARALLELISM=false).

Workloads: ``short`` = the 2,758 sentences of STS-B test; ``long`` = passages of about 200 tokens made by joining
consecutive STS-B test sentences; each at max_length 64 and 256. Ours: torch fp32 / bf16 (``Encoder(precision=...)``),
isotropy's ONNX export fp32 / int8, with fixed batches and token-budget batches. Peers: sentence-transformers torch
here, and (with ``--peers-python``) its onnx / openvino backends in a separate venv (bench/encode_peers.py,
bench/peers/requirements-st5.txt). Every backend is reported as a ratio to sentence-transformers torch measured in the
same process as it. The limit: fp32 / bf16 / int8 GEMM peaks on the encoder's own shapes and FLOPs from the real
tokens (bench/_encode_flops.py).

    .venv/bin/python bench/encode.py [--peers-python PEERS/bin/python] [--rounds 3] [--threads 1] [--quick]

Writes bench/results/encode.json and the ``encode`` section of docs/BENCHMARKS.md (not with --quick).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# a bench script named like a package would shadow it: the bench folder goes last on the path, not first
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

import numpy as np  # noqa: E402
from _encode_data import long_passages, short_sentences, stsb_rows  # noqa: E402

WORK = Path(os.environ.get("ISOTROPY_BENCH_WORK", "/tmp/isotropy-bench-encode"))
PEER_KINDS = {
    "ST torch fp32": "fp32",
    "ST onnx fp32": "fp32",
    "ST onnx int8 (dynamic, avx512_vnni)": "int8",
    "ST openvino fp32 (f32 hint)": "fp32",
    "ST openvino default (bf16 on AMX)": "bf16",
    "ST openvino int8 (static, STS-B train)": "int8",
}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--peers-python", help="python of a venv made from bench/peers/requirements-st5.txt")
    ap.add_argument("--peers-json", type=Path, help="reuse a JSON written by bench/encode_peers.py instead of running it")
    ap.add_argument("--quick", action="store_true", help="256 sentences, 16 passages, 1 round: a smoke run (no docs)")
    ap.add_argument("--no-accuracy", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "encode.json")
    ap.add_argument("--render", type=Path, help="only rewrite the docs section from a result JSON written before")
    return ap.parse_args()


def workloads(tokenizer, quick: bool) -> tuple[dict, list, np.ndarray]:
    from _report import DATA
    from isotropy.evaluation import load_stsb

    pairs = load_stsb(DATA / "sts" / "STSBenchmark").pairs(["test"])
    sentences = [s for p in pairs for s in (p.s1, p.s2)]
    rows = stsb_rows("test")
    assert sentences == short_sentences(rows), "the peer script's csv reader disagrees with isotropy's loader"
    gold = np.array([p.score for p in pairs])
    long = long_passages(sentences, lambda t: len(tokenizer(t)["input_ids"]))
    short = sentences
    if quick:
        short, long = short[:256], long[:16]
    return {"short": short, "long": long}, sentences, gold


def token_stats(tokenizer, texts: list[str], max_length: int, batch_size: int, model_cfg) -> dict:
    """Real and padded token counts (fixed batches of ``batch_size``, length-sorted) and the FLOPs of the real ones."""
    from _encode_flops import encoder_flops

    lengths = np.array([len(x) for x in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]])
    srt = np.sort(lengths)[::-1]
    padded = sum(int(srt[i]) * len(srt[i : i + batch_size]) for i in range(0, len(srt), batch_size))
    n_batches = -(-len(srt) // batch_size)
    flops = encoder_flops(lengths, model_cfg.hidden_size, model_cfg.intermediate_size, model_cfg.num_hidden_layers)
    return {
        "texts": len(texts),
        "real_tokens": int(lengths.sum()),
        "padded_tokens": int(padded),
        "mean_length": float(lengths.mean()),
        "tokens_per_batch": padded / n_batches,
        "flops": flops,
    }


def run_peers(args, model_dir: Path) -> dict | None:
    if args.peers_json:
        return json.loads(args.peers_json.read_text(encoding="utf-8"))
    if not args.peers_python:
        return None
    out = WORK / "peers.json"
    cmd = [args.peers_python, str(HERE / "encode_peers.py"), "--model", str(model_dir), "--out", str(out)]
    cmd += ["--threads", str(args.threads), "--rounds", str(args.rounds), "--batch-size", str(args.batch_size)]
    cmd += ["--quick"] if args.quick else []
    cmd += ["--no-accuracy"] if args.no_accuracy else []
    subprocess.run(cmd, check=True)
    return json.loads(out.read_text(encoding="utf-8"))


def setup(args, bench_s: float) -> dict:
    """How and where the run was made."""
    import sentence_transformers
    import torch

    return {
        "threads": args.threads,
        "rounds": 1 if args.quick else args.rounds,
        "batch_size": args.batch_size,
        "quick": args.quick,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical cores",
        "cpu_bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
        "versions": {
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "onnxruntime": __import__("onnxruntime").__version__,
            "python": platform.python_version(),
        },
        "timing_seconds": bench_s,
        "loadavg_after": open("/proc/loadavg").read().split()[:3],
    }


def measure(args: argparse.Namespace) -> dict:
    """Every backend on every workload; the results file written (``encode-quick.json`` with ``--quick``)."""
    if args.threads == 1:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the Rust tokenizer would use the second core
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    from _encode_data import time_rounds
    from _encode_flops import gemm_peaks
    from _encode_ours import accuracy, make_runners, onnx_exports, our_encoders, st_torch

    from isotropy.encoders import Encoder, default_model_path

    WORK.mkdir(parents=True, exist_ok=True)
    probe = Encoder(pooling="last-avg")
    texts, sentences, gold = workloads(probe.tokenizer, args.quick)
    max_lengths = (64, 256)
    settings = {(wl, ml): texts[wl] for wl in ("short", "long") for ml in max_lengths}
    exports = onnx_exports(WORK)
    st = st_torch(args.batch_size)
    encoders = our_encoders(exports, args.threads, args.batch_size)
    runners = make_runners(encoders, st, args.batch_size, max_lengths)
    for fn in runners.values():  # warm-up: first calls allocate and pick kernels
        fn(texts["short"][:64], 64)
    t0 = time.perf_counter()
    times = time_rounds(runners, settings, 1 if args.quick else args.rounds)
    bench_s = time.perf_counter() - t0
    cfg = probe.model.config
    stats = {f"{wl}@{ml}": token_stats(probe.tokenizer, t, ml, args.batch_size, cfg) for (wl, ml), t in settings.items()}
    peaks = {key: gemm_peaks(int(round(s["tokens_per_batch"])), args.threads) for key, s in stats.items()}
    n_acc = 128 if args.quick else len(gold)
    acc = {} if args.no_accuracy else accuracy(exports, st, sentences[: 2 * n_acc], gold[:n_acc], 256)
    peers = run_peers(args, default_model_path())

    result = {
        "setup": setup(args, bench_s),
        "kinds": {**{n: s["kind"] for n, s in encoders.items()}, "ST torch fp32": "fp32"},
        "peer_kinds": PEER_KINDS,
        "tokens": stats,
        "times": times,
        "peaks": peaks,
        "accuracy": acc,
        "peers": peers,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = args.out if not args.quick else args.out.with_name("encode-quick.json")
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def main() -> None:
    from _render import encode as render

    from _report import load_json, update_section

    args = parse_args()
    memory = HERE / "results" / "encode_memory.json"  # bench/encode_memory.py's figures, shown in the same section
    md = render(
        {**(load_json(args.render) if args.render else measure(args)), "memory": load_json(memory) if memory.exists() else None}
    )
    if args.render or not args.quick:
        update_section("BENCHMARKS.md", "encode", md)
    print(md)


if __name__ == "__main__":
    main()
