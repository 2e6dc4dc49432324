"""The training-free toolbox (#14): center, abtt, common-component, the soft presets; `fit NAME`
from the registry; aggregation settings (all, mean, wmean) and the `others` fit corpus."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_evaluation import FakeEncoder, _graded_task

from helpers import run_cli, spearman_cos
from isotropy.errors import IsotropyError
from isotropy.evaluation import Pair, Results, Task, evaluate, parse_method
from isotropy.transforms import PRESETS, TRANSFORMS, load_transform, make_transform
from isotropy.transforms.abtt import AllButTheTop, default_components
from isotropy.transforms.center import Center
from isotropy.transforms.common_component import CommonComponentRemoval
from isotropy.transforms.whitening import Whitening


def _data(seed: int, n: int = 300, d: int = 12, offset: float = 2.0) -> np.ndarray:
    """Correlated rows far from the origin (a common direction, as sentence vectors have)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) @ rng.standard_normal((d, d)) + offset * rng.standard_normal(d)
    return X.astype(np.float64)


seeds = st.integers(0, 10_000)


# --------------------------------------------------------------------------- the transforms


@given(seeds)
@settings(max_examples=25, deadline=None)
def test_center_subtracts_the_mean_and_abtt_with_d_0_is_center(seed):
    X = _data(seed)
    Y = Center().fit(X).transform(X)
    np.testing.assert_allclose(Y, X - X.mean(axis=0), atol=1e-10)
    np.testing.assert_array_equal(AllButTheTop(n_components=0).fit(X).transform(X), Y)
    assert np.allclose(Center().fit(X).inverse_transform(Y), X)


@given(seeds, st.integers(1, 5))
@settings(max_examples=25, deadline=None)
def test_abtt_leaves_no_variance_along_the_removed_directions(seed, D):
    X = _data(seed)
    t = AllButTheTop(n_components=D).fit(X)
    Y = t.transform(X)
    U = t.components_  # D x d
    assert U.shape == (D, X.shape[1]) and np.allclose(U @ U.T, np.eye(D))
    assert np.abs(np.var(Y @ U.T, axis=0)).max() < 1e-18 * max(1.0, np.var(X).max())
    assert np.allclose(Y.mean(axis=0), 0, atol=1e-10)
    # independent: the top D principal axes of the centred rows (SVD), whatever their signs
    _, _, Vt = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)
    np.testing.assert_allclose(np.abs(U @ Vt[:D].T), np.eye(D), atol=1e-6)
    # the reference gist's variant, (x - mean) - U U^T x, differs by one constant vector
    gist = (X - X.mean(axis=0)) - X @ U.T @ U
    diff = Y - gist
    np.testing.assert_allclose(diff, np.broadcast_to(diff[0], diff.shape), atol=1e-8)
    np.testing.assert_allclose(diff[0], U.T @ U @ X.mean(axis=0), atol=1e-8)


def test_abtt_default_is_the_paper_rule_of_thumb_and_d_at_least_d_is_an_error():
    assert [default_components(d) for d in (16, 300, 384, 768, 1024)] == [1, 3, 4, 8, 10]
    X = _data(0, d=16)
    assert AllButTheTop().fit(X).n_components_ == 1
    for bad, words in ((16, "D >= d"), (20, "all 16 dimensions"), (-1, "0 or more"), (True, "integer"), (2.5, "integer")):
        with pytest.raises(IsotropyError, match=words):
            AllButTheTop(n_components=bad).fit(X)
    with pytest.raises(IsotropyError, match="only 2 with a non-zero eigenvalue"):
        AllButTheTop(n_components=3).fit(X[:3])  # 3 centred rows span 2 directions


