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


def test_open_vectors_gives_files_rows_width_and_chunks_in_one_call(tmp_path):
    """One call tells a streamed job everything: the shards in name order, the total rows, the width,
    the dtype, and chunks that cover every row once, in order, within the requested size."""
    from isotropy.storage.vectors import open_vectors

    X = np.arange(70 * 3, dtype=np.float32).reshape(70, 3)
    (tmp_path / "s").mkdir()
    for name, part in zip(("b", "a", "c"), np.split(X, [20, 45])):
        np.save(tmp_path / "s" / f"{name}.npy", part)
    src = open_vectors(tmp_path / "s")
    assert [f.name for f in src.files] == ["a.npy", "b.npy", "c.npy"]
    assert (src.rows, src.width, src.dtype) == (70, 3, np.float32)
    chunks = list(src.chunks(chunk_rows=8))
    assert max(c.shape[0] for _, _, c in chunks) <= 8
    by_file = {f.name: np.concatenate([c for g, _, c in chunks if g == f]) for f in src.files}
    assert all(np.array_equal(by_file[f.name], np.load(f)) for f in src.files)
    assert [start for f, start, _ in chunks if f.name == "a.npy"] == [0, 8, 16, 24]  # rows within each file
    assert np.array_equal(src.head(2), np.load(src.files[0])[:2])
    assert src.load().shape == (70, 3) and src.provenance() is None  # the user's own files: no sidecar
    with pytest.raises(IsotropyError, match="has no .npy files"):
        open_vectors(tmp_path)


def test_fit_file_lists_a_folder_of_shards_once(tmp_path, monkeypatch):
    """The data goes one way: fit_file asks storage for the shards once, then only reads chunks."""
    from isotropy.files import fit_file
    from isotropy.storage import vectors

    X = np.random.default_rng(3).normal(size=(300, 4))
    (tmp_path / "s").mkdir()
    for i, part in enumerate(np.array_split(X, 3)):
        np.save(tmp_path / "s" / f"{i}.npy", part)
    calls = []
    real = vectors.list_vector_files
    monkeypatch.setattr(vectors, "list_vector_files", lambda p: (calls.append(p), real(p))[1])
    w = fit_file("whitening", tmp_path / "s", show_progress=False)
    assert len(calls) == 1 and w.n_features_in_ == 4
