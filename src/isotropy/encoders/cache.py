"""Encoded sentence vectors on disk, never served unless verified (layer 4).

Encoding is where the time goes; an evaluation or a benchmark that asks again for the
same sentences, model, pooling and max_length reads them back instead. Every entry is
checked before it is served (its key, a digest of its bytes, its shape), so a stale,
truncated, foreign or overwritten file is a miss, never wrong vectors.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..storage.artifacts import file_sha256
from ..storage.atomic import atomic_file
from ..storage.vectors import load_npy, save_npy
from .poolings import parse_pooling

__all__ = ["VectorCache", "encode_cached", "default_cache_dir", "sentences_digest", "CACHE_ENV"]

CACHE_ENV = "ISOTROPY_CACHE"
CACHE_FORMAT = 1


def default_cache_dir() -> Path:
    """``$ISOTROPY_CACHE``, else ``~/.cache/isotropy``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "isotropy"


def sentences_digest(sentences: Sequence[str]) -> str:
    """A digest of the exact list of sentences (order and count included)."""
    h = hashlib.blake2b(digest_size=20)
    for s in sentences:
        b = s.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


class _Refused(ValueError):
    """An entry on disk that is not served, with the reason."""


class VectorCache:
    """Encoded sentence vectors on disk, one ``.npy`` (+ ``.json`` key file) per entry.

    An entry is keyed by the model fingerprint, the canonical pooling name (with the
    digest of the token frequencies it weights by, if any), ``max_length`` and a digest
    of the sentences. Reads verify the stored key, a digest
    of the ``.npy`` file's bytes (recorded in the key file when it was written) and the
    array's shape and dtype, so a stale, truncated, foreign or overwritten file is never
    served: it is treated as a miss and rewritten. An entry written before digests were
    recorded is a miss too. Writes are atomic. :meth:`lookup` says why an entry on disk was refused
    (the distill's teacher cache warns with it); :meth:`get` is a quiet miss.
    """

    def __init__(self, directory: str | os.PathLike | None = None, enabled: bool = True) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.enabled = enabled
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(
        fingerprint: str, pooling: str, max_length: int, sentences: Sequence[str], backend: str | None = None
    ) -> dict[str, Any]:
        """The entry's key; ``backend`` (the encoder's runtime) is part of it only when given, so the keys of
        entries written without it stay what they were."""
        key = {
            "format": CACHE_FORMAT,
            "fingerprint": str(fingerprint),
            "pooling": str(pooling),
            "max_length": int(max_length),
            "sentences": sentences_digest(sentences),
            "rows": len(sentences),
        }
        if backend is not None:
            key["backend"] = str(backend)
        return key

    @staticmethod
    def _name(key: dict[str, Any]) -> str:
        return hashlib.blake2b(json.dumps(key, sort_keys=True).encode(), digest_size=16).hexdigest()

    def paths(self, key: dict[str, Any]) -> tuple[Path, Path]:
        name = self._name(key)
        return self.directory / f"{name}.npy", self.directory / f"{name}.json"

    def get(self, key: dict[str, Any], dim: int | None = None) -> np.ndarray | None:
        return self.lookup(key, dim)[0]

    def lookup(self, key: dict[str, Any], dim: int | None = None) -> tuple[np.ndarray | None, str | None]:
        """``(vectors, None)`` for a verified entry; ``(None, None)`` when there is none (or the cache is off);
        ``(None, reason)`` when an entry is on disk but was refused (damaged, stale or foreign)."""
        if not self.enabled:
            return None, None
        npy, meta = self.paths(key)
        try:
            try:
                stored = json.loads(meta.read_text(encoding="utf-8"))
            except (FileNotFoundError, NotADirectoryError):
                self.misses += 1
                return None, None  # never written (or its key file, written last, never was)
            if not isinstance(stored, dict) or stored.get("key") != key:
                raise _Refused("its key file does not hold this entry's key")
            try:
                digest = file_sha256(npy)
            except (FileNotFoundError, NotADirectoryError):
                raise _Refused("its vectors file is missing") from None
            if stored.get("digest") != digest:
                # overwritten in place (same shape), truncated, or no digest recorded
                raise _Refused("its bytes differ from the digest recorded when it was written")
            arr = load_npy(npy)
            if arr.dtype != np.float32 or arr.ndim != 2 or arr.shape[0] != key["rows"]:
                raise _Refused("its array has the wrong shape or type")
            if arr.shape[1] != stored.get("dim") or (dim is not None and arr.shape[1] != dim):
                raise _Refused("its vectors have the wrong width")
        except _Refused as exc:
            self.misses += 1
            return None, str(exc)
        except (OSError, ValueError, AttributeError, EOFError) as exc:  # JSONDecodeError is a ValueError
            self.misses += 1
            return None, f"it cannot be read ({type(exc).__name__}: {exc})"
        self.hits += 1
        return arr, None

    def put(self, key: dict[str, Any], vectors: np.ndarray, *, warn: bool = True) -> OSError | None:
        """Store ``vectors`` under ``key``, atomically; a write that fails (full or read-only disk) is reported
        on stderr (``warn``) and returned, never raised: a cache must not stop the work it serves."""
        if not self.enabled:
            return None
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            npy, meta = self.paths(key)
            save_npy(npy, vectors)
            # the key file is written last: an entry without it is simply a miss
            with atomic_file(meta, "w") as fh:
                json.dump({"key": key, "dim": int(vectors.shape[1]), "digest": file_sha256(npy)}, fh, sort_keys=True)
        except OSError as exc:  # a full or read-only cache must not stop an evaluation
            if warn:
                print(f"warning: could not write the vector cache in {self.directory}: {exc}", file=sys.stderr)
            return exc
        return None


def encode_cached(
    encoder: Any,
    sentences: Sequence[str],
    poolings: Sequence[str],
    cache: VectorCache | None = None,
    show_progress: bool | None = None,
) -> dict[str, np.ndarray]:
    """``{pooling: vectors}`` for ``sentences``, from ``cache`` where it has them; the
    poolings it lacks come from one ``encoder.encode_multi`` pass and are stored."""
    sentences = list(sentences)
    # the token frequencies a pooling weights by are part of its key (Encoder.pooling_key)
    key_of = getattr(encoder, "pooling_key", None) or (lambda p: parse_pooling(p).name)
    canon = {p: key_of(p) for p in poolings}
    out: dict[str, np.ndarray] = {}
    missing = []
    keys = {}
    fp = encoder.fingerprint() if cache is not None and cache.enabled else ""
    for p, c in canon.items():
        if cache is not None and cache.enabled:
            keys[p] = VectorCache.key(fp, c, encoder.max_length, sentences)
            got = cache.get(keys[p], encoder.dim)
            if got is not None:
                out[p] = got
                continue
        missing.append(p)
    if missing:
        fresh = encoder.encode_multi(sentences, missing, show_progress=show_progress)
        for p in missing:
            out[p] = fresh[p]
            if cache is not None and cache.enabled:
                cache.put(keys[p], fresh[p])
    return {p: out[p] for p in poolings}
