"""``isotropy distill --corpus``: the one pass over the corpus, the teacher map and the token fit (the distill package, above calibration).

One streamed pass: each chunk of sentences is tokenised by the static model (the ids its ``encode``
averages, unknown tokens dropped, ``max_length`` kept; through the pass's word cache,
:class:`~isotropy.encoders.static.sources.Model2VecIds`), pooled from the distilled table, and encoded once
by the teacher (L2-normalised, as the sentence-transformers pipeline returns it). The chunk updates

* a :class:`~isotropy.transforms.teacher_map.TeacherMap` (the sentence-level least-squares map, ``--fit map``),
* with ``--fit tokens``, token sums: every tenth sentence (line number mod 10 == 9) into held-out ones
  (:class:`~isotropy.transforms.held_out.HeldOutSums`: their ids, no Gram), the others into a fitting
  :class:`~isotropy.transforms.token_regression.TokenRegression`; the first ``HELD_SAMPLE`` held-out sentences'
  teacher vectors are also kept, to score the agreement of the student's pairwise cosines with the teacher's.
* with ``spans`` (``--spans KINDS``; ``DEFAULT_SPANS`` in ``isotropy distill``), pieces and altered copies of every
  fitting sentence of ``SPAN_MIN_WORDS`` words or more (:func:`span_texts`), each with the teacher's own vector
  (encoded in the same call as its chunk), are added to the fitting accumulator as sentences of their own: more
  equations from the same lines, at the teacher's cost of encoding more text. The kinds (``SPAN_KINDS``):
  ``halves`` (the two halves by words: about the line's own length again), ``drop`` (a copy with each word left out
  with probability 1/4: about 3/4 of it) and ``cut`` (a copy with one run of a quarter of its words cut out at a
  random place: 3/4 of it); the random draws are seeded by the line's own text, so a corpus gives the same spans on
  every run, machine and Dask shard. Held-out sentences give no span (the choice of strength is scored on whole
  lines), and the teacher map sees whole lines only. The default, all three, was chosen on RESULTS
  `static-factory`'s two dev protocols (round 4: halves alone 75.39 / 84.06, + drop 75.49 / 84.17, + cut
  75.54 / 84.21); the teacher then encodes about 3.5 times the corpus's text. What else was tried: RESULTS.

Target length scaling (token fit only): every target is the teacher's unit vector times ``n ** -TARGET_POWER``,
``n`` the static model's tokens of that text. The student's vector is a mean of ``n`` rows, whose norm shrinks
with ``n`` unless the rows share a common direction; asking every text for a norm of 1 pushes that common
direction into the rows (anisotropy) and weighs long texts most. Cosines ignore the norm, so the scaling changes
only what the fit spends its rows on. ``1/sqrt(n)``, the scaling of independent rows, raised both dev protocols of
RESULTS `static-factory` (round 3: fitted on wiki, STS-B train 74.87 -> 75.23; fitted on STS-B's train sentences,
STS-B dev 83.83 -> 84.07); a power of 1 lowered both. The teacher map that makes the prior is fitted on the same
scaled targets.

Output width: ``--dims`` is the width of the model written. When it is below the teacher's, the teacher's
vectors are projected on their ``dims`` principal axes (centred scatter of the corpus's teacher vectors, read
off the map's moments; the vectors are not centred by the projection): the map then goes to that space, and the
token sums are projected with it (they are linear in the targets, so the teacher is encoded once). Before the axes
are taken the targets are soft-whitened (``--target-whitening``, default 0.5): :mod:`.targets`.

``--fit tokens`` then solves the token regression with the mapped table as the prior, for each strength in
``LAMBDAS`` on the fitting sentences (in increasing order, from one sparse system built once, each warm-started at
the best so far, ``GRID_ITERATIONS`` iterations), and keeps the one whose held-out pairwise cosines agree best (Pearson) with
the teacher's centred cosines on the first ``HELD_SAMPLE`` held-out sentences (``criterion="cosine"``, the
default) or the one with the least squared error on all held-out sentences, read off their sums
(``criterion="mse"``; also when fewer than 3 sentences were held out); both are recorded, and no label of any
reported task is read. The grid stops at the first strength that scores worse than the best before it: each of
the 53 full grids recorded in RESULTS `static-factory` (rounds 1-3, every corpus and variant) rose to one peak and
fell after it, so stopping there keeps the choice the whole grid made. From ``LOWER_FROM`` lines, when the first
strength wins, the grid goes on down through ``LOWER_LAMBDAS``, again to the first that scores worse: more text
should weigh the prior less, and the floor 0.3 won at 50k and 100k wiki lines (RESULTS `factory-curve`). Below that
size the floor stays: 0.1 lost to it on 100k lines' held-out agreement, and in the ``others`` protocol (~10k lines a
fit) a grid from 0.03 chose lower strengths that scored less (RESULTS `static-factory`, what we tried). The default
criterion was read off the STS-B train split (RESULTS `static-factory`: the cosine agreement's choice
scored higher there in every corpus and size tried, or tied). The table is then solved again
on all sentences at that strength, warm-started at the held-out choice. An explicit ``lam`` skips the choice.
"""

