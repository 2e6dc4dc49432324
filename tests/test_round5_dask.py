"""Round 5 (issue #42) of the Dask-built index and the compressed kinds: ../shared/audits/round5.md's
L1, L2, W3-W7, T1, U11, U14-U20, U22 and the default code size. Each test names its case.

One in-process cluster (threads, over TCP so the command line reaches it with --address) serves the
module; the encoder is the embedded glove-6b-50d, the shards a few hundred random 50-d vectors
(only W6 encodes text).
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from helpers import run_cli, snapshot
from isotropy.errors import IsotropyError
from isotropy.search import Index
from isotropy.search import pq as pqmod

distributed = pytest.importorskip("distributed")

D, PER, PARTS = 50, 100, 4
N = PER * PARTS
PQ = ["--model", "glove-6b-50d", "--engine", "dask", "--kind", "ivfpq", "--bytes-per-vector", "10", "--nlist", "4"]
API = dict(model="glove-6b-50d", kind="ivfpq", bytes_per_vector=10, nlist=4, nprobe=4)


@pytest.fixture(scope="module")
def cluster():
    c = distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        protocol="tcp://",
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )
    client = distributed.Client(c)
    yield c.scheduler_address, client
    client.close()
    c.close()


@pytest.fixture(scope="module")
def raw():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((N, D)) * np.geomspace(3.0, 0.1, D) + 0.5).astype(np.float32)


def _corpus(folder, n=N):
    path = folder / "corpus.txt"
    path.write_text("".join(f"sentence {i}\n" for i in range(n)), encoding="utf-8")
    return path


def _shards(folder, raw, names=None):
    folder.mkdir(parents=True, exist_ok=True)
    names = names or [f"part-{i:02d}.npy" for i in range(PARTS)]
    paths = []
    for name, part in zip(names, np.array_split(raw, len(names))):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        np.save(folder / name, part)
        paths.append(folder / name)
    return paths


def _cli(address, *args):
    return run_cli(["index", "build", *map(str, args), *PQ, "--address", address, "--no-progress"])


def _one_line(err):
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def _ids(index) -> list[int]:
    """Every id in the index's inverted lists, sorted."""
    import faiss

    ivf = faiss.extract_index_ivf(index._index)
    out = []
    for li in range(ivf.nlist):
        n = ivf.invlists.list_size(li)
        if n:
            out.extend(faiss.rev_swig_ptr(ivf.invlists.get_ids(li), n).tolist())
    return sorted(out)


# --------------------------------------------------------------------------- L1, U19: the shards are inputs


@pytest.mark.parametrize("force", [True, False])
def test_l1_output_that_is_the_shards_folder_is_refused(cluster, raw, tmp_path, force):
    _shards(tmp_path / "vecs", raw)
    corpus = _corpus(tmp_path)
    before = snapshot(tmp_path)
    code, _, err = _cli(
        cluster[0], corpus, "-o", tmp_path / "vecs", "--input", tmp_path / "vecs" / "*.npy", *(["--force"] if force else [])
    )
    assert code == 2 and "input" in _one_line(err)
    assert snapshot(tmp_path) == before  # the shards are all there, nothing else written


def test_u19_output_inside_the_shards_folder_is_refused(cluster, raw, tmp_path):
    _shards(tmp_path / "vecs", raw)
    corpus = _corpus(tmp_path)
    before = snapshot(tmp_path)
    code, _, err = _cli(cluster[0], corpus, "-o", tmp_path / "vecs" / "idx", "--input", tmp_path / "vecs" / "*.npy")
    assert code == 2 and "inside the input folder" in _one_line(err)
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- L2, U15, U20, U22: the work folder


