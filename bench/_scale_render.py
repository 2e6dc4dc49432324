"""The BENCHMARKS.md section of bench/scale.py, from bench/results/scale.json."""

from __future__ import annotations

import numpy as np

CORES_PER_MACHINE = 32  # assumption of the 1B estimate: a common cloud machine size
PRICE_CORE_HOUR = 0.04  # assumption: US$ per vCPU-hour, on-demand order of magnitude (not a quote)
RAM_OVERHEAD = 1.3  # assumption: inverted lists' slack, ids, coarse quantiser, OS


def _f(v: float, d: int = 3) -> str:
    return f"{v:.{d}f}"


def _load(r: dict) -> str:
    return f"{r['load_before'][0]:.1f}/{r['load_after'][0]:.1f}"


def _dims(r: dict) -> str:
    if r["calibration"] == "raw+opq":  # OPQ rotates and projects to the largest multiple of M
        return f"{r['dims']} -> {(r['dims'] // r['bytes']) * r['bytes']}"
    if r["calibration"] == "none" and r["dims"] > 50:
        return f"50 + {r['dims'] - 50} zeros"
    return str(r["dims"])


def _grid(res: dict) -> list[str]:
    out = [
        f"**{res['rows']:,} vectors** (GloVe 50 d windows), nlist 1024, nprobe 32, re-rank depth 100; "
        "recall@10 against exact search of the same calibrated vectors on 1,000 held-out queries; "
        "q/s = queries per second (batch: 1,000 in one call; single: one call each), 1t/2t = faiss threads; "
        "load = 1-minute load average before/after the row (2 cores).",
        "",
        "| budget | calibration | bytes used | dims | recall@10 | recall@10 re-ranked | single q/s 1t | single q/s 2t | "
        "batch q/s 1t | batch q/s 2t | single q/s re-ranked 1t | size MB | train s | add s | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(res["grid"], key=lambda r: (r["budget"], r["calibration"])):
        out.append(
            f"| {r['budget']} | {r['calibration']} | {r['bytes']} | {_dims(r)} | {_f(r['recall@10'])} | "
            f"{_f(r['recall@10_rerank'])} | {r['qps_single_1t']:,.0f} | {r['qps_single_2t']:,.0f} | {r['qps_batch_1t']:,.0f} | "
            f"{r['qps_batch_2t']:,.0f} | {r['qps_single_rerank_1t']:,.0f} | {r['size_mb']:.1f} | {r['train_s']:.1f} | "
            f"{r['add_s']:.1f} | {_load(r)} |"
        )
    return out


def _verdict(res: dict) -> list[str]:
    at16 = {r["calibration"]: r for r in res["grid"] if r["budget"] == 16}
    if "raw+opq" not in at16:
        return []
    opq = at16["raw+opq"]["recall@10"]
    best = max((r for c, r in at16.items() if c not in ("raw+opq", "none")), key=lambda r: r["recall@10"], default=None)
    if best is None:
        return []
    gain = 100 * (best["recall@10"] - opq)
    word = "beats" if gain >= 2 else "does **not** beat"
    return [
        "",
        f"At 16 bytes the best calibration in front of PQ, {best['calibration']}-48 ({_f(best['recall@10'])}), {word} raw + OPQ "
        f"({_f(opq)}) by >= 2 recall@10 points ({gain:+.1f} points). Each calibration is scored against exact search "
        "in its own space, so this compares how well PQ keeps each space's neighbours, not which space is better "
        "for relevance (the Cranfield table below says that).",
    ]


def _targets(res: dict) -> list[str]:
    rows = [r for r in res["grid"] if r["bytes"] <= 32]
    if not rows:
        return []
    best_rr = max(rows, key=lambda r: r["recall@10_rerank"])
    best = max(rows, key=lambda r: r["recall@10"])
    fast = max(rows, key=lambda r: r["qps_single_1t"])
    slow = min(rows, key=lambda r: r["qps_single_1t"])

    def name(r: dict) -> str:
        return f"{r['calibration']} at {r['bytes']} bytes"

    return [
        "",
        f"**Targets** (set for 10M vectors; **10M was not run**: on this shared machine one 1M row took about 5 "
        f"minutes and OPQ's training 12, so the grid at 10M did not fit the session; these are the {res['rows']:,}-vector "
        "figures): recall@10 with re-ranking >= 0.90 at <= 32 bytes: "
        f"**{'met' if best_rr['recall@10_rerank'] >= 0.9 else 'missed'}** ({name(best_rr)}: {_f(best_rr['recall@10_rerank'])}; "
        f"every calibrated row >= {_f(min(r['recall@10_rerank'] for r in rows if r['calibration'] not in ('none', 'raw+opq')))}); "
        f"without re-ranking >= 0.70: **{'met' if best['recall@10'] >= 0.7 else 'missed'}** ({name(best)}: {_f(best['recall@10'])}); "
        f">= 1,000 single-query searches a second (one thread): "
        + (
            f"**met** by every row (slowest {name(slow)}: {slow['qps_single_1t']:,.0f} at load "
            f"{slow['load_before'][0]:.1f}; fastest {name(fast)}: {fast['qps_single_1t']:,.0f})."
            if slow["qps_single_1t"] >= 1000
            else f"met by {sum(r['qps_single_1t'] >= 1000 for r in rows)} of {len(rows)} rows ({name(fast)}: "
            f"{fast['qps_single_1t']:,.0f} at load {fast['load_before'][0]:.1f}; slowest {name(slow)}: "
            f"{slow['qps_single_1t']:,.0f} at load {slow['load_before'][0]:.1f}): not shown under this load."
        ),
    ]


def _estimate(res: dict) -> list[str]:
    rows = [r for r in res["grid"] if r["budget"] == 32]
    if not rows:
        return []
    n = res["rows"]
    # the median over the 32-byte rows: the load moved between rows, no single row is representative
    add_rate = float(np.median([n / r["add_s"] / 2 for r in rows]))  # per core: the add ran on 2 threads
    scan_rate = float(np.median([n * 32 / 1024 * r["qps_single_1t"] for r in rows]))  # codes/s, one thread
    train_s = float(np.median([r["train_s"] * 2 for r in rows]))  # core-seconds
    N, nlist_b, nprobe_b, code = 10**9, 262_144, 64, 32
    mem_gb = N * (code + 8) * RAM_OVERHEAD / 1e9
    add_core_h = N / add_rate / 3600
    # coarse k-means cost grows as training rows x centroids: (64 x 262,144 rows / 65,536) x (262,144 / 1,024);
    # an upper bound (the measured time also holds the codebooks' training, which does not grow with nlist)
    train_core_h = train_s * (64 * nlist_b / 65_536) * (nlist_b / 1024) / 3600
    q_ms = (N * nprobe_b / nlist_b) / scan_rate * 1000
    lines = [
        "",
        f"**Paper estimate for 1B vectors** (medians of the {len(rows)} rows at the 32-byte budget, measured under "
        f"the load shown): adding ran at {add_rate:,.0f} vectors/s per core, a single-thread query scanned "
        f"{scan_rate / 1e6:,.1f}M codes/s (coarse search included), training took {train_s:,.0f} core-seconds.",
        f"Assumptions: {code}-byte codes + 8-byte ids, x{RAM_OVERHEAD} for lists, quantiser and OS; nlist 262,144 "
        "(the faiss wiki's order for 1B), nprobe 64; the coarse training (64 rows a list, in the client) scales as "
        f"rows x nlist from the measured one, an upper bound that GPUs or a two-level k-means cut by orders of "
        f"magnitude; {CORES_PER_MACHINE} cores per machine; US${PRICE_CORE_HOUR}/core-hour; the vectors are "
        "already encoded (encoding 1B texts with MiniLM costs far more than indexing them).",
        "",
        "| machines | codes in RAM per machine (GB) | train (h, client, 32 cores) | add (h) | core-hours | cost (US$) | "
        "single query (ms, 1 core, one index) |",
        "|---|---|---|---|---|---|---|",
    ]
    for machines in (1, 4, 16):
        add_h = add_core_h / (machines * CORES_PER_MACHINE)
        core_h = add_core_h + train_core_h
        lines.append(
            f"| {machines} | {mem_gb / machines:,.0f} | {train_core_h / CORES_PER_MACHINE:,.0f} | {add_h:.2f} | "
            f"{core_h:,.0f} | {core_h * PRICE_CORE_HOUR:,.0f} | {q_ms:.0f} |"
        )
    lines += [
        "",
        "RAM per machine assumes the index is served sharded across the machines (each a slice of the lists); a "
        f"merged on-disk index (`--engine dask`) holds all {mem_gb:,.0f} GB on one machine's disk, paged in by the "
        "OS. Two loaded cores are a poor base for these rates: the estimate is an order of magnitude, not a plan.",
    ]
    return lines


def render(results: dict) -> str:
    lines = [
        "## Compressed search at scale: calibrations in front of PQ (`bench/scale.py`)",
        "",
        "Generated by `bench/scale.py` (the method and every fixed setting are in its docstring). The machine is a "
        "shared 2-core box running several other jobs: load averages are given per row, and timings taken at a "
        "load above 2 understate what the code does on a quiet machine.",
        "",
    ]
    for key in sorted((k for k in results if k.isdigit()), key=int):
        res = results[key]
        lines += _grid(res) + _verdict(res) + _targets(res) + _estimate(res)
        if "dask" in res:
            d = res["dask"]
            lines += [
                "",
                f"Build of the soft whitening-48, 16-byte index of {d['rows']:,} vectors: one process "
                f"{d['one_process_s']:.0f} s, `build_index_dask` on a local cluster of 2 single-threaded workers "
                f"(10 shards, merged on disk) {d['dask_2_workers_s']:.0f} s (load {d['load_before'][0]:.1f}/"
                f"{d['load_after'][0]:.1f}; both include training and saving).",
            ]
        lines.append("")
    if "cranfield" in results:
        lines += [
            "**Cranfield nDCG@10 through the compressed index** (its 1,400 documents and 225 queries, GloVe 50 d; "
            "nlist 35, nprobe 8; exact = the same calibration searched exactly):",
            "",
            "| calibration | bytes | nDCG@10 index | nDCG@10 exact | recall@10 vs exact |",
            "|---|---|---|---|---|",
        ]
        for r in results["cranfield"]:
            lines.append(
                f"| {r['calibration']} | {r['bytes']} | {_f(r['ndcg@10'])} | {_f(r['exact_ndcg@10'])} | {_f(r['recall@10_vs_exact'])} |"
            )
    return "\n".join(lines)
