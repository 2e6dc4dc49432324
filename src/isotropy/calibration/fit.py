"""Which transform a method name builds, and the streamed encode-and-fit.

Every affine method (whitening and every ``AffineTransform`` the registry holds: center,
abtt, common-component, the soft presets...) is solved from the corpus's
:class:`~isotropy.transforms.moments.Moments` alone: the corpus is encoded a chunk at a
time and each chunk is added to the moments, so memory does not grow with the corpus
(d x d float64 for the moments, one chunk of vectors, and the samples below). The moments
merge exactly, so ``--engine dask`` computes them on a cluster instead
(:func:`isotropy.distributed.fit_moments`) and the same ``from_moments`` solves them.

A flow is trained by gradient steps on the vectors themselves: it is fitted on a seeded
uniform sample of at most :data:`FLOW_SAMPLE_BYTES` of float32 vectors (87,381 sentences
at 384 dimensions, 43,690 at 768), drawn while streaming; a larger corpus is sampled, not
refused, and the model card says how many sentences the flow saw.

The before/after figures of the model card: IsoScore from the covariance of every fitted
vector (exact, from the moments: the covariance after ``y = x A + b`` is ``A^T C A``), for a
flow from its sample; the average cosine of 10,000 random pairs of a seeded sample of at most
:data:`ANALYSIS_ROWS` sentences.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._progress import ProgressBar
from ..errors import IsotropyError
from ..transforms.base import AffineTransform
from ..transforms.moments import Moments
from .corpus import Corpus, Reservoir
from .request import AutoMethod, CalibrationRequest, read_dev, read_dev_pairs

__all__ = [
    "CHUNK_SENTENCES",
    "FLOW_SAMPLE_BYTES",
    "ANALYSIS_ROWS",
    "SELECT_ROWS",
    "Fitted",
    "AutoMethod",
    "resolve_method",
    "check_size",
    "fit_local",
    "fit_auto",
    "fit_choice",
    "select_sample",
    "read_dev",
    "read_dev_pairs",
]

CHUNK_SENTENCES = 4096  # sentences encoded at a time: 6 MiB of float32 vectors at 384 dimensions
FLOW_SAMPLE_BYTES = 128 * 2**20
ANALYSIS_ROWS = 5000
SELECT_ROWS = 20000  # --method auto: the candidates are compared on a seeded sample of at most this many sentences
SIGNAL_ROWS = 1000  # --method auto that keeps raw by the encoder's kind: the report's signals read this many only (the
# issue asked <= 2,000; 1,000 keeps auto under a third of an encode of 15k sentences, and the signals never decide)


@dataclass
class Fitted:
    """A fitted calibration and what the model card reports about its fit."""

    transform: Any
    n_sentences: int  # sentences of the corpus (encoded)
    n_fit: int  # sentences the transform was fitted on (a flow: its sample)
    sample: np.ndarray  # raw vectors of up to ANALYSIS_ROWS sentences, for the average cosine
    moments: Moments | None = None  # every vector's statistics (affine methods)
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    selection: Any = None  # --method auto: the Selection (choice and evidence)
    token: dict[str, Any] | None = None  # a token-level fit of a static table: what the card says of it (.token_fit)


def resolve_method(method: str, **options: Any):
    """Deprecated: an unfitted transform for ``method`` with the options given. The one door is
    :meth:`isotropy.calibration.request.CalibrationRequest.from_options`; this builds through it."""
    warnings.warn(
        "resolve_method is deprecated: build a CalibrationRequest (isotropy.calibration.request) and use its method",
        DeprecationWarning,
        stacklevel=2,
    )
    from .request import auto_method

    m = CalibrationRequest.from_options(method, **options).method
    return auto_method(m) if m.kind == "auto" else m.build()


def check_size(est: Any, n: int, dim: int, where: str) -> None:
    """Too few sentences for the method is one error naming how many it needs."""
    need = int(est.min_fit_rows(dim))
    if n < need:
        if n == 0:
            raise IsotropyError(f"{where} holds no sentence (every line is blank): there is nothing to fit on")
        raise IsotropyError(
            f"{where} has {n} sentence{'s' if n != 1 else ''}; {est.kind} of {dim}-dimensional vectors needs at least "
            f"{need}: add sentences{_hint(est)}"
        )


def _hint(est: Any) -> str:
    params = est.get_params()
    hints = []
    if "n_components" in params:
        hints.append("a smaller --n-components")
    if "shrinkage" in params:
        hints.append("--shrinkage auto")
    return f", or use {' or '.join(hints)}" if hints else ""


def fit_local(encoder: Any, corpus: Corpus, est: Any, *, total: int | None, show_progress: bool | None) -> Fitted:
    """Encode ``corpus`` a chunk at a time on this machine and fit ``est`` (module docstring)."""
    affine = isinstance(est, AffineTransform)
    dim = int(encoder.dim)
    moments = Moments() if affine else None
    flow_sample = None if affine else Reservoir(max(1, FLOW_SAMPLE_BYTES // (4 * dim)), seed=0)
    analysis = Reservoir(ANALYSIS_ROWS, seed=1)
    t0 = time.perf_counter()
    n = 0
    with ProgressBar(total or 0, show_progress, "encoding", min_total=4 * encoder.batch_size, unit="sentences") as bar:
        for chunk in corpus.chunks(CHUNK_SENTENCES):
            X = encoder.encode(chunk, progress=bar)  # the bar moves batch by batch (rate and time left), not per chunk
            if moments is not None:
                moments.update(X, name=corpus.where, row_offset=n)
            else:
                flow_sample.add(X)
            analysis.add(X)
            n += len(chunk)
    seconds = {"encode_s": time.perf_counter() - t0}
    check_size(est, n, dim, corpus.where)
    t1 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if affine:
            t = type(est).from_moments(moments, **est.get_params())
            n_fit = n
        else:
            X = flow_sample.sample()
            t = est.fit(X, show_progress=show_progress)
            n_fit = X.shape[0]
    seconds["fit_s"] = time.perf_counter() - t1
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    return Fitted(t, n, n_fit, analysis.sample(), moments, notes, seconds)


def fit_auto(encoder: Any, corpus: Corpus, auto: AutoMethod, *, total: int | None, show_progress: bool | None) -> Fitted:
    """``--method auto``: compare the candidates on a seeded sample of at most :data:`SELECT_ROWS` sentences
    (:func:`isotropy.selection.choose.choose`), then fit the choice on the whole corpus (streamed again
    only when the sample is not the whole corpus)."""
    from ..selection.choose import choose
    from ..selection.signals import incumbent_of

    t0 = time.perf_counter()
    # decide first: label-free, the rule reads the encoder's kind alone; when it keeps raw there is nothing to fit,
    # and a small sample gives the report's signals (and the criteria with --evidence)
    first = incumbent_of(encoder, task=auto.task)[0] if auto.dev is None else None
    sentences, total = select_sample(corpus, total, SIGNAL_ROWS if first == "raw" else SELECT_ROWS)
    X = np.asarray(encoder.encode(sentences, show_progress=show_progress), dtype=np.float64)
    seconds = {"encode_s": time.perf_counter() - t0}
    t1 = time.perf_counter()
    sel = choose(
        encoder,
        sentences,
        X,
        candidates=auto.candidates,
        dev_pairs=auto.dev,
        source=corpus.where,
        dev_source=auto.dev_source,
        show_progress=show_progress,  # the label-free criteria encode perturbed copies of the sample: long work
        task=auto.task,
        evidence=auto.evidence,
    )
    seconds["select_s"] = time.perf_counter() - t1
    if first == "raw" and (total or 0) > len(sentences):
        sel.notes.append(
            f"decided by the encoder's kind before reading the corpus: raw kept, so only a seeded sample of "
            f"{len(sentences):,} of its {total:,} sentences was encoded, for the signals shown"
        )
    return fit_choice(encoder, corpus, sentences, X, sel, total=total, seconds=seconds, show_progress=show_progress)


def select_sample(corpus: Corpus, total: int | None, rows: int = SELECT_ROWS) -> tuple[list[str], int | None]:
    """The seeded sample of at most ``rows`` sentences that auto compares on, and the corpus's size
    (standard input is read once here: the fit of the choice may stream it again)."""
    if corpus.stdin and corpus.sentences is None:
        corpus.sentences = [s for chunk in corpus.chunks(CHUNK_SENTENCES) for s in chunk]
        total = len(corpus.sentences)
    sentences = _sample_sentences(corpus, rows)
    if not sentences:
        raise IsotropyError(f"{corpus.where} holds no sentence (every line is blank): there is nothing to fit on")
    return sentences, total


def fit_choice(
    encoder: Any,
    corpus: Corpus,
    sentences: list[str],
    X: np.ndarray,
    sel: Any,
    *,
    total: int | None,
    seconds: dict,
    show_progress: Any,
) -> Fitted:
    """The selection ``sel`` made on ``sentences`` (vectors ``X`` by ``encoder``) as a fit: kept as it is when the
    sample is the whole corpus (or raw was chosen), else the choice fitted again on every sentence, streamed."""
    from ..selection.choose import unfitted_choice

    n = len(sentences) if total is None or total <= len(sentences) else int(total)
    moments = Moments().update(X)
    analysis = X[: min(len(X), ANALYSIS_ROWS)]
    if sel.choice == "raw" or n == len(sentences):
        fitted = Fitted(sel.transform, n, len(sentences), analysis, moments, [], seconds, sel)
    else:  # a sample of a larger corpus chose: fit the choice on every sentence
        fitted = fit_local(encoder, corpus, unfitted_choice(sel), total=total, show_progress=show_progress)
        fitted.seconds.update(select_s=seconds["select_s"], select_encode_s=seconds["encode_s"])
        fitted.selection = sel
    return fitted


def fit_dask(encoder: Any, corpus: Corpus, est: Any, *, address: Any, show_progress: bool | None) -> Fitted:
    """The moments computed on a Dask cluster (each worker encodes its shards), solved here.

    The analysis sample is encoded here: a seeded sample of the corpus's sentences (read once)."""
    from ..distributed import EncoderSpec, fit_moments

    if not isinstance(est, AffineTransform):
        raise IsotropyError(
            f"--engine dask fits the affine methods (from statistics merged across workers); the {est.kind} "
            "trains on the vectors themselves: run it without --engine"
        )
    if not corpus.files:
        raise IsotropyError("--engine dask needs the corpus as files (a glob of shards such as 'shards/*.txt'), not '-'")
    spec = EncoderSpec(
        model=str(encoder.folder) if encoder.folder is not None else encoder.model_name,
        pooling=encoder.pooling,
        max_length=encoder.max_length,
        batch_size=encoder.batch_size,
    )
    t0 = time.perf_counter()
    moments = fit_moments(
        corpus.inputs,
        spec,
        address=address,
        show_progress=show_progress,
        skip_blank=True,
        check=lambda width: est._check_params(width),
    )
    seconds = {"encode_s": time.perf_counter() - t0}
    check_size(est, moments.n, int(encoder.dim), corpus.where)
    t1 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = type(est).from_moments(moments, **est.get_params())
    seconds["fit_s"] = time.perf_counter() - t1
    sentences = _sample_sentences(corpus, ANALYSIS_ROWS)
    sample = encoder.encode(sentences, show_progress=False)
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    return Fitted(t, moments.n, moments.n, sample, moments, notes, seconds)


def _sample_sentences(corpus: Corpus, k: int) -> list[str]:
    """A seeded uniform sample of ``k`` sentences (algorithm R over the text: memory k sentences)."""
    rng = np.random.default_rng(1)
    kept: list[str] = []
    seen = 0
    for chunk in corpus.chunks(CHUNK_SENTENCES):
        for s in chunk:
            if seen < k:
                kept.append(s)
            else:
                j = int(rng.integers(0, seen + 1))
                if j < k:
                    kept[j] = s
            seen += 1
    return kept
