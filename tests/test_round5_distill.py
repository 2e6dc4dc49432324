"""Hostile input, round 5 (issue #42): the distill surface, the token regression and the static twins.

Each test names the audit ids it holds (``../shared/audits/round5.md``). The distill runs use the tiny random
DistilBERT teacher (``tiny_model_dir``) with the vocabulary pass replaced by a random table over the default
model's tokenizer (what model2vec's distill returns, as tests/test_tokencal.py does): the corpus pass, the fit
and the folder writer run for real, in seconds.
"""

from __future__ import annotations

import copy
import json
import os
import signal

import numpy as np
import pytest

from helpers import run_cli
from isotropy.errors import IsotropyError
from isotropy.transforms.token_regression import TokenRegression

LONG = "zzqqxx " * 600 + "man " * 5  # past max_length 512 tokens: 'man' is cut off (S5-010)
LONG_WORDS = "international " * 230 + "man dog cat " * 20  # past 512 x 6 characters (model2vec's first cut) first
ORDINARY = ["a man plays the guitar", "the cat sat on the mat .", "Two dogs run through a field near the river."]
UNKNOWN_ONLY = ["ab" * 60, "\U0001f600 \U0001f389", "\u2603 \u2744"]  # a 120-character word, emoji: [UNK] only
MIXED = ["man \U0001f600 dog", "[UNK] man"]  # known and unknown tokens


@pytest.fixture(scope="module")
def tiny_static():
    """What model2vec's distill returns (a StaticModel over the default model's tokenizer, ``normalize: true``,
    the teacher recorded by its absolute path), with a random 16-d table: the [UNK] row is not zero."""
    StaticModel = pytest.importorskip("model2vec").StaticModel
    from tokenizers import Tokenizer

    from isotropy.encoders import default_model_path

    tok = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    rng = np.random.default_rng(0)
    table = (rng.standard_normal((tok.get_vocab_size(), 16)) + 0.5).astype(np.float32)
    model = StaticModel(table, tok, normalize=True, config={"tokenizer_name": "/an/absolute/path/teacher", "normalize": True})
    assert model.unk_token_id is not None and np.abs(table[model.unk_token_id]).sum() > 0
    return model


@pytest.fixture
def fake_pass(tiny_static, monkeypatch):
    """distill's vocabulary pass replaced by a copy of ``tiny_static`` (the rest runs for real)."""
    import isotropy.distill.run as mod

    monkeypatch.setattr(mod, "distill_static", lambda model, dims, show: copy.deepcopy(tiny_static))


@pytest.fixture
def no_pass(monkeypatch):
    """A vocabulary pass that must not run: every refusal below comes before it."""
    import isotropy.distill.run as mod

    def boom(*args, **kwargs):
        raise AssertionError("the vocabulary pass ran before the refusal")

    monkeypatch.setattr(mod, "distill_static", boom)


VOCAB = (
    "man woman child dog cat bird horse guitar piano music song river lake city street house garden tree flower "
    "rain snow storm sun road train car bread cheese apple coffee doctor teacher market school book paper"
).split()


def corpus_lines(n: int, seed: int = 0) -> list[str]:
    """``n`` seeded lines over more words than the table's 16 dimensions (so the token fit moves rows)."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(VOCAB, size=int(rng.integers(3, 10)))) for _ in range(n)]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "c.txt"
    path.write_text("\n".join(corpus_lines(60)) + "\n", encoding="utf-8")
    return path


def _isotropy_json(folder) -> dict:
    return json.loads((folder / "isotropy.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- W1, U2: standard input read once


@pytest.mark.parametrize("lines", [30, 5])  # more than the look-ahead (W1), fewer (U2)
def test_distill_reads_every_line_of_standard_input(lines, fake_pass, tiny_model_dir, tmp_path, monkeypatch):
    """S1-011, S1-012: the pre-check's look-ahead (here 8 sentences, 4,096 by default) is handed on to the fit."""
    import isotropy.distill.run as mod

    monkeypatch.setattr(mod, "CHECK_AHEAD", 8)
    text = "\n".join(corpus_lines(lines, seed=1)) + "\n"
    out = tmp_path / "d"
    args = ["distill", "-o", out, "-m", tiny_model_dir, "--dims", "16", "--corpus", "-", "--spans", "none", "--lam", "1"]
    code, _, err = run_cli(args, input=text)
    assert code == 0, err
    fit = _isotropy_json(out)["distill"]["corpus_fit"]
    assert fit["sentences"] == lines and fit["corpus"] == "standard input"


