"""Index storage: the saved folder of an :class:`~isotropy.search.Index`, written and read back.

The layout is in the docs of :mod:`isotropy.search`. Writing puts the transform's own folder,
the token frequencies, the faiss index, the sentences and the config in one atomic rename;
reading rebuilds the recorded encoder and transform and refuses a folder whose parts no longer
agree (weights fingerprint, ``encoding_key``, row counts, dimensions, digests).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..encoders import Encoder
from ..errors import IsotropyError
from ..storage.artifacts import CONFIG_NAME, STATE_NAME, check_output, folder_digest, header, load_state, output_dir
from ..storage.integrity import DIGESTS_KEY, member
from ..storage.text import read_json_lines
from ..transforms import load_transform
from .kinds import faiss_module, reconstruct
from .mapped import MappedFiles, npy_bytes_needed, ondisk_bytes_needed
from .pq import PQ_KINDS

__all__ = ["KIND", "INDEX_VERSION", "save_index", "load_index", "encoding_key"]

KIND = "index"
INDEX_VERSION = 1  # layout of this package's folder; bumped on incompatible change
INDEX_FILE = "index.faiss"
LISTS_FILE = "index.ivfdata"  # the on-disk inverted lists of an index merged from shards (distributed build)
VECTORS_FILE = "vectors.npy"  # keep_vectors: the exact (calibrated, normalised) float32 vectors, for rerank
SENTENCES_FILE = "sentences.jsonl"
TRANSFORM_DIR = "transform"
STATS_DIR = "pooling_stats"  # the token frequencies of a sif/idf pooling (Encoder.pooling_stats)


def encoding_key(fingerprint: str, pooling: str, max_length: int, transform_digest: str | None) -> str:
    """A digest of everything that determines how a sentence becomes a vector (checked on load)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([fingerprint, pooling, int(max_length), transform_digest]).encode())
    return h.hexdigest()


# --------------------------------------------------------------------------- writing


