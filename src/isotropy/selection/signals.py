"""Label-free signals of whether calibrating a corpus's vectors will help, from the vectors alone.

The criteria of :mod:`.criteria` score each *candidate*; the signals here describe the *raw
vectors* (and, for stability, the whitened ones), so that a rule can say "calibrate" or "keep
raw" before any candidate is compared. Every signal is computed from one set of moments plus a
seeded sample, without a label and without the encoder:

* ``mean_cosine`` -- mean cosine of random pairs of raw vectors (anisotropy level; 0 isotropic).
* ``top_share`` -- share of the centred variance in the top ``ceil(d/10)`` principal components.
* ``effective_rank`` -- ``exp(entropy)`` of the normalised covariance eigenvalues divided by
  ``d`` (Roy & Vetterli 2007; 1 for a flat spectrum).
* ``spectemp_power`` -- Spectral Tempering's soft-whitening power (Li, Eustratiadis & Kanoulas,
  arXiv 2603.19339, "SpecTemp"): noise floor = mean of the last 10 % of the eigenvalues, local
  SNR(k) = max(0, lambda_k / floor - 1), knee of the SNR curve by Kneedle, and
  ``gamma(k) = min(1, SNR(k) / SNR(knee))`` at the kept width ``k`` (here ``d // 2``, the
  narrowest whitening of the default candidates but one). ``gamma`` near 1 says the kept
  directions are all signal (whiten); near 0 that they are at the noise floor (whitening would
  amplify noise).
* ``knn_stability`` -- mean Jaccard overlap of each sampled vector's ``k`` nearest neighbours
  under full whitening fitted on two disjoint random halves of the corpus (1: the whitening is
  estimated well enough to define neighbourhoods; low: it is noise).
* ``heldout_gain`` -- held-out Gaussian log-likelihood per dimension, in nats: a Gaussian with the
  full covariance of one half (Ledoit-Wolf shrunk, so it is defined on any corpus) minus an
  isotropic Gaussian with the same trace, both scored on the other half. Large: the corpus has a
  strong, reproducible covariance structure (what whitening removes); near 0: little structure.

:func:`corpus_signals` returns them all; :data:`SIGNAL_NAMES` lists them in order.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..transforms.moments import Moments

__all__ = [
    "SIGNAL_NAMES",
    "SIGNAL_RULE",
    "SEARCH_RULE",
    "TASKS",
    "SEARCH_SPLIT",
    "search_split",
    "rule_for",
    "ENCODER_KINDS",
    "encoder_kind",
    "decide_by_signals",
    "incumbent_of",
    "POOLING_RULE",
    "POOLING_OFFERED",
    "pooling_note",
    "few_label_rule_text",
    "few_label_fired",
    "SIGNAL_DOCS",
    "corpus_signals",
    "eigenvalues",
    "kneedle",
    "spectemp_power",
    "knn_stability",
    "heldout_gain",
]

SIGNAL_NAMES = ("mean_cosine", "top_share", "effective_rank", "spectemp_power", "knn_stability", "heldout_gain")
SIGNAL_DOCS = {
    "mean_cosine": "mean cosine of random pairs of raw vectors (0: isotropic, 1: all alike)",
    "top_share": "share of the centred variance in the top d/10 principal components",
    "effective_rank": "effective rank of the covariance / d (1: flat spectrum)",
    "spectemp_power": "SpecTemp soft-whitening power at width d/2 (1: the kept directions are signal, 0: noise)",
    "knn_stability": "10-NN overlap under whitening fitted on two halves of the corpus (1: stable)",
    "heldout_gain": "held-out Gaussian log-likelihood per dimension, full covariance minus isotropic (nats)",
}
PAIRS = 20000  # random pairs for the mean cosine
STABILITY_SAMPLE = 1000  # vectors whose neighbourhoods are compared
STABILITY_K = 10


def eigenvalues(moments: Moments) -> np.ndarray:
    """Covariance eigenvalues of ``moments``, descending, clipped at 0."""
    lam = np.linalg.eigvalsh(np.asarray(moments.covariance(), dtype=np.float64))[::-1]
    return np.clip(lam, 0.0, None)


def kneedle(y: np.ndarray) -> int:
    """0-based knee of a decreasing convex curve: the point farthest below the chord between its ends on
    the [0, 1]-normalised axes (offline Kneedle, Satopaa et al. 2011). Written here rather than taken from
    the ``kneed`` package: it is eight lines, and the package is not a dependency of isotropy."""
    y = np.asarray(y, dtype=np.float64)
    if len(y) < 3 or y[0] == y[-1]:
        return 0
    x = np.linspace(0.0, 1.0, len(y))
    yn = (y - y.min()) / (y.max() - y.min())
    chord = yn[0] + (yn[-1] - yn[0]) * x
    return int(np.argmax(chord - yn))


def spectemp_power(lam: np.ndarray, width: int, tail: float = 0.9) -> tuple[float, int]:
    """``(gamma, knee)``: SpecTemp's soft-whitening power for keeping ``width`` directions of the spectrum ``lam``."""
    lam = np.asarray(lam, dtype=np.float64)
    start = max(1, int(len(lam) * tail))
    floor = float(np.mean(lam[start:])) if start < len(lam) else float(lam[-1])
    if floor <= 0:
        floor = float(np.finfo(np.float64).tiny)
    snr = np.maximum(0.0, lam[:start] / floor - 1.0)
    knee = kneedle(snr)
    at = snr[min(width, len(snr)) - 1]
    return (1.0 if snr[knee] == 0 else float(min(1.0, at / snr[knee]))), knee + 1


