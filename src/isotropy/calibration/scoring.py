"""The model card's figures: anisotropy before and after, and ``--eval``: base model vs calibrated.

``--eval DATA`` runs :func:`isotropy.evaluation.evaluate` twice on the same pairs, the same
encoder and the same forward passes (the base vectors are computed once): once on the base
model's vectors (method raw), once on the calibrated ones -- the transform fitted on the
corpus, not refitted on the task, so the figure is the calibrated model's.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..transforms.base import AffineTransform

__all__ = ["anisotropy", "check_min_gain", "evaluate_both", "float32_gap", "float32_warning", "regression_warning", "regressions"]

# Above this share of the output's scale, the float32 Dense is worth a warning (module docstring).
FLOAT32_WARN = 1e-3


def anisotropy(fitted: Any) -> dict[str, dict[str, float]]:
    """``{"before"|"after": {"average_cosine", "isoscore"}}`` (how each is computed: :mod:`.fit`)."""
    from ..analysis.metrics import average_cosine, isoscore

    t, sample = fitted.transform, fitted.sample
    after = np.asarray(t.transform(sample), dtype=np.float64)
    out = {
        "before": {"average_cosine": average_cosine(sample)["mean"]},
        "after": {"average_cosine": average_cosine(after)["mean"]},
    }
    if fitted.moments is not None and isinstance(t, AffineTransform):
        cov = fitted.moments.covariance()
        A, _ = t.affine_()
        out["before"]["isoscore"] = isoscore(eigenvalues=np.linalg.eigvalsh(cov))
        out["after"]["isoscore"] = isoscore(eigenvalues=np.linalg.eigvalsh(A.T @ cov @ A))
        out["isoscore_rows"] = {"n": int(fitted.moments.n)}
    else:
        out["before"]["isoscore"] = isoscore(sample)
        out["after"]["isoscore"] = isoscore(after)
        out["isoscore_rows"] = {"n": int(sample.shape[0])}
    out["cosine_rows"] = {"n": int(sample.shape[0])}
    return out


def float32_gap(fitted: Any) -> dict[str, float] | None:
    """How far the stock ``Dense`` modules (float32, as sentence-transformers runs it) is from the float64
    calibration on the corpus sample: ``{"max_abs_diff", "max_abs_value", "rows"}`` (None: not affine).

    Computed as the Dense modules compute it (centre, then multiply, in float32). A whitening of
    an ill-conditioned covariance (eigenvalues spanning many decades) magnifies float32 rounding;
    shrinkage bounds the spread."""
    import torch

    t, X = fitted.transform, fitted.sample
    if not isinstance(t, AffineTransform) or X.shape[0] == 0:
        return None
    shift, kernel = t.shift_kernel_()
    want = (np.asarray(X, dtype=np.float64) - shift) @ kernel
    with torch.no_grad():  # the stock Dense modules' float32 steps (integrations.st_stock._affine_dense)
        centred = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32)) - torch.tensor(shift, dtype=torch.float32)
        got = (centred @ torch.tensor(kernel, dtype=torch.float32)).numpy()
    return {"max_abs_diff": float(np.abs(got - want).max()), "max_abs_value": float(np.abs(want).max()), "rows": int(X.shape[0])}


def float32_warning(gap: dict[str, float] | None) -> str | None:
    if gap is None or gap["max_abs_diff"] <= FLOAT32_WARN * gap["max_abs_value"]:
        return None
    return (
        f"in float32 (as sentence-transformers runs the Dense modules) the calibration differs from its float64 "
        f"values by up to {gap['max_abs_diff']:.2g} (largest entry {gap['max_abs_value']:.3g}) on the corpus: its "
        "covariance is ill-conditioned; --shrinkage auto or a smaller --n-components makes it agree to float32 precision"
    )


class _Memo:
    """The base encoder, each sentence list encoded once (the two evaluations share the forward passes)."""

    def __init__(self, base: Any) -> None:
        self._base = base
        self._done: dict[tuple[str, str], np.ndarray] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)

    def encode_multi(self, sentences, poolings, show_progress=None):
        sentences = list(sentences)
        key = hashlib.blake2b("\n".join(sentences).encode(), digest_size=16).hexdigest()
        missing = [p for p in poolings if (key, p) not in self._done]
        if missing:
            fresh = self._base.encode_multi(sentences, missing, show_progress=show_progress)
            self._done.update({(key, p): v for p, v in fresh.items()})
        return {p: self._done[(key, p)] for p in poolings}


class _Calibrated:
    """What the calibrated model computes, as the harness asks an encoder for it."""

    def __init__(self, memo: _Memo, transform: Any) -> None:
        self._memo, self._transform = memo, transform
        self.dim = int(transform.n_features_out_)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memo, name)

    def encode_multi(self, sentences, poolings, show_progress=None):
        raw = self._memo.encode_multi(sentences, poolings, show_progress=show_progress)
        return {p: np.asarray(self._transform.transform(v), dtype=np.float32) for p, v in raw.items()}

    def fingerprint(self) -> str:
        return f"{self._memo.fingerprint()}+{self._transform.kind}-{id(self._transform):x}"


def evaluate_both(encoder: Any, transform: Any, data: Any, show_progress: bool | None = None) -> dict[str, Any]:
    """``{"tasks": {name: {"metric", "pairs", "split", "base", "calibrated"}}, "data": ...}``: scores x 100
    (``split``: the evaluated splits, joined by ``+``)."""
    from ..evaluation import evaluate

    memo = _Memo(encoder)
    runs, splits = {}, {}
    for label, enc in (("base", memo), ("calibrated", _Calibrated(memo, transform))):
        results = evaluate(None, data=data, encoder=enc, methods=["raw"], cache=False, show_progress=show_progress)
        runs[label] = results.rows[0].scores
        splits = {name: "+".join(t.get("eval_splits") or ()) for name, t in (results.settings.get("tasks") or {}).items()}
    tasks = {}
    for name, base in runs["base"].items():
        tasks[name] = {
            "metric": base.metric,
            "pairs": int(base.n_pairs),
            "split": splits.get(name) or "test",
            "base": float(base.score),
            "calibrated": float(runs["calibrated"][name].score),
        }
    return {"tasks": tasks}


def regressions(ev: dict[str, Any] | None, selection: Any) -> list[dict[str, Any]]:
    """Every score the calibration lowered: ``[{"on", "metric", "base", "calibrated", "change"}]`` (points x 100).

    From ``--eval`` (each task, base model vs calibrated) and ``--dev`` (auto's few-label mode:
    raw's dev score vs the chosen candidate's)."""
    out = []
    for name, row in ((ev or {}).get("tasks") or {}).items():
        if row["calibrated"] < row["base"]:
            out.append(
                {
                    "on": f"--eval {ev.get('data', '')}: {name}",
                    "metric": row["metric"],
                    "base": row["base"],
                    "calibrated": row["calibrated"],
                }
            )
    if selection is not None and selection.mode == "few-label" and selection.choice != "raw":
        base, cal = selection.candidate("raw").score, selection.candidate(selection.choice).score
        if base is not None and cal is not None and cal < base:
            on = "--dev queries" if "dev_queries" in selection.settings else "--dev pairs"
            out.append({"on": on, "metric": selection.criterion, "base": float(base), "calibrated": float(cal)})
    for r in out:
        r["change"] = r["calibrated"] - r["base"]
    return out


def regression_warning(r: dict[str, Any]) -> str:
    return (
        f"the calibrated model scores LOWER than the base model on {r['on']} ({r['metric']} x 100): "
        f"{r['base']:.2f} -> {r['calibrated']:.2f} ({r['change']:+.2f} points); keep the base model or try another --method"
    )


def check_min_gain(ev: dict[str, Any], min_gain: float) -> None:
    """Refuse (:class:`InsufficientGain`) unless the mean gain over ``--eval``'s tasks is at least ``min_gain`` points."""
    from ..errors import InsufficientGain

    rows = list(ev["tasks"].values())
    base = float(np.mean([r["base"] for r in rows]))
    cal = float(np.mean([r["calibrated"] for r in rows]))
    if cal - base < min_gain:
        raise InsufficientGain(
            f"--min-gain {min_gain:g}: the calibrated model gains {cal - base:+.2f} points on {ev.get('data', '--eval')} "
            f"({base:.2f} -> {cal:.2f}{', mean of its tasks' if len(rows) > 1 else ''}); nothing was written"
        )
