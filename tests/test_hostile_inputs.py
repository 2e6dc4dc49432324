"""Hostile and careless input of #22 that needs more than a row of tests/test_bad_input.py:
threads and signals, a second writer, a full disk, and what isotropy recognises as its own."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli, snapshot
from isotropy.errors import Terminated
from isotropy.storage.atomic import signals_deferred, terminate_as_interrupt


def _one_line(err: str) -> str:
    line = err.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in err, err
    return line


@pytest.fixture
def vecs(tmp_path: Path) -> Path:
    np.save(tmp_path / "v.npy", np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32))
    return tmp_path / "v.npy"


# --------------------------------------------------------------------------- L10: a rename in another thread


def test_a_signal_waits_for_a_rename_in_another_thread():
    """The handler runs on the main thread; the critical section runs in a worker: the signal is
    delivered only once the worker left it. Deterministic: the worker stays inside until the
    main thread has sent the signal and come back."""
    inside, go, done = threading.Event(), threading.Event(), []

    def worker():
        with signals_deferred():
            inside.set()
            go.wait(10)
            done.append("renamed")

    with terminate_as_interrupt():
        t = threading.Thread(target=worker)
        t.start()
        assert inside.wait(10)
        with pytest.raises(Terminated):
            os.kill(os.getpid(), signal.SIGTERM)  # handled here at once: deferred, not raised
            assert done == []
            go.set()
            t.join(10)
            for _ in range(1000):  # the worker re-sends it on leaving; it lands within a few bytecodes
                os.sched_yield()
        assert done == ["renamed"]
    t.join(10)


# --------------------------------------------------------------------------- one writer per output


def _hold_lock(output: Path):
    code = (
        "import sys; from filelock import FileLock; "
        f"l = FileLock({str(output.parent / ('.' + output.name + '.lock'))!r}, thread_local=False); l.acquire(); "
        "print('held', flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("command", ["calibrate", "fit"])
def test_a_second_writer_of_one_output_fails_at_once(tmp_path: Path, vecs: Path, command: str):
    (tmp_path / "c.txt").write_text("a b\nc d\n", encoding="utf-8")
    out = tmp_path / "out"
    args = {"calibrate": ["calibrate", tmp_path / "c.txt", "-o", out], "fit": ["fit", "whitening", vecs, "-o", out]}[command]
    proc = _hold_lock(out)
    try:
        code, _, err = run_cli(args)
    finally:
        proc.stdin.close()
        proc.wait(10)
    assert code == 2
    line = _one_line(err)
    assert str(out) in line and "another isotropy process" in line
    assert not out.exists()


def test_the_lock_file_is_removed_after_the_command(tmp_path: Path, vecs: Path):
    code, _, err = run_cli(["fit", "whitening", vecs, "-o", tmp_path / "w"])
    assert code == 0, err
    assert not (tmp_path / ".w.lock").exists()


# --------------------------------------------------------------------------- a full disk is one line


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("kind", ["whitening", "flow"])
def test_disk_full_while_fitting_is_one_line_and_keeps_the_old_output(tmp_path, vecs, monkeypatch, kind):
    out = tmp_path / "t"
    extra = ["--levels", "1", "--depth", "1", "--hidden", "4"] if kind == "flow" else []
    assert run_cli(["fit", kind, vecs, "-o", out, *extra])[0] == 0
    before = snapshot(tmp_path)
    import safetensors.numpy

    monkeypatch.setattr(safetensors.numpy, "save_file", _enospc)
    code, _, err = run_cli(["fit", kind, vecs, "-o", out, *extra])
    assert code == 2
    assert "is full" in _one_line(err) and str(out) in err
    assert snapshot(tmp_path) == before


def test_a_silently_short_state_file_is_disk_full(tmp_path, vecs, monkeypatch):
    """safetensors has been seen to meet ENOSPC without raising: the size check catches it."""
    import safetensors.numpy

    monkeypatch.setattr(safetensors.numpy, "save_file", lambda arrays, path: Path(path).write_bytes(b"x"))
    code, _, err = run_cli(["fit", "whitening", vecs, "-o", tmp_path / "w"])
    assert code == 2 and "is full" in _one_line(err)
    assert not (tmp_path / "w").exists()


def test_encode_checks_free_space_before_encoding(tmp_path, monkeypatch):
    import shutil

    from isotropy.encoders import Encoder

    (tmp_path / "c.txt").write_text("a\nb\n", encoding="utf-8")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9, 100))
    monkeypatch.setattr(Encoder, "encode", lambda *a, **k: pytest.fail("encoded before the space check"))
    code, _, err = run_cli(["encode", tmp_path / "c.txt", "-o", tmp_path / "v.npy"])
    assert code == 2 and "MiB free" in _one_line(err)
    assert not (tmp_path / "v.npy").exists()


def test_disk_full_while_adding_to_an_index_is_one_line(tmp_path, monkeypatch):
    import faiss

    from isotropy import Index

    Index(None, None).add(["a cat", "a dog", "rain falls"]).save(tmp_path / "ix")
    (tmp_path / "more.txt").write_text("the sun\n", encoding="utf-8")
    before = snapshot(tmp_path)

    def full(*a, **k):
        raise RuntimeError("Error in faiss::FileIOWriter: write error: No space left on device")

    monkeypatch.setattr(faiss, "write_index", full)
    code, _, err = run_cli(["index", "add", tmp_path / "ix", tmp_path / "more.txt"])
    assert code == 2 and "is full" in _one_line(err)
    assert snapshot(tmp_path) == before


def test_out_of_memory_is_one_line(monkeypatch, vecs, tmp_path):
    from isotropy.files import vectors as jobs

    def oom(*a, **k):
        raise MemoryError

    monkeypatch.setattr(jobs, "_stream_moments", oom)
    code, _, err = run_cli(["fit", "whitening", vecs, "-o", tmp_path / "w"])
    assert code == 2 and "out of memory" in _one_line(err)


# --------------------------------------------------------------------------- L9 and W1


def test_own_vectors_are_replaced_and_a_user_file_put_there_is_not(tmp_path, vecs):
    from isotropy.storage.artifacts import is_own_vectors

    w, out = tmp_path / "w", tmp_path / "out.npy"
    assert run_cli(["fit", "whitening", vecs, "-o", w])[0] == 0
    assert run_cli(["transform", w, vecs, "-o", out])[0] == 0
    assert is_own_vectors(out)
    assert run_cli(["transform", w, vecs, "-o", out])[0] == 0  # our own: replaced without --force
    np.save(out, np.zeros((2, 2), np.float32))  # the user's now
    code, _, err = run_cli(["transform", w, vecs, "-o", out])
    assert code == 2 and "--force" in _one_line(err)
    assert np.load(out).shape == (2, 2)


def test_encode_applies_its_transform_without_an_engine(tmp_path):
    from isotropy import Whitening, load_transform

    (tmp_path / "c.txt").write_text("".join(f"sentence {i} about {w}\n" for i, w in enumerate("abcdefghij" * 3)), "utf-8")
    assert run_cli(["encode", tmp_path / "c.txt", "-o", tmp_path / "raw.npy"])[0] == 0
    raw = np.load(tmp_path / "raw.npy")
    Whitening(n_components=8, shrinkage="auto").fit(raw).save(tmp_path / "w")
    code, _, err = run_cli(["encode", tmp_path / "c.txt", "-o", tmp_path / "t.npy", "--transform", tmp_path / "w"])
    assert code == 0, err
    got, want = np.load(tmp_path / "t.npy"), load_transform(tmp_path / "w").transform(raw)
    assert got.shape == (30, 8)
    np.testing.assert_allclose(got, want, atol=1e-4 * float(np.abs(want).max()))
