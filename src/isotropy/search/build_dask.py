"""A compressed index (``ivfpq``, ``opq``) built on a Dask cluster: :func:`build_index_dask`.

The corpus's vectors come as ``.npy`` shards (``isotropy encode --engine dask`` writes them; row
``i`` of the shards, in order, is line ``i`` of the corpus). The calibration is fitted on every row,
as one process fits it: each worker sums one shard's moments and the cluster merges them exactly
(:func:`isotropy.distributed.fit_moments`; a calibration that is not moments-based is fitted on
the sample). The client draws the seeded training sample (:func:`isotropy.search.pq.train_sample`),
trains the index on it and writes both to the work folder (``OUTPUT.parts`` unless given); the workers add the shards
(:mod:`isotropy.distributed.index_build`), faiss merges them into on-disk inverted lists, and the
index folder is saved with them (memory-mapped by ``search`` and ``serve``).

Before any of it the workers read every row of every shard (its sha256; a NaN or infinite value is
one line naming the shard and its row), and :mod:`.index_shards` proves what the build assumes: the
shards and their folders are inputs, the work folder is isotropy's (marked), the shards' encoder is
the index's and their order is the corpus's (their sidecars). A failed or interrupted build keeps its
work folder and a rerun resumes: the trained index is reused when nothing it depends on changed (the
shards' sha256 included) and verifies, finished shards are kept; a successful one removes it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..encoders import Encoder
from ..errors import IsotropyError
from ..storage.artifacts import check_output, file_sha256, folder_digest
from ..storage.atomic import atomic_path
from ..storage.integrity import provenance_of_record
from ..storage.vectors import load_npy
from ..transforms import load_transform
from .build import _index_transform, _read_corpus
from .index import Index, index_vectors
from .pq import default_nlist, new_pq_index, train_sample
from .shards import check_apart, check_encoder, check_work, close_work, open_work, order_shards, work_path
from .spec import IndexSpec

__all__ = ["build_index_dask"]

TRAINED_RECORD = "trained.json"


def _sample_rows(shards: list[Path], rows: list[int], wanted: np.ndarray) -> np.ndarray:
    """The rows ``wanted`` (sorted global row numbers) read from the memory-mapped shards."""
    out, start = [], 0
    for p, n in zip(shards, rows):
        local = wanted[(wanted >= start) & (wanted < start + n)] - start
        if local.size:
            out.append(np.asarray(load_npy(p, mmap_mode="r")[local], dtype=np.float32))
        start += n
    return np.concatenate(out)


def _fit_calibration(t: Any, shards: list[Path], client: Any, show_progress: bool | None) -> Any:
    """The calibration one process fits on every row: a moments-based (affine) one from the shards'
    moments, each summed on a worker and merged exactly on the cluster (:func:`fit_moments`)."""
    from ..distributed.api import fit_moments

    moments = fit_moments(shards, address=client, show_progress=show_progress)
    return type(t).from_moments(moments, **t.get_params())


def _reuse(index: Index, work: Path, key: str) -> bool:
    """Whether ``work`` holds a training of ``key`` that verifies (the trained index's sha256 and the transform
    folder's digest as recorded); then its parameters and transform are taken. A damaged one is trained again."""
    record, trained, tdir = work / TRAINED_RECORD, work / "trained.faiss", work / "transform"
    try:
        old = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(old, dict) or old.get("key") != key or not trained.is_file() or old.get("sha256") != file_sha256(trained):
        return False
    if index.transform is not None:
        try:
            if not tdir.is_dir() or old.get("transform_digest") != folder_digest(tdir):
                return False
            transform = load_transform(tdir)
        except (IsotropyError, OSError):
            return False
        index.transform = transform
    index.params["nlist"] = old["nlist"]
    index.params["bytes_per_vector"] = old.get("bytes_per_vector", index.params["bytes_per_vector"])
    return True


def _train(
    index: Index, shards: list[Path], rows: list[int], work: Path, key: str, client: Any, show_progress: bool | None
) -> None:
    """Fit the calibration on every row (a moments-based one; any other on the training sample) and
    train the faiss index on the sample; both written to ``work`` (reused as they are when ``work``
    holds a training of the same ``key`` that verifies)."""
    import faiss

    from ..transforms.base import AffineTransform

    record, trained, tdir = work / TRAINED_RECORD, work / "trained.faiss", work / "transform"
    if _reuse(index, work, key):
        return
    n = sum(rows)
    wanted = train_sample(n, index.params["nlist"])
    raw = _sample_rows(shards, rows, wanted)
    t = index.transform
    if t is not None and not t.__sklearn_is_fitted__():
        t = (
            _fit_calibration(t, shards, client, show_progress)
            if isinstance(t, AffineTransform)
            else type(t)(**t.get_params()).fit(raw)
        )
        t.provenance = provenance_of_record(index.encoder.record(), index.encoder.dim)
    index.transform = t
    if t is not None:
        t.save(tdir, force=True)
    fidx = new_pq_index(index.kind, index.params, index_vectors(raw, t), n)
    with atomic_path(trained) as tmp:
        faiss.write_index(fidx, str(tmp))
    body = {
        "key": key,
        "nlist": index.params["nlist"],
        "bytes_per_vector": index.params["bytes_per_vector"],
        "sha256": file_sha256(trained),
        "transform_digest": None if t is None else folder_digest(tdir),
    }
    with atomic_path(record) as tmp:
        Path(tmp).write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


def _build_key(index: Index, transform: Any, digests: list[str], rows: list[int]) -> str:
    """What the trained record depends on: the kind and parameters, the encoder, the calibration asked for
    (a fitted folder by its digest) and the shards' content (sha256) and rows, in order."""
    t = index.transform
    how = folder_digest(transform) if transform is not None else (None if t is None else repr(t))
    body = [index.kind, index.params, index.encoder.record(), how, list(zip(digests, rows))]
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def _fill(
    index: Index, shards: list[Path], rows: list[int], digests: list[str], work: Path, key: str, client: Any, show_progress
) -> list[dict]:
    """Train (or reuse the training), add the shards on the cluster and merge their lists from ``work``."""
    from ..distributed.index_build import add_shards, merge_shards, merge_vectors

    _train(index, shards, rows, work, key, client, show_progress)
    tpath = None if index.transform is None else str((work / "transform").resolve())
    report = add_shards(
        shards,
        work,
        transform=tpath,
        tdigest=None if tpath is None else folder_digest(tpath),
        address=client,
        show_progress=show_progress,
        keep_vectors=bool(index.params.get("keep_vectors")),
        digests=digests,
        prepare=index_vectors,  # the one apply path: what Index.add does to its vectors, on each worker
    )
    index._index = merge_shards(shards, work)
    if index.params.get("keep_vectors"):
        index._exact = merge_vectors(shards, work)
    return report


def _shard_folders(shards: list[Path]) -> list[Path]:
    """The shards' folders, inputs too (an output inside one is refused), but for the current folder and those
    above it: shards given as '*.npy' sit among everything else, and an index beside them harms none."""
    here = Path.cwd().resolve()
    return [f for f in dict.fromkeys(p.resolve().parent for p in shards) if not here.is_relative_to(f)]


def build_index_dask(
    corpus: str | os.PathLike,
    vectors: Any,
    output: str | os.PathLike,
    spec: IndexSpec | None = None,
    *,
    work: str | os.PathLike | None = None,
    address: Any = None,
    n_workers: int | None = None,
    keep_work: bool = False,
    **keywords: Any,
) -> tuple[Index, list[dict]]:
    """``isotropy index build --engine dask``: index ``corpus`` (one sentence a line) whose encoder
    vectors are the ``.npy`` shards ``vectors`` (a glob or a folder, taken in name order unless their sidecars
    prove the numeric one; or a list, in its order) into ``output`` as ``spec`` asks (its engine ``dask``; the
    keyword options of earlier versions still work: :meth:`IndexSpec.from_keywords`'s, kind ``ivfpq`` unless
    given); returns the index and one ``{"shard", "status", "reason"}`` per shard. ``work``: the work folder
    (``OUTPUT.parts``); ``address``/``n_workers``: the cluster; ``keep_work`` keeps the work folder after a success
    (a failure always keeps it, to resume)."""
    from ..distributed.cluster import client_for
    from ..distributed.index_build import shard_shapes
    from ..distributed.spec import expand_inputs

    spec = IndexSpec.coerce(spec, keywords, engine="dask")
    if spec.engine is None:
        raise IsotropyError("build_index_dask builds on a cluster: give a spec with engine='dask' (build_index: one process)")
    globbed = isinstance(vectors, (str, os.PathLike))  # a pattern or a folder: sorted by name
    if globbed and Path(vectors).is_dir():
        vectors = str(Path(vectors) / "*.npy")
    shards = expand_inputs(vectors)
    output = Path(output)  # "idx/" is "idx": its work folder is "idx.parts" beside it
    work = work_path(output, work)
    transform = spec.calibration.transform
    inputs = [corpus, transform, spec.model, spec.pooling_stats, *shards, *_shard_folders(shards)]
    check_output(output, "index", force=spec.force, inputs=inputs)
    check_apart(work, [*inputs, output], "work folder")
    check_work(work)
    sentences = _read_corpus(corpus)
    shapes = shard_shapes(shards)
    rows = [r for r, _ in shapes]
    if sum(rows) != len(sentences):
        raise IsotropyError(f"{corpus} has {len(sentences)} lines but the vector shards hold {sum(rows)} rows")
    encoder = Encoder(spec.model, **spec.encoder_options())  # as one process's: the queries are encoded by it
    widths = {w for _, w in shapes}
    if widths != {encoder.dim}:
        raise IsotropyError(f"the vector shards are {sorted(widths)} wide but {encoder.model_name} gives {encoder.dim} dims")
    t, warning = _index_transform(corpus, len(sentences), encoder, spec.calibration)
    index = Index.from_spec(encoder, t, spec)
    if warning:
        index.warnings.append(warning)
    if index.params["nlist"] is None:
        index.params["nlist"] = default_nlist(len(sentences))
    with client_for(address, n_workers) as client:  # one cluster for the checks, the moments and the shards
        return _on_cluster(index, corpus, output, work, sentences, shards, rows, globbed, client, spec, keep_work)


def _on_cluster(index, corpus, output, work, sentences, shards, rows, globbed, client, spec, keep_work):
    """The checks of the shards on ``client``, then the training, the shards and the merge (resumable)."""
    from ..distributed.index_build import check_shards

    show_progress = spec.show_progress
    digests = check_shards(shards, rows, address=client, show_progress=show_progress)
    metas = check_encoder(shards, digests, index.encoder, spec.allow_other_encoder)
    order, note = order_shards(corpus, sentences, shards, rows, metas, globbed)
    if note:
        index.warnings.append(note)
    shards, rows, digests = [shards[i] for i in order], [rows[i] for i in order], [digests[i] for i in order]
    key = _build_key(index, spec.calibration.transform, digests, rows)
    open_work(work, output)
    done = False
    try:
        report = _fill(index, shards, rows, digests, work, key, client, show_progress)
        index.sentences = sentences
        index.save(output, force=spec.force)
        done = True
    except IsotropyError as exc:
        if str(work) not in str(exc):
            raise
        raise IsotropyError(
            f"{exc} (the work folder {work} is only a cache of this build: delete it and run again to start afresh)"
        ) from None
    finally:
        close_work(work, done and not keep_work)
    return index, report
