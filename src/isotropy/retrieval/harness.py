"""The retrieval evaluation (layer 5.5): every pooling x calibration x way of searching, scored by qrels.

:func:`evaluate_retrieval` encodes the documents and the queries once per pooling (through the
vector cache), fits each calibration on the documents (``fit_on="target"``), on the queries
(``"queries"``) or on a sentence file, applies it to both sides, L2-normalises, searches with every
requested kind (:mod:`.kinds`) and scores the top 100 with trec_eval (:mod:`.metrics`).

Methods are the STS harness's (:mod:`isotropy.evaluation.methods`: raw, center, abtt, whitening,
whitening-K, the soft presets, ...) plus ``pca-K``: PCA to K dimensions without scaling (whitening's
rotation and truncation, power 0), to compare whitening's scaling with plain dimension reduction
and with quantisation at the same bytes per vector.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import ProgressBar
from ..encoders.cache import VectorCache, encode_cached
from ..errors import IsotropyError
from ..evaluation.fitting import FitData, fit_one
from ..storage.text import read_sentences
from ..transforms.methods import Method, parse_method
from .data import RetrievalTask, load_retrieval
from .kinds import check_kinds, search_kind
from .metrics import METRICS, mean_scores, run_from_ids, score_run

__all__ = ["evaluate_retrieval", "RetrievalResults", "parse_retrieval_method", "calibrate_pair"]

K = 100  # hits kept per query: recall@100 needs them all, nDCG@10 and MRR@10 the first 10


def parse_retrieval_method(name: str) -> Method:
    """A method of the STS harness, or ``pca`` / ``pca-K`` (whitening at power 0: rotation only)."""
    m = re.fullmatch(r"pca(?:-(\d+))?", name.strip().lower())
    if m:
        k = int(m.group(1)) if m.group(1) else None
        if k is not None and k < 1:
            raise IsotropyError(f"method {name}: K must be at least 1")
        params = (("n_components", k), ("power", 0.0)) if k is not None else (("power", 0.0),)
        return Method(name.strip().lower(), "whitening", params=params)
    method = parse_method(name)
    if method.kind == "auto":
        raise IsotropyError("--retrieval does not take method auto (its label-free choice is scored on STS pairs)")
    return method


@dataclass
class RetrievalResults:
    """One row per (pooling, method, kind): the metrics (x 100), size and time; ``settings`` and ``notes``."""

    rows: list[dict[str, Any]]
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "settings": self.settings, "notes": self.notes}

    def to_markdown(self) -> str:
        head = "| pooling | method | search | dim | bytes/vector | query ms | nDCG@10 | recall@100 | MRR@10 | top-10 vs exact |"
        lines = [head, "|" + "---|" * 4 + "---:|" * 6]
        for r in self.rows:
            vals = [_pct(r.get(m)) for m in METRICS]
            agree = "" if r.get("agree@10") is None else f"{100 * r['agree@10']:.1f}"
            lines.append(
                f"| {r['pooling']} | {r['method']} | {r['kind']} | {r.get('dim', '-')} | {_num(r.get('bytes_per_vector'))} | "
                f"{_num(r.get('query_ms'), 3)} | {' | '.join(vals)} | {agree} |"
            )
        s = self.settings
        caption = (
            f"{s['task']}: {s['documents']} documents, {s['queries']} queries; {s['model']} (max_length {s['max_length']}); "
            f"calibration fitted on {s['fit_on']}; metrics x 100 from trec_eval; query ms: median search time of one query."
        )
        return "\n".join(lines) + "\n\n" + caption + "".join(f"\n- {n}" for n in self.notes) + "\n"

    def save(self, out: str | os.PathLike, *, force: bool = False) -> tuple[Path, Path]:
        from ..evaluation import check_results_output
        from ..storage.artifacts import output_file, write_json

        out, md = check_results_output(out, force=force)
        write_json(out, self.to_dict(), kind="results", force=force)
        with output_file(md, "results-table", "w", force=force) as fh:
            fh.write(self.to_markdown())
        return out, md


def _pct(v: Any) -> str:
    return "-" if v is None or not np.isfinite(v) else f"{100 * v:.2f}"


def _num(v: Any, digits: int = 0) -> str:
    return "-" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"


def _normalise(X: np.ndarray) -> np.ndarray:
    X = np.ascontiguousarray(X, dtype=np.float32)
    n = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(n > 0, n, 1.0)


def calibrate_pair(transform: Any, docs: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Documents and queries through the fitted ``transform`` (None: raw), L2-normalised."""
    if transform is not None:
        docs, queries = transform.transform(docs), transform.transform(queries)
    return _normalise(docs), _normalise(queries)


def _fit_vectors(fit_on: str, task: RetrievalTask, encoder: Any, poolings: list[str], cache: VectorCache, vecs, progress):
    """``{pooling: rows to fit on}`` and a description."""
    if fit_on == "target":
        return {p: vecs[p][0] for p in poolings}, f"the {len(task.docs)} documents"
    if fit_on == "queries":
        return {p: vecs[p][1] for p in poolings}, f"the {len(task.queries)} queries"
    if fit_on in ("train", "others"):
        raise IsotropyError(f"--fit-on {fit_on} is for STS tasks; with --retrieval use target (the documents), queries or a file")
    sentences = read_sentences(fit_on)
    return encode_cached(encoder, sentences, poolings, cache, progress), f"{fit_on} ({len(sentences)} sentences)"


