"""Markdown for the ``encode`` section of docs/BENCHMARKS.md from bench/encode.py's result dict."""

from __future__ import annotations

SETTINGS = ("short@64", "short@256", "long@64", "long@256")
BOUND = 0.3  # Spearman points an accelerated backend may lose against fp32


def _base_name(name: str) -> str:
    return name.split(",")[0]


def rows(result: dict) -> dict[str, list[dict]]:
    """Per setting: every backend with wall/CPU seconds, speed-up over ST torch of its own process, GFLOP/s, % of peak."""
    out: dict[str, list[dict]] = {}
    peers = result.get("peers") or {}
    for key in SETTINGS:
        stats, peak = result["tokens"][key], result["peaks"][key]["model_peak"]
        table = []
        sources = [("ours", result["times"][key], result["kinds"])]
        if peers:
            sources.append(("peers", peers["times"][key], result["peer_kinds"]))
        for proc, times, kinds in sources:
            ref = times["ST torch fp32"]["median_wall"]
            ref_cpu = times["ST torch fp32"]["median_cpu"]
            for name, t in times.items():
                if proc == "peers" and name == "ST torch fp32":
                    name_shown = "ST torch fp32 (peer venv)"
                else:
                    name_shown = name
                gflops = stats["flops"]["total"] / t["median_wall"] / 1e9
                kind = kinds.get(name, "fp32")
                table.append(
                    {
                        "name": name_shown,
                        "key": name,
                        "proc": proc,
                        "wall": t["median_wall"],
                        "cpu": t["median_cpu"],
                        "rate": stats["texts"] / t["median_wall"],
                        "speedup": ref / t["median_wall"],
                        "speedup_cpu": ref_cpu / t["median_cpu"],
                        "gflops": gflops,
                        "kind": kind,
                        "of_peak": gflops / peak[kind],
                    }
                )
        out[key] = table
    return out


def _accuracy_ok(result: dict, name: str, proc: str) -> bool | None:
    acc = (result.get("peers") or {}).get("accuracy", {}) if proc == "peers" else result.get("accuracy", {})
    ref = acc.get("ST torch fp32" if proc == "peers" else "ours torch fp32")
    mine = acc.get(_base_name(name))
    if not ref or not mine:
        return None
    return all(ref[p] - mine[p] <= BOUND for p in ("cls", "last-avg"))


def targets(result: dict, table: dict[str, list[dict]]) -> list[str]:
    lines = []
    t1 = {k: next(r["speedup"] for r in table[k] if r["key"] == "ours torch fp32") for k in ("short@64", "short@256")}
    ok = all(v >= 1.5 for v in t1.values())
    lines.append(
        f"1. **Our torch fp32 >= 1.5x sentence-transformers torch on short sentences: {'met' if ok else 'missed'}** — "
        + ", ".join(f"{k} {v:.2f}x" for k, v in t1.items())
        + "."
    )
    if result.get("peers"):
        parts, ok2 = [], True
        for k in SETTINGS:
            ours = [
                r
                for r in table[k]
                if r["proc"] == "ours" and r["key"] != "ST torch fp32" and _accuracy_ok(result, r["key"], "ours") is not False
            ]
            theirs = [r for r in table[k] if r["proc"] == "peers" and r["key"] != "ST torch fp32"]
            best_o, best_p = max(ours, key=lambda r: r["speedup"]), max(theirs, key=lambda r: r["speedup"])
            ratio = best_o["speedup"] / best_p["speedup"]
            ratio_cpu = best_o["speedup_cpu"] / max(r["speedup_cpu"] for r in theirs)
            ok2 &= ratio >= 1.5
            parts.append(
                f"{k}: {best_o['name']} {best_o['speedup']:.2f}x vs {best_p['name']} {best_p['speedup']:.2f}x -> **{ratio:.2f}x** (by CPU time {ratio_cpu:.2f}x)"
            )
        lines.append(
            f"2. **Our fastest CPU backend (within {BOUND} Spearman of fp32) >= 1.5x sentence-transformers' fastest: "
            f"{'met' if ok2 else 'missed'}** — " + "; ".join(parts) + "."
        )
    else:
        lines.append("2. Our fastest vs sentence-transformers' fastest: not measured in this run (no --peers-python).")
    parts, ok3 = [], True
    for k in ("long@64", "long@256"):
        best = max((r for r in table[k] if r["proc"] == "ours" and r["kind"] == "int8"), key=lambda r: r["speedup"])
        ok3 &= best["of_peak"] >= 0.6
        parts.append(f"{k}: {best['name']} {best['gflops']:.0f} GOP/s = {100 * best['of_peak']:.0f}% of the int8 GEMM peak")
    lines.append(
        f"3. **Our fastest int8 backend >= 60% of the int8 GEMM peak on long passages: {'met' if ok3 else 'missed'}** — "
        + "; ".join(parts)
        + "."
    )
    return lines