from __future__ import annotations

import sys
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._progress import ProgressBar
from ..calibration.corpus import Corpus
from ..encoders.static.sources import Model2VecIds
from ..errors import IsotropyError
from ..transforms.held_out import HeldOutSums
from ..transforms.teacher_map import TeacherMap
from ..transforms.token_regression import TokenRegression, pooling_matrix
from .teacher_vectors import TeacherVectors

__all__ = ["CorpusFit", "fit_corpus", "static_ids", "halves", "word_drop", "run_cut", "span_kinds"]
__all__ += ["span_texts", "SPAN_KINDS", "DEFAULT_SPANS", "LAMBDAS", "LOWER_LAMBDAS", "LOWER_FROM", "HELD_OUT", "FITS"]

CHUNK = 2048  # sentences per streamed step
PART = 8 * CHUNK  # sentences per task with engine="dask"
HELD_OUT = 10  # every HELD_OUT-th sentence is held out to choose the regularisation
LAMBDAS = (0.3, 1.0, 3.0, 10.0, 30.0)  # token-fit strengths tried, relative to an average token's data weight
LOWER_LAMBDAS, LOWER_FROM = (0.1, 0.03, 0.01), 150_000  # tried downward when LAMBDAS[0] wins on this many lines
GRID_ITERATIONS = 10  # per strength tried (the held-out error settles within ~10 on the wiki corpus)
FITS = ("map", "tokens")
DEFAULT_LAMBDA = 3.0  # when the corpus is too small to hold sentences out
HELD_SAMPLE = 2000  # held-out sentences kept whole for the cosine agreement (2M pairs: a second per strength)
SPAN_MIN_WORDS = 8  # a sentence this long (in words) gives its two halves as spans
TARGET_POWER = 0.5  # token fit: each target is the teacher's unit vector times n ** -TARGET_POWER (module docs)
CRITERIA = ("mse", "cosine")


@dataclass
class CorpusFit:
    """What the pass gathered: the map, the token sums (fit and held out) and how long each part took."""

    teacher_map: TeacherMap
    fit: TokenRegression | None = None
    held: TokenRegression | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    sentences: int = 0
    empty: int = 0
    spans: int = 0
    chunks: int = 0  # chunks the teacher pass read
    cached: int = 0  # of which the teacher cache held every vector
    cached_lines: int = 0  # of which it held the lines' vectors alone (the spans were encoded)
    first: str | None = None
    varied: bool = False
    sample: dict[str, list] = field(default_factory=lambda: {"flat": [], "lengths": [], "Y": []})
    warnings: list[str] = field(default_factory=list)  # a Dask part's warning lines, printed by the client

    def held_sample(self) -> tuple[Any, np.ndarray] | None:
        """``(A, Y)``: the pooling matrix and teacher vectors of the held-out sentences kept whole (None: none)."""
        if not self.sample["lengths"] or self.fit is None:
            return None
        lengths = np.concatenate(self.sample["lengths"])[:HELD_SAMPLE]
        flat = np.concatenate(self.sample["flat"])[: int(lengths.sum())]
        keep = lengths > 0
        A = pooling_matrix(flat, lengths, self.fit.vocab_size)[keep]
        return A, np.vstack(self.sample["Y"])[:HELD_SAMPLE][keep]


