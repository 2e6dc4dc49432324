"""``isotropy calibrate``: a corpus in, a model folder out that sentence-transformers, MTEB, faiss and ONNX load.

The proof that a stock folder needs no isotropy: it is loaded by plain ``SentenceTransformer(path)``
in a fresh ``python -I`` process whose ``sys.path`` has neither ``src/`` nor the editable install's
entry (``__editable__.isotropy-*.pth`` puts ``src/`` on the path; it installs no import hook), and
that process asserts ``isotropy`` cannot be found before loading and was not imported after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isotropy
from helpers import ROOT, SENTENCES, assert_same_geometry, data_dir, run_cli, word_corpus
from isotropy.calibration import run_calibration
from isotropy.calibration.corpus import Corpus, Reservoir
from isotropy.calibration.fit import resolve_method
from isotropy.encoders import Encoder
from isotropy.errors import IsotropyError
from isotropy.integrations import to_sentence_transformer
from isotropy.integrations.st_onnx import ST_ONNX_INT8_NAME as ST_INT8
from isotropy.storage.text import iter_sentences, read_sentences
from isotropy.transforms import PRESETS, TRANSFORMS, make_transform, transform_class
from isotropy.transforms.base import AffineTransform

corpus = word_corpus


def affine_methods() -> list[str]:
    """Every affine method the registry holds (kinds and presets): new transforms join as they land."""
    kinds = [k for k in TRANSFORMS if issubclass(transform_class(k), AffineTransform)]
    return kinds + [p for p, (kind, _, _) in PRESETS.items() if issubclass(transform_class(kind), AffineTransform)]


STOCK_POOLINGS = ("cls", "last-avg", "first-last-avg")

ISOLATED = r"""
import importlib.util, json, os, sys
src, jobs_file, out_file = sys.argv[1:4]
sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != os.path.realpath(src) and "__editable__" not in p]
assert importlib.util.find_spec("isotropy") is None, "isotropy is importable"
import numpy as np
from sentence_transformers import SentenceTransformer
jobs = json.load(open(jobs_file))
out = {}
for name, folder in jobs["folders"].items():
    out[name] = SentenceTransformer(folder, device="cpu").encode(jobs["sentences"], convert_to_numpy=True)
assert "isotropy" not in sys.modules, "isotropy was imported"
np.savez(out_file, **out)
"""


def encode_without_isotropy(folders: dict[str, Path], sentences: list[str], tmp: Path) -> dict[str, np.ndarray]:
    """Each folder loaded by plain ``SentenceTransformer(path)`` in a fresh process where isotropy is not importable."""
    jobs = tmp / "jobs.json"
    jobs.write_text(json.dumps({"folders": {k: str(v) for k, v in folders.items()}, "sentences": sentences}))
    out = tmp / "out.npz"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    proc = subprocess.run(
        [sys.executable, "-I", "-c", ISOLATED, str(ROOT / "src"), str(jobs), str(out)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


# --------------------------------------------------------------------------- stock folders, no isotropy


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    lines = corpus(300)
    lines[10:10] = ["", "   "]  # blank lines are skipped
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def stock_folders(tiny_model_dir, tmp_path_factory):
    """Folders of the tiny model calibrated with every affine method x every stock pooling, written by
    ``to_sentence_transformer`` (what ``calibrate`` writes too): {name: (folder, encoder, transform)}."""
    root = tmp_path_factory.mktemp("stock")
    lines = corpus(200)
    out = {}
    for pooling in STOCK_POOLINGS:
        enc = Encoder(tiny_model_dir, pooling=pooling, max_length=32, device="cpu")
        X = enc.encode(lines)
        for method in affine_methods():
            t = resolve_method(method).fit(X)
            path = root / f"{method}-{pooling}"
            to_sentence_transformer(enc, t, path, stock=True)
            out[path.name] = (path, enc, t)
    return out


def float32_bound(X: np.ndarray, t) -> np.ndarray:
    """What rounding to float32 may change in ``y = (x - shift) kernel``, as the stock Dense modules compute it:
    the centring rounds each entry by eps (|x| + |shift|), then the textbook bound of a float32 dot product of
    length d, (d + 2) eps sum |x_i - shift_i| |k_ij|, with the kernel rounded too."""
    eps = float(np.finfo(np.float32).eps)
    X = np.asarray(X, dtype=np.float64)
    shift, K = t.shift_kernel_()
    return (K.shape[0] + 2) * eps * (np.abs(X - shift) @ np.abs(K)) + eps * ((np.abs(X) + np.abs(shift)) @ np.abs(K))


def test_every_affine_method_and_stock_pooling_loads_without_isotropy(stock_folders, tmp_path):
    """Plain SentenceTransformer(path), isotropy not importable, computes Encoder + transform.

    The tiny random model is ill-conditioned on purpose (its token states barely depend on the
    input), so the comparison allows float32 rounding of y = x A + b and nothing more; the real
    model's 1e-5 is test_real_model_folders_match_within_1e5 below."""
    got = encode_without_isotropy({name: v[0] for name, v in stock_folders.items()}, SENTENCES, tmp_path)
    for name, (folder, enc, t) in stock_folders.items():
        modules = json.loads((folder / "modules.json").read_text())
        assert all(m["type"].startswith("sentence_transformers.models.") for m in modules), modules
        assert "isotropy" not in (folder / "config_sentence_transformers.json").read_text()
        X = enc.encode(SENTENCES)
        want = t.transform(X.astype(np.float64))
        assert got[name].shape == want.shape
        excess = np.abs(got[name] - want) - float32_bound(X, t) - 1e-6
        assert excess.max() <= 0, f"{name}: {np.abs(got[name] - want).max():.3g} beyond float32 rounding"


