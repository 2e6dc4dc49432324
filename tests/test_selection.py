"""``--method auto``: the selection of a calibration (isotropy.selection).

Synthetic encoders whose right answer is known: a bag-of-words encoder with isotropic word
vectors (auto must keep raw or center) and the same encoder with a dominant, sentence-specific
nuisance along one common direction (auto must remove it). Plus determinism, speed on a
10,000-sentence corpus (one set of moments for every candidate), the evidence's round trip,
and the bad inputs of the issue.
"""

from __future__ import annotations

import json
import warnings
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isotropy.errors import IsotropyError
from isotropy.selection import (
    Selection,
    Selector,
    default_candidates,
    parse_candidate,
    parse_candidates,
    select_calibration,
)
from isotropy.selection.criteria import weighted_rank_correlation
from isotropy.selection.dev import auc_rows
from isotropy.selection.perturb import perturbed_copies


def _unit(seed: int, d: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(d)
    return v / np.linalg.norm(v)


class BagOfWords:
    """A synthetic encoder: a sentence is the mean of fixed random word vectors (seeded by the word's
    crc32, so every process agrees), plus ``nuisance x (3 + 2 z)`` along one common direction, where
    ``z`` is drawn from the WHOLE sentence's crc32: a component that dominates every vector, that no
    word carries, and that a copy with one word less does not share."""

    pooling = "bow"
    max_length = 64

    def __init__(self, d: int = 16, nuisance: float = 0.0):
        self.dim, self.nuisance = d, nuisance
        self.direction = _unit(12345, d)
        self._words: dict[str, np.ndarray] = {}

    def _word(self, w: str) -> np.ndarray:
        if w not in self._words:
            self._words[w] = np.random.default_rng(zlib.crc32(w.encode())).standard_normal(self.dim)
        return self._words[w]

    def clean(self, sentences) -> np.ndarray:
        return np.array([np.mean([self._word(w) for w in s.split()], axis=0) for s in sentences])

    def encode(self, sentences, show_progress=None) -> np.ndarray:
        X = self.clean(sentences)
        if self.nuisance:
            z = np.array([np.random.default_rng(zlib.crc32(s.encode()) + 7).standard_normal() for s in sentences])
            X = X + self.nuisance * (3.0 + 2.0 * z)[:, None] * self.direction
        return X.astype(np.float32)


def _corpus(n: int, vocab: int = 4000, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(vocab)])  # an array: choice() would convert a list on every call
    return [" ".join(rng.choice(words, size=int(rng.integers(6, 14)))) for _ in range(n)]


def _dev_pairs(enc: BagOfWords, n: int, seed: int = 1) -> list[tuple[str, str, float]]:
    """Pairs (sentence, the sentence with some words swapped); gold = the cosine of the clean vectors."""
    rng = np.random.default_rng(seed)
    left = _corpus(n, seed=seed + 10)
    right = []
    for s in left:
        w = s.split()
        k = int(rng.integers(0, len(w)))
        idx = rng.choice(len(w), size=k, replace=False)
        for i in idx:
            w[i] = f"w{int(rng.integers(0, 4000))}"
        right.append(" ".join(w))
    a, b = enc.clean(left), enc.clean(right)
    gold = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return list(zip(left, right, np.round(gold * 5, 2)))


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return _corpus(3000)


# ---------------------------------------------------------------- the right answer, where it is known


def test_isotropic_vectors_keep_raw_or_center(corpus):
    sel = select_calibration(BagOfWords(16), corpus, seed=0)
    assert sel.mode == "label-free"
    assert sel.choice in ("raw", "center"), sel.table()
    assert sel.transform is None or sel.transform.kind == "center"


def _share_along(X: np.ndarray, direction: np.ndarray) -> float:
    Xc = X - X.mean(0)
    return float(((Xc @ direction) ** 2).sum() / (Xc**2).sum())


def test_a_dominant_common_direction_is_removed(corpus):
    enc = BagOfWords(16, nuisance=1.0)
    X = enc.encode(corpus).astype(np.float64)
    assert _share_along(X, enc.direction) > 0.6  # the nuisance holds more variance than all other directions together
    sel = select_calibration(enc, corpus, seed=0, criterion_name="agreement")  # the criterion decides
    assert sel.choice != "raw" and sel.p_beats_raw >= 0.9, sel.table()
    Y = sel.transform.transform(X)
    v = enc.direction @ sel.transform.affine_()[0]  # where the common direction goes
    assert _share_along(Y, v / np.linalg.norm(v)) < 0.2, sel.table()


