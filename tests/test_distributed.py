"""isotropy.distributed: encode and fit whitening on a Dask cluster.

One local cluster (2 single-threaded worker processes) serves the whole module;
the encoder is the tiny random DistilBERT, the shards a few dozen generated lines.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

distributed = pytest.importorskip("distributed")

from isotropy.distributed import (  # noqa: E402
    FAULT_ENV,
    EncoderSpec,
    _merge,
    _tree,
    encode,
    expand_inputs,
    fit_whitening,
)
from isotropy.errors import IsotropyError  # noqa: E402
from isotropy.transforms.moments import Moments  # noqa: E402
from isotropy.transforms.whitening import Whitening  # noqa: E402

WORDS = "the a cat dog sat on mat ran fast slow red blue green house tree river stone light dark over under near far".split()
SHARD_LINES = (23, 31, 0, 17)  # one empty shard on purpose


def _lines(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.integers(0, 12))  # k == 0: an empty line, which is a sentence too
        out.append(" ".join(rng.choice(WORDS, size=k)))
    return out


@pytest.fixture(scope="module")
def client():
    import logging

    from isotropy.distributed.cluster import worker_processes

    with worker_processes():  # the workers start as the command's own local cluster starts them
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
        )
        c = distributed.Client(cluster)
        yield c
        c.close()
        cluster.close()


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")
    lines = []
    for i, n in enumerate(SHARD_LINES):
        part = _lines(n, seed=i)
        (folder / f"part-{i}.txt").write_text("".join(s + "\n" for s in part), encoding="utf-8")
        lines.extend(part)
    return folder, lines


@pytest.fixture()
def one_thread():
    """Torch on one thread here, as in the workers (Dask sets OMP_NUM_THREADS=1 in them): the
    float32 sums inside a forward pass then run in the same order, so vectors are bit-identical."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _assert_same_stats(a: Moments, b: Moments, rtol: float = 1e-9) -> None:
    assert a.n == b.n
    scale = np.abs(b.scatter).max()
    np.testing.assert_allclose(a.mean, b.mean, rtol=rtol, atol=rtol * np.abs(b.mean).max())
    np.testing.assert_allclose(a.scatter, b.scatter, rtol=rtol, atol=rtol * scale)


# --------------------------------------------------------------------------- fit


def test_fit_equals_single_machine_fit(client, shards, tiny_model_dir, tmp_path, one_thread):
    """2 workers, 4 shards (one empty), tree of merges == Whitening().fit(Encoder().encode(all lines))."""
    from isotropy.encoders import Encoder

    folder, lines = shards
    # batch_size=1 (every sentence its own forward pass) and one torch thread, as in the workers:
    # the vectors are then bit-identical however the corpus is split. Other batch sizes or
    # thread counts change them at float32 rounding (~1e-7); the merge itself is exact (next test).
    spec = EncoderSpec(model=str(tiny_model_dir), max_length=32, batch_size=1)
    w = fit_whitening(str(folder / "*.txt"), spec, {"n_components": 8}, output=tmp_path / "w", address=client)
    ref = Whitening(n_components=8).fit(Encoder(str(tiny_model_dir), max_length=32, batch_size=1).encode(lines))
    _assert_same_stats(w.moments_, ref.moments_)
    assert w.n_samples_seen_ == len(lines) == sum(SHARD_LINES)  # no shard counted twice
    # The written folder is the one a single-machine fit writes.
    ref.save(tmp_path / "ref")
    cfg = json.loads((tmp_path / "w" / "config.json").read_text())
    ref_cfg = json.loads((tmp_path / "ref" / "config.json").read_text())
    # the state's bytes (so their sha256) differ at float rounding (the stats are compared above)
    assert set(cfg.pop("sha256")) == set(ref_cfg.pop("sha256")) == {"state.safetensors"}
    assert cfg == ref_cfg
    loaded = Whitening.load(tmp_path / "w")
    X = Encoder(str(tiny_model_dir), max_length=32).encode(lines[:10])
    np.testing.assert_allclose(loaded.transform(X), ref.transform(X), rtol=1e-6, atol=1e-6)


