"""Every docs section's markdown, from the saved results (bench/results/*.json): the one rendering module.

A bench script measures and saves; its ``--render`` mode reads the JSON and calls the function here named after its
section, so a section is rewritten without running a model, and re-rendering leaves the docs unchanged. A section is
its tables (one writer, ``table``; one number format, ``f2``; paragraphs joined by ``md``), one ``target`` line where
it has a target, and the command that makes it; what the tables mean, and any fixed caption, is written by hand
outside the generated markers.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from statistics import mean

import numpy as np


def f2(x, d: int = 2, sign: bool = False) -> str:
    """A number with ``d`` decimals (``sign``: always signed), ``-`` when missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:+.{d}f}" if sign else f"{x:.{d}f}"


def table(head: list[str], rows: list[list], align: str | list[str] = "---") -> list[str]:
    """A markdown table; ``align``: one marker for every column, or one per column (``"r"``: every column but the
    first right-aligned)."""
    marks = ["---", *["---:"] * (len(head) - 1)] if align == "r" else [align] * len(head) if isinstance(align, str) else align
    return ["| " + " | ".join(head) + " |", "|" + "|".join(marks) + "|"] + [
        "| " + " | ".join(str(c) for c in r) + " |" for r in rows
    ]


def target(what: str, ok: bool | None, figure: str) -> str:
    """The one line a section with a target carries: ``Target (what): met (figure).``"""
    said = "n/a" if ok is None else "**met**" if ok else "**not met**"
    return f"Target ({what}): {said} ({figure})."


def md(*blocks: str | list[str] | None) -> str:
    """Markdown paragraphs: each block (a line, or a list of lines such as a table) apart from the next by a blank
    line; an empty block (a part a run did not make) is left out."""
    return "\n\n".join(b if isinstance(b, str) else "\n".join(b) for b in blocks if b)


def num(x: float | None) -> float:
    """NaN (a transform that could not be fitted, or not run) sorts below every number."""
    return -math.inf if x is None or math.isnan(x) else x


# --------------------------------------------------------------------------- static-factory (RESULTS.md)

FACTORY_ROWS = ("distill --corpus", "tokenlearn 0.2.1", "raw (256-d distill)", "potion-base-8M")


def static_factory(data: dict) -> str:
    product, tokenlearn, raw, potion = FACTORY_ROWS
    rows, tasks = data["rows"], data["tasks"]
    head = ["model", "corpus", "lines", "STS avg", *tasks, "Cranfield nDCG@10", "recall@100", "fit / train s (runs)"]

    def line(name: str, corpus: str, r: dict) -> list:
        cran, runs = r.get("cranfield") or {}, r.get("seconds_runs")
        secs = "-" if r.get("seconds") is None else f"{r['seconds']:.1f}" + (f" ({_runs(runs, 1)})" if runs else "")
        scores = [f"**{f2(r['avg'])}**", *map(f2, r["sts"]), f2(cran.get("ndcg@10")), f2(cran.get("recall@100"))]
        return [name, corpus, r.get("sentences", "-"), *scores, secs]

    body = [line("teacher (all-MiniLM-L6-v2, mean)", "-", {"avg": mean(data["teacher_sts"]), "sts": data["teacher_sts"]})]
    body += [line(name, "-", rows[name]) for name in (raw, potion) if name in rows]
    generic = sorted(k.split(" / ", 1)[1] for k in rows if k.startswith(f"{product} / others + "))
    for corpus in ("wiki", "cran", "wiki+cran", "others", "others (spans none)", *generic):
        for name in (product, tokenlearn):
            r = rows.get(f"{name} / {corpus}")
            if r is not None:
                shown = "7 fits" if corpus.startswith("others") else r.get("sentences", "-")
                body.append(line(f"`{name}`" if name == product else name, corpus, {**r, "sentences": shown}))
    command = (
        "nice -n 5 .venv/bin/python bench/static_factory.py --others   # runs the fits; --render rewrites this from the JSON"
    )
    if generic:
        command += "\nnice -n 5 .venv/bin/python bench/static_factory.py --others-generic STEP   # adds the two rows of others (spans none)"
    return md(f"```\n{command}\n```", table(head, body))


# --------------------------------------------------------------------------- sts-default-model (RESULTS.md)

YEARS = ["STS-12", "STS-13", "STS-14", "STS-15", "STS-16"]
TASKS = ["STS-B", "SICK-R", *YEARS]


def sts_avg(r) -> float:
    vals = [s.score for s in r.scores.values()]
    return float("nan") if not vals or any(math.isnan(v) for v in vals) else float(mean(vals))


def sts_cell(res, pooling: str, method: str) -> float:
    try:
        return sts_avg(res.row(pooling, method))
    except KeyError:
        return float("nan")


def summary_table(by_agg: dict, methods: list[str], poolings: list[str]) -> list[str]:
    """Rows = methods, columns = poolings, cell = the task average as `all / wmean`; best per column in bold."""
    best = {(p, a): max(num(sts_cell(by_agg[a], p, m)) for m in methods) for p in poolings for a in by_agg}

    def cell(p: str, m: str) -> str:
        vals = [(sts_cell(by_agg[a], p, m), a) for a in by_agg]
        return " / ".join(f"**{f2(v)}**" if num(v) == best[(p, a)] and not math.isnan(v) else f2(v) for v, a in vals)

    return table(["method", *(f"`{p}`" for p in poolings)], [[m, *(cell(p, m) for p in poolings)] for m in methods], "r")


def sts_default_model(data: dict) -> str:
    from isotropy.evaluation import Results

    meta = data["meta"]
    runs = {s: {"all": Results.from_dict(d)} for s, d in data["runs"].items()}
    for by in runs.values():
        by["wmean"] = by["all"].with_aggregate("wmean")
    s = next(iter(runs.values()))["all"].settings
    poolings, methods = s["poolings"], list(dict.fromkeys(m for by in runs.values() for m in by["all"].settings["methods"]))
    flow = ", ".join(f"`{x}`" for x in meta.get("flow_on", [])) if "flow" in methods else "no setting"
    summaries = []
    for setting, by in runs.items():
        t = by["all"].settings["tasks"]
        fitted = ", ".join(f"{k} {v.get('fit_sentences', '?')} ({v.get('overlap_removed', 0)} removed)" for k, v in t.items())
        said = f"{len(by['all'].tasks)}-task average, `all` / `wmean`; best per column in bold."
        said += f" Sentences fitted on per test task (overlap removed): {fitted}." if setting == "others" else ""
        summaries += [f"### Summary: fitted on {setting}", said, summary_table(by, methods, poolings)]
    return md(
        "## Default model on the seven STS tasks: every pooling x every training-free method",
        f"Model `{s['model']}` ({s['dim']} d), max_length {s['max_length']}, whitening shrinkage `{s['shrinkage']}`; "
        f"Spearman x 100 of cosine; `flow` fitted on {flow} only. Full run {meta['wall_s'] / 60:.1f} min on "
        f"{meta['machine']} (load {meta['load_average'][0]:.1f} -> {meta['load_average'][1]:.1f}).",
        *summaries,
        _checks(runs),
        _subsets(runs),
        "Every row (each task, each aggregation, the published BERT-base figures beside them) is in `docs/RESULTS.json`. "
        "Regenerate with `.venv/bin/python bench/results.py` (writes this section and `docs/RESULTS.json`); "
        "`--render-only` rewrites this section from the JSON.",
    )


def _checks(runs: dict) -> str | None:
    res = runs.get("target", {}).get("all")
    if res is None or "STS-B" not in res.tasks or "last-avg" not in res.settings["poolings"]:
        return None
    raw = res.score("last-avg", "raw", "STS-B")
    d = {m: res.score("last-avg", m, "STS-B") - raw for m in ("center", "abtt") if m in res.settings["methods"]}
    figure = ", ".join(f"`{m}` {v:+.2f}" for m, v in d.items())
    what = f"`center` and `abtt` within 0.5 of raw {f2(raw)}, `last-avg` on STS-B, fitted on target"
    return target(what, all(v >= -0.5 for v in d.values()), figure)


def _subsets(runs: dict) -> str | None:
    res = runs.get("target", {}).get("all")
    if res is None:
        return None
    best = max(res.rows, key=lambda r: num(sts_avg(r)))
    rows = []
    for t in (t for t in res.tasks if best.scores[t].extra.get("aggregate")):
        sc = best.scores[t]
        subs = ", ".join(f"{k} {f2(v)} ({sc.extra['subset_pairs'][k]})" for k, v in sc.subsets.items())
        rows.append([t, *(f2(sc.extra[k]) for k in ("pooled", "subset_mean", "subset_wmean")), subs])
    head, align = ["task", "all", "mean", "wmean", "subsets (pairs)"], ["---", "---:", "---:", "---:", "---"]
    said = f"Per-subset Spearman of the best row on target (`{best.pooling}` + `{best.method}`):"
    return md(said, table(head, rows, align)) if rows else None


# --------------------------------------------------------------------------- retrieval (RESULTS.md)

FIXED = ["raw", "center", "abtt", "common-component", "whitening", "soft-0.25", "soft-0.5", "soft-0.75"]


def _method_table(rows: list[dict], pooling: str) -> list[str]:
    ex = {r["method"]: r for r in rows if r["pooling"] == pooling and r.get("kind") == "exact"}
    raw = ex["raw"]["ndcg@10"]
    head = ["method", "dim", "bytes/vector", "nDCG@10", "recall@100", "MRR@10", "nDCG@10 - raw"]
    body = []
    for m, r in ex.items():
        scores = [f2(100 * r[k]) for k in ("ndcg@10", "recall@100", "mrr@10")]
        body.append([m, r["dim"], f"{r['bytes_per_vector']:.0f}", *scores, f2(100 * (r["ndcg@10"] - raw), sign=True)])
    return table(head, body, "r")