def test_the_default_label_free_rule_is_the_signal_rule_and_shows_the_evidence(corpus):
    """docs/AUTO.md: no candidate-scoring criterion was safe on held-out tasks; the signal rule decides, the criteria
    are shown as evidence."""
    from isotropy.selection import LABEL_FREE_RULE
    from isotropy.selection.signals import decide_by_signals

    assert LABEL_FREE_RULE["criterion"] is None
    sel = select_calibration(BagOfWords(16, nuisance=1.0), corpus, seed=0)
    assert sel.choice == decide_by_signals(sel.signals, kind="unknown")["choice"] == "raw"  # BagOfWords has no backend
    assert sel.criterion == "signal rule"
    assert (sel.transform is None) == (sel.choice == "raw") and sel.fired and sel.expected and "docs/AUTO.md" in sel.rule
    assert sel.candidate("center").beats_raw is None and not sel.settings["evidence"]  # no criterion unless asked
    shown = select_calibration(BagOfWords(16, nuisance=1.0), corpus, seed=0, evidence=True)  # --evidence
    assert shown.choice == "raw" and shown.candidate("center").beats_raw is not None  # shown, never deciding
    assert {"align-uniform", "graded-deletion", "knn-stability"} <= set(shown.candidate("center").extra)


def test_the_rule_for_search_is_its_own_and_an_unknown_use_is_refused(corpus):
    """``--for search``: the rule read off Cranfield's tuning queries; the split is seeded and disjoint."""
    from isotropy.selection import signals

    for task in signals.TASKS:
        dec = signals.decide_by_signals({}, kind="static", task=task)
        assert dec["choice"] == signals.rule_for(task)["act"]["static"] and task in signals.signal_rule_text(task=task)
        assert signals.decide_by_signals({}, kind="transformer", task=task)["choice"] == "raw"
    tune, held = signals.search_split(225)
    assert len(tune) + len(held) == 225 and not set(tune) & set(held)
    assert (signals.search_split(225)[0] == tune).all()  # the same split every time
    with pytest.raises(IsotropyError, match="--for 'retrieval'"):
        select_calibration(BagOfWords(16), corpus, task="retrieval")


def test_few_label_mode_keeps_raw_on_isotropic_vectors_and_removes_the_direction(corpus):
    iso = BagOfWords(16)
    sel = select_calibration(iso, corpus, dev_pairs=_dev_pairs(iso, 100), seed=0)
    assert sel.mode == "few-label" and sel.criterion == "dev-spearman"
    assert sel.choice in ("raw", "center"), sel.table()
    noisy = BagOfWords(16, nuisance=1.0)
    sel = select_calibration(noisy, corpus, dev_pairs=_dev_pairs(noisy, 100), seed=0)
    assert sel.choice != "raw" and sel.candidate(sel.choice).beats_raw >= 0.9, sel.table()
    assert sel.candidate(sel.choice).score > sel.candidate("raw").score + 5
    # the decision is dev_decide under DEV_RULE on the dev figures Selector.dev_scores gives (what the bench compares)
    from isotropy.selection.dev import DEV_RULE, dev_decide

    assert sel.settings["test"] == DEV_RULE["test"] and sel.settings["level"] == DEV_RULE["level"]
    points, boots = Selector(np.asarray(noisy.encode(corpus)), seed=0).dev_scores(_dev_pairs(noisy, 100), noisy)
    assert dev_decide(points, boots)[0] == sel.choice


def test_binary_dev_labels_are_scored_by_auc(corpus):
    enc = BagOfWords(16, nuisance=1.0)
    pairs = [(a, b, float(g > 2.5)) for a, b, g in _dev_pairs(enc, 200)]
    sel = select_calibration(enc, corpus, dev_pairs=pairs, seed=0)
    assert sel.criterion == "dev-auc"
    assert all(c.score is None or 0 <= c.score <= 100 for c in sel.candidates)


# ---------------------------------------------------------------- determinism, speed, one set of moments