@given(seeds, st.integers(1, 3))
@settings(max_examples=20, deadline=None)
def test_common_component_removes_the_top_singular_vectors_of_the_uncentred_matrix(seed, k):
    from sklearn.decomposition import TruncatedSVD

    X = _data(seed)
    t = CommonComponentRemoval(n_components=k).fit(X)
    Y = t.transform(X)
    U = t.components_
    assert np.abs(Y @ U.T).max() < 1e-9 * np.abs(X).max()  # nothing left along the removed vectors
    np.testing.assert_allclose(Y, X - X @ U.T @ U, atol=1e-9)  # SIF's remove_pc, no centring
    svd = TruncatedSVD(n_components=k, algorithm="arpack", random_state=0).fit(X)  # SIF's compute_pc, raw matrix
    np.testing.assert_allclose(np.abs(U @ svd.components_.T), np.eye(k), atol=1e-6)
    assert not np.allclose(U[0], AllButTheTop(n_components=1).fit(X).components_[0], atol=1e-3)  # not the centred PC


@pytest.mark.parametrize("kind", ["center", "abtt", "common-component", "soft-0.5"])
def test_stream_merge_and_distributed_fit_agree_with_fit(kind, tmp_path):
    from isotropy.transforms.moments import Moments

    X = _data(3, n=500)
    whole = make_transform(kind).fit(X)
    streamed = make_transform(kind)
    for chunk in np.array_split(X, 7):
        streamed.partial_fit(chunk)
    a, b = make_transform(kind).fit(X[:200]), make_transform(kind).fit(X[200:])
    merged = a.merge(b)
    dist = type(whole).from_moments(Moments().update(X[:123]).merge(Moments().update(X[123:])), **whole.get_params())
    for other in (streamed, merged, dist):
        np.testing.assert_allclose(other.transform(X), whole.transform(X), atol=1e-8)
    whole.save(tmp_path / "t")
    assert np.array_equal(load_transform(tmp_path / "t").transform(X), whole.transform(X))
    A, c = whole.affine_()
    np.testing.assert_allclose(X @ A + c, whole.transform(X), atol=1e-8)