def _speed_tables(result: dict, table: dict) -> list[str]:
    md = []
    for k in SETTINGS:
        s, p = result["tokens"][k], result["peaks"][k]
        md.append(
            f"\n**{k.replace('@', ', max_length ')}** — {s['texts']} texts, {s['real_tokens']:,} real tokens "
            f"(mean {s['mean_length']:.1f}), {s['padded_tokens']:,} padded in batches of {result['setup']['batch_size']}; "
            f"{s['flops']['total'] / 1e9:.1f} GFLOP of matrix products ({100 * s['flops']['attention'] / s['flops']['total']:.0f}% attention). "
            f"Peaks at M = {p['M']} tokens: fp32 {p['model_peak']['fp32']:.0f}, bf16 {p['model_peak']['bf16']:.0f}, "
            f"int8 {p['model_peak']['int8']:.0f} GFLOP/s.\n"
        )
        md.append("| backend | median s | CPU s | texts/s | x ST torch (same process) | x by CPU time | GFLOP/s | % of peak |")
        md.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in table[k]:
            md.append(
                f"| {r['name']} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rate']:.0f} | {r['speedup']:.2f} | {r['speedup_cpu']:.2f} | "
                f"{r['gflops']:.0f} | {100 * r['of_peak']:.0f}% {r['kind']} |"
            )
    return md


def _accuracy_table(result: dict) -> list[str]:
    acc = dict(result.get("accuracy") or {})
    peer_acc = (result.get("peers") or {}).get("accuracy") or {}
    if not acc and not peer_acc:
        return []
    md = ["\n| backend | cls | last-avg (mean) | lost vs fp32 (cls / last-avg) |", "|---|---:|---:|---:|"]
    for proc, table, ref in (("ours", acc, "ours torch fp32"), ("peers", peer_acc, "ST torch fp32")):
        for name, a in table.items():
            r = table.get(ref)
            lost = f"{r['cls'] - a['cls']:+.2f} / {r['last-avg'] - a['last-avg']:+.2f}" if r else "-"
            shown = f"{name} (peer venv)" if proc == "peers" and name == "ST torch fp32" else name
            md.append(f"| {shown} | {a['cls']:.2f} | {a['last-avg']:.2f} | {lost} |")
    return md


def _profile(result: dict) -> list[str]:
    p = result["int8_profile_long256"]
    share = p["op_share_of_nodes"]
    gemm = sum(share.get(k, 0.0) for k in ("DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulInteger"))
    att = sum(share.get(k, 0.0) for k in ("Where", "Softmax", "FusedMatMul", "MatMul", "IsNaN"))
    norm = sum(share.get(k, 0.0) for k in ("SkipLayerNormalization", "LayerNormalization", "Add", "Gelu", "BiasGelu"))
    lin = result["tokens"]["long@256"]["flops"]["linear"]
    peak = result["peaks"]["long@256"]["model_peak"]["int8"]
    why = (
        f"\nSo the int8 matrix products (DynamicQuantizeMatMul, which also quantizes its input on every call, and "
        f"MatMulIntegerToFloat) take only {100 * gemm:.0f}% of the time; attention, kept in fp32 by dynamic quantization, "
        f"takes {100 * att:.0f}% (QK^T and AV as FusedMatMul/MatMul, Softmax, and `Where`: torch's sdpa decomposition "
        f"guards fully masked rows with `Where(IsNaN(p), 0, p)` on every [batch, 12, L, L] probability tensor, traced into "
        f"our export), and layer norms / residual adds / GELU {100 * norm:.0f}%. Tokenising, padding and Python are "
        f"{100 * p['outside_run_s'] / p['wall_s']:.0f}%. The int8 GEMM nodes by themselves run "
        f"{lin / (gemm * p['nodes_s']) / 1e9:.0f} GOP/s = {100 * lin / (gemm * p['nodes_s']) / 1e9 / peak:.0f}% of the "
        f"int8 peak measured in this (loaded) run, about a quarter of the clean 1-thread MatMulInteger peak measured earlier (not "
        f"kept in the repository): DynamicQuantizeMatMul quantizes its fp32 input on every call and loses "
        f"25-65% against raw MatMulInteger there. Even so, the GEMMs are a quarter of the time: the bound is the work "
        f"around them (elementwise passes over [batch, 12, L, L] attention tensors, "
        f"{64 * 12 * 256 * 256 * 4 / 2**20:.0f} MiB per layer for a full batch at L = 256, far beyond the 2 MiB L2), "
        f"not tokenisation or Python."
    )
    shares = ", ".join(f"{op} {100 * s:.0f}%" for op, s in list(p["op_share_of_nodes"].items())[:8])
    return [
        f"\nonnxruntime's profiler on our int8 graph, long passages at max_length 256 (one pass, {p['wall_s']:.2f} s): "
        f"{p['nodes_s']:.2f} s inside graph nodes, {p['session_run_s'] - p['nodes_s']:.2f} s in `session.run` outside nodes, "
        f"{p['outside_run_s']:.2f} s outside `session.run` (tokenising, padding, Python). Share of node time by operator: {shares}.",
        why,
    ] + _variants(result.get("variants"))


