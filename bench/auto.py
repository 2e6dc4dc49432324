"""Regenerate docs/AUTO.md: does ``--method auto`` choose well on tasks it never saw, and never hurt?

    .venv/bin/python bench/auto.py                 # the full run (writes docs/AUTO.md and bench/results/auto.json)
    .venv/bin/python bench/auto.py --tune          # tune each criterion's own settings on the STS-B train split
    .venv/bin/python bench/auto.py --poolings cls --tasks STS-16 --no-write   # a smoke run
    .venv/bin/python bench/auto.py --render-only   # rewrite docs/AUTO.md from bench/results/auto.json
    .venv/bin/python bench/auto.py --tune-zoo --zoo             # the model zoo (issue #24), tuning and held-out run
    .venv/bin/python bench/auto.py --tune-zoo --zoo --few-only  # the same, reusing the stored cells' signals
    .venv/bin/python bench/auto.py --zoo-pool                   # few-label auto choosing the pooling too, from the stored cells
    .venv/bin/python bench/auto.py --tune-few --zoo --few-only  # the few-label rule's test read off STS-B train, then the zoo

The default model, max_length 64, every pooling of the issue that runs on it. For each fit
setting (``target``: the test task's own sentences, every pair, both sides; ``others``: the six
other tasks' sentences minus any sentence the test task also holds), each pooling and each of
the 7 STS tasks (leave one task out: nothing auto sees comes from the test task's labels):

* every candidate is fitted (one set of moments) and scored on the test task's evaluation pairs
  (Spearman x 100, STS-12..16 pooled: aggregate ``all``): raw, every fixed method, the oracle;
* label-free ``auto`` (``Selector.evidence``: every criterion on the fit corpus, perturbed
  copies encoded through the vector cache) with the product's rule, and each criterion under
  the same rule;
* few-label ``auto``: 20 draws of 100 pairs from the task's train split (STS-B, SICK-R) or, for
  a task without one, from the other tasks' pairs that share no sentence with it.

``--tune`` fits on the STS-B train split's sentences and scores on its pairs (no test label of
any task is read) and writes the tuning section; the chosen settings are the defaults in
``src/isotropy/selection/criteria.py``. Everything else in docs/AUTO.md comes from the full run.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _auto_data import Corpus, dev_pool  # noqa: E402
from _auto_render import render, render_tuning  # noqa: E402

from _report import DATA, DOCS, ROOT, machine, update_section  # noqa: E402

TASKS = ["STS-B", "SICK-R", "STS-12", "STS-13", "STS-14", "STS-15", "STS-16"]
POOLINGS = ["last-avg", "cls", "first-last-avg", "sif", "idf", "prompt", "prompt-denoised", "ditto"]
SETTINGS = ["target", "others"]
DRAWS, DEV_PAIRS = 20, 100
TUNE_GRID = {
    "agreement": [{"rate": r} for r in (0.1, 0.2, 0.35, 0.5)],
    "align-uniform": [{"rate": r, "t": 2.0, "lam": lam} for r in (0.1, 0.2, 0.35, 0.5) for lam in (0.25, 0.5, 1.0, 2.0, 4.0)],
    "graded-deletion": [
        {"rates": rs, "random": rnd} for rs in ([0.1, 0.2, 0.35, 0.5], [0.2, 0.5], [0.1, 0.35]) for rnd in (True, False)
    ],
    "knn-stability": [{"k": k} for k in (5, 10, 20)],
}
OUT = ROOT / "bench" / "results" / "auto.json"


# ---------------------------------------------------------------- data


def make_encoder(poolings: list[str], tasks) -> tuple[object, list[str], dict[str, str], str | None]:
    """One encoder for every pooling that runs on the default model; token frequencies (sif, idf) counted
    once on every task's sentences, as bench/results.py does (so both share cache entries)."""
    from isotropy.encoders import Encoder
    from isotropy.encoders.poolings import parse_pooling
    from isotropy.errors import IsotropyError

    ok, skipped = [], {}
    for p in poolings:
        try:
            Encoder(None, pooling=p, max_length=64)
            ok.append(p)
        except IsotropyError as exc:
            skipped[p] = str(exc)
    enc = Encoder(None, pooling=ok[0], max_length=64)
    note = None
    if any(getattr(parse_pooling(p), "needs_token_stats", False) for p in ok):
        sentences = list(dict.fromkeys(s for t in tasks for s in t.sentences()))
        enc.fit_pooling(sentences)
        note = (
            f"token frequencies of sif and idf counted once on the {len(sentences)} unique sentences of the 7 tasks (no labels)"
        )
    return enc, ok, skipped, note


