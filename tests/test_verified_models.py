"""Calibrated model folders used as a model are verified by content digest on load (#31, W5/W13).

``calibrate`` and ``distill`` seal the sha256 of every file they write into ``isotropy.json``; a folder used as
``--model`` / ``Encoder(model=...)`` is checked against it before any file is read (one place:
``storage.integrity.verify_model_folder``, called by the static loaders and by ``resolve_model``), and one flipped
bit is one line naming the file. ``verify=False`` / ``isotropy --no-verify`` skips the check.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli
from isotropy import Encoder
from isotropy.errors import IsotropyError

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "big", "red", "river", "bank"]
SENTENCES = [f"the {a} {v} on a {b}" for a in ("cat", "dog") for v in ("sat", "ran") for b in ("mat", "river", "bank")]


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) - 3] ^= 0x10  # in the last tensor's data: the file still parses
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory) -> Path:
    """A tiny word-vector table calibrated (center): a model2vec root and its sentence-transformers twin."""
    from isotropy.calibration import run_calibration

    root = tmp_path_factory.mktemp("verified")
    vecs = np.random.default_rng(0).standard_normal((len(WORDS), 6))
    table = root / "tiny.glove.txt"
    table.write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n" for w, v in zip(WORDS, vecs)), encoding="utf-8")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    run_calibration(corpus, root / "cal", model=str(table), method="center", show_progress=False)
    return root / "cal"


@pytest.mark.parametrize(
    "rel, model",
    [("model.safetensors", "."), ("sentence-transformers/model.safetensors", "sentence-transformers")],
)
def test_a_flipped_bit_in_a_calibrated_static_folder_is_one_line(calibrated, tmp_path, rel, model, monkeypatch):
    folder = tmp_path / "cal"
    shutil.copytree(calibrated, folder)
    used = folder / model
    assert Encoder(str(used)).dim == 6
    _flip(folder / rel)
    with pytest.raises(IsotropyError, match="does not match the sha256") as info:
        Encoder(str(used))
    assert Path(rel).name in str(info.value) and "\n" not in str(info.value)
    assert Encoder(str(used), verify=False).dim == 6  # skipped on request
    with monkeypatch.context() as env:
        env.setenv("ISOTROPY_NO_VERIFY", "1")
        assert Encoder(str(used)).dim == 6  # skipped by the environment ...
        with pytest.raises(IsotropyError, match="does not match the sha256"):
            Encoder(str(used), verify=True)  # ... unless the caller asks for it
        from isotropy.distributed import EncoderSpec

        assert EncoderSpec(model=str(used)).resolve().verify is False  # pinned for workers in other processes
    (tmp_path / "c.txt").write_text("the cat sat\n", encoding="utf-8")
    code, _, err = run_cli(["encode", tmp_path / "c.txt", "-o", tmp_path / "v.npy", "--model", used])
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1 and Path(rel).name in err
    assert not (tmp_path / "v.npy").exists()
    code, _, err = run_cli(["--no-verify", "encode", tmp_path / "c.txt", "-o", tmp_path / "v.npy", "--model", used])
    assert code == 0, err


def test_a_flipped_bit_in_a_calibrated_transformer_folder_is_one_line(tiny_model_dir, tmp_path):
    """W13: a calibrated sentence-transformers folder (its Dense module's weights) used as a model."""
    from isotropy import Whitening
    from isotropy.integrations import to_sentence_transformer

    enc = Encoder(tiny_model_dir, pooling="last-avg", max_length=32, device="cpu")
    t = Whitening(shrinkage="auto").fit(enc.encode(SENTENCES * 8))
    folder = to_sentence_transformer(enc, t, tmp_path / "cal", stock=True) and tmp_path / "cal"
    dense = sorted(folder.glob("*_Dense/model.safetensors"))
    assert dense, sorted(p.name for p in folder.iterdir())
    dim = Encoder(str(folder), device="cpu").dim
    _flip(dense[0])
    with pytest.raises(IsotropyError, match="does not match the sha256") as info:
        Encoder(str(folder), device="cpu")
    assert "model.safetensors" in str(info.value) and "\n" not in str(info.value)
    assert Encoder(str(folder), device="cpu", verify=False).dim == dim