def save_index(index: Any, path: str | os.PathLike, *, force: bool = False) -> Path:
    """``Index.save``: write the index folder atomically (see the docs of :mod:`isotropy.search` for its layout).

    An existing ``path`` is replaced only when it holds an index (or is empty), unless
    ``force``. Saving back to the folder the index was loaded from fails, writing
    nothing, when another writer changed that folder in the meantime (so one of two
    concurrent ``add``s is never silently lost; ``isotropy index add`` also locks it).
    """
    from safetensors.numpy import save_file

    if index._index is None:
        raise IsotropyError("the index is empty: add sentences before saving")
    path = check_output(path, KIND, force=force)
    encoder = index.encoder.record()
    # Written by hand rather than with save_state, which owns its whole folder: here the
    # transform's own saved folder must sit inside the same atomic rename.
    with output_dir(path, KIND, force=force, check=lambda: _check_unchanged(index, path)) as tmp:
        transform_cfg = None
        if index.transform is not None:
            index.transform.save(tmp / TRANSFORM_DIR)
            sub = json.loads((tmp / TRANSFORM_DIR / CONFIG_NAME).read_text(encoding="utf-8"))
            transform_cfg = {"kind": sub.get("kind"), "path": TRANSFORM_DIR, "digest": folder_digest(tmp / TRANSFORM_DIR)}
        if "pooling_stats" in encoder:
            index.encoder.pooling_stats.save(tmp / STATS_DIR)
        _write_faiss(index, tmp)
        with open(tmp / SENTENCES_FILE, "w", encoding="utf-8", newline="\n") as fh:
            for s in index.sentences:
                fh.write(json.dumps(s, ensure_ascii=False) + "\n")
        save_file({"count": np.array([len(index.sentences)], dtype=np.int64)}, str(tmp / STATE_NAME))
        config = {
            **header(KIND),
            "index_version": INDEX_VERSION,
            "encoder": encoder,
            "transform": transform_cfg,
            "index": {
                "kind": index.kind,
                "params": index.params,
                "file": INDEX_FILE,
                **({"vectors": VECTORS_FILE} if index._exact is not None else {}),
                **({"lists": LISTS_FILE} if (tmp / LISTS_FILE).exists() else {}),
            },
            "dim": index.dim,
            "count": len(index.sentences),
            "sentences_file": SENTENCES_FILE,
            **({"allow_other_encoder": True} if index.allow_other_encoder else {}),
            **({"selection": index.selection} if index.selection else {}),
            "generation": uuid.uuid4().hex,  # every save is a new version (see _check_unchanged)
            "encoding_key": encoding_key(
                encoder["fingerprint"],
                index.encoder.pooling_key(),
                encoder["max_length"],
                None if transform_cfg is None else transform_cfg["digest"],
            ),
        }
        (tmp / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    index._source = (path.resolve(), _config_digest(path))
    return path


def _write_faiss(index: Any, tmp: Path) -> None:
    """The faiss index (and its on-disk lists, linked or copied in), and the kept exact vectors."""
    faiss = faiss_module()
    ivf = faiss.try_extract_index_ivf(index._index) if index.kind in PQ_KINDS else None
    lists = faiss.downcast_InvertedLists(ivf.invlists) if ivf is not None else None
    if isinstance(lists, faiss.OnDiskInvertedLists):
        src = Path(lists.filename)
        if src.name != LISTS_FILE:  # pragma: no cover - the distributed build names it so
            raise IsotropyError(f"on-disk inverted lists must be named {LISTS_FILE}, not {src.name}")
        try:
            os.link(src, tmp / LISTS_FILE)  # the same bytes, no copy, when on the same file system
        except OSError:
            import shutil

            shutil.copyfile(src, tmp / LISTS_FILE)
    faiss.write_index(index._index, str(tmp / INDEX_FILE))
    if index._exact is not None:
        np.save(tmp / VECTORS_FILE, np.asarray(index._exact, dtype=np.float32), allow_pickle=False)


def _check_unchanged(index: Any, path: Path) -> None:
    """Before replacing the folder this index was loaded from: is it still the version that was read?"""
    if index._source is None or index._source[0] != path.resolve():
        return
    if _config_digest(path) != index._source[1]:
        raise IsotropyError(
            f"{path} was changed by another writer since this index was loaded; nothing was written "
            f"(load it again and redo the change)"
        )


# --------------------------------------------------------------------------- reading


def load_index(
    cls: type,
    path: str | os.PathLike,
    *,
    ef_search: int | None = None,
    nprobe: int | None = None,
    rerank: int | None = None,
    batch_size: int = 64,
    device: str | None = None,
    verify: bool | None = None,
    mmap: bool = True,
) -> Any:
    """``Index.load``: read a folder written by :meth:`Index.save`, rebuilding and verifying its encoder and transform.

    The encoder is rebuilt on the backend it was built with (an index over an ONNX
    export reloads on onnxruntime); its weights fingerprint and the recomputed
    ``encoding_key`` must match the recorded ones, and every file the sha256 its config records
    (``verify=False`` skips that; None: unless ``--no-verify``); named paths stay inside the folder.
    A compressed index (``ivfpq``, ``opq``) is memory-mapped (``mmap``), its kept vectors too; such
    an index takes no :meth:`Index.add` (``isotropy index add`` loads it with ``mmap=False``).
    """
    path = Path(path)
    if not os.path.lexists(path):
        raise IsotropyError(f"{path} does not exist: it is not a folder of a saved index")
    cfg, arrays = load_state(path, KIND, required=("count",), verify=verify)
    rec = _read_index_config(path, cfg)
    if int(np.asarray(arrays["count"]).reshape(-1)[0]) != rec["count"]:
        raise IsotropyError(f"{path}: {STATE_NAME} and {CONFIG_NAME} disagree on the row count; rebuild the index")
    encoder, unverified = _rebuild_encoder(path, rec, batch_size, device)
    transform, digest = _load_index_transform(path, rec["transform"], False if DIGESTS_KEY in cfg else verify)  # hashed once
    if encoding_key(rec["fingerprint"], encoder.pooling_key(), encoder.max_length, digest) != rec["key"]:
        t_cfg = rec["transform"]
        raise IsotropyError(
            f"{path}/{CONFIG_NAME} no longer matches the index: it names pooling {encoder.pooling!r}, "
            f"max_length {encoder.max_length} and "
            f"{'no transform' if t_cfg is None else 'transform ' + repr(t_cfg.get('path'))}, but the index "
            f"was built with other encoding settings (recorded encoding_key differs); queries would not be "
            f"encoded like the corpus: restore the original config/transform or rebuild the index"
        )
    params = rec["params"]
    try:
        index = cls(
            encoder,
            transform,
            rec["kind"],
            **{k: params[k] for k in ("m", "ef_construction", "ef_search", "nprobe")},
            **{k: params[k] for k in ("bytes_per_vector", "keep_vectors", "rerank") if k in params},
            nlist=params.get("nlist"),
            allow_other_encoder=cfg.get("allow_other_encoder") is True,
        )
    except KeyError as exc:
        raise IsotropyError(f"{path}/{CONFIG_NAME} lacks the index parameter {exc}; rebuild the index") from None
    mapped = MappedFiles(path)  # each memory-mapped file, measured and held open (a shrink is refused, not a SIGBUS)
    index._index, index.sentences = _read_contents(path, cfg, rec, mmap, mapped)
    _attach_vectors(path, index, cfg, rec, mmap, mapped)
    index._mapped = mapped if mapped.files else None
    if cfg["index"].get("lists") is not None:
        index._read_only = (
            f"{path} was merged from shards into on-disk inverted lists, which take no additions; "
            "rebuild it with the new sentences (isotropy index build --engine dask resumes the finished shards)"
        )
    elif rec["kind"] in PQ_KINDS and mmap:
        index._read_only = f"{path} was loaded memory-mapped, read-only; load it with mmap=False to add sentences"
    if unverified:
        _verify_by_reencoding(path, index, rec["fingerprint"])
    out_dim = index._apply(np.zeros((1, encoder.dim), np.float32)).shape[1]
    if out_dim != rec["dim"]:
        raise IsotropyError(f"{path}: the transform gives {out_dim} dims but the index holds {rec['dim']}; rebuild the index")
    index.set_search_params(ef_search=ef_search, nprobe=nprobe, rerank=rerank)
    index.selection = cfg.get("selection")
    index._source = (path.resolve(), _config_digest(path))
    return index


def _on_disk_lists(faiss: Any, fidx: Any) -> bool:
    """Whether ``fidx`` is an IVF index whose inverted lists faiss reads through a map (``OnDiskInvertedLists``)."""
    try:
        ivf = faiss.extract_index_ivf(fidx)
    except RuntimeError:  # not an IVF index: no lists
        return False
    return isinstance(faiss.downcast_InvertedLists(ivf.invlists), faiss.OnDiskInvertedLists)


def _read_index_config(path: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    if cfg.get("index_version") != INDEX_VERSION:
        raise IsotropyError(
            f"{path} was written by an incompatible isotropy ({cfg.get('isotropy_version', 'unknown')}, index "
            f"layout {cfg.get('index_version')!r}; this one reads {INDEX_VERSION}); rebuild the index"
        )
    try:
        enc, idx = cfg["encoder"], cfg["index"]
        return {
            "kind": idx["kind"],
            "params": dict(idx["params"]),
            "file": idx.get("file", INDEX_FILE),
            "count": int(cfg["count"]),
            "dim": int(cfg["dim"]),
            "backend": str(enc.get("backend", "torch")),
            "fingerprint_version": enc.get("fingerprint_version"),
            "model": enc["model"],
            "fingerprint": str(enc["fingerprint"]),
            "pooling": enc["pooling"],
            "pooling_stats": enc.get("pooling_stats"),
            "precision": str(enc.get("precision", "fp32")),
            "max_length": int(enc["max_length"]),
            "transform": cfg.get("transform"),
            "key": cfg["encoding_key"],
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise IsotropyError(f"{path}/{CONFIG_NAME} is incomplete or malformed ({exc!r}); rebuild the index") from None


def _rebuild_encoder(path: Path, rec: dict[str, Any], batch_size: int, device: str | None) -> tuple[Encoder, bool]:
    """The recorded encoder, its fingerprint checked; ``(encoder, True)`` when the record is isotropy 0.1's
    and its fingerprint cannot be compared (0.1 hashed the model's folder path): the caller then
    verifies by re-encoding stored sentences instead."""
    model = rec["model"]
    if isinstance(model, str) and os.path.isabs(model) and not os.path.exists(model):  # moved or deleted since the build
        what = "file" if Path(model).suffix else "folder"
        raise IsotropyError(
            f"{path}: the index's model {what} {Path(model).name} is missing (it was built with {model}); "
            f"put it back there or rebuild the index"
        )
    stats = path / STATS_DIR
    if rec["pooling_stats"] and not stats.is_dir():
        raise IsotropyError(f"{path} is missing its token frequencies folder {STATS_DIR}/; rebuild the index")
    encoder = Encoder(
        rec["model"],
        pooling=rec["pooling"],
        max_length=rec["max_length"],
        batch_size=batch_size,
        device=device,
        backend=rec["backend"],
        pooling_stats=stats if rec["pooling_stats"] else None,
        precision=rec["precision"],
    )
    if encoder.fingerprint() == rec["fingerprint"]:
        return encoder, False
    if rec["fingerprint_version"] is None and rec["backend"] == "torch":
        return encoder, True
    raise _other_weights(path, rec["fingerprint"], encoder)


def _other_weights(path: Path, recorded: str, encoder: Encoder) -> IsotropyError:
    return IsotropyError(
        f"{path} was built with other model weights than {encoder.model_name} (fingerprint "
        f"{recorded[:12]}..., this model {encoder.fingerprint()[:12]}...); queries would not be encoded "
        f"like the corpus: restore its config.json or rebuild the index"
    )


REENCODE_PROBES = 8  # stored sentences re-encoded to verify an index whose fingerprint cannot be compared


def _verify_by_reencoding(path: Path, index: Any, recorded: str) -> None:
    """Re-encode a few stored sentences and compare them with the stored vectors (isotropy 0.1's indexes)."""
    n = len(index.sentences)
    ids = sorted({int(i) for i in np.linspace(0, n - 1, min(REENCODE_PROBES, n))})
    try:
        stored = reconstruct(index._index, index.kind, ids)
    except RuntimeError:  # an index type that cannot give its vectors back
        raise _other_weights(path, recorded, index.encoder) from None
    fresh = index.embed([index.sentences[i] for i in ids], show_progress=False)
    if not np.allclose(stored, fresh, atol=1e-4):
        raise _other_weights(path, recorded, index.encoder)


def _load_index_transform(path: Path, t_cfg: dict[str, Any] | None, verify: bool | None) -> tuple[Any, str | None]:
    if t_cfg is None:
        return None, None
    tdir = member(path, t_cfg.get("path", TRANSFORM_DIR), "transform path")
    if not tdir.is_dir():
        raise IsotropyError(f"{path} is missing its transform folder {tdir.name}/; rebuild the index")
    return load_transform(tdir, verify=verify), folder_digest(tdir)


def _attach_vectors(path: Path, index: Any, cfg: dict[str, Any], rec: dict[str, Any], mmap: bool, mapped: MappedFiles) -> None:
    """The kept exact vectors (memory-mapped, their size checked first), checked against the row count and dimension."""
    name = cfg["index"].get("vectors")
    if name is None:
        if index.params.get("keep_vectors"):
            raise IsotropyError(f"{path}/{CONFIG_NAME} says the exact vectors are kept but names no file; rebuild the index")
        return
    file = member(path, name, "vectors file")
    if not file.is_file():
        raise IsotropyError(f"{path} is missing {file.name}, its exact vectors; restore it or rebuild the index")
    try:
        needed = npy_bytes_needed(file) if mmap else None
        if needed is not None:
            mapped.add(file, needed, "its header's rows")
        exact = np.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise IsotropyError(f"{file} is not a readable .npy file ({exc}); restore it or rebuild the index") from None
    if exact.dtype != np.float32 or exact.shape != (rec["count"], rec["dim"]):
        raise IsotropyError(
            f"{file} holds {exact.dtype} {exact.shape}, not float32 ({rec['count']}, {rec['dim']}); rebuild the index"
        )
    index._exact = exact


def _read_contents(
    path: Path, cfg: dict[str, Any], rec: dict[str, Any], mmap: bool = False, mapped: MappedFiles | None = None
) -> tuple[Any, list[str]]:
    """The faiss index and the sentences, checked against the config's row count and dimension; the files
    faiss memory-maps are measured into ``mapped`` before anything is read from them."""
    faiss = faiss_module()
    file = member(path, rec["file"], "index file")
    if not file.is_file():
        raise IsotropyError(f"{path} is missing {file.name}; it is not a complete index")
    lists = cfg["index"].get("lists")
    if lists is not None and not member(path, lists, "lists file").is_file():
        raise IsotropyError(f"{path} is missing {lists}, its on-disk inverted lists; restore it or rebuild the index")
    mapped = MappedFiles(path) if mapped is None else mapped
    try:
        if lists is not None:
            fidx = _read_ondisk(str(file))
            ondisk = faiss.downcast_InvertedLists(faiss.extract_index_ivf(fidx).invlists)
            mapped.add(Path(ondisk.filename), ondisk_bytes_needed(ondisk), "its inverted lists")
        elif mmap and rec["kind"] in PQ_KINDS:  # a compressed index's codes stay on disk, paged in by the OS
            size = file.stat().st_size  # read whole by faiss below: a shorter file fails there
            fidx = faiss.read_index(str(file), faiss.IO_FLAG_MMAP)
            mapped.add(file, size, "its codes")
        else:
            fidx = faiss.read_index(str(file))
        # faiss maps an IO_FLAG_MMAP index's lists as OnDiskInvertedLists over index.faiss itself: their prefetch
        # threads read the map after a search as a Dask-built index's do (mapped.py), so settle() joins both
        mapped.prefetching = mapped.prefetching or _on_disk_lists(faiss, fidx)
    except RuntimeError as exc:
        raise IsotropyError(f"{file} is not a readable faiss index: {str(exc).strip().splitlines()[-1]}") from None
    sentences = read_json_lines(member(path, cfg.get("sentences_file", SENTENCES_FILE), "sentences_file"))
    count, dim = rec["count"], rec["dim"]
    if fidx.ntotal != count or len(sentences) != count or fidx.d != dim:
        raise IsotropyError(
            f"{path} is inconsistent: config says {count} rows x {dim} dims, the faiss index holds "
            f"{fidx.ntotal} x {fidx.d}, the sentence file {len(sentences)} sentences; rebuild the index"
        )
    return fidx, sentences


def _read_ondisk(file: str) -> Any:
    """An index whose on-disk inverted lists lie beside it (faiss's ``IO_FLAG_ONDISK_SAME_DIR``; it is
    memory-mapped as it is). faiss printfs the renamed path ("updating ondisk filename from ...") on C's
    stdout, which carries search results: that line, of no use to anyone, goes to the null device (the
    only way to reach C's printf from here)."""
    import sys

    faiss = faiss_module()
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        return faiss.read_index(file, faiss.IO_FLAG_ONDISK_SAME_DIR)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def _config_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256((path / CONFIG_NAME).read_bytes()).hexdigest()
    except OSError:
        return None