# --------------------------------------------------------------------------- the pipeline (tiny model)


def test_cli_writes_a_stock_model_folder_with_its_card(tiny_model_dir, tiny_corpus, tmp_path):
    out = tmp_path / "model"
    args = ["calibrate", tiny_corpus, "-o", out, "--model", tiny_model_dir, "--pooling", "last-avg", "--max-length", "32"]
    code, stdout, err = run_cli(args)
    assert code == 0, err
    assert f'use it: SentenceTransformer("{out}")' in err and "trust_remote_code" not in err
    card = (out / "README.md").read_text()
    header = card.split("---")[1]
    for line in ("library_name: sentence-transformers", "pipeline_tag: sentence-similarity", "- isotropy", "- whitening"):
        assert line in header
    assert "base_model" not in header  # a local folder: no hub id to name, and its path is not published
    assert "300 sentences of corpus.txt" in card and "trust_remote_code=True" not in card
    marker = json.loads((out / "isotropy.json").read_text())
    assert marker["library"] == "isotropy" and marker["kind"] == "sentence-transformers"
    cal = marker["calibration"]
    assert cal["fit"]["n_sentences"] == 300 and cal["stock"] and cal["dim_in"] == 32
    assert cal["anisotropy"]["after"]["isoscore"] > cal["anisotropy"]["before"]["isoscore"]
    assert cal["float32"]["rows"] == 300
    # self-contained: tokenizer, config and weights copied, no path back to the base model or the corpus
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "modules.json",
        "1_Pooling/config.json",
        "2_Dense/config.json",  # centring: identity weight, bias -mean
        "3_Dense/config.json",  # the kernel, no bias
    ):
        assert (out / name).is_file(), name
    for f in out.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".md"):
            text = f.read_text()
            assert str(tiny_model_dir) not in text and str(tiny_corpus.parent) not in text, f
    # our own folder is replaced without --force; the result is the same
    assert run_cli(args)[0] == 0


def test_streamed_fit_equals_a_fit_on_all_vectors_and_never_holds_them(tiny_model_dir, tiny_corpus, tmp_path, monkeypatch):
    """Chunks of 7 sentences: the encoder never sees more at once, and the whitening equals one fit on every vector."""
    import isotropy.calibration.fit as fitmod

    monkeypatch.setattr(fitmod, "CHUNK_SENTENCES", 7)
    sizes = []
    real = Encoder.encode

    def spy(self, sentences, *args, **kwargs):
        sizes.append(len(sentences))
        return real(self, sentences, *args, **kwargs)

    monkeypatch.setattr(Encoder, "encode", spy)
    c = run_calibration(tiny_corpus, tmp_path / "m", model=tiny_model_dir, pooling="cls", max_length=32, shrinkage="auto")
    assert sizes and max(sizes) <= 7 and sum(sizes) == 300
    monkeypatch.undo()
    lines = [s for _, s in iter_sentences(tiny_corpus) if s.strip()]
    X = c.encoder.encode(lines)
    direct = make_transform("whitening", shrinkage="auto").fit(X)
    # The moments are unique; the whitening kernel is not (near-equal eigenvalues of this tiny model's
    # covariance have eigenvectors that differ between BLAS builds). What is unique is what the
    # calibration guarantees: the same mean, and the same inner products between calibrated vectors.
    np.testing.assert_allclose(c.transform.mean_, direct.mean_, rtol=1e-6, atol=1e-9 * np.abs(direct.mean_).max())
    assert_same_geometry(c.transform.transform(X), direct.transform(X))


