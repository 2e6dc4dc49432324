"""The corpus pass's sums kept beside the teacher's vectors, so that a rerun with other fit settings skips the pass
(the distill package, between the command's run and the pass).

With every chunk's teacher vectors cached, a rerun of ``isotropy distill --corpus`` with another ``--dims``,
``--lam``, ``--strength-by`` or ``--alpha`` still read every chunk and summed it again: at 999,998 lines the
statistics took 132 s of a 250 s rerun (RESULTS `factory-curve`). None of those options changes the sums (``--dims``
projects them after the pass; the strength, its criterion and the ridge act in the solve), so the sums the pass
gathers (:class:`~.corpus_fit.CorpusFit`: the teacher map's moments, the fitting and held-out token sums, the
held-out sample) are kept in the teacher cache's folder (``sums/``), one entry per key: what keys the teacher's
vectors (its fingerprint, backend, pooling and ``max_length``), a digest of the static table and its tokenizer
(what tokenises and pools the corpus), a digest of the corpus's sentences as the pass reads them (order included),
the span kinds, whether tokens are fitted, and the pass's constants. The run that writes an entry records how
its sums were made; a run that reads one says so (``teacher_cache`` in the card) and records no teacher seconds.
The key is made again after the pass: where it differs (the corpus file was changed while the pass read it), the
sums may not be those of the text the key names, and they are not kept (one warning line).

An entry is one ``.npy`` file per array (written and read with pickling off) and ``entry.json`` (the key, the
scalars, every file's sha256), written atomically (:func:`~isotropy.storage.atomic.atomic_dir`) and verified
before it is served: a damaged entry (a flipped byte, a missing file) is gathered again and replaced, with one
warning line naming it and why; a write that fails (a full disk) gives one warning line and the run goes on. An
entry at a million lines takes ~0.7 GB (677 MB). Standard input is never cached: the pass could not read it twice.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from ..storage.artifacts import file_sha256
from ..storage.atomic import atomic_dir
from ..transforms.moments import Moments
from ..transforms.teacher_map import TeacherMap
from ..transforms.token_state import sums_from_arrays, sums_to_arrays
from . import corpus_fit as pass_
from .corpus_fit import CorpusFit
from .table_cache import ENTRY, read_entry

__all__ = ["SumsCache", "SUMS_FOLDER", "sums_key", "cached_sums"]

SUMS_FOLDER = "sums"  # under the teacher cache's folder
SUMS_FORMAT = 1  # bumped when the pass's sums change meaning
SCALARS = ("sentences", "empty", "spans", "chunks", "cached", "cached_lines", "first", "varied", "seconds", "warnings")


def _digest_arrays(h: Any, *arrays: Any) -> None:
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(memoryview(a).cast("B"))


def sums_key(teacher_key: dict | None, static: Any, source: Any, spans: tuple, tokens: bool) -> dict | None:
    """What decides the pass's sums (module docs); None when they cannot be keyed (a teacher without a
    fingerprint, or standard input). Reads the corpus once for its digest."""
    if teacher_key is None or source.stdin:
        return None
    corpus, n = hashlib.sha256(), 0
    for chunk in source.chunks(pass_.CHUNK):
        n += len(chunk)
        for text in chunk:
            corpus.update(text.encode("utf-8", "surrogatepass") + b"\n")
    table = hashlib.sha256()  # what tokenises and pools the corpus (Model2VecIds; corpus_fit's _pooled)
    _digest_arrays(table, np.asarray(static.embedding))
    tokenizer = getattr(static, "tokenizer", None)
    table.update((tokenizer.to_str() if hasattr(tokenizer, "to_str") else repr(tokenizer)).encode())
    table.update(repr((getattr(static, "max_length", None), getattr(static, "unk_token_id", None))).encode())
    return {
        "format": SUMS_FORMAT,
        "what": "isotropy distill --corpus: the corpus pass's sums",
        "teacher": dict(teacher_key),
        "table": table.hexdigest(),
        "corpus": {"sha256": corpus.hexdigest(), "sentences": n},
        "spans": list(spans),
        "tokens": bool(tokens),
        "pass": {k: getattr(pass_, k.upper()) for k in ("chunk", "held_out", "held_sample", "target_power")},
    }


def _to_arrays(cf: CorpusFit) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    tm = cf.teacher_map
    arrays = {f"map.{k}": np.asarray(v) for k, v in tm.moments_.to_arrays().items()}
    scalars: dict[str, Any] = {k: getattr(cf, k) for k in SCALARS}
    scalars["map"] = [tm.n_features_in_, tm.n_features_out_]
    if cf.fit is not None:
        arrays.update(sums_to_arrays(cf.fit, "fit"))
        arrays.update(sums_to_arrays(cf.held, "held"))
    for name, parts in cf.sample.items():
        if parts:
            arrays[f"sample.{name}"] = np.concatenate(parts)
    return arrays, scalars


def _from_arrays(arrays: dict[str, np.ndarray], scalars: dict[str, Any], alpha: float) -> CorpusFit:
    d_in, d_out = (int(x) for x in scalars["map"])
    tm = TeacherMap.from_moments(Moments.from_arrays({k[4:]: v for k, v in arrays.items() if k.startswith("map.")}), d_in, alpha)
    if tm.n_features_out_ != d_out:
        raise ValueError(f"the map's moments have {tm.moments_.dim} columns, not {d_in} + {d_out}")
    cf = CorpusFit(tm, **{k: scalars[k] for k in SCALARS})
    if "fit.meta" in arrays:
        cf.fit, cf.held = sums_from_arrays(arrays, "fit"), sums_from_arrays(arrays, "held")
    cf.sample = {name: [arrays[f"sample.{name}"]] if f"sample.{name}" in arrays else [] for name in cf.sample}
    return cf


class SumsCache:
    """The pass's sums on disk, one verified folder per key (module docs)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def path(self, key: dict[str, Any]) -> Path:
        return self.directory / hashlib.blake2b(json.dumps(key, sort_keys=True).encode(), digest_size=16).hexdigest()

    def lookup(self, key: dict[str, Any], alpha: float) -> tuple[CorpusFit | None, str | None]:
        """``(CorpusFit, None)`` for a verified entry; ``(None, None)`` when there is none; ``(None, reason)`` when
        one is on disk but refused."""
        folder = self.path(key)
        stored, reason = read_entry(folder, key)
        if stored is None:
            return None, reason
        arrays = {}
        for name, digest in stored["files"].items():
            try:
                if file_sha256(folder / f"{name}.npy") != digest:
                    return None, f"{name}.npy's bytes differ from the digest recorded when it was written"
                arrays[name] = np.load(folder / f"{name}.npy", allow_pickle=False)
            except (OSError, ValueError) as exc:
                return None, f"{name}.npy cannot be read ({type(exc).__name__})"
        try:
            return _from_arrays(arrays, stored["scalars"], alpha), None
        except (IsotropyError, KeyError, TypeError, ValueError) as exc:
            return None, f"its arrays do not make the pass's sums ({exc})"

    def put(self, key: dict[str, Any], cf: CorpusFit) -> Exception | None:
        """Store ``cf``'s sums under ``key`` atomically; a failed write is returned, never raised."""
        try:
            arrays, scalars = _to_arrays(cf)
            self.directory.mkdir(parents=True, exist_ok=True)
            with atomic_dir(self.path(key)) as tmp:
                files = {}
                for name, value in arrays.items():
                    np.save(tmp / f"{name}.npy", value, allow_pickle=False)
                    files[name] = file_sha256(tmp / f"{name}.npy")
                entry = {"key": key, "scalars": scalars, "files": files}
                (tmp / ENTRY).write_text(json.dumps(entry, sort_keys=True, indent=1), encoding="utf-8")
        except (OSError, IsotropyError, TypeError, ValueError) as exc:
            return exc
        return None


