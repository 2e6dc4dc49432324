"""Index files: build a search index from a sentence file, add a file to one, search one.

The file-level face of :class:`isotropy.search.Index` (``isotropy index build``, ``index add``, ``search``):
a build takes one :class:`~isotropy.search.spec.IndexSpec` (old keyword calls are turned into one, once, at
the top); outputs are checked before any encoding, sentence files are read through
:mod:`isotropy.storage.text`, errors are one line. Moved here from ``isotropy.files.index`` (which still
answers, with a DeprecationWarning).

``index build --method auto`` (:func:`build_auto_index`): the corpus is encoded once;
:func:`isotropy.selection.select_calibration` compares the candidates on those vectors
(label-free: the criteria encode word-deleted copies of a sample of the sentences with the same
encoder) and the chosen one (``raw``: none) is the index's transform. The evidence
(:meth:`Selection.to_dict`) is saved in the index's ``config.json`` under ``selection`` and read
back by :meth:`Index.load` (``index.selection``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_sentences
from ..encoders import Encoder
from ..errors import IsotropyError
from ..storage.artifacts import check_output, read_config
from ..storage.locks import artefact_lock
from ..storage.text import read_sentences
from ..transforms import load_transform
from ..transforms.methods import parse_method
from .index import Index
from .spec import DEFAULT_WHITEN_K, DEFAULT_WHITEN_POWER, IndexCalibration, IndexSpec

__all__ = [
    "DEFAULT_WHITEN_K",
    "DEFAULT_WHITEN_POWER",
    "default_whitening",
    "build_index",
    "build_auto_index",
    "add_to_index",
    "search_index",
]


def default_whitening(dim: int, n_components: int | None = DEFAULT_WHITEN_K, power: float = DEFAULT_WHITEN_POWER):
    """The whitening ``isotropy index build`` fits on the corpus by default: ``n_components``
    (capped at the encoder's dimension), ``power``, Ledoit-Wolf shrinkage (so small corpora work); the same
    :class:`~isotropy.transforms.methods.Method` an :class:`~isotropy.search.spec.IndexCalibration` gives."""
    k = None if n_components is None else min(int(n_components), int(dim))
    return parse_method("whitening").with_options(n_components=k, power=power, shrinkage="auto").build()


def _index_transform(corpus, n: int, encoder: Encoder, cal: IndexCalibration) -> tuple[Any, str | None]:
    """The transform an index build uses (``cal``: the spec's calibration, checked, read as its
    :meth:`~isotropy.search.spec.IndexCalibration.as_method`), and a warning when the default had to be skipped."""
    method = cal.as_method(encoder.dim)
    if method is None:
        return load_transform(cal.transform), None
    if method.kind == "raw":
        return None, None
    k = method.n_components
    if k > encoder.dim:
        raise IsotropyError(f"--whiten {k} is more than the {encoder.dim} dimensions of {encoder.model_name}")
    # n centred sentences span at most n - 1 directions: a whitening to k dims needs n > k
    # (below that, the extra directions hold only the shrinkage's made-up variance).
    if n > k:
        return method.build(), None
    if cal.whiten is not None or cal.power is not None:
        raise IsotropyError(
            f"a whitening to {k} dimensions needs more than {k} sentences, but {corpus} has {n}; "
            f"lower --whiten, pass --transform with a whitening fitted on a larger corpus, or use --no-whiten"
        )
    return None, (
        f"{corpus} has {n} sentences, too few to fit the default whitening to {k} dimensions "
        f"(it needs more than {k}); indexing the raw vectors instead (pass --transform with a whitening "
        f"fitted on a larger corpus to calibrate them)"
    )


def build_index(
    corpus: str | os.PathLike | Sequence[str], output: str | os.PathLike, spec: IndexSpec | None = None, **keywords: Any
) -> Index:
    """``isotropy index build``: index a sentence file (one a line; id = line number - 1) into ``output`` as
    ``spec`` asks; from Python ``corpus`` may also be a list of sentences (id = position). The keyword options
    of earlier versions (``model=``, ``kind=``, ``whiten=``, ``m=``, ...) still work: they are
    :meth:`IndexSpec.from_keywords`'s. A spec with ``method="auto"`` is :func:`build_auto_index`'s; one with an
    engine is :func:`isotropy.search.build_dask.build_index_dask`'s.

    Transform: ``transform`` (a fitted folder), else raw with ``no_whiten``, else a
    whitening fitted on the corpus itself with ``whiten`` components (default 128) and
    ``power`` (default 0.5, soft whitening), with Ledoit-Wolf shrinkage. A whitening to k
    dimensions needs more than k sentences: on a smaller corpus the default falls back to
    raw vectors with a warning (in ``index.warnings``), and an explicit ``whiten`` is an error.
    """
    spec = IndexSpec.coerce(spec, keywords)
    if spec.engine is not None:
        raise IsotropyError(f"a spec with engine {spec.engine!r} is built by build_index_dask (it reads the vector shards)")
    if spec.calibration.auto:
        return build_auto_index(corpus, output, spec)
    cal = spec.calibration
    corpus, corpus_path = _as_corpus(corpus)
    check_output(output, "index", force=spec.force, inputs=[corpus_path, cal.transform, spec.pooling_stats, spec.model])
    sentences = _read_corpus(corpus)
    corpus = corpus_path if corpus_path is not None else LIST_NAME  # how messages name it from here on
    encoder = Encoder(spec.model, **spec.encoder_options())
    t, warning = _index_transform(corpus, len(sentences), encoder, cal)
    index = Index.from_spec(encoder, t, spec)
    if warning:
        index.warnings.append(warning)

    def add() -> None:
        index.add(sentences, show_progress=spec.show_progress)
        _say_unknown_rows(index, corpus)

    return _fill_and_save(index, corpus, output, spec.force, add)


def build_auto_index(
    corpus: str | os.PathLike | Sequence[str], output: str | os.PathLike, spec: IndexSpec | None = None, **keywords: Any
) -> Index:
    """``isotropy index build --method auto``: index a sentence file (one a line; id = line number - 1)
    with the calibration ``auto`` chooses on it (see the module docs), by the rule tuned for the spec's ``task``
    (keywords: search unless given; ``evidence``: the label-free criteria too, slow); saved to ``output``."""
    from ..selection import parse_candidates
    from ..selection.choose import choose
    from ..selection.signals import rule_for

    spec = IndexSpec.coerce(spec, keywords, method="auto", task="search")
    cal = spec.calibration
    if not cal.auto:
        raise IsotropyError("build_auto_index builds --method auto; this spec asks for another calibration (build_index)")
    rule_for(cal.task)  # an unknown --for is said before the model loads
    if cal.candidates is not None:
        parse_candidates(cal.candidates, 10**6)  # an unknown name is said before the model loads
    corpus, corpus_path = _as_corpus(corpus)
    check_output(output, "index", force=spec.force, inputs=[corpus_path, spec.pooling_stats, spec.model])
    sentences = _read_corpus(corpus)
    corpus = corpus_path if corpus_path is not None else LIST_NAME  # how messages name it from here on
    rows = [i for i, s in enumerate(sentences) if s.strip()]
    encoder = Encoder(spec.model, **spec.encoder_options())
    raw = np.asarray(encoder.encode(sentences, show_progress=spec.show_progress), dtype=np.float32)
    unknown = _unknown_rows(encoder, corpus)  # now: the candidates' criteria encode more after this
    sel = choose(
        encoder,
        [sentences[i] for i in rows],
        raw[rows],
        candidates=cal.candidates,
        seed=cal.seed,
        source=str(corpus),
        task=cal.task,
        evidence=cal.evidence,
    )
    index = Index.from_spec(encoder, sel.transform, spec)
    index.selection = sel.to_dict()
    index.warnings.extend(unknown)
    add = lambda: index.add_encoded(sentences, raw, show_progress=spec.show_progress)
    return _fill_and_save(index, corpus, output, spec.force, add)


def _unknown_rows(encoder: Encoder, source: str | os.PathLike) -> list[str]:
    """The warning of a static model's last encode when some rows hold no word it knows (their vectors are
    zero and match nothing), as ``encode`` and ``search`` say it; [] otherwise."""
    coverage = encoder.coverage
    note = coverage.warning("sentences") if coverage is not None else None
    return [f"{source}: {note}"] if note else []


def _say_unknown_rows(index: Index, source: str | os.PathLike) -> None:
    index.warnings.extend(_unknown_rows(index.encoder, source))


LIST_NAME = "the list of sentences"  # how messages name a corpus given as a Python list (as calibrate's do)


def _as_corpus(corpus: Any) -> tuple[Any, str | os.PathLike | None]:
    """``corpus`` as build_index reads it: ``(what to read, the input path or None)``. A sentence file (a path), or,
    from Python, a list of sentences as calibrate and distill take (U45, S7-030); anything else is one line."""
    if isinstance(corpus, (str, os.PathLike)):
        return corpus, corpus
    if isinstance(corpus, (list, tuple)):
        bad = next((i for i, s in enumerate(corpus) if not isinstance(s, str)), None)
        if bad is not None:
            raise IsotropyError(f"corpus: item {bad} of {LIST_NAME} is a {type(corpus[bad]).__name__}, not a sentence (str)")
        return list(corpus), None
    raise IsotropyError(f"corpus must be a sentence file (a path) or a list of sentences, not a {type(corpus).__name__}")


def _read_corpus(corpus: Any) -> list[str]:
    name = corpus if isinstance(corpus, (str, os.PathLike)) else LIST_NAME
    sentences = read_sentences(corpus) if isinstance(corpus, (str, os.PathLike)) else corpus
    if not any(s.strip() for s in sentences):
        raise IsotropyError(f"{name} holds no sentence (every line is empty): there is nothing to index")
    return sentences


def _fill_and_save(index: Index, corpus: str | os.PathLike, output: str | os.PathLike, force: bool, add) -> Index:
    """Run ``add`` (errors named by the corpus file), then save the index to ``output``."""
    try:
        add()
    except IsotropyError as exc:
        raise IsotropyError(f"{corpus}: {exc}") from None
    index.save(output, force=force)
    return index


def add_to_index(index_dir: str | os.PathLike, more: str | os.PathLike, show_progress: bool | None = None) -> tuple[Index, int]:
    """``isotropy index add``: append a sentence file to a saved index, rewriting it atomically.

    The index is locked from load to save, so a second ``add`` waits for this one
    instead of silently dropping one of the two batches. Returns ``(index, added)``.
    """
    index_dir = Path(index_dir)
    read_config(index_dir, "index")  # a missing or foreign folder is named before any lock is taken
    sentences = read_sentences(more)
    blank = next((i for i, s in enumerate(sentences, start=1) if not s.strip()), None)
    if blank is not None:  # it would become a searchable row that matches nothing
        raise IsotropyError(f"{more} line {blank} is blank: there is no sentence to index there; remove the blank lines")
    with artefact_lock(index_dir):
        index = Index.load(index_dir, mmap=False)
        index.add(sentences, show_progress=show_progress)
        _say_unknown_rows(index, more)
        index.save(index_dir)
    return index, len(sentences)


def search_index(
    index_dir: str | os.PathLike,
    queries: Sequence[str] | str | None = None,
    queries_file: str | os.PathLike | None = None,
    k: int = 10,
    ef_search: int | None = None,
    nprobe: int | None = None,
    show_progress: bool | None = None,
    rerank: int | None = None,
):
    """``isotropy search``: queries given directly or read from a UTF-8 file (one a line); ``rerank``:
    candidates re-scored with the kept exact vectors (ivfpq/opq)."""
    queries = [] if queries is None else check_sentences(queries, "query")  # a bare string is one query, as Index.search
    if queries and queries_file is not None:
        raise IsotropyError("give either a query or --queries FILE, not both")
    if queries_file is not None:
        queries = read_sentences(queries_file)
    if not queries:
        raise IsotropyError("no query: give a query or --queries FILE")
    Index._check_k(k)
    start = time.perf_counter()
    index = Index.load(index_dir, ef_search=ef_search, nprobe=nprobe, rerank=rerank)
    loaded = time.perf_counter()
    results = index.search(queries, k, show_progress=show_progress)
    results.timings = {"load_s": round(loaded - start, 3), "search_s": round(time.perf_counter() - loaded, 3)}
    return results