def test_deterministic_under_a_seed(corpus):
    enc = BagOfWords(16, nuisance=0.5)
    one = select_calibration(enc, corpus, seed=3).to_dict()
    two = select_calibration(BagOfWords(16, nuisance=0.5), list(corpus), seed=3).to_dict()
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    other = select_calibration(enc, corpus, seed=4).to_dict()
    assert other["settings"]["seed"] == 4 and [c["name"] for c in other["candidates"]] == [c["name"] for c in one["candidates"]]


def test_a_large_corpus_is_summed_once_into_one_set_of_moments():
    from isotropy.transforms.moments import Moments

    enc = BagOfWords(384)
    sentences = _corpus(4_000, vocab=20_000, seed=5)  # more rows than the 384 dimensions, ten times over
    calls = []
    original = Moments.update

    def counting(self, X, *args, **kwargs):
        calls.append(len(X))
        return original(self, X, *args, **kwargs)

    Moments.update = counting
    try:
        selector = Selector(enc.encode(sentences), seed=0)
        sel = selector.label_free(enc, sentences)
    finally:
        Moments.update = original
    assert sorted(calls) == [2000, 2000]  # the rows are summed once (two halves, merged), never per candidate
    fitted = [t for t in selector.transforms.values() if t is not None]
    assert len(fitted) == len(default_candidates(384)) - 1
    assert len({id(t.moments_) for t in fitted}) == 1  # every candidate solved from the same statistics
    assert sel.choice in selector.transforms


# ---------------------------------------------------------------- the evidence


def test_evidence_round_trips_through_a_saved_record(corpus, tmp_path):
    sel = select_calibration(BagOfWords(16, nuisance=1.0), corpus, seed=0)
    path = sel.save(tmp_path)
    assert path.name == "selection.json"
    back = Selection.load(tmp_path)
    assert back.to_dict() == sel.to_dict()
    assert back.choice == sel.choice and back.scores == pytest.approx(sel.scores)
    text = sel.table()
    assert sel.choice in text and "<- chosen" in text
    assert sel.p_beats_raw is None and "rule that fired:" in text  # the signal rule decided: no bootstrap probability
    assert sel.markdown().count("\n|") == len(sel.candidates) + 2  # header, rule, one row per candidate
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["library"] == "isotropy" and data["kind"] == "selection"
    data["choice"] = "flow"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(IsotropyError, match="not among its candidates"):
        Selection.load(path)


def test_save_never_replaces_a_users_file(corpus, tmp_path):
    sel = select_calibration(BagOfWords(16), corpus[:400], seed=0)
    mine = tmp_path / "mine.json"
    mine.write_text('{"mine": true}\n', encoding="utf-8")
    with pytest.raises(IsotropyError, match="not a selection record"):
        sel.save(mine)
    assert mine.read_text(encoding="utf-8") == '{"mine": true}\n'
    sel.save(mine, force=True)
    assert Selection.load(mine).choice == sel.choice


# ---------------------------------------------------------------- candidates and bad input


def test_default_candidates_scale_with_the_width():
    names = [c.name for c in default_candidates(768)]
    assert names[:2] == ["raw", "center"]
    assert {"abtt-8", "whitening", "whitening-384", "whitening-256", "whitening-shrunk", "soft-0.5"} <= set(names)
    assert "whitening-192" in [c.name for c in default_candidates(384)]


@pytest.mark.parametrize("name", ["flow", "bogus", "whitening-0", "soft-whitening-2"])
def test_unknown_candidates_are_one_clear_error(name):
    with pytest.raises(IsotropyError, match=name.split("-")[0]):
        parse_candidate(name)


def test_a_candidate_list_always_holds_raw_and_checks_sizes():
    assert [c.name for c in parse_candidates("center,abtt-2", 16)] == ["raw", "center", "abtt-2"]
    with pytest.raises(IsotropyError, match="abtt-16"):
        parse_candidates(["abtt-16"], 16)


def test_too_small_a_corpus_skips_candidates_with_a_note():
    enc = BagOfWords(16)
    small = _corpus(12, seed=9)
    sel = select_calibration(enc, small, seed=0)
    skipped = [c for c in sel.candidates if c.note.startswith("skipped")]
    assert {c.name for c in skipped} >= {"whitening", "soft-0.5"}
    assert all("needs at least 17 sentences" in c.note and "12" in c.note for c in skipped if c.name == "whitening")
    assert sel.choice not in {c.name for c in skipped}
    with pytest.raises(IsotropyError, match="too few for every candidate"):
        select_calibration(enc, small, candidates=["whitening"], seed=0)