def test_corpus_as_shards_stdin_or_a_list_gives_the_same_model(tiny_model_dir, tiny_corpus, tmp_path):
    lines = tiny_corpus.read_text().splitlines()
    (tmp_path / "shards").mkdir()
    for i in range(3):
        (tmp_path / "shards" / f"part{i}.txt").write_text("\n".join(lines[i::3][::-1]) + "\n")
    opts = dict(model=tiny_model_dir, pooling="last-avg", max_length=32, method="center")
    ref = run_calibration(tiny_corpus, tmp_path / "file", **opts).transform.mean_
    shards = run_calibration(str(tmp_path / "shards" / "*.txt"), tmp_path / "glob", **opts)
    assert shards.info["corpus"] == "3 shards matching '*.txt'" and shards.info["fit"]["n_sentences"] == 300
    np.testing.assert_allclose(shards.transform.mean_, ref, rtol=1e-5, atol=1e-6)
    model = isotropy.calibrate(lines, tmp_path / "list", **opts)  # the public API returns the loaded model
    np.testing.assert_allclose(model.encode(SENTENCES), model.encode(SENTENCES))
    assert type(model).__name__ == "SentenceTransformer"
    code, _, err = run_cli(
        [
            "calibrate",
            "-",
            "-o",
            tmp_path / "stdin",
            "--model",
            tiny_model_dir,
            "-p",
            "last-avg",
            "--max-length",
            "32",
            "--method",
            "center",
        ],
        input=tiny_corpus.read_bytes(),
    )
    assert code == 0, err
    assert json.loads((tmp_path / "stdin" / "isotropy.json").read_text())["calibration"]["corpus"] == "standard input"


def test_old_calibrate_signature_still_appends_a_transform(tiny_model_dir):
    """isotropy.calibrate(st_model, transform) is isotropy 0.1's in-memory call: it still works."""
    from isotropy.integrations import build_sentence_transformer

    enc = Encoder(tiny_model_dir, pooling="last-avg", max_length=32, device="cpu")
    model = build_sentence_transformer(enc, None)
    w = make_transform("whitening", shrinkage="auto").fit(enc.encode(corpus(100)))
    assert isotropy.calibrate(model, w) is model
    np.testing.assert_allclose(model.encode(SENTENCES), w.transform(enc.encode(SENTENCES)), atol=1e-5, rtol=0)
    with pytest.raises(IsotropyError, match="needs output"):
        isotropy.calibrate(["a sentence"])


def test_flow_folder_uses_isotropys_modules_and_says_so(tiny_model_dir, tiny_corpus, tmp_path, monkeypatch):
    """A flow is not affine: isotropy's module classes, trust_remote_code in the card; fitted on a bounded sample."""
    import isotropy.calibration.fit as fitmod
    from isotropy.integrations import load_sentence_transformer

    monkeypatch.setattr(fitmod, "FLOW_SAMPLE_BYTES", 4 * 32 * 100)  # 100 vectors of 32 float32
    c = run_calibration(tiny_corpus, tmp_path / "flow", model=tiny_model_dir, pooling="last-avg", max_length=32, method="flow")
    assert not c.info["stock"] and c.info["fit"] == {**c.info["fit"], "n_sentences": 300, "n_fit": 100}
    card = (c.path / "README.md").read_text()
    assert "trust_remote_code=True" in card and "seeded uniform sample of its 300" in card
    got = load_sentence_transformer(c.path).encode(SENTENCES)
    np.testing.assert_allclose(got, c.transform.transform(c.encoder.encode(SENTENCES)), atol=1e-5, rtol=0)


def test_float32_gap_is_reported(tiny_model_dir, tiny_corpus, tmp_path):
    """An exact whitening of the tiny random model's cls states (eigenvalues over 10 decades): folding the mean
    into one float32 bias lost 0.3 % of the scale here; centring first, then multiplying keeps it within
    1e-3 of it, and the gap is in the card. A gap beyond that share is a warning (checked on a synthetic gap)."""
    from isotropy.calibration.scoring import float32_warning

    c = run_calibration(tiny_corpus, tmp_path / "w", model=tiny_model_dir, pooling="cls", max_length=32)
    gap = c.info["float32"]
    assert gap["rows"] == 300 and 0 <= gap["max_abs_diff"] <= 1e-3 * gap["max_abs_value"]
    assert not any("ill-conditioned" in w for w in c.info["warnings"])
    assert f"to within {gap['max_abs_diff']:.2g}" in (c.path / "README.md").read_text()
    assert float32_warning(gap) is None
    assert "ill-conditioned" in float32_warning({"max_abs_diff": 0.01, "max_abs_value": 4.0, "rows": 300})


# --------------------------------------------------------------------------- ONNX (tiny model)


