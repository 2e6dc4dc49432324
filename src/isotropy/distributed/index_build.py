"""A compressed (IVF-PQ) index filled shard by shard on a Dask cluster and merged on disk.

The client trains the index (coarse quantiser, codebooks, OPQ rotation) on a sample and writes
it, empty, to ``WORK/trained.faiss``; each worker reads it, adds one shard of vectors (``.npy``,
raw encoder output) after the index's transform and L2 normalisation, with the shard's global
row numbers as ids, and writes ``WORK/shard-<stem>.faiss`` with a sidecar ``.json`` (the trained
index's sha256, the source's size and sha256, the rows, the shard file's sha256) renamed in with
it (with ``keep_vectors``, also ``shard-<stem>.vectors.npy``, the shard's calibrated vectors, whose sha256 the
sidecar records; :func:`merge_vectors` joins them). faiss's own :func:`faiss.contrib.ondisk.merge_ondisk` then merges the shards' inverted lists
into ``WORK/index.ivfdata`` (``OnDiskInvertedLists``), memory-mapped, never all in memory.

Resumable like the distributed encode: a shard whose file and sidecar verify is not added again;
one missing or damaged is redone and :func:`add_shards` names it and why. The transform and
normalisation repeat :meth:`isotropy.search.Index._apply` (three lines) because this package sits
beside ``search`` in the layers and may not import it; ``tests/test_scale.py`` checks that both
give the same codes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from ..storage.artifacts import file_sha256
from ..storage.atomic import atomic_path
from .cluster import client_for, gather, input_errors_as_values
from .tasks import read_sidecar
from .workers import worker_transform

__all__ = [
    "SHARD_FORMAT",
    "LISTS_FILE",
    "TRAINED_FILE",
    "add_shards",
    "merge_shards",
    "merge_vectors",
    "shard_rows",
    "verify_shard",
]

SHARD_FORMAT = "isotropy-index-shard"
TRAINED_FILE = "trained.faiss"
LISTS_FILE = "index.ivfdata"  # the name isotropy.search's saved folder expects for on-disk lists


def shard_rows(shards: list[Path]) -> list[int]:
    """Rows of each ``.npy`` shard (read from its header only); one line for a file that is not one."""
    rows = []
    for p in shards:
        try:
            arr = np.load(p, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise IsotropyError(f"{p} is not a readable .npy vector file ({exc})") from None
        if arr.ndim != 2:
            raise IsotropyError(f"{p} holds a {arr.ndim}-d array, not vectors (rows x dims)")
        rows.append(int(arr.shape[0]))
    return rows


def _outputs(source: Path, work: Path) -> tuple[Path, Path]:
    return work / f"shard-{source.stem}.faiss", work / f"shard-{source.stem}.json"


def _vectors_out(source: Path, work: Path) -> Path:
    """``keep_vectors``: the shard's exact vectors as the index stores them (calibrated, normalised)."""
    return work / f"shard-{source.stem}.vectors.npy"


def verify_shard(source: Path, work: Path, expect: dict) -> str:
    """'' when ``source``'s shard index in ``work`` is complete and matches ``expect``, else why not."""
    out, side = _outputs(source, work)
    reason, meta = read_sidecar(out, side, expect)
    if reason:
        return reason
    if meta.get("source_sha256") != file_sha256(source):
        return "source content changed"
    if not out.is_file():
        return "shard index missing"
    if meta.get("shard_sha256") != file_sha256(out):
        return "shard index damaged (sha256 mismatch)"
    if expect.get("keep_vectors"):
        vec = _vectors_out(source, work)
        if not vec.is_file():
            return "shard vectors missing"
        if meta.get("vectors_sha256") != file_sha256(vec):
            return "shard vectors damaged (sha256 mismatch)"
    return ""


