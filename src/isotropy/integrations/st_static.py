"""The sentence-transformers folder of one ``StaticEmbedding`` (+ ``Normalize``), written without importing it (layer 5).

``SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=rows), Normalize()]).save(folder,
create_model_card=False)`` writes (sentence-transformers 6)::

    modules.json                       the modules' types and paths (indent 2)
    config_sentence_transformers.json  the library versions it was saved with, prompts, similarity (indent 2)
    model.safetensors                  one float32 tensor, ``embedding.weight`` (V x d)
    tokenizer.json                     the ``tokenizers.Tokenizer`` as ``Tokenizer.save`` writes it
    1_Normalize/config.json            only with ``Normalize`` (indent 4)

:func:`write_static_st_folder` writes these same files itself, byte for byte (tests/test_st_static.py saves both
ways and compares every file), because a static model needs neither torch nor sentence-transformers to be
fitted or folded, and importing them to save five small files costs about 10 s of CPU in every
``isotropy calibrate --model STATIC`` and ``isotropy distill`` (a static calibrate of GloVe: 15 s -> 5 s).
The versions in ``config_sentence_transformers.json`` are the installed distributions' (read from their
metadata, no import); one not installed is left out (sentence-transformers reads the key only to warn
when a folder was saved by a newer release than itself).
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["write_static_st_folder", "STATIC_EMBEDDING_TYPE", "NORMALIZE_TYPE"]

STATIC_EMBEDDING_TYPE = "sentence_transformers.sentence_transformer.modules.static_embedding.StaticEmbedding"
NORMALIZE_TYPE = "sentence_transformers.base.modules.normalize.Normalize"
_VERSIONS = (("pytorch", "torch"), ("sentence_transformers", "sentence-transformers"), ("transformers", "transformers"))


def _versions() -> dict[str, str]:
    out = {}
    for key, dist in _VERSIONS:
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def _json(path: Path, obj: Any, indent: int) -> None:
    path.write_text(json.dumps(obj, indent=indent), encoding="utf-8")


def write_static_st_folder(folder: str | Path, tokenizer: Any, rows: np.ndarray, normalize: bool) -> None:
    """Write ``folder`` (created if missing) as sentence-transformers saves one ``StaticEmbedding`` over
    ``tokenizer`` (a ``tokenizers.Tokenizer``, saved as it is) with the embedding ``rows`` (float32), followed by a
    ``Normalize`` module when ``normalize``. ``SentenceTransformer(folder)`` loads it."""
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    modules = [{"idx": 0, "name": "0", "path": "", "type": STATIC_EMBEDDING_TYPE}]
    if normalize:
        modules.append({"idx": 1, "name": "1", "path": "1_Normalize", "type": NORMALIZE_TYPE})
        (folder / "1_Normalize").mkdir(exist_ok=True)
        _json(
            folder / "1_Normalize" / "config.json",
            {"module_input_name": "sentence_embedding", "module_output_name": "sentence_embedding"},
            4,
        )
    save_file({"embedding.weight": np.ascontiguousarray(rows, dtype=np.float32)}, str(folder / "model.safetensors"))
    tokenizer.save(str(folder / "tokenizer.json"))
    _json(folder / "modules.json", modules, 2)
    config = {
        "__version__": _versions(),
        "default_prompt_name": None,
        "model_type": "SentenceTransformer",
        "prompts": {"document": "", "query": ""},
        "similarity_fn_name": "cosine",
    }
    _json(folder / "config_sentence_transformers.json", config, 2)
