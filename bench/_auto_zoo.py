"""The model zoo of bench/auto.py (issue #24): label-free signals and the signal rule, held out task by task.

``tune_zoo``: every zoo entry fitted on the STS-B TRAIN split's sentences and scored on its train
pairs (no test label of any task): the signals of :mod:`isotropy.selection.signals` and every
candidate's gain over raw; the signal rule's settings (:data:`isotropy.selection.signals.SIGNAL_RULE`)
are read off this table. ``run_zoo``: leave one task out over the 7 STS tasks, calibrations fitted
on ``others``; per cell raw, every fixed method, the oracle, label-free auto (the signal rule, and
each signal deciding alone with its STS-B-train threshold) and few-label auto (20 draws of 100 pairs).
"""

from __future__ import annotations

import time

import numpy as np
from _zoo import ZOO, zoo_vectors

DRAWS, DEV_PAIRS = 20, 100


def entries() -> list[tuple[str, str]]:
    return [(m, p) for m, ps in ZOO.items() for p in ps]


def label(model: str, pooling: str) -> str:
    return f"{model}/{pooling}"


def candidates(X: np.ndarray):
    """The default candidates plus SpecTemp's (width d/2, its power read from X's spectrum)."""
    from isotropy.selection import default_candidates
    from isotropy.selection.signals import spectemp_candidate

    return [*default_candidates(X.shape[1]), spectemp_candidate(X)]


def spearman(Y: np.ndarray, a: np.ndarray, b: np.ndarray, gold: np.ndarray) -> float:
    from scipy.stats import spearmanr

    u = Y / np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-300)
    return float(spearmanr((u[a] * u[b]).sum(1), gold).statistic * 100)


def truths(sel, V: np.ndarray, a, b, gold) -> dict[str, float]:
    return {n: spearman(V if t is None else t.transform(V), a, b, gold) for n, t in sel.transforms.items()}


def tune_zoo(data_dir: str) -> dict:
    """Signals and per-candidate truth on the STS-B train split, for every zoo entry."""
    from pathlib import Path

    from isotropy.evaluation import load_stsb
    from isotropy.evaluation.fitting import pair_sides
    from isotropy.selection.select import Selector
    from isotropy.selection.signals import corpus_signals

    t0 = time.perf_counter()
    task = load_stsb(Path(data_dir) / "sts" / "STSBenchmark")
    train = task.splits["train"]
    uniq = task.sentences(["train"])
    at = {s: i for i, s in enumerate(uniq)}
    rows = np.array([at[s] for s in pair_sides(train)])
    a, b = np.array([at[p.s1] for p in train]), np.array([at[p.s2] for p in train])
    gold = np.array([p.score for p in train])
    out = {}
    for model, pooling in entries():
        V = zoo_vectors(model, pooling, uniq).astype(np.float64)
        X = V[rows]
        sel = Selector(X, candidates(X), seed=0, source="STS-B train")
        out[label(model, pooling)] = {"signals": corpus_signals(X, 0), "truth": truths(sel, V, a, b, gold), "dim": X.shape[1]}
        print(f"tuned {model}/{pooling}", flush=True)
    return {"entries": out, "wall_s": time.perf_counter() - t0}


