"""Round 5 of the static factory (issue #32): the same product, fitted faster; for bench/static_factory.py
``--round5`` (rows) and its render (the section's round-5 table).

Nothing the fit chooses changed: the recipe is round 4's product (tokens + halves + drop + cut, targets x n^-0.5,
the full-width start). What changed is how fast the same sums and the same table are made:

* the token ids of the lines and their spans come from a per-pass word cache (then ``distill/word_ids.py``; now the encoder's
  ``WordCache`` through ``encoders/static/sources.py``'s ``Model2VecIds``): each
  distinct word is tokenised once, exactly model2vec's ids (tested against it);
* the solve's sparse product takes 32 columns of the dense factor at a time, and the conjugate gradients update in
  place (BENCHMARKS `token-solve`: the same table bit for bit).

So the scores must equal round 4's product rows (the table shows both); the fit times are measured again against
tokenlearn 0.2.1 in turn in the same process, medians of ``--repeats`` runs of each.
"""

from __future__ import annotations

import _factory_round3 as r3
import _factory_round4 as r4

PRODUCT = "tokens + halves + drop + cut (round 5: the same fit, faster)"
LADDER = [(PRODUCT, 384, 0.5, ("halves", "drop", "cut"))]
TOKENLEARN = "tokenlearn, round 5 run"


def run(rows: dict, tasks, cran_task, corpora: dict, teacher_s: dict, save, names=None, tokenlearn=False, repeats=1) -> None:
    """Round 3's runner with this round's product and tokenlearn label (``names``: these corpora only)."""
    r3.run_round3(rows, tasks, cran_task, corpora, teacher_s, save, names, tokenlearn, repeats, (5, LADDER, PRODUCT, TOKENLEARN))


def _runs(x: dict) -> str:
    runs = x.get("seconds_runs") or [x["seconds"]]
    return ", ".join(f"{v:.1f}" for v in runs)


def section(data: dict) -> list[str]:
    r = data["rows"]
    lines = []
    for cname in ("wiki", "cran", "wiki+cran"):
        now, before, tl = r.get(f"{PRODUCT} / {cname}"), r.get(f"{r4.PRODUCT} / {cname}"), r.get(f"{TOKENLEARN} / {cname}")
        if now is None:
            continue
        split = now.get("split_s") or {}
        same = before is not None and abs(now["avg"] - before["avg"]) < 0.005
        lines.append(
            "| "
            + " | ".join(
                [
                    cname,
                    f"{now['avg']:.2f}" + (f" ({before['avg']:.2f}{', the same' if same else ''})" if before else ""),
                    f"{now['cranfield']['ndcg@10']:.2f}",
                    f"{now['seconds']:.1f} ({_runs(now)})",
                    f"{split.get('statistics', float('nan')):.1f} + {split.get('solve', float('nan')):.1f}",
                    f"{before['seconds']:.1f}" if before else "-",
                    f"{tl['seconds']:.0f} ({_runs(tl)})" if tl else "-",
                    f"{tl['seconds'] / now['seconds']:.1f}x" if tl else "-",
                    f"{now['load'][0]:.1f}-{now['load'][1]:.1f}",
                ]
            )
            + " |"
        )
    if not lines:
        return []
    return [
        "",
        "### Round 5: the same fit, faster (word-cached token ids, a cache-sized sparse product, in-place updates)",
        "",
        "Round 4's product fitted again with round 5's code: each distinct word of the lines and spans tokenised once "
        "(the same ids as model2vec's tokenizer, tested), the solve's sparse product 32 columns at a time and the CG's "
        "updates in place (the same table bit for bit: BENCHMARKS `token-solve`). Nothing the fit chooses changed, so the "
        "scores are round 4's (in brackets). Fit s: statistics + solve, medians of the runs listed, each run in turn "
        "with one of tokenlearn 0.2.1's (same lines, teacher vectors and start) in the same process; the statistics and "
        "solve split are the first run's.",
        "",
        "| corpus | STS avg (round 4) | Cranfield nDCG@10 | fit s (runs) | statistics + solve s | round 4's fit s | "
        "tokenlearn train s (runs) | tokenlearn / ours | load |",
        "|---|---|---|---|---|---|---|---|---|",
        *lines,
    ]
