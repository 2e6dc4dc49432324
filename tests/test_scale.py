"""Compressed index kinds (ivfpq, opq: isotropy.search.pq) and their Dask build merged on disk
(isotropy.search.build_dask, isotropy.distributed.index_build).

Small on purpose: 1,200 synthetic anisotropic 50-d vectors stand in for GloVe's output (the
encoder is the embedded glove-6b-50d, never asked to encode), a calibration to 40 dims, 8 bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from isotropy.encoders import Encoder
from isotropy.errors import IsotropyError
from isotropy.search import Index
from isotropy.search.build import default_whitening

N, D = 1200, 50


@pytest.fixture(scope="module", autouse=True)
def one_faiss_thread():
    """faiss on one OpenMP thread here: OPQ's training is many small parallel steps, whose barriers cost
    5x its work on a loaded 2-core machine (3.8 s on one thread, 19.8 s on two, measured at load 4)."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


@pytest.fixture(scope="module")
def glove():
    return Encoder("glove-6b-50d")


@pytest.fixture(scope="module")
def raw():
    rng = np.random.default_rng(0)
    scale = np.geomspace(4.0, 0.05, D)  # a few dominant directions, as in real sentence vectors
    return (rng.standard_normal((N, D)) * scale + 1.5).astype(np.float32)


def _sentences(n: int = N) -> list[str]:
    return [f"sentence {i}" for i in range(n)]


def _lists(fidx) -> dict[int, dict[int, bytes]]:
    """Every inverted list of a faiss IVF index: list -> {id: code bytes}."""
    import faiss

    ivf = faiss.extract_index_ivf(fidx)
    inv, cs, out = ivf.invlists, ivf.code_size, {}
    for li in range(ivf.nlist):
        n = inv.list_size(li)
        if not n:
            continue
        ids = faiss.rev_swig_ptr(inv.get_ids(li), n).copy()
        codes = faiss.rev_swig_ptr(inv.get_codes(li), n * cs).copy().reshape(n, cs)
        out[li] = {int(i): c.tobytes() for i, c in zip(ids, codes)}
    return out


def _one_process(glove, raw, kind="ivfpq", **kw):
    t = default_whitening(D, 40, 0.5)  # what index build --whiten 40 --power 0.5 fits (Ledoit-Wolf shrinkage)
    return Index(glove, t, kind, bytes_per_vector=8, nlist=8, nprobe=8, **kw).add_encoded(_sentences(), raw)


@pytest.fixture(scope="module")
def kept(glove, raw):
    """A one-process ivfpq index that keeps its exact vectors (tests set the re-ranking depth they use)."""
    return _one_process(glove, raw, keep_vectors=True, rerank=40)


def test_pq_kinds_rerank_and_saved_folder(kept, glove, raw, tmp_path):
    index = kept.set_search_params(rerank=40)
    Q = index._apply(raw[:64], index.transform)
    exact = Q @ np.asarray(index._exact).T
    truth = np.argsort(-exact, axis=1)[:, :10]
    rec = lambda ids: np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, truth)])  # noqa: E731
    with_rerank = index.search_vectors(Q, 10)
    index.set_search_params(rerank=0)
    without = index.search_vectors(Q, 10)
    assert rec(with_rerank.ids) >= rec(without.ids)
    assert rec(with_rerank.ids) > 0.9  # 40 candidates re-scored exactly on 1,200 rows
    # re-ranked scores are the exact cosines
    np.testing.assert_allclose(with_rerank.scores, np.take_along_axis(exact, with_rerank.ids, 1), rtol=1e-5, atol=1e-5)
    index.save(tmp_path / "ix")
    loaded = Index.load(tmp_path / "ix", rerank=40)
    assert isinstance(loaded._exact, np.memmap)  # the exact vectors stay on disk
    again = loaded.search_vectors(Q, 10)
    np.testing.assert_array_equal(again.ids, with_rerank.ids)
    with pytest.raises(IsotropyError, match="read-only"):
        loaded.add_encoded(["more"], raw[:1])
    with pytest.raises(IsotropyError, match="keep_vectors"):
        Index(glove, None, "ivfpq", rerank=5)
    with pytest.raises(IsotropyError, match="--keep-vectors"):
        Index(glove, None, "flat").set_search_params(rerank=5)


