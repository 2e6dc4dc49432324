"""No silent regression in ``isotropy calibrate``: a lowered score warns and is recorded; ``--min-gain`` refuses to write.

The evaluation pairs are built so the outcome is known without luck: gold scores equal to the base
model's own cosines give the base model a Spearman of exactly 100, which a whitening can only lower;
gold scores equal to the calibrated model's cosines give the calibrated model 100.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import run_cli
from isotropy.calibration import run_calibration
from isotropy.encoders import Encoder

WORDS = "cat dog market river guitar rain city child music storm bread train field house doctor".split()


def sentences(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 10)))) for _ in range(n)]


def cosines(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return (A * B).sum(1) / (np.linalg.norm(A, axis=1) * np.linalg.norm(B, axis=1))


def write_pairs(path, left, right, gold) -> None:
    # distinct ranks: round to 6 digits, the order is what Spearman reads
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{g:.6f}\n" for a, b, g in zip(left, right, gold)))


@pytest.fixture(scope="module")
def setup(tiny_model_dir, tmp_path_factory):
    """(folder, corpus, base-scored pairs, calibrated-scored pairs, common CLI args)."""
    tmp = tmp_path_factory.mktemp("gain")
    corpus = tmp / "corpus.txt"
    corpus.write_text("\n".join(sentences(200, 0)) + "\n")
    left, right = sentences(60, 1), sentences(60, 2)
    opts = {"model": tiny_model_dir, "pooling": "last-avg", "max_length": 32}
    enc = Encoder(str(tiny_model_dir), pooling="last-avg", max_length=32)
    A, B = enc.encode(left), enc.encode(right)
    base_pairs = tmp / "base.tsv"
    write_pairs(base_pairs, left, right, cosines(A, B))
    c = run_calibration(corpus, tmp / "probe", show_progress=False, **opts)  # the calibration the CLI will fit again
    cal_pairs = tmp / "cal.tsv"
    write_pairs(cal_pairs, left, right, cosines(c.transform.transform(A), c.transform.transform(B)))
    args = ["calibrate", corpus, "--model", tiny_model_dir, "--pooling", "last-avg", "--max-length", "32", "--no-progress"]
    return tmp, base_pairs, cal_pairs, args


def test_a_calibration_that_lowers_the_eval_score_warns_and_records_it(setup, tmp_path):
    _, base_pairs, _, args = setup
    out = tmp_path / "m"
    code, _, err = run_cli([*args, "-o", out, "--eval", base_pairs])
    assert code == 0, err
    cal = json.loads((out / "isotropy.json").read_text())["calibration"]
    row = cal["eval"]["tasks"]["base"]
    assert row["base"] == pytest.approx(100.0) and row["calibrated"] < 100.0
    (reg,) = cal["regressions"]
    assert reg["base"] == row["base"] and reg["calibrated"] == row["calibrated"] and reg["change"] < 0
    warning = [line for line in err.splitlines() if line.startswith("warning: the calibrated model scores LOWER")]
    assert len(warning) == 1 and f"{row['base']:.2f} -> {row['calibrated']:.2f}" in warning[0]
    assert any("scores LOWER" in w for w in cal["warnings"])
    assert f"{row['base']:.2f} -> {row['calibrated']:.2f}" in (out / "README.md").read_text()


def test_min_gain_refuses_to_write_a_model_that_does_not_gain(setup, tmp_path):
    _, base_pairs, _, args = setup
    out = tmp_path / "m"
    code, stdout, err = run_cli([*args, "-o", out, "--eval", base_pairs, "--min-gain", "0"])
    assert code == 3
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --min-gain 0:") and "100.00 ->" in lines[0], err
    assert "nothing was written" in lines[0] and "Traceback" not in err and stdout == ""
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_min_gain_writes_a_model_that_gains_enough(setup, tmp_path):
    _, _, cal_pairs, args = setup
    out = tmp_path / "m"
    code, _, err = run_cli([*args, "-o", out, "--eval", cal_pairs, "--min-gain", "1"])
    assert code == 0, err
    cal = json.loads((out / "isotropy.json").read_text())["calibration"]
    row = cal["eval"]["tasks"]["cal"]
    assert row["calibrated"] == pytest.approx(100.0) and row["calibrated"] - row["base"] >= 1
    assert cal["regressions"] == [] and "LOWER" not in err


@pytest.mark.parametrize("extra", [[], ["--eval", "{pairs}", "--min-gain", "nan"]])
def test_min_gain_needs_eval_and_a_number(setup, tmp_path, extra):
    _, base_pairs, _, args = setup
    out = tmp_path / "m"
    code, _, err = run_cli(
        [*args, "-o", out, "--min-gain", "1"] if not extra else [*args, "-o", out, *[e.format(pairs=base_pairs) for e in extra]]
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--min-gain" in err, err
    assert not out.exists()