def test_dev_pairs_are_checked(corpus):
    enc = BagOfWords(16)
    pairs = _dev_pairs(enc, 40)
    with pytest.raises(IsotropyError, match="dev.tsv has 19 pairs"):
        select_calibration(enc, corpus, dev_pairs=pairs[:19], dev_source="dev.tsv")
    with pytest.raises(IsotropyError, match="every gold score is 3"):
        select_calibration(enc, corpus, dev_pairs=[(a, b, 3) for a, b, _ in pairs])
    with pytest.raises(IsotropyError, match="with itself"):
        select_calibration(enc, corpus, dev_pairs=[(a, a, g) for a, _, g in pairs])


def test_label_free_without_an_encoder_keeps_raw_and_says_why(corpus):
    X = BagOfWords(16).encode(corpus)
    sel = select_calibration(X, seed=0)  # the signal rule needs no encoder, and acts only on one it knows
    assert sel.choice == "raw" and "without their encoder" in sel.fired
    sel = select_calibration(X, seed=0, criterion_name="knn-stability", criteria=["knn-stability"])
    assert sel.choice in ("raw", "center")


# ---------------------------------------------------------------- the statistics


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=3, max_size=40), st.integers(0, 2**16))
def test_weighted_rank_correlation_with_unit_weights_is_spearman(gold, seed):
    from scipy.stats import spearmanr

    gold = np.array(gold, dtype=float)
    scores = np.random.default_rng(seed).standard_normal(len(gold)).round(1)
    got = weighted_rank_correlation(scores, gold, np.ones((1, len(gold))))[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on a constant column, and answers NaN
        want = spearmanr(scores, gold).statistic
    if np.isnan(want):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(want, abs=1e-12)


def test_auc_matches_scikit_learn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    s = (y + rng.standard_normal(300)).round(1)
    assert auc_rows(s[None], y)[0] == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_perturbed_copies_delete_words_deterministically():
    sents = ["one two three four five six seven eight nine ten", "single", "a b"]
    one = perturbed_copies(sents, 0.3, seed=1)
    assert one == perturbed_copies(sents, 0.3, seed=1)
    assert len(one[0].split()) == 7 and one[1] == "single" and len(one[2].split()) == 1
    assert set(one[0].split()) <= set(sents[0].split())


# --------------------------------------------------------------------------- the hooks: index build and eval (#16)

WORDS = "cat dog bird river stone cloud music train bread chess rain light paper green quick slow old new".split()


def _sentences(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(n)]


def test_index_build_auto_saves_the_choice_and_evidence(tiny_model_dir, tmp_path):
    from helpers import run_cli
    from isotropy import Index

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(_sentences(120)) + "\n", encoding="utf-8")
    out = tmp_path / "index"
    args = ["index", "build", corpus, "-o", out, "--model", tiny_model_dir, "--max-length", "32", "--method", "auto"]
    code, _, err = run_cli([*args, "--candidates", "raw,center,abtt-1"])
    assert code == 0, err
    assert "<- chosen" in err and "auto (label-free" in err
    index = Index.load(out)
    sel = Selection.from_dict(index.selection)
    assert [c.name for c in sel.candidates] == ["raw", "center", "abtt-1"] and len(index) == 120
    assert (index.transform is None) == (sel.choice == "raw")
    assert sel.choice in err.split("chose ", 1)[1].split(" ", 1)[0]
    # the choice is what queries go through: the first sentence finds itself
    first = corpus.read_text(encoding="utf-8").splitlines()[0]
    assert index.search(first, k=1).ids[0][0] == 0
    code, _, err = run_cli([*args, "--no-whiten", "--force"])
    assert code == 2 and "--method auto chooses the calibration itself: drop --no-whiten" in err


def test_eval_auto_is_a_column_with_its_evidence_in_the_json(tiny_model_dir, tmp_path):
    from isotropy.evaluation import evaluate

    left, right = _sentences(80, 1), _sentences(80, 2)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{i % 5}\n" for i, (a, b) in enumerate(zip(left, right))),
        encoding="utf-8",
    )
    res = evaluate(data=pairs, model=tiny_model_dir, methods=["raw", "center", "auto"], cache=False)
    assert [r.method for r in res.rows] == ["raw", "center", "auto"]
    assert res.settings["max_length"] == 128  # no max_length: the model's own (its 128 positions), as `isotropy eval`
    raw, center, auto = (next(iter(r.scores.values())) for r in res.rows)
    ev = auto.extra["auto"]
    sel = Selection.from_dict(json.loads(json.dumps(res.to_dict()))["rows"][2]["scores"][auto.task]["extra"]["auto"]["selection"])
    assert sel.choice == ev["choice"] and sel.mode == "label-free"
    if ev["choice"] == "raw":
        assert auto.score == pytest.approx(raw.score)
    elif ev["choice"] == "center":
        assert auto.score == pytest.approx(center.score)