def test_a_corpus_head_read_ahead_is_streamed_first(monkeypatch):
    import io
    import sys

    from isotropy.calibration.corpus import Corpus

    lines = [f"line {i}" for i in range(10)]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(("\n".join(lines) + "\n\n").encode())))
    source = Corpus("-")
    assert source.head(3) == lines[:3] and source.head(2) == lines[:2]
    assert [s for chunk in source.chunks(4) for s in chunk] == lines


@pytest.mark.parametrize("method", ["center", "auto"])
def test_calibrate_reads_every_line_of_standard_input(method, fake_pass, tiny_model_dir, tmp_path):
    """The same question for calibrate's corpus '-' (a static model: seconds): it is read once, whole."""
    code, _, err = run_cli(["distill", "-o", tmp_path / "s", "-m", tiny_model_dir, "--dims", "16"])
    assert code == 0, err
    text = "\n".join(corpus_lines(50, seed=2)) + "\n"
    out = tmp_path / "cal"
    code, _, err = run_cli(["calibrate", "-", "-o", out, "--model", tmp_path / "s", "--method", method], input=text)
    assert code == 0, err
    cal = _isotropy_json(out)["calibration"]
    assert cal["corpus"] == "standard input" and cal["fit"]["n_sentences"] == 50, cal["fit"]


# --------------------------------------------------------------------------- W2, U36, U37: three loaders, one folder


def _three(folder, sentences):
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

    from isotropy.encoders import Encoder

    ours = Encoder(str(folder)).encode(sentences).astype(np.float64)
    m2v = StaticModel.from_pretrained(str(folder)).encode(sentences).astype(np.float64)
    st = SentenceTransformer(str(folder / "sentence-transformers"), device="cpu").encode(sentences).astype(np.float64)
    _agree(Encoder(str(folder / "sentence-transformers")).encode(sentences), st, np.arange(len(sentences)))  # the twin's
    return ours, m2v, st


def _agree(a, b, rows):
    scale = np.abs(a).max()
    np.testing.assert_allclose(a[rows], b[rows], rtol=0, atol=1e-5 * scale)