def _dev_table(results: list[dict]) -> list[str]:
    head = (
        "model|pooling|label-free auto (the incumbent)|few-label choices|kept the incumbent|raw|label-free auto|"
        "few-label auto|few-label - raw (worst draw)|whitening|best in hindsight"
    ).split("|")
    body = []
    for res in results:
        for p in res["settings"]["poolings"]:
            dev = [r for r in res.get("dev", []) if r["pooling"] == p]
            if not dev:
                continue
            m = {
                k: 100 * float(np.mean([r[f"test_{k}"] for r in dev])) for k in ("raw", "label_free", "auto", "whitening", "best")
            }
            worst = min(100 * (r["test_auto"] - r["test_raw"]) for r in dev)
            picks = ", ".join(f"{c} x{k}" for c, k in Counter(r["choice"] for r in dev).most_common())
            kept = sum(r["choice"] == r["incumbent"] for r in dev)
            best = Counter(r["best_in_hindsight"] for r in dev).most_common(1)[0][0]
            body.append([
                res["name"], p, dev[0]["incumbent"], picks, f"{kept} of {len(dev)}", f2(m["raw"]), f2(m["label_free"]),
                f2(m["auto"]), f"{m['auto'] - m['raw']:+.2f} ({worst:+.2f})", f2(m["whitening"]), f"{f2(m['best'])} ({best})",
            ])  # fmt: skip
    return table(head, body, ["---", "---", "---", "---", *["---:"] * 7])


def retrieval(saved: dict) -> str:
    results, ran_on = saved["results"], saved["machine"]
    total = sum(r["settings"].get("total_s", 0.0) for r in results)
    dev = None
    if any(r.get("dev") for r in results):
        dev = md(
            "#### Few-label auto on dev queries (`calibrate --method auto --dev FOLDER`)",
            "Mean test nDCG@10 x 100 over seeded draws of dev queries from the held-out half (`SEARCH_SPLIT`), scored on "
            "the queries that were not dev queries.",
            _dev_table(results),
        )
    models = [
        md(
            f"### {res['name']} (`{res['key']}`, max_length {res['settings']['max_length']})",
            *(md(f"#### {p}: calibrations, exact search", _method_table(res["rows"], p)) for p in res["settings"]["poolings"]),
        )
        for res in results
    ]
    return md(
        "## Retrieval: Cranfield",
        "Cranfield 1400 (1400 abstracts, 225 queries, graded qrels), every fixed calibration fitted on the documents "
        "(no label). Metrics x 100 from trec_eval (nDCG@10 with gains 5 - code), every query. "
        f"Generated by `bench/retrieval.py` on {ran_on} ({total / 60:.1f} minutes of running).",
        dev,
        *models,
        "Every row (sq8, binary and IVF searches, whitening-K and pca-K at every size, query times) is in "
        "`bench/results/retrieval.json`; `.venv/bin/python bench/retrieval.py --render-only` rewrites this section from it.",
    )


# --------------------------------------------------------------------------- sts-static (RESULTS.md)


TOKEN_ROWS = {  # row name -> (calibrate method, fit settings it depends on)
    "token-whitening": ("token-whitening", False),
    "zipfian-whitening-rank": ("zipfian-whitening-rank", False),
    "zipfian-whitening": ("zipfian-whitening", True),
}
TOKEN_NAMES = {
    "token-whitening": "token-level: uniform whitening of the table",
    "zipfian-whitening-rank": "token-level: Zipfian whitening, Zipf-rank p",
    "zipfian-whitening": "token-level: Zipfian whitening, p counted on the fit corpus",
    "teacher map": "teacher map (fitted on others, teacher's vectors)",
}