def test_fit_text_and_vector_shards_agree_and_are_exact(client, shards, tiny_model_dir, tmp_path):
    """Default batches: encode the shards, then fit from the .npy shards and from the text;
    both equal numpy's statistics of the concatenated vectors to 1e-9."""
    folder, lines = shards
    spec = EncoderSpec(model=str(tiny_model_dir), max_length=32, batch_size=4)
    report = encode(str(folder / "*.txt"), tmp_path / "vecs", spec, address=client)
    vecs = np.concatenate([np.load(s.output) for s in report.shards])
    assert vecs.shape == (len(lines), 32)
    from_npy = fit_whitening(str(tmp_path / "vecs" / "*.npy"), whitening={"n_components": 8}, address=client)
    from_text = fit_whitening(str(folder / "*.txt"), spec, {"n_components": 8}, address=client)
    ref = Whitening(n_components=8).fit(vecs)
    _assert_same_stats(from_npy.moments_, ref.moments_)
    _assert_same_stats(from_text.moments_, ref.moments_)
    np.testing.assert_allclose(ref.moments_.covariance(), np.cov(vecs.astype(np.float64).T), rtol=1e-9, atol=1e-12)


def test_retried_after_a_failing_first_attempt(client, shards, tiny_model_dir, tmp_path, one_thread):
    """Every shard's first attempt raises; retries make the fit succeed, exactly, counting each shard once."""
    from isotropy.encoders import Encoder

    folder, lines = shards
    markers = tmp_path / "faults"
    markers.mkdir()
    client.run(lambda: os.environ.__setitem__(FAULT_ENV, f"raise:{markers}"))
    try:
        spec = EncoderSpec(model=str(tiny_model_dir), max_length=32, batch_size=1)
        w = fit_whitening(str(folder / "*.txt"), spec, {"shrinkage": "auto"}, address=client, retries=1)
    finally:
        client.run(lambda: os.environ.pop(FAULT_ENV, None))
    assert len(list(markers.iterdir())) == len(SHARD_LINES)  # each shard did fail once
    ref = Whitening(shrinkage="auto").fit(Encoder(str(tiny_model_dir), max_length=32, batch_size=1).encode(lines))
    _assert_same_stats(w.moments_, ref.moments_)
    assert w.shrinkage_ == pytest.approx(ref.shrinkage_, rel=1e-9)


def test_no_retries_left_is_reported(client, shards, tiny_model_dir, tmp_path):
    markers = tmp_path / "faults"
    markers.mkdir()
    client.run(lambda: os.environ.__setitem__(FAULT_ENV, f"raise:{markers}"))
    try:
        with pytest.raises(RuntimeError, match="injected fault"):
            fit_whitening(str(shards[0] / "part-0.txt"), EncoderSpec(model=str(tiny_model_dir)), address=client, retries=0)
    finally:
        client.run(lambda: os.environ.pop(FAULT_ENV, None))


def test_worker_killed_mid_task_is_rescheduled(client, shards, tiny_model_dir, tmp_path, one_thread):
    """The worker process dies (os._exit) inside the task; Dask reruns the shard on a live
    worker and the output holds that shard once, identical to a single-machine encode."""
    from isotropy.encoders import Encoder

    folder, lines = shards
    markers = tmp_path / "faults"
    markers.mkdir()
    client.run(lambda: os.environ.__setitem__(FAULT_ENV, f"exit:{markers}"))
    try:
        report = encode(
            str(folder / "part-1.txt"), tmp_path / "out", EncoderSpec(model=str(tiny_model_dir), max_length=32), address=client
        )
    finally:
        client.run(lambda: os.environ.pop(FAULT_ENV, None))
        client.wait_for_workers(2, timeout=60)
    assert len(list(markers.iterdir())) == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["part-1.json", "part-1.npy"]
    part = lines[SHARD_LINES[0] : SHARD_LINES[0] + SHARD_LINES[1]]
    got = np.load(tmp_path / "out" / "part-1.npy")
    np.testing.assert_array_equal(got, Encoder(str(tiny_model_dir), max_length=32).encode(part))
    assert report.rows == len(part) and report.shards[0].status == "encoded"


# --------------------------------------------------------------------------- encode


