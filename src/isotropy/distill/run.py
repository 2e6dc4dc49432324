"""``isotropy distill``: a static model from a transformer, optionally mapped onto it on a corpus (the distill package, above calibration).

1. **Distill** through model2vec's ``distill`` (the ``model2vec[distill]`` extra): one forward
   pass per token of the transformer's vocabulary, PCA to ``dims``, SIF-weighted rows. The table
   is kept in float32 (model2vec's default float16 would cost ~1e-3 on a folded table). With a
   token fit (``fit="tokens"``) the table is distilled at the model's full width: the teacher map,
   which goes to the teacher's ``dims`` principal axes anyway, then reads all of it (the mean of the
   two dev scores of RESULTS `static-factory`, round 3, rose: 75.23 -> 75.39 and 84.07 -> 84.06).
2. With a corpus (:mod:`.corpus_fit`), one streamed pass encodes each chunk with the teacher
   (:class:`~isotropy.encoders.Encoder`, L2-normalised, as the sentence-transformers pipeline of the
   teacher returns it) and feeds a :class:`~isotropy.transforms.teacher_map.TeacherMap` from the
   static model's sentence vectors (a plain mean of token rows, as model2vec's ``encode``) and, with
   ``fit="tokens"`` (the default), the sums of a
   :class:`~isotropy.transforms.token_regression.TokenRegression`. ``dims`` is the width written:
   below the teacher's, the teacher's vectors are projected on their principal axes first. The map
   folds into the table exactly (``mean_t(E[t] A + b) = mean_t(E[t]) A + b``); the token fit then
   moves each row the corpus shows, regularised toward its mapped row.
3. Write the folder with calibrate's writer of the static layout
   (:func:`~isotropy.calibration.static_export.write_static_folder`): a model2vec root by model2vec's own
   ``save_pretrained`` (its card named after the output), a ``sentence-transformers/`` twin (:func:`~isotropy.calibration.static_export.write_st_twin`,
   calibrate's own: one ``StaticEmbedding``, the unknown token's row zero, truncating at ``max_length``),
   atomically and guarded (:func:`~isotropy.storage.artifacts.output_dir`), plus ``isotropy.json`` (the
   marker that lets a later run replace it, and what was fitted on what). The teacher is recorded by a
   portable name (a model id, or a local folder's last component), never by a path of this machine.

Centring (:func:`fit_on_corpus`'s ``centre=True``, off by default): the table written is the fit minus the teacher's corpus
mean (projected). Every row of the pooling matrix sums to one, so this is exactly the fit to the teacher's centred
vectors (with the prior shifted alike). It is not the default: on the generic wiki corpus it gained 0.2 STS points,
on Cranfield's abstracts and on wiki + Cranfield it lost 0.7 and 0.5 (the mean of a narrow corpus is its topic, not
a common direction); RESULTS `static-factory` shows all three.

Normalisation: every folder says model2vec ``normalize: false``, with or without a corpus (model2vec's
distill says true). isotropy's encode, model2vec's ``encode`` and the twin then give the same vectors,
norms included: the plain mean of token rows (a normalised mean would not be the fitted one either).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..calibration.corpus import Corpus
from ..encoders.models import resolve_model
from ..errors import IsotropyError
from ..storage.artifacts import check_output, header
from ..transforms.gram_blocks import release_freed_memory
from ..transforms.token_whitening import fold_into_table
from .card import card_section as _card_section  # its old place and name
from .checks import check_before_work, check_cluster, check_corpus_options, check_dims, check_fit_options
from .sums_cache import SUMS_FOLDER, SumsCache, cached_sums, sums_key
from .targets import check_target_whitening
from .teacher import Lent, corpus_teacher, model_fingerprint, teacher_spec, teacher_width
from .teacher_vectors import teacher_cache as cache_for
from .teacher_vectors import teacher_key
from .word_rows import check_words, frequent_split_words, teacher_tokenizer, words_digest, words_record

__all__ = [
    "distill",
    "distill_static",
    "fold_static_model",
    "write_distilled",
    "teacher_width",
    "teacher_name",
    "fit_on_corpus",
    "KIND",
]

KIND = "static-model"


@contextlib.contextmanager
def _quiet(show: bool | None) -> Iterator[None]:
    """Silence transformers' loading notes, and model2vec's tqdm bar of its token pass when
    progress is off (``show`` None: on when stderr is a terminal; tqdm reads TQDM_DISABLE only at
    import, so the bar is wrapped instead)."""
    from ..encoders.models import quiet_transformers

    module = None
    if show is False or (show is None and not sys.stderr.isatty()):
        with contextlib.suppress(ImportError):
            import model2vec.distill.inference as module
    bar = getattr(module, "tqdm", None)
    with quiet_transformers():
        if bar is not None:
            module.tqdm = functools.partial(bar, disable=True)
        try:
            yield
        finally:
            if bar is not None:
                module.tqdm = bar


def distill_static(
    model: str | os.PathLike | None = None,
    dims: int | None = 256,
    show_progress: bool | None = None,
    vocabulary: list[str] | None = None,
):
    """A ``model2vec.StaticModel`` distilled from ``model`` (None: the embedded default), PCA to
    ``dims`` (None or 0: keep the model's width), float32 table; ``vocabulary``: words model2vec adds as whole
    tokens, each row the teacher's vector of the word (:mod:`.word_rows`)."""
    try:
        from model2vec.distill import distill as m2v_distill
    except ImportError:
        raise IsotropyError("distill needs model2vec with its distill extra: pip install 'isotropy[distill]'") from None
    pca = check_dims(dims)
    path, name = resolve_model(model)
    with _quiet(show_progress):
        try:
            static = m2v_distill(
                model_name=str(path) if path is not None else name,
                vocabulary=list(vocabulary) if vocabulary else None,
                pca_dims=pca,
                quantize_to="float32",
            )
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise IsotropyError(f"cannot distill {name!r}: {first}") from None
    if pca is not None and static.dim != pca:
        raise IsotropyError(
            f"{name} could not be reduced to {pca} dimensions (it has {static.dim}); use --dims {static.dim} or 0"
        )
    return static


def _unnormalised(static: Any) -> None:
    """model2vec ``normalize`` off (module docs), without model2vec's note that the config said otherwise."""
    if isinstance(getattr(static, "config", None), dict):
        static.config["normalize"] = False
    static.normalize = False


def teacher_name(model: str | os.PathLike | None) -> str:
    """The teacher as the folder records it: a model id, or a local folder's last component (never a path of
    this machine: the folder is made to be shared, S1-066)."""
    path, name = resolve_model(model)
    if model is None:
        return name
    return path.name if path is not None else name


def fold_static_model(static: Any, transform: Any) -> Any:
    """``static`` with the affine ``transform`` folded into its table (in place; returned)."""
    if getattr(static, "weights", None) is not None or getattr(static, "token_mapping", None) is not None:
        raise IsotropyError(
            "this static model uses vocabulary quantization (per-token weights): an affine map does not fold into it"
        )
    static.embedding = fold_into_table(static.embedding, transform)
    _unnormalised(static)  # a normalised mean would not be the mapped mean
    return static


CHECK_AHEAD = 4096  # standard input's sentences read ahead (and kept for the pass) to look for two different ones


def _check_corpus(source: Corpus) -> None:
    """At least two different sentences (one streamed read of a file, seconds against the distill's minutes; standard
    input, read once, up to ``CHECK_AHEAD`` sentences, kept for the pass: S1-011)."""
    first, n = None, 0
    sentences = source.head(CHECK_AHEAD) if source.stdin else (s for chunk in source.chunks(4096) for s in chunk)
    for sentence in sentences:
        n += 1
        if first is None:
            first = sentence
        elif sentence != first:
            return
    if source.stdin and n == CHECK_AHEAD:
        return  # the rest may vary: the pass itself refuses a corpus of one repeated sentence
    if n == 0:
        raise IsotropyError(f"the corpus is empty ({source.where} holds 0 sentences): a fit needs at least 2 different ones")
    if n < 2:
        raise IsotropyError(f"the corpus ({source.where}) has 1 sentence: a fit needs at least 2 different ones")
    raise IsotropyError(
        f"the corpus ({source.where}) repeats one sentence ({n} times): it gives a single equation, nothing to fit"
    )


def fit_on_corpus(
    static: Any,
    teacher: Any,
    corpus: Any,
    pca: int | None,
    alpha: float,
    fit: str,
    lam,
    show,
    *,
    spans: Any = False,
    criterion: str = "cosine",
    centre: bool = False,
    target_whitening: float | None = None,
    engine: str | None = None,
    address: Any = None,
    cache: Any = None,
    vectors_key: dict | None = None,
) -> dict:
    """The corpus pass and the map or token fit, written into ``static`` (a model2vec ``StaticModel``);
    ``teacher``: what ``encode(sentences)`` gives the teacher's vectors (with ``engine``, an ``EncoderSpec``), or a
    :class:`~.teacher.Lent` one, dropped after the corpus pass (freed before the solve when no one else holds it);
    ``spans``, ``criterion``, ``engine``, ``address``: :mod:`.corpus_fit`; ``centre``: module docs;
    ``target_whitening``: the targets' soft whitening (:mod:`.targets`; None: its default); ``cache``: the teacher cache
    (:mod:`.teacher_vectors`), or None; ``vectors_key``: what keys the teacher's vectors
    (:func:`~.teacher_vectors.teacher_key`), which also keys the pass's sums (:mod:`.sums_cache`; None: not kept).
    Returns what the card and marker record."""
    from .corpus_fit import TARGET_POWER, cosine_agreement, solve_tokens, span_kinds
    from .targets import projection_note, target_projection

    if getattr(static, "weights", None) is not None or getattr(static, "token_mapping", None) is not None:
        raise IsotropyError("this static model uses vocabulary quantization (per-token weights): a fit does not fold into it")
    source = corpus if isinstance(corpus, Corpus) else Corpus(corpus)
    target_whitening = check_target_whitening(target_whitening, source, fit)
    kinds = span_kinds(spans) if fit == "tokens" else ()
    sums = SumsCache(Path(cache.directory) / SUMS_FOLDER) if cache is not None and cache.enabled else None
    rekey = functools.partial(sums_key, vectors_key, static, source, kinds, fit == "tokens")  # also after the pass
    key = rekey() if sums is not None else None
    options = {"alpha": alpha, "tokens": fit == "tokens", "spans": spans, "show_progress": show, "engine": engine}
    lent = teacher if isinstance(teacher, Lent) else Lent(teacher)
    cf, how = _gather(static, lent, source, {**options, "address": address, "cache": cache}, sums, key, rekey)
    A, b = cf.teacher_map.affine_()
    width = A.shape[1]
    info: dict[str, Any] = {"corpus": source.describe(), "sentences": cf.sentences, "fit": fit, "alpha": alpha}
    info["target_whitening"] = target_whitening  # the power (0: none; targets.py)
    info["teacher_cache"] = _cache_note(cf, cache, how)
    P = target_projection(cf.teacher_map, pca, target_whitening)
    if P is not None:
        A, b = A @ P, b @ P
        info["teacher_projection"] = projection_note(width, P.shape[1], target_whitening)
        if cf.fit is not None:
            cf.fit, cf.held = cf.fit.project(P), cf.held.project(P)
    P = np.eye(width) if P is None else P
    mean = cf.teacher_map.moments_.mean[cf.teacher_map.n_features_in_ :]
    table = np.asarray(static.embedding, dtype=np.float64) @ A + b
    if fit == "tokens":
        sample = cf.held_sample()
        agree = None if sample is None or sample[0].shape[0] < 3 else cosine_agreement(*sample, mean, mean @ P)
        table, solved = solve_tokens(cf.fit, cf.held, table, lam, show, agreement=agree, criterion=criterion, consume=True)
        info["tokens"] = solved
        if solved.get("at_prior"):  # --lam 1e300: the limit of the fit, said rather than left to a 0 in the record
            print(
                f"note: the token fit left every row at its prior, the mapped table (at strength {solved['lambda']:g} "
                "it cannot move a row by more than float rounding)",
                file=sys.stderr,
            )
        if kinds:
            info["spans"] = f"{cf.spans} spans of the fitting lines added ({', '.join(kinds)}), each with the teacher's vector"
        info["target_scale"] = f"the teacher's unit vectors times n ** -{TARGET_POWER:g} (n: the text's tokens)"
    if centre:
        table -= mean @ P
        info["centred"] = "on the teacher's corpus mean: the fit matches the teacher's centred vectors"
    static.embedding = np.ascontiguousarray(table, dtype=np.float32)
    _unnormalised(static)  # a normalised mean would not be the fitted mean
    info["seconds"] = cf.seconds
    return info


def _gather(static: Any, lent: Lent, source: Any, options: dict, sums: Any, key: Any, rekey: Any) -> tuple[Any, str]:
    """The pass's sums and how they came (:func:`~.sums_cache.cached_sums`). The lent teacher goes as soon as the pass
    returns, before its sums are written to the cache, or at once where they came from the cache: before the solve."""
    from .corpus_fit import fit_corpus

    def gather() -> Any:
        got = fit_corpus(static, lent.take(), source, **options)
        gc.collect()
        release_freed_memory()
        return got

    try:
        return cached_sums(gather, sums, key, options["alpha"], rekey)
    finally:
        if lent.take() is not None:  # not taken (the sums came from the cache): it goes now
            gc.collect()
            release_freed_memory()


def _cache_note(cf: Any, cache: Any, sums: str = "off") -> str:
    """What the card says of the teacher cache (never where it is); ``sums``: how the pass's sums came (:mod:`.sums_cache`)."""
    if cache is None:
        return "off"
    if sums == "cached":
        return "the corpus pass's sums read from the cache (no chunk read or encoded)"
    note = f"cached chunks used: {cf.cached} of {cf.chunks}"
    return note + (f" (and the lines of {cf.cached_lines} more; their spans encoded)" if cf.cached_lines else "")


def distill(
    output: str | os.PathLike,
    model: str | os.PathLike | None = None,
    *,
    dims: int | None = 256,
    corpus: Any = None,
    fit: str | None = None,
    alpha: float | None = None,
    lam: float | None = None,
    spans: Any = None,
    strength_by: str | None = None,
    target_whitening: float | None = None,
    engine: str | None = None,
    address: Any = None,
    teacher_cache: Any = True,
    teacher_onnx: str | os.PathLike | None = None,
    words: int = 0,
    force: bool = False,
    show_progress: bool | None = None,
) -> Path:
    """Distill ``model`` into a static model2vec folder at ``output``, ``dims`` wide (None or 0: the model's
    width). With ``corpus``: ``fit="tokens"`` (the default) fits every token's row to the teacher's sentence
    vectors (:mod:`.corpus_fit`; ``spans``: span kinds, a comma-separated string or a sequence, True or None for the
    default kinds with it, False or "none" for none; they add equations), ``"map"`` folds the sentence-level
    teacher map alone. ``teacher_cache``: where the teacher's vectors of the corpus are kept chunk by chunk, so a
    rerun with other settings encodes nothing again and a killed run resumes (:mod:`.teacher_vectors`): True
    (default: ``$ISOTROPY_CACHE/teacher``), a folder, or False (off). ``teacher_onnx``: an ``isotropy export onnx``
    folder of ``model`` that encodes the corpus instead of the model itself (:mod:`.teacher`). ``words``: whole-word
    rows for that many of a corpus file's frequent words (:mod:`.word_rows`; 0: none). ``target_whitening``: the
    power of the targets' soft whitening (:mod:`.targets`; None: its default). Returns the folder."""
    pca, alpha, fit = check_before_work(model, dims, corpus, alpha, fit, lam)
    target_whitening = check_corpus_options(corpus, teacher_cache, teacher_onnx, target_whitening, fit)
    spans, strength_by = check_fit_options(spans, strength_by, fit, lam)
    source = None if corpus is None else Corpus(corpus)  # one reader: standard input is read once (S1-011)
    n_words = check_words(words, corpus, source)
    check_cluster(engine, address, corpus)
    cache = cache_for(teacher_cache) if corpus is not None else None
    inputs = [] if source is None else source.inputs
    out = check_output(output, KIND, force=force, inputs=[*inputs, model] if model is not None else inputs)
    teacher = None
    if source is not None:
        _check_corpus(source)
        teacher = corpus_teacher(model, teacher_onnx)
        key = teacher_key(teacher)  # what keys its vectors and the pass's sums (also on Dask workers)
    static, table_how, vocab = _table(model, None if fit == "tokens" else dims, show_progress, cache, teacher, source, n_words)
    _unnormalised(static)  # module docs: isotropy, model2vec and the twin give the same vectors (S5-013)
    info: dict[str, Any] = {"teacher": _named(static, model), "vocabulary": len(static.embedding)}
    info.update(words_record(static, vocab, n_words))
    if source is not None:
        info["table_cache"] = table_how
        if teacher_onnx is not None:
            info["corpus_teacher"] = teacher.describe()  # "ONNX model.onnx (int8) of model ...": no path
        if engine is not None:  # the workers build the teacher from its spec, once each
            teacher = teacher_spec(model, teacher)  # the model itself is dropped here: the client never encodes
            gc.collect()
            release_freed_memory()
        lent, teacher = Lent(teacher), None  # freed after the pass, before the solve (teacher.Lent)
        info["corpus_fit"] = fit_on_corpus(
            static,
            lent,
            source,
            pca,
            alpha,
            fit,
            lam,
            show_progress,
            spans=spans,
            engine=engine,
            address=address,
            criterion=str(strength_by),
            target_whitening=target_whitening,
            cache=cache,
            vectors_key=key,
        )
    info["dims"] = int(static.dim)
    if isinstance(getattr(static, "config", None), dict):
        static.config["hidden_dim"] = int(static.dim)
    write_distilled(out, static, info, force)
    return out


def _named(static: Any, model: Any) -> str:
    """The teacher's portable name (:func:`teacher_name`), recorded as the model's tokenizer and base model."""
    name = teacher_name(model)
    if isinstance(getattr(static, "config", None), dict):
        static.config["tokenizer_name"] = name
    static.base_model_name = name
    return name


def _table(
    model: Any, dims: int | None, show: bool | None, cache: Any, teacher: Any, source: Any = None, n_words: int = 0
) -> tuple[Any, str, list[str]]:
    """model2vec's distill of ``model`` (``dims``: its PCA width, None at full width), read from the distilled-table
    cache beside the teacher cache when it holds it (:mod:`.table_cache`; with a corpus and its cache on), and the
    whole words it adds: ``source``'s ``n_words`` most frequent split ones (:mod:`.word_rows`; the key holds them)."""
    from .table_cache import TABLE_FOLDER, TableCache, cached_table, table_key

    vocab = frequent_split_words(source, teacher_tokenizer(model), n_words) if n_words else []
    tables = key = None
    if cache is not None and getattr(cache, "enabled", False) and teacher is not None:
        # keyed by the model's fingerprint, also when an ONNX export of it reads the corpus (teacher.model_fingerprint)
        words = {"n": n_words, "count": len(vocab), "sha256": words_digest(vocab)} if n_words else None
        tables = TableCache(Path(cache.directory) / TABLE_FOLDER)
        key = table_key(model_fingerprint(teacher), check_dims(dims), words=words)
    args = (model, dims, show) + ((vocab,) if vocab else ())  # no words: model2vec's own vocabulary argument unset
    return (*cached_table(lambda: distill_static(*args), tables, key), vocab)  # full width with tokens: module docs


def write_distilled(out: Path, static: Any, info: dict[str, Any], force: bool) -> None:
    """The model2vec folder (its card named after ``out``, not the temporary folder), a ``sentence-transformers/``
    twin (calibrate's: the unknown token's row zero, truncating at ``max_length``; S5-009, S5-010) and
    ``isotropy.json``, atomically: calibrate's writer (:func:`~isotropy.calibration.static_export.write_static_folder`)."""
    from tokenizers import Tokenizer

    from ..calibration.static_export import write_static_folder

    def card(tmp: Path) -> str | None:  # model2vec's card with isotropy's section after it
        readme = tmp / "README.md"
        return readme.read_text(encoding="utf-8") + _card_section(info) if readme.is_file() else None

    write_static_folder(
        out, KIND, force, save_root=lambda tmp: static.save_pretrained(tmp, model_name=out.name),
        tokenizer=Tokenizer.from_str(static.tokenizer.to_str()),  # model2vec's own stays as it saved it
        vectors=np.ascontiguousarray(static.embedding, dtype=np.float32),
        unk_id=getattr(static, "unk_token_id", None),  # model2vec leaves it out of the mean, as isotropy does
        max_length=getattr(static, "max_length", None), normalize=bool(static.normalize), card=card,
        marker=json.dumps({**header(KIND), "distill": info}, indent=2, default=float) + "\n",
    )  # fmt: skip
