"""The benchmark harness: Spearman on the STS tasks for every pooling x calibration.

``evaluate(tasks, ...)`` encodes each task's unique sentences once (all requested
poolings from the same forward passes, cached on disk), fits each calibration
(whitening, soft whitening, flow) on the chosen corpus, and scores the cosine
similarity of every evaluation pair against the gold score:

* graded tasks (STS-B, SICK-R, STS-12..16, user ``score`` files): Spearman x 100;
  STS-12..16 pool every pair of the year into one correlation (as SentEval's "all"
  and the BERT-flow / BERT-whitening tables do) and keep each subset's figure too;
* 0/1 tasks (user ``label`` files): ROC-AUC x 100, plus accuracy at the cosine
  threshold tuned on another split (dev, else train) or, with one split only, by
  two-fold cross-fitting.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import re
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._io import IsotropyError, ProgressBar, atomic_file, check_output, save_npy, write_json
from .data import Pair, Task, load_tasks, read_sentences

CACHE_ENV = "ISOTROPY_CACHE"
CACHE_FORMAT = 1

# --------------------------------------------------------------------------- metrics


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two equally shaped matrices (float64)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    denom = np.maximum(na * nb, np.finfo(np.float64).tiny)
    return np.einsum("ij,ij->i", a, b) / denom


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation x 100 (scipy's, ties averaged); NaN when either side is constant."""
    from scipy.stats import spearmanr

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic) * 100.0


def roc_auc(scores: Sequence[float], labels: Sequence[float]) -> float:
    """ROC-AUC x 100 by the rank-sum (Mann-Whitney) formula, ties counted half.

    Written with scipy's ``rankdata`` rather than scikit-learn's ``roc_auc_score``
    because scikit-learn is an optional dependency; the test suite checks both agree.
    """
    from scipy.stats import rankdata

    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels) > 0.5
    n_pos = int(labels.sum())
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    u = ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg)) * 100.0


