"""`--for search`: label-free auto's rule for search, read off a tuning half of Cranfield's queries, measured on the rest.

Cranfield 1400 (../shared/data/retrieval/cranfield): the queries are split once by the library's ``SEARCH_SPLIT`` (a
seeded permutation: the first half tunes, the other is held out; no reported figure of auto reads a tuning query). For
each zoo entry (GloVe 6B 50d mean and SIF, the default model distilled to 384 and 256 dims, the default model with its
own pooling and cls), every candidate of auto's default set is fitted on the documents (no label) and scored by the
nDCG@10 of an exact search of each query. The library's ``SEARCH_RULE`` was read off the tuning queries
(``tuned_search_rule`` at commit b31d6d7; docs/AUTO.md, 'What we tried'); the held-out table scores it.

    nice -n 5 .venv/bin/python bench/auto_search.py [--render-only]

Raw numbers to bench/results/auto_search.json, the tables to docs/AUTO.md (section ``auto-search``).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _render  # noqa: E402

from _report import DATA, ROOT, Section, load_json, machine, write_json  # noqa: E402

OUT = ROOT / "bench" / "results" / "auto_search.json"
SECTION = Section("AUTO.md", "auto-search", _render.auto_search, OUT)
ZOO = [  # (retrieval.py's model key, pooling, label)
    ("glove-6b-50d", "last-avg", "glove-6b-50d/mean"),
    ("glove-6b-50d", "sif", "glove-6b-50d/sif"),
    ("distilled-384", "last-avg", "m2v-384/mean"),
    ("distilled-256", "last-avg", "m2v-256/mean"),
    ("default", "last-avg", "minilm/last-avg"),
    ("default", "cls", "minilm/cls"),
]


def entry(key: str, pooling: str, label: str, task) -> dict:
    """Every candidate's per-query nDCG@10 on one zoo entry (candidates fitted on the documents)."""
    from retrieval import _encoder, _per_query_ndcg

    from isotropy.encoders.cache import VectorCache, encode_cached
    from isotropy.selection import Selector
    from isotropy.selection.signals import encoder_kind

    t0 = time.perf_counter()
    encoder, _, _ = _encoder(key, [pooling])
    cache = VectorCache()
    D = np.asarray(encode_cached(encoder, task.docs, [pooling], cache, True)[pooling], dtype=np.float64)
    Q = np.asarray(encode_cached(encoder, task.queries, [pooling], cache, True)[pooling], dtype=np.float64)
    selector = Selector(D, seed=0, source=f"the {len(D)} documents")
    per = {name: (100 * _per_query_ndcg(t, Q, D, task)).tolist() for name, t in selector.transforms.items()}
    return {"label": label, "kind": encoder_kind(encoder), "per_query": per, "seconds": time.perf_counter() - t0}


def run(only: list[str] | None, old: dict | None) -> dict:
    """Every zoo entry (``only``: those labels, the others kept from ``old``), in the zoo's order."""
    from isotropy.retrieval import load_retrieval
    from isotropy.selection.signals import SEARCH_RULE, SEARCH_SPLIT, search_split

    task = load_retrieval(DATA / "retrieval" / "cranfield")
    load = [os.getloadavg()]
    kept = {e["label"]: e for e in (old or {}).get("entries", [])}
    for k, p, label in ZOO:
        if only is None or label in only:
            kept[label] = entry(k, p, label, task)
            print(f"{label}: {kept[label]['seconds']:.0f} s", flush=True)
    entries = [kept[label] for _, _, label in ZOO if label in kept]
    load.append(os.getloadavg())
    tune, held = search_split(len(task.query_ids))
    return {
        "split": {**SEARCH_SPLIT, "tune": tune.tolist(), "held": held.tolist()},
        "margin": SEARCH_RULE["margin"],
        "entries": entries,
        "loadavg": [list(x) for x in load],
        "machine": machine(),
    }


def main() -> None:
    ap = SECTION.parser(__doc__)
    ap.add_argument("--entry", action="append", help="rerun only these zoo entries (labels), keep the others stored")
    args = ap.parse_args()
    if SECTION.rendered(args):
        return
    res = run(args.entry, load_json(OUT) if OUT.is_file() else None)
    if len(res["entries"]) < len(ZOO):  # save the entries run so far, render once all are
        write_json(OUT, res, indent=None)
        print(f"{len(res['entries'])} of {len(ZOO)} entries stored; rendering once all are", flush=True)
        return
    SECTION.publish(res, args, indent=None)


if __name__ == "__main__":
    main()