def pooled(enc, pooling: str):
    """The same encoder reading ``pooling`` (what Selector.evidence encodes perturbed copies with)."""
    e = copy.copy(enc)
    e.pooling = pooling
    return e


def spearman(Y: np.ndarray, a: np.ndarray, b: np.ndarray, gold: np.ndarray) -> float:
    from isotropy.evaluation import cosine_rows, spearman

    return spearman(cosine_rows(Y[a], Y[b]), gold)


def fit_corpus(corpora: list[Corpus], i: int, setting: str, others_plan) -> tuple[list[tuple[int, np.ndarray]], list[str]]:
    """``([(task index, rows of its vectors)], the sentences of those rows)`` that task ``i``'s candidates are fitted on."""
    from isotropy.evaluation.fitting import pair_sides

    if setting == "target":
        sides = pair_sides(corpora[i].task.pairs())
        return [(i, corpora[i].rows(sides))], sides
    parts = others_plan[i].parts
    return parts, [corpora[j].sentences[k] for j, rows in parts for k in rows]


# ---------------------------------------------------------------- one (setting, pooling, task)


def evaluate_cell(corpora, i: int, setting: str, pooling: str, enc, cache, others_plan, dev_source) -> dict:
    from isotropy.selection import LABEL_FREE_RULE
    from isotropy.selection.select import Selector, _decide

    c = corpora[i]
    parts, sentences = fit_corpus(corpora, i, setting, others_plan)
    X = np.concatenate([corpora[j].vectors[pooling][rows] for j, rows in parts]).astype(np.float64)
    sel = Selector(X, seed=0, source=f"{setting} corpus of {c.task.name}")
    ev_pairs = c.task.eval_pairs
    a, b = c.rows([p.s1 for p in ev_pairs]), c.rows([p.s2 for p in ev_pairs])
    gold = np.array([p.score for p in ev_pairs])
    V = c.vectors[pooling].astype(np.float64)
    truth = {name: spearman(V if t is None else t.transform(V), a, b, gold) for name, t in sel.transforms.items()}
    t0 = time.perf_counter()
    ev = sel.evidence(pooled(enc, pooling), sentences, cache=cache, show_progress=False)
    label_free_s = time.perf_counter() - t0
    level = LABEL_FREE_RULE["level"]
    by_criterion = {n: _decide(ev["points"][n], ev["beats"][n], level)[0] for n in ev["points"]}
    auto = sel.label_free_choice(ev)[0]
    source, pool = dev_source
    few = []
    t0 = time.perf_counter()
    for k in range(DRAWS if len(pool) >= DEV_PAIRS else 0):  # a smoke run of one task has no other tasks' pairs
        pick = np.random.default_rng([k, i]).choice(len(pool), size=DEV_PAIRS, replace=False)
        L = np.stack([corpora[pool[q][0]].vectors[pooling][pool[q][1]] for q in pick]).astype(np.float64)
        R = np.stack([corpora[pool[q][0]].vectors[pooling][pool[q][2]] for q in pick]).astype(np.float64)
        g = np.array([pool[q][3] for q in pick])
        few.append(sel.few_label((L, R, g)).choice)
    return {
        "truth": truth,
        "points": ev["points"],
        "beats": ev["beats"],
        "change": ev["change"],
        "label_free": auto,
        "by_criterion": by_criterion,
        "few_label": few,
        "fit_rows": int(len(X)),
        "dev_source": source,
        "seconds": {"label_free": label_free_s, "few_label": time.perf_counter() - t0},
        "skipped": sel.fitted.skipped,
    }


