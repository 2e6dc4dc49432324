"""Layers 0 and 1: validation messages, atomic artefact writes, the artefact header."""

import json

import numpy as np
import pytest

from isotropy._checks import check_matrix
from isotropy.errors import IsotropyError
from isotropy.storage.artifacts import load_state, read_config, save_state
from isotropy.storage.atomic import atomic_dir


def test_check_matrix_names_the_first_bad_row_with_offset():
    X = np.zeros((5, 3))
    X[3, 1] = np.nan
    with pytest.raises(IsotropyError, match="row 13"):
        check_matrix(X, "chunk", row_offset=10)


def test_check_matrix_rejects_complex_and_wrong_width():
    with pytest.raises(IsotropyError, match="complex"):
        check_matrix(np.ones((2, 2), dtype=complex))
    with pytest.raises(IsotropyError, match="3 dimensions but 4"):
        check_matrix(np.ones((2, 3)), expected_dim=4)
    with pytest.raises(IsotropyError, match="2-D"):
        check_matrix(np.ones(3))


def test_atomic_dir_keeps_the_old_folder_when_interrupted(tmp_path):
    target = tmp_path / "art"
    save_state(target, "thing", {"a": 1}, {"x": np.arange(3.0)})
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(target) as tmp:
            (tmp / "partial").write_text("half")
            raise KeyboardInterrupt
    cfg, arrays = load_state(target, "thing")
    assert cfg["a"] == 1 and np.array_equal(arrays["x"], np.arange(3.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]  # no temporary leftovers


def test_load_state_errors_are_one_line(tmp_path):
    target = tmp_path / "art"
    save_state(target, "thing", {}, {"x": np.zeros(2)})
    with pytest.raises(IsotropyError, match="holds a 'thing', not a 'other'"):
        read_config(target, "other")
    cfg = json.loads((target / "config.json").read_text())
    cfg["format_version"] = 999
    (target / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(IsotropyError, match="format version 999"):
        read_config(target)
    cfg["format_version"] = 1
    (target / "config.json").write_text(json.dumps(cfg))
    (target / "state.safetensors").write_bytes(b"garbage")
    with pytest.raises(IsotropyError, match="corrupt"):
        load_state(target)
    (target / "state.safetensors").unlink()
    with pytest.raises(IsotropyError, match="missing state.safetensors"):
        load_state(target)


def test_progress_bar_is_silent_in_logs_unless_asked(capsys):
    from isotropy._progress import ProgressBar

    with ProgressBar(100, None, "quiet") as bar:  # pytest's stderr is not a terminal
        assert bar._bar is None
        bar.advance(5)
    with ProgressBar(3, True, "asked") as bar:
        assert bar._bar is not None
        bar.advance(3)
    assert "quiet" not in capsys.readouterr().err