def _check_three_loaders(folder):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "sentence-transformers" / "tokenizer.json"))
    chars = 512 * int(np.median([len(t) for t in tok.get_vocab()]))  # model2vec's first cut
    assert chars < len(LONG_WORDS) and len(LONG_WORDS.split()) < 512  # one token a word: only the cut binds
    probe = ORDINARY + UNKNOWN_ONLY + [LONG_WORDS, LONG, LONG_WORDS[:chars]] + MIXED
    ours, m2v, st = _three(folder, probe)
    rows = np.arange(len(probe) - len(MIXED))
    _agree(ours, m2v, np.arange(len(probe)))  # model2vec: the same vectors, norms included, on every sentence
    _agree(ours, st, rows)  # the twin: the same on every sentence without unknown tokens, or with nothing else
    assert np.all(np.linalg.norm(ours[len(ORDINARY) : len(ORDINARY) + len(UNKNOWN_ONLY)], axis=1) == 0)
    at = len(ORDINARY) + len(UNKNOWN_ONLY)
    assert np.linalg.norm(ours[at + 1]) > 0  # the long line's first 512 tokens are known
    _agree(ours[[at]], ours[[at + 2]], [0])  # the character cut binds first, in all three
    man = tok.token_to_id("man")  # (and it matters: without the cut, 'man' is among the first 512 tokens)
    assert man not in tok.encode(LONG_WORDS, add_special_tokens=False).ids
    assert man in Tokenizer.from_file(str(folder / "tokenizer.json")).encode(LONG_WORDS, add_special_tokens=False).ids
    # a sentence of n known and k unknown tokens: the twin averages the zero [UNK] row too, n/(n+k) of the vector
    unk = tok.token_to_id("[UNK]")
    for i, s in enumerate(MIXED, start=len(probe) - len(MIXED)):
        ids = tok.encode(s, add_special_tokens=False).ids
        n, k = sum(t != unk for t in ids), sum(t == unk for t in ids)
        assert n > 0 and k > 0
        np.testing.assert_allclose(st[i], ours[i] * n / (n + k), rtol=0, atol=1e-5 * np.abs(ours[i]).max())
    config = json.loads((folder / "config.json").read_text())
    assert config["normalize"] is False and config["max_length"] == 512  # S5-013
    assert json.loads((folder / "sentence-transformers" / "modules.json").read_text())[-1]["type"].endswith("StaticEmbedding")
    assert tok.truncation["max_length"] == 512  # S5-010, saved where StaticEmbedding reads it back


def test_three_loaders_of_a_plain_distilled_folder_agree(fake_pass, tiny_model_dir, tmp_path):
    """S5-009, S5-010, S5-013: isotropy, model2vec and SentenceTransformer(folder/sentence-transformers)."""
    out = tmp_path / "plain"
    code, _, err = run_cli(["distill", "-o", out, "-m", tiny_model_dir, "--dims", "16"])
    assert code == 0, err
    _check_three_loaders(out)


def test_three_loaders_of_a_fitted_distilled_folder_and_of_its_calibration_agree(
    fake_pass, tiny_model_dir, corpus_file, tmp_path
):
    """The same after a token fit, and for calibrate's twin of that folder (its truncation too, S5-010)."""
    out = tmp_path / "fitted"
    args = ["distill", "-o", out, "-m", tiny_model_dir, "--dims", "16", "--corpus", corpus_file, "--spans", "none"]
    code, _, err = run_cli(args)
    assert code == 0, err
    _check_three_loaders(out)
    cal = tmp_path / "cal"
    code, _, err = run_cli(["calibrate", corpus_file, "-o", cal, "--model", out, "--method", "center", "--no-progress"])
    assert code == 0, err
    _check_three_loaders(cal)


# --------------------------------------------------------------------------- U10: a portable teacher name


def test_the_folder_records_the_teacher_by_a_portable_name(fake_pass, tiny_model_dir, tmp_path):
    """S1-066: config.json's tokenizer_name, the card and isotropy.json name the teacher, not a path here."""
    out = tmp_path / "named"
    code, _, err = run_cli(["distill", "-o", out, "-m", tiny_model_dir, "--dims", "16"])
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["tokenizer_name"] == tiny_model_dir.name == _isotropy_json(out)["distill"]["teacher"]
    for name in ("config.json", "README.md", "isotropy.json"):
        text = (out / name).read_text(encoding="utf-8")
        assert str(tiny_model_dir) not in text and "/an/absolute/path" not in text, name


# --------------------------------------------------------------------------- U9: quiet off a terminal


