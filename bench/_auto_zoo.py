"""The model zoo of bench/auto.py (issue #24): label-free signals and the signal rule, held out task by task.

The zoo is encoded by the library itself, as a user runs it (``isotropy.encoders.Encoder``, vectors in the shared
``VectorCache``):

* ``glove-6b-50d`` -- ``Encoder("glove-6b-50d")``: pooling ``mean`` (the static backend's ``last-avg``) and ``sif``
  (weights ``a / (a + p)``, ``p`` Zipf's law on GloVe's frequency rank);
* ``m2v-384``, ``m2v-256`` -- the embedded default model distilled to a static table by ``model2vec.distill`` (PCA to
  384 or 256 dims), distilled once and kept under ``$ISOTROPY_CACHE/zoo/``, then ``Encoder(folder)``; pooling ``mean``
  (the mean of the token rows: the vectors model2vec's ``encode`` returns before it normalises them to unit length;
  every cosine is the same);
* ``minilm`` -- the embedded default transformer, max_length 64; poolings ``last-avg``, ``cls``, ``first-last-avg``.

The rule (:data:`isotropy.selection.signals.SIGNAL_RULE`, and ``POOLING_RULE``) was read off the same zoo on the STS-B
TRAIN split (``tune_zoo`` and ``tuned_rule`` here at commit b31d6d7; docs/AUTO.md, 'Zoo tuning'). ``run_zoo``: leave
one task out over the 7 STS tasks, calibrations fitted on ``others``; per cell raw, every fixed method, the oracle,
label-free auto (the signal rule, and each vector signal deciding alone with its STS-B-train threshold) and few-label
auto (draws of 100 pairs).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from functools import cache as _memo

import numpy as np

from _report import pair_spearman

DRAWS, DEV_PAIRS = 20, 100
ZOO = {
    "glove-6b-50d": ("mean", "sif"),
    "m2v-384": ("mean", "sif"),
    "m2v-256": ("mean", "sif"),
    "minilm": ("last-avg", "cls", "first-last-avg"),
}
LIBRARY_POOLING = {"mean": "last-avg"}  # the zoo's name -> the library's pooling name on a static model
# The pooling choice of the issue, per kind, the default first: a static table's own mean vs SIF; a transformer's own
# pooling (the default model's sentence-transformers config: mean = last-avg) vs first-last-avg. cls is measured, not offered.
POOLING_CHOICES = {"static": ("mean", "sif"), "transformer": ("last-avg", "first-last-avg")}


def distilled(dims: int):
    """The folder of the default model distilled to a ``dims``-d model2vec table (distilled once, cached)."""
    from isotropy.encoders.cache import default_cache_dir
    from isotropy.encoders.models import default_model_path

    folder = default_cache_dir() / "zoo" / f"m2v-minilm-{dims}"
    if not (folder / "config.json").exists():
        from model2vec.distill import distill

        print(f"distilling the default model to a {dims}-d static table (once; cached in {folder})", flush=True)
        distill(str(default_model_path()), pca_dims=dims, device="cpu").save_pretrained(str(folder))
    return folder


@_memo
def encoder(model: str):
    """The library encoder of a zoo model (every pooling of the entry is read off it)."""
    from isotropy.encoders import Encoder

    if model == "minilm":
        return Encoder(None, pooling=ZOO["minilm"][0], max_length=64)
    source = model if model == "glove-6b-50d" else str(distilled(int(model.removeprefix("m2v-"))))
    return Encoder(source, pooling=LIBRARY_POOLING.get(ZOO[model][0], ZOO[model][0]))


def zoo_vectors(model: str, pooling: str, sentences: Sequence[str]) -> np.ndarray:
    """``len(sentences) x d`` float32 sentence vectors of ``model`` under ``pooling``, through the shared vector cache."""
    from isotropy.encoders.cache import VectorCache, encode_cached

    names = [LIBRARY_POOLING.get(p, p) if model != "minilm" else p for p in ZOO[model]]
    got = encode_cached(encoder(model), [str(s) for s in sentences], names, VectorCache(), show_progress=None)
    return np.asarray(got[LIBRARY_POOLING.get(pooling, pooling) if model != "minilm" else pooling], dtype=np.float32)


def candidates(X: np.ndarray):
    """The default candidates plus SpecTemp's (width d/2, its power read from X's spectrum)."""
    from isotropy.selection import default_candidates
    from isotropy.selection.signals import spectemp_candidate

    return [*default_candidates(X.shape[1]), spectemp_candidate(X)]


def truths(sel, V: np.ndarray, a, b, gold) -> dict[str, float]:
    calibrated = ((n, V if t is None else t.transform(V)) for n, t in sel.transforms.items())
    return {n: pair_spearman(Y[a], Y[b], gold) for n, Y in calibrated}


class Corpus:
    """The vectors of one task (its unique sentences) for every pooling, and index helpers."""

    def __init__(self, task, vectors: dict[str, np.ndarray]):
        self.task, self.vectors = task, vectors
        self.sentences = task.sentences()
        self.at = {s: i for i, s in enumerate(self.sentences)}

    def rows(self, sentences) -> np.ndarray:
        return np.array([self.at[s] for s in sentences], dtype=np.int64)


def dev_pool(corpora: list[Corpus], i: int) -> tuple[str, list[tuple[int, int, int, float]]]:
    """Where task ``i``'s dev pairs come from, and the pool ``(task, row a, row b, gold)`` they are drawn from."""
    from isotropy.evaluation.fitting import overlap_key

    task = corpora[i].task
    if task.train_split is not None:
        pairs = task.splits[task.train_split]
        c = corpora[i]
        return f"{task.name} {task.train_split} split", [(i, c.at[p.s1], c.at[p.s2], p.score) for p in pairs]
    held = {overlap_key(s) for s in corpora[i].sentences}
    pool = []
    for j, c in enumerate(corpora):
        if j == i:
            continue
        for p in c.task.pairs():
            if overlap_key(p.s1) not in held and overlap_key(p.s2) not in held:
                pool.append((j, c.at[p.s1], c.at[p.s2], p.score))
    return "the other tasks' pairs (none sharing a sentence with it)", pool


