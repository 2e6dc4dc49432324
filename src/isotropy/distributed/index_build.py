"""A compressed (IVF-PQ) index filled shard by shard on a Dask cluster and merged on disk.

The client trains the index (coarse quantiser, codebooks, OPQ rotation) on a sample and writes
it, empty, to ``WORK/trained.faiss``; each worker reads it, adds one shard of vectors (``.npy``,
raw encoder output) after the index's transform and L2 normalisation, with the shard's global
row numbers as ids, and writes ``WORK/shard-<position>-<stem>.faiss`` (named by the shard's position,
so two shards of one file name in different folders never share a file) with a sidecar ``.json``
(the trained index's sha256, the source's size and sha256, the rows, the shard file's sha256) renamed
in with it (with ``keep_vectors``, also ``shard-<position>-<stem>.vectors.npy``, the shard's calibrated
vectors, whose sha256 the sidecar records; :func:`merge_vectors` joins them).

Before any training, :func:`check_shards` has a worker read every row of every shard: its sha256
(the key of the trained record: a changed shard retrains) and one line naming the shard and its own
row (0-based) for a NaN or infinite value, which faiss would drop or fail on. faiss's own :func:`faiss.contrib.ondisk.merge_ondisk` then merges the shards' inverted lists
into ``WORK/index.ivfdata`` (``OnDiskInvertedLists``), memory-mapped, never all in memory.

Resumable like the distributed encode: a shard whose file and sidecar verify is not added again;
one missing or damaged is redone and :func:`add_shards` names it and why. The transform and
normalisation are the caller's ``prepare``, :func:`isotropy.search.index.index_vectors` (what
:meth:`isotropy.search.Index.add` applies; this package sits below ``search`` and does not import it):
one apply path, handed to the workers by reference.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from ..storage.artifacts import file_sha256
from ..storage.atomic import atomic_path
from ..storage.vectors import load_npy, open_vector_file
from .cluster import client_for, gather, input_errors_as_values
from .tasks import read_sidecar
from .workers import worker_transform

__all__ = [
    "SHARD_FORMAT",
    "LISTS_FILE",
    "TRAINED_FILE",
    "add_shards",
    "check_shards",
    "merge_shards",
    "merge_vectors",
    "shard_rows",
    "shard_shapes",
    "verify_shard",
]

SHARD_FORMAT = "isotropy-index-shard"
TRAINED_FILE = "trained.faiss"
LISTS_FILE = "index.ivfdata"  # the name isotropy.search's saved folder expects for on-disk lists
CHECK_ROWS = 65536  # rows a worker checks for NaN/inf at a time (bounds its memory)


_ADVICE = "the shards are the .npy files 'isotropy encode --engine dask' writes; check the --input pattern"


def shard_shapes(shards: list[Path]) -> list[tuple[int, int]]:
    """``(rows, width)`` of each ``.npy`` shard, read from its header only; one line for a file that is not
    a .npy file of vectors (a text file matched by the glob, a pickle, a truncated file)."""
    shapes = []
    for p in shards:
        # the sidecar's digest is checked by the build's own pass over every row (check_shards), not here
        arr = open_vector_file(p, verify=False, advice=_ADVICE)
        shapes.append((int(arr.shape[0]), int(arr.shape[1])))
    return shapes


def shard_rows(shards: list[Path]) -> list[int]:
    """Rows of each ``.npy`` shard (read from its header only); one line for a file that is not one."""
    return [rows for rows, _ in shard_shapes(shards)]


def _stem(source: Path, position: int | None) -> str:
    # by position: shards of one name in different folders ('v/*/x.npy') get files of their own
    return source.stem if position is None else f"{position:05d}-{source.stem[:80]}"


def _outputs(source: Path, work: Path, position: int | None = None) -> tuple[Path, Path]:
    stem = _stem(source, position)
    return work / f"shard-{stem}.faiss", work / f"shard-{stem}.json"


def _vectors_out(source: Path, work: Path, position: int | None = None) -> Path:
    """``keep_vectors``: the shard's exact vectors as the index stores them (calibrated, normalised)."""
    return work / f"shard-{_stem(source, position)}.vectors.npy"


def verify_shard(source: Path, work: Path, expect: dict, position: int | None = None) -> str:
    """'' when ``source``'s shard index in ``work`` (at ``position``) is complete and matches ``expect``, else why not."""
    out, side = _outputs(source, work, position)
    reason, meta = read_sidecar(out, side, expect)
    if reason:
        return "source content changed" if reason == "source_sha256 changed" else reason
    if "source_sha256" not in expect and meta.get("source_sha256") != file_sha256(source):
        return "source content changed"
    if not out.is_file():
        return "shard index missing"
    if meta.get("shard_sha256") != file_sha256(out):
        return "shard index damaged (sha256 mismatch)"
    if expect.get("keep_vectors"):
        vec = _vectors_out(source, work, position)
        if not vec.is_file():
            return "shard vectors missing"
        if meta.get("vectors_sha256") != file_sha256(vec):
            return "shard vectors damaged (sha256 mismatch)"
    return ""


def _first_bad_row(X: np.ndarray) -> int | None:
    ok = np.isfinite(X).all(axis=1)
    return None if ok.all() else int(np.flatnonzero(~ok)[0])


def _nan_error(source: Any, row: int, start: int, what: str = "has") -> IsotropyError:
    return IsotropyError(
        f"{source} {what} a NaN or infinite value in row {row} (0-based; row {start + row} of the corpus): "
        f"an index cannot hold it; encode that shard again or drop the row (and its corpus line)"
    )


