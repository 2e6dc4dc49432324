"""The few-label rule's tuning cells on the STS-B TRAIN split (bench/_auto_few.py says what they are and how the rule
is read off them). Apart from bench/_auto_few.py so that neither it nor bench/_auto_zoo.py imports the other back."""

from __future__ import annotations

import time

import numpy as np
from _auto_few import DEV_PAIRS, VARIANTS, decisions, name, packed

GENRES = ("main-captions", "main-news", "main-forum")


def _halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng([34, seed]).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])


def _rows(full: list[str], part: list[str]) -> np.ndarray:
    at = {s: i for i, s in enumerate(full)}
    return np.array([at[s] for s in part])


def tune_few(data_dir: str, draws: int = 20) -> dict:
    """The variants' choices on the STS-B train split's genres (module docstring), with every candidate's truth."""
    from pathlib import Path

    from _auto_zoo import candidates, encoder, entries, label, truths, zoo_vectors

    from isotropy.evaluation import load_stsb
    from isotropy.evaluation.fitting import pair_sides
    from isotropy.selection.select import Selector
    from isotropy.selection.signals import incumbent_of

    t0 = time.perf_counter()
    task = load_stsb(Path(data_dir) / "sts" / "STSBenchmark")
    train = task.splits["train"]
    uniq, full = task.sentences(["train"]), task.sentences()
    in_full = _rows(full, uniq)  # the train split's rows of the whole task's vectors (encoded once for the zoo)
    at = {s: i for i, s in enumerate(uniq)}
    rows = np.array([at[s] for s in pair_sides(train)])
    a, b = np.array([at[p.s1] for p in train]), np.array([at[p.s2] for p in train])
    gold = np.array([p.score for p in train])
    genre = np.array([p.subset for p in train])
    split = {}
    for gi, g in enumerate(GENRES):
        idx = np.flatnonzero(genre == g)
        dev_h, truth_h = _halves(len(idx), gi)
        split[g] = (idx[dev_h], idx[truth_h])
    cells = {}
    for model, pooling in entries():
        V = zoo_vectors(model, pooling, full)[in_full].astype(np.float64)  # the STS-B encode the zoo run reads
        sel = Selector(V[rows], candidates(V[rows]), seed=0, source="STS-B train")
        incumbent = incumbent_of(encoder(model))[0]
        for gi, g in enumerate(GENRES):
            t = split[g][1]
            truth = truths(sel, V, a[t], b[t], gold[t])
            for si, setting in enumerate(("same", "shifted")):
                pool = split[g][0] if setting == "same" else np.concatenate([split[h][0] for h in GENRES if h != g])
                product, by = [], {name(v): [] for v in VARIANTS}
                for k in range(draws):
                    pick = pool[np.random.default_rng([k, gi, si]).choice(len(pool), size=DEV_PAIRS, replace=False)]
                    got = decisions(sel, (V[a[pick]], V[b[pick]], gold[pick]), incumbent)
                    product.append(got[0])
                    for n, c in got[1].items():
                        by[n].append(c)
                cells[f"{label(model, pooling)}|{g}|{setting}"] = {
                    "truth": truth,
                    "incumbent": incumbent,
                    "few_label": product,
                    "variants": {n: packed(c) for n, c in by.items()},
                }
        print(f"few-label tuning {model}/{pooling}: {time.perf_counter() - t0:.0f} s", flush=True)
    return {"cells": cells, "draws": draws, "dev_pairs": DEV_PAIRS, "wall_s": time.perf_counter() - t0}
