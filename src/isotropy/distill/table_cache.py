"""The distilled table (model2vec's vocabulary pass) kept beside the teacher's vectors (the distill package's lowest room).

After the teacher's encoding of the corpus, model2vec's vocabulary pass (one forward pass of the teacher per token
of its vocabulary, ~2 minutes for the default model on two cores) is the distill's largest cost, and it does not
depend on the corpus nor, with ``--fit tokens`` (the table is distilled at the teacher's full width), on ``--dims``,
the strength or the spans. So with a corpus its output is kept in the teacher cache's folder (``tables/``), one
entry per key: the teacher's fingerprint (its weights and tokenizer, as the teacher vectors are keyed), the PCA
width asked of model2vec (None at full width), the table's float type and model2vec's version. A rerun with other
fit settings then reads the table instead of distilling it again.

An entry is the folder model2vec's ``save_pretrained`` writes (``model.safetensors``, ``tokenizer.json``,
``config.json``) plus ``entry.json``: the key, the table's shape and the sha256 of every file. It is written
atomically (a temporary folder renamed into place, :func:`~isotropy.storage.atomic.atomic_dir`) and verified before
it is served (the key, every file's digest, the table's shape): a damaged entry (a flipped byte, a missing file) is
distilled again and replaced, with one warning line naming it and why. A write that fails (a full disk, a read-only
folder) gives one warning line and the run goes on.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from ..storage.artifacts import file_sha256
from ..storage.atomic import atomic_dir

__all__ = ["TableCache", "TABLE_FOLDER", "table_key", "cached_table", "read_entry"]

TABLE_FOLDER = "tables"  # under the teacher cache's folder
TABLE_FORMAT = 1
ENTRY = "entry.json"


def table_key(
    fingerprint: str, pca_dims: int | None, quantize_to: str = "float32", words: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What decides the distilled table: the teacher, the PCA width, the float type and model2vec's version, and with
    whole-word rows (``isotropy distill --words N``) ``words``: N, how many words and a digest of their sorted list
    (a table without them has no ``words`` part, so it keeps the key it had before the option existed)."""
    import model2vec

    key = {
        "format": TABLE_FORMAT,
        "what": "model2vec distill, the teacher's vocabulary",
        "fingerprint": str(fingerprint),
        "pca_dims": None if pca_dims is None else int(pca_dims),
        "quantize_to": quantize_to,
        "model2vec": str(getattr(model2vec, "__version__", "?")),
    }
    if words:
        key["words"] = dict(words)
    return key


def read_entry(folder: Path, key: dict[str, Any]) -> tuple[dict | None, str | None]:
    """A cache entry's ``entry.json`` when it holds ``key`` and a ``files`` table; ``(None, None)`` when there is
    none (never written: the file is written with the rest, renamed into place at once), ``(None, reason)`` when
    one is there but refused."""
    try:
        stored = json.loads((folder / ENTRY).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"its entry file cannot be read ({type(exc).__name__})"
    if not isinstance(stored, dict) or stored.get("key") != key or not isinstance(stored.get("files"), dict):
        return None, "its entry file does not hold this entry's key"
    return stored, None


class TableCache:
    """Distilled tables on disk, one verified folder per key (module docs)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def path(self, key: dict[str, Any]) -> Path:
        return self.directory / hashlib.blake2b(json.dumps(key, sort_keys=True).encode(), digest_size=16).hexdigest()

    def lookup(self, key: dict[str, Any]) -> tuple[Any, str | None]:
        """``(StaticModel, None)`` for a verified entry; ``(None, None)`` when there is none; ``(None, reason)`` when
        one is on disk but refused."""
        folder = self.path(key)
        stored, reason = read_entry(folder, key)
        if stored is None:
            return None, reason
        for name, digest in stored["files"].items():
            try:
                if file_sha256(folder / name) != digest:
                    return None, f"{name}'s bytes differ from the digest recorded when it was written"
            except OSError:
                return None, f"{name} is missing"
        try:
            from model2vec import StaticModel

            static = StaticModel.from_pretrained(str(folder))
        except Exception as exc:  # noqa: BLE001 - verified bytes that model2vec still refuses: distil again
            return None, f"model2vec cannot load it ({type(exc).__name__})"
        if list(np.shape(static.embedding)) != stored.get("shape"):
            return None, "its table has the wrong shape"
        return static, None

    def put(self, key: dict[str, Any], static: Any) -> Exception | None:
        """Store ``static`` under ``key`` atomically; a failed write is returned, never raised."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with atomic_dir(self.path(key)) as tmp:
                static.save_pretrained(str(tmp))
                files = {p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file() and not p.name.startswith(".")}
                entry = {"key": key, "shape": list(np.shape(static.embedding)), "files": files}
                (tmp / ENTRY).write_text(json.dumps(entry, sort_keys=True, indent=1), encoding="utf-8")
        except (OSError, IsotropyError) as exc:
            return exc
        return None


def cached_table(make: Callable[[], Any], cache: TableCache | None, key: dict[str, Any] | None) -> tuple[Any, str]:
    """``(the distilled StaticModel, how it came: "cached", "distilled" or "off")``: read from ``cache`` under
    ``key`` when a verified entry is there, else ``make()`` and stored (module docs)."""
    if cache is None or key is None:
        return make(), "off"
    static, reason = cache.lookup(key)
    if static is not None:
        return static, "cached"
    if reason is not None:
        print(
            f"warning: the distilled-table cache entry {cache.path(key)} is damaged ({reason}): distilling it again",
            file=sys.stderr,
        )
    static = make()
    failed = cache.put(key, static)
    if failed is not None:
        print(f"warning: cannot write the distilled-table cache in {cache.directory} ({failed}): going on", file=sys.stderr)
    return static, "distilled"