def test_a_saved_removal_with_an_edited_config_is_refused(tmp_path):
    X = _data(1)
    AllButTheTop(n_components=2).fit(X).save(tmp_path / "a")
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    cfg["n_samples_seen"] = 7
    (tmp_path / "a" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(IsotropyError, match="config.json says n_samples_seen 7"):
        load_transform(tmp_path / "a")
    cfg["n_samples_seen"], cfg["params"] = 300, {"n_components": 12}
    (tmp_path / "a" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(IsotropyError, match="D >= d"):
        load_transform(tmp_path / "a")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_whitening_with_their_power(name):
    X = _data(5)
    power = PRESETS[name][1]["power"]
    t = make_transform(name)
    assert type(t) is Whitening and t.power == power
    np.testing.assert_array_equal(t.fit(X).transform(X), Whitening(power=power).fit(X).transform(X))
    m = parse_method(name)
    assert m.kind == "whitening" and m.power == power and m.name == name
    assert make_transform(name, n_components=4, shrinkage="auto").n_components == 4
    with pytest.raises(IsotropyError, match=f"{name} fixes power"):
        make_transform(name, power=1.0)


def test_method_names_cover_the_registry():
    assert parse_method("center").kind == "center" and parse_method("abtt").n_components is None
    assert parse_method("ABTT-8") == parse_method("abtt-8") and parse_method("abtt-8").n_components == 8
    assert parse_method("common-component-2").n_components == 2
    assert parse_method("whitening-256").n_components == 256  # today's names unchanged
    with pytest.raises(IsotropyError) as exc:
        parse_method("pca")
    for form in ("center", "abtt-K", "common-component", "soft-0.25", "soft-whitening-BETA", "flow"):
        assert form in str(exc.value)
    with pytest.raises(IsotropyError, match="unknown method 'flow-3'"):
        parse_method("flow-3")


# --------------------------------------------------------------------------- `isotropy fit NAME`


def test_fit_has_a_command_for_every_registered_transform_and_preset(tmp_path):
    code, out, _ = run_cli(["fit", "--help"])
    assert code == 0
    for name in [*TRANSFORMS, *PRESETS]:
        assert name in out
    X = _data(2, n=400, d=16).astype(np.float32)
    np.save(tmp_path / "v.npy", X)
    for name, extra in (("center", []), ("abtt", ["--n-components", "3"]), ("common-component", []), ("soft-0.25", [])):
        code, _, err = run_cli(["fit", name, tmp_path / "v.npy", "--output", tmp_path / name, *extra])
        assert code == 0, err
        assert err.startswith("wrote ") and str(tmp_path / name) in err
        params = {"n_components": 3} if name == "abtt" else {}
        expected = make_transform(name, **params).fit(X)
        np.testing.assert_allclose(load_transform(tmp_path / name).transform(X), expected.transform(X), atol=1e-6)
    code, _, err = run_cli(["fit", "soft-0.5", tmp_path / "v.npy", "-o", tmp_path / "s", "--shrinkage", "auto", "-n", "1"])
    assert code == 2 and "-n" in err  # options come from the class: no short ones


def test_fit_whitening_and_flow_keep_their_options():
    import click
    from typer.main import get_command

    from isotropy.cli import app

    root = get_command(app)
    fit = root.get_command(click.Context(root), "fit")  # the root builds its commands when asked (a lazy group)

    def opts(name):  # get_command: the lazily built fit commands too
        return sorted(o for p in fit.get_command(click.Context(fit), name).params for o in p.opts)

    assert opts("whitening") == sorted(
        ["vectors", "--output", "-o", "--n-components", "-k", "--power", "--shrinkage", "--method", "--progress"]
        + ["--engine", "--input", "--address", "--model", "-m", "--pooling", "-p", "--max-length", "--batch-size", "--force"]
    )
    assert opts("flow") == sorted(
        ["vectors", "--output", "-o", "--levels", "--depth", "--hidden", "--coupling", "--epochs", "--lr", "--batch-size"]
        + ["--seed", "--progress", "--force"]
    )
    assert opts("abtt") == sorted(["vectors", "--output", "-o", "--n-components", "-k", "--progress", "--force"])


# --------------------------------------------------------------------------- aggregation


def _year(seed: int = 0) -> tuple[Task, dict]:
    """A SemEval-like year: three subsets of different sizes and difficulty."""
    rng = np.random.default_rng(seed)
    signal, pairs = {}, []
    for name, n, noise in (("news", 40, 0.5), ("forum", 25, 2.0), ("images", 15, 1.0)):
        for i in range(n):
            d = rng.normal(size=8) * 3
            share = rng.uniform(0, 1)
            a, b = f"{name}-a{i}", f"{name}-b{i}"
            signal[a], signal[b] = d, d * share + rng.normal(size=8) * noise
            pairs.append(Pair(a, b, float(share * 5), name))
    return Task("STS-99", {"test": pairs}, aggregated=True), signal


def test_aggregate_all_mean_wmean_are_what_the_papers_compute():
    task, signal = _year()
    enc = FakeEncoder(signal=signal)
    default = evaluate([task], encoder=enc, methods=["raw", "center"], cache=False)
    by = {
        how: evaluate([task], encoder=enc, methods=["raw", "center"], aggregate=how, cache=False)
        for how in ("all", "mean", "wmean")
    }
    a = np.stack([enc._vec(p.s1, "cls") for p in task.eval_pairs])
    b = np.stack([enc._vec(p.s2, "cls") for p in task.eval_pairs])
    gold = np.array([p.score for p in task.eval_pairs])
    sub = np.array([p.subset for p in task.eval_pairs])
    per = {s: spearman_cos(a[sub == s], b[sub == s], gold[sub == s]) for s in ("news", "forum", "images")}
    counts = {s: int((sub == s).sum()) for s in per}
    assert by["all"].score("cls", "raw", "STS-99") == pytest.approx(spearman_cos(a, b, gold), abs=1e-9)
    assert by["mean"].score("cls", "raw", "STS-99") == pytest.approx(np.mean(list(per.values())), abs=1e-9)
    wmean = sum(per[s] * counts[s] for s in per) / sum(counts.values())  # SentEval: np.average(weights=nsamples)
    assert by["wmean"].score("cls", "raw", "STS-99") == pytest.approx(wmean, abs=1e-9)
    for method in ("raw", "center"):
        sc = default.row("cls", method).scores["STS-99"]
        assert by["all"].score("cls", method, "STS-99") == sc.score  # today's pooled figure
        assert by["mean"].score("cls", method, "STS-99") == sc.extra["subset_mean"]  # today's subset_mean
        for how in ("all", "mean", "wmean"):
            assert default.with_aggregate(how).score("cls", method, "STS-99") == by[how].score("cls", method, "STS-99")
    assert "aggregate wmean: STS-99 = mean of the per-subset correlations weighted by their pair counts" in by["wmean"].caption()
    assert by["mean"].settings["aggregate"] == "mean" and default.settings["aggregate"] == "all"


def test_a_task_of_genres_is_one_correlation_in_every_setting():
    task, signal = _graded_task()  # subsets x/y, like STS-B's genres: not aggregated
    enc = FakeEncoder(signal=signal)
    scores = {
        h: evaluate([task], encoder=enc, methods=["raw"], aggregate=h, cache=False).score("cls", "raw", "toy")
        for h in ("all", "wmean")
    }
    assert scores["all"] == scores["wmean"]
    with pytest.raises(IsotropyError, match="unknown aggregate 'median'; choose all"):
        evaluate([task], encoder=enc, methods=["raw"], aggregate="median", cache=False)


def test_cli_aggregate_reproduces_the_pooled_figure_and_the_subset_mean(tmp_path):
    rng = np.random.default_rng(0)
    words = ["cat", "dog", "sun", "car", "tree", "rain", "bread", "music", "river", "code"]
    lines = []
    for i in range(60):
        a = " ".join(rng.choice(words, 4))
        b = " ".join(rng.choice(words, 4))
        lines.append(json.dumps({"sentence1": a, "sentence2": b, "score": float(i % 6), "subset": ["x", "y", "z"][i % 3]}))
    (tmp_path / "year.jsonl").write_text("\n".join(lines) + "\n")
    out = {}
    for how in (None, "all", "mean", "wmean"):
        name = how or "default"
        args = ["eval", "--data", tmp_path / "year.jsonl", "--method", "raw", "--method", "abtt", "-o", tmp_path / f"{name}.json"]
        args += ["--cache-dir", tmp_path / "cache"] + (["--aggregate", how] if how else [])
        code, _, err = run_cli(args)
        assert code == 0, err
        out[name] = json.loads((tmp_path / f"{name}.json").read_text())
    for r in range(2):
        base = out["default"]["rows"][r]["scores"]["year"]
        assert out["all"]["rows"][r]["scores"]["year"]["score"] == base["score"]
        assert out["mean"]["rows"][r]["scores"]["year"]["score"] == base["extra"]["subset_mean"]
        assert out["wmean"]["rows"][r]["scores"]["year"]["score"] == base["extra"]["subset_wmean"]
    assert out["wmean"]["settings"]["aggregate"] == "wmean" and "aggregate wmean" in (tmp_path / "wmean.md").read_text()
    assert (
        Results.load(tmp_path / "default.json").with_aggregate("mean").to_markdown()
        == Results.load(tmp_path / "mean.json").to_markdown()
    )


# --------------------------------------------------------------------------- fit on the other tasks


def _tasks_sharing_sentences():
    rng = np.random.default_rng(4)
    signal, tasks = {}, []
    for t in range(3):
        pairs = []
        for i in range(30):
            a, b = f"t{t} a{i}", f"t{t} b{i}"
            if t == 2 and i < 5:
                a = f"t0  A{i}"  # the same sentence as task 0's, spaced and cased differently
            d = rng.normal(size=8) * 3
            share = rng.uniform(0, 1)
            signal.setdefault(a, d)
            signal[b] = signal[a] * share
            pairs.append(Pair(a, b, float(share * 5), ""))
        tasks.append(Task(f"T{t}", {"test": pairs}))
    return tasks, signal


def test_fit_on_others_never_fits_on_the_test_task_and_counts_the_overlap():
    tasks, signal = _tasks_sharing_sentences()
    enc = FakeEncoder(signal=signal)
    res = evaluate(tasks, encoder=enc, methods=["raw", "abtt-2", "whitening"], fit_on="others", cache=False)
    held0 = {" ".join(s.split()).casefold() for s in tasks[0].sentences()}
    fit = [s for t in tasks[1:] for p in t.pairs() for s in (p.s1, p.s2) if " ".join(s.split()).casefold() not in held0]
    assert len(fit) == 2 * 60 - 5  # task 2's five copies of task 0's sentences are removed
    info = res.settings["tasks"]["T0"]
    assert info["overlap_removed"] == 5 and info["fit_sentences"] == len(fit) and info["fit_sources"] == ["T1", "T2"]
    assert res.settings["tasks"]["T1"]["overlap_removed"] == 0
    # the score is the one of a transform fitted on exactly those rows
    F = np.stack([enc._vec(s, "cls") for s in fit])
    test = tasks[0].eval_pairs
    a, b = (np.stack([enc._vec(getattr(p, side), "cls") for p in test]) for side in ("s1", "s2"))
    gold = [p.score for p in test]
    for method, t in (("abtt-2", AllButTheTop(n_components=2)), ("whitening", Whitening())):
        t.fit(F)
        assert res.score("cls", method, "T0") == pytest.approx(spearman_cos(t.transform(a), t.transform(b), gold), abs=1e-6)
    assert "others (each task's transforms fitted on the sentences of the other tasks" in res.caption()
    assert "T0 5" in res.caption()


def test_fit_on_others_needs_another_task():
    task, signal = _graded_task()
    with pytest.raises(IsotropyError, match=r"only one task is evaluated \(toy\): nothing to fit on"):
        evaluate([task], encoder=FakeEncoder(signal=signal), methods=["raw", "center"], fit_on="others", cache=False)
    # raw alone fits nothing: no corpus needed
    evaluate([task], encoder=FakeEncoder(signal=signal), methods=["raw"], fit_on="others", cache=False)


def test_methods_are_checked_against_the_model_before_encoding():
    task, signal = _graded_task()
    enc = FakeEncoder(signal=signal)
    with pytest.raises(IsotropyError, match=r"method abtt-8 on the model's 8-dimensional vectors: abtt: n_components=8"):
        evaluate([task], encoder=enc, methods=["abtt-8"], cache=False)
    assert enc.calls == []


# --------------------------------------------------------------------------- real data


@pytest.mark.slow
def test_center_and_abtt_barely_move_last_avg_on_stsb(stsb_mean):
    """Fitted on the fixture's STS-B sentences (conftest.py: half of train and dev, all of test), scored on its test
    split, default model's own pooling."""
    d = stsb_mean
    raw = spearman_cos(d["a"], d["b"], d["gold"])

    def score(t):
        t.fit(d["fit"])
        return spearman_cos(t.transform(d["a"]), t.transform(d["b"]), d["gold"])

    # Measured on every STS-B sentence: raw 82.03, center 82.25, abtt 81.09 (D = 4, the paper's d/100 rule; D = 1,
    # 2, 3 give 82.60, 82.44, 81.93); on the fixture's sentences center 82.21, abtt 81.03. The bound (lose
    # at most 0.5) holds for center and not for abtt at its
    # default D; the default is the paper's rule, not one chosen on these labels, so the bound for abtt
    # is the measured loss with a margin, and docs/RESULTS.md reports the loss.
    assert score(Center()) >= raw - 0.5
    assert score(AllButTheTop()) >= raw - 1.5
    assert AllButTheTop().fit(d["fit"]).n_components_ == 4
