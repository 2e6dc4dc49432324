"""``--pooling auto``: the pooling chosen with the calibration, in few-label mode (issue #24).

Without labels the pooling rule decides (:data:`.signals.POOLING_RULE`: mean on a static table, the
model's own pooling on a transformer) and :func:`rule_pooling_record` says so. With dev labels, every
pooling offered for the encoder's kind (:data:`.signals.POOLING_OFFERED`, :func:`offered_poolings`) is
read off the same corpus sample (the caller encodes it once with ``Encoder.encode_multi``), the
candidates are fitted per pooling, and every (pooling, candidate) is scored on the dev labels with the
SAME bootstrap resamples (:mod:`.dev`: Spearman on pairs, nDCG@10 on search labels). The incumbent is
the rule's pooling with the label-free calibration for the kind (:func:`.signals.incumbent_of`); it is
kept unless another (pooling, candidate) passes the few-label rule's test against it (:func:`.dev.dev_decide`,
:data:`.dev.DEV_RULE`); among those that do, the best dev figure wins (:func:`choose_pooling`). The
:class:`~.result.Selection` returned is the chosen pooling's candidates, each scored under the other
poolings too, and ``Selection.pooling`` records the pooling chosen, the incumbent and why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..encoders.poolings import parse_pooling
from ..errors import IsotropyError
from .dev import DEV_RULE, DevPairs, DevQrels, check_dev, dev_decide, pairs_sentences
from .result import Selection
from .select import DEV_LEVEL, RESAMPLES, Selector, _outcome, dev_resamples, dev_scores
from .signals import POOLING_OFFERED, POOLING_RULE, encoder_kind, few_label_fired, test_words

__all__ = ["rule_pooling", "offered_poolings", "rule_pooling_record", "pooled_dev", "choose_pooling", "pooling_label"]

_KIND_LABEL = {"static": "a static table", "transformer": "a transformer"}


def _kind(encoder: Any) -> str:
    kind = encoder_kind(encoder)
    if kind not in _KIND_LABEL:
        raise IsotropyError("--pooling auto needs the encoder (a static table or a transformer), not vectors alone")
    return kind


def _own(encoder: Any) -> str:
    return parse_pooling(encoder.runtime.default_pooling()).name


def rule_pooling(encoder: Any) -> str:
    """The pooling rule's pooling for ``encoder``'s kind (canonical name): mean on a static table, the model's own on a transformer."""
    want = POOLING_RULE["pooling"][_kind(encoder)]
    return parse_pooling(want).name if want else _own(encoder)


def offered_poolings(encoder: Any) -> list[str]:
    """The poolings ``--pooling auto`` compares for ``encoder`` with dev labels, the rule's pooling first; a pooling the
    encoder refuses (a model whose Dense head was trained on its own pooling takes no other) is not offered."""
    offered = [parse_pooling(p).name if p else _own(encoder) for p in POOLING_OFFERED[_kind(encoder)]]
    return [p for p in dict.fromkeys([rule_pooling(encoder), *offered]) if p == rule_pooling(encoder) or _accepts(encoder, p)]


def _accepts(encoder: Any, pooling: str) -> bool:
    try:
        encoder.runtime.check_pooling(parse_pooling(pooling))
    except IsotropyError:
        return False
    return True


def pooling_label(candidate: str, pooling: str) -> str:
    """A (pooling, candidate) in words, as every output names it."""
    return f"{candidate} on pooling {pooling}"


def rule_pooling_record(encoder: Any) -> dict[str, Any]:
    """``Selection.pooling`` when no labels choose: the rule's pooling, chosen by the rule."""
    kind, chosen = _kind(encoder), rule_pooling(encoder)
    said = (
        f"{chosen}, the pooling rule's choice for {_KIND_LABEL[kind]} (no --dev to compare poolings by): "
        f"{POOLING_RULE['why'][kind]} ({POOLING_RULE['tuned_on']}; docs/AUTO.md)"
    )
    return {"chosen": chosen, "incumbent": chosen, "offered": [chosen], "by": "rule", "said": said}


def pooled_dev(dev: DevPairs | DevQrels, encoder: Any, poolings: Sequence[str], show_progress: bool | None = None) -> dict:
    """``{pooling: dev labels as vectors}``: the distinct dev texts encoded once, every pooling read off that pass."""
    if isinstance(dev.left, np.ndarray):
        raise IsotropyError(f"{dev.source}: --pooling auto encodes the dev {dev.unit} under each pooling: give them as text")
    distinct = pairs_sentences(dev)
    V = encoder.encode_multi(distinct, list(poolings), show_progress=show_progress)
    at = {s: i for i, s in enumerate(distinct)}
    il, ir = [at[s] for s in dev.left], [at[s] for s in dev.right]
    return {
        p: dataclasses.replace(dev, left=np.asarray(V[p][il], np.float64), right=np.asarray(V[p][ir], np.float64))
        for p in poolings
    }


def _rule_text(
    label: str, poolings: Sequence[str], metric: str, level: float, resamples: int, n: int, unit: str, conf: dict
) -> str:
    return (
        f"{label} unless another (pooling, candidate) of the poolings {', '.join(poolings)} (raw included) beats "
        f"{label}'s dev {metric} in at least {100 * level:.0f}% of {resamples} bootstrap resamples of the {n} {unit} "
        f"(the same resamples for every pooling){test_words(conf, level)}; then the best dev {metric} among those that do"
    )


