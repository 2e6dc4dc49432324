"""Workloads of bench/encode.py and bench/encode_peers.py: STS-B test sentences and ~200-token passages.

Both scripts (ours in the project venv, the peers' in a separate venv without isotropy's dependencies) must see
exactly the same text, so this module reads the STS-B csv with the standard library only and builds the long passages
from token counts passed in.
"""

from __future__ import annotations

import csv
import statistics
import time
from collections.abc import Callable

from _report import DATA

STSB = DATA / "sts" / "STSBenchmark"
LONG_TOKENS = 200  # target length of a long passage (word pieces, special tokens included)


def stsb_rows(split: str = "test") -> list[tuple[str, str, float]]:
    """``(sentence1, sentence2, score)`` of an STS-B split (tab-separated, no quoting; see the data README).

    Used only by the peer script, which runs without isotropy; ours goes through
    ``isotropy.evaluation.load_stsb`` and bench/encode.py checks the two agree.
    """
    rows = []
    with open(STSB / f"sts-{split}.csv", encoding="utf-8", newline="") as fh:
        for rec in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(rec) >= 7:
                rows.append((rec[5], rec[6], float(rec[4])))
    return rows


def short_sentences(rows: list[tuple[str, str, float]]) -> list[str]:
    """Both sides of every pair, in pair order (2 x 1,379 = 2,758 for STS-B test)."""
    return [s for a, b, _ in rows for s in (a, b)]


def long_passages(sentences: list[str], count_tokens: Callable[[str], int], target: int = LONG_TOKENS) -> list[str]:
    """Consecutive sentences joined with a space until a passage reaches ``target`` tokens.

    ``count_tokens`` counts one text's tokens (special tokens included); every sentence is
    used once, a final passage shorter than half the target is dropped.
    """
    out, cur = [], []
    for s in sentences:
        cur.append(s)
        if count_tokens(" ".join(cur)) >= target:
            out.append(" ".join(cur))
            cur = []
    if cur and count_tokens(" ".join(cur)) >= target // 2:
        out.append(" ".join(cur))
    return out


def calibration_sentences(n: int = 300) -> list[str]:
    """The first ``n`` distinct STS-B *train* sentences: what static int8 is calibrated on (never test)."""
    seen: dict[str, None] = {}
    for a, b, _ in stsb_rows("train"):
        for s in (a, b):
            seen.setdefault(s, None)
        if len(seen) >= n:
            break
    return list(seen)[:n]


def time_rounds(runners: dict[str, Callable], workloads: dict, rounds: int) -> dict:
    """runners: name -> fn(texts, max_length). Interleaved rounds; medians of wall and CPU seconds."""
    times: dict = {}
    for _ in range(rounds):
        for (wl, ml), texts in workloads.items():
            for name, fn in runners.items():
                t0, c0 = time.perf_counter(), time.process_time()
                fn(texts, ml)
                rec = times.setdefault(f"{wl}@{ml}", {}).setdefault(name, {"wall": [], "cpu": []})
                rec["wall"].append(time.perf_counter() - t0)
                rec["cpu"].append(time.process_time() - c0)
    for per in times.values():
        for rec in per.values():
            rec["median_wall"] = statistics.median(rec["wall"])
            rec["median_cpu"] = statistics.median(rec["cpu"])
    return times


def st_runner(model, batch_size: int) -> Callable:
    """A sentence-transformers model as a runner of :func:`time_rounds`: ``fn(texts, max_length)``."""

    def run(texts: list[str], max_length: int) -> None:
        model.max_seq_length = max_length
        model.encode(texts, batch_size=batch_size, show_progress_bar=False)

    return run