def run_st_onnx_graph(folder: Path, file_name: str, sentences: list[str], pooled: bool = False):
    """What ``SentenceTransformer(folder, backend="onnx")`` computes: optimum runs ``onnx/FILE`` with onnxruntime
    (input_ids, attention_mask, token_type_ids when the graph takes it; output last_hidden_state), then the
    folder's own Pooling and Dense modules run in torch. ``pooled=True`` also returns the Pooling's output
    (the base model's vector, before the calibration)."""
    import onnxruntime as ort
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    session = ort.InferenceSession(str(folder / "onnx" / file_name), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    assert [o.name for o in session.get_outputs()] == ["last_hidden_state"]
    finals, pools = [], []
    for start in range(0, len(sentences), 128):
        features = model.preprocess(sentences[start : start + 128])
        feeds = {k: features[k].numpy() for k in names if k in features}
        if "token_type_ids" in names and "token_type_ids" not in feeds:
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        out = {"token_embeddings": torch.from_numpy(session.run(["last_hidden_state"], feeds)[0])}
        out["attention_mask"] = features["attention_mask"]
        with torch.no_grad():
            for module in list(model)[1:]:
                out = module(out)
                if "sentence_embedding" in out and len(pools) == len(finals):
                    pools.append(out["sentence_embedding"].clone().numpy())
        finals.append(out["sentence_embedding"].numpy())
    final = np.concatenate(finals)
    return (np.concatenate(pools), final) if pooled else final


@pytest.fixture(scope="module")
def onnx_folder(tiny_model_dir, tiny_corpus, tmp_path_factory):
    """abtt on the tiny model: a whitening would magnify the graphs' float32 differences by the tiny model's
    ill-conditioning (the real model's whitening is test_real_model_onnx_and_int8)."""
    out = tmp_path_factory.mktemp("onnx") / "m"
    args = ["calibrate", tiny_corpus, "-o", out, "--model", tiny_model_dir, "-p", "cls", "--max-length", "32"]
    code, _, err = run_cli([*args, "--method", "abtt", "--onnx"])
    assert code == 0, err
    return out


def test_onnx_graphs_match_the_torch_folder(onnx_folder):
    from sentence_transformers import SentenceTransformer

    want = SentenceTransformer(str(onnx_folder), device="cpu").encode(SENTENCES)
    assert sorted(p.name for p in (onnx_folder / "onnx").iterdir()) == ["model.onnx"]
    np.testing.assert_allclose(run_st_onnx_graph(onnx_folder, "model.onnx", SENTENCES), want, atol=1e-4, rtol=0)
    enc = Encoder(onnx_folder, backend="onnx")  # finds isotropy-onnx/ inside the model folder
    assert enc.folder.name == "isotropy-onnx"
    np.testing.assert_allclose(enc.encode(SENTENCES), want, atol=1e-4, rtol=0)
    card = (onnx_folder / "README.md").read_text()
    assert 'backend="onnx"' in card and "isotropy-onnx/" in card


def test_sentence_transformers_onnx_backend_loads_the_folder(onnx_folder):
    """The real thing: needs optimum-onnx, which pip cannot install beside sentence-transformers >= 6 today."""
    pytest.importorskip(
        "optimum.onnxruntime",
        reason="optimum-onnx (newest 0.1.0) requires transformers<4.58, sentence-transformers>=6 requires transformers>=5: "
        "pip install 'sentence-transformers[onnx]>=6' is ResolutionImpossible; run_st_onnx_graph does what the backend does",
    )
    from sentence_transformers import SentenceTransformer

    want = SentenceTransformer(str(onnx_folder), device="cpu").encode(SENTENCES)
    got = SentenceTransformer(str(onnx_folder), backend="onnx", device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def test_int8_and_layer_averages(tiny_model_dir, tiny_corpus, tmp_path):
    """--quantize int8 adds the int8 graphs; a layers average gets no graph for sentence-transformers' backend
    (it returns the last layer only), only isotropy's, which computes the pooling inside."""
    out = tmp_path / "m"
    c = run_calibration(
        tiny_corpus, out, model=tiny_model_dir, pooling="first-last-avg", max_length=32, shrinkage=0.1, quantize="int8"
    )
    assert not (out / "onnx").exists() and (out / "isotropy-onnx" / "model.onnx").is_file()
    assert c.info["onnx"] == {"st": [], "isotropy": "isotropy-onnx", "quantize": "int8"}
    enc = Encoder(out, backend="onnx")
    assert enc.runtime.quantize == "int8"
    got, want = enc.encode(SENTENCES), c.model.encode(SENTENCES)
    cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() > 0.9
    assert "reads more than the last layer" in (out / "README.md").read_text()


# --------------------------------------------------------------------------- the distributed fit


def test_dask_engine_fits_the_same_moments(tiny_model_dir, tiny_corpus, tmp_path):
    import logging

    distributed = pytest.importorskip("distributed")
    lines = tiny_corpus.read_text().splitlines()
    (tmp_path / "shards").mkdir()
    for i in range(2):
        (tmp_path / "shards" / f"s{i}.txt").write_text("\n".join(lines[i::2]) + "\n")
    opts = dict(model=tiny_model_dir, pooling="cls", max_length=32, shrinkage="auto")
    local = run_calibration(tiny_corpus, tmp_path / "local", **opts)
    # A scheduler over TCP with two thread workers in this process: the command reaches it by --address as it would a
    # remote one, without starting worker processes that import torch (20-30 s of CPU). The local cluster the command
    # starts itself is tested in tests/test_distributed.py, and worker processes running the model in its cluster tests.
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://", dashboard_address=":0", silence_logs=logging.ERROR
    ) as cluster:
        code, _, err = run_cli(
            ["calibrate", tmp_path / "shards" / "*.txt", "-o", tmp_path / "dask", "--engine", "dask", "--model", tiny_model_dir,
             "-p", "cls", "--max-length", "32", "--shrinkage", "auto", "--address", cluster.scheduler_address]
        )  # fmt: skip
    assert code == 0, err
    from safetensors.numpy import load_file

    # centring (identity, -mean) is unique: compared element by element
    got = load_file(tmp_path / "dask" / "2_Dense" / "model.safetensors")
    want = load_file(local.path / "2_Dense" / "model.safetensors")
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-4 * np.abs(want[key]).max(), err_msg=key)
    # the kernel K is unique only up to a rotation of its output (eigenvectors of near-equal eigenvalues
    # differ between BLAS builds); K^T K, which fixes every inner product of calibrated vectors, is unique
    kernels = [load_file(folder / "3_Dense" / "model.safetensors") for folder in (tmp_path / "dask", local.path)]
    assert kernels[0].keys() == kernels[1].keys() == {"linear.weight"}
    K_got, K_want = (k["linear.weight"].astype(np.float64) for k in kernels)
    assert K_got.shape == K_want.shape
    M_want = K_want.T @ K_want
    np.testing.assert_allclose(K_got.T @ K_got, M_want, rtol=1e-4, atol=1e-4 * np.abs(M_want).max())
    assert json.loads((tmp_path / "dask" / "isotropy.json").read_text())["calibration"]["fit"]["n_sentences"] == 300


