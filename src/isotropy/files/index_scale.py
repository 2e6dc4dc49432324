"""A compressed index (``ivfpq``, ``opq``) built on a Dask cluster: :func:`build_index_dask`.

The corpus's vectors come as ``.npy`` shards (``isotropy encode --engine dask`` writes them; row
``i`` of the shards, in order, is line ``i`` of the corpus). The calibration is fitted on every row,
as one process fits it: each worker sums one shard's moments and the cluster merges them exactly
(:func:`isotropy.distributed.fit_moments`; a calibration that is not moments-based is fitted on
the sample). The client draws the seeded training sample (:func:`isotropy.search.pq.train_sample`),
trains the index on it and writes both to the work folder (``OUTPUT.parts`` unless given); the workers add the shards
(:mod:`isotropy.distributed.index_build`), faiss merges them into on-disk inverted lists, and the
index folder is saved with them (memory-mapped by ``search`` and ``serve``). A rerun resumes:
the trained index is reused when nothing it depends on changed, and finished shards are kept.
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
from ..search import Index
from ..search.pq import PQ_KINDS, default_nlist, new_pq_index, train_sample
from ..storage.artifacts import check_output, file_sha256, folder_digest
from ..storage.atomic import atomic_path
from ..storage.integrity import provenance_of_record
from ..transforms import load_transform
from .index import _index_transform, _read_corpus

__all__ = ["build_index_dask"]

TRAINED_RECORD = "trained.json"


def _sample_rows(shards: list[Path], rows: list[int], wanted: np.ndarray) -> np.ndarray:
    """The rows ``wanted`` (sorted global row numbers) read from the memory-mapped shards."""
    out, start = [], 0
    for p, n in zip(shards, rows):
        local = wanted[(wanted >= start) & (wanted < start + n)] - start
        if local.size:
            out.append(np.asarray(np.load(p, mmap_mode="r", allow_pickle=False)[local], dtype=np.float32))
        start += n
    return np.concatenate(out)


def _fit_calibration(t: Any, shards: list[Path], client: Any, show_progress: bool | None) -> Any:
    """The calibration one process fits on every row: a moments-based (affine) one from the shards'
    moments, each summed on a worker and merged exactly on the cluster (:func:`fit_moments`)."""
    from ..distributed.api import fit_moments

    moments = fit_moments(shards, address=client, show_progress=show_progress)
    return type(t).from_moments(moments, **t.get_params())


def _train(
    index: Index, shards: list[Path], rows: list[int], work: Path, key: str, client: Any, show_progress: bool | None
) -> None:
    """Fit the calibration on every row (a moments-based one; any other on the training sample) and
    train the faiss index on the sample; both written to ``work`` (reused as they are when ``work``
    holds a training of the same ``key``)."""
    import faiss

    from ..transforms.base import AffineTransform

    record, trained, tdir = work / TRAINED_RECORD, work / "trained.faiss", work / "transform"
    try:
        old = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = None
    if isinstance(old, dict) and old.get("key") == key and trained.is_file() and old.get("sha256") == file_sha256(trained):
        index.params["nlist"] = old["nlist"]
        if index.transform is not None:
            index.transform = load_transform(tdir)
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
    fidx = new_pq_index(index.kind, index.params, index._apply(raw, t), n)
    with atomic_path(trained) as tmp:
        faiss.write_index(fidx, str(tmp))
    body = {"key": key, "nlist": index.params["nlist"], "sha256": file_sha256(trained)}
    with atomic_path(record) as tmp:
        Path(tmp).write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


def build_index_dask(
    # long: the options of build_index and of the cluster, checked before any work
    corpus: str | os.PathLike,
    vectors: Any,
    output: str | os.PathLike,
    *,
    model: str | None = None,
    pooling: str | None = None,
    max_length: int | None = None,
    transform: str | os.PathLike | None = None,
    whiten: int | None = None,
    power: float | None = None,
    no_whiten: bool = False,
    kind: str = "ivfpq",
    work: str | os.PathLike | None = None,
    address: Any = None,
    n_workers: int | None = None,
    show_progress: bool | None = None,
    force: bool = False,
    **params: Any,
) -> tuple[Index, list[dict]]:
    """``isotropy index build --engine dask``: index ``corpus`` (one sentence a line) whose encoder
    vectors are the ``.npy`` shards ``vectors`` (a glob, a folder or a list; sorted by name, that is the row order) into
    ``output``; returns the index and one ``{"shard", "status", "reason"}`` per shard."""
    from ..distributed.cluster import client_for
    from ..distributed.index_build import add_shards, merge_shards, merge_vectors, shard_rows
    from ..distributed.spec import expand_inputs

    if kind not in PQ_KINDS:
        raise IsotropyError(f"--engine dask builds the compressed kinds ({', '.join(PQ_KINDS)}), not {kind!r}")
    check_output(output, "index", force=force, inputs=[corpus, transform, model])
    sentences = _read_corpus(corpus)
    if isinstance(vectors, (str, os.PathLike)) and Path(vectors).is_dir():
        vectors = str(Path(vectors) / "*.npy")
    shards = expand_inputs(vectors)  # sorted by name: that order is the corpus's row order
    rows = shard_rows(shards)
    if sum(rows) != len(sentences):
        raise IsotropyError(f"{corpus} has {len(sentences)} lines but the vector shards hold {sum(rows)} rows")
    encoder = Encoder(model, pooling=pooling, max_length=max_length)
    widths = {int(np.load(p, mmap_mode="r").shape[1]) for p in shards}
    if widths != {encoder.dim}:
        raise IsotropyError(f"the vector shards are {sorted(widths)} wide but {encoder.model_name} gives {encoder.dim} dims")
    t, warning = _index_transform(corpus, len(sentences), encoder, transform, whiten, power, no_whiten)
    index = Index(encoder, t, kind, **params)
    if warning:
        index.warnings.append(warning)
    if index.params["nlist"] is None:
        index.params["nlist"] = default_nlist(len(sentences))
    work = Path(work) if work is not None else Path(f"{output}.parts")
    work.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(
        json.dumps(
            [kind, index.params, encoder.record(), None if t is None else repr(t), [(p.name, n) for p, n in zip(shards, rows)]],
            sort_keys=True,
            default=str,
        ).encode()
    ).hexdigest()
    with client_for(address, n_workers) as client:  # one cluster for the moments and the shards
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
        )
    index._index = merge_shards(shards, work)
    if index.params.get("keep_vectors"):
        index._exact = merge_vectors(shards, work)
    index.sentences = sentences
    index.save(output, force=force)
    return index, report