def render(result: dict) -> str:
    table = rows(result)
    su = result["setup"]
    peers = result.get("peers")
    pv = (
        f", peers: sentence-transformers {peers['versions']['sentence_transformers']} / onnxruntime {peers['versions']['onnxruntime']} / OpenVINO {peers['versions']['openvino'].split('-')[0]}"
        if peers
        else ""
    )
    md = [
        "## Encoder throughput vs sentence-transformers",
        "",
        f"`bench/encode.py` — default model (all-MiniLM-L6-v2), {su['threads']} thread(s), batch size {su['batch_size']}, "
        f"median of {su['rounds']} interleaved rounds. Machine: {su['machine']}; torch {su['versions']['torch']}, "
        f"sentence-transformers {su['versions']['sentence_transformers']}, onnxruntime {su['versions']['onnxruntime']}{pv}. "
        f"**x ST torch** is each backend's speed-up over sentence-transformers' torch backend timed *in the same process* "
        f"(ours and ST torch in the project venv; the peers and their own ST torch in the peer venv). GFLOP/s counts the "
        f"matrix products of the real tokens (padding excluded, bench/_encode_flops.py); % of peak is against the GEMM peak "
        f"of the backend's arithmetic (fp32: torch fp32 matmul; bf16: torch bf16 matmul; int8: onnxruntime MatMulInteger) "
        f"measured in the same run on the encoder's shapes at the workload's batch size.",
    ]
    md += ["", conditions(result)]
    md += ["", "### Targets", "", *targets(result, table)]
    md += ["", "### Speed", *_speed_tables(result, table)]
    md += ["", "### Accuracy (STS-B test, Spearman x 100, max_length 256)", *_accuracy_table(result)]
    md += ["", "### What bounds int8", *_profile(result)]
    md += findings(result)
    md += memory_section(result.get("memory"))
    md += ["", RERUN]
    return "\n".join(md)


RERUN = """### How to rerun

```
.venv/bin/python bench/encode.py --quick                       # smoke run, no docs (bench/results/encode-quick.json)
python3.11 -m venv .venv-peers && .venv-peers/bin/pip install -U pip
.venv-peers/bin/pip install torch==2.13.0   # the CPU build on this project's machines
.venv-peers/bin/pip install -r bench/peers/requirements-st5.txt
.venv/bin/python bench/encode.py --peers-python .venv-peers/bin/python   # on an idle machine (~15 min + ~12 for peers)
.venv/bin/python bench/_encode_export_variants.py                   # sdpa vs eager-attention int8 export
.venv/bin/python bench/encode_memory.py --lines 20000,100000,1000000 --progress
.venv/bin/python bench/encode.py --render bench/results/encode.json   # redraw this section
```
"""


