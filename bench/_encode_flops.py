"""The limit for bench/encode.py: the encoder's FLOPs from its real tokens, and GEMM peaks on its own shapes.

FLOPs (one multiply-add = 2) of one BERT layer on a sequence of L real tokens, hidden H, feed-forward I: the Q, K, V
and output projections 4 x 2LH^2, the feed-forward 2 x 2LHI, and attention's QK^T and AV 2 x 2L^2H (all heads
together). Padding is excluded: each sequence counts its own length. Embeddings, layer norms, softmax and GELU are not
counted (they are not matrix products; they are what a backend spends beyond the GEMMs).

Peaks: the best throughput of one matrix product of the encoder's shapes (K x N = 384 x 384, 384 x 1536, 1536 x 384)
at M = the tokens of a typical batch, through
* torch fp32 / torch bf16 ``matmul`` (the fp32 and bf16 paths);
* onnxruntime ``MatMulInteger`` (u8 x s8 -> s32; the raw int8 GEMM, MLAS's AMX/VNNI kernel) and
  ``com.microsoft.DynamicQuantizeMatMul`` (f32 in, quantised per call, s8 weights, f32 out: what ``quantize_dynamic``
  graphs run), as one-node graphs built here with onnx.helper.
Written by hand because no library measures a peak at given shapes; the approach follows earlier measurements (not
kept in the repository). The per-model peak weighs the three shapes by their FLOP shares (4 x H^2 : H x I : I x H = 1
: 1 : 1 for MiniLM): time-weighted, i.e. a harmonic mean.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

SHAPES = {"qkvo": (384, 384), "ffn_up": (384, 1536), "ffn_down": (1536, 384)}


def encoder_flops(lengths: Sequence[int], hidden: int, intermediate: int, layers: int) -> dict[str, float]:
    """FLOPs of ``layers`` BERT layers over sequences of the given real lengths (padding excluded)."""
    L = np.asarray(lengths, dtype=np.float64)
    linear = layers * float((2 * L * (4 * hidden * hidden + 2 * hidden * intermediate)).sum())
    attention = layers * float((4 * L * L * hidden).sum())
    return {"linear": linear, "attention": attention, "total": linear + attention}


def shape_weights(hidden: int, intermediate: int) -> dict[str, float]:
    """Share of the linear FLOPs of each GEMM shape in one layer."""
    f = {"qkvo": 4 * hidden * hidden, "ffn_up": hidden * intermediate, "ffn_down": intermediate * hidden}
    total = sum(f.values())
    return {k: v / total for k, v in f.items()}


def _time(fn: Callable[[], object], budget: float = 0.5) -> tuple[float, float]:
    """(best, median) seconds of ``fn`` over about ``budget`` seconds (at least 5 calls)."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    n = max(5, min(100, int(budget / max(one, 1e-6))))
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), statistics.median(ts)


def _ort_session(nodes, inputs, outputs, inits, threads: int):
    import onnxruntime as ort
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    # ir_version 10: onnx 1.23 writes IR 14 by default, which onnxruntime 1.31 refuses (max 13)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=10
    )
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def gemm_cases(M: int, K: int, N: int, threads: int) -> dict[str, Callable[[], object]]:
    """One callable per kind computing an (M x K) @ (K x N) product."""
    import torch
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K), dtype=np.float32)
    W = rng.standard_normal((K, N), dtype=np.float32)
    Aq = rng.integers(0, 255, (M, K), dtype=np.uint8)
    Wq = rng.integers(-127, 127, (K, N), dtype=np.int8)
    s_int = _ort_session(
        [helper.make_node("MatMulInteger", ["A", "W", "az"], ["Y"])],
        [helper.make_tensor_value_info("A", T.UINT8, [M, K])],
        [helper.make_tensor_value_info("Y", T.INT32, [M, N])],
        [numpy_helper.from_array(Wq, "W"), numpy_helper.from_array(np.uint8(128), "az")],
        threads,
    )
    s_dq = _ort_session(
        [helper.make_node("DynamicQuantizeMatMul", ["A", "W", "ws", "wz"], ["Y"], domain="com.microsoft")],
        [helper.make_tensor_value_info("A", T.FLOAT, [M, K])],
        [helper.make_tensor_value_info("Y", T.FLOAT, [M, N])],
        [
            numpy_helper.from_array(Wq, "W"),
            numpy_helper.from_array(np.full(N, 0.01, np.float32), "ws"),
            numpy_helper.from_array(np.zeros(N, np.int8), "wz"),
        ],
        threads,
    )
    tA, tW = torch.from_numpy(A), torch.from_numpy(W)
    bA, bW = tA.bfloat16(), tW.bfloat16()
    return {
        "fp32": lambda: torch.matmul(tA, tW),
        "bf16": lambda: torch.matmul(bA, bW),
        "int8": lambda: s_int.run(None, {"A": Aq}),
        "int8_dynquant": lambda: s_dq.run(None, {"A": A}),
    }


def gemm_peaks(M: int, threads: int, hidden: int = 384, intermediate: int = 1536, budget: float = 0.4) -> dict:
    """GFLOP/s (GOP/s for int8) per kind and shape at ``M`` rows, and the FLOP-weighted per-model peak."""
    import torch

    torch.set_num_threads(threads)
    weights = shape_weights(hidden, intermediate)
    per_shape: dict[str, dict[str, dict[str, float]]] = {}
    for name, (K, N) in SHAPES.items():
        for kind, fn in gemm_cases(M, K, N, threads).items():
            best, med = _time(fn, budget)
            flops = 2.0 * M * K * N
            per_shape.setdefault(kind, {})[name] = {"best": flops / best / 1e9, "median": flops / med / 1e9}
    model = {
        kind: 1.0 / sum(weights[s] / shapes[s]["best"] for s in SHAPES)  # time-weighted over the layer's GEMMs
        for kind, shapes in per_shape.items()
    }
    return {"M": int(M), "per_shape": per_shape, "model_peak": model}