def pre_encode_copies(enc, poolings, sentences, cache) -> None:
    """Encode the label-free criteria's perturbed copies of one fit corpus for every pooling at once (one pass per input)."""
    from isotropy.encoders.cache import encode_cached
    from isotropy.selection.select import planned_copies

    for copies in planned_copies(sentences, seed=0).values():
        encode_cached(enc, copies, poolings, cache, show_progress=False)


# ---------------------------------------------------------------- the runs


def run(args, checkpoint=None) -> dict:
    import torch
    from _auto_few import name as few_rule_name

    from isotropy.encoders.cache import VectorCache, encode_cached
    from isotropy.evaluation import load_tasks
    from isotropy.evaluation.fitting import plan_others
    from isotropy.selection.dev import DEV_RULE

    torch.set_num_threads(args.threads)
    t_start, load0 = time.perf_counter(), os.getloadavg()[0]
    tasks = load_tasks(args.data, args.tasks)
    enc, poolings, skipped, stats_note = make_encoder(args.poolings, tasks)
    cache = VectorCache(args.cache)
    t0 = time.perf_counter()
    corpora = [Corpus(t, encode_cached(enc, t.sentences(), poolings, cache, show_progress=None)) for t in tasks]
    others_plan = plan_others(tasks) if "others" in args.settings else None
    for setting in args.settings:
        for i in range(len(corpora)):
            pre_encode_copies(enc, poolings, fit_corpus(corpora, i, setting, others_plan)[1], cache)
    encode_s = time.perf_counter() - t0
    print(f"encoded (cache hits {cache.hits}, misses {cache.misses}) in {encode_s:.0f} s", flush=True)
    devs = [dev_pool(corpora, i) for i in range(len(corpora))]
    cells: dict[str, dict] = {}

    def result(partial: bool) -> dict:
        return {"cells": cells, "meta": meta(partial)}

    def meta(partial: bool) -> dict:
        return {
            "partial": partial,
            "tasks": [t.name for t in tasks],
            "poolings": poolings,
            "poolings_skipped": skipped,
            "pooling_stats": stats_note,
            "settings": args.settings,
            "poolings_done": sorted({k.split("|")[1] for k in cells}, key=poolings.index),
            "cells_done": len(cells),
            "cells_planned": len(args.settings) * len(poolings) * len(corpora),
            "draws": DRAWS,
            "dev_pairs": DEV_PAIRS,
            "dev_rule": few_rule_name(DEV_RULE),
            "dev_sources": {c.task.name: devs[i][0] for i, c in enumerate(corpora)},
            "others_removed": {t.name: o.removed for t, o in zip(tasks, others_plan)} if others_plan else {},
            "wall_s": time.perf_counter() - t_start,
            "encode_s": encode_s,
            "load_average": [load0, os.getloadavg()[0]],
            "machine": machine(),
            "cache_hits": cache.hits,
            "cache_misses": cache.misses,
        }

    # pooling first (the order), so a run cut short holds whole poolings; the JSON is written after every cell
    for pooling in poolings:
        for setting in args.settings:
            for i, c in enumerate(corpora):
                t1 = time.perf_counter()
                cells[f"{setting}|{pooling}|{c.task.name}"] = evaluate_cell(
                    corpora, i, setting, pooling, enc, cache, others_plan, devs[i]
                )
                print(f"{setting} {pooling} {c.task.name}: {time.perf_counter() - t1:.0f} s", flush=True)
                if checkpoint is not None:
                    checkpoint(result(True))
    return result(False)