def st_avg(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs and not any(np.isnan(xs)) else float("nan")


def st_targets(data: dict) -> list[str]:
    """Issue #23's targets: the best 7-task average on ``others`` among the rows that qualify."""

    def best(prefix: str, names: list[str] | None) -> tuple[float, str]:
        found = [
            (st_avg(scores), f"{mname}, {TOKEN_NAMES.get(row, row)}")
            for mname, m in data["models"].items()
            if mname.startswith(prefix)
            for row, scores in m["rows"]["others"].items()
            if (row not in ("raw", "teacher map") if names is None else row in names)
        ]
        return max(found) if found else (float("nan"), "not run")

    checks = [
        ("calibrated distilled default model", 72.5, best("default model", None)),
        ("corpus-fitted teacher map", 75.0, best("default model", ["teacher map"])),
        ("GloVe 6B 50d with a token-level calibration", 65.0, best("GloVe", list(TOKEN_ROWS))),
    ]
    return [
        "- " + target(f"{what} >= {need}, 7-task average on `others`", got >= need, f"{f2(got)}, {where}")
        for what, need, (got, where) in checks
    ]


def model_table(name: str, m: dict, tasks: list[str], teacher: list[float] | None) -> str:
    raw = st_avg(m["rows"]["others"]["raw"])
    body = []
    for setting in ("others", "target"):
        for row, scores in m["rows"][setting].items():
            table_only = row in TOKEN_ROWS and not TOKEN_ROWS[row][1]
            if setting == "target" and (row == "raw" or table_only):
                continue  # the same as under others: nothing is fitted on the corpus
            fit = "none" if row == "raw" else "table" if table_only else setting
            a = st_avg(scores)
            body.append([TOKEN_NAMES.get(row, row), fit, *map(f2, scores), f2(a), "" if row == "raw" else f2(a - raw, sign=True)])
    if teacher is not None:
        body.append(["*teacher transformer (all-MiniLM-L6-v2)*", "-", *map(f2, teacher), f2(st_avg(teacher)), ""])
    oov = f"Out-of-vocabulary tokens over the 7 tasks' sentences: {100 * m['coverage']['oov_rate']:.2f}%."
    return md(f"#### {name}", table(["calibration", "fit", *tasks, "avg", "vs raw"], body), oov)


def sts_static(data: dict) -> str:
    return md(
        "## Static models on the seven STS tasks (issue #23)",
        st_targets(data),
        *(model_table(name, m, data["tasks"], data["teacher"]) for name, m in data["models"].items()),
        f"Spearman x 100 of cosine, all evaluation pairs of a task pooled; data `{data['settings']['data']}`. "
        f"Ran in {data['meta']['wall_s'] / 60:.1f} min on {data['meta']['machine']}. "
        "Regenerate with `nice -n 10 .venv/bin/python bench/static.py` (writes this section and `bench/results/static.json`).",
    )


# --------------------------------------------------------------------------- auto-zoo, auto-search (AUTO.md)


HARM, BIG, KEEP_LF, KEEP_FEW, DRAWS_OK = 0.5, 3.0, 0.7, 0.75, 19  # KEEP_FEW: issue #34's 75%


def zoo_targets(zoo: dict) -> list[str]:
    """Issue #24's and #34's targets on the held-out cells, one line each."""
    cells = zoo["cells"]

    def gain(c: dict, m: str) -> float:
        return c["truth"][m] - c["truth"]["raw"]

    def share(got: float, best: float) -> float:
        return got / best if best > 0 else 1.0

    lf = {k: gain(c, c["label_free"]) for k, c in cells.items()}
    oracle = {k: max(c["truth"].values()) - c["truth"]["raw"] for k, c in cells.items()}
    losers = [f"{k.replace('|', ' on ')} {lf[k]:+.2f}" for k in cells if lf[k] < -HARM]
    big = [k for k in cells if oracle[k] >= BIG]
    keep = float(np.mean([share(lf[k], oracle[k]) for k in big])) if big else 1.0
    few = {k: c["few_label"] for k, c in cells.items() if c["few_label"]}
    ok = {k: sum(gain(cells[k], x) >= -HARM for x in xs) for k, xs in few.items()}
    bad = [f"{k.replace('|', ' on ')} {ok[k]}/{len(few[k])}" for k in ok if ok[k] < DRAWS_OK]
    fk = [float(np.mean([share(gain(cells[k], x), oracle[k]) for x in few[k]])) for k in big if k in few]
    mean_fk = float(np.mean(fk)) if fk else 1.0
    avg = {m: float(np.mean([c["truth"].get(m, np.nan) for c in cells.values()])) for m in ("raw", "whitening")}
    lf_avg = float(np.mean([c["truth"][c["label_free"]] for c in cells.values()]))
    few_avg = float(np.mean([np.mean([cells[k]["truth"][x] for x in xs]) for k, xs in few.items()]))
    lines = [
        target("label-free auto never below raw - 0.5 on any cell", not losers, f"{len(losers)} of {len(cells)} below: {', '.join(losers) or 'none'}"),
        target(f"label-free auto keeps >= 70% of the oracle's gain on average where it gains >= 3, {len(big)} cells", keep >= KEEP_LF, f"{100 * keep:.0f}%"),
        target("few-label auto >= raw - 0.5 in >= 19 of 20 draws per cell", not bad, f"{len(bad)} of {len(ok)} cells below: {', '.join(bad) or 'none'}"),
        target("few-label auto keeps >= 75% of the oracle's gain on average where it gains >= 3", mean_fk >= KEEP_FEW, f"{100 * mean_fk:.0f}%"),
        target("full whitening beaten on the zoo average", lf_avg > avg["whitening"], f"label-free auto {lf_avg:.2f}, few-label auto {few_avg:.2f}, whitening {avg['whitening']:.2f}, raw {avg['raw']:.2f}"),
    ]  # fmt: skip
    return [f"- {line}" for line in lines]


def signal_table(zoo: dict, rule: dict) -> list[str]:
    """Each vector signal deciding alone (its STS-B-train threshold; act = the static branch's calibration), and the rule."""
    cells = zoo["cells"]
    o = {k: max(c["truth"].values()) - c["truth"]["raw"] for k, c in cells.items()}
    big = [k for k in cells if o[k] >= BIG]
    deciders = [(f"`{n}` {op} {t:g} alone", "alone", n) for n, (op, t) in rule["thresholds"].items()]
    body = []
    for name, key, n in [*deciders, ("**the rule (encoder kind)**", "label_free", None)]:
        g = {k: c["truth"][c[key][n] if n else c[key]] - c["truth"]["raw"] for k, c in cells.items()}
        kept = sum(g[k] >= 0.5 * o[k] for k in big)
        losing, gain = f"{sum(v < -HARM for v in g.values())}/{len(g)}", f2(float(np.mean(list(g.values()))), sign=True)
        body.append([name, losing, f"{kept}/{len(big)}", gain])
    return table(["deciding", "cells losing > 0.5", "big gains kept >= 50%", "mean gain over raw"], body, "r")


def pooling_table(zoo: dict) -> list[str]:
    """Per zoo model, leave one task out: every pooling raw and under its kind's label-free calibration, and auto
    (the pooling rule's pooling + the label-free calibration), with the average over the tasks."""
    cells, rule = zoo["cells"], zoo["rule"]
    tasks = list(dict.fromkeys(k.split("|")[1] for k in cells))
    body = []
    for m in dict.fromkeys(k.split("/")[0] for k in cells):
        mine = list(dict.fromkeys(k.split("|")[0].split("/")[1] for k in cells if k.startswith(m + "/")))
        kind = next(c["kind"] for k, c in cells.items() if k.startswith(m + "/"))
        cal, pick = rule["act"][kind], rule.get("pooling", {}).get("choice", {}).get(kind)
        shown = [(f"{p}, {c}", p, c) for p in mine for c in dict.fromkeys(["raw", cal])]
        shown += [(f"**auto: {pick}, {cal}**", pick, cal)] if pick in mine else []
        for name, p, c in shown:
            vals = [cells[f"{m}/{p}|{t}"]["truth"][c] for t in tasks]
            body.append([m, name, *map(f2, vals), f2(float(np.mean(vals)))])
    return table(["model", "pooling, calibration", *tasks, "avg"], body, ["---", "---", *["---:"] * (len(tasks) + 1)])


def auto_zoo(zoo: dict) -> str:
    """The model zoo: label-free and few-label auto held out task by task, against their targets (AUTO.md)."""
    from isotropy.selection.dev import DEV_RULE

    rule, meta = zoo["rule"], zoo["meta"]
    entries = len(dict.fromkeys(k.split("|")[0] for k in zoo["cells"]))
    return md(
        "## Model zoo: label-free `auto` by the encoder's kind (issue #24)",
        f"Label-free `auto`: **{rule['act']['static']}** on a static table, **{rule['act']['transformer']}** on a "
        f"transformer (`SIGNAL_RULE`); few-label `auto`: `DEV_RULE` `{DEV_RULE['test']}@{DEV_RULE['level']:g}`, {meta.get('draws', 20)} draws of 100 dev pairs per "
        f"cell. {entries} zoo entries x {len(meta['tasks'])} tasks, leave one task out, fitted on `others`; Spearman x 100."
        + (" PARTIAL RUN." if meta.get("partial") else ""),
        zoo_targets(zoo),
        "### The rule and each signal deciding alone, on the held-out cells",
        signal_table(zoo, rule),
        "### Pooling: the rule (`POOLING_RULE`) held out task by task",
        pooling_table(zoo),
        f"Run: {len(zoo['cells'])} cells in {meta.get('wall_s', float('nan')) / 60:.1f} min. Every cell is in "
        "`bench/results/auto.json` (`zoo`). Regenerate: `.venv/bin/python bench/auto.py --zoo` "
        "(`--render`: from the JSON).",
    )  # fmt: skip


def _means(e: dict, rows: np.ndarray) -> dict[str, float]:
    return {c: float(np.mean(np.asarray(v)[rows])) for c, v in e["per_query"].items()}


def auto_search(res: dict) -> str:
    """Label-free auto for search (the library's ``SEARCH_RULE``), scored on the held-out half of Cranfield's queries."""
    from isotropy.selection.signals import SEARCH_RULE, SIGNAL_RULE

    tune, held = np.asarray(res["split"]["tune"]), np.asarray(res["split"]["held"])
    held_out, static = [], []
    for e in res["entries"]:
        m = _means(e, held)
        s, sim, best = SEARCH_RULE["act"][e["kind"]], SIGNAL_RULE["act"][e["kind"]], max(m, key=m.get)
        held_out.append([e["label"], f2(m["raw"]), f"**{m[s]:.2f}** ({s}, {m[s] - m['raw']:+.2f})",
                         f"{m[sim]:.2f} ({sim}, {m[sim] - m['raw']:+.2f})", f"{m[best]:.2f} ({best})"])  # fmt: skip
        static += [m[s] - m["raw"]] if e["kind"] == "static" else []
    below = sum(g < 0 for g in static)
    return md(
        "## Search: label-free `auto --for search`, tuned on half of Cranfield's queries (issue #34)",
        f"Cranfield's queries split by `SEARCH_SPLIT` (seed {res['split']['seed']}): {len(tune)} tuning, {len(held)} "
        f"held out; candidates fitted on the 1400 documents; nDCG@10 x 100, exact search; the library's `SEARCH_RULE`: "
        + ", ".join(f"**{v}** on a {k} encoder" for k, v in SEARCH_RULE["act"].items() if k != "unknown") + ".",
        table(["entry", "raw", "**auto --for search**", "auto --for similarity", "best in hindsight"], held_out, "r"),
        target("for search no static model below raw on the held-out queries", below == 0,
               f"{below} of {len(static)} static entries below raw; smallest change {min(static):+.2f}"),
        f"Ran on {res['machine']}. Regenerate: `nice -n 5 .venv/bin/python bench/auto_search.py` (`--render-only`: from the JSON).",
    )  # fmt: skip


# --------------------------------------------------------------------------- auto-speed (BENCHMARKS.md)


def auto_speed(res: dict) -> str:
    """``calibrate --method auto`` against ``encode`` on the STS-B sentences (BENCHMARKS.md)."""
    body = [[i, f"{r['encode_s']:.1f}", f"{r['auto_s']:.1f}", f"**{r['ratio']:.2f}x**"] for i, r in enumerate(res["rounds"], 1)]
    worst, sv = max(r["ratio"] for r in res["rounds"]), res["same_vectors"]
    return md(
        "## `calibrate --method auto` against `encode` (issue #34)",
        f"The {res['sentences']:,} distinct STS-B sentences, the default model, each command in a new process with a fresh "
        f"vector cache; auto encodes a sample of {res['signal_rows']:,} sentences and writes the base model "
        f"({' -> '.join(res['modules'])}). Ran on {res['machine']} (load {max(x[0] for x in res['loadavg']):.2f} at most). "
        "Regenerate: `.venv/bin/python bench/auto_speed.py`.",
        table(["round", "`isotropy encode` (s)", "`calibrate --method auto` (s)", "auto / encode"], body, "---:"),
        target("auto <= 0.35x encode", worst <= 0.35, f"worst {worst:.2f}x, choice {res['choice']}"),
        f"The folder against the base model through sentence-transformers (200 sentences and one longer than the window): "
        f"largest difference {sv['max_abs_diff']:.2e}, norms {sv['norm_min']:.4f} to {sv['norm_max']:.4f}.",
    )  # fmt: skip


# --------------------------------------------------------------------------- static-speed (BENCHMARKS.md)


COMMAND = "nice -n 5 .venv/bin/python bench/static_speed.py"


def _sspeed_run(name: str, n: int, r: dict, quiet_load: float) -> str:
    med = r["median"]
    rate = {k: r["counts"][k] / t for k, t in med.items()}
    (b1, _, _), (a1, _, _) = r["load"]
    tag = "UNDER LOAD: not a result" if max(b1, a1) > quiet_load else "quiet"
    body = [
        [k, f"{r['counts'][k]:,}", f2(t, 3), f"{rate[k]:,.0f}", f"{rate['ours'] / rate[k]:.2f}x", f2(r["peaks"].get(k), 0)]
        for k, t in med.items()
    ]
    body.append(["ours, first round (word cache empty)", f"{n:,}", f2(r["cold"], 3), f"{n / r['cold']:,.0f}", "-", "-"])
    head = ["encoder", "sentences timed", "median wall time (s)", "sentences/s", "ours vs it", "peak traced memory (MiB)"]
    vs, share = rate["ours"] / rate["model2vec"], min(med["bound: sparse"], med["bound: reduceat"]) / med["ours"]
    agree = r["agree"]
    lines = [
        target("ours >= 3x model2vec's encode", vs >= 3, f"{vs:.2f}x"),
        target(">= 40% of the gather bound", share >= 0.4, f"{100 * share:.0f}%"),
        target("cosine >= 0.999999 against the tokenizer path and model2vec", all(agree[k] >= 0.999999 for k in ("tokenizer", "model2vec") if k in agree),
               ", ".join(f"{k} {v:.7f}" for k, v in agree.items())),
    ]  # fmt: skip
    if "teacher" in rate:
        lines.append(target(">= 50x the teacher", rate["ours"] / rate["teacher"] >= 50, f"{rate['ours'] / rate['teacher']:.0f}x"))
    title = f"### {name}, {n:,} sentences, median of {r['rounds']} round(s), {tag} (load {b1:.1f} -> {a1:.1f})"
    return md(title, table(head, body), [f"- {line}" for line in lines])


def static_speed(saved: dict) -> str:
    results, quiet_load, where = saved["results"], saved.get("quiet_load", 2.5), saved["machine"]
    return md(
        "## Static encode speed (#23, #33)",
        f"Sentences of the 7 STS tasks (unique, then recombined halves of two, shuffled), median of the rounds (each "
        f"encoder in turn) in one process; {where}. Regenerate: `{COMMAND}`.",
        *(_sspeed_run(res["name"], int(n), r, quiet_load) for res in results for n, r in res["sizes"].items()),
    )  # int(n): the saved JSON's keys are text


# --------------------------------------------------------------------------- encode (BENCHMARKS.md)


SETTINGS = ("short@64", "short@256", "long@64", "long@256")
BOUND = 0.3  # Spearman points an accelerated backend may lose against fp32


def rows(result: dict) -> dict[str, list[dict]]:
    """Per setting: every backend with wall/CPU seconds, speed-up over ST torch of its own process, GFLOP/s, % of peak."""
    out: dict[str, list[dict]] = {}
    peers = result.get("peers") or {}
    for key in SETTINGS:
        stats, peak = result["tokens"][key], result["peaks"][key]["model_peak"]
        sources = [("ours", result["times"][key], result["kinds"])]
        if peers:
            sources.append(("peers", peers["times"][key], result["peer_kinds"]))
        out[key] = []
        for proc, times, kinds in sources:
            ref = times["ST torch fp32"]
            for name, t in times.items():
                wall, cpu, kind = t["median_wall"], t["median_cpu"], kinds.get(name, "fp32")
                gflops = stats["flops"]["total"] / wall / 1e9
                shown = "ST torch fp32 (peer venv)" if proc == "peers" and name == "ST torch fp32" else name
                row = {"name": shown, "key": name, "proc": proc, "wall": wall, "cpu": cpu, "rate": stats["texts"] / wall}
                row.update(speedup=ref["median_wall"] / wall, speedup_cpu=ref["median_cpu"] / cpu, gflops=gflops, kind=kind)
                out[key].append({**row, "of_peak": gflops / peak[kind]})
    return out


def _accuracy_ok(result: dict, name: str) -> bool:
    acc = result.get("accuracy", {})
    ref, mine = acc.get("ours torch fp32"), acc.get(name.split(",")[0])
    return not ref or not mine or all(ref[p] - mine[p] <= BOUND for p in ("cls", "last-avg"))


def enc_targets(result: dict, tab: dict[str, list[dict]]) -> list[str]:
    t1 = {k: next(r["speedup"] for r in tab[k] if r["key"] == "ours torch fp32") for k in ("short@64", "short@256")}
    lines = [target("our torch fp32 >= 1.5x sentence-transformers torch on short sentences", min(t1.values()) >= 1.5,
                    ", ".join(f"{k} {v:.2f}x" for k, v in t1.items()))]  # fmt: skip
    if result.get("peers"):
        parts, ratios = [], []
        for k in SETTINGS:
            ours = [r for r in tab[k] if r["proc"] == "ours" and r["key"] != "ST torch fp32" and _accuracy_ok(result, r["key"])]
            theirs = [r for r in tab[k] if r["proc"] == "peers" and r["key"] != "ST torch fp32"]
            o, p = max(ours, key=lambda r: r["speedup"]), max(theirs, key=lambda r: r["speedup"])
            ratios.append(o["speedup"] / p["speedup"])
            parts.append(f"{k}: {o['name']} {o['speedup']:.2f}x vs {p['name']} {p['speedup']:.2f}x -> {ratios[-1]:.2f}x")
        what = f"our fastest CPU backend (within {BOUND} Spearman of fp32) >= 1.5x sentence-transformers' fastest"
        lines.append(target(what, min(ratios) >= 1.5, "; ".join(parts)))
    best = {
        k: max((r for r in tab[k] if r["proc"] == "ours" and r["kind"] == "int8"), key=lambda r: r["speedup"])
        for k in ("long@64", "long@256")
    }
    lines.append(target("our fastest int8 backend >= 60% of the int8 GEMM peak on long passages", all(b["of_peak"] >= 0.6 for b in best.values()),
                        "; ".join(f"{k}: {b['name']} {100 * b['of_peak']:.0f}%" for k, b in best.items())))  # fmt: skip
    return [f"- {line}" for line in lines]


def _speed_tables(result: dict, tab: dict) -> str:
    out = []
    head = ["backend", "median s", "CPU s", "texts/s", "x ST torch (same process)", "x by CPU time", "GFLOP/s", "% of peak"]
    for k in SETTINGS:
        s, p = result["tokens"][k], result["peaks"][k]
        out.append(
            f"**{k.replace('@', ', max_length ')}**: {s['texts']} texts, {s['real_tokens']:,} real tokens, "
            f"{s['flops']['total'] / 1e9:.1f} GFLOP; peaks (GFLOP/s) fp32 {p['model_peak']['fp32']:.0f}, "
            f"bf16 {p['model_peak']['bf16']:.0f}, int8 {p['model_peak']['int8']:.0f}."
        )
        body = [
            [r["name"], *(f2(r[c]) for c in ("wall", "cpu")), f"{r['rate']:.0f}", *(f2(r[c]) for c in ("speedup", "speedup_cpu"))]
            + [f"{r['gflops']:.0f}", f"{100 * r['of_peak']:.0f}% {r['kind']}"]
            for r in tab[k]
        ]
        out.append(table(head, body, "r"))
    return md(*out)


def _accuracy_table(result: dict) -> list[str]:
    body = []
    for proc, acc, ref in (("ours", result.get("accuracy") or {}, "ours torch fp32"), ("peers", (result.get("peers") or {}).get("accuracy") or {}, "ST torch fp32")):  # fmt: skip
        for name, a in acc.items():
            r = acc.get(ref)
            lost = f"{r['cls'] - a['cls']:+.2f} / {r['last-avg'] - a['last-avg']:+.2f}" if r else "-"
            shown = f"{name} (peer venv)" if proc == "peers" and name == "ST torch fp32" else name
            body.append([shown, f2(a["cls"]), f2(a["last-avg"]), lost])
    return table(["backend", "cls", "last-avg (mean)", "lost vs fp32 (cls / last-avg)"], body, "r") if body else []


def _levers(result: dict) -> list[str]:
    """Each lever's speed-up per workload."""

    def med(k: str, name: str) -> float:
        return result["times"][k][name]["median_wall"]

    body = [["bf16 vs fp32 (ours torch)", *(f"{med(k, 'ours torch fp32') / med(k, 'ours torch bf16'):.2f}x" for k in SETTINGS)]]
    for base in ("ours torch fp32", "ours torch bf16", "ours onnx int8"):
        tb = f"{base}, 2048-token batches"
        body.append([f"2,048-token batches vs 64 sentences ({base})", *(f"{med(k, base) / med(k, tb):.2f}x" for k in SETTINGS)])
    return table(["lever", *SETTINGS], body, "r")


def memory_section(mem: dict) -> str:
    """The ``isotropy encode`` memory check (bench/encode_memory.py's JSON)."""
    runs = mem["runs"]
    body = [[f"{r['lines']:,}", f"{r['wall_s']:.0f}", f"{r['cpu_s']:.0f}", f"{r['sentences_per_s']:.0f}",
             f"{r['lines'] / r['cpu_s']:.0f}", f"{r['peak_rss_mib']:.0f}"] for r in runs]  # fmt: skip
    a, z = runs[0], runs[-1]
    grew = z["peak_rss_mib"] - a["peak_rss_mib"]
    ok, figure = grew < 0.05 * a["peak_rss_mib"], f"{a['lines']:,} -> {z['lines']:,} lines: {grew:+.0f} MiB"
    flat = target("peak RSS does not grow with N", ok, figure) if len(runs) >= 2 else None
    frame = next((r["progress_frame"] for r in reversed(runs) if r.get("progress_frame")), None)
    return md(
        "### Memory: `isotropy encode` on a large file",
        f"`isotropy encode FILE -o OUT.npy --precision {mem['precision']}`, {mem['threads']} thread(s), a child process; peak RSS: its `ru_maxrss`.",
        table(["lines", "wall s", "CPU s", "sentences/s", "per CPU second", "peak RSS MiB"], body, "---:"),
        flat,
        f"The progress bar's last frame (on a pseudo-terminal): `{frame}`." if frame else None,
    )


def encode(result: dict) -> str:
    tab, su, peers = rows(result), result["setup"], result.get("peers")
    versions = f"torch {su['versions']['torch']}, sentence-transformers {su['versions']['sentence_transformers']}, onnxruntime {su['versions']['onnxruntime']}"
    if peers:
        pv = peers["versions"]
        versions += f"; peers: sentence-transformers {pv['sentence_transformers']}, OpenVINO {pv['openvino'].split('-')[0]}"
    return md(
        "## Encoder throughput vs sentence-transformers",
        f"Default model (all-MiniLM-L6-v2), {su['threads']} thread(s), batch size {su['batch_size']}, median of "
        f"{su['rounds']} interleaved rounds, on {su['machine']} (load average {su['loadavg_after'][0]} at the end); {versions}.",
        enc_targets(result, tab),
        "### Speed",
        _speed_tables(result, tab),
        "### Accuracy (STS-B test, Spearman x 100, max_length 256)",
        _accuracy_table(result),
        "### Levers",
        _levers(result),
        memory_section(result["memory"]) if result.get("memory") else None,
        "Regenerate: `.venv/bin/python bench/encode.py --peers-python .venv-peers/bin/python` and "
        "`bench/encode_memory.py`; `--render bench/results/encode.json` redraws this section.",
    )  # fmt: skip


# --------------------------------------------------------------------------- scale (BENCHMARKS.md)


CORES_PER_MACHINE = 32  # assumption of the 1B estimate: a common cloud machine size
PRICE_CORE_HOUR = 0.04  # assumption: US$ per vCPU-hour, on-demand order of magnitude (not a quote)
RAM_OVERHEAD = 1.3  # assumption: inverted lists' slack, ids, coarse quantiser, OS


def _grid(res: dict) -> str:
    def dims(r: dict) -> str:
        if r["calibration"] == "raw+opq":  # OPQ rotates and projects to the largest multiple of M
            return f"{r['dims']} -> {(r['dims'] // r['bytes']) * r['bytes']}"
        return f"50 + {r['dims'] - 50} zeros" if r["calibration"] == "none" and r["dims"] > 50 else str(r["dims"])

    head = ["budget", "calibration", "bytes used", "dims", "nprobe", "recall@10", "recall@10 re-ranked", "single q/s 1t",
            "single q/s 2t", "batch q/s 1t", "batch q/s 2t", "single q/s re-ranked 1t", "size MB", "peak GB", "train s", "add s", "load"]  # fmt: skip
    qps = ("qps_single_1t", "qps_single_2t", "qps_batch_1t", "qps_batch_2t", "qps_single_rerank_1t")
    body = [
        [r["budget"], r["calibration"], r["bytes"], dims(r), r.get("nprobe", 32), f2(r["recall@10"], 3), f2(r["recall@10_rerank"], 3),
         *(f"{r[q]:,.0f}" for q in qps), f"{r['size_mb']:.1f}", f2(r.get("peak_rss_gb"), 1), f"{r['train_s']:.1f}", f"{r['add_s']:.1f}",
         f"{r['load_before'][0]:.1f}/{r['load_after'][0]:.1f}"]
        for r in sorted(res["grid"], key=lambda r: (r["budget"], r["calibration"]))
    ]  # fmt: skip
    tuned = any("tuning" in r for r in res["grid"])
    nlists = ", ".join(f"{v:,}" for v in sorted({r.get("nlist", 1024) for r in res["grid"]}))
    how = "nprobe tuned per row on 1,000 other queries (the sweep below)" if tuned else "nprobe 32"
    return md(f"**{res['rows']:,} vectors** (GloVe 50 d windows), nlist {nlists}, {how}:", table(head, body))


def _tuning(res: dict) -> str | None:
    rows = sorted((r for r in res["grid"] if "tuning" in r), key=lambda r: (r["budget"], r["calibration"]))
    if not rows:
        return None
    body = []
    for r in rows:
        cells = [f"{f2(t['recall@10'], 3)} / {f2(t['recall@10_rerank'], 3)}" for t in r["tuning"]]
        cells = [f"**{c}**" if t["nprobe"] == r["nprobe"] else c for c, t in zip(cells, r["tuning"])]
        body.append([r["budget"], r["calibration"], *cells])
    head = ["budget", "calibration", *(f"nprobe {t['nprobe']}" for t in rows[0]["tuning"])]
    return md("The nprobe sweep on the tuning queries (recall@10 plain / re-ranked; chosen in bold):", table(head, body))


def _targets(res: dict) -> list[str]:
    rows = [r for r in res["grid"] if r["bytes"] <= 32]
    if not rows:
        return []

    def best(key: str) -> dict:
        return max(rows, key=lambda r: r[key])

    rr, plain, slow = best("recall@10_rerank"), best("recall@10"), min(rows, key=lambda r: r["qps_single_1t"])
    fast = sum(r["qps_single_1t"] >= 1000 for r in rows)
    lines = [
        target("recall@10 re-ranked >= 0.90 at <= 32 bytes", rr["recall@10_rerank"] >= 0.9, f"{rr['calibration']} at {rr['bytes']} bytes: {f2(rr['recall@10_rerank'], 3)}"),
        target("recall@10 >= 0.70 at <= 32 bytes", plain["recall@10"] >= 0.7, f"{plain['calibration']} at {plain['bytes']} bytes: {f2(plain['recall@10'], 3)}"),
        target(">= 1,000 single-query searches a second, one thread", fast == len(rows), f"{fast} of {len(rows)} rows; slowest {slow['calibration']} at {slow['bytes']} bytes: {slow['qps_single_1t']:,.0f}"),
    ]  # fmt: skip
    at16 = {r["calibration"]: r for r in res["grid"] if r["budget"] == 16}
    cal = [r for c, r in at16.items() if c not in ("raw+opq", "none")]
    if "raw+opq" in at16 and cal:
        b, opq = max(cal, key=lambda r: r["recall@10"]), at16["raw+opq"]["recall@10"]
        what = "at 16 bytes a calibration in front of PQ beats raw + OPQ by >= 2 recall@10 points"
        lines.append(target(what, b["recall@10"] - opq >= 0.02, f"{b['calibration']} {f2(b['recall@10'], 3)} vs {f2(opq, 3)}"))
    return [f"- {line}" for line in lines]


def _estimate(res: dict) -> str | None:
    rows, n = [r for r in res["grid"] if r["bytes"] <= 32], res["rows"]
    if not rows:
        return None
    # medians over the rows (the load moved between rows); the add ran on 2 threads
    add_rate = float(np.median([n / r["add_s"] / 2 for r in rows]))
    # codes scanned a second by one thread: the lists visited (nprobe of nlist) times the single-query rate
    scan_rate = float(np.median([n * r.get("nprobe", 32) / r.get("nlist", 1024) * r["qps_single_1t"] for r in rows]))
    N, nlist_b, nprobe_b, code = 10**9, 262_144, 64, 32
    # coarse k-means cost grows as training rows x centroids (64 rows a list, at least 65,536): an upper bound
    train = [
        r["train_s"] * 2 * (64 * nlist_b / max(65_536, 64 * r.get("nlist", 1024))) * (nlist_b / r.get("nlist", 1024))
        for r in rows
    ]
    train_core_h, add_core_h = float(np.median(train)) / 3600, N / add_rate / 3600
    mem_gb, q_ms = N * (code + 8) * RAM_OVERHEAD / 1e9, (N * nprobe_b / nlist_b) / scan_rate * 1000
    core_h = add_core_h + train_core_h
    body = [[m, f"{mem_gb / m:,.0f}", f"{train_core_h / CORES_PER_MACHINE:,.0f}", f"{add_core_h / (m * CORES_PER_MACHINE):.2f}",
             f"{core_h:,.0f}", f"{core_h * PRICE_CORE_HOUR:,.0f}", f"{q_ms:.0f}"] for m in (1, 4, 16)]  # fmt: skip
    head = ["machines", "codes in RAM per machine (GB)", "train (h, client, 32 cores)", "add (h)", "core-hours", "cost (US$)", "single query (ms, 1 core, one index)"]  # fmt: skip
    return md(
        f"**Paper estimate for 1B vectors**, from the medians of the {len(rows)} rows of <= 32 bytes at {n:,} vectors: "
        f"adding {add_rate:,.0f} vectors/s per core, a single-thread query scanning {scan_rate / 1e6:,.1f}M codes/s. "
        f"Assumed: {code}-byte codes + 8-byte ids, x{RAM_OVERHEAD} overhead, nlist 262,144, nprobe 64, coarse training "
        f"scaled as rows x nlist, {CORES_PER_MACHINE} cores a machine, US${PRICE_CORE_HOUR}/core-hour, vectors already encoded.",
        table(head, body),
    )


def scale(results: dict) -> str:
    parts = ["## Compressed search at scale: calibrations in front of PQ (`bench/scale.py`)"]
    sizes = sorted((k for k in results if k.isdigit()), key=int)
    for key in sizes:
        res = results[key]
        parts += [_grid(res), _tuning(res), _targets(res)]
        if "dask" in res:
            d = res["dask"]
            same = d.get("same_codes")
            parts += [f"Build of the soft whitening-48, 16-byte index: one process {d['one_process_s']:.0f} s, "
                      f"`build_index_dask` (2 single-threaded workers, 10 shards) {d['dask_2_workers_s']:.0f} s"
                      + ("." if same is None else f"; the two indexes hold {'the same' if same else '**different**'} lists, ids and codes.")]  # fmt: skip
    if sizes:  # the 1B estimate from the largest size measured
        parts.append(_estimate(results[sizes[-1]]))
    if "cranfield" in results:
        body = [
            [r["calibration"], r["bytes"], *(f2(r[k], 3) for k in ("ndcg@10", "exact_ndcg@10", "recall@10_vs_exact"))]
            for r in results["cranfield"]
        ]
        head = ["calibration", "bytes", "nDCG@10 index", "nDCG@10 exact", "recall@10 vs exact"]
        parts += ["**Cranfield nDCG@10 through the compressed index** (GloVe 50 d; nlist 35, nprobe 8):", table(head, body)]
    parts.append(
        "Regenerate: `nice -n 5 .venv/bin/python bench/scale.py` (its docstring holds the method); `--render` redraws this."
    )
    return md(*parts)


# --------------------------------------------------------------------------- poolings (BENCHMARKS.md)


def poolings(result: dict, names: list[str], new: set[str], speed_rows: int) -> str:
    """Every pooling's STS-B Spearman and speed against last-avg (BENCHMARKS.md)."""
    scores, speed, relative = result["spearman"], result["sentences_per_second"], result["relative_to_last_avg"]
    both = "all in one encode_multi"
    body = [[f"**{p}**" if p in new else p, f2(scores[p]), f"{speed[p]:.0f}", f"{relative[p]:.2f}x"] for p in names]
    body.append([f"all {len(names)} in one `encode_multi`", "", f"{speed[both]:.0f}", f"{relative[both]:.2f}x"])
    return md(
        "## Poolings (issue #14)",
        f"`bench/poolings.py`: {result['setting']}. New poolings in bold, each with its paper's defaults. Speed: each "
        f"pooling alone on {speed_rows} test sentences, median of {result['rounds']} interleaved rounds ({result['machine']}).",
        table(["pooling", "Spearman x 100", "sentences / s", "speed vs last-avg"], body, "r"),
    )  # fmt: skip


# --------------------------------------------------------------------------- search (BENCHMARKS.md)


def search(data: dict, threshold: float, max_length: int) -> str:
    """Whitened, smaller vectors on a faiss index against raw-384 flat (BENCHMARKS.md)."""
    rows, m = data["rows"], data["meta"]
    ref = next((r for r in rows if r["setting"] == "raw-384" and r["kind"] == "flat"), None)
    head = "setting|index|dims|R@1|R@10|MRR@10|QPS batch|vs ref|QPS single|vs ref|index MB|vs ref|build s".split("|")
    body = [
        [r["setting"], r["kind"], r["dims"], *(f2(r[k]) for k in ("recall@1", "recall@10", "mrr@10")), f"{r['qps_batch']:.0f}",
         f2(r.get("speedup_batch")) + "x", f"{r['qps_single']:.0f}", f2(r.get("speedup_single")) + "x", f"{r['bytes'] / 2**20:.1f}",
         f"{r['bytes'] / ref['bytes']:.2f}x" if ref else "-", f"{r['build_s']:.1f}"]
        for r in rows
    ]  # fmt: skip
    return md(
        "## Search: whitened, smaller vectors on a faiss index",
        f"Corpus: the {m['n_corpus']} unique sentences of {', '.join(m['task_names'])}; queries: sentence1 of every pair "
        f"with gold >= {threshold} ({m['n_queries']} queries, {m['n_pairs']} pairs), the relevant document its sentence2. "
        f"Default model, last-avg, max_length {max_length}, encoding {m['enc_rate']:.0f} sentences/s here. Median of "
        f"{m['repeats']} interleaved sweeps on {m['machine']} ({m['date']}); faiss threads {m['faiss_threads']} for "
        f"batches, 1 for single queries ({m['n_single']} queries). Regenerate: `.venv/bin/python bench/search.py`.",
        table(head, body, ["---", "---", *["---:"] * 11]),
        search_verdict(rows, ref),
    )  # fmt: skip


def search_verdict(rows, ref) -> str:
    full = [r for r in rows if r["dims"] == 384]
    if not full or ref is None:
        return "Target not evaluated (the run lacks the full-dimension or the raw-384 flat rows)."
    best = max(full, key=lambda r: r["recall@10"])
    small = [r for r in rows if r["dims"] <= 128]
    ok = [r for r in small if r["recall@10"] >= best["recall@10"] - 1.0 and min(r["speedup_batch"], r["speedup_single"]) >= 2.5]
    what = f"<= 128 dims, recall@10 within 1 point of {best['setting']} {best['kind']} ({best['recall@10']:.2f}), >= 2.5x raw-384 flat's throughput"
    return target(what, bool(ok), ", ".join(f"{r['setting']} {r['kind']}" for r in ok) or "no setting")


# --------------------------------------------------------------------------- serve (BENCHMARKS.md)


def serve(r: dict) -> str:
    """``isotropy serve`` against the one-shot ``isotropy search`` (BENCHMARKS.md)."""
    (load0, load1), (wall, wall_max), (loading, loading_max) = r["load"], r["wall"], r["loading"]
    body = [
        [f"`isotropy search INDEX QUERY`, whole command (s, {r['repeats']} runs)", f2(wall), f"{wall_max:.2f} (max)"],
        ["of which loading the index and model (s, as `search` reports it)", f2(loading), f"{loading_max:.2f} (max)"],
        ["`isotropy serve`: start to `/health` answering (s, once)", f2(r["ready_s"]), ""],
        [f"`GET /search?q=...&k=10`, as the client sees it (ms, {r['requests']} requests)", *(f2(x, 1) for x in r["latency_ms"])],
        ["of which the search itself (ms, the server's `took_ms`)", *(f2(x, 1) for x in r["took_ms"])],
    ]
    return md(
        "## Serving searches (`isotropy serve`)",
        f"An index of a generated {r['lines']}-line corpus, default model, `isotropy index build`'s default (soft "
        f"whitening to 128 dims, flat), on {r['machine']} (load {load0:.1f} -> {load1:.1f}). Regenerate: "
        "`.venv/bin/python bench/serve.py`.",
        table(["", "median", "90th percentile"], body, "r"),
    )


# --------------------------------------------------------------------------- onnx (BENCHMARKS.md)


def onnx(r: dict) -> str:
    """The ONNX export against the PyTorch backend and sentence-transformers (BENCHMARKS.md)."""
    head = ["pipeline", "median wall time (s)", "sentences/s", "speed vs PyTorch", "CPU time (s)", "CPU vs PyTorch",
            "STS-B Spearman x100", "change vs PyTorch", "cosine to PyTorch (mean / min)"]  # fmt: skip
    body = [
        [x["pipeline"], f2(x["wall_s"]), f"{x['per_s']:.0f}", f"{x['ratio']:.2f}x", f2(x["cpu_s"]), f"{x['cpu_ratio']:.2f}x",
         f2(x["spearman"]), f2(x["change"], sign=True), "-" if x["cosine"] is None else f"{x['cosine'][0]:.4f} / {x['cosine'][1]:.4f}"]
        for x in r["rows"]
    ]  # fmt: skip
    speed, loss = next(x["ratio"] for x in r["rows"] if x["pipeline"] == "ONNX int8"), r["loss"]
    return md(
        "## onnx",
        f"The {r['n']:,} sentences of the STS-B test pairs, default model, last-avg, max_length 64, batch 64; median of "
        f"{r['repeats']} rounds, the pipelines taking turns on chunks of {r['chunk']}, on {r['machine']}. Regenerate: "
        "`.venv/bin/python bench/onnx_speed.py`.",
        table(head, body, [*["---"], *["---:"] * 7, "---"]),
        target("int8 >= 1.5x PyTorch's throughput, <= 0.3 Spearman points lost", speed >= 1.5 and loss <= 0.3, f"{speed:.2f}x, {-loss:+.2f} points"),
        f"int8 with whitening in the graph, against PyTorch + whitening: {r['whitening_change']:+.2f} Spearman points.",
    )  # fmt: skip


# --------------------------------------------------------------------------- flow (BENCHMARKS.md)


def _runs(times: list[float], d: int = 2) -> str:
    return ", ".join(f"{t:.{d}f}" for t in times)


def flow(r: dict) -> str:
    t_fit, t_w, rate, q = r["fit_s"], r["whitening_s"], r["rate"], r["quality"]
    source = (
        "SYNTHETIC random vectors (not the recorded configuration)"
        if r["synthetic"]
        else "all STS-B sentence vectors, default model, `cls`, max_length 64"
    )
    body = [
        ["`Flow().fit` (l2_d3_w32, additive, 1 epoch, batch 32)", f"{t_fit:.2f} s", _runs(r["fit_runs"]), f"{t_fit / t_w:.0f}x"],
        ["`Flow.transform`", f"{r['transform_s']:.3f} s = {rate:,.0f} vectors/s", _runs(r["transform_runs"]), "-"],
        ["`Flow.inverse_transform(transform(X))`", f"{r['inverse_s']:.3f} s", "-", "-"],
        ["`Whitening().fit` (reference)", f"{t_w:.3f} s", _runs(r["whitening_runs"]), "1x"],
    ]  # fmt: skip
    fit_got = f"{t_fit:.1f} s, {r['steps']} steps; repeated fits bit-identical: {r['same']}"
    quality = None
    if q:
        cells = [f"raw {q['raw']:.2f}", f"flow {q['flow']:.2f} ({q['flow'] - q['raw']:+.2f})"]
        cells += [f"whitening {q['whitening']:.2f} ({q['whitening'] - q['raw']:+.2f})"] if "whitening" in q else []
        quality = "STS-B test Spearman x100 (cls, fitted on train+dev+test): " + ", ".join(cells) + "."
    return md(
        "## flow",
        f"BERT-flow on {source}: {r['n']} x {r['d']} float32, on {r['machine']} (load {r['load'][0]:.1f} -> "
        f"{r['load'][1]:.1f}). Regenerate: `.venv/bin/python bench/flow.py`.",
        table(["what", "median", "all runs (s)", "vs whitening fit"], body),
        [
            "- " + target(f"fit in at most {r['fit_target_s']:.0f} s", t_fit <= r["fit_target_s"], fit_got),
            "- " + target(f"transform at least {r['transform_target']:,.0f} vectors/s", rate >= r["transform_target"], f"{rate:,.0f} vectors/s"),
            f"- Round trip `inverse_transform(transform(X))`: max abs error {r['err']:.2e} (float32).",
        ],
        quality,
    )  # fmt: skip


# --------------------------------------------------------------------------- whitening (BENCHMARKS.md)


def whitening(r: dict) -> str:
    th = r["threads"]
    body = [
        ["reference: `X.T @ X`, float32, in memory (numpy -> `ssyrk`)", f2(r["ref_s"]), "1.00x"],
        ["`isotropy fit whitening` path (`isotropy.files.fit_file`), streamed from disk, float64, eigh included", f2(r["fit_s"]), f"{r['ratio']:.2f}x"],
        ["of which: eigendecomposition + kernel (768 x 768)", f2(r["eigh_s"]), f"{r['eigh_ratio']:.2f}x"],
        ["`Moments().update(X)` on the in-memory array (no file reading), float64", f2(r["mem_s"]), f"{r['mem_ratio']:.2f}x"],
        [f"for scale: `X.T @ X` on a {r['slice_rows']:,}-row slice, float64 vs float32", f"{r['t64']:.2f} vs {r['t32']:.2f}", f"{r['t64_ratio']:.2f}x"],
    ]  # fmt: skip
    return md(
        "## whitening",
        f"BERT-whitening fitted on {r['rows']:,} x {r['d']} float32 rows streamed from {r['shards']} `.npy` shards "
        f"(page-cached) against one `X.T @ X` on the same rows in memory; median of {r['repeats']} interleaved repeats "
        f"on {r['machine']}, BLAS {r['blas']} (load {r['load']:.1f} at the end). Regenerate: "
        f"`.venv/bin/python bench/whitening.py{f' --threads {th}' if th else ''}`.",
        table(["what", "time (s)", "vs `X.T @ X`"], body, "r"),
        [
            "- " + target("within 1.5x of `X.T @ X`", r["ratio"] <= 1.5, f"{r['ratio']:.2f}x"),
            f"- The float64 path agrees with a one-shot float64 `numpy.cov` to {r['err_ours']:.1e} (relative, max entry).",
            f"- Peak extra memory of the streamed fit (tracemalloc): {r['mem_small_mib']:.1f} MiB at {r['rows_small']:,} rows, "
            f"{r['mem_full_mib']:.1f} MiB at {r['rows']:,} rows.",
        ],
    )  # fmt: skip


# --------------------------------------------------------------------------- distributed (BENCHMARKS.md)


def distributed(r: dict) -> str:
    n, t_single, d = r["n"], r["single_s"], r["d"]
    core_hours, gpu_hours = r["core_hours"], 1e9 / r["gpu_rate"] / 3600
    runs = [
        (f"one process (`Encoder.encode` + `Whitening.fit`, torch on {r['threads']} threads; model load {r['load_s']:.1f} s apart)", t_single),
        (f"`fit_whitening` without address: starts a {r['workers']}-worker local cluster, loads the model in each worker, fits, stops", r["cold_s"]),
        (f"the same on a cluster already up (start-up {r['start_s']:.1f} s apart), first call (workers load the model)", r["first_s"]),
        ("the same, warm (model cached in each worker process)", r["warm_s"]),
    ]  # fmt: skip
    subset = f": the first {n:,} of its {r['n_all']:,}" if n < r["n_all"] else ""
    cost = [[f"{c} CPU cores", f"{core_hours / c:,.1f} h", f"${core_hours * r['price_core']:,.0f}"] for c in (64, 512, 4096)]
    gpus = f"GPUs (assumed {r['gpu_rate']:,.0f} sentences/s each)"
    cost += [[f"{g} {gpus}", f"{gpu_hours / g:,.1f} h", f"${gpu_hours * r['price_gpu']:,.0f}"] for g in (8, 64)]
    return md(
        "## Distributed fit (`bench/distributed_fit.py`)",
        f"{n:,} unique sentences ({', '.join(r['tasks'])}{subset}) "
        f"in {r['shards']} shards, all-MiniLM-L6-v2 (mean pooling, max_length {r['max_length']}, {d} dims), whitening fit; one "
        f"run each on {r['machine']} (load {r['load'][0]:.1f} -> {r['load'][1]:.1f}).",
        table(["run", "wall time", "vs one process"], [[what, f"{t:.1f} s", f"{t / t_single:.2f}"] for what, t in runs]),
        [
            f"- Cold and warm cluster fits agree to {r['same_runs']:.1e} relative; against the one-process fit the mean differs by "
            f"{r['vs_single_mean']:.1e} and the covariance by {r['vs_single_cov']:.1e} (max |difference| / max |value|).",
            f"- Throughput: {r['per_core']:,.1f} sentences per core-second in the cluster, {r['per_core_single']:,.1f} in one process.",
        ],
        "### Paper estimate: 1 billion sentences",
        f"Assumed: ${r['price_core']:.2f} per core-hour at the cluster's measured per-core rate; {r['gpu_rate']:,.0f} "
        f"sentences/s per T4/L4-class GPU (not measured) at ${r['price_gpu']:.2f} per GPU-hour; reading and merging "
        f"negligible (one merge moves {d * d * 8 / 2**20:.1f} MiB).",
        table(["workers", "wall time", "cost"], cost),
        f"Total CPU work: {core_hours:,.0f} core-hours; GPU: {gpu_hours:,.0f} GPU-hours (assumed rate).",
    )  # fmt: skip


# --------------------------------------------------------------------------- analysis (BENCHMARKS.md)


def _analysis_time(t: dict) -> str:
    """``isotropy analyze`` against ``isotropy encode`` on a generated corpus."""
    body = [
        ["`isotropy encode` (reference: load + encode)", f"{t['encode_s']:.1f}", f"{t['encode_cpu_s']:.1f}", "1.00"],
        ["`isotropy analyze` (everything, word level and figures included)", f"{t['analyze_s']:.1f}", f"{t['analyze_cpu_s']:.1f}", f2(t["ratio"])],
    ]  # fmt: skip
    inside = ", ".join(f"{k.removesuffix('_s')} {v:.1f}" for k, v in t["inside"].items())
    return md(
        f"`isotropy analyze` on the default model and a generated {t['lines']}-line corpus (median of {t['repeats']}; "
        f"load {t['load'][0]:.1f} -> {t['load'][1]:.1f}).",
        table(["command", "wall s", "CPU s (user+sys)", "wall vs encode"], body, "r"),
        f"Inside the last analyze run (wall s): {inside}.",
        target(f"at most {t['target_s']} s on 2 cores", t["analyze_s"] <= t["target_s"], f"{t['analyze_s']:.1f} s wall, {t['analyze_cpu_s']:.1f} s CPU"),
    )  # fmt: skip


def _analysis_stsb(s: dict) -> str:
    """The anisotropy tables on STS-B: one per pooling, then the word level (all tokens, then those seen only)."""
    w, drop, cos = s["word"], s["drop"], s["word"]["average_cosine"]
    return md(
        f"STS-B, all {s['sentences']} unique sentences, default model, max_length 64; whitening (shrinkage 0) fitted on them.",
        *(md(f"**Pooling `{pooling}`**", table(t["header"], t["rows"], "r")) for pooling, t in s["poolings"].items()),
        f"**Word level** ({w['model']}, {w['ranked_tokens']} tokens ranked, {w['seen_tokens']} seen in STS-B, "
        f"{w['corpus_tokens']} token occurrences; kNN over at most {w['max_queries']} queries per bucket):",
        table(w["header"], w["rows"], "r"),
        f"Random token pairs: average cosine {cos['mean']:.3f} (std {cos['std']:.3f}), I(W) {w['partition_isotropy']:.3f}, "
        f"IsoScore {w['isoscore']:.3f}.",
        f'The same with `unseen="drop"` (only the {drop["ranked_tokens"]} tokens seen in STS-B):',
        table(drop["header"], drop["rows"], "r"),
    )


def analysis(r: dict) -> str:
    """``isotropy analyze``: its time and the anisotropy figures on STS-B (BENCHMARKS.md)."""
    return md(
        "## Analysis (`isotropy analyze`)",
        f"On {r['machine']}. Regenerate: `.venv/bin/python bench/analysis.py`.",
        *(["### Time", _analysis_time(r["timing"])] if "timing" in r else []),
        *(["### Anisotropy on STS-B", _analysis_stsb(r["stsb"])] if "stsb" in r else []),
    )


# --------------------------------------------------------------------------- calibrate (ECOSYSTEM.md)


def calibrate(res: dict) -> str:
    """Parity of the calibrated folder and one ``run_calibration`` (ECOSYSTEM.md)."""
    r = res["run"]
    parity = [line.strip("|").split(" | ") for line in res["parity_rows"]]
    scores = [
        ["base model (isotropy eval)", f2(r["base"])],
        ["calibrated (isotropy eval: Encoder + transform)", f2(r["calibrated"])],
        [f"calibrated folder through MTEB's STS evaluator ({r['mteb_s']:.0f} s)", f2(r["mteb"])],
        ["calibrated folder, int8 graph for sentence-transformers' ONNX backend", f2(r["int8"])],
    ]
    return md(
        "## Measured (bench/calibrate.py)",
        f"Parity: every affine method fitted on the {res['train']:,} STS-B train sentences (all-MiniLM-L6-v2, max_length "
        f"64), the folder loaded by plain `SentenceTransformer(path)` where isotropy is not importable, against `Encoder` + "
        f"the float64 transform on the {res['test']:,} STS-B test sentences.",
        table(["pooling", "method", "calibration module", "max abs difference", "largest entry"], [[c.strip() for c in p] for p in parity], ["---"] * 3 + ["---:"] * 2),
        f"`run_calibration` on {r['train']:,} STS-B train sentences (last-avg, whitening with Ledoit-Wolf shrinkage, "
        f"`--onnx --quantize int8 --eval STSBenchmark`): {r['total_s']:.0f} s in all, encoding {r['encode_s']:.0f} s, "
        f"fitting {r['fit_s']:.2f} s; peak RSS {r['peak_mib']:.0f} MiB.",
        table(["STS-B test (1,379 pairs), Spearman x 100", ""], scores, "r"),
        f"MTEB minus isotropy eval: {r['mteb_minus_eval']:+.4f}. On {res['machine']}.",
    )  # fmt: skip


# --------------------------------------------------------------------------- cli-start, factory-memory, dask-start,
# factory-curve

CLI_START_TARGET_S = 0.35  # issue #44: `isotropy --help` on this machine
FACTORY_TARGET_MB = 2048  # issue #43: the static factory's peak at 1M lines


def cli_start(r: dict) -> str:
    """``isotropy --help`` and ``isotropy calibrate --help`` against the code before the start was made light."""
    m, before = r["median_s"], r["before"]
    now, old = m["isotropy --help"], m[f"isotropy --help at {before}"]
    body = [[f"`{name}`", f2(m[name], 3), f2(m[name] / now)] for name in m]
    what, figure = f"`isotropy --help` <= {CLI_START_TARGET_S} s on this machine", f"{old:.2f} s -> {now:.2f} s, {old / now:.1f}x"
    return md(
        "## Command-line start (`bench/cli_start.py`, issue #44)",
        f"Regenerate: `.venv/bin/python bench/cli_start.py`. Each command in a fresh interpreter, in turn, median of "
        f"{r['repeats']} rounds (load average {r['load']}); `at {before}` is the same command on the code before the start "
        "was made light (checked out beside this one, same interpreter and packages).",
        table(["command", "median s", "vs `isotropy --help` now"], body, "r"),
        target(what, now <= CLI_START_TARGET_S, figure),
    )


def factory_memory(rows: list[dict], full: int) -> str:
    """The static factory's fit, peak memory per corpus size (``full``: the size of the target, 1M lines), and the
    teacher's memory and speed by batching (rows with ``batching``)."""
    teacher = [r for r in rows if "batching" in r]
    rows = [r for r in rows if "batching" not in r]
    head = ["lines", "spans", "baseline MB", "peak MB (maximum resident set)", "peak - baseline MB"]
    body = [
        [f"{r['lines']:,}", "none" if r["spans"].startswith("none") else "default"]
        + [f2(x, 0) for x in (r["baseline_mb"], r["peak_mb"], r["peak_mb"] - r["baseline_mb"], r["seconds"])]
        for r in rows
    ]
    last = max(rows, key=lambda r: (r["lines"], not r["spans"].startswith("none")))
    ok = last["peak_mb"] <= FACTORY_TARGET_MB if last["lines"] >= full else None
    what = f"peak <= {FACTORY_TARGET_MB} MB at 1M lines, with the stand-in teacher; the real teacher's runs: RESULTS factory-curve, peak MB"
    head.append("seconds (pass + solve, no teacher)")
    return md(
        "Regenerate: `nice -n 5 .venv/bin/python bench/factory_memory.py`.",
        table(head, body, ["---:", "---", "---:", "---:", "---:", "---:"]),
        target(what, ok, f"{last['peak_mb']:.0f} MB at {last['lines']:,} lines"),
        _teacher_batching(teacher) if teacher else None,
    )


def _teacher_batching(rows: list[dict]) -> list[str]:
    """``bench/factory_memory.py --teacher``: medians per teacher and batching; speed against batches of 64 sentences."""
    body = []
    for teacher in dict.fromkeys(r["teacher"] for r in rows):
        med = {}
        for batching in ("sentences", "tokens"):
            rs = [r for r in rows if r["teacher"] == teacher and r["batching"] == batching]
            med[batching] = {
                k: statistics.median(r[k] for r in rs) for k in ("baseline_mb", "after_mb", "peak_mb", "lines_per_s")
            }
        for batching, m in med.items():
            what = (
                "64 sentences (the encoder's default)"
                if batching == "sentences"
                else f"<= {rows[0]['budget']:,} padded tokens (distill)"
            )
            speed = f"{m['lines_per_s'] / med['sentences']['lines_per_s']:.2f}x"
            body.append(
                [teacher, what, *(f2(m[k], 0) for k in ("baseline_mb", "after_mb", "peak_mb")), f2(m["lines_per_s"], 1), speed]
            )
    n = sum(1 for r in rows if r["teacher"] == rows[0]["teacher"] and r["batching"] == "sentences")
    return [
        f"The teacher's share (`--teacher {rows[0]['lines']}`): the default model on torch and its int8 export encoding "
        f"{rows[0]['lines']:,} evenly spaced lines of `wiki-1m.txt` at its max_length; each run a fresh process, the "
        f"settings taking turns, medians of {n} runs each.",
        "",
        *table(
            ["teacher", "batches of", "baseline MB", "after the lines MB", "peak MB", "lines/s", "speed vs 64 sentences"],
            body,
            "r",
        ),
    ]


def dask_start(r: dict, labels: dict[str, str]) -> str:
    """A local Dask cluster's two workers up, and a lost one replaced: Dask's own start against isotropy's."""
    body = [
        [labels[s], *(f2(v[k], 1) for k in ("up_s", "up_cpu_s", "restart_s", "restart_cpu_s"))] for s, v in r["median"].items()
    ]
    return md(
        "## Local Dask cluster start (`bench/dask_start.py`, issue #44)",
        "Regenerate: `.venv/bin/python bench/dask_start.py`. Two single-threaded worker processes, each running a task that "
        "imports what isotropy's tasks import; then one worker killed and started again by its nanny. Wall and whole-machine "
        f"CPU seconds, median of {r['repeats']} trials each, alternating, every trial a fresh interpreter "
        f"({r['cpus']} cores, load average {r['load']}).",
        table(["worker start", "up, s", "up, CPU s", "restart, s", "restart, CPU s"], body, "r"),
    )


def factory_curve(data: dict) -> str:
    """The static factory's curve with the real teacher (RESULTS.md): one row per distill or tokenlearn run."""
    rows = sorted(data.get("rows", {}).values(), key=lambda r: (r["sentences"], "model" in r, r["spans"], _teacher(r)))
    names = data.get("tasks", [])
    head = ["model", "lines", "spans", "teacher", "d", "7-task avg", *names, "STS-B train", "Cranfield nDCG@10", "wall s"]
    head += ["CPU s", "teacher s (run)", "teacher s (all lines)", "peak MB", "cached chunks", "table"]
    body = []
    for r in rows:
        first, spans = r["runs"][0], "none" if r["spans"] == "none" else "default"
        scores = [
            r.get("avg"),
            *r.get("sts", [None] * len(names)),
            r.get("stsb_train"),
            (r.get("cranfield") or {}).get("ndcg@10"),
        ]
        seconds = (first["wall_s"], first.get("cpu_s"), first["teacher_s"], _teacher_total(rows, r), first.get("peak_mb"))
        body.append(
            [r.get("model", "isotropy distill"), f"{r['sentences']:,}", spans, _teacher(r), _width(r), *map(f2, scores)]
            + [*(f2(x, 0) for x in seconds), first["teacher_cache"].replace("cached chunks used: ", ""), first.get("table_cache")]
        )
    if potion := data.get("potion-base-8M"):
        scores = [potion["avg"], *potion["sts"], potion.get("stsb_train"), potion["cranfield"]["ndcg@10"]]
        body.append(["potion-base-8M", "-", "-", "-", 256, *map(f2, scores), *["-"] * 7])
    loads = [x for r in rows for x in r["runs"][0]["load"]]
    load = f"load average {min(loads):.1f} to {max(loads):.1f}" if loads else "load not recorded"
    meta = data.get("meta", {})
    ran = f"Ran on {meta.get('machine', '?')}, a shared machine ({load})."
    return md(table(head, body), *data.get("notes", []), f"{ran} Regenerate with `{meta.get('command')}`, then `--score`.")


def _teacher_total(rows: list[dict], row: dict) -> float | None:
    """The teacher seconds of all of ``row``'s texts, as one uncached run would have spent them (module docs): a base
    row's (spans none, 256 d) with the smaller base rows' whose chunks it read; a variant's (spans, another width) with
    its base row's, whose lines it read."""
    first = row["runs"][0]
    if first.get("teacher_s") is None:
        return None
    base = [
        r
        for r in rows
        if _teacher(r) == _teacher(row) and r["spans"] == "none" and r.get("dims", 256) == 256 and "model" not in r
    ]
    if row["spans"] != "none" or row.get("dims", 256) != 256:
        lines = [_teacher_total(rows, r) for r in base if r["sentences"] == row["sentences"]]
        return (first["teacher_s"] if row["spans"] != "none" else 0.0) + (lines[0] or 0.0 if lines else 0.0)
    if first["teacher_cache"].startswith("cached chunks used: 0 of"):  # nothing read from the smaller rows
        return first["teacher_s"]
    nested = [r for r in base if r["sentences"] < row["sentences"] and r.get("step", 5) % 5 == 0]  # 80 .. 5: prefixes
    return first["teacher_s"] + sum(r["runs"][0]["teacher_s"] or 0.0 for r in nested)


def _width(row: dict) -> str:
    """The row's width, and its whole-word rows (``--words``) where it has any."""
    words = row["runs"][0].get("words", 0)
    return f"{row.get('dims', 256)}" + (f" + {words:,} word rows" if words else "")


def _teacher(row: dict) -> str:
    return row.get("teacher", "torch fp32")
