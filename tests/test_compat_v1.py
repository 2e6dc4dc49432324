"""Artefacts written by isotropy 0.1 (format version 1) still load and compute what they computed then.

The fixtures under tests/fixtures/v1 were written by isotropy 0.1 itself
(tests/fixtures/make_v1.py says how); nothing here regenerates them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

V1 = Path(__file__).resolve().parent / "fixtures" / "v1"
SENTENCES = [
    "A man is playing a guitar.",
    "A woman slices an onion.",
    "The cat sleeps on the sofa.",
    "Two dogs run across the field.",
    "The stock market fell sharply today.",
    "A child reads a book in the library.",
    "Rain is expected over the weekend.",
    "He plays chess with his grandfather.",
    "The chef tastes the soup.",
    "A train leaves the station at noon.",
    "Birds sing in the early morning.",
    "She paints a portrait of her sister.",
]


@pytest.mark.parametrize("name", ["whitening", "flow"])
def test_v1_transforms_load_and_transform_as_before(name):
    from isotropy import load_transform

    t = load_transform(V1 / name)
    X = np.load(V1 / "vectors.npy")[:20]
    np.testing.assert_allclose(t.transform(X), np.load(V1 / f"{name}_out.npy"), rtol=1e-5, atol=1e-5)


def test_v1_index_loads_and_searches_as_before():
    from isotropy import Index

    index = Index.load(V1 / "index")
    assert len(index) == len(SENTENCES)
    res = index.search(["a dog runs outside"], k=3)
    expected = json.loads((V1 / "index_search.json").read_text())
    assert res.ids.tolist() == expected["ids"]
    np.testing.assert_allclose(res.scores, expected["scores"], atol=1e-5)


def test_v1_sentence_transformers_folder_loads():
    pytest.importorskip("sentence_transformers")
    from isotropy.ecosystem import load_sentence_transformer

    model = load_sentence_transformer(V1 / "sentence-transformers")
    np.testing.assert_allclose(model.encode(SENTENCES), np.load(V1 / "tiny_out.npy"), atol=1e-4)


def test_v1_onnx_export_loads():
    pytest.importorskip("onnxruntime")
    from isotropy import Encoder

    enc = Encoder(V1 / "onnx", backend="onnx")
    np.testing.assert_allclose(enc.encode(SENTENCES), np.load(V1 / "tiny_out.npy"), atol=1e-4)
