"""Faults that need real processes: SIGTERM, SIGKILL, two writers at once; and the modes outputs get.

docs/RELIABILITY.md lists the guarantees these tests keep.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT, run_cli, snapshot, tiny_model2vec
from isotropy.errors import IsotropyError, Terminated
from isotropy.storage.atomic import MARKER, atomic_dir, sweep_stale_temporaries, terminate_as_interrupt
from isotropy.storage.locks import artefact_lock
from isotropy.storage.vectors import save_npy

ISOTROPY = [sys.executable, "-m", "isotropy.cli"]
HOST = "".join(c if c.isalnum() or c == "_" else "_" for c in socket.gethostname())


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src"), **extra}
    return env


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and (p.name.endswith((".tmp", ".old"))))


def _writing(folder: Path) -> bool:
    """A temporary output with data in it: the write itself is under way."""
    for p in folder.iterdir():
        try:
            if p.name.startswith(".") and p.name.endswith(".tmp") and p.stat().st_size > 0:
                return True
        except FileNotFoundError:
            pass
    return False


def _wait_for(predicate, timeout: float, step: float = 0.001) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return False


# --------------------------------------------------------------------------- modes


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_outputs_get_the_modes_of_an_ordinary_open(tmp_path, umask):
    from isotropy import Whitening

    old = os.umask(umask)
    try:
        X = np.random.default_rng(0).standard_normal((50, 4))
        save_npy(tmp_path / "v.npy", X)
        Whitening().fit(X).save(tmp_path / "w")
        with open(tmp_path / "plain", "w") as fh:  # what the user expects
            fh.write("x")
        os.mkdir(tmp_path / "plaindir")
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(tmp_path / "v.npy") == mode(tmp_path / "plain") == 0o666 & ~umask
    assert mode(tmp_path / "w") == mode(tmp_path / "plaindir") == 0o777 & ~umask
    for f in (tmp_path / "w").iterdir():
        assert mode(f) == 0o666 & ~umask, f


def test_replacing_an_output_keeps_its_mode(tmp_path):
    out = tmp_path / "v.npy"
    save_npy(out, np.zeros((2, 2)))
    os.chmod(out, 0o640)
    save_npy(out, np.ones((2, 2)))
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert np.load(out)[0, 0] == 1


# --------------------------------------------------------------------------- stale temporaries


def _marked(path: Path) -> Path:
    """A temporary folder as isotropy makes them: holding the marker that proves it ours."""
    path.mkdir()
    (path / MARKER).write_text("isotropy temporary\n")
    return path


def test_stale_temporaries_are_swept_and_live_ones_kept(tmp_path):
    out = tmp_path / "v.npy"
    dead = _marked(tmp_path / f".v.npy.isotropy-{HOST}-{_dead_pid()}-abc123.tmp")
    (dead / "v.npy").write_bytes(b"x" * 1000)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = _marked(tmp_path / f".v.npy.isotropy-{HOST}-{sleeper.pid}-def456.tmp")
        other_host = _marked(tmp_path / f".v.npy.isotropy-otherhost-{_dead_pid()}-ghi789.tmp")
        # L2 of #31: what merely has one of our names is never removed: a file, an unmarked folder, 0.1's names
        unmarked_file = tmp_path / f".v.npy.isotropy-{HOST}-{_dead_pid()}-jkl012.tmp"
        unmarked_file.write_bytes(b"mine")
        unmarked_dir = tmp_path / f".v.npy.isotropy-{HOST}-{_dead_pid()}-mno345.tmp"
        unmarked_dir.mkdir()
        legacy = tmp_path / ".v.npy.abcd1234.tmp"
        legacy.write_bytes(b"w")
        os.utime(legacy, (time.time() - 2 * 86400,) * 2)
        unrelated = _marked(tmp_path / ".other.npy.isotropy-x-1-a.tmp")
        save_npy(out, np.zeros((3, 2)))
        assert not dead.exists()
        kept = (live, other_host, unmarked_file, unmarked_dir, legacy, unrelated)
        assert all(p.exists() for p in kept)
        assert unmarked_file.read_bytes() == b"mine"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_replacement_cut_between_its_renames_is_restored(tmp_path):
    # a folder replacement parks the old folder in .NAME....old/x, then renames the new one in;
    # a process killed between the two renames leaves the old one parked and NAME missing
    parked = _marked(tmp_path / f".idx.isotropy-{HOST}-{_dead_pid()}-q.old")
    (parked / "x").mkdir(parents=True)
    (parked / "x" / "config.json").write_text("{}")
    sweep_stale_temporaries(tmp_path / "idx")
    assert (tmp_path / "idx" / "config.json").is_file()
    assert not parked.exists()


def test_a_users_folder_named_like_a_parked_one_is_never_moved_or_removed(tmp_path):
    # L2 of #31: a user's .w.20240101.old (and one with our name but no marker) holding x/ stays where it is
    names = (".w.20240101.old", f".w.isotropy-{HOST}-{_dead_pid()}-q.old")
    for name in names:
        user = tmp_path / name
        (user / "x").mkdir(parents=True)
        (user / "x" / "important.txt").write_text("keep")
        os.utime(user, (time.time() - 3 * 86400,) * 2)
    Whitening = __import__("isotropy").Whitening
    Whitening().fit(np.random.default_rng(0).standard_normal((20, 3))).save(tmp_path / "w")
    for name in names:
        assert (tmp_path / name / "x" / "important.txt").read_text() == "keep"
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["config.json", "state.safetensors"]


def test_a_users_own_lock_file_survives(tmp_path):
    # L2 of #31: a user's .w.lock (not an isotropy lock file) is locked but neither written nor removed;
    # isotropy's own lock files are removed on release and none is left inside an output (U44)
    from isotropy.storage.locks import artefact_lock, lock_file_of

    (tmp_path / ".w.lock").write_text("keep")
    with artefact_lock(tmp_path / "w"):
        pass
    assert (tmp_path / ".w.lock").read_text() == "keep"
    with artefact_lock(tmp_path / "v"):
        assert lock_file_of(tmp_path / "v").read_bytes().startswith(b"isotropy")
    assert not lock_file_of(tmp_path / "v").exists()


def test_interrupted_folder_write_leaves_the_old_folder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(out) as tmp:
            (tmp / "new").write_text("half")
            raise KeyboardInterrupt
    assert [p.name for p in out.iterdir()] == ["keep"]
    assert _temporaries(tmp_path) == []


def test_sigterm_raises_terminated_inside_the_guard_only():
    with terminate_as_interrupt():
        with pytest.raises(Terminated) as info:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs at the next bytecode
        assert info.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


# --------------------------------------------------------------------------- real signals


PAUSE_CHILD = [sys.executable, str(ROOT / "tests" / "pause_child.py")]


@pytest.fixture(scope="module")
def vectors_and_whitening(tmp_path_factory):
    """Vectors and a whitening for them; the transform of them pauses mid-write (tests/pause_child.py)."""
    from isotropy import Whitening

    folder = tmp_path_factory.mktemp("vw")
    X = np.random.default_rng(0).standard_normal((3000, 16)).astype(np.float32)
    np.save(folder / "vecs.npy", X)
    Whitening().fit(X).save(folder / "white")
    return folder


def _paused(marker: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until the child reports it is paused at its point (or has died: then say why)."""
    if not _wait_for(lambda: marker.exists() or proc.poll() is not None, timeout=timeout, step=0.01):
        proc.kill()
        pytest.fail("the child never reached its pause point")
    if not marker.exists():
        _, err = proc.communicate()
        pytest.fail(f"the child ended ({proc.returncode}) before its pause point: {err}")


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_signal_mid_write_removes_the_temporary_and_keeps_the_old_output(tmp_path, vectors_and_whitening, sig, code):
    out = tmp_path / "out" / "out.npy"
    out.parent.mkdir()
    save_npy(out, np.zeros((2, 2), np.float32), kind="vectors")  # an earlier isotropy output: replaceable
    before = out.read_bytes()
    marker = tmp_path / "paused"
    src = vectors_and_whitening
    proc = subprocess.Popen(
        [*PAUSE_CHILD, str(marker), "write", "transform", str(src / "white"), str(src / "vecs.npy"), "-o", str(out)],
        env=_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    _paused(marker, proc)
    assert _writing(out.parent), "paused inside the write, the temporary file holds data"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert err.strip().count("\n") == 0 and err.startswith("error: ") and "Traceback" not in err, err
    assert _temporaries(out.parent) == []
    assert out.read_bytes() == before


def test_sigkill_leftovers_are_swept_by_the_next_run(tmp_path, vectors_and_whitening):
    out = tmp_path / "out" / "out.npy"
    out.parent.mkdir()
    marker = tmp_path / "paused"
    src = vectors_and_whitening
    args = ["transform", str(src / "white"), str(src / "vecs.npy"), "-o", str(out)]
    proc = subprocess.Popen([*PAUSE_CHILD, str(marker), "write", *args], env=_env(), stderr=subprocess.PIPE, text=True)
    _paused(marker, proc)
    proc.kill()
    proc.wait()
    left = _temporaries(out.parent)
    assert len(left) == 1 and not out.exists()  # SIGKILL cannot be caught: the next run cleans up
    done = subprocess.run([*ISOTROPY, *args], env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _temporaries(out.parent) == []
    assert np.load(out, mmap_mode="r").shape == (3000, 16)


def test_sigterm_while_encoding_writes_nothing(tmp_path, tiny_model_dir):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"sentence {i} about the weather" for i in range(2_000)) + "\n")
    marker = tmp_path.parent / f"{tmp_path.name}-paused"  # outside the snapshot
    before = snapshot(tmp_path)
    proc = subprocess.Popen(
        # a tiny transformer (the same torch backend and batch loop): the signal, not the model, is under test
        [*PAUSE_CHILD, str(marker), "encode", *map(str, ("encode", corpus, "-o", tmp_path / "v.npy", "--model", tiny_model_dir))],
        env=_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    _paused(marker, proc)  # the model is loaded and the first batch encoded
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.strip() == "error: terminated by SIGTERM; no partial output was written"
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- two writers


def _word_model(folder: Path) -> Path:
    """A model2vec folder of the words these writers' sentences use: what is under test is the index's writes, and a
    static table loads and encodes in a blink where the default transformer took seconds per process."""
    from model2vec import StaticModel

    from isotropy.encoders.static.table import UNK, word_tokenizer

    words = ["base", "sentence", "batch", "a", "b", "on", "topic", "from", "the", "first", "second", "writer", "one", "more"]
    words += [str(i) for i in range(400)]
    vectors = np.random.default_rng(0).standard_normal((len(words) + 1, 16)).astype(np.float32)
    vectors[-1] = 0.0
    StaticModel(vectors, word_tokenizer([*words, UNK], UNK, True)(), normalize=False).save_pretrained(folder)
    return folder


@pytest.fixture()
def small_index(tmp_path):
    from isotropy import Encoder, Index

    path = tmp_path / "idx"
    Index(Encoder(str(_word_model(tmp_path / "words"))), None).add([f"base sentence {i}" for i in range(10)]).save(path)
    return path


def test_two_index_adds_at_once_both_land(tmp_path, small_index):
    batches = []
    for name in ("a", "b"):
        f = tmp_path / f"{name}.txt"
        f.write_text("\n".join(f"batch {name} sentence {i} on topic {i % 7}" for i in range(400)) + "\n")
        batches.append(f)
    procs = [
        subprocess.Popen([*ISOTROPY, "index", "add", str(small_index), str(f)], env=_env(), stderr=subprocess.PIPE, text=True)
        for f in batches
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    from isotropy import Index

    index = Index.load(small_index)
    assert len(index) == 10 + 400 + 400
    assert {s.split()[1] for s in index.sentences[10:]} == {"a", "b"}
    assert index.search(["batch b sentence 399 on topic 0"], k=1).hits(0)[0]["text"] == "batch b sentence 399 on topic 0"


def test_a_locked_index_makes_the_second_writer_wait_then_give_up(tmp_path, small_index):
    more = tmp_path / "more.txt"
    more.write_text("one more\n")
    before = snapshot(small_index)
    with artefact_lock(small_index):
        done = subprocess.run(
            [*ISOTROPY, "index", "add", str(small_index), str(more)],
            env=_env(ISOTROPY_LOCK_TIMEOUT="1"),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("waiting for another isotropy process") and str(small_index) in lines[0]
    assert lines[-1].startswith("error: ") and "still locked" in lines[-1] and "ISOTROPY_LOCK_TIMEOUT" in lines[-1]
    assert snapshot(small_index) == before


def test_saving_over_a_changed_index_fails_instead_of_losing_an_update(small_index):
    from isotropy import Index

    first, second = Index.load(small_index), Index.load(small_index)
    first.add(["from the first writer"]).save(small_index)
    second.add(["from the second writer"])
    with pytest.raises(IsotropyError, match="changed by another writer"):
        second.save(small_index)
    assert Index.load(small_index).sentences[-1] == "from the first writer"
    second.save(small_index.with_name("elsewhere"))  # another folder is fine


# --------------------------------------------------------------------------- small corpora


def test_index_build_on_a_tiny_corpus_falls_back_to_raw_vectors_with_a_warning(tmp_path):
    corpus = tmp_path / "two.txt"
    corpus.write_text("A cat sleeps.\nA dog barks.\n")
    code, _, err = run_cli(["index", "build", corpus, "-o", tmp_path / "idx"])
    assert code == 0, err
    assert "warning: " in err and "too few" in err and "raw vectors" in err
    cfg = json.loads((tmp_path / "idx" / "config.json").read_text())
    assert cfg["transform"] is None and cfg["dim"] == 384
    code, out, err = run_cli(["search", tmp_path / "idx", "a sleeping cat", "-n", "2"])
    assert code == 0, err
    scores = [float(line.split()[1]) for line in out.splitlines()[1:]]
    assert scores[0] > scores[1] and abs(scores[0]) < 0.999  # cosines of real vectors, not +-1


def test_dask_bad_shard_is_one_line_and_a_failed_connection_leaves_nothing(tmp_path):
    pytest.importorskip("distributed")
    # the message and the cleanup are under test, not the encoder: a tiny static model loads in a blink in the
    # client and each worker, where the default transformer took ~10 s of the test
    model = tiny_model2vec(tmp_path / "m2v")
    (tmp_path / "a.txt").write_text("good line\n")
    (tmp_path / "b.txt").write_bytes(b"ok\ncaf\xe9\n")
    args = ["encode", "--engine", "dask", "--input", tmp_path / "*.txt", "-o", tmp_path / "out", "--model", model]
    done = subprocess.run(
        [*ISOTROPY, *map(str, args)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {tmp_path / 'b.txt'} line 2 is not valid UTF-8 (byte 4 of the line)"
    # the folder the run made is gone, or holds what the good shard's worker wrote before the cluster closed (its
    # finished outputs, which a rerun keeps, or a temporary, which a rerun sweeps): never an empty folder
    assert not (tmp_path / "out").exists() or any((tmp_path / "out").iterdir())
    code, _, err = run_cli(
        ["encode", "--engine", "dask", "--input", tmp_path / "a.txt", "-o", tmp_path / "out2", "--address", "tcp://127.0.0.1:9",
         "--model", model]
    )  # fmt: skip
    assert code == 2 and "127.0.0.1:9" in err
    assert not (tmp_path / "out2").exists()
