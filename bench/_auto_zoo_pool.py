"""Few-label ``auto`` choosing the pooling too (issue #24: ``--method auto --pooling auto --dev``), on the zoo.

For each zoo model with two poolings offered (``POOLING_CHOICES``: mean vs SIF on the static tables, the default
model's own last-avg vs first-last-avg), leave one task out as :func:`_auto_zoo.run_zoo` does: the candidates fitted
per pooling on ``others`` (the same rows, the vectors from the shared ``VectorCache``), the same 20 draws of 100 dev
pairs from the other tasks (the same seeds as the stored few-label cells), and the product's decision
(:func:`isotropy.selection.pooling_choice.choose_pooling`: the incumbent is the label-free calibration on the
rule's pooling, kept unless another (pooling, candidate) passes the few-label rule, ``DEV_RULE``, on the same paired
resamples). Each draw's
test figure is read off the stored cells' truths (``bench/results/auto.json`` "zoo": every candidate's Spearman on
the held-out task under each pooling), which are checked against a refit. Nothing here reads a test label to choose.
"""

from __future__ import annotations

import time

import numpy as np
from _auto_zoo import DEV_PAIRS, DRAWS, POOLING_CHOICES, ZOO, candidates, encoder, is_static, label, zoo_vectors


def _models() -> list[tuple[str, tuple[str, str]]]:
    out = []
    for model, have in ZOO.items():
        pools = POOLING_CHOICES["static" if is_static(model) else "transformer"]
        if all(p in have for p in pools):
            out.append((model, pools))
    return out


def run_pool_choice(data_dir: str, tasks_names: list[str], zoo: dict, draws: int = DRAWS) -> dict:
    """Per (model, task): the (pooling, candidate) chosen in each draw, beside the stored truths of both poolings."""
    from _auto_data import Corpus, dev_pool

    from isotropy.evaluation import load_tasks
    from isotropy.evaluation.fitting import plan_others
    from isotropy.selection.pooling_choice import choose_pooling
    from isotropy.selection.select import Selector
    from isotropy.selection.signals import incumbent_of

    t0 = time.perf_counter()
    tasks = load_tasks(data_dir, tasks_names)
    plan = plan_others(tasks)
    cells: dict[str, dict] = {}
    for model, pools in _models():
        t1 = time.perf_counter()
        corpora = [Corpus(t, {p: zoo_vectors(model, p, t.sentences()) for p in pools}) for t in tasks]
        devs = [dev_pool(corpora, i) for i in range(len(corpora))]
        incumbent, why = incumbent_of(encoder(model))
        for i, c in enumerate(corpora):
            sels, truth = {}, {}
            for p in pools:
                X = np.concatenate([corpora[j].vectors[p][r] for j, r in plan[i].parts]).astype(np.float64)
                sels[p] = Selector(X, candidates(X), seed=0, source=f"others corpus of {c.task.name}")
                truth[p] = zoo["cells"][f"{label(model, p)}|{c.task.name}"]["truth"]
                if set(truth[p]) != set(sels[p].transforms):
                    raise SystemExit(f"{model}/{p}|{c.task.name}: the stored cell has other candidates; rerun --zoo")
            pool = devs[i][1]
            picks = []
            for k in range(draws if len(pool) >= DEV_PAIRS else 0):
                pick = np.random.default_rng([k, i]).choice(len(pool), size=DEV_PAIRS, replace=False)  # run_zoo's draws
                gold = np.array([pool[q][3] for q in pick])
                dev = {}
                for p in pools:
                    L = np.stack([corpora[pool[q][0]].vectors[p][pool[q][1]] for q in pick]).astype(np.float64)
                    R = np.stack([corpora[pool[q][0]].vectors[p][pool[q][2]] for q in pick]).astype(np.float64)
                    dev[p] = (L, R, gold)
                sel = choose_pooling(sels, dev, incumbent_pooling=pools[0], incumbent=incumbent, why=why)
                picks.append([sel.pooling["chosen"], sel.choice])
            own = zoo["cells"][f"{label(model, pools[0])}|{c.task.name}"]
            cells[f"{model}|{c.task.name}"] = {
                "poolings": list(pools),
                "incumbent": incumbent,
                "truth": truth,
                "choices": picks,
                "few_rule_pooling": own["few_label"],
            }
        print(f"pooling choice {model}: {time.perf_counter() - t1:.0f} s", flush=True)
    from _auto_few import name

    from isotropy.selection.dev import DEV_RULE

    meta = {"tasks": [t.name for t in tasks], "draws": draws, "wall_s": time.perf_counter() - t0, "dev_rule": name(DEV_RULE)}
    return {"cells": cells, "meta": meta}


def _f(x: float) -> str:
    return f"{x:.2f}"