def test_l2_a_users_parts_folder_is_refused_untouched(cluster, raw, tmp_path):
    _shards(tmp_path / "vecs", raw)
    corpus = _corpus(tmp_path)
    mine = tmp_path / "book.parts"
    (mine / "transform").mkdir(parents=True)
    (mine / "transform" / "notes.txt").write_text("chapter one\n")
    np.save(mine / "vectors.npy", np.arange(12.0).reshape(3, 4))
    before = snapshot(tmp_path)
    code, _, err = _cli(cluster[0], corpus, "-o", tmp_path / "book", "--input", tmp_path / "vecs" / "*.npy")
    line = _one_line(err)
    assert code == 2 and "book.parts" in line and "not the work folder" in line
    assert snapshot(tmp_path) == before


def test_u22_u15_trailing_slash_and_no_work_folder_left_after_success(cluster, raw, tmp_path):
    _shards(tmp_path / "vecs", raw)
    corpus = _corpus(tmp_path)
    for _ in range(2):  # the second run replaces the index (--force), again with its work folder beside it
        code, _, err = _cli(cluster[0], corpus, "-o", f"{tmp_path / 'j8'}/", "--input", tmp_path / "vecs" / "*.npy", "--force")
        assert code == 0, err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "j8", "vecs"]  # no j8.parts, no j8/.parts
    assert len(Index.load(tmp_path / "j8")) == N


def test_u15_an_interrupted_build_keeps_its_work_folder_and_the_rerun_resumes(cluster, raw, tmp_path, monkeypatch):
    from isotropy.distributed import index_build
    from isotropy.search.build_dask import build_index_dask

    _shards(tmp_path / "vecs", raw)
    corpus = _corpus(tmp_path)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C once every shard was added, before the merge

    with monkeypatch.context() as m:
        m.setattr(index_build, "merge_shards", interrupted)
        with pytest.raises(KeyboardInterrupt):
            build_index_dask(corpus, tmp_path / "vecs", tmp_path / "ix", address=cluster[1], **API)
    assert not (tmp_path / "ix").exists() and (tmp_path / "ix.parts" / "trained.faiss").is_file()
    index, report = build_index_dask(corpus, tmp_path / "vecs", tmp_path / "ix", address=cluster[1], **API)
    assert [r["status"] for r in report] == ["skipped"] * PARTS and _ids(index) == list(range(N))
    assert not (tmp_path / "ix.parts").exists()


def test_u20_unreachable_address_leaves_nothing(raw, tmp_path):
    _shards(tmp_path / "vecs", raw)
    corpus = _corpus(tmp_path)
    before = snapshot(tmp_path)
    code, _, err = _cli("tcp://127.0.0.1:1", corpus, "-o", tmp_path / "out", "--input", tmp_path / "vecs" / "*.npy")
    assert code == 2 and "127.0.0.1:1" in _one_line(err)
    assert snapshot(tmp_path) == before  # neither out nor an empty out.parts


def test_u18_a_damaged_work_folder_is_trained_again_and_resume_still_works(cluster, raw, tmp_path):
    from isotropy.search.build_dask import build_index_dask

    _shards(tmp_path / "vecs", raw)
    corpus = _corpus(tmp_path)
    out, work = tmp_path / "ix", tmp_path / "ix.parts"
    first, report = build_index_dask(corpus, tmp_path / "vecs", out, address=cluster[1], keep_work=True, **API)
    assert [r["status"] for r in report] == ["added"] * PARTS and (work / ".isotropy-index-work").is_file()
    _, report = build_index_dask(corpus, tmp_path / "vecs", out, address=cluster[1], keep_work=True, force=True, **API)
    assert [r["status"] for r in report] == ["skipped"] * PARTS  # a kept work folder resumes
    import shutil

    shutil.rmtree(work / "transform")  # its trained.json intact: the audit's damage
    again, report = build_index_dask(corpus, tmp_path / "vecs", out, address=cluster[1], force=True, **API)
    # trained again (before: "ix.parts/transform is not a folder of a fitted isotropy artefact" on every rerun);
    # the seeded training gives the same trained index, so the finished shards still verify and are kept
    assert [r["status"] for r in report] == ["skipped"] * PARTS
    assert _ids(again) == list(range(N))
    np.testing.assert_allclose(again.transform.moments_.mean, first.transform.moments_.mean, rtol=1e-6)
    assert not work.exists()  # removed after the successful build


