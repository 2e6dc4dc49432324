"""``isotropy distill --corpus X --engine dask`` losing a worker mid-pass (issue #43, "Bad input").

A worker process that dies inside a corpus part (``os._exit``, the fault hook of ``isotropy.distributed.tasks``,
called by each part once its first chunk is sealed in the teacher cache) is a lost node: Dask runs the part again
on a live worker and the run's table is the one-process run's. A part that kills its worker on every attempt is
one ``error:`` line naming its lines, exit 2, no output folder, and the teacher cache holds only sealed, verified
entries, from which a rerun resumes.

One local cluster of two single-threaded worker processes (over TCP: the command line reaches it with
``--address``) serves the module. Its scheduler allows one death per task instead of Dask's default three (a part is
declared lost on its second death), so that a part dying on every attempt costs two worker restarts, not four; the
code path is the same. Like the command line's own local cluster (``distributed.cluster``), a worker holds only the
part it runs (worker saturation 1), so a death is counted against that part alone. The teacher is the tiny random DistilBERT, the vocabulary pass a random 16-d table over the
default model's tokenizer (tests/test_teacher_cache.py does the same); chunks of 5 lines, parts of 10.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli

distributed = pytest.importorskip("distributed")
pytest.importorskip("model2vec")

from isotropy.distributed import FAULT_ENV  # noqa: E402
from isotropy.distributed.tasks import fault_marker  # noqa: E402

CHUNK, PART = 5, 10
WORDS = "man woman child dog cat bird horse guitar music river city street house garden tree rain road bread book".split()
LINES = 60  # 6 parts of 2 chunks each
CHUNKS = LINES // CHUNK
DOOMED = 1  # the part holding lines 11..20


@pytest.fixture(scope="module")
def cluster():
    import dask

    from isotropy.distributed.cluster import worker_processes

    with worker_processes():  # as the command's own local cluster: a worker started again is forked, not spawned
        with dask.config.set({"distributed.scheduler.allowed-failures": 1, "distributed.scheduler.worker-saturation": 1.0}):
            c = distributed.LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                protocol="tcp://",
                dashboard_address=":0",
                silence_logs=logging.CRITICAL,
            )
        client = distributed.Client(c)
        yield c.scheduler_address, client
        client.close()
        c.close()


@pytest.fixture(scope="module")
def tiny_static():
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    from isotropy.encoders import default_model_path

    tok = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    rng = np.random.default_rng(0)
    table = (rng.standard_normal((tok.get_vocab_size(), 16)) + 0.5).astype(np.float32)
    return StaticModel(table, tok, normalize=True)


@pytest.fixture
def setup(tiny_static, monkeypatch, tmp_path):
    """The vocabulary pass replaced, the client's chunk and part sizes small, torch on one thread here as in the
    workers (the teacher's vectors are then the same bits in both), and a corpus file."""
    import torch

    import isotropy.distill.corpus_fit as fit_mod
    import isotropy.distill.run as run_mod

    monkeypatch.setattr(run_mod, "distill_static", lambda model, dims, show: copy.deepcopy(tiny_static))
    monkeypatch.setattr(fit_mod, "CHUNK", CHUNK)
    monkeypatch.setattr(fit_mod, "PART", PART)
    monkeypatch.setenv("ISOTROPY_CACHE", str(tmp_path / "isotropy-cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    corpus = tmp_path / "corpus" / "c.txt"
    corpus.parent.mkdir()
    corpus.write_text("".join(" ".join(rng.choice(WORDS, size=int(rng.integers(8, 12)))) + "\n" for _ in range(LINES)))
    yield corpus
    torch.set_num_threads(threads)


def _label(corpus: Path, part: int) -> str:
    from isotropy.distill.corpus_fit import part_label

    return part_label(str(corpus), part * PART, PART)


def _distill(tiny_model_dir, out, corpus, *args):
    return run_cli(["distill", "-m", tiny_model_dir, "-o", out, "--corpus", corpus, "--dims", "16", *map(str, args)])


def _dask(address, tiny_model_dir, out, corpus, cache):
    return _distill(tiny_model_dir, out, corpus, "--engine", "dask", "--address", address, "--teacher-cache", cache)


def _table(folder: Path) -> np.ndarray:
    from model2vec import StaticModel

    return np.asarray(StaticModel.from_pretrained(str(folder)).embedding, dtype=np.float64)


def _cache_note(folder: Path) -> str:
    return json.loads((folder / "isotropy.json").read_text())["distill"]["corpus_fit"]["teacher_cache"]


def _faults(client, monkeypatch, spec: str):
    """The fault hook's spec in every worker, and in the environment each nanny gives a worker it starts again after
    a death (its ``env``: a worker forked from the forkserver does not see this process's environment)."""
    monkeypatch.setenv(FAULT_ENV, spec)
    for nanny in client.cluster.workers.values():
        monkeypatch.setitem(nanny.env, FAULT_ENV, spec)
    client.run(lambda: os.environ.__setitem__(FAULT_ENV, spec))  # a lambda travels by value, a bound method would not


def _no_faults(client, monkeypatch):
    """Off everywhere, every worker back, and each one's thread free: a part of the failed run still running when the
    client gave up has finished (each worker has one thread, so a task sent to it runs after it; no sleep)."""
    monkeypatch.delenv(FAULT_ENV, raising=False)
    for nanny in client.cluster.workers.values():
        nanny.env.pop(FAULT_ENV, None)
    client.wait_for_workers(1, timeout=600)
    try:  # the nanny's restart of the last worker that died; on a loaded 2-core machine it may give up: one suffices
        client.wait_for_workers(2, timeout=60)
    except TimeoutError:  # distributed's WorkerStartTimeoutError
        pass
    client.run(lambda: os.environ.pop(FAULT_ENV, None))
    workers = list(client.scheduler_info()["workers"])
    client.gather([client.submit(lambda: None, workers=[w], allow_other_workers=False, pure=False) for w in workers])


def test_a_worker_lost_in_one_part_once_is_run_again_and_the_table_is_one_processs(
    cluster, setup, tiny_model_dir, tmp_path, monkeypatch
):
    address, client = cluster
    corpus, markers = setup, tmp_path / "faults"
    markers.mkdir()
    for part in range(LINES // PART):  # a marker already there spares its part: only the doomed part dies, once
        if part != DOOMED:
            fault_marker(markers, _label(corpus, part)).touch()
    before = set(client.scheduler_info()["workers"])
    _faults(client, monkeypatch, f"exit:{markers}")
    try:
        code, _, err = _dask(address, tiny_model_dir, tmp_path / "d", corpus, tmp_path / "tc")
    finally:
        _no_faults(client, monkeypatch)
    assert code == 0, err
    assert len(list(markers.iterdir())) == LINES // PART  # the doomed part's marker: its worker did die
    assert set(client.scheduler_info()["workers"]) != before  # the nanny started another one
    # the part's first chunk was sealed before the death: its second attempt read it back
    assert _cache_note(tmp_path / "d") == f"cached chunks used: 1 of {CHUNKS}"
    code, _, err = _distill(tiny_model_dir, tmp_path / "one", corpus, "--no-teacher-cache")
    assert code == 0, err
    np.testing.assert_allclose(_table(tmp_path / "d"), _table(tmp_path / "one"), rtol=1e-6, atol=1e-7)


def _entries(cache: Path) -> dict[str, np.ndarray]:
    """Every entry of the teacher cache folder, each verified; nothing else in it (no temporary, no unsealed file)."""
    from isotropy.encoders.cache import VectorCache

    files = sorted(p.name for p in cache.iterdir() if p.is_file())
    keys = sorted(p for p in cache.glob("*.json"))
    assert files == sorted([p.name for p in keys] + [p.with_suffix(".npy").name for p in keys]), files
    got = {}
    for p in keys:
        vectors, reason = VectorCache(cache).lookup(json.loads(p.read_text())["key"])
        assert reason is None and vectors is not None, (p, reason)
        got[p.name] = vectors
    return got


def _chunk_entries(cache: Path, teacher: Path, corpus: Path, first: int) -> list[str]:
    """The key files of the chunk of ``corpus`` starting at its line ``first`` (0-based): its lines', its spans'."""
    from isotropy.distill.corpus_fit import HELD_OUT, span_texts
    from isotropy.distill.teacher_vectors import TeacherVectors
    from isotropy.encoders import Encoder
    from isotropy.encoders.cache import VectorCache

    lines = corpus.read_text().splitlines()[first : first + CHUNK]
    spans = span_texts([s for i, s in enumerate(lines, first) if i % HELD_OUT != HELD_OUT - 1])
    base = TeacherVectors(Encoder(str(teacher)), VectorCache(cache)).base  # the keys the workers use
    return [VectorCache(cache).paths(VectorCache.key(**base, sentences=t))[1].name for t in (lines, spans)]


def test_a_part_that_kills_its_worker_every_time_is_one_line_and_the_rerun_resumes(
    cluster, setup, tiny_model_dir, tmp_path, monkeypatch
):
    address, client = cluster
    corpus, markers, cache = setup, tmp_path / "faults", tmp_path / "tc"
    markers.mkdir()
    fault_marker(markers, _label(corpus, DOOMED)).touch()  # this part's every attempt kills its worker
    before = sorted(p.name for p in tmp_path.iterdir())
    _faults(client, monkeypatch, f"exit-always:{markers}")
    try:
        code, out, err = _dask(address, tiny_model_dir, tmp_path / "d", corpus, cache)
    finally:
        _no_faults(client, monkeypatch)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    want = f"error: the corpus part {corpus}, lines 11..20 failed: the Dask worker processes holding it died 2 times"
    assert lines[0].startswith(want) and lines[0].endswith("a rerun encodes only the rest"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "tc"])  # no output folder, no temporary
    # only sealed entries, each verified (lines and spans: two per chunk), among them the doomed part's first chunk,
    # sealed before its worker died; its second chunk never (the other parts: those the scheduler ran before the
    # client gave up, whole)
    entries = _entries(cache)
    doomed = _chunk_entries(cache, tiny_model_dir, corpus, DOOMED * PART)
    assert set(doomed) <= set(entries) and len(entries) % 2 == 0
    assert not set(_chunk_entries(cache, tiny_model_dir, corpus, DOOMED * PART + CHUNK)) & set(entries)
    code, _, err = _dask(address, tiny_model_dir, tmp_path / "d", corpus, cache)  # the fault gone
    assert code == 0, err
    assert _cache_note(tmp_path / "d") == f"cached chunks used: {len(entries) // 2} of {CHUNKS}"
    assert len(_entries(cache)) == 2 * CHUNKS
    code, _, err = _distill(tiny_model_dir, tmp_path / "one", corpus, "--no-teacher-cache")
    assert code == 0, err
    np.testing.assert_allclose(_table(tmp_path / "d"), _table(tmp_path / "one"), rtol=1e-6, atol=1e-7)


def test_a_damaged_chunk_read_on_a_worker_is_encoded_again_and_its_reason_reaches_the_client(
    cluster, setup, tiny_model_dir, tmp_path
):
    """The warning is made on a worker, whose stderr (a remote machine's log) is not the user's: it travels back with
    the part's sums and the client prints it, one line naming the entry, the lines and why."""
    address, client = cluster
    corpus, cache = setup, tmp_path / "tc"
    code, _, err = _distill(tiny_model_dir, tmp_path / "one", corpus, "--teacher-cache", cache)  # every chunk sealed
    assert code == 0, err
    key = cache / _chunk_entries(cache, tiny_model_dir, corpus, DOOMED * PART + CHUNK)[0]  # lines 16..20
    npy = key.with_suffix(".npy")
    data = bytearray(npy.read_bytes())
    data[-7] ^= 0x10  # a byte of the vectors, the header intact
    npy.write_bytes(bytes(data))
    shutil.rmtree(cache / "sums")  # else the rerun reads the pass's sums (distill/sums_cache.py) and no chunk
    code, _, err = _dask(address, tiny_model_dir, tmp_path / "d", corpus, cache)
    assert code == 0, err
    lines = [x for x in err.splitlines() if x.startswith("warning")]
    assert len(lines) == 1 and lines[0].startswith(f"warning: the teacher cache entry {npy} (lines of sentences 16..20"), err
    assert "its bytes differ from the digest recorded" in lines[0] and lines[0].endswith("encoding it again")
    assert _cache_note(tmp_path / "d") == f"cached chunks used: {CHUNKS - 1} of {CHUNKS}"
    assert len(_entries(cache)) == 2 * CHUNKS  # written again, verified
    np.testing.assert_allclose(_table(tmp_path / "d"), _table(tmp_path / "one"), rtol=1e-6, atol=1e-7)


def test_a_disk_full_half_way_through_a_chunk_leaves_no_partial_entry_and_the_rerun_serves_only_sealed_ones(
    tiny_static, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    """The third entry's vectors are cut off half-written by ENOSPC (tests/test_teacher_cache.py fails the write before
    its first byte): one warning, the run goes on and gives the uncached sums, the cache folder holds the two sealed
    entries and nothing else (the atomic writer's temporary is gone), and the rerun reads those two and encodes the
    rest (one process: the workers write through the same cache)."""
    import errno
    import io

    import isotropy.distill.corpus_fit as fit_mod
    from isotropy.encoders import Encoder
    from isotropy.encoders.cache import VectorCache

    monkeypatch.setattr(fit_mod, "CHUNK", CHUNK)
    teacher, real_save, writes = Encoder(str(tiny_model_dir)), np.save, {"n": 0}
    lines = [" ".join(np.random.default_rng(i).choice(WORDS, size=9)) for i in range(4 * CHUNK)]

    def full(fh, array, *args, **kwargs):
        writes["n"] += 1
        if writes["n"] != 3:
            return real_save(fh, array, *args, **kwargs)
        buf = io.BytesIO()
        real_save(buf, array, *args, **kwargs)
        fh.write(buf.getvalue()[: len(buf.getvalue()) // 2])
        fh.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def run(cache):
        return fit_mod.fit_corpus(tiny_static, teacher, lines, spans=False, show_progress=False, cache=cache)

    monkeypatch.setattr(np, "save", full)
    capsys.readouterr()
    got = run(VectorCache(tmp_path / "tc"))
    err = capsys.readouterr().err
    monkeypatch.setattr(np, "save", real_save)
    assert writes["n"] == 3 and len(err.strip().splitlines()) == 1 and "is full" in err and "goes on without" in err, err
    assert sorted(p.suffix for p in (tmp_path / "tc").iterdir()) == [".json", ".json", ".npy", ".npy"]
    assert len(_entries(tmp_path / "tc")) == 2
    fresh = run(None)
    for a, b in ((got.fit, fresh.fit), (got.held, fresh.held)):
        np.testing.assert_allclose(a.cross_, b.cross_, rtol=1e-12, atol=1e-12)
    again = run(VectorCache(tmp_path / "tc"))
    assert (again.chunks, again.cached) == (4, 2) and not capsys.readouterr().err
    np.testing.assert_allclose(again.fit.cross_, fresh.fit.cross_, rtol=1e-12, atol=1e-12)
    assert len(_entries(tmp_path / "tc")) == 4


class _HashTeacher:
    """A teacher whose vector of a text is a fixed pseudo-random function of the text (no model to load)."""

    def encode(self, sentences, show_progress=None):
        import zlib

        return np.stack([np.random.default_rng(zlib.crc32(s.encode())).standard_normal(8) for s in sentences])


def test_a_merge_of_the_parts_sums_that_kills_its_worker_is_one_line(tiny_static, monkeypatch):
    """Every part done, a merge of two parts' sums (two Grams in one worker's memory: out of memory) lost more often
    than the scheduler allows: one line, not distributed's KilledWorker traceback. In-process workers here, whose merge
    raises the KilledWorker a scheduler would set."""
    import isotropy.distill.corpus_fit as fit_mod
    from isotropy.errors import IsotropyError

    def lost(a, b):
        from types import SimpleNamespace

        raise distributed.KilledWorker("isotropy-dmerge", SimpleNamespace(address="tcp://10.0.0.9:40000"), 3)

    monkeypatch.setattr(fit_mod, "CHUNK", CHUNK)
    monkeypatch.setattr(fit_mod, "PART", PART)
    monkeypatch.setattr(fit_mod, "_merge_parts", lost)
    lines = [" ".join(np.random.default_rng(i).choice(WORDS, size=9)) for i in range(3 * PART)]
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0") as client:
        with pytest.raises(IsotropyError, match=r"^merging the corpus parts' sums killed a Dask worker repeatedly"):
            fit_mod.fit_corpus(tiny_static, _HashTeacher(), lines, engine="dask", address=client, show_progress=False)