def test_encode_is_resumable_and_verified(client, shards, tiny_model_dir, tmp_path):
    import shutil

    from isotropy.storage.vectors import load_vectors

    src, lines = shards
    folder = tmp_path / "in"
    shutil.copytree(src, folder)
    out = tmp_path / "vecs"
    spec = EncoderSpec(model=str(tiny_model_dir), max_length=32)
    first = encode(str(folder / "*.txt"), out, spec, address=client)
    assert [s.status for s in first.shards] == ["encoded"] * 4
    assert first.rows == len(lines) and first.dim == 32
    # one .npy + one sidecar per input shard, nothing else (no temporaries, no duplicates)
    assert sorted(p.name for p in out.iterdir()) == sorted(f"part-{i}.{e}" for i in range(4) for e in ("json", "npy"))
    original = {p.name: p.read_bytes() for p in out.glob("*.npy")}
    assert load_vectors(out).shape == (len(lines), 32)

    again = encode(str(folder / "*.txt"), out, spec, address=client)
    assert [s.status for s in again.shards] == ["skipped"] * 4

    # corrupt one vector file (same size, flipped bytes), drop another's sidecar, edit a third's source
    npy = out / "part-0.npy"
    data = bytearray(npy.read_bytes())
    data[-8:] = bytes(b ^ 0xFF for b in data[-8:])
    npy.write_bytes(bytes(data))
    (out / "part-1.json").unlink()
    with open(folder / "part-3.txt", "a", encoding="utf-8") as fh:
        fh.write("one more line\n")
    third = encode(str(folder / "*.txt"), out, spec, address=client)
    status = {Path(s.source).name: (s.status, s.reason) for s in third.shards}
    assert status["part-0.txt"] == ("encoded", "vector file corrupted (sha256 mismatch)")
    assert status["part-1.txt"] == ("encoded", "no sidecar (interrupted write)")
    assert status["part-2.txt"] == ("skipped", "")
    assert status["part-3.txt"][0] == "encoded" and "source" in status["part-3.txt"][1]
    assert (out / "part-0.npy").read_bytes() == original["part-0.npy"]
    assert np.load(out / "part-3.npy").shape == (SHARD_LINES[3] + 1, 32)
    meta = json.loads((out / "part-3.json").read_text())
    assert meta["rows"] == SHARD_LINES[3] + 1 and meta["pooling"] and meta["max_length"] == 32

    # a sidecar of isotropy 0.1 has no backend: it reads as torch, so the shard is kept
    side = out / "part-2.json"
    meta = json.loads(side.read_text())
    assert meta["backend"] == "torch"
    del meta["backend"]
    side.write_text(json.dumps(meta))
    assert encode(str(folder / "part-2.txt"), out, spec, address=client).shards[0].status == "skipped"

    # another max_length is another encoding: everything is redone
    fourth = encode(str(folder / "*.txt"), out, EncoderSpec(model=str(tiny_model_dir), max_length=16), address=client)
    assert {s.reason for s in fourth.shards} == {"max_length changed"}


def test_encode_with_transform(client, shards, tiny_model_dir, tmp_path):
    from isotropy.encoders import Encoder

    folder, lines = shards
    enc = Encoder(str(tiny_model_dir), max_length=32)
    w = Whitening(n_components=6).fit(enc.encode(lines))
    w.save(tmp_path / "w")
    spec = EncoderSpec(model=str(tiny_model_dir), max_length=32)
    report = encode(str(folder / "part-0.txt"), tmp_path / "out", spec, transform=tmp_path / "w", address=client)
    got = np.load(tmp_path / "out" / "part-0.npy")
    assert got.shape == (SHARD_LINES[0], 6) and got.dtype == np.float32
    np.testing.assert_allclose(got, w.transform(enc.encode(lines[: SHARD_LINES[0]])), rtol=1e-5, atol=1e-5)
    assert json.loads((tmp_path / "out" / "part-0.json").read_text())["transform_hash"]
    # without the transform the kept output no longer matches: redone
    again = encode(str(folder / "part-0.txt"), tmp_path / "out", spec, address=client)
    assert again.shards[0].reason == "transform_hash changed" and np.load(tmp_path / "out" / "part-0.npy").shape[1] == 32
    assert report.dim == 6


def test_spec_carries_the_backend(tiny_model_dir, tmp_path, monkeypatch):
    """``backend`` defaults to torch, is part of the spec's key, and reaches the Encoder the spec builds.
    (An ONNX export takes ~15 s even for the tiny model, so the onnx path is checked by construction only.)"""
    import isotropy.encoders

    assert EncoderSpec().backend == "torch"
    spec = EncoderSpec.coerce({"model": str(tmp_path / "export"), "backend": "onnx", "max_length": 32})
    assert spec.backend == "onnx" and "onnx" in spec.key()
    assert spec.key() != EncoderSpec(model=str(tmp_path / "export"), max_length=32).key()  # cached apart
    built = {}
    monkeypatch.setattr(isotropy.encoders, "Encoder", lambda *args, **kwargs: built.update(args=args, kwargs=kwargs))
    spec.build()
    assert built["args"] == (str(tmp_path / "export"),) and built["kwargs"]["backend"] == "onnx"
    monkeypatch.undo()
    resolved = EncoderSpec(model=str(tiny_model_dir), max_length=32).resolve()
    assert resolved.backend == "torch" and resolved.dim == 32 and resolved.fingerprint