def test_analyze_recommends_with_the_signal_rule(tiny_model_dir, tmp_path):
    from isotropy.analysis import analyze
    from isotropy.encoders import Encoder

    enc = Encoder(tiny_model_dir, max_length=32, device="cpu")
    report = analyze(_sentences(150, 3), enc, None, tmp_path / "report", quiet=True, word_level=False, recommend=True)
    rec = json.loads((tmp_path / "report" / "report.json").read_text())["recommendation"]
    assert rec == report["recommendation"] and rec["mode"] == "label-free" and rec["p_beats_raw"] is None
    assert Selection.from_dict(rec["selection"]).choice == rec["choice"]
    assert "Rule:" in rec["paragraph"] and "Expected effect" in rec["paragraph"] and "Recommendation" in rec["paragraph"]
    assert "confidence" not in rec["paragraph"]  # one word, one meaning: p_beats_raw only
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Recommendation" in md and rec["paragraph"] in md
    three = _sentences(3, 4) * 4  # 3 distinct sentences: too few to compare candidates; said, not an error
    tiny = analyze(three, enc, None, quiet=True, word_level=False, recommend=True)
    assert analyze(three, enc, None, quiet=True, word_level=False)["recommendation"] is None  # on request only
    assert tiny["recommendation"]["choice"] is None and "No recommendation" in tiny["recommendation"]["paragraph"]


# ---------------------------------------------------------------- --pooling auto: the pooling chosen too (issue #24)


def _with_noise(enc: BagOfWords, sentences, scale: float) -> np.ndarray:
    """A worse 'pooling' of the same sentences: the clean vectors plus isotropic noise seeded by the sentence, which no
    calibration can remove."""
    noise = np.array([np.random.default_rng(zlib.crc32(s.encode()) + 99).standard_normal(enc.dim) for s in sentences])
    return enc.clean(sentences) + scale * noise


def _pooled(enc: BagOfWords, corpus, pairs, noisy: str) -> tuple[dict, dict]:
    """Two poolings of the same corpus and dev pairs: ``clean`` and ``noisy``, the latter worse."""
    left, right, gold = [p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs]
    vec = {"clean": enc.clean, noisy: lambda s: _with_noise(enc, s, 0.8)}
    return {p: f(corpus) for p, f in vec.items()}, {p: (f(left), f(right), gold) for p, f in vec.items()}


def test_pooling_auto_keeps_the_incumbent_pooling_unless_another_is_clearly_better(corpus):
    from isotropy.selection.pooling_choice import choose_pooling

    enc = BagOfWords(16)
    X, dev = _pooled(enc, corpus[:1500], _dev_pairs(enc, 100), "mean")
    kept = choose_pooling(X, dev, incumbent_pooling="clean")  # the other pooling is worse: the rule's pooling stays
    assert kept.pooling["chosen"] == "clean" and kept.pooling["by"] == "dev" and kept.pooling["offered"] == ["clean", "mean"]
    assert kept.incumbent == "raw on pooling clean" and kept.choice in ("raw", "center"), kept.table()
    won = choose_pooling(X, dev, incumbent_pooling="mean", incumbent="whitening")  # the incumbent's pooling is the worse
    assert won.pooling["chosen"] == "clean" and won.p_beats_raw >= 0.9, won.table()
    best = won.pooling["best"]
    assert best["clean"]["score"] > best["mean"]["score"] + 5 and won.candidate(won.choice).score == best["clean"]["score"]
    assert "replaced the incumbent whitening on pooling mean" in won.fired
    assert {"dev-spearman, pooling mean"} <= set(won.candidate("raw").extra)  # every candidate under the other pooling
    again = Selection.from_dict(json.loads(json.dumps(won.to_dict())))  # the record names the pooling
    assert again.pooling == won.pooling and f"chose {won.choice} on pooling clean" in again.summary()
    assert again.explain()[0].startswith("pooling: clean, chosen over the incumbent pooling mean")


