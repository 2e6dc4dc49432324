"""The index ``isotropy serve`` answers from: watched on disk, reloaded whole, and said without absolute paths (layer 5).

* The version of the folder is the ``stat`` of each file that makes the index (``config.json``, the faiss
  index, its on-disk lists, the kept vectors, the sentences, the state, the transform and token-frequency
  folders) and the folder's own inode: any
  change (``isotropy index add``, a rebuild, a folder replaced in two steps) makes the next request try a
  load, and a load that fails is tried again at the next change, while the old index keeps serving and
  every response's ``warnings`` says so. A deleted folder is said too.
* Nothing a response holds names an absolute path (:meth:`Served.scrub`): the index folder, the model and
  a transform named in the config are cut to their last component, and so is any other absolute path in
  a message from below.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import IsotropyError
from ..storage.artifacts import CONFIG_NAME, STATE_NAME
from .index import Index
from .store import INDEX_FILE, LISTS_FILE, SENTENCES_FILE, STATS_DIR, TRANSFORM_DIR, VECTORS_FILE

__all__ = ["Served", "health", "public_model", "scrub"]

# the files of an index, and its two sub-folders (a folder's modification time moves when an entry is added)
WATCHED = (CONFIG_NAME, INDEX_FILE, LISTS_FILE, VECTORS_FILE, SENTENCES_FILE, STATE_NAME, TRANSFORM_DIR, STATS_DIR)
# an absolute path in a message: a "/" that starts a word (not "a/b", not "http://"), up to a space, a quote,
# a bracket, a comma, a semicolon or a colon; replaced by its last component
_ABSOLUTE = re.compile(r"(?<![^\s'\"(\[=])/(?:[^\s/'\"()\[\],;:]+/)*([^\s/'\"()\[\],;:]+)/?")


def public_model(name: Any) -> Any:
    """A model as a response may name it: a local folder or file by its last component, never its absolute path."""
    if isinstance(name, str) and (os.path.isabs(name) or os.path.exists(name)):
        return Path(name).name
    return name


def scrub(text: str, *paths: Any) -> str:
    """``text`` with each of ``paths`` (any spelling: as given, absolute, resolved) and then any other absolute
    path replaced by its last component."""
    for p in sorted({str(p) for p in paths if p}, key=len, reverse=True):  # the longest first: a folder's files
        for spelled in sorted({str(Path(p).resolve()), str(Path(p).absolute()), p}, key=len, reverse=True):
            if os.path.isabs(spelled) and len(spelled) > 1:
                text = text.replace(spelled, Path(p).name)
    return _ABSOLUTE.sub(lambda m: m.group(1), text)


def health(index: Index, load_seconds: float | None = None) -> dict[str, Any]:
    """What ``GET /health`` answers: the model, the index's size and the encoder's weights fingerprint."""
    rec = index.encoder.record()
    t = index.transform
    return {
        "status": "ok",
        "model": public_model(rec.get("model")),
        "pooling": rec.get("pooling"),
        "max_length": rec.get("max_length"),
        "fingerprint": rec.get("fingerprint"),
        "size": len(index),
        "dim": index.dim,
        "index": index.kind,
        "transform": None if t is None else t.describe(),
        "load_seconds": None if load_seconds is None else round(load_seconds, 3),
    }


def _version(index_dir: Path | None) -> tuple | None:
    """What identifies the saved version of an index folder (a ``stat`` a file); None when the folder is gone."""
    if index_dir is None:
        return ()
    try:
        folder = os.stat(index_dir).st_ino  # a folder renamed in (every save) is a new inode
    except OSError:
        return None
    stats: list[tuple | None] = [(folder,)]
    for name in WATCHED:
        try:
            st = os.stat(index_dir / name)
            stats.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            stats.append(None)
    return tuple(stats)


def _paths_in_config(index_dir: Path) -> list[str]:
    """The model and transform paths the folder's config names now (a reload may fail on either)."""
    try:
        cfg = json.loads((index_dir / CONFIG_NAME).read_text(encoding="utf-8"))
        found = [cfg.get("encoder", {}).get("model"), (cfg.get("transform") or {}).get("path")]
    except (OSError, ValueError, AttributeError):
        return []
    return [p for p in found if isinstance(p, str)]


def _device_of(index: Index) -> str | None:
    """The device the served model runs on, for loading the next version there too."""
    device = getattr(index.encoder, "device", None)
    return None if device is None else str(device)


class Served:
    """The index being served, reloaded when its folder changes on disk (module docs)."""

    def __init__(
        self, index: Index, load_seconds: float | None, index_dir: str | os.PathLike | None, log: Any, rerank: int | None
    ) -> None:
        self.index, self.load_seconds, self.log, self.rerank = index, load_seconds, log, rerank
        self.dir = None if index_dir is None else Path(index_dir)
        self.version = _version(self.dir)
        self.generation = 1
        self.stale: str | None = None  # one line while a changed folder cannot be loaded
        self.gone: str | None = None  # one line while the folder is missing
        self.lock = threading.Lock()  # one request at a time reads or swaps the index

    def scrub(self, text: str) -> str:
        """``text`` as a response may hold it: no absolute path (module docs)."""
        model = self.index.encoder.record().get("model")
        return scrub(text, self.dir, model, *([] if self.dir is None else _paths_in_config(self.dir)))

    def refresh(self) -> None:
        """Under the caller's lock: load the folder again when its version changed (swapped in only once loaded)."""
        now = _version(self.dir)
        if now is None:
            if self.gone is None:
                self.gone = (
                    f"the index folder {self.dir.name} was deleted or moved away on disk; still serving the version loaded before"
                )
                self.log(f"warning: {self.gone}")
            return
        self.gone = None
        if now == self.version:
            return
        self.version = now  # tried once per version on disk: a broken one is tried again when a file of it changes
        start = time.perf_counter()
        try:
            fresh = Index.load(self.dir, device=_device_of(self.index), rerank=self.rerank)
        except IsotropyError as exc:
            self.stale = self.scrub(
                f"the index folder changed on disk but cannot be loaded ({exc}); still serving the version loaded before"
            )
            self.log(f"warning: {self.stale}")
            return
        self.index, self.load_seconds, self.stale = fresh, time.perf_counter() - start, None
        self.generation += 1
        self.log(f"reloaded {self.dir.name} ({len(fresh)} sentences): it changed on disk")

    def damaged(self) -> str | None:
        """One line when a memory-mapped file of the served index was cut short since it was loaded (searches fail)."""
        try:
            self.index.check_mapped()
        except IsotropyError as exc:
            return self.scrub(str(exc))
        return None

    def info(self) -> dict[str, Any]:
        return {**health(self.index, self.load_seconds), "generation": self.generation, "warnings": self.notes()}

    def notes(self) -> list[str]:
        return [note for note in (self.stale, self.gone, self.damaged()) if note]
