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
