"""``isotropy calibrate`` on a static model: the calibration folded into the table (layer 6).

For a mean of token vectors an affine calibration folds exactly into the table,
``mean_t(w_t E[t]) @ A + b == mean_t(E'[t])`` with ``E'[t] = (w_t E[t]) @ A + b``
(:meth:`~isotropy.encoders.static.StaticTable.fold`; ``w_t`` are the ``sif``/``idf`` weights, 1 for the mean),
so the calibrated model is the same size and speed as the raw one. The folder written (by
:func:`write_static_folder`, which ``isotropy distill`` writes its folders with too) is:

* its root: a model2vec model, saved by model2vec's own writer as ``StaticModel.save_pretrained`` saves it
  (:func:`save_model2vec`; ``model2vec.StaticModel.from_pretrained(folder)``);
* ``sentence-transformers/``: a ``SentenceTransformer`` of one ``StaticEmbedding`` module, the files
  sentence-transformers' own ``save`` writes, written without importing it (:mod:`isotropy.integrations.st_static`)
  (``SentenceTransformer(folder + "/sentence-transformers")``); like every
  ``StaticEmbedding`` it averages unknown tokens' row where isotropy and model2vec leave them out, so that row is
  written as zeros (:func:`st_rows`): a sentence with out-of-vocabulary words then gets a positive multiple of
  isotropy's and model2vec's vector, the same in every cosine (the folded bias in that row made them differ, U21;
  a sentence of unknown tokens only is the zero vector in all three); its tokenizer cuts a sentence as model2vec's
  ``encode`` and isotropy do (S5-010): first at ``max_length`` x the median token length in characters (a
  ``Replace`` normalizer ahead of the tokenizer's own), then at ``max_length`` tokens (its truncation).
  ``StaticEmbedding`` has no length limit of its own, but loads its ``tokenizer.json`` with both saved in it.
  :func:`write_st_twin` writes it;
* ``isotropy.json``: the marker and what was fitted (coverage of the fit corpus included);
* ``README.md``: isotropy's model card (:func:`.card.model_card`: the calibration, the corpus and its
  out-of-vocabulary rate, the ``--eval`` scores), in place of model2vec's default one.

Methods that are not affine (``flow``), and weighted poolings whose sum is not divided by the token count
(``norm=weights``/``none``), cannot be folded and are refused before any encoding.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..encoders.poolings import parse_pooling
from ..errors import IsotropyError
from ..storage.artifacts import header, output_dir
from ..transforms.base import AffineTransform
from .card import model_card

__all__ = [
    "check_static_method",
    "write_static_model",
    "load_static_twin",
    "write_static_folder",
    "save_model2vec",
    "write_st_twin",
    "ST_SUBFOLDER",
]

ST_SUBFOLDER = "sentence-transformers"


def check_static_method(est: Any, encoder: Any, onnx: bool, engine: str | None) -> None:
    """Refuse, before any encoding, what cannot be folded into a static table."""
    from .fit import AutoMethod

    if not isinstance(est, (AffineTransform, AutoMethod)):
        raise IsotropyError(
            f"method {getattr(est, 'kind', est)!r} is not affine, so it cannot be folded into the table of the static model "
            f"{encoder.model_name}; use an affine method (whitening, center, abtt, ...)"
        )
    norm = getattr(parse_pooling(encoder.pooling), "norm", "tokens")
    if norm != "tokens":
        raise IsotropyError(
            f"pooling {encoder.pooling!r} divides by the {norm} rather than the token count, so it cannot be folded into "
            f"the table of a static model; use norm=tokens (the default)"
        )
    if onnx:
        raise IsotropyError("--onnx: a calibrated static model is a table (model2vec and sentence-transformers), not a graph")
    if engine is not None:
        raise IsotropyError("--engine: a static model encodes in-process at table speed; run calibrate without --engine")


def folded_table(encoder: Any, transform: Any):
    """The encoder's table with ``transform`` (None: none) and the pooling's token weights folded in."""
    runtime = encoder.runtime
    weights = runtime.token_weights(parse_pooling(encoder.pooling), encoder.pooling_stats)
    if transform is None:
        A, b = np.eye(encoder.dim), np.zeros(encoder.dim)
    else:
        A, b = transform.affine_()
    return runtime.table.fold(A, b, row_weights=weights)


def st_rows(table: Any, vectors: np.ndarray) -> np.ndarray:
    """The rows of the sentence-transformers twin: ``vectors`` with the unknown token's row zeroed when the table
    leaves unknown tokens out of the mean (``StaticEmbedding`` averages every token it is given; with a zero row,
    a sentence of n known and k unknown tokens gets n/(n+k) times the mean of the known ones, the same direction)."""
    return _unknown_row_zeroed(vectors, table.unk_id if table.drop_unknown else None)


def _unknown_row_zeroed(vectors: np.ndarray, unk_id: int | None) -> np.ndarray:
    if unk_id is None:
        return vectors
    out = vectors.copy()
    out[unk_id] = 0.0
    return out


def _cut_characters(tok: Any, max_length: int) -> None:
    """Put model2vec's first cut into ``tok``: a sentence is cut at ``max_length`` x the median length of the
    vocabulary's tokens, in characters, before it is tokenised (model2vec's ``encode``; isotropy's static encoder
    does the same). A ``Replace`` normalizer that drops everything past that many characters runs first. One
    difference is left: the tokenizer matches added tokens' text (``[UNK]``, ``[SEP]``) before normalising, so in a
    sentence holding one, each stretch between them is cut on its own rather than the sentence as a whole."""
    from ..encoders.static.table import add_character_cut, character_limit, median_token_length

    chars = character_limit(max_length, median_token_length(tok.get_vocab()))
    if chars is not None:
        add_character_cut(tok, chars)


def write_st_twin(
    folder: Path, tokenizer: Any, vectors: np.ndarray, *, unk_id: int | None, max_length: int | None, normalize: bool
) -> None:
    """Save the ``sentence-transformers/`` twin of a static folder into ``folder`` (module docs): one ``StaticEmbedding``
    over ``tokenizer`` (a ``tokenizers.Tokenizer``: its padding is switched off and its truncation set), truncating at ``max_length`` (None: no limit) as model2vec
    and isotropy do, with the row of ``unk_id`` (the unknown token, which model2vec and isotropy leave out of the mean;
    None: none is left out) zeroed, then a ``Normalize`` module when ``normalize``."""
    from ..encoders.static.table import set_truncation
    from ..integrations.st_static import write_static_st_folder

    tok = tokenizer  # not copied: a 400k-word tokenizer takes seconds to copy, and both callers own theirs
    tok.no_padding()
    set_truncation(tok, max_length)  # saved in tokenizer.json: StaticEmbedding.load reads it back
    if max_length is not None:
        _cut_characters(tok, int(max_length))
    rows = _unknown_row_zeroed(np.ascontiguousarray(vectors, dtype=np.float32), unk_id)
    write_static_st_folder(folder, tok, rows, normalize)  # what SentenceTransformer(...).save writes, without torch


def save_model2vec(folder: Path, vectors: np.ndarray, tokenizer: Any, max_length: int | None, normalize: bool) -> None:
    """What ``StaticModel(vectors, tokenizer, normalize=normalize, max_length=max_length).save_pretrained(folder)``
    writes (but its model card, which isotropy's replaces), through model2vec's own writer: the constructor is left out
    because it deep-copies the tokenizer and sorts its vocabulary (2.5 s for GloVe's 400k words) for a model that is
    only saved. Like the constructor, the tokenizer truncates at ``max_length`` (it is set on ``tokenizer``) and the
    config holds ``max_length`` then ``normalize``; tests/test_static.py compares the files with the constructor's."""
    from model2vec.persistence import save_pretrained

    from ..encoders.static.table import set_truncation

    if tokenizer.padding is not None:  # a StaticTable's never pads; model2vec's constructor would keep the pad token
        raise ValueError("save_model2vec: the tokenizer must not pad")
    set_truncation(tokenizer, max_length)
    config = {"max_length": max_length, "normalize": normalize}
    save_pretrained(folder, embeddings=vectors, tokenizer=tokenizer, config=config, create_model_card=False)


def write_static_model(
    out: Path, encoder: Any, transform: Any, info: dict[str, Any], force: bool, normalize: bool = False
) -> None:
    """Write the folder (module docs) atomically (:func:`load_static_twin` loads it back). ``normalize``:
    both forms give unit-length vectors (model2vec's ``normalize``, a ``Normalize`` module), as the base model did."""
    table = folded_table(encoder, transform)
    vectors = np.ascontiguousarray(table.vectors, dtype=np.float32)
    limit = None if encoder.max_length >= encoder.runtime.position_limit else int(encoder.max_length)
    st_tok = table.tokenizer  # the folded table is this function's own: its tokenizer is saved, then StaticEmbedding's
    marker = {**header("sentence-transformers"), "calibration": info}
    write_static_folder(
        out, "sentence-transformers", force, save_root=lambda tmp: save_model2vec(tmp, vectors, st_tok, limit, normalize),
        tokenizer=st_tok, vectors=vectors, unk_id=table.unk_id if table.drop_unknown else None, max_length=limit,
        normalize=normalize, card=lambda _: model_card(info),  # isotropy's card, not model2vec's default
        marker=json.dumps(marker, indent=2, default=str),
    )  # fmt: skip


def load_static_twin(out: Path) -> Any:
    """The ``sentence-transformers/`` twin of the static folder ``out``, loaded by plain sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(Path(out) / ST_SUBFOLDER), device="cpu")


def write_static_folder(
    out: Path,
    kind: str,
    force: bool,
    *,
    save_root: Callable[[Path], None],
    tokenizer: Any,
    vectors: np.ndarray,
    unk_id: int | None,
    max_length: int | None,
    normalize: bool,
    card: Callable[[Path], str | None],
    marker: str,
) -> None:
    """The one writer of a static model's folder (module docs: ``isotropy calibrate`` and ``isotropy distill``), atomically
    and guarded (:func:`~isotropy.storage.artifacts.output_dir` with ``kind`` and ``force``): ``save_root(tmp)`` writes
    the model2vec root (model2vec's own writer: :func:`save_model2vec`, or ``StaticModel.save_pretrained``), then the
    ``sentence-transformers/`` twin (:func:`write_st_twin` over ``tokenizer``, which it changes: pass one the root no
    longer needs), ``README.md`` (``card(tmp)``, read after the root is written; None: none written) and
    ``isotropy.json`` (``marker``, its text)."""
    with output_dir(out, kind, force=force) as tmp:
        save_root(tmp)
        write_st_twin(tmp / ST_SUBFOLDER, tokenizer, vectors, unk_id=unk_id, max_length=max_length, normalize=normalize)
        text = card(tmp)
        if text is not None:
            (tmp / "README.md").write_text(text, encoding="utf-8")
        (tmp / "isotropy.json").write_text(marker, encoding="utf-8")
