"""Nothing is served silently wrong (issue #22, W2-W9): digests, confined paths, provenance, model folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli
from isotropy import Index, Whitening, load_transform
from isotropy.errors import IsotropyError

CORPUS = [f"sentence number {i} about {w}" for i, w in enumerate(["cats", "dogs", "rain", "sun", "tea", "code"] * 4)]


def _flip(path: Path, offset: int = -3) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def whitening_dir(tmp_path):
    X = np.random.default_rng(0).normal(size=(100, 6))
    return Whitening().fit(X).save(tmp_path / "w")


def test_a_flipped_byte_in_a_transform_is_refused_naming_the_file(whitening_dir):  # W3
    cfg = json.loads((whitening_dir / "config.json").read_text())
    assert set(cfg["sha256"]) == {"state.safetensors"}
    _flip(whitening_dir / "state.safetensors")
    with pytest.raises(IsotropyError, match=r"state.safetensors does not match the sha256 recorded"):
        load_transform(whitening_dir)
    assert load_transform(whitening_dir, verify=False).n_features_in_ == 6  # the escape


def test_the_cli_refuses_it_and_no_verify_reads_it(whitening_dir, tmp_path):
    np.save(tmp_path / "v.npy", np.ones((3, 6), np.float32))
    _flip(whitening_dir / "state.safetensors")
    code, _, err = run_cli(["transform", whitening_dir, tmp_path / "v.npy", "-o", tmp_path / "out.npy"])
    assert code == 2 and "state.safetensors does not match the sha256" in _one_line(err)
    assert not (tmp_path / "out.npy").exists()
    code, _, err = run_cli(["--no-verify", "transform", whitening_dir, tmp_path / "v.npy", "-o", tmp_path / "out.npy"])
    assert code == 0, err


def test_artefacts_written_before_digests_still_load(whitening_dir):
    cfg_path = whitening_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    del cfg["sha256"]
    cfg_path.write_text(json.dumps(cfg))
    assert load_transform(whitening_dir).n_features_in_ == 6


def test_a_corrupted_flow_permutation_is_refused(tmp_path):  # W4, W5
    from safetensors.numpy import load_file, save_file

    from isotropy import Flow

    X = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    path = Flow(levels=1, depth=1, hidden=8, epochs=1, batch_size=32, device="cpu").fit(X).save(tmp_path / "f")
    state = path / "state.safetensors"
    arrays = load_file(str(state))
    perm = next(k for k in arrays if k.endswith(".perm"))
    arrays[perm] = np.zeros_like(arrays[perm])  # not a permutation
    save_file(arrays, str(state))
    with pytest.raises(IsotropyError, match="state.safetensors does not match the sha256"):
        load_transform(path)
    with pytest.raises(IsotropyError, match=r"perm is not a permutation of 0\.\.3"):
        load_transform(path, verify=False)  # the structural check holds without the digest too


@pytest.fixture
def index_dir(tmp_path, tiny_model_dir):
    from isotropy.encoders import Encoder

    enc = Encoder(str(tiny_model_dir), pooling="cls", max_length=32)
    index = Index(enc, None)
    index.add(CORPUS, show_progress=False)
    return index.save(tmp_path / "idx")


def test_a_flipped_byte_in_index_faiss_is_refused(index_dir):  # W6
    _flip(index_dir / "index.faiss", offset=200)
    code, _, err = run_cli(["search", index_dir, "a query about cats"])
    assert code == 2 and "index.faiss does not match the sha256 recorded" in _one_line(err)


def test_an_edited_sentences_file_is_refused(index_dir):  # W7
    f = index_dir / "sentences.jsonl"
    f.write_text(f.read_text().replace("cats", "c@ts"))
    with pytest.raises(IsotropyError, match="sentences.jsonl does not match the sha256 recorded"):
        Index.load(index_dir)


@pytest.mark.parametrize("key", ["sentences_file", "file"])
@pytest.mark.parametrize("target", ["/etc/hostname", "../outside.jsonl", "link"])
def test_paths_named_in_an_index_stay_inside_it(index_dir, key, target):  # W8
    (index_dir.parent / "outside.jsonl").write_text('"secret"\n')
    if target == "link":
        os.symlink(index_dir.parent / "outside.jsonl", index_dir / "link")
    cfg_path = index_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    if key == "file":
        cfg["index"]["file"] = target
    else:
        cfg[key] = target
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(IsotropyError, match=f"{key} '{target}' in its JSON (points|leads) outside") as info:
        Index.load(index_dir, verify=False)
    assert "secret" not in str(info.value)


def test_a_vector_sidecar_is_checked_on_every_read(tmp_path, tiny_model_dir):  # W9
    (tmp_path / "c.txt").write_text("\n".join(CORPUS) + "\n")
    code, _, err = run_cli(["encode", tmp_path / "c.txt", "-o", tmp_path / "v.npy", "-m", tiny_model_dir, "-p", "cls"])
    assert code == 0, err
    side = json.loads((tmp_path / "v.json").read_text())
    assert side["provenance"]["pooling"] == "cls" and side["provenance"]["dim"] == 32
    _flip(tmp_path / "v.npy")
    code, _, err = run_cli(["fit", "whitening", tmp_path / "v.npy", "-o", tmp_path / "w"])
    assert code == 2 and "v.npy does not match the sha256 recorded in" in _one_line(err) and "v.json" in err
    assert not (tmp_path / "w").exists()


def test_a_shard_sidecar_is_checked_without_dask(tmp_path):  # W9
    from isotropy.storage.vectors import VECTORS_KIND, load_vectors, save_npy

    shards = tmp_path / "shards"
    shards.mkdir()
    save_npy(shards / "a.npy", np.ones((4, 3), np.float32), kind=VECTORS_KIND, meta={"rows": 4, "dim": 3})
    assert json.loads((shards / "a.json").read_text())["npy_sha256"]
    assert load_vectors(shards).shape == (4, 3)
    _flip(shards / "a.npy")
    with pytest.raises(IsotropyError, match="a.npy does not match the sha256"):
        load_vectors(shards)


def test_the_readme_tour_with_other_encoder_settings_is_one_line(tmp_path, tiny_model_dir):  # provenance
    m = str(tiny_model_dir)
    (tmp_path / "c.txt").write_text("\n".join(CORPUS) + "\n")
    assert run_cli(["encode", tmp_path / "c.txt", "-o", tmp_path / "v.npy", "-m", m, "-p", "cls", "--max-length", "16"])[0] == 0
    assert run_cli(["fit", "whitening", tmp_path / "v.npy", "-o", tmp_path / "w"])[0] == 0
    prov = json.loads((tmp_path / "w" / "config.json").read_text())["provenance"]
    assert prov["pooling"] == "cls" and prov["max_length"] == 16 and prov["dim"] == 32 and prov["fingerprint"]
    analyze = ["analyze", tmp_path / "c.txt", "-o", tmp_path / "r", "-m", m, "-t", tmp_path / "w", "--no-word-level"]
    code, _, err = run_cli([*analyze, "-p", "last-avg", "--max-length", "32"])
    line = _one_line(err)
    assert code == 2 and "pooling: cls vs last-avg" in line and "max_length: 16 vs 32" in line
    assert "--allow-other-encoder" in line and not (tmp_path / "r").exists()
    assert run_cli([*analyze, "-p", "last-avg", "--max-length", "32", "--allow-other-encoder"])[0] == 0
    # index build and the vectors given to transform: the same line
    build = ["index", "build", tmp_path / "c.txt", "-o", tmp_path / "ix", "-m", m, "--transform", tmp_path / "w"]
    code, _, err = run_cli(build)
    assert code == 2 and "pooling: cls vs first-last-avg" in _one_line(err)
    assert run_cli([*build, "--allow-other-encoder"])[0] == 0
    assert run_cli(["search", tmp_path / "ix", "cats"])[0] == 0  # the override is kept by the index
    enc2 = ["encode", tmp_path / "c.txt", "-o", tmp_path / "v2.npy", "-m", m, "-p", "last-avg", "--max-length", "16"]
    assert run_cli(enc2)[0] == 0
    code, _, err = run_cli(["transform", tmp_path / "w", tmp_path / "v2.npy", "-o", tmp_path / "o.npy"])
    assert code == 2 and "pooling: cls vs last-avg" in _one_line(err)


# --------------------------------------------------------------------------- W2: model folders


def _st_folder(tmp_path, tiny_model_dir, name: str, *modules) -> Path:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Transformer

    model = SentenceTransformer(modules=[Transformer(str(tiny_model_dir), max_seq_length=32), *modules], device="cpu")
    model.save(str(tmp_path / name))
    return tmp_path / name


@pytest.mark.parametrize(("mode", "pooling"), [("mean", "last-avg"), ("cls", "cls")])
def test_a_sentence_transformers_folder_gives_its_own_vectors(tmp_path, tiny_model_dir, mode, pooling):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    from isotropy.encoders import Encoder

    folder = _st_folder(tmp_path, tiny_model_dir, mode, Pooling(32, pooling_mode=mode))
    assert json.loads((folder / "1_Pooling" / "config.json").read_text())["pooling_mode"] == mode
    enc = Encoder(str(folder), max_length=32)
    assert enc.pooling == pooling
    ours = enc.encode(CORPUS[:6])
    theirs = SentenceTransformer(str(folder), device="cpu").encode(CORPUS[:6])
    np.testing.assert_allclose(ours, theirs, atol=1e-5 * float(np.abs(theirs).max()))


def test_a_folder_with_a_module_the_encoder_does_not_apply_is_refused(tmp_path, tiny_model_dir):  # W2
    # A Dense head is applied (tests/test_st_head.py); any other module after the pooling is refused
    from sentence_transformers.sentence_transformer.modules import Dense, LayerNorm, Pooling

    folder = _st_folder(tmp_path, tiny_model_dir, "norm", Pooling(32, pooling_mode="mean"), Dense(32, 8), LayerNorm(8))
    (tmp_path / "c.txt").write_text("\n".join(CORPUS) + "\n")
    for cmd in (
        ["encode", tmp_path / "c.txt", "-o", tmp_path / "v.npy"],
        ["index", "build", tmp_path / "c.txt", "-o", tmp_path / "i"],
    ):
        code, _, err = run_cli([*cmd, "-m", folder])
        line = _one_line(err)
        assert code == 2 and "LayerNorm (3_LayerNorm)" in line and "does not apply" in line and "Dense" not in line


def test_a_pooling_mode_isotropy_lacks_is_refused(tmp_path, tiny_model_dir):
    from sentence_transformers.sentence_transformer.modules import Pooling

    from isotropy.encoders import Encoder

    folder = _st_folder(tmp_path, tiny_model_dir, "max", Pooling(32, pooling_mode="max"))
    with pytest.raises(IsotropyError, match="Pooling with mode 'max'"):
        Encoder(str(folder))
    assert Encoder(str(folder), pooling="cls").pooling == "cls"  # an explicit pooling is the user's choice