# --------------------------------------------------------------------------- local cluster, CLI


def test_local_cluster_without_address(tmp_path):
    """No address: a local cluster is started (and torn down) for the call."""
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(n, 5)) for n in (40, 7, 25)]
    for i, p in enumerate(parts):
        np.save(tmp_path / f"v{i}.npy", p)
    w = fit_whitening(str(tmp_path / "v*.npy"), whitening={"shrinkage": "auto"}, n_workers=2)
    ref = Whitening(shrinkage="auto").fit(np.concatenate(parts))
    _assert_same_stats(w.moments_, ref.moments_)
    assert w.shrinkage_ == pytest.approx(ref.shrinkage_, rel=1e-9)


def _worker_state(name: str):
    import sys

    return "torch" in sys.modules, os.environ.get(name)


@pytest.mark.skipif("forkserver" not in __import__("multiprocessing").get_all_start_methods(), reason="no forkserver")
def test_the_local_clusters_workers_start_with_torch_loaded_and_the_environment_at_its_start(monkeypatch):
    """The command's local cluster forks its workers from a forkserver that imported torch (a spawned worker imports
    it on its first task), and a worker sees the environment as it was when its cluster started, a second cluster in
    the same process (the same forkserver) included."""
    from isotropy.distributed.cluster import client_for

    name = "ISOTROPY_TEST_WORKER_ENV"
    seen = []
    for value in ("first", "second"):
        monkeypatch.setenv(name, value)
        with client_for(None, n_workers=1) as client:
            seen.append(list(client.run(_worker_state, name).values()))
    assert seen == [[(True, "first")], [(True, "second")]]


def _cli(args, capsys):
    from isotropy.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    code = exc.value.code if isinstance(exc.value.code, int) else 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_fit_and_encode_on_a_cluster(client, shards, tiny_model_dir, tmp_path, capsys):
    folder, lines = shards
    addr = client.scheduler.address
    common = ["--model", tiny_model_dir, "--max-length", 32, "--batch-size", 1, "--address", addr]
    code, _, err = _cli(
        ["fit", "whitening", "--engine", "dask", "--input", folder / "*.txt", "-o", tmp_path / "w", "-k", 4, *common], capsys
    )
    assert code == 0, err
    w = Whitening.load(tmp_path / "w")
    assert w.n_samples_seen_ == len(lines) and w.n_components_ == 4
    code, _, err = _cli(
        [
            "encode",
            "--engine",
            "dask",
            "--input",
            folder / "*.txt",
            "-o",
            tmp_path / "vecs",
            "--transform",
            tmp_path / "w",
            *common,
        ],
        capsys,
    )
    assert code == 0, err
    assert "4 encoded" in err
    assert np.load(tmp_path / "vecs" / "part-0.npy").shape == (SHARD_LINES[0], 4)


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    code, _, err = _cli(
        ["fit", "whitening", "--engine", "dask", "--input", tmp_path / "none-*.txt", "-o", tmp_path / "w"], capsys
    )
    assert code == 2 and err.strip().count("\n") == 0 and "matches no file" in err
    code, _, err = _cli(["encode", "--engine", "ray", "--input", tmp_path / "*.txt", "-o", tmp_path / "o"], capsys)
    assert code == 2 and "dask" in err and err.strip().count("\n") == 0


# --------------------------------------------------------------------------- bad input


def test_glob_matching_nothing(tmp_path):
    with pytest.raises(IsotropyError, match=r"pattern .*nothing-\*\.txt.* matches no file"):
        fit_whitening(str(tmp_path / "nothing-*.txt"))
    with pytest.raises(IsotropyError, match="does not exist"):
        expand_inputs([tmp_path / "missing.txt"])


def test_unreachable_address_fails_fast(tmp_path):
    np.save(tmp_path / "v.npy", np.zeros((3, 2)))
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    # the bound is asserted through the message (a wall-clock bound would fail under load)
    with pytest.raises(IsotropyError, match=rf"scheduler at {address} within \d+(\.\d+)? s"):
        fit_whitening(str(tmp_path / "v.npy"), address=address)
    with pytest.raises(IsotropyError, match="expected tcp://HOST:PORT"):
        fit_whitening(str(tmp_path / "v.npy"), address="not an address")


