"""Retrieval benchmark: where does calibration help search, and which compression costs least?

Cranfield 1400 (../shared/data/retrieval/cranfield, override the data root with ISOTROPY_DATA):
1400 aeronautics abstracts (title + abstract), 225 queries, graded qrels (code c -> gain 5 - c).
For each model and pooling, every fixed calibration of the STS harness (raw, center, abtt,
common-component, whitening, soft-0.25/0.5/0.75) and whitening-K / pca-K (PCA without scaling) for
every K below the dimension in KS, each fitted on the documents (``fit_on="target"``: label-free,
nothing tuned on the qrels), searched exactly and with int8 (``sq8``) and sign-bit (``binary``)
codes; raw, whitening-128 and pca-128 also with the index kinds (flat, hnsw, ivf at the defaults of
``isotropy index build``). Metrics from trec_eval; query time is the median search time of one
query (encoding excluded), on a shared machine: read it as an order of magnitude.

    .venv/bin/python bench/retrieval.py [--model MODEL ...] [--pooling P ...]

``--model`` is repeatable (default: the embedded all-MiniLM-L6-v2 with last-avg and cls; another
model gets its own pooling unless ``--pooling`` is given). Raw numbers go to
bench/results/retrieval.json, the tables and the paragraph to docs/RESULTS.md (section
``retrieval``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import DATA, ROOT, machine, portable, update_section  # noqa: E402

FIXED = ["raw", "center", "abtt", "common-component", "whitening", "soft-0.25", "soft-0.5", "soft-0.75"]
KS = [12, 48, 96, 128, 192, 256]
INDEX_METHODS = ["raw", "whitening-128", "pca-128"]
DEFAULT_POOLINGS = ["last-avg", "cls"]
OUT = ROOT / "bench" / "results" / "retrieval.json"


def run_model(model: str | None, poolings: list[str] | None, folder: Path) -> dict:
    from isotropy import Encoder
    from isotropy.retrieval import evaluate_retrieval

    encoder = Encoder(model)
    dim = int(encoder.dim)
    pools = poolings or (DEFAULT_POOLINGS if model is None else [encoder.pooling])
    ks = [k for k in KS if k < dim]
    methods = FIXED + [f"{m}-{k}" for k in ks for m in ("whitening", "pca")]
    common = dict(model=model, poolings=pools, max_length=None, show_progress=True)
    main = evaluate_retrieval(folder, methods=methods, kinds=["exact", "sq8", "binary"], **common)
    idx = evaluate_retrieval(folder, methods=[m for m in INDEX_METHODS if m == "raw" or int(m.split("-")[1]) < dim], kinds=["flat", "hnsw", "ivf"], **common)  # fmt: skip
    return {"model": main.settings["model"], "dim": dim, "settings": main.settings, "rows": main.rows + idx.rows}


def _f(v) -> str:
    return "-" if v is None else f"{100 * v:.2f}"


def _method_table(rows: list[dict], pooling: str) -> list[str]:
    ex = {r["method"]: r for r in rows if r["pooling"] == pooling and r.get("kind") == "exact"}
    raw = ex["raw"]
    out = [
        "| method | dim | bytes/vector | nDCG@10 | recall@100 | MRR@10 | nDCG@10 - raw |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for m, r in ex.items():
        out.append(
            f"| {m} | {r['dim']} | {r['bytes_per_vector']:.0f} | {_f(r['ndcg@10'])} | {_f(r['recall@100'])} | {_f(r['mrr@10'])} | "
            f"{100 * (r['ndcg@10'] - raw['ndcg@10']):+.2f} |"
        )
    return out


def _size_table(rows: list[dict], pooling: str) -> list[str]:
    """Every (method, kind) of raw, whitening-K and pca-K, smallest first."""
    keep = [
        r
        for r in rows
        if r["pooling"] == pooling
        and "bytes_per_vector" in r
        and (r["method"] == "raw" or r["method"].split("-")[0] in ("pca", "whitening"))
    ]
    keep.sort(key=lambda r: (r["bytes_per_vector"], -r["ndcg@10"]))
    out = [
        "| method | search | bytes/vector | query ms | nDCG@10 | recall@100 | top-10 vs exact |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in keep:
        agree = "" if r.get("agree@10") is None else f"{100 * r['agree@10']:.1f}"
        out.append(
            f"| {r['method']} | {r['kind']} | {r['bytes_per_vector']:.0f} | {r['query_ms']:.3f} | {_f(r['ndcg@10'])} | "
            f"{_f(r['recall@100'])} | {agree} |"
        )
    return out


def _paragraph(name: str, rows: list[dict], pooling: str) -> str:
    """What the numbers say, from the numbers: the best and worst calibrations, and the compressions at equal size."""
    ex = {r["method"]: r for r in rows if r["pooling"] == pooling and r.get("kind") == "exact"}
    raw = ex["raw"]["ndcg@10"]
    delta = {m: 100 * (r["ndcg@10"] - raw) for m, r in ex.items() if m != "raw"}
    helps = sorted((m for m, d in delta.items() if d >= 0.5), key=lambda m: -delta[m])
    hurts = sorted((m for m, d in delta.items() if d <= -0.5), key=lambda m: delta[m])
    text = f"**{name}, {pooling}** (raw nDCG@10 {100 * raw:.2f}): "
    text += (
        "calibration helps with " + ", ".join(f"{m} ({delta[m]:+.2f})" for m in helps[:4])
        if helps
        else "no calibration gains 0.5 nDCG@10 points or more"
    )
    text += (
        "; it hurts with " + ", ".join(f"{m} ({delta[m]:+.2f})" for m in hurts[:4])
        if hurts
        else "; none loses 0.5 points or more"
    )
    text += f" ({len(helps)} of {len(delta)} methods gain >= 0.5 points, {len(hurts)} lose >= 0.5)."
    by_kind = {(r["method"], r["kind"]): r for r in rows if r["pooling"] == pooling and "bytes_per_vector" in r}
    pairs = []
    for kind in ("sq8", "binary"):
        q = by_kind.get(("raw", kind))
        if q is None:
            continue
        k = int(q["bytes_per_vector"]) // 4  # float32 dimensions at the same size (the codes carry a few bytes of header)
        for m in (f"pca-{k}", f"whitening-{k}"):
            if (m, "exact") in by_kind:
                p = by_kind[(m, "exact")]
                pairs.append(
                    f"at about {q['bytes_per_vector']:.0f} bytes per vector raw {kind} scores {100 * q['ndcg@10']:.2f} "
                    f"and {m} in float32 {100 * p['ndcg@10']:.2f}"
                )
    if pairs:
        text += " Compression at equal size: " + "; ".join(pairs) + "."
    return text


def render(results: list[dict]) -> str:
    parts = [
        "Cranfield 1400 (1400 abstracts, 225 queries, graded qrels), every calibration fitted on the documents "
        "(label-free; nothing was tuned on the qrels). Metrics x 100 from trec_eval (nDCG@10 with gains 5 - code). "
        f"Generated by `bench/retrieval.py` on {machine()}; query times are medians of one query's search on a shared "
        "machine (an order of magnitude, not a ranking)."
    ]
    for res in results:
        pools = res["settings"]["poolings"]
        parts.append(f"### {res['model']} (max_length {res['settings']['max_length']})")
        for p in pools:
            parts.append(_paragraph(res["model"], res["rows"], p))
        for p in pools:
            parts.append(f"#### {p}: calibrations, exact search\n\n" + "\n".join(_method_table(res["rows"], p)))
            parts.append(f"#### {p}: size against quality (raw, whitening-K, pca-K)\n\n" + "\n".join(_size_table(res["rows"], p)))
    return "\n\n".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", help="model id or folder, repeatable (default: the embedded default model)")
    ap.add_argument("--pooling", action="append", help="pooling, repeatable (default: last-avg and cls for the default model)")
    ap.add_argument("--render-only", action="store_true", help="re-render docs/RESULTS.md from bench/results/retrieval.json")
    args = ap.parse_args()
    folder = DATA / "retrieval" / "cranfield"
    if args.render_only:
        results = json.loads(OUT.read_text())["results"]
    else:
        old = json.loads(OUT.read_text())["results"] if OUT.is_file() else []
        new = [run_model(m, args.pooling, folder) for m in (args.model or [None])]
        # a run for one model replaces that model's entry and keeps the others (--model glove-6b-50d adds it)
        results = [r for r in old if r["model"] not in {n["model"] for n in new}] + new
        OUT.write_text(json.dumps(portable({"results": results}), indent=1, default=float) + "\n")
    update_section("RESULTS.md", "retrieval", "## Retrieval: Cranfield\n\n" + render(results))
    print(f"wrote {OUT} and the retrieval section of docs/RESULTS.md")


if __name__ == "__main__":
    main()