def test_no_model2vec_bar_or_normalize_note_off_a_terminal(fake_pass, tiny_model_dir, corpus_file, tmp_path, caplog):
    """S1-065: progress only on a terminal (model2vec's tqdm bar wrapped), no 'Set normalization' note."""
    import logging

    import model2vec.distill.inference as inference

    from isotropy.distill.run import _quiet

    with _quiet(None):  # stderr is not a terminal under pytest
        assert inference.tqdm(total=3).disable
    with caplog.at_level(logging.INFO):
        args = ["distill", "-o", tmp_path / "q", "-m", tiny_model_dir, "--dims", "16", "--corpus", corpus_file]
        code, _, err = run_cli([*args, "--spans", "none"])
    assert code == 0, err
    assert err.strip().splitlines() == [
        f"wrote the static model {tmp_path / 'q'} (model2vec folder, token rows fitted on the corpus)"
    ]
    assert not [r for r in caplog.records if "normalization" in r.getMessage()]


# --------------------------------------------------------------------------- refusals before the vocabulary pass


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--address", "tcp://127.0.0.1:1"], "--address applies only with --engine"),  # S1-045
        (["--engine", "dask", "--address", "not a url"], "cannot use the Dask scheduler address 'not a url'"),  # S1-047
        (["--engine", "dask", "--address", "tcp://127.0.0.1:1"], "cannot reach the Dask scheduler at tcp://127.0.0.1:1"),
        (["--engine", "spark"], "'spark' is not one of 'dask'"),  # the option's own check
    ],
)
def test_cluster_options_are_checked_before_the_vocabulary_pass(args, says, no_pass, tiny_model_dir, corpus_file, tmp_path):
    """S1-045, S1-046, S1-047, S7-026: one line at once, not after minutes of work."""
    code, _, err = run_cli(
        ["distill", "-o", tmp_path / "x", "-m", tiny_model_dir, "--dims", "16", "--corpus", corpus_file, *args]
    )
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x").exists()


def test_a_static_model_as_teacher_is_one_line(no_pass, tiny_model_dir, tmp_path):
    """S1-057, S1-058: GloVe, a distilled folder and its twin need a transformer teacher; no network message."""
    from isotropy.distill.run import write_distilled

    folder = tmp_path / "static"
    write_distilled(folder, _static_for(tiny_model_dir), {"teacher": "tiny", "dims": 4}, False)
    for model in ("glove-6b-50d", folder, folder / "sentence-transformers"):
        code, _, err = run_cli(["distill", "-o", tmp_path / "x", "-m", model])
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "needs a transformer teacher" in err and f"cannot distill '{model}'" in err, err


def _static_for(tiny_model_dir):
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    return StaticModel(np.ones((tok.get_vocab_size(), 4), np.float32), tok, normalize=False)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"spans": 123}, "spans must be span kind names"),  # S7-025
        ({"strength_by": "bogus"}, "--strength-by must be one of"),  # S7-026
        ({"engine": "spark"}, "unknown engine 'spark'"),
        ({"corpus": []}, "the corpus is empty"),  # S7-028
        ({"corpus": ["same", "same"]}, "repeats one sentence"),
    ],
)
def test_python_distill_refuses_bad_arguments_before_work(kwargs, says, no_pass, tiny_model_dir, tmp_path):
    from isotropy.distill import distill

    kwargs = {"corpus": ["one line", "another line"], **kwargs}
    with pytest.raises(IsotropyError, match=says) as info:
        distill(tmp_path / "x", tiny_model_dir, dims=16, **kwargs)
    assert "\n" not in str(info.value) and not (tmp_path / "x").exists()


# --------------------------------------------------------------------------- U6: an absurd strength


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_an_absurd_strength_gives_the_prior_and_says_so(fake_pass, tiny_model_dir, corpus_file, tmp_path):
    """S1-055: --lam 1e300 solves to its limit, the prior (the mapped table), with a note; no numpy warning."""
    out = tmp_path / "lam"
    args = ["distill", "-o", out, "-m", tiny_model_dir, "--dims", "16", "--corpus", corpus_file, "--spans", "none"]
    code, _, err = run_cli([*args, "--lam", "1e300"])
    assert code == 0, err
    assert "left every row at its prior" in err and "Warning" not in err
    assert _isotropy_json(out)["distill"]["corpus_fit"]["tokens"]["at_prior"] is True