def test_bytes_must_divide_the_calibrated_dimension(glove, raw):
    with pytest.raises(IsotropyError, match=r"--bytes-per-vector 16 needs the vectors' dimension \(50 after"):
        Index(glove, None, "ivfpq", bytes_per_vector=16, nlist=4).add_encoded(_sentences(), raw)
    # opq projects to the largest multiple of M instead (50 -> 48 for 8 bytes)
    index = Index(glove, None, "opq", bytes_per_vector=8, nlist=4, nprobe=4).add_encoded(_sentences(), raw)
    assert index.search_vectors(index._apply(raw[:3]), 1).ids[:, 0].tolist() == [0, 1, 2]


def test_dask_build_equals_one_process_and_resumes_per_shard(glove, raw, tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    from isotropy.search import pq
    from isotropy.search.build_dask import build_index_dask

    monkeypatch.setattr(pq, "MIN_TRAIN", 256)  # the sample (8 lists x 64 = 512 rows) is below the 1,200 rows
    assert pq.train_rows(N, 8) < N

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(_sentences()) + "\n", encoding="utf-8")
    vdir = tmp_path / "vectors"
    vdir.mkdir()
    for i, part in enumerate(np.array_split(raw, 3)):
        np.save(vdir / f"part{i}.npy", part)
    one = _one_process(glove, raw)
    ref = _lists(one._index)
    kw = dict(model="glove-6b-50d", whiten=40, power=0.5, kind="ivfpq", bytes_per_vector=8, nlist=8, nprobe=8, keep_vectors=True)
    kw["keep_work"] = True  # the work folder (a cache) stays after a success too, to be damaged below
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=":0") as client:
        index, report = build_index_dask(corpus, vdir, tmp_path / "ix", address=client, **kw)
        assert [r["status"] for r in report] == ["added"] * 3
        # the calibration is fitted on every row, as one process fits it (moments merged from the shards)
        assert index.transform.moments_.n == N
        np.testing.assert_allclose(index.transform.moments_.scatter, one.transform.moments_.scatter, rtol=1e-10)
        assert _lists(index._index) == ref  # same lists, ids and codes as one process
        work = tmp_path / "ix.parts"
        kept = (work / "shard-00000-part0.faiss").stat().st_mtime_ns
        with open(work / "shard-00001-part1.faiss", "r+b") as fh:  # damage one shard, remove another's vectors
            fh.seek(100)
            fh.write(b"\xff\xfe")
        (work / "shard-00002-part2.vectors.npy").unlink()
        index, report = build_index_dask(corpus, vdir, tmp_path / "ix", address=client, force=True, **kw)
    assert [r["status"] for r in report] == ["skipped", "added", "added"]
    assert "damaged" in report[1]["reason"] and report[2]["reason"] == "shard vectors missing"
    assert (work / "shard-00000-part0.faiss").stat().st_mtime_ns == kept  # the finished shard was not redone
    loaded = Index.load(tmp_path / "ix", rerank=40)  # on-disk lists beside the index, memory-mapped
    assert _lists(loaded._index) == ref
    # --keep-vectors: the workers' exact vectors, joined in row order, are one process's
    np.testing.assert_allclose(loaded._exact, one._apply(raw, one.transform), rtol=1e-6, atol=1e-6)
    Q = one._apply(raw[:20], one.transform)
    assert loaded.search_vectors(Q, 1).ids[:, 0].tolist() == list(range(20))  # re-ranked exactly: itself first
    assert loaded.search(["sentence"], 3).ids.shape == (1, 3)
    with pytest.raises(IsotropyError, match="on-disk inverted lists"):
        loaded.add_encoded(["more"], raw[:1])


@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_serve_reranks_per_request_and_keeps_the_served_depth(kept):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from isotropy.search.serve import create_app

    index = kept
    want = {r: index.set_search_params(rerank=r).search(["sentence"], 5).ids[0].tolist() for r in (0, 40)}
    assert want[0] != want[40]  # the exact re-scoring changes the order on these 1,200 rows
    index.set_search_params(rerank=0)
    client = TestClient(create_app(index, hosts=["testserver"]))
    hits = lambda r: [h["id"] for h in r.json()["hits"]]  # noqa: E731
    assert hits(client.get("/search", params={"q": "sentence", "k": 5, "rerank": 40})) == want[40]
    assert hits(client.get("/search", params={"q": "sentence", "k": 5})) == want[0]  # the served depth, restored
    body = client.post("/search", json={"queries": ["sentence"], "k": 5, "rerank": 40}).json()
    assert [h["id"] for h in body["results"][0]["hits"]] == want[40]
    r = client.get("/search", params={"q": "sentence", "rerank": -1})
    assert r.status_code == 400 and "rerank must be" in r.json()["error"]
    assert index.params["rerank"] == 0