def run_zoo(data_dir: str, tasks_names: list[str], draws: int = DRAWS, checkpoint=None, reuse: dict | None = None) -> dict:
    """Every cell's truth, signals and few-label choices; the label-free decisions are added by :func:`decide`
    (cheap, from the stored signals), so a rule can be re-read off the tuning table without re-running. ``reuse``:
    the cells of an earlier run (same candidates, same code of the signals): their signals are taken, not recomputed
    (``--few-only``); the truths are recomputed (cheap) and checked against the stored ones."""
    from isotropy.evaluation import load_tasks
    from isotropy.evaluation.fitting import plan_others
    from isotropy.selection.dev import dev_decide
    from isotropy.selection.select import Selector
    from isotropy.selection.signals import corpus_signals, incumbent_of

    t_start, load0 = time.perf_counter(), os.getloadavg()[0]
    tasks = load_tasks(data_dir, tasks_names)
    reused = 0
    plan = plan_others(tasks)
    cells: dict[str, dict] = {}
    for model, pooling in ((m, p) for m, ps in ZOO.items() for p in ps):
        t1 = time.perf_counter()
        corpora = [Corpus(t, {pooling: zoo_vectors(model, pooling, t.sentences())}) for t in tasks]
        devs = [dev_pool(corpora, i) for i in range(len(corpora))]
        incumbent, why = incumbent_of(encoder(model))  # few-label: the label-free rule's choice for the kind
        for i, c in enumerate(corpora):
            X = np.concatenate([corpora[j].vectors[pooling][r] for j, r in plan[i].parts]).astype(np.float64)
            sel = Selector(X, candidates(X), seed=0, source=f"others corpus of {c.task.name}")
            ev = c.task.eval_pairs
            a, b = c.rows([p.s1 for p in ev]), c.rows([p.s2 for p in ev])
            gold = np.array([p.score for p in ev])
            pool = devs[i][1]
            few = []
            for k in range(draws if len(pool) >= DEV_PAIRS else 0):
                pick = np.random.default_rng([k, i]).choice(len(pool), size=DEV_PAIRS, replace=False)
                L = np.stack([corpora[pool[q][0]].vectors[pooling][pool[q][1]] for q in pick]).astype(np.float64)
                R = np.stack([corpora[pool[q][0]].vectors[pooling][pool[q][2]] for q in pick]).astype(np.float64)
                dev = (L, R, np.array([pool[q][3] for q in pick]))
                if k == 0:  # the product's own path once per cell: the bench's shortcut below must agree with it
                    first = sel.few_label(dev, incumbent=incumbent, why=why).choice
                product = dev_decide(*sel.dev_scores(dev), incumbent)[0]
                if k == 0 and product != first:
                    raise SystemExit(f"{model}/{pooling} {c.task.name}: dev_decide gave {product}, few_label {first}")
                few.append(product)
            key = f"{model}/{pooling}|{c.task.name}"
            truth = truths(sel, c.vectors[pooling].astype(np.float64), a, b, gold)
            old = (reuse or {}).get(key)
            if old is not None:
                drift = max(abs(truth[n] - old["truth"][n]) for n in truth)
                if drift > 1e-6 or set(truth) != set(old["truth"]):
                    raise SystemExit(f"--few-only: {key}'s truths moved by {drift:.2g} since the stored run; run it in full")
                reused += 1
            cells[key] = {
                "truth": truth,
                "signals": old["signals"] if old is not None else corpus_signals(X, 0),
                "incumbent": incumbent,
                "kind": "static" if encoder(model).backend == "static" else "transformer",
                "few_label": few,
                "dev_source": devs[i][0],
                "fit_rows": int(len(X)),
            }
        print(f"{model}/{pooling}: {time.perf_counter() - t1:.0f} s", flush=True)
        if checkpoint is not None:  # what a run cut short leaves: whole entries
            checkpoint({"cells": cells, "meta": {"tasks": [t.name for t in tasks], "draws": draws, "partial": True}})
    meta = {"tasks": [t.name for t in tasks], "draws": draws, "partial": False, "wall_s": time.perf_counter() - t_start}
    meta["signals_reused"] = reused
    meta["load_average"] = [load0, os.getloadavg()[0]]  # 1-minute load at the start and the end (2 cores)
    return {"cells": cells, "meta": meta}


