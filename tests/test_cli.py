"""The command line: encode, demo, and the one-line error contract."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from helpers import run_cli
from isotropy.cli import app

runner = CliRunner()


def run(args, input=None):
    return run_cli(args, input)


def _command_paths(group, prefix=()):
    for name, cmd in group.commands.items():
        yield (*prefix, name)
        if hasattr(cmd, "commands"):
            yield from _command_paths(cmd, (*prefix, name))


def test_every_command_has_help():
    import typer

    paths = list(_command_paths(typer.main.get_command(app)))
    assert ("encode",) in paths and ("demo",) in paths
    for path in [(), *paths]:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, path
        assert "Usage" in result.output, path


def test_encode_file_keeps_line_numbers(tmp_path, encoder):
    src = tmp_path / "in.txt"
    src.write_text("A man plays guitar.\n\n   \nA woman reads.\n", encoding="utf-8")
    out = tmp_path / "vecs.npy"
    code, _, err = run(["encode", str(src), "-o", str(out), "--max-length", "32"])
    assert code == 0, err
    vecs = np.load(out)
    assert vecs.shape == (4, 384) and vecs.dtype == np.float32  # empty lines are rows too
    assert "wrote 4 x 384" in err
    from isotropy import Encoder

    ref = Encoder(max_length=32).encode(["A man plays guitar.", "", "   ", "A woman reads."])
    assert np.abs(vecs - ref).max() < 1e-5


def test_encode_stdin_and_pooling(tmp_path):
    out = tmp_path / "v.npy"
    code, _, err = run(["encode", "-", "-o", str(out), "--pooling", "cls"], input="one\ntwo\n")
    assert code == 0, err
    assert np.load(out).shape == (2, 384)


@pytest.mark.parametrize(
    "content, args, message",
    [
        (b"", [], "is empty"),
        (b"fine line\nbad \xff byte\n", [], "line 2 is not valid UTF-8"),
        (b"ok\n", ["--pooling", "max"], "valid poolings: cls, pooler"),
    ],
)
def test_encode_bad_input_is_one_line(tmp_path, content, args, message):
    src = tmp_path / "in.txt"
    src.write_bytes(content)
    code, _, err = run(["encode", str(src), "-o", str(tmp_path / "o.npy"), *args])
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert not (tmp_path / "o.npy").exists()


def test_missing_output_folder_fails_before_encoding(tmp_path, monkeypatch):
    import isotropy.encoders

    def boom(*a, **k):  # the encoder must never be built
        raise AssertionError("encoder was loaded before the output path was checked")

    monkeypatch.setattr(isotropy.encoders.Encoder, "__init__", boom)
    src = tmp_path / "in.txt"
    src.write_text("hello\n")
    code, _, err = run(["encode", str(src), "-o", str(tmp_path / "nope" / "o.npy")])
    assert code == 2 and "does not exist" in err


@pytest.mark.slow
def test_demo_runs_and_shows_the_cone(tmp_path):
    from isotropy.demo import run_demo

    res = run_demo(tmp_path / "demo")
    for pooling, cos in res["avg_cosine"].items():
        assert abs(cos["whitening"]) < 0.05, pooling  # whitened vectors are spread out
    assert res["avg_cosine"]["cls"]["raw"] > 0.3  # raw cls vectors sit in a cone
    for row in res["spearman"].values():
        assert row["raw"] > 50  # the generated gold scores are learnable
    assert (tmp_path / "demo" / "whitening-cls" / "config.json").is_file()
    for query, hits in res["search"].items():
        assert len(hits) == 3 and hits[0]["score"] >= hits[-1]["score"], query
    assert (tmp_path / "demo" / "index" / "config.json").is_file()
    report = tmp_path / "demo" / "analysis"
    assert (report / "report.md").is_file() and (report / "cosine_histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cal = res["calibrated"]  # the demo ends with a calibrated model that plain sentence-transformers loads
    assert cal["stock"] and cal["modules"].endswith("Dense") and cal["max_abs_diff"] < 1e-3
    assert (tmp_path / "demo" / "calibrated" / "modules.json").is_file()
    assert -1.0 <= cal["cosine"] <= 1.0  # the cosine of two paraphrases, encoded by the loaded folder
    # --method auto on cls and last-avg: a label-free choice with its evidence, and the report's recommendation
    assert set(res["auto"]) == {"cls", "last-avg"}
    for pooling, auto in res["auto"].items():
        assert auto["mode"] == "label-free" and auto["p_beats_raw"] is None, pooling  # the signal rule: no bootstrap
        if auto["choice"] == "raw":
            assert auto["auto"] == pytest.approx(auto["raw"]), pooling  # raw kept: the same figure
    rec = json.loads((report / "report.json").read_text())["recommendation"]
    assert rec["choice"] == res["auto"]["last-avg"]["choice"] and "Recommendation" in (report / "report.md").read_text()
