"""Corpora and cached teacher vectors for bench/static_factory.py (issue #32).

Corpora (none holds a sentence of an STS task): ``wiki`` (``corpus/wiki-sentences.txt``), ``cran``
(Cranfield's 1400 title + abstract texts split into sentences at ``. ``/``? ``/``! ``, 3 words or more),
``wiki+cran`` (both); ``others`` (:func:`others_corpora`): for each of the 7 STS tasks, the distinct sentences of
the six other tasks minus any the task holds (the ``others`` protocol of RESULTS `sts-static`). Spans: the two halves (by words) of every sentence of 8 words or more, each with the
teacher's own vector. The teacher's vectors (the default model, L2-normalised, as ``isotropy distill``
fits on them) are encoded once per text list and kept as ``.npy`` under ``$ISOTROPY_CACHE/bench-factory``
(outside the repository), keyed by a digest of the texts.

    nice -n 5 .venv/bin/python bench/_factory_data.py     # encode (or find) every corpus's teacher vectors
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import DATA  # noqa: E402


def cache_dir() -> Path:
    from isotropy.encoders.cache import default_cache_dir

    d = Path(default_cache_dir()) / "bench-factory"
    d.mkdir(parents=True, exist_ok=True)
    return d


def wiki() -> list[str]:
    lines = (DATA / "corpus" / "wiki-sentences.txt").read_text(encoding="utf-8").splitlines()
    return [s.strip() for s in lines if s.strip()]


def cran_docs() -> list[str]:
    from isotropy.retrieval.data import load_cranfield

    return list(load_cranfield(DATA / "retrieval" / "cranfield").docs)


def cran() -> list[str]:
    out = []
    for d in cran_docs():
        out += [s.strip() for s in re.split(r"(?<=[.?!])\s+", d) if len(s.split()) >= 3]
    return out


def corpora() -> dict[str, list[str]]:
    w, c = wiki(), cran()
    return {"wiki": w, "cran": c, "wiki+cran": w + c}


def spans(sentences: list[str]) -> list[str]:
    """The two halves of every long sentence (``isotropy.distill.corpus_fit.halves``): one kind of the
    library's default spans (``isotropy.distill.corpus_fit.span_texts`` adds the dropped-word and cut copies)."""
    from isotropy.distill.corpus_fit import halves

    return halves(sentences)


def _key(texts: list[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:20]


def teacher(texts: list[str]) -> np.ndarray:
    """The default model's L2-normalised vectors of ``texts`` (float32), from the cache or encoded now."""
    path = cache_dir() / f"teacher-{_key(texts)}.npy"
    if path.is_file():
        return np.load(path)
    from isotropy.encoders import Encoder

    Y = np.asarray(Encoder().encode(texts, show_progress=True), dtype=np.float32)
    Y /= np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12)
    tmp = path.with_suffix(".part.npy")
    np.save(tmp, Y)
    tmp.replace(path)
    return Y


def others_corpora(tasks, limit: int | None = None) -> list[list[str]]:
    """For each task, its fitting corpus under ``others`` (RESULTS `sts-static`): the sentences of the six other
    tasks (:func:`isotropy.evaluation.fitting.plan_others`: a sentence the task also holds, whitespace and case
    ignored, is removed), each once, in task order (a duplicate line would sit in both the fitting and the held-out
    lines of the token fit); ``limit``: the first so many (a dry run)."""
    from static import others_sentences

    from isotropy.evaluation.fitting import plan_others

    return [list(dict.fromkeys(others_sentences(p, tasks)))[:limit] for p in plan_others(tasks)]


def sts_teacher(tasks) -> tuple[list[str], np.ndarray]:
    """Every distinct sentence of the 7 tasks and the teacher's L2-normalised vectors of them: the vectors bench/static.py
    encodes through the evaluation's ``VectorCache`` (the default model, mean pooling, max_length 64: what
    :func:`teacher` encodes), reused from that cache."""
    from static import teacher_vectors

    row: dict[str, np.ndarray] = {}
    for t, Y in zip(tasks, teacher_vectors(tasks)):
        for s, y in zip(t.sentences(), Y):
            row.setdefault(s, y)
    return list(row), np.asarray(np.vstack(list(row.values())), dtype=np.float32)


if __name__ == "__main__":
    c = corpora()
    for name, texts in [
        ("wiki", c["wiki"]),
        ("cran", c["cran"]),
        ("wiki spans", spans(c["wiki"])),
        ("cran spans", spans(c["cran"])),
    ]:
        t0 = time.perf_counter()
        teacher(texts)
        print(f"{name}: {len(texts)} texts, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