def _score_kinds(kinds, task, D, Q, raw_docs, transform, encoder) -> list[dict[str, Any]]:
    rows, exact = [], None
    for kind in kinds:
        found = search_kind(kind, D, Q, K, encoder=encoder, transform=transform, raw_docs=raw_docs)
        per_query = score_run(task.qrels, run_from_ids(task.query_ids, task.doc_ids, found.ranked))
        row = {"kind": kind, "dim": int(D.shape[1]), "bytes_per_vector": found.bytes_per_vector, "query_ms": found.query_ms}
        row.update(mean_scores(per_query))
        if kind == "exact":
            exact = found.ranked
        elif exact is not None:
            row["agree@10"] = float(np.mean([len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(exact, found.ranked)]))
        rows.append(row)
    return rows


def evaluate_retrieval(
    task: RetrievalTask | str | os.PathLike,
    *,
    model: str | os.PathLike | None = None,
    encoder: Any = None,
    poolings: Sequence[str] | None = None,
    methods: Sequence[str] = ("raw", "whitening"),
    fit_on: str = "target",
    kinds: Sequence[str] = ("exact",),
    max_length: int | None = None,
    batch_size: int = 64,
    shrinkage: float | str = 0.0,
    cache: bool | str | os.PathLike | VectorCache = True,
    show_progress: bool | None = None,
) -> RetrievalResults:
    """nDCG@10, recall@100 and MRR@10 of every pooling x method x search kind on a retrieval task.

    ``task``: a :class:`RetrievalTask` or a folder (BEIR, plain or SMART layout; :mod:`.data`).
    ``fit_on``: ``target`` (the documents), ``queries``, or a sentence file. ``kinds``: ``exact``,
    ``flat``, ``hnsw``, ``ivf``, ``sq8``, ``binary`` or ``all`` (:mod:`.kinds`). A calibration
    that cannot be fitted (too few rows) leaves its rows empty, with a note.
    """
    from ..encoders.poolings import parse_pooling

    t0 = time.perf_counter()
    task = task if isinstance(task, RetrievalTask) else load_retrieval(task)
    parsed = list({m.name: m for m in map(parse_retrieval_method, methods)}.values())
    kinds = check_kinds(list(kinds))
    if encoder is None:
        from ..encoders.encoder import Encoder
        from ..encoders.static import parse_cache

        with parse_cache(cache):  # --no-cache / --cache-dir apply to a word-vector file's parse cache too
            encoder = Encoder(model, pooling=(poolings[0] if poolings else None), max_length=max_length, batch_size=batch_size)
    pools = list(dict.fromkeys(parse_pooling(p).name for p in (poolings or [encoder.pooling])))
    for m in parsed:
        m.check(int(encoder.dim))
    vc = (
        cache
        if isinstance(cache, VectorCache)
        else VectorCache(**({"enabled": False} if cache is False else {} if cache is True else {"directory": cache}))
    )
    d = encode_cached(encoder, task.docs, pools, vc, show_progress)
    q = encode_cached(encoder, task.queries, pools, vc, show_progress)
    vecs = {p: (d[p], q[p]) for p in pools}
    fit_vecs, fit_desc = _fit_vectors(fit_on, task, encoder, pools, vc, vecs, show_progress)
    rows, notes, failures = [], [], {}
    with ProgressBar(len(pools) * len(parsed), show_progress, "calibrating and searching", min_total=2) as bar:
        for p in pools:
            data = FitData(lambda p=p: fit_vecs[p], f"{p} vectors of {fit_desc}")
            for m in parsed:
                t = None if m.kind == "raw" else m.build(shrinkage)
                if t is not None:
                    t = fit_one(t, data, f"{m.name} on {fit_desc} ({p})", failures, (p, m.name), "record", None)
                base = {"pooling": p, "method": m.name}
                if m.kind != "raw" and t is None:
                    rows.append({**base, "kind": "-", "error": failures[(p, m.name)]})
                    notes.append(f"{m.name} ({p}) could not be fitted on {fit_desc}: {failures[(p, m.name)].split(';')[0]}")
                else:
                    D, Q = calibrate_pair(t, *vecs[p])
                    rows += [{**base, **r} for r in _score_kinds(kinds, task, D, Q, vecs[p][0], t, encoder)]
                bar.advance()
    settings = {
        "task": task.name,
        "source": task.source,
        "documents": len(task.docs),
        "queries": len(task.queries),
        "queries_without_relevant_document": task.dropped_queries,
        "model": str(encoder.model_name),
        "max_length": int(encoder.max_length),
        "poolings": pools,
        "methods": [m.name for m in parsed],
        "kinds": kinds,
        "fit_on": fit_desc,
        "k": K,
        "total_s": time.perf_counter() - t0,
    }
    return RetrievalResults(rows, settings, notes)