def tune(args) -> dict:
    """Each criterion's settings on the STS-B train split: Kendall tau with the train pairs' Spearman, per pooling."""
    import torch
    from scipy.stats import kendalltau

    from isotropy.encoders.cache import VectorCache, encode_cached
    from isotropy.evaluation import load_stsb
    from isotropy.evaluation.fitting import pair_sides
    from isotropy.selection.select import Selector, planned_copies

    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    task = load_stsb(Path(args.data) / "sts" / "STSBenchmark")
    train = task.splits["train"]
    uniq = task.sentences(["train"])
    enc, poolings, skipped, stats_note = make_encoder(args.poolings, [task])
    cache = VectorCache(args.cache)
    vecs = encode_cached(enc, uniq, poolings, cache, show_progress=None)
    sides = pair_sides(train)
    at = {s: i for i, s in enumerate(uniq)}
    rows = np.array([at[s] for s in sides])
    a, b = np.array([at[p.s1] for p in train]), np.array([at[p.s2] for p in train])
    gold = np.array([p.score for p in train])
    rates = sorted({r for vs in TUNE_GRID.values() for v in vs for r in v.get("rates", [v.get("rate")]) if r is not None})
    for copies in planned_copies(sides, seed=0, settings={"graded-deletion": {"rates": rates}}).values():
        encode_cached(enc, copies, poolings, cache, show_progress=False)
    out: dict[str, dict] = {}
    for pooling in poolings:
        X = vecs[pooling].astype(np.float64)
        sel = Selector(X[rows], seed=0, source="STS-B train")
        truth = {n: spearman(X if t is None else t.transform(X), a, b, gold) for n, t in sel.transforms.items()}
        out[pooling] = {"truth": truth, "variants": {}}
        for crit, variants in TUNE_GRID.items():
            for v in variants:
                ev = sel.evidence(
                    pooled(enc, pooling), sides, criteria=[crit], settings={crit: v}, cache=cache, show_progress=False
                )
                pts = ev["points"][crit]
                names = [n for n in truth if np.isfinite(pts.get(n, np.nan))]
                tau = kendalltau([pts[n] for n in names], [truth[n] for n in names]).statistic
                out[pooling]["variants"][crit + " " + json.dumps(v, sort_keys=True)] = {
                    "criterion": crit,
                    "settings": v,
                    "tau": tau,
                }
        print(f"tuned on {pooling}", flush=True)
    return {
        "tuning": out,
        "meta": {"poolings": poolings, "skipped": skipped, "pooling_stats": stats_note, "wall_s": time.perf_counter() - t_start},
    }