def summary(pool: dict) -> dict[str, dict]:
    """Per model: task averages of each way of choosing (mean over the draws), the draws at >= raw(rule pooling) - 0.5,
    and the share of draws that left the rule's pooling."""
    out: dict[str, dict] = {}
    for key, c in pool["cells"].items():
        model = key.split("|")[0]
        own, _ = c["poolings"]
        t = c["truth"]
        raw = t[own]["raw"]
        got = [t[p][n] for p, n in c["choices"]]
        keys = ("raw", "label_free", "other", "few_rule", "few_pool", "oracle", "cal_oracle")
        row = out.setdefault(model, {k: [] for k in keys})
        row["raw"].append(raw)
        inc = t[own][c["incumbent"]]
        row["label_free"].append(inc)
        row["other"].append(t[c["poolings"][1]][c["incumbent"]])  # the other pooling under the kind's calibration
        row["few_rule"].append(float(np.mean([t[own][n] for n in c["few_rule_pooling"]])))
        row["few_pool"].append(float(np.mean(got)))
        row["oracle"].append(max(v for p in t for v in t[p].values()))
        row["cal_oracle"].append(max(t[own].values()))
        row.setdefault("safe", [0, 0])
        row["safe"][0] += sum(g >= raw - 0.5 for g in got)
        row["safe"][1] += len(got)
        row.setdefault("moved", [0, 0, 0])  # draws that left the rule's pooling, of all draws, and gained over the incumbent
        row["moved"][0] += sum(p != own for p, _ in c["choices"])
        row["moved"][1] += len(got)
        row["moved"][2] += sum(p != own and t[p][n] > inc for p, n in c["choices"])
        row.setdefault("worst_cell", []).append((sum(g >= raw - 0.5 for g in got), len(got), key.split("|")[1]))
        row["poolings"] = c["poolings"]
    return out


def section(pool: dict | None) -> list[str]:
    """The zoo section's 'few-label auto choosing the pooling too' table, from ``data["zoo_pool"]``."""
    if not pool:
        return []
    s = summary(pool)
    meta = pool["meta"]
    lines = [
        "### Few-label auto choosing the pooling too (`--pooling auto --dev`)",
        "",
        "Per zoo model with two poolings offered (mean vs SIF on a static table; the model's own, last-avg, vs "
        "first-last-avg on the default model), the product's decision (`choose_pooling` in "
        "src/isotropy/selection/pooling_choice.py, written by `bench/auto.py --zoo-pool`): the incumbent is the label-free "
        "calibration on the rule's pooling, replaced only by a (pooling, candidate) that passes the few-label rule "
        f"(`{meta.get('dev_rule', 'not recorded')}`, section 'Few-label rule') against it on 1000 paired bootstrap resamples "
        f"(the same resamples for both poolings); the same {meta['draws']} "
        "draws of 100 dev pairs as the few-label cells above (the task's train split, else the other tasks' pairs); candidates fitted per pooling on "
        "`others`. Spearman x 100 averaged over the 7 held-out tasks (each cell: the mean over its draws). "
        "'oracle' = best (pooling, calibration) by the test labels; 'oracle, rule's pooling' = best calibration on "
        "the rule's pooling.",
        "",
        "| model | poolings (rule's first) | raw, rule's pooling | label-free auto | other pooling, same calibration "
        "| few-label, rule's pooling | **few-label, pooling chosen** | oracle, rule's pooling | oracle "
        "| draws >= raw - 0.5 | draws leaving the rule's pooling (of them, gaining over label-free auto) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    avg = lambda v: float(np.mean(v))  # noqa: E731
    for model, r in s.items():
        lines.append(
            f"| {model} | {', '.join(r['poolings'])} | {_f(avg(r['raw']))} | {_f(avg(r['label_free']))} | "
            f"{_f(avg(r['other']))} | {_f(avg(r['few_rule']))} | **{_f(avg(r['few_pool']))}** | "
            f"{_f(avg(r['cal_oracle']))} | {_f(avg(r['oracle']))} | {r['safe'][0]}/{r['safe'][1]} | "
            f"{r['moved'][0]}/{r['moved'][1]} ({r['moved'][2]}) |"
        )
    lines += ["", *_verdict(s), ""]
    return lines


def _verdict(s: dict[str, dict]) -> list[str]:
    """What the table shows, in words, from the figures themselves."""
    diffs = {m: float(np.mean(r["few_pool"]) - np.mean(r["few_rule"])) for m, r in s.items()}
    gaps = {m: float(np.mean(r["oracle"]) - np.mean(r["few_pool"])) for m, r in s.items()}
    below = [
        f"{m} on {t} {ok}/{n}" for m, r in s.items() for ok, n, t in r["worst_cell"] if n and ok < n - 1
    ]  # fewer than 19 of 20 draws at >= raw - 0.5
    total_ok = sum(r["safe"][0] for r in s.values())
    total = sum(r["safe"][1] for r in s.values())
    other = {m: float(np.mean(r["other"]) - np.mean(r["label_free"])) for m, r in s.items()}
    vs_free = {m: float(np.mean(r["few_pool"]) - np.mean(r["label_free"])) for m, r in s.items()}
    return [
        "What it shows: choosing the pooling too, minus few-label auto on the rule's pooling (task average): "
        + "; ".join(f"{m} {d:+.2f}" for m, d in diffs.items())
        + "; minus label-free auto: "
        + "; ".join(f"{m} {d:+.2f}" for m, d in vs_free.items())
        + ". The other pooling under the kind's label-free calibration, minus label-free auto: "
        + "; ".join(f"{m} {d:+.2f}" for m, d in other.items())
        + " (a gain there is what a perfect pooling choice could add). Still below the oracle (pooling + calibration "
        "by the test labels): "
        + "; ".join(f"{m} {g:.2f}" for m, g in gaps.items())
        + f". Draws at >= raw (rule's pooling) - 0.5: {total_ok} of {total}"
        + (f"; cells with fewer than 19 of 20: {', '.join(below)}." if below else "; every cell at least 19 of 20.")
        + " With 100 dev pairs and every (pooling, candidate) in the race, a draw that leaves the rule's pooling often "
        "does so for a pair that was lucky on the dev sample (the column in brackets counts those that gained on the "
        "test task), so the pooling choice adds little of the other pooling's gain where there is one, and costs a "
        "little where there is none."
    ]