@input_errors_as_values
def add_shard(source: str, start: int, work: str, expect: dict, transform: str | None, tdigest: str | None) -> dict:
    """Worker side: verify the shard's existing output, else add its vectors to the trained index and write it."""
    import faiss

    src, wdir = Path(source), Path(work)
    reason = verify_shard(src, wdir, expect)
    if not reason:
        return {"status": "skipped", "reason": ""}
    raw = np.load(src, allow_pickle=False)
    X = np.asarray(raw, dtype=np.float32)
    if transform is not None:
        X = np.asarray(worker_transform(transform, tdigest).transform(X), dtype=np.float32)
    X = np.ascontiguousarray(X, dtype=np.float32)
    if X is raw or np.shares_memory(X, raw):
        X = X.copy()
    faiss.normalize_L2(X)
    index = faiss.read_index(str(wdir / TRAINED_FILE))
    index.add_with_ids(X, np.arange(start, start + X.shape[0], dtype=np.int64))
    out, side = _outputs(src, wdir)
    meta = {**expect, "source_sha256": file_sha256(src), "rows": int(X.shape[0]), "start": int(start)}
    if expect.get("keep_vectors"):  # written first: the sidecar renamed in with the index below vouches for both
        with atomic_path(_vectors_out(src, wdir)) as tmp:
            np.save(tmp, X, allow_pickle=False)
        meta["vectors_sha256"] = file_sha256(_vectors_out(src, wdir))

    def sidecar(tmp: Path) -> tuple[Path, bytes]:
        return side, (json.dumps({**meta, "shard_sha256": file_sha256(tmp)}, indent=2, sort_keys=True) + "\n").encode()

    with atomic_path(out, sidecar=sidecar) as tmp:
        faiss.write_index(index, str(tmp))
    return {"status": "added", "reason": "" if reason == "missing" else reason}


def add_shards(
    shards: list[Path],
    work: Path,
    *,
    transform: str | None = None,
    tdigest: str | None = None,
    address: Any = None,
    n_workers: int | None = None,
    retries: int = 2,
    show_progress: bool | None = None,
    keep_vectors: bool = False,
) -> list[dict]:
    """Add every shard (in ``shards`` order: ids are global row numbers) to ``work/trained.faiss`` on the
    cluster; returns one ``{"shard", "status" (added | skipped), "reason"}`` per shard."""
    work = Path(work)
    trained = work / TRAINED_FILE
    if not trained.is_file():
        raise IsotropyError(f"{work} holds no {TRAINED_FILE}: train the index before adding shards")
    rows = shard_rows(shards)
    starts = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(int).tolist()
    tsha = file_sha256(trained)
    with client_for(address, n_workers) as client:
        futures = [
            client.submit(
                add_shard,
                str(p),
                start,
                str(work),
                {
                    "format": SHARD_FORMAT,
                    "trained_sha256": tsha,
                    "source_name": p.name,
                    "start": start,
                    "rows": n,
                    **({"keep_vectors": True} if keep_vectors else {}),
                },
                transform,
                tdigest,
                key=f"isotropy-index-shard-{i}-{tsha[:8]}-{os.getpid()}",
                retries=retries,
                pure=False,
            )
            for i, (p, start, n) in enumerate(zip(shards, starts, rows))
        ]
        results = gather(client, futures, "adding shards", shards, show_progress)
    return [{"shard": str(p), **r} for p, r in zip(shards, results)]


def merge_vectors(shards: list[Path], work: Path) -> np.ndarray:
    """``keep_vectors``: the shards' exact vectors concatenated into ``work/vectors.npy`` (one shard in memory at a
    time), returned memory-mapped."""
    parts = [np.load(_vectors_out(p, work), mmap_mode="r", allow_pickle=False) for p in shards]
    target = work / "vectors.npy"
    with atomic_path(target) as tmp:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(sum(len(a) for a in parts), parts[0].shape[1]))
        start = 0
        for a in parts:
            out[start : start + len(a)] = a
            start += len(a)
        out.flush()
        del out
    return np.load(target, mmap_mode="r", allow_pickle=False)


def merge_shards(shards: list[Path], work: Path) -> Any:
    """The trained index with every shard's inverted lists merged into ``work/index.ivfdata`` (on disk)."""
    import faiss
    from faiss.contrib.ondisk import merge_ondisk

    work = Path(work)
    lists = work / LISTS_FILE
    if lists.exists():
        lists.unlink()  # a merge that died half way: the shards hold everything, merge again
    index = faiss.read_index(str(work / TRAINED_FILE))
    # faiss's on-disk lists printf a line per resize on C's stdout: sent to stderr, so stdout stays the command's
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        merge_ondisk(index, [str(_outputs(p, work)[0]) for p in shards], str(lists))
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    return index