def decide(zoo: dict) -> dict:
    """``zoo`` with each cell's label-free choice by the product's rule (``decide_by_signals``) and each vector signal
    deciding alone with the rule's threshold (act = the static branch's); the few-label choices are the run's (the
    library's ``dev_decide`` under ``DEV_RULE``). ``zoo["rule"]``: the library's ``SIGNAL_RULE``, and its
    ``POOLING_RULE`` in the zoo's pooling names."""
    from isotropy.selection.signals import POOLING_RULE, SIGNAL_RULE, decide_by_signals, signal_alone

    act = SIGNAL_RULE["act"]["static"]
    for c in zoo["cells"].values():
        d = decide_by_signals(c["signals"], kind=c["kind"])
        c.update(label_free=d["choice"], fired=d["fired"], reason=d["reason"])
        c["alone"] = {s: act if signal_alone(c["signals"], s) else "raw" for s in SIGNAL_RULE["thresholds"]}
    zoo_name = {v: k for k, v in LIBRARY_POOLING.items()}
    pooling = {k: zoo_name.get(p, p) if p else POOLING_CHOICES[k][0] for k, p in POOLING_RULE["pooling"].items()}
    zoo["rule"] = {"act": SIGNAL_RULE["act"], "thresholds": SIGNAL_RULE["thresholds"], "pooling": {"choice": pooling}}
    return zoo