# --------------------------------------------------------------------------- the token regression (W8, W9, U6, U42, U43)


def _regression(V=50, d=8, seed=0):
    rng = np.random.default_rng(seed)
    t = TokenRegression(V, d).partial_fit(rng.integers(0, V, 200), np.full(40, 5), rng.standard_normal((40, d)))
    return t, rng.standard_normal((V, d))


def test_a_nan_in_the_prior_or_the_projection_is_named():
    """S7-010, S7-011: not a 'fit' that is the prior itself."""
    t, prior = _regression()
    prior[2, 3] = np.nan
    with pytest.raises(IsotropyError, match=r"the prior table has a NaN or infinite value in row 2 \(0-based\)"):
        t.solve(prior, 1.0)
    prior[2, 3] = np.inf
    with pytest.raises(IsotropyError, match="row 2"):
        t.solver(prior)
    P = np.eye(8)[:, :2].copy()
    P[5, 1] = np.nan
    with pytest.raises(IsotropyError, match=r"the projection P has a NaN or infinite value in row 5"):
        t.project(P)


def test_a_huge_strength_solves_to_the_prior_without_a_warning():
    """S1-055: the limit of the solution, exactly; a strength near it moves rows by less than it."""
    import warnings

    t, prior = _regression()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for lam in (1e300, 1e30, float(np.finfo(np.float64).max)):
            E, info = t.solve(prior, lam)
            assert np.array_equal(E, prior) and info["at_prior"] and info["iterations"] == 0
        E, info = t.solve(prior, 1e4, rtol=1e-9, maxiter=500, dtype=np.float64)
        assert "at_prior" not in info and 0 < np.abs(E - prior).max() < 1e-2


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda t, p: TokenRegression("5", 8), "vocabulary size of a token regression must be an integer, got '5'"),
        (lambda t, p: TokenRegression(5.7, 8), "must be an integer, got 5.7"),
        (lambda t, p: TokenRegression(True, 8), "must be an integer, got True"),
        (lambda t, p: TokenRegression(5, np.float64(8)), "width of a token regression must be an integer"),
        (lambda t, p: t.solve(p, "1"), "regularisation strength must be a number, got '1'"),
        (lambda t, p: t.solve(p, True), "regularisation strength must be a number, got True"),
        (lambda t, p: t.solve(p, float("nan")), "finite number > 0"),
        (
            lambda t, p: t.partial_fit([3.5, 1], [2], np.ones((1, 8))),
            r"token ids must be integers: position 0 \(0-based\) is 3.5",
        ),
        (lambda t, p: t.partial_fit(["a", "b"], [2], np.ones((1, 8))), "token ids must be integers"),
        (lambda t, p: t.partial_fit([3, 1], [2.5], np.ones((1, 8))), "lengths must be integers"),
        (lambda t, p: t.partial_fit([3, 1], [2], np.ones((1, 8)) * 1j), "complex values"),
        (lambda t, p: t.partial_fit([3, 1], [2], [["a"] * 8]), "must be a numeric matrix"),
        (lambda t, p: t.partial_fit([3, 1], [-1, 3], np.ones((2, 8))), r"lengths must be >= 0.*sentence 0 \(0-based\) has -1"),
        (lambda t, p: t.partial_fit([3, 1], [2], np.full((1, 8), np.nan)), "row 0"),
        (lambda t, p: t.error(np.ones((50, 3))), r"the table E must be 50 x 8, got \(50, 3\)"),
        (lambda t, p: t.solve(p, 1.0, x0=np.ones((50, 3))), "the start x0 must be 50 x 8"),
    ],
)
def test_token_regression_arguments_are_one_line(call, says):
    """S7-002, S7-009 (sizes and strength: integers and numbers, not converted), S7-005, S7-006, S7-012."""
    t, prior = _regression()
    before = (t.n_, t.skipped_, t.counts_.copy())
    with pytest.raises(IsotropyError, match=says) as info:
        call(t, prior)
    assert "\n" not in str(info.value)
    assert (t.n_, t.skipped_) == before[:2] and np.array_equal(t.counts_, before[2])  # a failed call changes nothing