def merge(old: dict, new: dict) -> dict:
    """``old`` with ``new``'s cells added (a run of further poolings over the same tasks and settings)."""
    if old["meta"]["tasks"] != new["meta"]["tasks"] or old["meta"]["settings"] != new["meta"]["settings"]:
        raise SystemExit("--merge needs the same --tasks and --settings as the run it extends")
    meta = dict(old["meta"])
    meta["poolings"] = list(dict.fromkeys(old["meta"]["poolings"] + new["meta"]["poolings"]))
    meta["poolings_skipped"] = {**old["meta"]["poolings_skipped"], **new["meta"]["poolings_skipped"]}
    for k in ("wall_s", "encode_s", "cache_hits", "cache_misses"):
        meta[k] = old["meta"][k] + new["meta"][k]
    meta["runs"] = old["meta"].get("runs", [old["meta"]["poolings"]]) + [new["meta"]["poolings"]]
    cells = {**old["cells"], **new["cells"]}
    meta["partial"] = bool(new["meta"].get("partial"))
    meta["cells_done"] = len(cells)
    meta["cells_planned"] = len(meta["settings"]) * len(meta["poolings"]) * len(meta["tasks"])
    return {"cells": cells, "meta": meta}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--tasks", nargs="*", default=TASKS)
    ap.add_argument("--poolings", nargs="*", default=POOLINGS)
    ap.add_argument("--settings", nargs="*", default=SETTINGS, choices=SETTINGS)
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "vectors"))
    ap.add_argument("--threads", type=int, default=2, help="torch threads for encoding")
    ap.add_argument("--tune", action="store_true", help="tune the criteria's settings on the STS-B train split")
    ap.add_argument("--zoo", action="store_true", help="the model zoo: the signal rule held out task by task (issue #24)")
    ap.add_argument("--draws", type=int, default=DRAWS, help="few-label draws per zoo cell (the issue: 20)")
    ap.add_argument("--tune-zoo", action="store_true", help="the zoo's signals and gains on the STS-B train split")
    ap.add_argument(
        "--tune-few",
        action="store_true",
        help="the few-label rule's variants on the STS-B train split's genres (bench/_auto_few.py); the library's "
        "DEV_RULE must be the rule read off them",
    )
    ap.add_argument(
        "--few-only",
        action="store_true",
        help="with --zoo: reuse the signals of the cells stored in bench/results/auto.json (truths recomputed and "
        "checked); new zoo entries are computed in full",
    )
    ap.add_argument(
        "--zoo-pool",
        action="store_true",
        help="few-label auto choosing the pooling too (--pooling auto), on the zoo models with two poolings, from the "
        "stored zoo cells (their truths) and the vector cache; run after --zoo",
    )
    ap.add_argument("--no-write", action="store_true", help="print instead of writing docs/AUTO.md and the JSON")
    ap.add_argument("--render-only", action="store_true", help="rewrite docs/AUTO.md from bench/results/auto.json")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="add this run's poolings to the cells of bench/results/auto.json (same tasks and settings)",
    )
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from isotropy.storage.artifacts import write_json

    data = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {}
    if args.zoo or args.tune_zoo or args.zoo_pool or args.tune_few:
        import _auto_zoo_render
        from _auto_few import check_library
        from _auto_few import render as render_few
        from _auto_zoo import decide, run_zoo, tune_zoo, tuned_rule

        def save() -> None:  # after each long step, so a later failure loses nothing
            if not args.no_write:
                OUT.parent.mkdir(parents=True, exist_ok=True)
                write_json(OUT, data)

        if args.tune_zoo and not args.render_only:
            data["zoo_tune"] = tune_zoo(args.data)
            save()
        if args.tune_few and not args.render_only:
            from _auto_few_tune import tune_few

            data["few_tune"] = tune_few(args.data, args.draws)
            save()
        if "few_tune" in data and not args.render_only:
            check_library(data["few_tune"])  # before the held-out run: the product must hold the tuned rule
        if args.zoo and not args.render_only:

            def checkpoint(partial: dict) -> None:
                data["zoo"] = partial
                save()

            reuse = dict(data.get("zoo", {}).get("cells", {})) if args.few_only else None
            data["zoo"] = run_zoo(args.data, args.tasks, args.draws, checkpoint, reuse)
            data.pop("zoo_pool", None)  # read off the cells just replaced: rerun --zoo-pool
            save()
        if args.zoo_pool and not args.render_only:
            from _auto_zoo_pool import run_pool_choice

            data["zoo_pool"] = run_pool_choice(args.data, args.tasks, data["zoo"], args.draws)
            save()
        parts = [("auto-zoo-tuning", _auto_zoo_render.render_tuning(data["zoo_tune"]))] if "zoo_tune" in data else []
        if "few_tune" in data:
            parts.append(("auto-few", render_few(data["few_tune"], data.get("zoo"))))
        if "zoo" in data:
            decide(data["zoo"], tuned_rule(data["zoo_tune"]))
            parts.insert(0, ("auto-zoo", _auto_zoo_render.render(data["zoo"], data.get("zoo_tune"), data.get("zoo_pool"))))
        if args.no_write:
            print("\n\n".join(t for _, t in parts))
            return
        write_json(OUT, data)
        for name, text in parts:
            update_section(DOCS / "AUTO.md", name, text)
        print(f"wrote {DOCS / 'AUTO.md'} ({', '.join(n for n, _ in parts)}) and {OUT}")
        return
    if args.tune:
        data["tune"] = tune(args)
        text, name = render_tuning(data["tune"]), "auto-tuning"
    else:

        def checkpoint(partial: dict) -> None:  # what a run cut short leaves (render with --render-only)
            if not args.no_write:
                OUT.parent.mkdir(parents=True, exist_ok=True)
                write_json(OUT, {**data, "run": merge(base, partial) if base else partial})

        base = data.get("run") if args.merge else None
        if not args.render_only:
            data["run"] = run(args, checkpoint)
            if base:
                data["run"] = merge(base, data["run"])
        text, name = render(data["run"], POOLINGS), "auto-results"
    if args.no_write:
        print(text)
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_json(OUT, data)
    update_section(DOCS / "AUTO.md", name, text, title="`--method auto`: choosing the calibration, and never making it worse")
    print(f"wrote {DOCS / 'AUTO.md'} ({name}) and {OUT}")


if __name__ == "__main__":
    main()