def test_vector_shards_of_different_widths(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((3, 4)))
    np.save(tmp_path / "b.npy", np.zeros((3, 5)))
    with pytest.raises(IsotropyError, match=r"differ in width: .*b\.npy has 5 columns but .*a\.npy has 4"):
        fit_whitening(str(tmp_path / "*.npy"))
    # and the merge itself refuses, should shards of two widths ever reach it
    a = Moments().update(np.ones((3, 4)) * np.arange(3)[:, None]).to_arrays()
    b = Moments().update(np.ones((3, 5)) * np.arange(3)[:, None]).to_arrays()
    with pytest.raises(IsotropyError, match="cannot merge statistics of 5-dimensional"):
        _merge(a, b)


def test_other_bad_inputs(tmp_path, monkeypatch):
    np.save(tmp_path / "a.npy", np.zeros((3, 4)))
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(IsotropyError, match="mix .npy vectors and text"):
        fit_whitening([tmp_path / "a.npy", tmp_path / "a.txt"])
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("y\n")
    with pytest.raises(IsotropyError, match="same name 'a'"):
        encode([tmp_path / "a.txt", tmp_path / "sub" / "a.txt"], tmp_path / "out")
    with pytest.raises(IsotropyError, match="unknown encoder spec fields: modle"):
        EncoderSpec.coerce({"modle": "x"})
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the extra were not installed
    with pytest.raises(IsotropyError, match=r"pip install 'isotropy\[distributed\]'"):
        fit_whitening(str(tmp_path / "a.npy"))


def test_bad_line_in_a_shard_is_one_clear_error(client, tiny_model_dir, tmp_path):
    (tmp_path / "good.txt").write_text("fine\n")
    (tmp_path / "bad.txt").write_bytes(b"ok\nnot \xff utf-8\n")
    with pytest.raises(IsotropyError, match=r"bad\.txt line 2 is not valid UTF-8"):
        fit_whitening(str(tmp_path / "*.txt"), EncoderSpec(model=str(tiny_model_dir)), address=client, retries=0)


# --------------------------------------------------------------------------- the reduction itself


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 9), min_size=1, max_size=9).filter(lambda s: sum(s) >= 2),
    seed=st.integers(0, 2**31),
)
def test_tree_of_merges_equals_one_pass(sizes, seed):
    """Any split into shards (empty ones included), reduced by the fixed tree, gives numpy.cov's statistics."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(sum(sizes), 3)) * [1.0, 1e3, 1e-3] + 1e4
    parts, start = [], 0
    for n in sizes:
        m = Moments(3).update(X[start : start + n])
        parts.append(m.to_arrays() if m.n else None)
        start += n
    total = Moments.from_arrays(_tree(parts, lambda a, b, *_: _merge(a, b)))
    np.testing.assert_allclose(total.mean, X.mean(0), rtol=1e-12)
    np.testing.assert_allclose(total.covariance(), np.cov(X.T), rtol=1e-9, atol=1e-9 * np.abs(np.cov(X.T)).max())


def test_tree_shape_is_fixed():
    calls = []
    assert _tree(list("abcde"), lambda a, b, d, i: calls.append((a, b, d)) or f"({a}{b})") == "(((ab)(cd))e)"
    assert calls[0] == ("a", "b", 1) and calls[-1] == ("((ab)(cd))", "e", 3)


def test_a_reduction_gathered_without_fetching_leaves_only_its_root_in_memory(client):
    """gather(fetch=False) drops the client's hold on each finished future, so a part's result is freed once the
    tree has merged it: only the root stays on the workers (before, every part's result stayed to the end)."""
    from isotropy.distributed.cluster import gather, tree_reduce

    run = os.urandom(4).hex()
    futures = [client.submit(np.full, 1000, float(i), key=f"part-{run}-{i}") for i in range(5)]
    root = tree_reduce(futures, lambda a, b, d, i: client.submit(np.add, a, b, key=f"merge-{run}-{d}-{i}"))
    assert gather(client, futures, "parts", [f"part {i}" for i in range(5)], False, fetch=False) == [None] * 5
    assert futures == [None] * 5
    np.testing.assert_array_equal(root.result(), np.full(1000, 10.0))

    def ours_in_memory(dask_scheduler, run=run):
        return sorted(k for k, ts in dask_scheduler.tasks.items() if run in str(k) and ts.state == "memory")

    for _ in range(600):  # the releases reach the scheduler asynchronously: poll until they have (30 s at most)
        held = client.run_on_scheduler(ours_in_memory)
        if held == [root.key]:
            break
        time.sleep(0.05)
    assert held == [root.key]