def test_integral_float_ids_and_an_empty_chunk_are_accepted():
    t, prior = _regression()
    n = t.n_
    t.partial_fit(np.array([1.0, 2.0, 3.0]), [3], np.ones((1, 8)))
    t.partial_fit([], [], np.zeros((0, 8)))
    assert t.n_ == n + 1


# --------------------------------------------------------------------------- U38: max_length 1 on a static model


def test_max_length_one_is_accepted_for_a_static_model(tmp_path):
    """S5-015: a static table adds no special token, so one token is a valid length."""
    from helpers import STATIC_WORDS, tiny_model2vec, tiny_static_vectors
    from isotropy.encoders import Encoder

    folder = tiny_model2vec(tmp_path / "m2v")
    got = Encoder(str(folder), max_length=1).encode(["cat sat on the mat", "dog"])
    table = tiny_static_vectors()
    np.testing.assert_allclose(got, table[[STATIC_WORDS.index("cat"), STATIC_WORDS.index("dog")]], rtol=1e-6)
    with pytest.raises(IsotropyError, match="at least 1"):
        Encoder(str(folder), max_length=0)


# --------------------------------------------------------------------------- U1: an interrupt after the rename


def _signal_after_rename(monkeypatch, signum):
    """Send ``signum`` to this process from inside the rename's signal-free block, right after the output is renamed
    in: it is held back until the block ends, then raised (no race: the signal is pending before the block ends)."""
    import isotropy.storage.atomic as atomic

    real = atomic._renamed

    def renamed(path, check):
        real(path, check)
        if check is not None:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(atomic, "_renamed", renamed)


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signals")
def test_sigterm_right_after_the_rename_says_the_output_was_written(tmp_path, monkeypatch):
    """S1-053, for every command (here `fit whitening`): the new output is in place, and the message says so."""
    X = np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "w"
    code, _, err = run_cli(["fit", "whitening", tmp_path / "x.npy", "-o", out])
    assert code == 0, err
    old = (out / "state.safetensors").read_bytes()
    np.save(tmp_path / "x.npy", X * 2)
    _signal_after_rename(monkeypatch, signal.SIGTERM)
    code, _, err = run_cli(["fit", "whitening", tmp_path / "x.npy", "-o", out])
    assert code == 143, err
    assert err.strip().splitlines()[-1] == (
        f"error: terminated by SIGTERM after {out} was written in full (the new output is in place); no partial output was left"
    )
    assert (out / "state.safetensors").read_bytes() != old and "no partial output was written" not in err


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler (KeyboardInterrupt) for one test: a library an earlier test used may have left
    another one installed in this process, and the test's Ctrl-C must be the one a user's shell sends."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signals")
def test_ctrl_c_right_after_distill_renamed_its_folder_says_so(python_sigint, fake_pass, tiny_model_dir, tmp_path, monkeypatch):
    out = tmp_path / "d"
    _signal_after_rename(monkeypatch, signal.SIGINT)
    code, _, err = run_cli(["distill", "-o", out, "-m", tiny_model_dir, "--dims", "16"])
    assert code == 130 and f"interrupted after {out} was written in full" in err, err
    assert _isotropy_json(out)["kind"] == "static-model"
    # before the rename, nothing was written and the message stays
    monkeypatch.undo()
    import isotropy.distill.run as mod

    monkeypatch.setattr(mod, "distill_static", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    code, _, err = run_cli(["distill", "-o", tmp_path / "e", "-m", tiny_model_dir, "--dims", "16"])
    assert code == 130 and err.strip() == "error: interrupted; no partial output was written"
