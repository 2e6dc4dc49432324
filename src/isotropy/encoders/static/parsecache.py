"""The parse cache of word-vector files: parsed once, memory-mapped afterwards, never served stale or damaged (layer 4).

An entry (``ROOT/static/NAME-KEY``: ``vectors.npy``, ``tokens.json``, ``meta.json``; ``ROOT`` is
``$ISOTROPY_CACHE`` or ``~/.cache/isotropy``) is written atomically (:mod:`isotropy.storage`), ``meta.json``
last, and is trusted only as far as it is proved (issue #31):

* the source: ``meta.json`` records the sha256 of every byte of the file, hashed while it was parsed
  (:func:`.wordvectors.parse_word_vectors`), and its size, modification and status-change times and inode.
  When all four are unchanged the source is the one hashed (an edit moves the status-change time, which no
  ``touch -r``, ``cp -p`` or ``rsync -t`` can set back); otherwise the source is hashed again and the entry
  serves only a file of the same content (W3);
* the entry: ``meta.json`` records the sha256 of ``vectors.npy`` and ``tokens.json``, checked once per process
  (again if either file changes) unless verification is off (``isotropy --no-verify``, ``$ISOTROPY_NO_VERIFY``,
  :func:`isotropy.storage.integrity.verifying`). A damaged entry is parsed again from the source with one
  warning line (W4); with the source gone there is nothing to serve (the load names the missing file).

Where (U16, U14): :func:`parse_cache` sets it for a block: ``True`` (the default root), ``False`` (parse in
memory, write nothing: ``isotropy eval --no-cache``) or a folder used as the root (``--cache-dir``, as for the
vector cache). A cache folder that cannot be written (read-only, a file in its place) parses in memory with
one warning line naming it.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import IsotropyError
from ...storage.atomic import atomic_dir, atomic_file
from ...storage.integrity import sha256_file, verifying
from .wordvectors import parse_word_vectors

__all__ = ["load_word_vectors", "parse_cache", "cache_dir"]

CACHE_FORMAT = 2  # 1: keyed on size, mtime and the first and last MiB, no digest of its own files
ENTRY_FILES = ("vectors.npy", "tokens.json")
_where: contextvars.ContextVar[Any] = contextvars.ContextVar("isotropy_parse_cache", default=True)
_verified: dict[str, tuple] = {}  # entries whose files were hashed in this process: folder -> their stat


@contextlib.contextmanager
def parse_cache(cache: Any = True) -> Iterator[None]:
    """Within this block, word-vector files are cached under the default root (``True`` or None), not at all
    (``False``), or under the folder ``cache`` (its ``static/`` subfolder); a
    :class:`~isotropy.encoders.cache.VectorCache` gives its own setting (disabled: none; else its folder)."""
    if hasattr(cache, "enabled") and hasattr(cache, "directory"):
        cache = cache.directory if cache.enabled else False
    token = _where.set(True if cache is None else cache)
    try:
        yield
    finally:
        _where.reset(token)


def cache_dir() -> Path | None:
    """The folder holding the entries now (None: caching is off)."""
    where = _where.get()
    if where is False:
        return None
    if where is True:
        from ..cache import default_cache_dir

        return default_cache_dir() / "static"
    return Path(where).expanduser() / "static"


def fingerprint_dir() -> Path | None:
    """Where encoders keep their fingerprints between processes (:class:`~isotropy.storage.stamps.DigestMemo`): the
    cache root's ``fingerprints/``, beside this cache's ``static/``; None while caching is off."""
    where = cache_dir()
    return None if where is None else where.parent / "fingerprints"


def _stat(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino}


def _in_memory(path: Path, show_progress) -> tuple[list[str], np.ndarray, dict]:
    return parse_word_vectors(path, lambda shape: np.empty(shape, dtype=np.float32), show_progress)


def _entry_ok(folder: Path, meta: dict, verify: bool) -> bool:
    """Whether the entry's files are the ones ``meta.json`` recorded (hashed once per process)."""
    if not verify:
        return True
    seen = tuple((n, *_stat(folder / n).values()) for n in ENTRY_FILES)
    if _verified.get(str(folder)) == seen:
        return True
    digests = meta.get("files") or {}
    if any(digests.get(n) != sha256_file(folder / n) for n in ENTRY_FILES):
        return False
    _verified[str(folder)] = seen
    return True