@input_errors_as_values
def check_shard(source: str, start: int) -> dict:
    """Worker side: the shard file's sha256 and every row read, one line naming the shard and its own row
    (0-based) for a NaN or infinite value."""
    digest = file_sha256(source)
    arr = load_npy(source, mmap_mode="r")
    for lo in range(0, arr.shape[0], CHECK_ROWS):
        bad = _first_bad_row(np.asarray(arr[lo : lo + CHECK_ROWS]))
        if bad is not None:
            raise _nan_error(source, lo + bad, start)
    return {"sha256": digest, "rows": int(arr.shape[0])}


def check_shards(shards: list[Path], rows: list[int], *, address: Any = None, show_progress: bool | None = None) -> list[str]:
    """Every row of every shard checked on the cluster (:func:`check_shard`); the shards' sha256, in order."""
    starts = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(int).tolist()
    tag = hashlib.sha256("\0".join(map(str, shards)).encode()).hexdigest()[:8]
    with client_for(address) as client:
        futures = [
            client.submit(check_shard, str(p), s, key=f"isotropy-index-check-{i}-{tag}-{os.getpid()}", pure=False)
            for i, (p, s) in enumerate(zip(shards, starts))
        ]
        results = gather(client, futures, "checking shards", shards, show_progress)
    return [r["sha256"] for r in results]


@input_errors_as_values
def add_shard(
    # long: one shard's task: where it reads and writes, what it expects, the transform and the apply path
    source: str,
    start: int,
    work: str,
    expect: dict,
    transform: str | None,
    tdigest: str | None,
    position: int | None = None,
    prepare: Callable[..., np.ndarray] | None = None,
) -> dict:
    """Worker side: verify the shard's existing output, else add its vectors, as ``prepare(raw, transform)`` gives
    them, to the trained index and write it."""
    if prepare is None:
        raise IsotropyError("add_shard needs prepare, the index's apply path (isotropy.search.index.index_vectors)")
    import faiss

    src, wdir = Path(source), Path(work)
    reason = verify_shard(src, wdir, expect, position)
    if not reason:
        return {"status": "skipped", "reason": ""}
    digest = file_sha256(src)
    if expect.get("source_sha256", digest) != digest:
        raise IsotropyError(f"{src} changed while the index was built (its sha256 differs from the check's); run again")
    X = load_npy(src)
    # the index's own apply path (transform, float32, L2 normalisation); a NaN or infinite value stays one after it
    X = prepare(X, None if transform is None else worker_transform(transform, tdigest), own=True)  # ours: no copy
    bad = _first_bad_row(X)
    if bad is not None:
        raise _nan_error(src, bad, start, "gives" if transform is not None else "has")
    index = faiss.read_index(str(wdir / TRAINED_FILE))
    index.add_with_ids(X, np.arange(start, start + X.shape[0], dtype=np.int64))
    out, side = _outputs(src, wdir, position)
    meta = {**expect, "source_sha256": digest, "rows": int(X.shape[0]), "start": int(start)}
    if expect.get("keep_vectors"):  # written first: the sidecar renamed in with the index below vouches for both
        vec = _vectors_out(src, wdir, position)
        with atomic_path(vec) as tmp:
            np.save(tmp, X, allow_pickle=False)
        meta["vectors_sha256"] = file_sha256(vec)

    def sidecar(tmp: Path) -> tuple[Path, bytes]:
        return side, (json.dumps({**meta, "shard_sha256": file_sha256(tmp)}, indent=2, sort_keys=True) + "\n").encode()

    with atomic_path(out, sidecar=sidecar) as tmp:
        faiss.write_index(index, str(tmp))
    return {"status": "added", "reason": "" if reason == "missing" else reason}


def add_shards(
    # long: the shards, the work folder, the transform and the cluster's options
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
    digests: list[str] | None = None,
    prepare: Callable[..., np.ndarray] | None = None,
) -> list[dict]:
    """Add every shard (in ``shards`` order: ids are global row numbers) to ``work/trained.faiss`` on the
    cluster; returns one ``{"shard", "status" (added | skipped), "reason"}`` per shard. ``digests``: the
    shards' sha256 as :func:`check_shards` read them (a shard whose file differs is named). ``prepare(raw,
    transform)``: the index's apply path, :func:`isotropy.search.index.index_vectors` (required)."""
    if prepare is None:
        raise IsotropyError("add_shards needs prepare, the index's apply path (isotropy.search.index.index_vectors)")
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
                    **({"source_sha256": digests[i]} if digests is not None else {}),
                    **({"keep_vectors": True} if keep_vectors else {}),
                },
                transform,
                tdigest,
                i,
                prepare,
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
    parts = [load_npy(_vectors_out(p, work, i), mmap_mode="r") for i, p in enumerate(shards)]
    target = work / "vectors.npy"
    with atomic_path(target) as tmp:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(sum(len(a) for a in parts), parts[0].shape[1]))
        start = 0
        for a in parts:
            out[start : start + len(a)] = a
            start += len(a)
        out.flush()
        del out
    return load_npy(target, mmap_mode="r")


def merge_shards(shards: list[Path], work: Path) -> Any:
    """The trained index with every shard's inverted lists merged into ``work/index.ivfdata`` (on disk)."""
    import faiss
    from faiss.contrib.ondisk import merge_ondisk

    work = Path(work)
    lists = work / LISTS_FILE
    if lists.exists():
        lists.unlink()  # a merge that died half way: the shards hold everything, merge again
    index = faiss.read_index(str(work / TRAINED_FILE))
    # faiss's on-disk lists printf "resizing FILE to N bytes" on C's stdout: noise, and stdout is the
    # command's; C's printf can be reached only through the file descriptor, so fd 1 goes to /dev/null
    import sys

    sys.stdout.flush()
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        merge_ondisk(index, [str(_outputs(p, work, i)[0]) for i, p in enumerate(shards)], str(lists))
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
    return index