# --------------------------------------------------------------------------- W3, W4: work files and the trained record


def test_w3_shards_of_one_name_in_different_folders_keep_their_own_rows(cluster, raw, tmp_path):
    from isotropy.search.build_dask import build_index_dask

    names = [f"{d}/x.npy" for d in "abcd"]
    _shards(tmp_path / "v", raw, names)
    corpus = _corpus(tmp_path)
    index, report = build_index_dask(corpus, str(tmp_path / "v" / "*" / "x.npy"), tmp_path / "same", address=cluster[1], **API)
    assert _ids(index) == list(range(N))  # each row once (before: one shard's file read four times)
    assert _ids(Index.load(tmp_path / "same")) == list(range(N))


def test_w4_a_changed_shard_retrains_the_calibration(cluster, raw, tmp_path):
    from isotropy.search.build_dask import build_index_dask

    paths = _shards(tmp_path / "vc", raw)
    corpus = _corpus(tmp_path)
    build_index_dask(corpus, tmp_path / "vc", tmp_path / "ch", address=cluster[1], keep_work=True, **API)
    np.save(paths[1], 3 * np.load(paths[1]) + 1)  # the same name and rows, another content
    rerun, report = build_index_dask(corpus, tmp_path / "vc", tmp_path / "ch", address=cluster[1], force=True, **API)
    fresh, _ = build_index_dask(corpus, tmp_path / "vc", tmp_path / "fresh", address=cluster[1], **API)
    assert [r["status"] for r in report] == ["added"] * PARTS
    np.testing.assert_allclose(rerun.transform.moments_.mean, fresh.transform.moments_.mean, rtol=1e-6)
    changed = np.concatenate([np.load(p) for p in paths]).mean(axis=0)
    np.testing.assert_allclose(rerun.transform.moments_.mean, changed, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- W5: another encoder's shards


def test_w5_shards_of_another_encoder_are_refused_unless_allowed(cluster, raw, tmp_path):
    from isotropy.storage.vectors import save_npy

    folder = tmp_path / "vo"
    folder.mkdir()
    other = {"model": "cal", "fingerprint": "0123456789abcdef", "pooling": "last-avg", "max_length": 512, "dim": D}
    for i, part in enumerate(np.array_split(raw, PARTS)):
        save_npy(folder / f"p{i}.npy", part, kind="vectors", meta={"rows": len(part), "dim": D, "provenance": other})
    corpus = _corpus(tmp_path)
    code, _, err = _cli(cluster[0], corpus, "-o", tmp_path / "other", "--input", folder / "*.npy")
    line = _one_line(err)
    assert code == 2 and "p0.npy was encoded by another encoder" in line and "--allow-other-encoder" in line
    assert not (tmp_path / "other").exists() and not (tmp_path / "other.parts").exists()
    code, _, err = _cli(cluster[0], corpus, "-o", tmp_path / "other", "--input", folder / "*.npy", "--allow-other-encoder")
    assert code == 0, err


# --------------------------------------------------------------------------- W6: the shards' order against the corpus


@pytest.fixture(scope="module")
def numbered(cluster, tmp_path_factory):
    """Ten text shards p1..p10 encoded on the cluster (their sidecars record each text's sha256) and the
    corpus concatenated in numeric order."""
    from isotropy.distributed import encode

    root = tmp_path_factory.mktemp("numbered")
    words = "the a cat dog sat on mat ran river stone light dark over under near far house tree".split()
    rng = np.random.default_rng(1)
    lines = [" ".join(rng.choice(words, size=6)) + f" {i}" for i in range(400)]
    (root / "tp").mkdir()
    for i in range(10):
        (root / "tp" / f"p{i + 1}.txt").write_text("\n".join(lines[i * 40 : (i + 1) * 40]) + "\n", encoding="utf-8")
    (root / "ordered.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    encode(str(root / "tp" / "*.txt"), root / "vp", "glove-6b-50d", address=cluster[1], show_progress=False)
    return root, lines


def test_w6_numeric_shard_order_is_proven_by_the_sidecars(cluster, numbered, tmp_path):
    from isotropy.encoders import Encoder
    from isotropy.search.build_dask import build_index_dask

    root, lines = numbered
    index, _ = build_index_dask(
        root / "ordered.txt", str(root / "vp" / "*.npy"), tmp_path / "ord", address=cluster[1], keep_vectors=True, **API
    )
    assert any("numeric order" in w for w in index.warnings)
    want = index._apply(Encoder("glove-6b-50d").encode(lines), index.transform)
    np.testing.assert_allclose(np.asarray(index._exact), want, rtol=1e-4, atol=1e-5)  # row i is line i's vector


def test_w6_a_corpus_in_another_order_is_refused_naming_the_shard(cluster, numbered, tmp_path):
    root, lines = numbered
    swapped = lines[40:80] + lines[:40] + lines[80:]  # p2's lines first
    corpus = tmp_path / "swapped.txt"
    corpus.write_text("\n".join(swapped) + "\n", encoding="utf-8")
    code, _, err = _cli(cluster[0], corpus, "-o", tmp_path / "x", "--input", root / "vp" / "*.npy")
    line = _one_line(err)
    assert code == 2 and "p1.npy was encoded from" in line and "lines 1-40" in line
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.parts").exists()


def test_w6_an_unprovable_ambiguous_order_is_refused(cluster, raw, tmp_path):
    _shards(tmp_path / "vn", raw[:200], [f"p{i}.npy" for i in range(1, 11)])  # no sidecars: nothing records the text
    corpus = _corpus(tmp_path, 200)
    code, _, err = _cli(cluster[0], corpus, "-o", tmp_path / "x", "--input", tmp_path / "vn" / "*.npy")
    assert code == 2 and "zero-padded" in _one_line(err)


# --------------------------------------------------------------------------- W7, T1, U17: NaN and inf in any row


@pytest.mark.parametrize("how", ["--no-whiten", "whiten", "--transform"])
def test_w7_t1_u17_a_nan_anywhere_is_one_line_naming_shard_and_row(cluster, raw, tmp_path, how):
    from isotropy.search.build import default_whitening

    paths = _shards(tmp_path / "vn", raw)
    bad = np.load(paths[2])
    bad[5, 3] = np.nan if how != "whiten" else np.inf
    np.save(paths[2], bad)
    corpus = _corpus(tmp_path)
    extra = {"--no-whiten": ["--no-whiten"], "whiten": []}.get(how)
    if extra is None:
        default_whitening(D, 40).fit(raw).save(tmp_path / "t")
        extra = ["--transform", tmp_path / "t"]
    before = snapshot(tmp_path)
    code, _, err = _cli(cluster[0], corpus, "-o", tmp_path / "nanidx", "--input", tmp_path / "vn" / "*.npy", *extra)
    line = _one_line(err)
    assert code == 2 and "part-02.npy has a NaN or infinite value in row 5 (0-based; row 205 of the corpus)" in line
    assert snapshot(tmp_path) == before  # no index, no work folder


def test_w7_a_nan_outside_the_training_sample(cluster, raw, tmp_path, monkeypatch):
    from isotropy.search.build_dask import build_index_dask

    monkeypatch.setattr(pqmod, "MIN_TRAIN", 256)  # the sample (256 of 400 rows) leaves rows out
    sample = set(pqmod.train_sample(N, 4).tolist())
    row = next(r for r in range(N - 1, 0, -1) if r not in sample)
    paths = _shards(tmp_path / "vn", raw)
    part = np.load(paths[row // PER])
    part[row % PER] = np.nan
    np.save(paths[row // PER], part)
    with pytest.raises(IsotropyError, match=rf"part-0{row // PER}.npy has a NaN .* row {row % PER} \(0-based"):
        build_index_dask(_corpus(tmp_path), tmp_path / "vn", tmp_path / "big", address=cluster[1], no_whiten=True, **API)
    assert not (tmp_path / "big").exists() and not (tmp_path / "big.parts").exists()


# --------------------------------------------------------------------------- U11, U14, U16: what reaches the terminal


def test_u11_u14_no_raw_faiss_lines_and_one_note(cluster, raw, tmp_path, capfd):
    _shards(tmp_path / "vecs", raw)
    code, _, err = _cli(cluster[0], _corpus(tmp_path), "-o", tmp_path / "ix", "--input", tmp_path / "vecs" / "*.npy")
    fd = capfd.readouterr()
    assert code == 0, err
    assert "WARNING clustering" not in fd.err + fd.out and "resizing" not in fd.err + fd.out  # faiss's C++ lines
    assert err.count("trained on 400 vectors, fewer than the 9984 faiss advises") == 1  # said once, in our words


def test_u16_a_text_file_in_the_glob_is_one_clear_line(cluster, raw, tmp_path):
    _shards(tmp_path / "vecs", raw)
    (tmp_path / "vecs" / "readme.txt").write_text("these are my vectors\n")
    code, _, err = _cli(cluster[0], _corpus(tmp_path), "-o", tmp_path / "ix", "--input", tmp_path / "vecs" / "*")
    line = _one_line(err)
    assert code == 2 and "readme.txt is not a .npy vector file" in line and "pickle" not in line


# --------------------------------------------------------------------------- the default code size fits any width


def test_default_bytes_fit_any_width():
    assert pqmod.default_bytes("ivfpq", 50) == 25 and pqmod.default_bytes("ivfpq", 384) == 32
    assert pqmod.default_bytes("ivfpq", 53) == 1 and pqmod.default_bytes("opq", 20) == 20
    for d in range(1, 300):
        m = pqmod.default_bytes("ivfpq", d)
        assert d % m == 0 and m <= 32 and not any(d % b == 0 for b in range(m + 1, 33))


def test_ivfpq_on_glove_with_the_default_bytes(tmp_path):
    corpus = _corpus(tmp_path, 300)
    code, _, err = run_cli(
        ["index", "build", corpus, "-o", tmp_path / "pq", "--model", "glove-6b-50d", "--kind", "ivfpq", "--no-progress"]
    )
    assert code == 0, err
    assert "note: --bytes-per-vector 25: the default 32 does not fit the 50 dimensions" in err and "25 bytes/vector" in err
    assert json.loads((tmp_path / "pq" / "config.json").read_text())["index"]["params"]["bytes_per_vector"] == 25
    args = [
        "index",
        "build",
        corpus,
        "-o",
        tmp_path / "pq32",
        "--model",
        "glove-6b-50d",
        "--kind",
        "ivfpq",
        "--bytes-per-vector",
        "32",
    ]
    code, _, err = run_cli(args)
    assert code == 2 and "--bytes-per-vector 32 needs" in _one_line(err)


def test_index_defaults_the_code_size_to_what_fits_the_dimension():
    """The Python ``Index`` takes the command line's default too: GloVe's 50 dims get 25 bytes, not a refusal of 32."""
    from isotropy.encoders import Encoder

    enc = Encoder("glove-6b-50d")
    words = ["cat", "dog", "river", "music", "bread", "train", "city", "rain", "gold", "chess"]
    rng = np.random.default_rng(0)
    sentences = [" ".join(rng.choice(words, size=5)) + f" {i}" for i in range(300)]
    idx = Index(enc, None, "ivfpq", nlist=4)
    idx.add(sentences)
    assert pqmod.default_bytes("ivfpq", 50) == 25 and pqmod.default_bytes("ivfpq", 384) == 32
    import faiss

    assert faiss.extract_index_ivf(idx._index).code_size == 25  # 25 sub-quantisers of one byte
    assert idx.search(sentences[:1], k=1).ids.shape == (1, 1)
