"""A static base that normalizes (model2vec's ``normalize: true``, e.g. what ``isotropy distill`` writes): a calibration
folded into its table says that its folder does not normalize, and keeps normalizing when asked (``normalize=True``), as
a transformer's folder does (U35)."""

from __future__ import annotations

import json

import numpy as np
from test_auto_first import WORDS, _m2v_normalized, word_corpus

from helpers import run_cli


def _config(folder) -> dict:
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


def test_a_calibration_of_a_normalizing_static_base_says_so_or_keeps_it_when_asked(tmp_path):
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

    from isotropy.calibration import run_calibration

    base = _m2v_normalized(tmp_path / "m2v")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(word_corpus(200, seed=3)) + "\n", encoding="utf-8")
    out = tmp_path / "white"
    code, _, err = run_cli(["calibrate", corpus, "-o", out, "--model", base, "--method", "center", "--no-progress"])
    assert code == 0, err
    assert "normalizes its vectors" in err and "not unit-length" in err
    assert "normalizes its vectors" in (out / "README.md").read_text(encoding="utf-8")
    assert _config(out)["normalize"] is False
    probe = ["cat dog market", "rain over the city", " ".join(WORDS[:5])]
    norms = np.linalg.norm(StaticModel.from_pretrained(out).encode(probe), axis=1)
    assert not np.allclose(norms, 1.0, atol=1e-3)

    asked = run_calibration(corpus, tmp_path / "n", model=str(base), method="center", normalize=True, show_progress=False)
    assert _config(asked.path)["normalize"] is True
    assert not any("normalizes its vectors" in w for w in asked.info["warnings"])
    theirs = StaticModel.from_pretrained(asked.path).encode(probe)
    st = SentenceTransformer(str(asked.path / "sentence-transformers"), device="cpu").encode(probe)
    np.testing.assert_allclose(np.linalg.norm(theirs, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(st, theirs, atol=1e-5)
    # the same directions as the folder that does not normalize: normalizing changes lengths only
    unnormalized = StaticModel.from_pretrained(out).encode(probe)
    np.testing.assert_allclose(theirs, unnormalized / np.linalg.norm(unnormalized, axis=1, keepdims=True), atol=1e-5)
