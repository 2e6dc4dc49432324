"""The command line speaks one language: docs/CLI.md is the app's own description, a short flag has one meaning,
old spellings still work with a note, and messages name options as the command line spells them."""

from __future__ import annotations

import importlib.util

import pytest

from helpers import ROOT, run_cli


@pytest.fixture(scope="module")
def cli_doc():
    spec = importlib.util.spec_from_file_location("cli_doc", ROOT / "bench" / "cli_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_cli_md_is_generated_from_the_app(cli_doc):
    assert (ROOT / "docs" / "CLI.md").read_text(encoding="utf-8") == cli_doc.render(), "run: python bench/cli_doc.py"


def test_no_short_flag_has_two_meanings(cli_doc):
    flags = cli_doc.short_flags()
    assert {"-o", "-m", "-p", "-k", "-t", "-d", "-q"} <= set(flags)
    two = {flag: sorted(meanings) for flag, meanings in flags.items() if len(meanings) > 1}
    assert not two, f"short flags with two meanings: {two}"
    assert list(flags["-o"]) == ["--output"] and list(flags["-t"]) == ["--transform"]


def test_every_hidden_option_is_a_listed_deprecated_spelling(cli_doc):
    from isotropy.cli.options import DEPRECATED

    hidden = {(" ".join(path), o) for path, cmd in cli_doc.commands() for p in cmd.params if p.hidden for o in p.opts}
    assert hidden == set(DEPRECATED)


def test_every_output_is_dash_o_and_a_model_runs_where_device_is(cli_doc):
    for path, cmd in cli_doc.commands():
        longs = {o for p in cmd.params if not p.hidden for o in p.opts if o.startswith("--")}
        assert "--out" not in longs, path
        if "--model" in longs and path not in (("fit", "whitening"), ("export", "onnx")):  # engine-only / exported on CPU
            assert "--device" in longs, path


def test_version_and_dash_h(capsys):
    from isotropy import __version__

    code, out, _ = run_cli(["--version"])
    assert code == 0 and out.strip() == f"isotropy {__version__}"
    code, out, _ = run_cli(["index", "build", "-h"])
    assert code == 0 and "--kind" in out and "flat|hnsw|ivf" in out.replace(" ", "")


def test_old_spellings_work_with_a_note(tmp_path):
    from isotropy.cli.options import canonical_method, deprecated

    code, _, err = run_cli(["eval", "--data", tmp_path / "missing", "--out", tmp_path / "r.json", "-o", tmp_path / "s.json"])
    assert code == 2 and "'eval --out' is deprecated" in err and "give --output once" in err
    code, _, err = run_cli(["eval", "--data", tmp_path / "missing", "-t", "STS-B"])
    assert code == 2 and "'eval -t' is deprecated" in err and "say --task" in err
    assert deprecated("search", "-k", 5, None) == 5
    assert canonical_method("soft-whitening-0.5") == "soft-0.5" and canonical_method("whitening-256") == "whitening-256"


def test_a_bad_device_is_one_line():
    code, _, err = run_cli(["encode", "-", "-o", "x.npy", "--device", "tpu9"], "a\n")
    assert code == 2 and "--device" in err and err.count("\n") == 1


def test_messages_use_the_interface_spelling():
    from isotropy._params import command_line_spelling, spell

    assert spell("shrinkage", "auto") == "shrinkage='auto'" and spell("force", True) == "force=True"
    with command_line_spelling():
        assert spell("shrinkage", "auto") == "--shrinkage auto" and spell("force", True) == "--force"
        assert spell("n_components") == "--n-components"


def test_device_reaches_the_encoders_a_command_builds(monkeypatch):
    """``--device`` sets the device of every Encoder built with device=None inside the command (a context, not a global)."""
    import isotropy.encoders.encoder as E

    seen = []

    class Stop(Exception):
        pass

    def record(backend, model, device=None, **kw):
        seen.append(device)
        raise Stop

    monkeypatch.setattr(E, "make_backend", record)
    for device in (None, "cpu"):
        with E.default_device(device), pytest.raises(Stop):
            E.Encoder()
    with E.default_device("cpu"), pytest.raises(Stop):
        E.Encoder(device="cuda")  # an explicit device wins
    with pytest.raises(Stop):
        E.Encoder()  # the context is gone after the block
    assert seen == [None, "cpu", "cuda", None]