def cached_sums(
    make: Callable[[], CorpusFit], cache: SumsCache | None, key: dict | None, alpha: float, rekey: Callable[[], Any] | None = None
) -> tuple[CorpusFit, str]:
    """``(the pass's sums, how they came: "cached", "gathered" or "off")``: read from ``cache`` under ``key`` when a
    verified entry is there (``alpha``: the teacher map's ridge, which the sums do not depend on), else ``make()``
    and stored (module docs), unless ``rekey()`` (the key made again after the pass) differs: the corpus changed
    while the pass read it, so its sums may not be the key's text's, and they are not kept (one warning)."""
    if cache is None or key is None:
        return make(), "off"
    t0 = time.perf_counter()
    cf, reason = cache.lookup(key, alpha)
    if cf is not None:
        cf.seconds = {"sums_read": time.perf_counter() - t0}  # not the first run's: this run encoded and summed nothing
        return cf, "cached"
    if reason is not None:
        print(
            f"warning: the corpus sums cache entry {cache.path(key)} is damaged ({reason}): gathering them again", file=sys.stderr
        )
    cf = make()
    if rekey is not None and rekey() != key:
        print("warning: the corpus changed while the pass read it: this run's sums are not kept in the cache", file=sys.stderr)
        return cf, "gathered"
    failed = cache.put(key, cf)
    if failed is not None:
        print(f"warning: cannot write the corpus sums cache in {cache.directory} ({failed}): going on", file=sys.stderr)
    return cf, "gathered"
