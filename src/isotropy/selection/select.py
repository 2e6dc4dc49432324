"""``select_calibration``: score every candidate calibration on the user's corpus and choose one.

1. The corpus vectors are summed ONCE into :class:`~isotropy.transforms.moments.Moments` (as two
   halves, merged: the halves serve ``knn-stability``); every candidate is solved from them
   (:mod:`.candidates`), and one the corpus is too small for is skipped with a note.
2. Few-label mode (``dev_pairs``): each candidate's figure on the dev pairs and a paired
   bootstrap over the pairs (:mod:`.dev`); the incumbent -- the label-free rule's choice for the
   encoder's kind (:func:`.signals.incumbent_of`; raw for vectors without their encoder) -- is kept
   unless another candidate (raw included) passes the few-label rule's test (:data:`.dev.DEV_RULE`).
3. Label-free mode: a seeded sample of the corpus's distinct sentences, word-deleted copies of
   them encoded by the same encoder (:mod:`.perturb`), and the label-free criteria
   (:mod:`.criteria`) on every candidate, bootstrapped over the sampled sentences. The
   rule is :data:`LABEL_FREE_RULE`, set from the measurements in docs/AUTO.md: no criterion
   was safe on held-out tasks, so they are evidence only and the encoder's kind decides
   (:data:`.signals.SIGNAL_RULE`: whitening-shrunk on a static table, raw on a transformer);
   ``criterion_name=`` lets one criterion decide (raw unless 90 % sure).

The sample, its views and the bootstrap resamples are drawn by :mod:`.bootstrap`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import check_matrix
from ..errors import IsotropyError
from ..transforms.moments import Moments
from . import signals
from .bootstrap import _apply, _encode, _resamples, _sample, _views
from .candidates import Candidate, Fitted, fit_candidates, parse_candidates, say_not_compared
from .criteria import CRITERIA, Applied, Views, centred_ranks, criterion
from .dev import DEV_RULE, DevPairs, DevQrels, check_dev, dev_decide, dev_statistics, pairs_sentences
from .perturb import perturbed_copies
from .result import CandidateScore, Selection
from .signals import corpus_signals, decide_by_signals, encoder_kind, signal_rule_text

__all__ = ["select_calibration", "Selector", "LABEL_FREE_RULE", "DEV_LEVEL", "SAMPLE", "RESAMPLES"]

DEV_LEVEL = DEV_RULE["level"]  # few-label: the level of the rule's test (dev.DEV_RULE)
SAMPLE = 1000  # label-free: distinct sentences sampled for the criteria
RESAMPLES = 1000  # bootstrap resamples (pairs in few-label mode, sentences in label-free mode)

# The label-free decision (docs/AUTO.md): criterion None = the candidate-scoring criteria are evidence only
# (on held-out STS tasks none was safe: the rule fixed before the run lost up to 12 points) and the signal
# rule of the raw corpus vectors decides (``signals.SIGNAL_RULE``); ``criterion_name=`` lets one criterion
# decide (raw unless ``level`` sure), and scored pairs (``dev_pairs``) choose for real.
LABEL_FREE_RULE: dict[str, Any] = {"criterion": None, "level": 0.9, "pick": "best", "shown": "agreement"}
_KIND_VALUE = {"static": 1.0, "transformer": 0.0, "unknown": None}  # the encoder's kind among the signals shown


# ---------------------------------------------------------------- inputs


def _is_encoder(x: Any) -> bool:
    return hasattr(x, "encode") and not isinstance(x, np.ndarray)


def _inputs(data: Any, corpus: Any, encoder: Any, cache: Any, show_progress: bool | None, source: str):
    """``(encoder or None, corpus vectors, the sentences of their rows or None)``."""
    if _is_encoder(data):
        if corpus is None:
            raise IsotropyError("select_calibration(encoder, corpus): give the corpus sentences to encode")
        encoder, sentences = data, [str(s) for s in corpus]
        if not sentences:
            raise IsotropyError(f"{source} is empty: there is nothing to fit a calibration on")
        return encoder, _encode(encoder, sentences, cache, show_progress), sentences
    X = check_matrix(data, f"vectors of {source}", min_rows=1)
    sentences = None if corpus is None else [str(s) for s in corpus]
    if sentences is not None and len(sentences) != len(X):
        raise IsotropyError(f"{source}: {len(X)} vectors but {len(sentences)} sentences; give one sentence per row")
    return encoder, X, sentences


# ---------------------------------------------------------------- the steps


def _halves(X: np.ndarray, seed: int) -> tuple[Moments, Moments, Moments]:
    """Moments of two seeded halves of the rows and of all of them (merged: the rows are summed once)."""
    perm = np.random.default_rng([seed, 1]).permutation(len(X))
    half = len(X) // 2
    a = Moments(X.shape[1]).update(X[np.sort(perm[:half])]) if half else Moments(X.shape[1])
    b = Moments(X.shape[1]).update(X[np.sort(perm[half:])])
    return a, b, a.copy().merge(b)


def _decide(
    scores: dict[str, float], beats: dict[str, float], level: float, change: dict | None = None, incumbent: str = "raw"
) -> tuple[str, float]:
    """The incumbent (raw unless given) unless a candidate beats it with probability >= level; then, among those that
    do, the best score (or, given ``change``, the one that changes raw's similarities least). ``beats`` holds each
    candidate's P(beats the incumbent); the probability returned is the choice's, or 1 - the best rival's."""
    sure = [c for c in scores if c != incumbent and np.isfinite(scores[c]) and beats.get(c, 0.0) >= level]
    if sure:
        choice = max(sure, key=lambda c: scores[c]) if change is None else min(sure, key=lambda c: change[c])
        return choice, float(beats[choice])
    others = [beats[c] for c in beats if c != incumbent and np.isfinite(beats[c])]
    return incumbent, float(1.0 - max(others)) if others else 1.0


def _few_label(
    fitted: Fitted,
    dev: DevPairs | DevQrels,
    encoder: Any,
    cache: Any,
    show_progress: bool | None,
    seed: int,
    resamples: int,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Dev figure of every fitted candidate and its figures on the bootstrap resamples (dev qrels: left = queries,
    right = documents)."""
    if isinstance(dev.left, np.ndarray):
        L, R = dev.left, dev.right
    else:
        if encoder is None:
            raise IsotropyError(f"{dev.source}: dev {dev.unit} given as text need the encoder; pass encoder= (or vectors)")
        distinct = pairs_sentences(dev)
        V = _encode(encoder, distinct, cache, show_progress)
        at = {s: i for i, s in enumerate(distinct)}
        L, R = V[[at[s] for s in dev.left]], V[[at[s] for s in dev.right]]
    return dev_scores(fitted.transforms, L, R, dev, *dev_resamples(dev, resamples, seed))


def dev_resamples(dev: DevPairs | DevQrels, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The paired bootstrap of the dev labels: ``resamples`` seeded draws of their rows (pairs or queries), and the
    centred ranks of the gold scores on each draw when the figure is a Spearman (None otherwise)."""
    idx = _resamples(len(dev), resamples, seed, 4)
    return idx, (centred_ranks(dev.gold[idx]) if dev.metric == "spearman" else None)


def dev_scores(
    transforms: dict[str, Any], L: np.ndarray, R: np.ndarray, dev: Any, idx: np.ndarray, gold_ranks: np.ndarray | None
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Each transform's dev figure on ``L``/``R`` (pairs' two sides, or queries and documents), and its figures on
    the resamples :func:`dev_resamples` drew."""
    points, boots = {}, {}
    for name, t in transforms.items():
        points[name], boots[name] = dev_statistics(_apply(t, L), _apply(t, R), dev, idx, gold_ranks)
    return points, boots


def criterion_scores(
    fitted: Fitted,
    halves: dict[str, tuple[Any, Any]],
    views: Views,
    names: Sequence[str],
    settings: dict[str, dict],
    seed: int,
    resamples: int,
) -> dict[str, tuple[dict[str, float], dict[str, np.ndarray]]]:
    """``{criterion: ({candidate: score}, {candidate: bootstrap scores})}`` for every fitted candidate."""
    m = len(views.base)
    idx = _resamples(m, resamples, seed, 5)
    W = np.stack([np.bincount(row, minlength=m) for row in idx]).astype(np.float64)
    ones = np.ones((1, m))
    out: dict[str, tuple[dict[str, float], dict[str, np.ndarray]]] = {n: ({}, {}) for n in names}
    for name, t in fitted.transforms.items():
        applied = Applied(_apply(t, views.base), {r: _apply(t, V) for r, V in views.perturbed.items()})
        if name in halves:
            ta, tb = halves[name]
            applied.halves = (_apply(ta, views.base), _apply(tb, views.base))
        for n in names:
            crit, s = CRITERIA[n], settings[n]
            if crit.needs_halves and t is not None and name not in halves:
                out[n][0][name], out[n][1][name] = float("nan"), np.full(len(idx), np.nan)
                continue
            stats = crit.stats(applied, views, s)
            out[n][0][name] = float(crit.reduce(stats, ones, s)[0])
            out[n][1][name] = crit.reduce(stats, W, s)
    return out


def planned_copies(
    sentences: Sequence[str],
    *,
    seed: int = 0,
    criteria: Sequence[str] | None = None,
    settings: dict[str, dict] | None = None,
    sample: int = SAMPLE,
) -> dict[float, list[str]]:
    """``{deletion rate: perturbed copies}`` that the label-free criteria of a corpus will encode (the same sample
    :meth:`Selector.evidence` draws), to encode them ahead for several poolings in one pass."""
    conf = _criterion_settings(criteria, settings, None)
    rows = _sample(sentences, len(sentences), sample, seed)
    base = [sentences[i] for i in rows]
    return {r: perturbed_copies(base, r, seed) for r in _rates(conf)}


def _criterion_settings(criteria: Sequence[str] | None, settings: dict[str, dict] | None, first: str | None) -> dict[str, dict]:
    names = list(dict.fromkeys([*([first] if first else []), *(criteria if criteria is not None else CRITERIA)]))
    return {n: {**criterion(n).defaults, **((settings or {}).get(n) or {})} for n in names}


def _rates(conf: dict[str, dict]) -> list[float]:
    return sorted({r for n, s in conf.items() for r in CRITERIA[n].rates(s)})


def _changes(fitted: Fitted, views: Views) -> dict[str, float]:
    """1 - Spearman(raw cosines, candidate cosines) over the random pairs of the sample, per candidate."""
    from .criteria import normalize, spearman_rows

    i = np.repeat(np.arange(len(views.base)), views.partners.shape[1])
    j = views.partners.reshape(-1)
    out = {}
    raw = None
    for name, t in fitted.transforms.items():
        u = normalize(_apply(t, views.base))
        cos = np.einsum("id,id->i", u[i], u[j])
        if raw is None:
            raw = cos if t is None else np.einsum("id,id->i", normalize(views.base)[i], normalize(views.base)[j])
        out[name] = float(1.0 - spearman_rows(cos[None], raw)[0])
    return out


def _half_fits(cands: Sequence[Candidate], fitted: Fitted, a: Moments, b: Moments) -> dict[str, tuple[Any, Any]]:
    out = {}
    for c in cands:
        if c.kind is None or c.name not in fitted.transforms:
            continue
        fa, fb = fit_candidates([c], a), fit_candidates([c], b)
        if c.name in fa.transforms and c.name in fb.transforms:
            out[c.name] = (fa.transforms[c.name], fb.transforms[c.name])
    return out


def _outcome(
    sel_cands: Sequence[Candidate],
    fitted: Fitted,
    decision: tuple[str, float],
    crit: str,
    points: dict,
    extra_of: dict,
    beats: dict,
    rule: str,
    settings: dict,
    incumbent: str = "raw",
) -> Selection:
    choice, prob = decision
    scores = []
    for c in sel_cands:
        note = fitted.skipped.get(c.name, "") or ("warning: " + fitted.warned[c.name] if c.name in fitted.warned else "")
        extra = {n: v.get(c.name) for n, v in extra_of.items()}
        scores.append(CandidateScore(c.name, points.get(c.name), beats.get(c.name), extra, note))
    sel = Selection(choice, settings["mode"], crit, None if choice == incumbent else prob, rule, scores, settings)
    sel.incumbent = incumbent
    sel.notes = [f"{k}: {v}" for k, v in fitted.skipped.items()]
    sel.transform = fitted.transforms.get(choice)
    return sel


class Selector:
    """The candidates of one corpus, solved once from one set of moments; choose among them by dev pairs
    (:meth:`few_label`) or label-free (:meth:`label_free`) as often as needed (the benchmark draws many dev sets)."""

    def __init__(self, X: Any, candidates: Any = None, *, seed: int = 0, source: str = "the corpus"):
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise IsotropyError(f"seed must be a non-negative integer, got {seed!r}")
        self.X = check_matrix(X, f"vectors of {source}", min_rows=1)
        self.seed, self.source = int(seed), source
        self.candidates = parse_candidates(candidates, self.X.shape[1])
        a, b, full = _halves(self.X, self.seed)
        self.halves, self.moments = (a, b), full
        self.fitted = fit_candidates(self.candidates, full, source)
        if len(self.fitted.transforms) < 2 and len(self.candidates) > 1:
            raise IsotropyError(
                f"{source} has {len(self.X)} sentences: too few for every candidate ("
                + "; ".join(f"{k} {v.removeprefix('skipped: ')}" for k, v in self.fitted.skipped.items())
                + "); add sentences"
            )

    @property
    def transforms(self) -> dict[str, Any]:
        """``{candidate: fitted transform}`` (None for raw) of every candidate that could be fitted."""
        return dict(self.fitted.transforms)

    def _settings(self, **more: Any) -> dict[str, Any]:
        return {"seed": self.seed, "corpus_rows": int(len(self.X)), "dim": int(self.X.shape[1]), **more}

    def few_label(
        self,
        dev: Any,
        encoder: Any = None,
        *,
        cache: Any = None,
        level: float | None = None,
        resamples: int = RESAMPLES,
        dev_source: str = "the dev pairs",
        show_progress: bool | None = None,
        incumbent: str = "raw",
        why: str = "",
    ) -> Selection:
        """Choose by dev pairs or search labels (:func:`~.dev.check_dev`) under the do-no-harm rule: the ``incumbent``
        (raw by default; :func:`select_calibration` passes the label-free rule's choice for the encoder's kind, ``why``
        saying so) is kept unless another candidate beats its dev figure in ``level`` of the resamples."""
        dev = check_dev(dev, dev_source)
        conf = {**DEV_RULE, **({} if level is None else {"level": float(level)})}
        lvl = float(conf["level"])
        if incumbent not in self.fitted.transforms:  # not a candidate here, or skipped (too few sentences)
            why, incumbent = f"{incumbent} could not be fitted here, so raw is the incumbent", "raw"
        points, boots = _few_label(self.fitted, dev, encoder, cache, show_progress, self.seed, resamples)
        rule = signals.few_label_rule_text(incumbent, dev.metric, lvl, resamples, len(dev), dev.unit, conf)
        settings = self._settings(mode="few-label", **dev.describe(), level=lvl, resamples=resamples, test=conf["test"])
        choice, p, beats = dev_decide(points, boots, incumbent, conf)
        decision = (choice, p)
        sel = _outcome(self.candidates, self.fitted, decision, f"dev-{dev.metric}", points, {}, beats, rule, settings, incumbent)
        sel.fired = signals.few_label_fired(incumbent, why, choice, p, lvl, conf)
        return sel

    def dev_scores(self, dev: Any, encoder: Any = None, *, resamples: int = RESAMPLES) -> tuple[dict, dict]:
        """Each candidate's dev figure and its figures on the seeded resamples of the dev rows: what
        :func:`~.dev.dev_decide` reads (a benchmark compares rules on them without scoring twice)."""
        return _few_label(self.fitted, check_dev(dev), encoder, None, False, self.seed, resamples)

    def evidence(
        self,
        encoder: Any = None,
        sentences: Sequence[str] | None = None,
        *,
        criteria: Sequence[str] | None = None,
        settings: dict[str, dict] | None = None,
        sample: int = SAMPLE,
        resamples: int = RESAMPLES,
        cache: Any = None,
        show_progress: bool | None = None,
    ) -> dict[str, Any]:
        """Every label-free criterion's score of every candidate and the bootstrap probability that it beats raw:
        ``{"points": {criterion: {candidate: score}}, "beats": {criterion: {candidate: p}}, "change": {candidate: c},
        "sample": m, "settings": {criterion: settings}}``; ``change`` is 1 - the Spearman correlation of the
        candidate's cosines with raw's over random pairs of the sample (0: the same similarity ranking)."""
        conf = _criterion_settings(criteria, settings, None)
        if sentences is not None and len(sentences) != len(self.X):
            raise IsotropyError(f"{self.source}: {len(self.X)} vectors but {len(sentences)} sentences; give one sentence per row")
        views = _views(encoder, self.X, sentences, _rates(conf), self.seed, sample, cache, show_progress)
        names = list(conf)
        halves = _half_fits(self.candidates, self.fitted, *self.halves) if any(CRITERIA[n].needs_halves for n in names) else {}
        res = criterion_scores(self.fitted, halves, views, names, conf, self.seed, resamples)
        beats = {
            n: {c: float(np.mean(b[c] > b["raw"])) for c in b if c != "raw" and np.isfinite(b[c]).any()}
            for n, (_, b) in res.items()
        }
        change = _changes(self.fitted, views)
        return {
            "points": {n: res[n][0] for n in names},
            "beats": beats,
            "change": change,
            "sample": len(views.base),
            "settings": conf,
        }

    def label_free_choice(
        self, ev: dict[str, Any], criterion_name: str | None = None, level: float | None = None
    ) -> tuple[str, float]:
        """``(choice, P(choice beats raw))`` by :data:`LABEL_FREE_RULE` (its criterion and level unless given) on :meth:`evidence`."""
        decide_by = criterion_name or LABEL_FREE_RULE["criterion"]
        if decide_by is None:  # keep raw
            shown = LABEL_FREE_RULE["shown"]
            return "raw", _decide(ev["points"][shown], ev["beats"][shown], 2.0)[1]
        lvl = LABEL_FREE_RULE["level"] if level is None else float(level)
        change = ev["change"] if LABEL_FREE_RULE["pick"] == "closest" else None
        return _decide(ev["points"][decide_by], ev["beats"][decide_by], lvl, change)

    def label_free(
        self,
        encoder: Any = None,
        sentences: Sequence[str] | None = None,
        *,
        criterion_name: str | None = None,
        criteria: Sequence[str] | None = None,
        settings: dict[str, dict] | None = None,
        level: float | None = None,
        sample: int = SAMPLE,
        resamples: int = RESAMPLES,
        cache: Any = None,
        show_progress: bool | None = None,
        evidence: bool = False,
        task: str | None = None,
    ) -> Selection:
        """Choose by a label-free criterion (default :data:`LABEL_FREE_RULE`: the encoder's kind, by the rule for
        ``task``); the criteria (word-deleted copies encoded: slow) are computed only with ``evidence`` or a
        ``criterion_name``, every other criterion reported beside the one deciding."""
        keep_raw = (criterion_name or LABEL_FREE_RULE["criterion"]) is None  # the signal rule decides
        decide_by = criterion_name or LABEL_FREE_RULE["criterion"] or LABEL_FREE_RULE["shown"]
        criterion(decide_by)
        names = list(dict.fromkeys([decide_by, *(criteria if criteria is not None else CRITERIA)]))
        if keep_raw and (encoder is None or sentences is None or not evidence):  # the signals need no criterion
            names = []
        ev = self.evidence(
            encoder,
            sentences,
            criteria=names,
            settings=settings,
            sample=sample,
            resamples=resamples,
            cache=cache,
            show_progress=show_progress,
        )
        if not names:
            ev["points"], ev["beats"] = {decide_by: {}}, {decide_by: {}}
        lvl = LABEL_FREE_RULE["level"] if level is None else float(level)
        choice, prob = self.label_free_choice(ev, None if keep_raw else decide_by, lvl) if names else ("raw", 1.0)
        pick = (
            "the one that changes raw's similarities least" if LABEL_FREE_RULE["pick"] == "closest" else f"the best {decide_by}"
        )
        rule = (
            f"raw unless a candidate beats raw's {decide_by} in at least {100 * lvl:.0f}% of {resamples} bootstrap "
            f"resamples of the {ev['sample']} sampled sentences; then, among those that do, {pick}"
        )
        sig: dict[str, float] = {}
        if keep_raw:
            sig = corpus_signals(self.X, self.seed, moments=self.moments)
            kind = encoder_kind(encoder)
            dec = decide_by_signals(sig, kind=kind, task=task)
            choice = dec["choice"] if dec["choice"] in self.fitted.transforms else "raw"
            rule = signal_rule_text(task=task)
        st = self._settings(mode="label-free", sample=int(ev["sample"]), level=lvl, resamples=resamples, criteria=ev["settings"])
        extra = {n: ev["points"][n] for n in names if n != decide_by}
        if names:
            extra["change"] = ev["change"]
        sel = _outcome(
            self.candidates,
            self.fitted,
            (choice, prob),
            "signal rule" if keep_raw else decide_by,
            ev["points"][decide_by],
            extra,
            ev["beats"][decide_by],
            rule,
            st,
        )
        if keep_raw:
            sel.p_beats_raw, sel.signals, sel.fired = None, {**sig, "static_table": _KIND_VALUE[kind]}, dec["reason"]
            sel.expected = dec["expected"]
            sel.settings.update(score_column=decide_by if names else "-", task=task or "similarity", evidence=bool(names))
            sel.settings["rule_choice"] = dec["choice"]
        return sel


def select_calibration(
    data: Any,
    corpus: Sequence[str] | None = None,
    *,
    candidates: Sequence[str | Candidate] | str | None = None,
    dev_pairs: Any = None,
    seed: int = 0,
    encoder: Any = None,
    cache: Any = None,
    source: str = "the corpus",
    dev_source: str = "the dev pairs",
    show_progress: bool | None = None,
    **options: Any,
) -> Selection:
    """Choose the calibration for a corpus: every candidate's score, the criterion, the choice, the signals and the rule that fired.

    ``data`` is an encoder (with ``corpus``, the sentences to fit on) or the corpus vectors
    (``corpus`` then optional: the sentence of each row, which with ``encoder=`` lets the
    label-free criteria encode perturbed copies). ``dev_pairs`` -- ``[(s1, s2, score), ...]`` (0/1 labels too) or
    ``(A, B, scores)`` vectors, at least 20 pairs; or search labels (:class:`~.dev.DevQrels`, a task of ``isotropy.
    retrieval.load_retrieval``) -- switches to the few-label mode. ``candidates``: :func:`~.candidates.default_candidates`.
    ``options`` go to :meth:`Selector.label_free` / :meth:`Selector.few_label` (``level``,
    ``resamples``, ``criterion_name``, ``sample``...). The same ``seed`` gives the same
    selection; ``Selection.transform`` is the fitted transform of the choice (None for raw).
    """
    task = options.get("task")
    signals.rule_for(task)  # an unknown task is said before any encoding
    dev = None if dev_pairs is None else check_dev(dev_pairs, dev_source)
    if candidates is not None and not isinstance(candidates, str):
        candidates = list(candidates)
    if dev is None and options.get("criterion_name") is not None:
        criterion(options["criterion_name"])
    encoder, X, sentences = _inputs(data, corpus, encoder, cache, show_progress, source)
    selector = Selector(X, candidates, seed=seed, source=source)
    if dev is not None:
        if "incumbent" not in options:  # the label-free rule's choice for the encoder's kind (raw: unknown encoder)
            options["incumbent"], options["why"] = signals.incumbent_of(encoder, task=task)
        options.pop("task", None), options.pop("evidence", None)  # the dev labels decide; no criterion is computed
        sel = selector.few_label(dev, encoder, cache=cache, show_progress=show_progress, **options)
    else:
        sel = selector.label_free(encoder, sentences, cache=cache, show_progress=show_progress, **options)
        if candidates is not None and sel.criterion == "signal rule":
            say_not_compared(sel, selector.candidates, selector.fitted)
    sel.notes += [n for n in [signals.pooling_note(encoder)] if n]  # the pooling rule's word on the encoder's pooling
    return sel