def test_pooling_auto_by_search_labels_reads_every_pooling_off_one_encode():
    """Dev queries' nDCG@10 chooses the pooling too; the dev texts are encoded once for every pooling."""
    from isotropy.selection.dev import check_dev_qrels
    from isotropy.selection.pooling_choice import choose_pooling, pooled_dev

    rng = np.random.default_rng(0)
    docs = {f"d{i}": rng.standard_normal(16) for i in range(40)}
    calls = []

    class TwoPoolings:  # 'good': a query lands on its document; 'bad': anywhere
        def encode_multi(self, sentences, poolings, show_progress=None):
            calls.append(list(poolings))
            near = np.array([docs[s.replace("q", "d")] + 0.3 * rng.standard_normal(16) for s in sentences])
            return {"good": near, "bad": rng.standard_normal((len(sentences), 16))}

    qrels = {f"q{i}": {f"d{i}": 1} for i in range(30)}
    dev = check_dev_qrels([f"q{i}" for i in range(30)], list(docs), qrels, query_ids=list(qrels), doc_ids=list(docs))
    pooled = pooled_dev(dev, TwoPoolings(), ["bad", "good"])
    assert calls == [["bad", "good"]] and pooled["good"].left.shape == (30, 16) and pooled["bad"].right.shape == (40, 16)
    X = rng.standard_normal((500, 16))
    sel = choose_pooling({"bad": X, "good": X + 0.01}, pooled, incumbent_pooling="bad")
    assert sel.pooling["chosen"] == "good" and sel.criterion == "dev-ndcg@10" and sel.p_beats_raw >= 0.9, sel.table()
    assert sel.settings["dev_queries"] == 30
    with pytest.raises(IsotropyError, match="as text"):
        pooled_dev(pooled["good"], TwoPoolings(), ["bad", "good"])


def _boots(gains: dict[str, float], seed: int = 0, resamples: int = 1000) -> tuple[dict, dict]:
    """Dev figures and bootstrap figures of an incumbent ``inc`` (0) and challengers ahead of it by ``gains``, each
    with its own unit-variance noise (independent challengers: the many-comparisons case)."""
    rng = np.random.default_rng(seed)
    boots = {"inc": np.zeros(resamples)}
    for name, g in gains.items():
        z = rng.standard_normal(resamples)
        boots[name] = g + (z - z.mean()) / z.std()
    return {"inc": 0.0, **gains}, boots


def test_dev_decide_family_wise_tests_do_not_switch_on_many_lucky_challengers():
    from isotropy.selection.dev import dev_decide

    # ten challengers each ahead by 1.5 standard errors: each alone beats the incumbent in ~93% of the resamples
    points, boots = _boots({f"c{i}": 1.5 for i in range(10)})
    assert dev_decide(points, boots, "inc", {"test": "each", "level": 0.9})[0] != "inc"
    for test in ("holm", "max-t"):
        choice, p, beats = dev_decide(points, boots, "inc", {"test": test, "level": 0.9})
        assert choice == "inc" and 0 <= p <= 0.1 and set(beats) == set(points) - {"inc"}
    # a challenger clearly ahead passes every test, and the best dev figure among the passing wins
    points, boots = _boots({**{f"c{i}": 1.5 for i in range(10)}, "strong": 6.0})
    for test in ("each", "holm", "max-t"):
        assert dev_decide(points, boots, "inc", {"test": test, "level": 0.9})[0] == "strong"


def test_dev_decide_gives_raw_its_own_bar_and_refuses_an_unknown_test():
    from isotropy.selection.dev import dev_decide

    points, boots = _boots({"raw": 0.4, "other": 0.4})  # each ahead in ~66% of the resamples
    assert dev_decide(points, boots, "inc", {"test": "each", "level": 0.9, "raw_level": None})[0] == "inc"
    assert dev_decide(points, boots, "inc", {"test": "each", "level": 0.9, "raw_level": 0.6})[0] == "raw"
    assert dev_decide(points, boots, "raw", {"test": "each", "level": 0.9, "raw_level": 0.6})[0] == "raw"  # raw kept
    with pytest.raises(IsotropyError, match="unknown few-label test"):
        dev_decide(points, boots, "inc", {"test": "bonferonni"})