def _cached(path: Path, folder: Path) -> tuple[list[str], np.ndarray, dict] | None:
    """The entry of ``path`` when it is proved current and whole; None to parse (a warning when it was damaged)."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        source = meta["source"]
        if meta.get("cache_format") != CACHE_FORMAT or source.get("path") != str(path):
            return None
        now = _stat(path)
        moved = now != {k: source.get(k) for k in now}
        if moved and (now["size"] != source.get("size") or sha256_file(path) != source.get("sha256")):
            return None  # the source changed (W3): parse it again
        if not _entry_ok(folder, meta, verifying()):
            print(f"warning: the parse cache entry {folder} is damaged (a digest differs); parsing {path} again", file=sys.stderr)
            return None
        vectors = np.load(folder / "vectors.npy", mmap_mode="r")
        tokens = json.loads((folder / "tokens.json").read_text(encoding="utf-8"))
        if vectors.shape == (meta["words"] + 1, meta["dim"]) and len(tokens) == meta["words"] + 1:
            if moved:
                _restat(folder, meta, now)
            return tokens, vectors, meta
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # a missing or unreadable entry is parsed again
    return None


def _restat(folder: Path, meta: dict, now: dict) -> None:
    """Record a source's new times and inode once its content is proved the same (a copy, ``touch``), so the next
    load need not hash it again; best effort (a read-only cache simply hashes it next time)."""
    try:
        with atomic_file(folder / "meta.json", "w") as fh:
            json.dump({**meta, "source": {**meta["source"], **now}}, fh)
    except (OSError, IsotropyError):
        pass


def _writable(root: Path) -> str | None:
    """None when entries can be written under ``root``, else why not (an actual probe: root ignores modes)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=root))
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def load_word_vectors(path: str | os.PathLike, show_progress: bool | None = None) -> tuple[list[str], np.ndarray, dict]:
    """``(tokens, (V + 1, d) float32 vectors, meta)`` of a word-vector file; the last token is the unknown one
    (a zero row). From the parse cache when an entry is proved current and whole, else parsed (into the cache,
    memory-mapped, when it can be written; in memory otherwise)."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise IsotropyError(f"word-vector file {path} does not exist")
    root = cache_dir()
    if root is None:
        return _in_memory(path, show_progress)
    key = hashlib.blake2b(str(path).encode(), digest_size=12).hexdigest()
    folder = root / f"{path.name[:40]}-{key}"
    hit = _cached(path, folder)
    if hit is not None:
        return hit
    why = _writable(root)
    if why is not None:
        print(f"warning: the parse cache {root} cannot be written ({why}); parsing {path} in memory", file=sys.stderr)
        return _in_memory(path, show_progress)
    stat = _stat(path)
    with atomic_dir(folder) as tmp:
        tokens, vectors, meta = parse_word_vectors(
            path, lambda shape: np.lib.format.open_memmap(tmp / "vectors.npy", mode="w+", dtype=np.float32, shape=shape),
            show_progress,
        )  # fmt: skip
        vectors.flush()
        del vectors
        (tmp / "tokens.json").write_text(json.dumps(tokens, ensure_ascii=False), encoding="utf-8")
        files = {n: sha256_file(tmp / n) for n in ENTRY_FILES}
        source = {"path": str(path), **stat, "sha256": meta.pop("sha256")}
        meta = {"cache_format": CACHE_FORMAT, "source": source, "files": files, **meta}
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")  # last: an entry without it is a miss
    _verified[str(folder)] = tuple((n, *_stat(folder / n).values()) for n in ENTRY_FILES)
    return tokens, np.load(folder / "vectors.npy", mmap_mode="r"), meta