def best_threshold(scores: Sequence[float], labels: Sequence[float]) -> float:
    """The cosine threshold (predict 1 when ``score >= threshold``) with the best accuracy."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels) > 0.5
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], labels[order]
    n = len(s)
    # threshold at position i: everything from i on is predicted 1
    pos_at_or_above = np.concatenate([np.cumsum(y[::-1])[::-1], [0]])
    neg_below = np.concatenate([[0], np.cumsum(~y)])
    correct = pos_at_or_above + neg_below
    # a threshold can only sit between two distinct scores (or beyond either end)
    valid = np.ones(n + 1, dtype=bool)
    valid[1:n] = s[1:] > s[:-1]
    i = int(np.flatnonzero(valid)[np.argmax(correct[valid])])
    if i == 0:
        return float(s[0]) if n else 0.0
    if i == n:
        return float(np.nextafter(s[-1], np.inf))
    return float((s[i - 1] + s[i]) / 2.0)


def accuracy(scores: Sequence[float], labels: Sequence[float], threshold: float) -> float:
    """Accuracy x 100 of ``score >= threshold`` against 0/1 labels."""
    pred = np.asarray(scores, dtype=np.float64) >= threshold
    return float(np.mean(pred == (np.asarray(labels) > 0.5))) * 100.0


def cross_fit_accuracy(scores: Sequence[float], labels: Sequence[float], seed: int = 0) -> tuple[float, list[float]]:
    """Two-fold cross-fitted accuracy x 100 for a task with a single split.

    The pairs are shuffled (fixed ``seed``) and halved; the threshold tuned on one
    half is applied to the other and vice versa, so no pair is scored with a
    threshold that saw it. Returns (accuracy over all pairs, the two thresholds).
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels)
    perm = np.random.default_rng(seed).permutation(len(scores))
    halves = [perm[: len(perm) // 2], perm[len(perm) // 2 :]]
    correct = 0
    thresholds = []
    for tune, test in (halves, halves[::-1]):
        t = best_threshold(scores[tune], labels[tune])
        thresholds.append(t)
        correct += int(np.sum((scores[test] >= t) == (labels[test] > 0.5)))
    return correct / max(len(scores), 1) * 100.0, thresholds


# --------------------------------------------------------------------------- vector cache


def default_cache_dir() -> Path:
    """``$ISOTROPY_CACHE``, else ``~/.cache/isotropy``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "isotropy"


def sentences_digest(sentences: Sequence[str]) -> str:
    """A digest of the exact list of sentences (order and count included)."""
    h = hashlib.blake2b(digest_size=20)
    for s in sentences:
        b = s.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _file_digest(path: Path) -> str:
    """blake2b digest of a file's bytes (``OSError`` when it cannot be read)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, lambda: hashlib.blake2b(digest_size=20)).hexdigest()


class VectorCache:
    """Encoded sentence vectors on disk, one ``.npy`` (+ ``.json`` key file) per entry.

    An entry is keyed by the model fingerprint, the canonical pooling name,
    ``max_length`` and a digest of the sentences. Reads verify the stored key, a digest
    of the ``.npy`` file's bytes (recorded in the key file when it was written) and the
    array's shape and dtype, so a stale, truncated, foreign or overwritten file is never
    served: it is treated as a miss and rewritten. An entry written before digests were
    recorded is a miss too. Writes are atomic.
    """

    def __init__(self, directory: str | os.PathLike | None = None, enabled: bool = True) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.enabled = enabled
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(fingerprint: str, pooling: str, max_length: int, sentences: Sequence[str]) -> dict[str, Any]:
        return {
            "format": CACHE_FORMAT,
            "fingerprint": str(fingerprint),
            "pooling": str(pooling),
            "max_length": int(max_length),
            "sentences": sentences_digest(sentences),
            "rows": len(sentences),
        }

    @staticmethod
    def _name(key: dict[str, Any]) -> str:
        return hashlib.blake2b(json.dumps(key, sort_keys=True).encode(), digest_size=16).hexdigest()

    def paths(self, key: dict[str, Any]) -> tuple[Path, Path]:
        name = self._name(key)
        return self.directory / f"{name}.npy", self.directory / f"{name}.json"

    def get(self, key: dict[str, Any], dim: int | None = None) -> np.ndarray | None:
        if not self.enabled:
            return None
        npy, meta = self.paths(key)
        try:
            stored = json.loads(meta.read_text(encoding="utf-8"))
            if stored.get("key") != key:
                raise ValueError("key mismatch")
            if stored.get("digest") != _file_digest(npy):
                raise ValueError("content mismatch")  # overwritten in place (same shape) or no digest recorded
            arr = np.load(npy, allow_pickle=False)
            if arr.dtype != np.float32 or arr.ndim != 2 or arr.shape[0] != key["rows"]:
                raise ValueError("shape mismatch")
            if arr.shape[1] != stored.get("dim") or (dim is not None and arr.shape[1] != dim):
                raise ValueError("dim mismatch")
        except (OSError, ValueError, json.JSONDecodeError, AttributeError, EOFError):
            self.misses += 1
            return None
        self.hits += 1
        return arr

    def put(self, key: dict[str, Any], vectors: np.ndarray) -> None:
        if not self.enabled:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            npy, meta = self.paths(key)
            save_npy(npy, vectors)
            # the key file is written last: an entry without it is simply a miss
            with atomic_file(meta, "w") as fh:
                json.dump({"key": key, "dim": int(vectors.shape[1]), "digest": _file_digest(npy)}, fh, sort_keys=True)
        except OSError as exc:  # a full or read-only cache must not stop an evaluation
            print(f"warning: could not write the vector cache in {self.directory}: {exc}", file=sys.stderr)


def encode_cached(
    encoder: Any,
    sentences: Sequence[str],
    poolings: Sequence[str],
    cache: VectorCache | None = None,
    show_progress: bool | None = None,
) -> dict[str, np.ndarray]:
    """``{pooling: vectors}`` for ``sentences``, from ``cache`` where it has them; the
    poolings it lacks come from one ``encoder.encode_multi`` pass and are stored."""
    from .pooling import parse_pooling

    sentences = list(sentences)
    canon = {p: parse_pooling(p).name for p in poolings}
    out: dict[str, np.ndarray] = {}
    missing = []
    keys = {}
    fp = encoder.fingerprint() if cache is not None and cache.enabled else ""
    for p, c in canon.items():
        if cache is not None and cache.enabled:
            keys[p] = VectorCache.key(fp, c, encoder.max_length, sentences)
            got = cache.get(keys[p], encoder.dim)
            if got is not None:
                out[p] = got
                continue
        missing.append(p)
    if missing:
        fresh = encoder.encode_multi(sentences, missing, show_progress=show_progress)
        for p in missing:
            out[p] = fresh[p]
            if cache is not None and cache.enabled:
                cache.put(keys[p], fresh[p])
    return {p: out[p] for p in poolings}


# --------------------------------------------------------------------------- methods

METHOD_FORMS = ("raw", "whitening", "whitening-K", "soft-whitening-BETA", "flow")


@dataclass(frozen=True)
class Method:
    """A calibration named on the command line: ``raw``, ``whitening``, ``whitening-K``
    (keep K components), ``soft-whitening-BETA`` (whitening with ``power=BETA``) or ``flow``."""

    name: str
    kind: str  # raw | whitening | flow
    n_components: int | None = None
    power: float = 1.0

    def build(self, shrinkage: float | str = 0.0, flow_params: dict[str, Any] | None = None) -> Any:
        if self.kind == "whitening":
            from .whitening import Whitening

            return Whitening(n_components=self.n_components, power=self.power, shrinkage=shrinkage)
        if self.kind == "flow":
            from .flow import Flow

            return Flow(**(flow_params or {}))
        return None

    def min_fit_rows(self, dim: int, shrinkage: float | str, flow_params: dict[str, Any] | None = None) -> int:
        """Fewest fitting sentences for a well-defined fit of ``dim``-dimensional vectors."""
        if self.kind == "raw":
            return 0
        if self.kind == "whitening" and shrinkage == 0 and self.power > 0:
            # a covariance from n centred rows has rank n - 1: K kept directions need n >= K + 1
            return (self.n_components or dim) + 1
        if self.kind == "flow":
            # more rows than dimensions, and one batch (see Flow._check_fit_input for the measurements)
            from .flow import Flow

            batch = (flow_params or {}).get("batch_size", Flow().batch_size)
            return max(dim + 1, batch if isinstance(batch, int) else 0)  # a bad batch_size is Flow's to name
        return 2

    def fit_hint(self) -> str:
        """What to do when there are too few fitting sentences (for the message of :meth:`min_fit_rows`)."""
        if self.kind == "flow":
            return "add sentences (a flow needs more sentences than dimensions)"
        return "add sentences, keep fewer components with whitening-K, or shrink the covariance (shrinkage=0.1, --shrinkage 0.1)"


def parse_method(name: str) -> Method:
    """Parse a method name; unknown names list the valid forms."""
    raw = name.strip()
    n = raw.lower()
    if n in ("raw", "none", "identity"):
        return Method("raw", "raw")
    if n == "whitening":
        return Method("whitening", "whitening")
    if n == "flow":
        return Method("flow", "flow")
    m = re.fullmatch(r"whitening-(\d+)", n)
    if m and int(m.group(1)) >= 1:
        return Method(n, "whitening", n_components=int(m.group(1)))
    m = re.fullmatch(r"soft-whitening-(\d+(?:\.\d*)?|\.\d+)", n)
    if m and 0 <= float(m.group(1)) <= 1:
        return Method(f"soft-whitening-{float(m.group(1)):g}", "whitening", power=float(m.group(1)))
    raise IsotropyError(
        f"unknown method {name!r}; valid methods: raw, whitening, whitening-K (K components, e.g. whitening-256), "
        f"soft-whitening-BETA (BETA in [0, 1], e.g. soft-whitening-0.5), flow"
    )


# --------------------------------------------------------------------------- results


@dataclass
class TaskScore:
    """One task's figure for one row. ``score`` is the table's number: Spearman x 100
    (graded tasks) or ROC-AUC x 100 (0/1 tasks)."""

    task: str
    metric: str
    score: float
    n_pairs: int
    fit_on: str
    subsets: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ResultRow:
    model: str
    pooling: str
    method: str
    scores: dict[str, TaskScore]
    fit_seconds: float = 0.0

    @property
    def avg(self) -> float:
        vals = [s.score for s in self.scores.values()]
        return float(np.mean(vals)) if vals else float("nan")


def _fmt(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


@dataclass
class Results:
    """Every pooling x method row, with the settings and timings that produced them."""

    rows: list[ResultRow]
    tasks: list[str]
    metrics: dict[str, str]
    settings: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def row(self, pooling: str, method: str) -> ResultRow:
        for r in self.rows:
            if r.pooling == pooling and r.method == method:
                return r
        raise KeyError((pooling, method))

    def score(self, pooling: str, method: str, task: str) -> float:
        return self.row(pooling, method).scores[task].score

    def caption(self) -> str:
        s = self.settings
        parts = [
            f"Spearman x 100 of cosine similarity vs gold (model {s.get('model')}, max_length {s.get('max_length')})",
            f"transform fitted on: {s.get('fit_on_description')}",
        ]
        if any(m != "raw" and "whitening" in m for m in s.get("methods", [])):
            parts.append(f"whitening shrinkage: {s.get('shrinkage')}")
        if any(t.startswith("STS-1") for t in self.tasks):
            parts.append("STS-12..16: all pairs of the year pooled into one correlation (subsets in the JSON)")
        if any(m == "binary" for m in self.metrics.values()):
            binary = [t for t, m in self.metrics.items() if m == "binary"]
            parts.append(f"{', '.join(binary)}: ROC-AUC x 100 (0/1 labels)")
        parts.extend(self.notes)
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "metrics": self.metrics,
            "settings": self.settings,
            "timings": self.timings,
            "notes": self.notes,
            "rows": [
                {
                    "model": r.model,
                    "pooling": r.pooling,
                    "method": r.method,
                    "avg": r.avg,
                    "fit_seconds": r.fit_seconds,
                    "scores": {t: asdict(sc) for t, sc in r.scores.items()},
                }
                for r in self.rows
            ],
        }

    def to_markdown(self, caption: bool = True) -> str:
        head = ["model", "pooling", "method", *self.tasks, "avg"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(self.tasks) + 1)]
        for r in self.rows:
            cells = [r.model, r.pooling, r.method, *(_fmt(r.scores[t].score) for t in self.tasks), _fmt(r.avg)]
            lines.append("| " + " | ".join(cells) + " |")
        table = "\n".join(lines)
        return f"{table}\n\n{self.caption()}.\n" if caption else table + "\n"

    def rich_table(self) -> Any:
        from rich.table import Table

        table = Table(caption=self.caption(), caption_justify="left")
        for col in ("model", "pooling", "method"):
            table.add_column(col)
        for t in [*self.tasks, "avg"]:
            table.add_column(t, justify="right")
        best = {t: max((r.scores[t].score for r in self.rows if not math.isnan(r.scores[t].score)), default=None) for t in self.tasks}
        for r in self.rows:
            cells = []
            for t in self.tasks:
                v = r.scores[t].score
                cells.append(f"[bold]{_fmt(v)}[/bold]" if best[t] is not None and v == best[t] and len(self.rows) > 1 else _fmt(v))
            table.add_row(r.model, r.pooling, r.method, *cells, _fmt(r.avg))
        return table

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Results":
        """Rebuild results from :meth:`to_dict` output (e.g. a JSON file written by :meth:`save`)."""
        try:
            rows = [
                ResultRow(
                    r["model"], r["pooling"], r["method"],
                    {t: TaskScore(**sc) for t, sc in r["scores"].items()},
                    float(r.get("fit_seconds", 0.0)),
                )
                for r in data["rows"]
            ]
            return cls(
                rows=rows, tasks=list(data["tasks"]), metrics=dict(data["metrics"]), settings=dict(data["settings"]),
                timings=dict(data.get("timings", {})), notes=list(data.get("notes", [])),
            )
        except (KeyError, TypeError) as exc:
            raise IsotropyError(f"not an isotropy results file: missing or malformed {exc}") from None

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Results":
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise IsotropyError(f"cannot read results from {path}: {exc}") from None
        return cls.from_dict(data)

    def save(self, out: str | os.PathLike, *, force: bool = False) -> tuple[Path, Path]:
        """Write ``out`` (JSON) and the markdown table beside it (same name, ``.md``); atomic.

        Existing files are overwritten only when they are isotropy results, unless ``force``.
        """
        out, md = check_results_output(out, force=force)
        write_json(out, self.to_dict(), kind="results", force=force)
        with atomic_file(md, "w", kind="results-table", force=force) as fh:
            fh.write(self.to_markdown())
        return out, md


def check_results_output(
    out: str | os.PathLike, *, force: bool = False, inputs: Sequence[Any] = ()
) -> tuple[Path, Path]:
    """The JSON path and the markdown path beside it, checked before any work (see :func:`isotropy._io.check_output`)."""
    out = check_output(out, "results", force=force, inputs=inputs, option="--out")
    md = out.with_suffix(".md") if out.suffix.lower() != ".md" else out.with_name(out.name + ".md")
    check_output(md, "results-table", force=force, inputs=inputs, option="--out (its .md table)")
    return out, md


# --------------------------------------------------------------------------- evaluation


def _pair_sides(pairs: Sequence[Pair]) -> list[str]:
    """Both sentences of every pair, in order, duplicates kept (what the papers fit on)."""
    return [s for p in pairs for s in (p.s1, p.s2)]


def _score_task(
    task: Task, cos_by_split: dict[str, np.ndarray], fit_on: str
) -> TaskScore:
    eval_pairs = task.eval_pairs
    cos = np.concatenate([cos_by_split[s] for s in task.eval_splits])
    gold = np.array([p.score for p in eval_pairs], dtype=np.float64)
    subsets: dict[str, float] = {}
    names = list(dict.fromkeys(p.subset for p in eval_pairs))
    if task.metric == "binary":
        auc = roc_auc(cos, gold)
        others = [s for s in ("dev", "train") if s in task.splits and s not in task.eval_splits]
        if others:
            tune = others[0]
            t_cos = cos_by_split[tune]
            t_gold = np.array([p.score for p in task.splits[tune]])
            thr = best_threshold(t_cos, t_gold)
            extra = {"roc_auc": auc, "accuracy": accuracy(cos, gold, thr), "threshold": thr, "threshold_tuned_on": tune}
        else:
            acc, thrs = cross_fit_accuracy(cos, gold)
            extra = {"roc_auc": auc, "accuracy": acc, "threshold": thrs, "threshold_tuned_on": "2-fold cross-fitting"}
        return TaskScore(task.name, "binary", auc, len(eval_pairs), fit_on, {}, extra)
    if len(names) > 1:
        sub = np.array([p.subset for p in eval_pairs])
        for name in names:
            m = sub == name
            subsets[name] = spearman(cos[m], gold[m])
    extra = {"subset_mean": float(np.mean(list(subsets.values())))} if subsets else {}
    return TaskScore(task.name, "spearman", spearman(cos, gold), len(eval_pairs), fit_on, subsets, extra)


def _fit_pairs(task: Task, fit_mode: str) -> list[Pair]:
    """The pairs a transform is fitted on for ``task`` (``fit_mode`` target or train)."""
    if fit_mode == "train" and task.train_split is not None:
        return task.splits[task.train_split]
    return task.pairs()


def _unscorable(task: Task) -> str | None:
    """Why no score can be computed from ``task``'s gold column, whatever the vectors (None: it can).

    Spearman of a constant column is undefined (scipy returns NaN, shown as "-"), and so is
    ROC-AUC with one class; saying so before any encoding beats a table of dashes.
    """
    gold = np.array([p.score for p in task.eval_pairs], dtype=np.float64)
    where = f"task {task.name}" + (f" ({task.source})" if task.source and task.source != task.name else "")
    splits = "+".join(task.eval_splits)
    if len(gold) < 2:
        return f"{where} has {len(gold)} evaluated pair{'s' if len(gold) != 1 else ''} ({splits}); a correlation needs at least 2"
    if np.ptp(gold) == 0:
        what = "label" if task.metric == "binary" else "gold score"
        need = "both 0 and 1 labels" if task.metric == "binary" else "gold scores that differ"
        return (
            f"{where}: all {len(gold)} {what}s of its evaluated pairs ({splits}) are {gold[0]:g}, so no "
            f"{'ROC-AUC' if task.metric == 'binary' else 'Spearman correlation'} can be computed; it needs {need}"
        )
    return None


def _fit(
    transform: Any, X: np.ndarray, where: str, failures: dict, key: tuple, errors: str, warned: dict | None = None
) -> Any:
    """Fit ``transform``; a failure raises (``errors="raise"``) or is recorded and returns None.
    Warnings (e.g. whitening dropping directions without variance) are recorded in ``warned``."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # the flow's own progress bar would clash with the fitting bar (rich shows one live display)
            if "show_progress" in inspect.signature(transform.fit).parameters:
                fitted = transform.fit(X, show_progress=False)
            else:
                fitted = transform.fit(X)
        if caught and warned is not None:
            warned[key] = "; ".join(dict.fromkeys(str(w.message) for w in caught))
        return fitted
    except IsotropyError as exc:
        if errors == "raise":
            raise IsotropyError(f"fitting {where}: {exc}") from None
        failures[key] = str(exc)
        print(f"warning: fitting {where} failed, its cell is left empty: {exc}", file=sys.stderr)
        return None


def evaluate(
    tasks: Sequence[Task | str] | None = None,
    *,
    data: str | os.PathLike | None = None,
    model: str | os.PathLike | None = None,
    poolings: Sequence[str] | None = None,
    methods: Sequence[str] = ("raw", "whitening"),
    fit_on: str = "target",
    max_length: int | None = 64,
    batch_size: int = 64,
    shrinkage: float | str = 0.0,
    flow_params: dict[str, Any] | None = None,
    cache: bool | str | os.PathLike | VectorCache = True,
    encoder: Any = None,
    show_progress: bool | None = None,
    errors: str = "raise",
) -> Results:
    """Score every pooling x method on every task.

    Parameters
    ----------
    tasks:
        :class:`~isotropy.data.Task` objects, or task names read from ``data``
        (None or ``["all"]``: every task there; see :func:`isotropy.data.load_tasks`).
    model, max_length, batch_size:
        Passed to :class:`isotropy.Encoder` (ignored when ``encoder`` is given).
    poolings:
        Poolings to compare (default: the model's own).
    methods:
        ``raw``, ``whitening``, ``whitening-K``, ``soft-whitening-BETA``, ``flow``.
    fit_on:
        ``target``: fit on every pair of the task (all splits, both sentences, as
        both papers do); ``train``: fit on the task's training split (a task without
        one falls back to ``target``, stated in the caption); anything else is a
        text file of sentences (one a line) fitted once and used for every task.
    shrinkage:
        Passed to :class:`isotropy.Whitening`: 0 (default, the papers' exact
        whitening; directions without variance are dropped with a warning, recorded
        in the results), a float in [0, 1] or ``"auto"`` (Ledoit-Wolf).
    cache:
        True (default folder, ``$ISOTROPY_CACHE`` or ``~/.cache/isotropy``), False,
        a folder, or a :class:`VectorCache`.
    errors:
        ``"raise"`` (default): a transform that cannot be fitted (singular covariance,
        diverged flow) stops with one clear error; ``"record"``: its cells become NaN
        (``-`` in the tables), the message is kept in the JSON and the caption.
    """
    t_start = time.perf_counter()
    if errors not in ("raise", "record"):
        raise IsotropyError(f"errors must be 'raise' or 'record', got {errors!r}")
    failures: dict[tuple[str, str, str], str] = {}
    warned: dict[tuple[str, str, str], str] = {}
    parsed = []
    for m in methods:
        pm = parse_method(m)
        if pm.name not in [p.name for p in parsed]:
            parsed.append(pm)
    if not parsed:
        raise IsotropyError("no method given; valid methods: " + ", ".join(METHOD_FORMS))
    if any(m.kind == "whitening" for m in parsed):
        from .whitening import parse_shrinkage

        shrinkage = parse_shrinkage(shrinkage)
    fit_mode = fit_on if fit_on in ("target", "train") else "file"
    fit_file_sentences: list[str] | None = None
    if fit_mode == "file":
        path = Path(fit_on)
        if not path.is_file():
            raise IsotropyError(f"--fit-on {fit_on!r} is neither 'target', 'train' nor an existing sentence file")
        if any(m.kind != "raw" for m in parsed):
            fit_file_sentences = [s for s in read_sentences(path) if s.strip()]
            if not fit_file_sentences:
                raise IsotropyError(f"--fit-on {path} has no non-blank lines to fit on")

    if tasks is None or any(isinstance(t, str) for t in tasks):
        names = [t for t in (tasks or []) if isinstance(t, str)]
        task_list = load_tasks(data, names) + [t for t in (tasks or []) if isinstance(t, Task)]
    else:
        task_list = list(tasks)
    if not task_list:
        raise IsotropyError("no task to evaluate")
    # a gold column that cannot be correlated (all scores equal) fails now, before any encoding; in
    # a run of several tasks the others are still evaluated and the caption says which was skipped
    skipped = [(t, why) for t in task_list if (why := _unscorable(t)) is not None]
    if len(skipped) == len(task_list):
        why = skipped[0][1]
        others = f" (and {len(skipped) - 1} other tasks likewise)" if len(skipped) > 1 else ""
        raise IsotropyError(f"{why}{others}; nothing to evaluate")
    task_list = [t for t in task_list if all(t is not s for s, _ in skipped)]
    for _, why in skipped:
        print(f"warning: skipped {why}", file=sys.stderr)

    if isinstance(cache, VectorCache):
        vcache = cache
    elif cache is True:
        vcache = VectorCache()
    elif cache is False or cache is None:
        vcache = VectorCache(enabled=False)
    else:
        vcache = VectorCache(cache)

    if encoder is None:
        from .encoding import Encoder

        encoder = Encoder(model, pooling=(poolings[0] if poolings else None), max_length=max_length, batch_size=batch_size)
    from .pooling import parse_pooling

    pool_names = list(dict.fromkeys(parse_pooling(p).name for p in (poolings or [encoder.pooling])))
    dim = int(encoder.dim)
    for m in parsed:
        if m.n_components is not None and m.n_components > dim:
            raise IsotropyError(f"{m.name} keeps {m.n_components} components but the model's vectors have {dim} dimensions")

    timings = {"encode_s": 0.0, "fit_s": 0.0}
    # ---- the fitting corpus shared by every task (--fit-on FILE)
    file_vecs: dict[str, np.ndarray] = {}
    if fit_file_sentences is not None:
        for m in parsed:
            need = m.min_fit_rows(dim, shrinkage, flow_params)
            if len(fit_file_sentences) < need:
                raise IsotropyError(
                    f"--fit-on {fit_on} has {len(fit_file_sentences)} sentences; {m.name} of {dim}-dimensional vectors "
                    f"needs at least {need} ({m.fit_hint()})"
                )
        t0 = time.perf_counter()
        file_vecs = encode_cached(encoder, fit_file_sentences, pool_names, vcache, show_progress)
        timings["encode_s"] += time.perf_counter() - t0

    fit_desc: dict[str, str] = {}
    for task in task_list:
        if fit_mode == "file":
            fit_desc[task.name] = f"file {Path(fit_on).name} ({len(fit_file_sentences or [])} sentences)"
        elif fit_mode == "train" and task.train_split is not None:
            fit_desc[task.name] = f"train split ({len(task.splits[task.train_split])} pairs)"
        elif fit_mode == "train":
            fit_desc[task.name] = "target (no train split)"
        else:
            fit_desc[task.name] = "target"

    # too few sentences to fit a method on a task: said before any encoding
    if fit_mode != "file":
        for task in task_list:
            n_fit = len(_pair_sides(_fit_pairs(task, fit_mode)))
            for m in parsed:
                need = m.min_fit_rows(dim, shrinkage, flow_params)
                if n_fit < need:
                    raise IsotropyError(
                        f"task {task.name} has {n_fit} sentences to fit {m.name} on ({fit_desc[task.name]}); "
                        f"{dim}-dimensional vectors need at least {need} ({m.fit_hint()})"
                    )

    rows = {(p, m.name): ResultRow(str(encoder.model_name), p, m.name, {}) for p in pool_names for m in parsed}
    file_transforms: dict[tuple[str, str], Any] = {}
    n_fits = sum(1 for m in parsed if m.kind != "raw") * len(pool_names) * (1 if fit_mode == "file" else len(task_list))
    # every task is encoded before any fit, so the encoder's progress bar and the
    # fitting bar never overlap (rich shows one live display at a time)
    encoded: dict[str, dict[str, np.ndarray]] = {}
    for task in task_list:
        t0 = time.perf_counter()
        encoded[task.name] = encode_cached(encoder, task.sentences(), pool_names, vcache, show_progress)
        timings["encode_s"] += time.perf_counter() - t0
    bar = ProgressBar(n_fits, show_progress, "fitting", min_total=2)
    try:
        for task in task_list:
            sentences = task.sentences()
            vecs = encoded.pop(task.name)
            index = {s: i for i, s in enumerate(sentences)}
            split_idx = {
                s: (np.array([index[p.s1] for p in pairs], dtype=np.int64), np.array([index[p.s2] for p in pairs], dtype=np.int64))
                for s, pairs in task.splits.items()
            }
            fit_rows = np.array([index[s] for s in _pair_sides(_fit_pairs(task, fit_mode))], dtype=np.int64)
            for p in pool_names:
                X = vecs[p]
                for m in parsed:
                    if m.kind == "raw":
                        Y = X
                    else:
                        t1 = time.perf_counter()
                        if fit_mode == "file":
                            if (p, m.name) not in file_transforms:
                                file_transforms[(p, m.name)] = _fit(
                                    m.build(shrinkage, flow_params), file_vecs[p], f"{m.name} on {p} vectors of {fit_on}",
                                    failures, ("", p, m.name), errors, warned,
                                )
                                bar.advance(description=f"fitted {m.name} ({p})")
                            transform = file_transforms[(p, m.name)]
                        else:
                            transform = _fit(
                                m.build(shrinkage, flow_params), X[fit_rows], f"{m.name} on {task.name} ({p})",
                                failures, (task.name, p, m.name), errors, warned,
                            )
                            bar.advance(description=f"fitted {m.name} on {task.name} ({p})")
                        if transform is None:
                            Y = None
                        else:
                            Y = np.asarray(transform.transform(X))
                        dt = time.perf_counter() - t1
                        rows[(p, m.name)].fit_seconds += dt
                        timings["fit_s"] += dt
                    if Y is None:
                        rows[(p, m.name)].scores[task.name] = TaskScore(
                            task.name, task.metric, float("nan"), len(task.eval_pairs), fit_desc[task.name],
                            extra={"error": failures[(task.name if fit_mode != "file" else "", p, m.name)]},
                        )
                        continue
                    cos_by_split = {s: cosine_rows(Y[a], Y[b]) for s, (a, b) in split_idx.items()}
                    score = _score_task(task, cos_by_split, fit_desc[task.name])
                    w = warned.get((task.name if fit_mode != "file" else "", p, m.name))
                    if w:
                        score.extra["warning"] = w
                    rows[(p, m.name)].scores[task.name] = score
    finally:
        bar.close()

    descs = list(dict.fromkeys(fit_desc.values()))
    if fit_mode == "train":
        fallback = [t for t, d in fit_desc.items() if d.startswith("target")]
        fit_description = "each task's train split" + (
            f" ({', '.join(fallback)}: no train split, fitted on the whole task instead)" if fallback else ""
        )
    elif fit_mode == "file":
        fit_description = descs[0]
    else:
        fit_description = "target (every pair of the task, all splits)"
    timings["total_s"] = time.perf_counter() - t_start
    settings = {
        "model": str(encoder.model_name),
        "max_length": int(encoder.max_length),
        "dim": dim,
        "poolings": pool_names,
        "methods": [m.name for m in parsed],
        "fit_on": fit_on,
        "fit_on_description": fit_description,
        "shrinkage": shrinkage,
        "cache": str(vcache.directory) if vcache.enabled else None,
        "cache_hits": vcache.hits,
        "tasks": {
            t.name: {
                "source": t.source,
                "eval_splits": list(t.eval_splits),
                "pairs": t.counts(),
                "unique_sentences": len(t.sentences()),
                "fit_on": fit_desc[t.name],
            }
            for t in task_list
        },
    }
    if flow_params:
        settings["flow_params"] = dict(flow_params)
    notes = [f"skipped {why}" for _, why in skipped]
    notes += [
        f"{m} on {t + ' ' if t else ''}{p} could not be fitted ({msg.split(';')[0]})" for (t, p, m), msg in failures.items()
    ]
    by_method: dict[str, list[tuple[str, str, str]]] = {}
    for key, msg in warned.items():
        by_method.setdefault(key[2], []).append((key[0], key[1], msg))
    for m, items in by_method.items():
        t, p, msg = items[0]
        notes.append(
            f"{m} warned on {len(items)} of its fits, e.g. {t + ' ' if t else ''}{p}: {msg.split(';')[0]} "
            f"(every warning is in the JSON)"
        )
    return Results(
        notes=notes,
        rows=[rows[(p, m.name)] for p in pool_names for m in parsed],
        tasks=[t.name for t in task_list],
        metrics={t.name: t.metric for t in task_list},
        settings=settings,
        timings=timings,
    )
