"""What an index build is asked for: :class:`IndexSpec`, built and checked once where the request enters.

``isotropy index build`` (:mod:`isotropy.cli.index_commands`) and the Python API
(:func:`isotropy.search.build.build_index`, :func:`~isotropy.search.build_dask.build_index_dask`,
:func:`~isotropy.search.build.build_auto_index`, old keyword calls included: :meth:`IndexSpec.from_keywords`)
build the same frozen value; the builders take it whole and never check its options again.

* the faiss kind and its parameters (:func:`check_params`: the one check of ``kind``, the table of
  :data:`INDEX_KINDS`; :class:`~isotropy.search.Index` constructed by hand calls it too);
* the calibration asked for, one field group (:class:`IndexCalibration`: ``--transform``, ``--whiten``/``--power``,
  ``--no-whiten``, ``--method auto`` and its options);
* the encoder's options (model, pooling, max length, batch size, backend, ``--pooling-stats``), the engine
  (one process, or ``dask``: the compressed kinds from vector shards), ``force`` and ``show_progress``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .._checks import ENGINES
from ..errors import IsotropyError
from ..transforms.methods import Method, parse_method, refuse_auto_only
from .pq import PQ_KINDS

__all__ = ["INDEX_KINDS", "ENGINES", "IndexCalibration", "IndexSpec", "check_params"]

# Default of `isotropy index build`: soft whitening (power 0.5) to 128 dims, fitted on the corpus;
# from bench/search.py (docs/BENCHMARKS.md, section search): on the STS retrieval task with the
# default model it kept recall@10 within 1 point of raw 384-dim vectors (89.4 vs 90.2) with a third
# of the index memory, where full whitening lost more (89.1 at 128 dims); this model is trained for
# similarity, so full whitening has little anisotropy left to fix.
DEFAULT_WHITEN_K = 128
DEFAULT_WHITEN_POWER = 0.5

INDEX_KINDS = ("flat", "hnsw", "ivf", *PQ_KINDS)


def _is_int(value: Any, low: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= low


def check_params(
    kind: str,
    *,
    m: int,
    ef_construction: int,
    ef_search: int,
    nlist: int | None,
    nprobe: int,
    bytes_per_vector: int | None = None,
    keep_vectors: bool = False,
    rerank: int = 0,
) -> dict[str, Any]:
    """The parameters of an index of ``kind``, checked (one line naming a bad one), as plain ints."""
    if kind not in INDEX_KINDS:
        raise IsotropyError(f"unknown index kind {kind!r}; valid kinds: {', '.join(INDEX_KINDS)}")
    for name, value, low in (
        ("m", m, 2),
        ("ef_construction", ef_construction, 1),
        ("ef_search", ef_search, 1),
        ("nprobe", nprobe, 1),
    ):
        if not _is_int(value, low):
            raise IsotropyError(f"{name} must be an integer >= {low}, got {value!r}")
    if nlist is not None and not _is_int(nlist, 1):
        raise IsotropyError(f"nlist must be a positive integer or None, got {nlist!r}")
    params: dict[str, Any] = {
        "m": int(m),
        "ef_construction": int(ef_construction),
        "ef_search": int(ef_search),
        "nlist": None if nlist is None else int(nlist),
        "nprobe": int(nprobe),
    }
    if kind in PQ_KINDS:
        if bytes_per_vector is not None and not _is_int(bytes_per_vector, 1):  # None: pq.default_bytes at training
            raise IsotropyError(f"bytes_per_vector must be an integer >= 1, got {bytes_per_vector!r}")
        if not _is_int(rerank, 0):
            raise IsotropyError(f"rerank must be an integer >= 0, got {rerank!r}")
        if rerank and not keep_vectors:
            raise IsotropyError("rerank needs the exact vectors: build the index with keep_vectors (--keep-vectors)")
        bytes_per_vector = None if bytes_per_vector is None else int(bytes_per_vector)
        params.update(bytes_per_vector=bytes_per_vector, keep_vectors=bool(keep_vectors), rerank=int(rerank))
    elif keep_vectors or rerank:
        raise IsotropyError(f"keep_vectors and rerank apply to the compressed kinds ({', '.join(PQ_KINDS)}), not {kind!r}")
    return params


@dataclass(frozen=True)
class IndexCalibration:
    """The calibration an index build is asked for (one of): a fitted ``transform`` folder; a whitening fitted
    on the corpus (``whiten`` dimensions, ``power``; the default when nothing is given); raw vectors
    (``no_whiten``); or ``method="auto"``: chosen on the corpus among ``candidates`` by the rule for ``task``
    (``evidence``: the label-free criteria too; ``seed``: the sample's).

    :meth:`as_method` gives the choice as the one method grammar's value
    (:class:`~isotropy.transforms.methods.Method`): ``--whiten/--power`` a whitening, ``--no-whiten`` raw,
    ``--method auto`` auto; the builders read that, not these fields."""

    transform: str | os.PathLike | None = None
    whiten: int | None = None
    power: float | None = None
    no_whiten: bool = False
    method: str | None = None
    candidates: Any = None
    task: str | None = None
    evidence: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method is None:
            for name, v in (("--candidates", self.candidates), ("--for", self.task), ("--evidence", self.evidence)):
                if v not in (None, False):
                    given = "transform" if self.transform is not None else "raw" if self.no_whiten else "whitening"
                    refuse_auto_only(name, given)
            chosen = [
                name
                for name, on in (
                    ("--transform", self.transform is not None),
                    ("--whiten/--power", self.whiten is not None or self.power is not None),
                    ("--no-whiten", self.no_whiten),
                )
                if on
            ]
            if len(chosen) > 1:
                raise IsotropyError(f"choose one of {', '.join(chosen)}")
            if self.whiten is not None and (not _is_int(self.whiten, 1)):
                raise IsotropyError(f"--whiten must be a positive number of dimensions, got {self.whiten}")
            self.as_method()  # --power against the method table: one line naming it
            return
        if self.method != "auto":
            raise IsotropyError(f"--method {self.method!r}: index build offers 'auto' only (or no --method)")
        given = [
            f"--{k.replace('_', '-')}"
            for k, v in (
                ("transform", self.transform),
                ("whiten", self.whiten),
                ("power", self.power),
                ("no_whiten", self.no_whiten),
            )
            if v not in (None, False)
        ]
        if given:
            raise IsotropyError(f"--method auto chooses the calibration itself: drop {', '.join(given)}")

    @property
    def auto(self) -> bool:
        return self.method == "auto"

    def as_method(self, dim: int | None = None) -> Method | None:
        """The calibration asked for as a :class:`~isotropy.transforms.methods.Method` (None: a fitted
        ``--transform`` folder is used as it is). The default whitening keeps :data:`DEFAULT_WHITEN_K` components,
        capped at ``dim`` (the encoder's dimension, when known); an explicit ``--whiten`` is kept as given (the
        build says when it is more than the encoder has)."""
        if self.transform is not None:
            return None
        if self.no_whiten:
            return parse_method("raw")
        if self.auto:
            return parse_method("auto")
        k = self.whiten
        if k is None:
            k = DEFAULT_WHITEN_K if dim is None else min(DEFAULT_WHITEN_K, int(dim))
        power = DEFAULT_WHITEN_POWER if self.power is None else self.power
        return parse_method("whitening").with_options(n_components=int(k), power=power, shrinkage="auto")


_CALIBRATION = tuple(f.name for f in fields(IndexCalibration))


@dataclass(frozen=True)
class IndexSpec:
    """One index build's options, checked when made (one line naming a bad one); see the module docs.

    ``kind`` ``None``: ``flat`` in one process, ``ivfpq`` with ``engine="dask"``. ``m``, ``ef_construction``,
    ``ef_search``: hnsw; ``nlist``, ``nprobe``: the inverted-file kinds; ``bytes_per_vector``, ``keep_vectors``,
    ``rerank``: ``ivfpq``/``opq`` (:class:`~isotropy.search.Index`'s parameters)."""

    kind: str | None = None
    m: int = 32
    ef_construction: int = 200
    ef_search: int = 64
    nlist: int | None = None
    nprobe: int = 16
    bytes_per_vector: int | None = None
    keep_vectors: bool = False
    rerank: int = 0
    calibration: IndexCalibration = field(default_factory=IndexCalibration)
    model: str | os.PathLike | None = None
    pooling: str | None = None
    max_length: int | None = None
    batch_size: int = 64
    backend: str = "torch"
    pooling_stats: Any = None
    allow_other_encoder: bool = False
    engine: str | None = None
    force: bool = False
    show_progress: bool | None = None
    _params: tuple = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        if self.engine is not None and self.engine not in ENGINES:
            raise IsotropyError(f"engine {self.engine!r}: choose one of {', '.join(ENGINES)} (or none: one process)")
        if not isinstance(self.calibration, IndexCalibration):
            raise IsotropyError(f"calibration must be an IndexCalibration, not {type(self.calibration).__name__}")
        kind = self.kind if self.kind is not None else ("ivfpq" if self.engine else "flat")
        object.__setattr__(self, "kind", kind)
        if kind in INDEX_KINDS and kind not in PQ_KINDS and (self.bytes_per_vector is not None or self.keep_vectors):
            raise IsotropyError(f"--bytes-per-vector and --keep-vectors apply to --kind ivfpq or opq, not {kind}")
        params = check_params(
            kind,
            m=self.m,
            ef_construction=self.ef_construction,
            ef_search=self.ef_search,
            nlist=self.nlist,
            nprobe=self.nprobe,
            bytes_per_vector=self.bytes_per_vector,
            keep_vectors=self.keep_vectors,
            rerank=self.rerank,
        )
        if self.engine is not None:
            if kind not in PQ_KINDS:
                raise IsotropyError(f"--engine {self.engine} builds the compressed kinds ({', '.join(PQ_KINDS)}), not {kind!r}")
            if self.calibration.auto:
                raise IsotropyError(f"--method auto is not available with --engine {self.engine} yet; drop one of them")
        object.__setattr__(self, "_params", tuple(params.items()))

    @classmethod
    def from_keywords(cls, **keywords: Any) -> IndexSpec:
        """The spec of an old keyword call (``build_index(corpus, out, kind="hnsw", whiten=64, m=16)``): the
        calibration's keywords (:class:`IndexCalibration`'s fields) grouped, the others the spec's own fields
        (an unknown one is a TypeError, as before)."""
        calibration = IndexCalibration(**{k: keywords.pop(k) for k in _CALIBRATION if k in keywords})
        unknown = sorted(set(keywords) - {f.name for f in fields(cls) if f.init})
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) for an index build: {', '.join(unknown)}")
        return cls(calibration=calibration, **keywords)

    @classmethod
    def coerce(cls, spec: IndexSpec | None, keywords: dict[str, Any], **defaults: Any) -> IndexSpec:
        """``spec`` as given, else the spec of the keywords (``defaults`` under them); both at once is one line."""
        if spec is None:
            return cls.from_keywords(**{**defaults, **keywords})
        if not isinstance(spec, cls):
            raise IsotropyError(f"spec must be an IndexSpec, not {type(spec).__name__}")
        if keywords:
            raise IsotropyError(
                f"give an IndexSpec or keyword options, not both (got {', '.join(sorted(keywords))} besides the spec)"
            )
        return spec

    @property
    def params(self) -> dict[str, Any]:
        """The checked parameters of the faiss kind: a fresh dict (an index fills in its ``nlist``, ``bytes_per_vector``)."""
        return dict(self._params)

    @property
    def compressed(self) -> bool:
        return self.kind in PQ_KINDS

    def encoder_options(self) -> dict[str, Any]:
        """What :class:`~isotropy.encoders.Encoder` takes from the spec (the same on every engine)."""
        return {
            "pooling": self.pooling,
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "backend": self.backend,
            "pooling_stats": self.pooling_stats,
        }
