"""Every docs section's markdown, from the saved results (bench/results/*.json): the one rendering module.

A bench script measures and saves; its ``--render`` mode reads the JSON and calls the function here named after
its section, so a section is rewritten without running a model, and re-rendering leaves the docs unchanged.
"""

from __future__ import annotations

import math
from statistics import mean


def f2(x) -> str:
    """A score with two decimals, ``-`` when missing."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def table(head: list[str], rows: list[list], align: str = "---") -> list[str]:
    """A markdown table."""
    return ["| " + " | ".join(head) + " |", "|" + "|".join([align] * len(head)) + "|"] + [
        "| " + " | ".join(str(c) for c in r) + " |" for r in rows
    ]


# --------------------------------------------------------------------------- static-factory (RESULTS.md)

FACTORY_ROWS = ("distill --corpus", "tokenlearn 0.2.1", "raw (256-d distill)", "potion-base-8M")


def static_factory(data: dict) -> str:
    product, tokenlearn, raw, potion = FACTORY_ROWS
    rows, tasks = data["rows"], data["tasks"]
    head = ["model", "corpus", "lines", "STS avg", *tasks, "Cranfield nDCG@10", "recall@100", "fit / train s (runs)"]

    def line(name: str, corpus: str, r: dict) -> list:
        cran = r.get("cranfield") or {}
        runs = r.get("seconds_runs")
        secs = (
            "-"
            if r.get("seconds") is None
            else f"{r['seconds']:.1f}" + (f" ({', '.join(f'{v:.1f}' for v in runs)})" if runs else "")
        )
        return [
            name,
            corpus,
            r.get("sentences", "-"),
            f"**{f2(r['avg'])}**",
            *map(f2, r["sts"]),
            f2(cran.get("ndcg@10")),
            f2(cran.get("recall@100")),
            secs,
        ]

    body = [line("teacher (all-MiniLM-L6-v2, mean)", "-", {"avg": mean(data["teacher_sts"]), "sts": data["teacher_sts"]})]
    body += [line(name, "-", rows[name]) for name in (raw, potion) if name in rows]
    for corpus in ("wiki", "cran", "wiki+cran", "others"):
        for name in (product, tokenlearn):
            r = rows.get(f"{name} / {corpus}")
            if r is not None:
                shown = "7 fits" if corpus == "others" else r.get("sentences", "-")
                body.append(line(f"`{name}`" if name == product else name, corpus, {**r, "sentences": shown}))
    return "\n".join(
        [
            "## Static models fitted on a corpus: `isotropy distill --corpus`",
            "",
            "`isotropy distill --corpus FILE` with its defaults (token fit from the full-width distill, halves, "
            "dropped-word and cut copies of the lines as spans, targets x n^-0.5, strength by held-out cosine "
            "agreement), tokenlearn 0.2.1 trained on the same lines and teacher vectors, and potion-base-8M "
            "(model2vec's own static model, no corpus) scored the same way. Spearman x 100, all pairs of each STS "
            "task pooled; `others`: per task one fit on the six other tasks' sentences, scored on that task. Fit "
            "seconds: statistics + solve (the teacher's encoding, cached, apart), medians of the runs listed, each in "
            "turn with tokenlearn's. Every field: `bench/results/static_factory.json`.",
            "",
            "```",
            "nice -n 5 .venv/bin/python bench/static_factory.py --others   # runs the fits; --render rewrites this from the JSON",
            "```",
            "",
            *table(head, body),
        ]
    )


# --------------------------------------------------------------------------- token-solve (BENCHMARKS.md)


def token_solve(r: dict) -> str:
    m = r["median_s"]
    same = len(set(r["strengths"].values())) == 1
    return "\n".join(
        [
            "## The token fit's solve (issue #32)",
            "",
            f"`isotropy distill --corpus`'s token fit on wiki + Cranfield's abstract sentences with the product's spans: "
            f"{r['seen']:,} seen tokens, a Gram of {r['nnz']:,} nonzeros, {r['columns']} columns. Median of "
            f"{r['repeats']} rounds, the variants in turns within a round, one process.",
            "",
            "| one Gram x block product | ms | time against the product's |",
            "|---|---|---|",
            f"| torch's threaded CSR product, {r['block_columns']} columns at a time (the product) | "
            f"{m['product_torch'] * 1000:.0f} | 1.00x |",
            f"| torch's threaded CSR product, all {r['columns']} columns at once (round 4) | "
            f"{m['product_torch_at_once'] * 1000:.0f} | {m['product_torch_at_once'] / m['product_torch']:.2f}x |",
            f"| scipy.sparse's product, all at once (single-threaded) | {m['product_scipy'] * 1000:.0f} | "
            f"{m['product_scipy'] / m['product_torch']:.2f}x |",
            "",
            "| the whole solve (strength chosen on held-out lines, then all lines) | s | time against the product's |",
            "|---|---|---|",
            f"| the product: torch by blocks, CG updates in place, the grid stopped past its peak | {m['solve_torch']:.2f} | "
            f"1.00x |",
            f"| round 4's: torch all at once, a new array per CG update | {m['solve_before']:.2f} | "
            f"{m['solve_before'] / m['solve_torch']:.2f}x |",
            f"| scipy.sparse's product (by blocks) | {m['solve_scipy']:.2f} | {m['solve_scipy'] / m['solve_torch']:.2f}x |",
            f"| the whole grid of five strengths (before round 4) | {m['solve_whole_grid']:.2f} | "
            f"{m['solve_whole_grid'] / m['solve_torch']:.2f}x |",
            "",
            "Strengths chosen: "
            + ", ".join(f"{k} {v:g}" for k, v in r["strengths"].items())
            + (" (the same)" if same else " (NOT the same)")
            + f". The tables differ from the product's by {r['torch_vs_scipy_table_rel_diff']:.1e} (scipy's product) and "
            f"{r['now_vs_before_table_rel_diff']:.1e} (round 4's solve), relative Frobenius.",
            "",
            f"Ran on {r['machine']}, load average {min(r['load']):.1f} to {max(r['load']):.1f} (a shared machine). "
            "Measured by bench/token_solve.py at commit 440b70e (it kept round 4's solver to compare, so it left bench/ "
            "with round 4); `.venv/bin/python bench/render.py token-solve` rewrites this from bench/results/token_solve.json.",
        ]
    )