def memory_section(mem: dict | None) -> list[str]:
    """The ``isotropy encode`` memory check (bench/encode_memory.py's JSON), if it was run."""
    if not mem:
        return ["\n### Memory\n", "Not measured yet: run `.venv/bin/python bench/encode_memory.py`."]
    md = [
        "\n### Memory: `isotropy encode` on a large file\n",
        f"`bench/encode_memory.py` — STS-B sentences repeated into one file under /tmp; `isotropy encode FILE -o OUT.npy "
        f"--precision {mem['precision']}` with {mem['threads']} thread(s) as a child process; peak RSS = the child's "
        "`ru_maxrss`; throughput = lines / wall time (model load included). Another session kept both cores busy "
        "during these runs (wall ~2x CPU time), so the per-CPU-second rate is the cleaner speed figure.",
        "",
        "| lines | wall s | CPU s | sentences/s | peak RSS MiB |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in mem["runs"]:
        md.append(
            f"| {r['lines']:,} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} | {r['sentences_per_s']:.0f} "
            f"({r['lines'] / r['cpu_s']:.0f} per CPU second) | {r['peak_rss_mib']:.0f} |"
        )
    runs = mem["runs"]
    if len(runs) >= 2:
        a, z = runs[0], runs[-1]
        grew = z["peak_rss_mib"] - a["peak_rss_mib"]
        md.append(
            f"\n**Peak RSS must not grow with N: {'met' if grew < 0.05 * a['peak_rss_mib'] else 'missed'}** — "
            f"{a['lines']:,} -> {z['lines']:,} lines: {a['peak_rss_mib']:.0f} -> {z['peak_rss_mib']:.0f} MiB ({grew:+.0f} MiB). "
            "`isotropy encode` reads its input a line at a time and writes vectors through a plain file handle, so "
            "neither the lines nor the vectors are held (the longest line is the same in both files); what still "
            "grows has not been traced (allocator fragmentation across chunks is the first suspect) and 1M lines "
            "were not run on this loaded machine."
        )
    ro = mem.get("read_only")
    if ro and len(runs) < 2:
        growth = ro[-1]["peak_rss_mib"] - ro[0]["peak_rss_mib"]
        md.append(
            f"\n**Peak RSS must not grow with N: missed** (not run end to end beyond {runs[0]['lines']:,} lines for lack of "
            f"time on the loaded machine; the part that grows was measured alone: {growth:+.0f} MiB from "
            f"{ro[0]['lines']:,} to {ro[-1]['lines']:,} lines, i.e. about {runs[0]['peak_rss_mib'] + growth:.0f} MiB at "
            f"{ro[-1]['lines']:,})."
        )
    if ro:
        md.append(
            "Where it grows: `isotropy encode` reads the whole file into a list of lines before encoding it in chunks "
            "(`read_sentences` in `files/vectors.encode_file`). Peak RSS of a process that only does that read: "
            + ", ".join(f"{r['lines']:,} lines {r['peak_rss_mib'] - r['rss_after_import_mib']:.0f} MiB" for r in ro)
            + f" above its baseline, so from {ro[0]['lines']:,} to {ro[-1]['lines']:,} lines encode's peak grows by about "
            f"{ro[-1]['peak_rss_mib'] - ro[0]['peak_rss_mib']:.0f} MiB (not run end to end at 1M: at the speed of this loaded "
            "machine it would take over an hour). Streaming the "
            "lines (count them for the .npy header, then read chunk by chunk) would make it flat."
        )
    frame = next((r["progress_frame"] for r in reversed(mem["runs"]) if r.get("progress_frame")), None)
    if frame:
        md.append(
            f"\nThe progress bar (drawn on a pseudo-terminal) shows sentences per second and time left (last frame read "
            f"back: `{frame}`); it advances batch by batch."
        )
    return md


def _median(result: dict, key: str, name: str) -> float:
    return result["times"][key][name]["median_wall"]


def findings(result: dict) -> list[str]:
    """What the numbers say about each lever the issue lists (computed from the result, not typed in)."""
    acc = result.get("accuracy") or {}
    md = ["\n### What each lever gave\n"]
    sp = [f"{k} {_median(result, k, 'ours torch fp32') / _median(result, k, 'ours torch bf16'):.2f}x" for k in SETTINGS]
    lost = ""
    if "ours torch bf16" in acc:
        f, b = acc["ours torch fp32"], acc["ours torch bf16"]
        lost = f" STS-B Spearman change: cls {b['cls'] - f['cls']:+.2f}, last-avg {b['last-avg'] - f['last-avg']:+.2f}."
    md.append(
        "- **bf16 (`Encoder(precision='bf16')`, `isotropy encode --precision bf16`)**: `torch.autocast('cpu', bfloat16)` "
        "around the forward pass, pooled in float32. Speed-up over our fp32 on this CPU: " + ", ".join(sp) + "." + lost + " "
        "It pays only where the CPU multiplies bfloat16 natively: Intel Xeon 4th gen (Sapphire Rapids, AMX-BF16) and later, "
        "Cooper Lake and AMD Zen 4 and later (AVX512-BF16) — check with `grep -o -w -e amx_bf16 -e avx512_bf16 /proc/cpuinfo "
        "| sort -u`. Elsewhere oneDNN emulates bf16 (torch.ops.mkldnn._is_mkldnn_bf16_supported() is True on any AVX-512 "
        "CPU) and it is not expected to be faster than fp32; we had no such CPU to measure. So fp32 stays the default and "
        "bf16 is the documented fast option; the fingerprint of a bf16 encoder ends in `+bf16`, so vector caches and "
        "indexes never mix the two."
    )
    for base in ("ours torch fp32", "ours torch bf16", "ours onnx int8"):
        tb = f"{base}, 2048-token batches"
        rat = [f"{k} {_median(result, k, base) / _median(result, k, tb):.2f}x" for k in SETTINGS]
        md.append(f"- **Token-budget batches (2,048 padded tokens) vs 64 sentences, {base}**: " + ", ".join(rat) + ".")
    md.append(
        "  Mixed (from a third faster to a seventh slower depending on backend and workload), so it is an option "
        "(`Encoder(batch_tokens=N)`), not the default; the vectors are the same either way (tests/test_encode_speed.py)."
    )
    tok = result["tokenise_seconds"]
    fastest = {k: min(r["median_wall"] for n, r in result["times"][k].items() if n.startswith("ours")) for k in SETTINGS}
    md.append(
        "- **Tokenising in a background thread**: tokenising + padding is "
        + ", ".join(f"{k} {100 * tok[k] / fastest[k]:.0f}%" for k in SETTINGS)
        + " of our fastest backend's time (measured under the same load). That is the most a background "
        "tokenising thread could hide, and only when a core is idle (1-thread model on 2 cores); with 2 model threads "
        "both cores are busy. Not implemented in this round: the bound is small except for long@64 (left open)."
    )
    md.append(
        "- **ONNX fp32** is slower than torch fp32 here on every workload (see the tables; the dynamo export is also "
        "~13-20% slower than optimum's TorchScript graph in earlier measurements not kept in the repository); "
        "onnxruntime's transformer fusion did not pay on this CPU either (same measurements), so neither is adopted. "
        "Static int8 was not added to ours: onnxruntime's static MinMax int8 lost accuracy and speed against dynamic "
        "int8 in those measurements (section 5); OpenVINO's static int8 (the peer row) is the fastest peer."
    )
    return md


def _variants(v: dict | None) -> list[str]:
    """bench/_encode_export_variants.py: the int8 graph exported with eager attention (no sdpa NaN guard)."""
    if not v:
        return []
    med = v["median_s"]
    parts = [
        f"{k}: {per['sdpa export (default)']:.2f} s -> {per['eager-attention export']:.2f} s "
        f"({per['sdpa export (default)'] / per['eager-attention export']:.2f}x)"
        for k, per in med.items()
    ]
    prof = v["profiles_long256"]["eager-attention export"]["op_share_of_nodes"]
    shares = ", ".join(f"{op} {100 * s:.0f}%" for op, s in list(prof.items())[:6])
    return [
        "\nFollow-up measured (`bench/_encode_export_variants.py`, 1 thread, interleaved medians): the same int8 export traced "
        "with eager attention instead of sdpa (no `Where`/`IsNaN` guard; additive mask): " + "; ".join(parts) + f". Cosine "
        f"between the two graphs' vectors: min {v['cosine_min_mean'][0]:.4f}, mean {v['cosine_min_mean'][1]:.4f}. Its op "
        f"shares on long@256: {shares}."
    ]


def conditions(result: dict) -> str:
    """How loaded the machine was: wall / CPU time of each process's runs, and the GEMM-peak caveat."""

    def ratio(times: dict) -> float:
        wall = sum(r["median_wall"] for per in times.values() for r in per.values())
        return wall / sum(r["median_cpu"] for per in times.values() for r in per.values())

    peers = result.get("peers")
    over = [k for k, rs in rows(result).items() if any(r["of_peak"] > 1 for r in rs)]
    txt = (
        f"**Conditions.** Another session ran tests and benchmarks on the same 2 cores during this run (load average "
        f"{result['setup']['loadavg_after'][0]} at the end). Wall / process-CPU time over all timed runs: ours "
        f"{ratio(result['times']):.2f}"
        + (f", peers {ratio(peers['times']):.2f} (they ran later, under heavier load)" if peers else "")
        + ". Ratios are taken within each process between interleaved runs, which cancels most of it, but treat "
        "differences under ~10% as noise."
    )
    if over:
        txt += (
            f" The GEMM peaks were measured under the same load: in {', '.join(over)} a backend beat its 'peak', so "
            "every '% of peak' here is an upper bound (clean 1-thread peaks on this machine: fp32 ~100-115 GFLOP/s, "
            "int8 MatMulInteger 460-1065 GOP/s, measured by the project's earlier GEMM probes, not kept in the repository)."
        )
    return txt