def tuned_rule(tune: dict) -> dict:
    """The signal rule read off the STS-B train table: for each signal and direction, the threshold (a midpoint
    between two entries) that best tells "full whitening gains >= 0.5 over raw" from "it does not"
    (most entries right, then the widest gap relative to the signal's spread); the deciding signal is the best
    such; the action is the calibration with the best mean gain over the entries where that signal fires."""
    from isotropy.selection.signals import SIGNAL_NAMES, SIGNAL_RULE, signal_alone

    ent = tune["entries"]
    helps = {e: r["truth"]["whitening"] - r["truth"]["raw"] >= 0.5 for e, r in ent.items()}  # the method a user would pick
    thresholds, quality = {}, {}
    for name in SIGNAL_NAMES:
        vals = sorted((r["signals"][name], e) for e, r in ent.items() if np.isfinite(r["signals"][name]))
        spread = (vals[-1][0] - vals[0][0]) or 1.0
        best = None
        for q in range(1, len(vals)):
            t = (vals[q - 1][0] + vals[q][0]) / 2
            gap = (vals[q][0] - vals[q - 1][0]) / spread
            for op in (">", "<"):
                right = sum((v > t if op == ">" else v < t) == helps[e] for v, e in vals)
                if best is None or (right, gap) > best[0]:
                    best = ((right, gap), (op, float(t)))
        thresholds[name], quality[name] = best[1], best[0]
    decide = max(quality, key=quality.get)
    rule = {**SIGNAL_RULE, "thresholds": thresholds, "decide": decide}
    fired = [e for e, r in ent.items() if signal_alone(r["signals"], decide, rule)]
    shared = set.intersection(*(set(r["truth"]) for r in ent.values()))  # abtt-D / whitening-K names depend on d
    names = [n for n in next(iter(ent.values()))["truth"] if n != "raw" and n in shared]
    gain = {n: float(np.mean([ent[e]["truth"][n] - ent[e]["truth"]["raw"] for e in fired])) if fired else -1.0 for n in names}
    act = max(gain, key=gain.get)
    g = [ent[e]["truth"][act] - ent[e]["truth"]["raw"] for e in fired]
    rule["act"] = act
    rule["expected"] = {
        False: "unchanged similarities (raw kept)",
        True: f"{act}: {np.mean(g):+.1f} Spearman points on average on the STS-B train split of the models where the "
        f"rule fired ({min(g):+.1f} to {max(g):+.1f}, {len(g)} models)"
        if g
        else "not measured",
    }
    rule["quality"] = {k: list(v) for k, v in quality.items()}
    return rule


def run_zoo(data_dir: str, tasks_names: list[str], rule: dict) -> dict:
    from auto import Corpus, dev_pool

    from isotropy.evaluation import load_tasks
    from isotropy.evaluation.fitting import plan_others
    from isotropy.selection.select import Selector
    from isotropy.selection.signals import SIGNAL_RULE, corpus_signals, decide_by_signals, signal_alone

    t_start = time.perf_counter()
    tasks = load_tasks(data_dir, tasks_names)
    plan = plan_others(tasks)
    cells: dict[str, dict] = {}
    for model, pooling in entries():
        t1 = time.perf_counter()
        corpora = [Corpus(t, {pooling: zoo_vectors(model, pooling, t.sentences())}) for t in tasks]
        devs = [dev_pool(corpora, i) for i in range(len(corpora))]
        for i, c in enumerate(corpora):
            X = np.concatenate([corpora[j].vectors[pooling][r] for j, r in plan[i].parts]).astype(np.float64)
            sel = Selector(X, candidates(X), seed=0, source=f"others corpus of {c.task.name}")
            ev = c.task.eval_pairs
            a, b = c.rows([p.s1 for p in ev]), c.rows([p.s2 for p in ev])
            gold = np.array([p.score for p in ev])
            sig = corpus_signals(X, 0)
            decision = decide_by_signals(sig, rule)
            alone = {s: signal_alone(sig, s, rule) for s in SIGNAL_RULE["thresholds"]}
            pool = devs[i][1]
            few = []
            for k in range(DRAWS if len(pool) >= DEV_PAIRS else 0):
                pick = np.random.default_rng([k, i]).choice(len(pool), size=DEV_PAIRS, replace=False)
                L = np.stack([corpora[pool[q][0]].vectors[pooling][pool[q][1]] for q in pick]).astype(np.float64)
                R = np.stack([corpora[pool[q][0]].vectors[pooling][pool[q][2]] for q in pick]).astype(np.float64)
                few.append(sel.few_label((L, R, np.array([pool[q][3] for q in pick]))).choice)
            cells[f"{label(model, pooling)}|{c.task.name}"] = {
                "truth": truths(sel, c.vectors[pooling].astype(np.float64), a, b, gold),
                "signals": sig,
                "label_free": decision["choice"],
                "fired": decision["fired"],
                "reason": decision["reason"],
                "alone": alone,
                "few_label": few,
                "dev_source": devs[i][0],
                "fit_rows": int(len(X)),
            }
        print(f"{model}/{pooling}: {time.perf_counter() - t1:.0f} s", flush=True)
    meta = {"tasks": [t.name for t in tasks], "wall_s": time.perf_counter() - t_start}
    return {"cells": cells, "rule": {k: v for k, v in rule.items() if k != "expected"}, "meta": meta}