def pieces(sentences: list[str], parts: int, min_words: int) -> list[str]:
    """Every sentence of ``min_words`` words or more cut into ``parts`` runs of words (as even as can be), in order."""
    out = []
    for s in sentences:
        w = s.split()
        if len(w) >= min_words:
            cuts = [len(w) * i // parts for i in range(parts + 1)]
            out += [" ".join(w[a:b]) for a, b in zip(cuts, cuts[1:])]
    return out


def halves(sentences: list[str], min_words: int = SPAN_MIN_WORDS) -> list[str]:
    """The two halves (by words) of every sentence of ``min_words`` words or more, in order."""
    return pieces(sentences, 2, min_words)


def _draw(sentence: str, salt: int) -> np.random.Generator:
    """A random generator seeded by the sentence's own text: the same spans on every run, machine and shard."""
    return np.random.default_rng(zlib.crc32(sentence.encode("utf-8")) + salt)


def word_drop(sentences: list[str], rate: float = 0.25, min_words: int = SPAN_MIN_WORDS) -> list[str]:
    """A copy of every sentence of ``min_words`` words or more with each word left out at random with probability
    ``rate`` (a sentence that would keep all or none of its words gives none), in order."""
    out = []
    for s in sentences:
        w = s.split()
        if len(w) >= min_words:
            keep = _draw(s, 0).random(len(w)) >= rate
            if 0 < keep.sum() < len(w):
                out.append(" ".join(x for x, k in zip(w, keep) if k))
    return out


def run_cut(sentences: list[str], share: float = 0.25, min_words: int = SPAN_MIN_WORDS, salt: int = 1) -> list[str]:
    """A copy of every sentence of ``min_words`` words or more with one run of ``share`` of its words (at least one,
    at a random place) cut out, in order (``salt``: another draw of the places)."""
    out = []
    for s in sentences:
        w = s.split()
        if len(w) >= min_words:
            n = max(1, int(len(w) * share))
            a = int(_draw(s, salt).integers(0, len(w) - n + 1))
            out.append(" ".join(w[:a] + w[a + n :]))
    return out


SPAN_KINDS = {"halves": halves, "drop": word_drop, "cut": run_cut}
DEFAULT_SPANS = ("halves", "drop", "cut")  # module docs: each kind raised the mean of the two dev scores


def span_kinds(spans: Any) -> tuple[str, ...]:
    """The span kinds asked for: True (the default kinds), False/None/"none" (none), or names (a comma-separated
    string or a sequence) among ``SPAN_KINDS``, in the order given, each once."""
    if spans is True:
        return DEFAULT_SPANS
    if spans in (False, None) or (isinstance(spans, str) and spans.strip().lower() in ("", "none")):
        return ()
    if not isinstance(spans, str) and not (
        isinstance(spans, (list, tuple)) and all(isinstance(n, str) for n in spans)
    ):  # spans=123: one line, not a TypeError (S7-025)
        raise IsotropyError(
            f"spans must be span kind names ({', '.join(SPAN_KINDS)}: a comma-separated string or a list), True, "
            f"False or None, got {spans!r}"
        )
    names = [n.strip().lower() for n in (spans.split(",") if isinstance(spans, str) else spans)]
    bad = [n for n in names if n not in SPAN_KINDS]
    if bad:
        raise IsotropyError(
            f"unknown span kind {bad[0]!r}: use one or more of {', '.join(SPAN_KINDS)} (comma-separated), or none"
        )
    return tuple(dict.fromkeys(names))


def span_texts(sentences: list[str], kinds: tuple[str, ...] = DEFAULT_SPANS) -> list[str]:
    """The spans the token fit adds (module docs): each kind's spans of the sentences, kind after kind."""
    return [t for k in kinds for t in SPAN_KINDS[k](sentences)]


def _rows(flat: np.ndarray, lengths: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The flat ids and lengths of the sentences ``rows`` (a boolean mask) of a chunk."""
    return flat[np.repeat(rows, lengths)], lengths[rows]


def fit_corpus(
    static: Any,
    teacher: Any,
    corpus: Any,
    *,
    alpha: float = 0.0,
    tokens: bool = True,
    spans: Any = False,
    show_progress: bool | None = None,
    engine: str | None = None,
    address: Any = None,
    n_workers: int | None = None,
    cache: Any = None,
) -> CorpusFit:
    """The streamed pass (module docs) over ``corpus`` (a file, a glob of shards, or a list of sentences).

    ``cache``: a :class:`~isotropy.encoders.cache.VectorCache` that keeps the teacher's vectors chunk by chunk
    (:mod:`.teacher_vectors`: a rerun reads them, a killed run resumes), or None.

    ``engine="dask"``: the corpus is cut into parts of ``PART`` sentences, each part's sums are made on a Dask
    worker (``address``/``n_workers`` as :func:`isotropy.distributed.fit_moments` takes them; ``teacher`` an
    :class:`~isotropy.distributed.spec.EncoderSpec`, built once per worker, or a picklable object with ``encode``)
    and the parts are merged by a fixed tree in corpus order: the same sums as one process, to rounding."""
    if engine is not None and str(engine).lower() != "dask":
        raise IsotropyError(f"unknown engine {engine!r}; the corpus pass runs in one process or on dask")
    source = corpus if isinstance(corpus, Corpus) else Corpus(corpus)  # a Corpus: what a check read ahead is kept
    spans = span_kinds(spans) if tokens else ()
    if engine is None:
        out, ids = CorpusFit(TeacherMap(alpha=alpha)), Model2VecIds(static)
        vectors = TeacherVectors(teacher, cache, source.where)
        label = "encoding the corpus with the teacher"
        with ProgressBar(source.count() or 0, show_progress, label, unit="sentences") as bar:
            for chunk in source.chunks(CHUNK):
                _add_chunk(out, static, ids, vectors, list(chunk), tokens, spans, bar)
                if out.cached:
                    bar.advance(0, f"{label} ({out.cached} of {out.chunks} chunks from the cache)")
    else:
        out = _fit_parts(source, static, teacher, alpha, tokens, spans, show_progress, address, n_workers, cache)
    if out.sentences < 2:
        raise IsotropyError(f"the corpus {source.where} has {out.sentences} sentence(s): a fit needs at least 2")
    if out.empty == out.sentences:
        raise IsotropyError(f"no sentence of the corpus {source.where} holds a token of the model's vocabulary")
    if not out.varied:
        raise IsotropyError(f"the corpus {source.where} repeats one sentence: it gives a single equation, nothing to fit")
    return out


def _add_chunk(
    out: CorpusFit,
    static: Any,
    ids: Model2VecIds,
    teacher: TeacherVectors,
    chunk: list[str],
    tokens: bool,
    spans: tuple,
    bar=None,
) -> None:
    """One chunk of sentences (the next ``len(chunk)`` of the corpus) into ``out``'s sums (``ids``: the pass's
    tokenisation by the static model, :class:`~isotropy.encoders.static.sources.Model2VecIds`; ``teacher``: the
    teacher's vectors, through its cache; ``bar``: a progress bar counting sentences)."""
    out.first = chunk[0] if out.first is None else out.first
    out.varied = out.varied or any(s != out.first for s in chunk)
    held = (np.arange(out.sentences, out.sentences + len(chunk)) % HELD_OUT) == HELD_OUT - 1
    t_spans = time.perf_counter()
    extra = span_texts([s for s, h in zip(chunk, held) if not h], spans) if tokens and spans else []
    t0 = time.perf_counter()
    Y, how = teacher(chunk, extra, out.sentences, bar)
    Y = np.asarray(Y, dtype=np.float64)
    out.chunks, out.cached, out.cached_lines = out.chunks + 1, out.cached + (how == "cached"), out.cached_lines + (how == "lines")
    Y /= np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12)
    t1 = time.perf_counter()
    flat, lengths = ids(chunk)
    ids_extra = ids(extra)
    if tokens:  # the token fit's targets are scaled by length (module docs); an empty text gives no equation
        Y *= np.maximum(np.concatenate([lengths, ids_extra[1]]), 1)[:, None] ** -TARGET_POWER
    Y, Y_extra = Y[: len(chunk)], Y[len(chunk) :]
    out.teacher_map.partial_fit(_pooled(static.embedding, flat, lengths), Y)
    if tokens:
        _add_tokens(out, len(static.embedding), flat, lengths, Y, held, ids_extra, Y_extra)
    out.empty += int((lengths == 0).sum())
    out.sentences += len(chunk)
    out.seconds["teacher"] = out.seconds.get("teacher", 0.0) + t1 - t0
    out.seconds["statistics"] = out.seconds.get("statistics", 0.0) + time.perf_counter() - t1 + t0 - t_spans  # spans made


def _pooled(table: Any, flat: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The chunk's mean-pooled rows of ``table`` in float64, converting only the rows the chunk holds."""
    rows, local = np.unique(flat, return_inverse=True)
    if not rows.size:  # no sentence of the chunk holds a token: every mean is the zero vector
        return np.zeros((len(lengths), np.shape(table)[1]), dtype=np.float64)
    return pooling_matrix(local, lengths, len(rows)) @ np.asarray(table[rows], dtype=np.float64)


def static_ids(static: Any, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(flat ids, ids per sentence)`` of ``sentences`` as the pass computes them (model2vec's ``tokenize``, then its
    ``max_length`` cut), through a word cache made for this one call."""
    return Model2VecIds(static)(sentences)


def part_label(where: str, offset: int, n: int) -> str:
    """How a Dask part of the corpus is named (messages, the fault hook): ``WHERE, lines A..B`` (1-based)."""
    return f"{where}, lines {offset + 1}..{offset + n}"


def _part(static, teacher, sentences: list[str], offset: int, alpha, tokens, spans: tuple, cache=None, where="", chunk=CHUNK):
    """A worker's task: the sums of ``sentences``, the corpus's lines ``offset``.. (held-out lines by their number);
    the teacher's vectors through ``cache`` with the keys one process uses (the parts' chunks are its chunks:
    ``chunk``, the client's ``CHUNK``, sent with the task so that a worker's own constant cannot differ)."""
    from ..distributed.spec import EncoderSpec
    from ..distributed.tasks import maybe_fault

    if isinstance(teacher, EncoderSpec):
        from ..distributed.workers import worker_encoder

        teacher = worker_encoder(teacher)
    out, ids, where = CorpusFit(TeacherMap(alpha=alpha), sentences=offset), Model2VecIds(static), where or "the corpus"
    vectors = TeacherVectors(teacher, cache, where, warn=out.warnings.append)  # the worker's stderr is not the user's
    for i in range(0, len(sentences), chunk):
        _add_chunk(out, static, ids, vectors, sentences[i : i + chunk], tokens, spans)
        if i == 0:  # the drills' worker loss (distributed.tasks), mid-part: its first chunk sealed, the rest not
            maybe_fault(part_label(where, offset, len(sentences)))
    out.sentences -= offset
    return out


def _merge_parts(a: CorpusFit, b: CorpusFit) -> CorpusFit:
    """``a`` then ``b`` (consecutive parts of the corpus) as one pass over both."""
    a.teacher_map.merge(b.teacher_map)
    if a.fit is None or b.fit is None:
        a.fit, a.held = (a.fit, a.held) if b.fit is None else (b.fit, b.held)
    else:
        a.fit, a.held = a.fit.merge(b.fit), a.held.merge(b.held)
    for key, value in b.seconds.items():
        a.seconds[key] = a.seconds.get(key, 0.0) + value
    a.varied = a.varied or b.varied or (b.first is not None and b.first != a.first)
    a.first = b.first if a.first is None else a.first
    a.sentences, a.empty, a.spans = a.sentences + b.sentences, a.empty + b.empty, a.spans + b.spans
    a.chunks, a.cached, a.cached_lines = a.chunks + b.chunks, a.cached + b.cached, a.cached_lines + b.cached_lines
    kept = np.cumsum([len(n) for n in a.sample["lengths"] + b.sample["lengths"]])
    cut = int(np.searchsorted(kept, HELD_SAMPLE)) + 1  # the first HELD_SAMPLE held-out lines, as one process keeps
    a.sample = {key: (a.sample[key] + b.sample[key])[:cut] for key in a.sample}
    a.warnings += b.warnings
    return a


def _fit_parts(source, static, teacher, alpha, tokens, spans, show_progress, address, n_workers, cache=None) -> CorpusFit:
    """The pass on a Dask cluster (``fit_corpus(engine="dask")``); a lost worker's part is run again elsewhere."""
    from ..distributed.cluster import client_for, gather, import_dask, tree_reduce
    from ..distributed.spec import EncoderSpec

    run, distributed = uuid.uuid4().hex[:12], import_dask()
    with client_for(address, n_workers) as client:
        futures, labels, offset = [], [], 0
        # the static model: one task on every worker, read by each part (a copy in each took 4.2 GB at 1M lines)
        model = client.submit(lambda x: x, static, key=f"isotropy-dstatic-{run}")
        client.replicate([model])
        for i, part in enumerate(source.chunks(PART)):
            args = (model, teacher, list(part), offset, alpha, tokens, spans, cache, source.where, CHUNK)
            futures.append(client.submit(_part, *args, key=f"isotropy-distill-{run}-{i}"))
            labels.append(part_label(source.where, offset, len(part)))
            offset += len(part)
        if not futures:
            return CorpusFit(TeacherMap(alpha=alpha))
        root = tree_reduce(futures, lambda a, b, d, i: client.submit(_merge_parts, a, b, key=f"isotropy-dmerge-{run}-{d}-{i}"))
        cached = cache is not None and cache.enabled and (isinstance(teacher, EncoderSpec) or hasattr(teacher, "fingerprint"))
        kept = "; the teacher cache keeps the chunks already encoded: a rerun encodes only the rest" if cached else ""
        gather(client, futures, "corpus parts", labels, show_progress, fetch=False, what="the corpus part", after=kept)
        try:
            out = root.result()
        except distributed.KilledWorker:  # every part is done: a merge of their sums ran out of memory
            raise IsotropyError(
                f"merging the corpus parts' sums killed a Dask worker repeatedly (out of memory?){kept}"
            ) from None
    for line in dict.fromkeys(out.warnings):  # in corpus order, each once
        print(line, file=sys.stderr)
    return out


def _add_tokens(out: CorpusFit, V: int, flat, lengths, Y, held, ids_extra, Y_extra) -> None:
    """One chunk's token sums: fitting lines (and their spans) into ``out.fit``, held-out lines into ``out.held``."""
    if out.fit is None:
        out.fit, out.held = TokenRegression(V, Y.shape[1]), HeldOutSums(V, Y.shape[1])  # held: ids, no Gram
    if held.any():
        out.held.partial_fit(*_rows(flat, lengths, held), Y[held])
    f, n = _rows(flat, lengths, ~held)  # the fitting lines and their spans in one call
    if len(n) or len(Y_extra):
        out.fit.partial_fit(np.concatenate([f, ids_extra[0]]), np.concatenate([n, ids_extra[1]]), np.vstack([Y[~held], Y_extra]))
        out.spans += len(Y_extra)
    kept = sum(map(len, out.sample["lengths"]))
    if held.any() and kept < HELD_SAMPLE:
        rows = held & (np.cumsum(held) <= HELD_SAMPLE - kept)
        f, n = _rows(flat, lengths, rows)
        out.sample["flat"].append(f)
        out.sample["lengths"].append(n)
        out.sample["Y"].append(Y[rows])


def cosine_agreement(A: Any, Y: np.ndarray, mean: np.ndarray, shift: np.ndarray):
    """A scorer of tables: the Pearson correlation of the pairwise cosines of ``A E - shift`` (the student's
    sentences, centred as written) with those of ``Y - mean`` (the teacher's, centred), over every pair."""

    def unit(X):
        return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)

    iu = np.triu_indices(A.shape[0], 1)
    T = unit(Y - mean)
    want = (T @ T.T)[iu]

    def score(E: np.ndarray) -> float:
        S = unit(A @ E - shift)
        return float(np.corrcoef((S @ S.T)[iu], want)[0, 1])

    return score


def solve_tokens(
    fit: TokenRegression,
    held: TokenRegression,
    prior: np.ndarray,
    lam: float | None = None,
    show_progress: bool | None = None,
    *,
    agreement: Any = None,
    criterion: str = "cosine",
    consume: bool = False,
) -> tuple[np.ndarray, dict[str, Any]]:
    """The token fit (module docs): ``lam`` chosen on the held-out sentences when None (``criterion``: ``"cosine"``,
    ``agreement(E)``, higher is better, or ``"mse"``, their squared error from the sums), then solved on all.
    ``consume``: ``fit`` becomes the sums of all sentences, ``held`` loses its Gram (two Grams fewer in memory)."""
    if criterion not in CRITERIA:
        raise IsotropyError(f"the strength is chosen by one of {', '.join(CRITERIA)}, not {criterion!r}")
    criterion = "mse" if agreement is None else criterion  # None: too few held-out sentences to compare cosines
    t0 = time.perf_counter()
    tried, agreed, start = {}, {}, None  # held-out error and agreement by strength; the warm start
    chosen = "given" if lam is not None else f"held-out ({criterion})"
    if lam is None and held.n_ == 0:
        lam, chosen = DEFAULT_LAMBDA, "default (too few sentences to hold any out)"
    with fit.spilled():  # the exact float64 sums wait on disk beside the float32 systems (held's ids stay)
        if lam is None:
            lam, start = _choose(fit, held, prior, agreement, criterion, show_progress, tried, agreed)
        prior_error = held.error(prior) / max(held.n_, 1)
        both = fit.merge(held) if consume else TokenRegression(fit.vocab_size, fit.dim).merge(fit).merge(held)
        if consume:  # in place, into the spilled blocks a block at a time: no third Gram; held's pairs not read again
            held.drop_pairs()
        with ProgressBar(0, show_progress, "fitting the token rows", unit="iterations") as bar, both.spilled():
            E, info = both.solve(prior, lam, x0=start, rtol=1e-2, maxiter=100, progress=lambda i: bar.advance(1))
    info.update(
        {
            "lambda": float(lam),
            "chosen": chosen,
            "held_out_error": tried,
            "held_out_agreement": agreed,
            "prior_held_out_error": prior_error,
            "sentences": both.n_,
            "seconds": time.perf_counter() - t0,
        }
    )
    return E, info


def _choose(fit, held, prior, agreement, criterion, show_progress, tried: dict, agreed: dict) -> tuple[float, Any]:
    """The strength grid on the held-out sentences (``solve_tokens``): ``(strength, its table)``; ``tried`` and
    ``agreed`` receive each strength's held-out error and agreement."""
    best, start = None, None
    system = fit.solver(prior)
    steps = len(LAMBDAS) + len(LOWER_LAMBDAS)
    with ProgressBar(steps, show_progress, "choosing the token fit's strength on held-out sentences") as bar:
        for grid in (LAMBDAS, LOWER_LAMBDAS):
            if grid is LOWER_LAMBDAS and (best[1] != LAMBDAS[0] or held.n_ * HELD_OUT < LOWER_FROM):
                break  # peaked above its first strength, or too few lines to go lower (module docs)
            for value in grid:
                E, _ = system.solve(value, x0=start, rtol=1e-2, maxiter=GRID_ITERATIONS)
                tried[f"{value:g}"] = err = held.error(E) / max(held.n_, 1)
                if agreement is not None:
                    agreed[f"{value:g}"] = agreement(E)
                loss = err if criterion == "mse" else -agreed[f"{value:g}"]
                bar.advance(1)
                if best is not None and loss >= best[0]:
                    break  # past the best strength (module docs: the grid stops at the first that scores worse)
                best, start = (loss, value, E), E
    return best[1], best[2]  # the system and the grid's other tables go with this frame