# --------------------------------------------------------------------------- the streamed input


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 60), capacity=st.integers(1, 20), chunk=st.integers(1, 9), seed=st.integers(0, 3))
def test_reservoir_keeps_a_bounded_subset(n, capacity, chunk, seed):
    rows = np.arange(n, dtype=np.float64).reshape(-1, 1)
    r = Reservoir(capacity, seed)
    for start in range(0, n, chunk):
        r.add(rows[start : start + chunk])
    got = r.sample()
    assert got.shape[0] == min(n, capacity)
    if n == 0:
        return
    assert len(set(got[:, 0])) == got.shape[0] and set(got[:, 0]) <= set(rows[:, 0])
    if n <= capacity:
        np.testing.assert_array_equal(got, rows)


def test_reservoir_is_uniform():
    """Every row of the stream is kept with probability capacity / n (here 0.1, over 4000 seeded draws)."""
    counts = np.zeros(100)
    for seed in range(4000):
        r = Reservoir(10, seed)
        for start in range(0, 100, 13):
            r.add(np.arange(start, min(start + 13, 100), dtype=np.float64).reshape(-1, 1))
        counts[r.sample()[:, 0].astype(int)] += 1
    freq = counts / 4000
    assert abs(freq.mean() - 0.1) < 1e-12 and np.abs(freq - 0.1).max() < 0.03  # binomial sd 0.0047


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\x00"), max_size=12), max_size=8),
    crlf=st.booleans(),
    bom=st.booleans(),
)
def test_iter_sentences_reads_what_read_sentences_reads(tmp_path_factory, lines, crlf, bom):
    path = tmp_path_factory.mktemp("t") / "c.txt"
    data = ("\r\n" if crlf else "\n").join(lines).encode() + (b"\n" if lines else b"")
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    want = read_sentences(path, allow_empty_file=True)
    assert [s for _, s in iter_sentences(path)] == want
    assert Corpus(str(path)).count() == sum(1 for s in want if s.strip())


# --------------------------------------------------------------------------- the real model (slow)


def stsb_folder() -> Path:
    folder = data_dir() / "sts" / "STSBenchmark"
    if not folder.is_dir():
        pytest.skip(f"real data not found at {folder} (set ISOTROPY_DATA)")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["cls"])  # last-avg: bench/calibrate.py (docs/ECOSYSTEM.md); the suite's time budget
def test_real_model_folders_match_within_1e5(pooling, request, tmp_path):
    """all-MiniLM-L6-v2, every affine method fitted on the fixture's STS-B sentences: plain SentenceTransformer(path)
    without isotropy equals Encoder + transform within 1e-5 (the Dense runs in float32; the figures are printed,
    bench/calibrate.py tabulates them)."""
    fit = request.getfixturevalue("stsb_cls" if pooling == "cls" else "stsb_mean")["fit"]
    enc = Encoder(pooling=pooling, max_length=64)
    folders, transforms = {}, {}
    for method in affine_methods():
        transforms[method] = resolve_method(method).fit(fit)
        folders[method] = tmp_path / method
        to_sentence_transformer(enc, transforms[method], folders[method], stock=True)
    got = encode_without_isotropy(folders, SENTENCES, tmp_path)
    X = enc.encode(SENTENCES)
    for method, t in transforms.items():
        want = t.transform(X.astype(np.float64))
        diff, scale = float(np.abs(got[method] - want).max()), float(np.abs(want).max())
        print(f"{pooling} {method}: max abs diff {diff:.2e}, largest entry {scale:.2f}")
        # Full whitening without shrinkage magnifies the two libraries' float32 forward passes (eigenvalues down to
        # ~1e-4): isotropy's own float64 module differs by as much (docs/ECOSYSTEM.md), so there the bound is
        # relative to the vectors' largest entry; every other method is within 1e-5 absolute.
        bound = 1e-5 * max(1.0, scale) if method == "whitening" else 1e-5
        assert diff <= bound, f"{method}: {diff:.3g} (largest entry {scale:.3g})"