def _normalize(Y: np.ndarray) -> np.ndarray:
    return Y / np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), np.finfo(np.float64).tiny)


def mean_cosine(X: np.ndarray, seed: int = 0, pairs: int = PAIRS) -> float:
    """Mean cosine of ``pairs`` random pairs of distinct rows."""
    n = len(X)
    if n < 2:
        return float("nan")
    rng = np.random.default_rng([seed, 11])
    i = rng.integers(0, n, pairs)
    j = (i + rng.integers(1, n, pairs)) % n
    u = _normalize(X)
    return float(np.mean(np.einsum("id,id->i", u[i], u[j])))


def _halves(X: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng([seed, 12]).permutation(len(X))
    h = len(X) // 2
    return X[perm[:h]], X[perm[h:]]


def _whitener(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mu, W)`` of full PCA whitening of ``X`` (directions at numerical zero dropped)."""
    mu = X.mean(0)
    lam, U = np.linalg.eigh(np.cov(X - mu, rowvar=False))
    keep = lam > 1e-10 * max(lam.max(), np.finfo(np.float64).tiny)
    return mu, U[:, keep] / np.sqrt(lam[keep])


def _knn(Y: np.ndarray, k: int) -> np.ndarray:
    u = _normalize(Y)
    S = u @ u.T
    np.fill_diagonal(S, -np.inf)
    return np.argpartition(-S, k, axis=1)[:, :k]


def knn_stability(X: np.ndarray, seed: int = 0, k: int = STABILITY_K, sample: int = STABILITY_SAMPLE) -> float:
    """Mean Jaccard overlap of the ``k``-NN (cosine, within a sample) under whitening fitted on each half."""
    a, b = _halves(X, seed)
    if len(a) <= X.shape[1] or len(b) <= X.shape[1]:
        return float("nan")
    rows = np.random.default_rng([seed, 13]).choice(len(X), size=min(sample, len(X)), replace=False)
    S = X[rows]
    if len(S) <= k:
        return float("nan")
    (ma, Wa), (mb, Wb) = _whitener(a), _whitener(b)
    na, nb = _knn((S - ma) @ Wa, k), _knn((S - mb) @ Wb, k)
    inter = np.array([len(np.intersect1d(p, q, assume_unique=True)) for p, q in zip(na, nb)])
    return float(np.mean(inter / (2 * k - inter)))


def heldout_gain(X: np.ndarray, seed: int = 0) -> float:
    """Held-out log-likelihood per dimension (nats): full Ledoit-Wolf covariance minus isotropic, fitted on one half."""
    from sklearn.covariance import LedoitWolf

    a, b = _halves(X, seed)
    d = X.shape[1]
    if len(a) < 2 or len(b) < 1:
        return float("nan")
    mu = a.mean(0)
    C = LedoitWolf(assume_centered=True).fit(a - mu).covariance_
    sign, logdet = np.linalg.slogdet(C)
    if sign <= 0:
        return float("nan")
    Z = b - mu
    full = -0.5 * (logdet + np.mean(np.einsum("id,id->i", Z @ np.linalg.inv(C), Z)))
    s2 = float(np.trace(C) / d)
    iso = -0.5 * (d * math.log(s2) + np.mean(np.einsum("id,id->i", Z, Z)) / s2)
    return float((full - iso) / d)


def corpus_signals(X: Any, seed: int = 0, moments: Moments | None = None) -> dict[str, float]:
    """Every signal of :data:`SIGNAL_NAMES` for the corpus vectors ``X`` (n x d), seeded."""
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    m = moments if moments is not None else Moments(d).update(X)
    lam = eigenvalues(m)
    total = float(lam.sum())
    p = lam / total if total > 0 else np.full(d, 1.0 / d)
    nz = p[p > 0]
    gamma, _ = spectemp_power(lam, max(1, d // 2))
    return {
        "mean_cosine": mean_cosine(X, seed),
        "top_share": float(p[: max(1, math.ceil(d / 10))].sum()),
        "effective_rank": float(math.exp(-np.sum(nz * np.log(nz))) / d),
        "spectemp_power": gamma,
        "knn_stability": knn_stability(X, seed),
        "heldout_gain": heldout_gain(X, seed),
    }


# ---------------------------------------------------------------- the rule on the signals

ENCODER_KINDS = ("static", "transformer", "unknown")

# The label-free rule (docs/AUTO.md, "Zoo tuning"), read off the STS-B TRAIN split of the model zoo by
# bench/_auto_zoo.py:tuned_rule at commit b31d6d7 (no test label of any task; bench/auto.py holds it out task by task).
# No signal of the vectors told "whitening gains >= 0.5" from "it does not" on all 9 zoo entries: mean_cosine and
# spectemp_power alone put 8 right but would act on a transformer pooling where whitening loses 2;
# heldout_gain > 0.457 puts 7 right and acts nowhere whitening loses, but misses the 256-d table (+2.9) and
# its threshold sits in a gap of 0.03 nats between a loss (0.434) and a gain (0.481). The encoder's kind
# separates with a wide margin: on every static table (a mean of static token vectors: GloVe mean and
# SIF, the default model distilled to 384 and 256 dims, mean and SIF) shrunk whitening gained at least 2.3 points,
# while on the transformer's poolings no calibration gained 0.5 on all three (full whitening lost 2 on two of them).
# A kind acts only with the calibration of best mean gain among those that gained >= ``margin`` on EVERY
# tuning point of that kind, else keeps raw; vectors of an unknown encoder keep raw. ``thresholds``: each
# vector signal's best threshold alone on the same table, shown as evidence, never deciding.
SIGNAL_RULE: dict[str, Any] = {
    "act": {"static": "whitening-shrunk", "transformer": "raw", "unknown": "raw"},
    "margin": 0.5,
    "tuned_on": "STS-B train split",
    "thresholds": {
        "mean_cosine": (">", 0.0829),
        "top_share": ("<", 0.5141),
        "effective_rank": (">", 0.4718),
        "spectemp_power": (">", 0.1088),
        "knn_stability": (">", 0.6506),
        "heldout_gain": (">", 0.4572),
    },
    "why": {
        "static": "the encoder is a static table (sentence vector = mean of token vectors)",
        "transformer": "the encoder is a transformer",
        "unknown": "the vectors came without their encoder",
    },
    # the effect measured for each kind's branch (docs/AUTO.md 'Zoo tuning')
    "expected": {
        "static": "whitening-shrunk: +5.4 Spearman points on average on the STS-B train split of the 6 static zoo "
        "entries (+2.3 to +16.0)",
        "transformer": "unchanged similarities (raw kept); no calibration gained >= 0.5 on every transformer zoo model "
        "of the STS-B train split (best worst case: soft-0.25, +0.31)",
        "unknown": "unchanged similarities (raw kept): the rule acts only on an encoder it knows",
    },
}

# The label-free rule for search (``--for search``; docs/AUTO.md, "Search"), read the same way off the TUNING
# half of Cranfield's queries (:data:`SEARCH_SPLIT`: a seeded half that no reported retrieval figure uses) by
# bench/_render.py:tuned_search_rule at commit b31d6d7 (docs/AUTO.md, "Search tuning"), nDCG@10 x 100 of an exact search.
# It is measured on the other, held-out half of the queries. On the tuning queries soft-0.5 gained +3.5 to +5.3 on
# every static entry (GloVe mean and SIF, the default model distilled to 384 and 256 dims) where whitening-shrunk, the
# similarity rule's choice, lost on both distilled tables; on the default model's last-avg and cls no calibration
# gained 0.5 on both.
SEARCH_RULE: dict[str, Any] = {
    "act": {"static": "soft-0.5", "transformer": "raw", "unknown": "raw"},
    "margin": 0.5,
    "metric": "nDCG@10",
    "tuned_on": "Cranfield tuning queries (seeded half)",
    "thresholds": SIGNAL_RULE["thresholds"],
    "why": SIGNAL_RULE["why"],
    "expected": {
        "static": "soft-0.5: +4.3 nDCG@10 points on average on Cranfield's tuning queries of the 4 static zoo entries "
        "(+3.5 to +5.3; docs/AUTO.md, 'Search')",
        "transformer": "unchanged similarities (raw kept): no calibration gained >= 0.5 nDCG@10 on both transformer "
        "zoo entries of Cranfield's tuning queries (best worst case: common-component, -0.63)",
        "unknown": "unchanged similarities (raw kept): the rule acts only on an encoder it knows",
    },
}
TASKS = ("similarity", "search")  # what ``--for`` takes: the rule tuned for that use
# Cranfield's 225 queries split for tuning the search rule: a seeded permutation (numpy default_rng(SEED)) whose
# first half tunes, the rest is held out (every reported retrieval figure of auto reads the held-out half only).
SEARCH_SPLIT: dict[str, Any] = {"seed": 34, "tune_share": 0.5}


def search_split(n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """``(tuning rows, held-out rows)`` of ``n_queries`` queries (in their file order) by :data:`SEARCH_SPLIT`."""
    perm = np.random.default_rng(SEARCH_SPLIT["seed"]).permutation(int(n_queries))
    k = int(round(SEARCH_SPLIT["tune_share"] * n_queries))
    return np.sort(perm[:k]), np.sort(perm[k:])


def rule_for(task: str | None = None) -> dict[str, Any]:
    """The label-free rule tuned for ``task`` (:data:`TASKS`; None: similarity)."""
    if task is None or task == "similarity":
        return SIGNAL_RULE
    if task == "search":
        return SEARCH_RULE
    from ..errors import IsotropyError

    raise IsotropyError(f"--for {task!r}: choose one of {', '.join(TASKS)}")


# The pooling rule (docs/AUTO.md, "Zoo tuning"), read off the same STS-B TRAIN table by
# bench/_auto_zoo.py:tuned_pooling at commit b31d6d7, the calibration rule's way: per kind, the default pooling is kept unless
# another, each under the kind's calibration above, scored >= ``margin`` higher on EVERY zoo model of that kind.
# Static tables: mean vs SIF (whitening-shrunk on both): SIF gained 2.28 on GloVe but lost 0.10 and 0.12 on the
# two distilled tables (their token rows are already frequency-weighted), so mean is kept. Transformers: the
# model's own pooling (None here; the default model's is mean = last-avg) vs first-last-avg (raw on both):
# first-last-avg lost 1.12, so the model's own is kept. Both choices are the encoders' default poolings, so
# ``--method auto`` without ``--pooling`` already uses them; the selection says so (:func:`pooling_note`).
POOLING_RULE: dict[str, Any] = {
    "pooling": {"static": "last-avg", "transformer": None},
    "margin": 0.5,
    "tuned_on": "STS-B train split",
    "why": {
        "static": "SIF gained >= 0.5 over mean (both whitening-shrunk) on GloVe (+2.28) but not on the distilled "
        "tables (-0.10, -0.12)",
        "transformer": "first-last-avg lost 1.12 against the default model's own pooling (both raw)",
    },
}


# The poolings ``--pooling auto`` offers for each kind in few-label mode (issue #24): the rule's pooling (first) and
# the one other pooling the zoo measured for that kind (None: the model's own). ``sif`` on a transformer would need
# token statistics of the corpus, so a transformer is offered its own pooling and first-last-avg only.
POOLING_OFFERED: dict[str, tuple[str | None, ...]] = {"static": ("last-avg", "sif"), "transformer": (None, "first-last-avg")}


def encoder_kind(encoder: Any) -> str:
    """``"static"`` for an encoder on the static backend (a table of token vectors), ``"transformer"`` for any
    other encoder with a backend (torch, onnxruntime), ``"unknown"`` for no encoder or one without a backend."""
    backend = getattr(encoder, "backend", None) if encoder is not None else None
    if not isinstance(backend, str):
        return "unknown"
    return "static" if backend == "static" else "transformer"


def signal_alone(sig: dict[str, float], name: str, rule: dict[str, Any] | None = None) -> bool:
    """Whether signal ``name`` passes its threshold (a NaN or missing signal never does)."""
    op, t = (rule or SIGNAL_RULE)["thresholds"][name]
    v = sig.get(name, float("nan"))
    if v is None or not math.isfinite(v):
        return False
    return bool(v > t) if op == ">" else bool(v < t)


def decide_by_signals(
    sig: dict[str, float], rule: dict[str, Any] | None = None, *, kind: str = "unknown", task: str | None = None
) -> dict[str, Any]:
    """``{"choice", "fired", "reason", "expected"}``: the rule's calibration (the rule for ``task``, :func:`rule_for`)
    for an encoder of ``kind`` (:func:`encoder_kind`); ``fired`` is True when it calibrates. The vector signals never
    make it act (``sig`` is read only to say what they were); any kind but ``"static"`` keeps raw by default."""
    rule = rule or rule_for(task)
    if kind not in ENCODER_KINDS:
        kind = "unknown"
    act = rule["act"].get(kind, "raw")
    why = rule["why"][kind]
    if act == "raw":
        reason = f"{why}: raw kept"
    else:
        reason = (
            f"{why}: {act}, which gained >= {rule['margin']:g} {rule.get('metric', 'Spearman')} points on every {kind} "
            f"zoo model ({rule['tuned_on']})"
        )
    return {"choice": act, "fired": act != "raw", "reason": reason, "expected": rule["expected"][kind]}


def spectemp_candidate(X: Any):
    """SpecTemp's calibration of ``X`` as a candidate: whitening to width d/2 with the power its spectrum gives."""
    from .candidates import Candidate

    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    gamma, _ = spectemp_power(eigenvalues(Moments(d).update(X)), max(1, d // 2))
    return Candidate("spectemp", "whitening", (("n_components", max(1, d // 2)), ("power", round(gamma, 4))))


def signal_rule_text(rule: dict[str, Any] | None = None, task: str | None = None) -> str:
    """The signal rule (for ``task``) in words."""
    rule = rule or rule_for(task)
    acts = ", ".join(f"{k}: {v}" for k, v in rule["act"].items())
    return (
        f"for {task or 'similarity'}, by the encoder's kind ({acts}); a kind acts only with a calibration that gained "
        f">= {rule['margin']:g} {rule.get('metric', 'Spearman')} "
        f"points on every zoo model of that kind on the {rule['tuned_on']}; no signal of the vectors decides "
        "(none separated gains from losses there; docs/AUTO.md measures the rule on held-out tasks)"
    )


# ---------------------------------------------------------------- few-label: the incumbent


def incumbent_of(encoder: Any, rule: dict[str, Any] | None = None, task: str | None = None) -> tuple[str, str]:
    """``(incumbent, why)`` of the few-label mode for ``encoder``: the label-free rule's choice (for ``task``) for its
    kind (:func:`encoder_kind`), which scored dev pairs must beat to be replaced, and the reason in words. Label-free,
    it is the choice itself, known before any vector is read: ``calibrate --method auto`` encodes a sample only
    when it is raw."""
    dec = decide_by_signals({}, rule, kind=encoder_kind(encoder), task=task)
    return dec["choice"], f"the label-free rule's choice: {dec['reason']}"


def test_words(conf: dict[str, Any] | None, level: float) -> str:
    """The few-label rule's test in words (empty for a challenger alone at ``level``), for the rule texts."""
    test = (conf or {}).get("test", "each")
    if test == "holm":
        return (
            " under Holm's step-down correction over the challengers (each one's p-value: the share of resamples it "
            f"does not win; the {100 * level:.0f}% is family-wise)"
        )
    if test == "max-t":
        return f" under a max-statistic bound over the challengers (the {100 * level:.0f}% is family-wise)"
    return ""


def few_label_rule_text(
    incumbent: str, metric: str, level: float, resamples: int, n: int, unit: str = "pairs", conf: dict | None = None
) -> str:
    """The few-label rule in words (``conf``: the rule's test and raw's own bar, :data:`..dev.DEV_RULE`)."""
    other = "another candidate (raw included)" if incumbent != "raw" else "a candidate"
    raw_level = (conf or {}).get("raw_level")
    guard = f", or raw beats it in {100 * raw_level:.0f}% of them" if raw_level is not None and incumbent != "raw" else ""
    return (
        f"{incumbent} unless {other} beats {incumbent}'s dev {metric} in at least {100 * level:.0f}% of {resamples} "
        f"bootstrap resamples of the {n} {unit}{test_words(conf, level)}{guard}; then the best dev {metric} among "
        "those that do"
    )


def few_label_fired(incumbent: str, why: str, choice: str, p: float, level: float, conf: dict | None = None) -> str:
    """What decided a few-label choice, in words (``p``: P(choice beats the incumbent), or 1 - the best rival's)."""
    if choice == incumbent:
        verdict = f"kept {incumbent}: no candidate beat it in {100 * level:.0f}% of the resamples{test_words(conf, level)}"
    else:
        verdict = f"{choice} replaced the incumbent {incumbent}: it beat it in {100 * p:.0f}% of the resamples"
    return verdict + (f"; the incumbent {incumbent} is {why}" if why else "")


def pooling_note(encoder: Any, rule: dict[str, Any] | None = None) -> str | None:
    """The pooling rule's word on ``encoder``'s pooling (None for an unknown encoder): its choice for the kind, and
    whether the encoder's pooling is that choice."""
    rule = rule or POOLING_RULE
    kind = encoder_kind(encoder)
    if kind == "unknown" or not isinstance(getattr(encoder, "pooling", None), str):
        return None
    runtime = getattr(encoder, "runtime", None)
    own = runtime.default_pooling() if hasattr(runtime, "default_pooling") else None
    want = rule["pooling"][kind] or own
    label = "a static table" if kind == "static" else "a transformer"
    what = f"{want}" if rule["pooling"][kind] else f"the model's own ({own or 'its default'})"
    said = f"the pooling rule's choice for {label} is {what}: {rule['why'][kind]} ({rule['tuned_on']}; docs/AUTO.md)"
    if want is None or encoder.pooling == want:
        return f"pooling {encoder.pooling}: {said}"
    return f"pooling {encoder.pooling} as given; {said}"