def _scores(selectors: dict[str, Selector], devs: dict[str, Any], idx: np.ndarray, gold_ranks: Any) -> tuple[dict, dict]:
    """Every (pooling, candidate)'s dev figure and its figures on the SAME resamples (paired across poolings)."""
    points, boots = {}, {}
    for p, s in selectors.items():
        got = dev_scores(s.fitted.transforms, devs[p].left, devs[p].right, devs[p], idx, gold_ranks)
        points.update({(p, n): v for n, v in got[0].items()})
        boots.update({(p, n): v for n, v in got[1].items()})
    return points, boots


def _selector(X: Any, candidates: Any, pooling: str, seed: int, source: str) -> Selector:
    if isinstance(X, Selector):  # fitted already (a benchmark draws many dev sets from one corpus)
        return X
    cands = candidates.get(pooling) if isinstance(candidates, Mapping) else candidates
    return Selector(X, cands, seed=seed, source=source)


def choose_pooling(
    corpus: Mapping[str, Any],
    dev: Mapping[str, Any],
    *,
    incumbent_pooling: str,
    incumbent: str = "raw",
    why: str = "",
    candidates: Any = None,
    seed: int = 0,
    level: float | None = None,
    resamples: int = RESAMPLES,
    source: str = "the corpus",
    dev_source: str = "the dev pairs",
) -> Selection:
    """Choose (pooling, calibration) by dev labels (module docstring). ``corpus``: ``{pooling: corpus vectors}``
    (the same sentences, row for row; or a :class:`~.select.Selector` fitted on them); ``dev``: ``{pooling: the same
    dev labels as vectors}`` (:func:`pooled_dev`, or ``(A, B, scores)`` per pooling); ``candidates``: one list for
    every pooling, or ``{pooling: list}``; the incumbent is ``incumbent`` on ``incumbent_pooling``."""
    poolings = list(corpus)
    if incumbent_pooling not in corpus or set(dev) != set(poolings):
        raise IsotropyError(
            f"choose_pooling: corpus and dev vectors must cover the same poolings, {incumbent_pooling} among them"
        )
    devs = {p: check_dev(dev[p], dev_source) for p in poolings}
    first = devs[incumbent_pooling]
    if any(len(d) != len(first) or type(d) is not type(first) for d in devs.values()):
        raise IsotropyError(f"{dev_source}: every pooling must score the same dev {first.unit}")
    lvl = DEV_LEVEL if level is None else float(level)
    selectors = {p: _selector(corpus[p], candidates, p, seed, source) for p in poolings}
    if incumbent not in selectors[incumbent_pooling].fitted.transforms:
        why, incumbent = f"{incumbent} could not be fitted here, so raw is the incumbent", "raw"
    points, boots = _scores(selectors, devs, *dev_resamples(first, resamples, seed))
    inc = (incumbent_pooling, incumbent)
    conf = {**DEV_RULE, "level": lvl}
    choice, prob, beats = dev_decide(points, boots, inc, conf, raw=(incumbent_pooling, "raw"))
    pool, cand = choice
    label = pooling_label(incumbent, incumbent_pooling)
    col = f"dev-{first.metric}"
    extra = {
        f"{col}, pooling {q}": {n: points.get((q, n)) for n in selectors[q].fitted.transforms} for q in poolings if q != pool
    }
    rule = _rule_text(label, poolings, first.metric, lvl, resamples, len(first), first.unit, conf)
    settings = selectors[pool]._settings(mode="few-label", **first.describe(), level=lvl, resamples=resamples)
    settings.update(score_column=f"{col}, pooling {pool}", poolings=poolings)
    own = {n: points[(pool, n)] for n in selectors[pool].fitted.transforms}
    own_beats = {n: beats[(pool, n)] for n in selectors[pool].fitted.transforms if (pool, n) in beats}
    sel = _outcome(selectors[pool].candidates, selectors[pool].fitted, (cand, prob), col, own, extra, own_beats, rule, settings)
    sel.incumbent, sel.p_beats_raw = label, None if choice == inc else prob
    sel.fired = few_label_fired(label, why, pooling_label(cand, pool), prob, lvl, conf)
    sel.pooling = _record(pool, incumbent_pooling, poolings, points, beats, inc, first.metric)
    return sel


def _record(pool: str, inc_pool: str, poolings: list[str], points: dict, beats: dict, inc: tuple, metric: str) -> dict[str, Any]:
    best = {}
    for q in poolings:
        name = max((n for p, n in points if p == q and np.isfinite(points[(p, n)])), key=lambda n: points[(q, n)])
        best[q] = {"candidate": name, "score": float(points[(q, name)]), "beats": beats.get((q, name))}
    if pool == inc_pool:
        how = f"{pool}, the incumbent pooling (the pooling rule's), kept"
    else:
        how = f"{pool}, chosen over the incumbent pooling {inc_pool} (the pooling rule's) by the dev {metric}"
    said = f"{how}; best dev {metric} per pooling: " + ", ".join(
        f"{q} {b['score']:.2f} ({b['candidate']})" for q, b in best.items()
    )
    return {"chosen": pool, "incumbent": inc_pool, "offered": poolings, "by": "dev", "said": said, "best": best}