EVAL_PAIRS = 400  # of STS-B test, every 3rd pair: the real-model checks stay within the suite's time budget


@pytest.fixture(scope="module")
def real_folder(tmp_path_factory):
    """all-MiniLM-L6-v2 (last-avg, max_length 64) whitened (Ledoit-Wolf shrinkage, as docs/BENCHMARKS.md's onnx
    section) on 1,000 STS-B train sentences, with the ONNX graphs (int8) and --eval on 400 STS-B test pairs
    (not what the whitening saw), written as a generic pairs file named STS-B.tsv."""
    from isotropy.evaluation import load_stsb

    folder = stsb_folder()
    task = load_stsb(folder)
    train = list(dict.fromkeys(s for p in task.pairs(["train"]) for s in (p.s1, p.s2)))[:1000]
    pairs = task.pairs(["test"])[::3][:EVAL_PAIRS]
    root = tmp_path_factory.mktemp("real")
    (root / "train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
    rows = ["sentence1\tsentence2\tscore"] + [f"{p.s1}\t{p.s2}\t{p.score}" for p in pairs]
    (root / "STS-B.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    c = run_calibration(
        root / "train.txt",
        root / "model",
        pooling="last-avg",
        max_length=64,
        shrinkage="auto",
        quantize="int8",
        eval_data=root / "STS-B.tsv",
    )
    return c, pairs


@pytest.mark.slow
def test_real_eval_is_in_the_card(real_folder, stsb_mean):
    from isotropy.evaluation.metrics import cosine_rows, spearman

    c, pairs = real_folder
    row = c.info["eval"]["tasks"]["STS-B"]
    assert row["pairs"] == len(pairs) == EVAL_PAIRS and row["metric"] == "spearman"
    gold = np.array([p.score for p in pairs])
    base = stsb_mean["a"][::3][:EVAL_PAIRS], stsb_mean["b"][::3][:EVAL_PAIRS]  # the same encoder's test vectors
    assert row["base"] == pytest.approx(spearman(cosine_rows(*base), gold), abs=1e-3)
    card = (c.path / "README.md").read_text()
    assert f"| STS-B | spearman | {EVAL_PAIRS} | {row['base']:.2f} | {row['calibrated']:.2f} |" in card


@pytest.mark.slow
def test_mteb_scores_the_folder_as_isotropy_eval_does(real_folder):
    """MTEB's STS evaluator, on a task built from ../shared/data pairs (isotropy.integrations.mteb: no hub), gives
    isotropy eval's Spearman."""
    pytest.importorskip("mteb")
    from sentence_transformers import SentenceTransformer

    from isotropy.integrations.mteb import mteb_sts_spearman

    c, pairs = real_folder
    mteb_spearman = mteb_sts_spearman(SentenceTransformer(str(c.path), device="cpu"), pairs, "LocalSTSBenchmark")
    ours = c.info["eval"]["tasks"]["STS-B"]["calibrated"]
    print(f"MTEB {mteb_spearman:.4f}, isotropy eval {ours:.4f}")
    assert abs(mteb_spearman - ours) <= 0.01


@pytest.mark.slow
def test_real_model_onnx_and_int8(real_folder, stsb_mean):
    """The graph for sentence-transformers' ONNX backend: fp32 within 1e-4 of the torch folder; its int8 file
    within the Spearman loss docs/BENCHMARKS.md (section onnx) holds int8 to, at most 0.3 points on STS-B
    (measured there: 0.24), on the model's own vectors. After the whitening the loss is larger (whitening
    magnifies the int8 noise along low-variance directions, as that section says); it is printed, and
    isotropy's own int8 graph, the same quantization with pooling and whitening inside, gives the same vectors."""
    from sentence_transformers import SentenceTransformer

    from isotropy.evaluation import load_stsb
    from isotropy.evaluation.metrics import cosine_rows, spearman

    c, _ = real_folder
    pairs = load_stsb(stsb_folder()).pairs(["test"])  # all 1,379: the int8 loss is a small difference of two figures
    assert sorted(p.name for p in (c.path / "onnx").iterdir()) == ["model.onnx", "model_qint8_quantized.onnx"]
    want = SentenceTransformer(str(c.path), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(run_st_onnx_graph(c.path, "model.onnx", SENTENCES), want, atol=1e-4, rtol=0)
    sents = list(dict.fromkeys(s for p in pairs for s in (p.s1, p.s2)))
    row = {s: i for i, s in enumerate(sents)}
    a = np.array([row[p.s1] for p in pairs])
    b = np.array([row[p.s2] for p in pairs])
    gold = np.array([p.score for p in pairs])

    def score(V):
        return spearman(cosine_rows(V[a], V[b]), gold)

    raw8, cal8 = run_st_onnx_graph(c.path, ST_INT8, sents, pooled=True)
    # fp32: the session's STS-B test vectors of the same encoder (default model, last-avg, max_length 64)
    fp32 = (stsb_mean["a"], stsb_mean["b"])

    def score_pairs(A, B):
        return spearman(cosine_rows(A, B), gold)

    raw_loss = score_pairs(*fp32) - score(raw8)
    cal_loss = score_pairs(*(c.transform.transform(V) for V in fp32)) - score(cal8)
    print(f"STS-B Spearman x100 lost by int8: {raw_loss:.2f} (model's vectors), {cal_loss:.2f} (calibrated)")
    assert raw_loss <= 0.3
    iso = Encoder(c.path, backend="onnx")
    np.testing.assert_allclose(iso.encode(SENTENCES), run_st_onnx_graph(c.path, ST_INT8, SENTENCES), atol=1e-3, rtol=0)


@pytest.mark.slow
def test_semantic_search_and_a_faiss_index_built_outside_isotropy(real_folder):
    import faiss
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import semantic_search

    c, pairs = real_folder
    close = [p for p in pairs if p.score >= 4.6][:60]
    docs = [p.s1 for p in close] + [p.s1 for p in pairs if p.score < 1][:300]
    docs = list(dict.fromkeys(docs))
    model = SentenceTransformer(str(c.path), device="cpu")
    D = model.encode(docs, convert_to_numpy=True)
    Q = model.encode([p.s2 for p in close], convert_to_numpy=True)
    hits = semantic_search(Q, D, top_k=5)
    top1 = [h[0]["corpus_id"] for h in hits]
    found = np.mean([docs[i] == p.s1 for i, p in zip(top1, close)])
    assert found >= 0.8, found
    Dn = D / np.linalg.norm(D, axis=1, keepdims=True)
    Qn = Q / np.linalg.norm(Q, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(Dn.shape[1])
    index.add(np.ascontiguousarray(Dn, dtype=np.float32))
    scores, ids = index.search(np.ascontiguousarray(Qn, dtype=np.float32), 5)
    assert [list(r) for r in ids] == [[h["corpus_id"] for h in hit] for hit in hits]
    np.testing.assert_allclose(scores, [[h["score"] for h in hit] for hit in hits], atol=1e-5)


# --------------------------------------------------------------------------- --method auto (#16)


def test_auto_choice_and_evidence_round_trip_through_the_folder(tiny_model_dir, tiny_corpus, tmp_path):
    from isotropy.selection import Selection

    out = tmp_path / "auto"
    args = ["calibrate", tiny_corpus, "-o", out, "--model", tiny_model_dir, "-p", "cls", "--max-length", "32", "--method", "auto"]
    code, _, err = run_cli([*args, "--candidates", "raw,center,abtt-1,whitening-shrunk"])
    assert code == 0, err
    marker = json.loads((out / "isotropy.json").read_text())["calibration"]
    sel = Selection.from_dict(marker["selection"])
    assert sel.mode == "label-free" and [c.name for c in sel.candidates] == ["raw", "center", "abtt-1", "whitening-shrunk"]
    assert sel.table().splitlines()[0] in err and "<- chosen" in err  # the evidence table is printed
    assert marker["method"] == f"auto -> {sel.choice}"
    card = (out / "README.md").read_text()
    assert "Choice of calibration (`--method auto`)" in card and "- auto" in card.split("---")[1]
    assert "whitening-shrunk" in card and sel.choice in card
    dense = sorted(p.name for p in out.glob("*_Dense"))
    assert (dense == []) == (sel.choice == "raw")  # raw: the base model as it is, no Dense module
    # the folder loads with plain sentence-transformers and computes the chosen calibration
    from sentence_transformers import SentenceTransformer

    enc = Encoder(tiny_model_dir, pooling="cls", max_length=32, device="cpu")
    lines = ["a first sentence", "and another one entirely"]
    want = enc.encode(lines) if sel.choice == "raw" else None
    got = SentenceTransformer(str(out), device="cpu").encode(lines)
    if want is not None:
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_auto_few_label_mode_chooses_by_the_dev_pairs(tiny_model_dir, tiny_corpus, tmp_path):
    from isotropy.selection import Selection

    lines = corpus(60)
    dev = tmp_path / "dev.tsv"
    dev.write_text(
        "sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{i % 5}\n" for i, (a, b) in enumerate(zip(lines, lines[1:]))),
        encoding="utf-8",
    )
    c = run_calibration(
        tiny_corpus,
        tmp_path / "m",
        model=tiny_model_dir,
        pooling="last-avg",
        max_length=32,
        method="auto",
        dev=dev,
        candidates="center,soft-0.5",
    )
    sel = Selection.from_dict(c.info["selection"])
    assert sel.mode == "few-label" and sel.criterion == "dev-spearman" and sel.settings["dev_pairs"] == 59
    assert sel.choice in ("raw", "center", "soft-0.5")
    assert (c.transform is None) == (sel.choice == "raw")


def test_auto_refuses_options_it_does_not_take():
    with pytest.raises(IsotropyError, match="--n-components does not apply to method 'auto'"):
        resolve_method("auto", n_components=8)
    with pytest.raises(IsotropyError, match="--candidates applies to --method auto only"):
        resolve_method("whitening", candidates="raw,center")
    with pytest.raises(IsotropyError, match="unknown candidate 'whitenning'"):
        resolve_method("auto", candidates="raw,whitenning")


# --------------------------------------------------------------------------- the model card (no model needed)


def _card_info(**more):
    info = {
        "name": "my-model",
        "method": "whitening",
        "kind": "whitening",
        "params": {"n_components": None, "power": 1.0, "shrinkage": "auto"},
        "describe": "Whitening(shrinkage='auto')",
        "base_model": "sentence-transformers/all-MiniLM-L6-v2",
        "base_name": "all-MiniLM-L6-v2",
        "base_card": {"license": "apache-2.0", "language": "en"},
        "pooling": "last-avg",
        "max_length": 128,
        "dim_in": 384,
        "dim_out": 384,
        "corpus": "corpus.txt",
        "fit": {"n_sentences": 1000, "n_fit": 1000, "seconds": {}},
        "stock": True,
        "custom": [],
        "modules": ["Transformer", "Pooling", "Dense", "Dense"],
        "warnings": [],
        "isotropy_version": "0.1.0",
        "anisotropy": {
            "before": {"average_cosine": 0.3, "isoscore": 0.1},
            "after": {"average_cosine": 0.0, "isoscore": 0.9},
            "cosine_rows": {"n": 1000},
            "isoscore_rows": {"n": 1000},
        },
    }
    return {**info, **more}


def test_the_card_parses_with_model_card_and_carries_the_eval_in_its_model_index(tmp_path):
    from huggingface_hub import ModelCard

    from isotropy.calibration.card import model_card

    ev = {
        "data": "STSBenchmark",
        "tasks": {
            "STS-B": {"metric": "spearman", "pairs": 1379, "split": "test", "base": 82.0, "calibrated": 80.5},
            "SICK-R": {"metric": "spearman", "pairs": 4927, "split": "test", "base": 77.0, "calibrated": 78.25},
        },
    }
    (tmp_path / "README.md").write_text(model_card(_card_info(eval=ev)), encoding="utf-8")
    card = ModelCard.load(tmp_path / "README.md")
    data = card.data
    assert data.library_name == "sentence-transformers" and data.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert data.license == "apache-2.0" and data.language == "en" and "whitening" in data.tags
    got = {
        (r.dataset_type, r.dataset_split, r.metric_type, r.metric_name.split(", ")[-1]): r.metric_value for r in data.eval_results
    }
    assert got == {
        ("STS-B", "test", "spearman", "calibrated"): 80.5,
        ("STS-B", "test", "spearman", "base model"): 82.0,
        ("SICK-R", "test", "spearman", "calibrated"): 78.25,
        ("SICK-R", "test", "spearman", "base model"): 77.0,
    }
    assert "model-index" in card.content.split("---")[1]
    text = card.text
    assert "lowered spearman x 100 from 82.00 to 80.50" in text and "SICK-R the calibration lowered" not in text
    assert "fitted without labels on 1,000 sentences" in text
    assert "arXiv:2103.15316" in text and "Ledoit" in text  # whitening's paper, and shrinkage's


def test_a_card_without_eval_has_no_model_index_and_a_dev_choice_says_labels(tmp_path):
    from huggingface_hub import ModelCard

    from isotropy.calibration.card import model_card

    selection = {"mode": "few-label", "settings": {"dev_pairs": 120}}
    info = _card_info(base_model=None, base_card={}, kind="flow", method="flow", stock=False, custom=["the flow"])
    text = model_card(info)
    card = ModelCard(text)
    assert "model-index" not in text.split("---")[1] and card.data.base_model is None and card.data.license is None
    assert "arXiv:2011.05864" in card.text and "trust_remote_code=True" in card.text
    assert "no labels" in card.text
    # the card's labels line for a --dev choice (the selection section itself needs a full Selection: tested end to end)
    from isotropy.calibration.card import _labels

    assert "120 scored dev pairs" in _labels({"selection": selection}) and "no labels" not in _labels({"selection": selection})
