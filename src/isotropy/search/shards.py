"""What ``index build --engine dask`` proves about its shards and its work folder before it writes anything.

* **Outputs and inputs.** The shards and their folders are inputs: an output (or a work folder) that is,
  holds or sits inside one is refused, ``--force`` or not (:func:`check_apart`).
* **The work folder** (``OUTPUT.parts`` beside the output, the trailing slash of ``-o idx/`` dropped) is
  isotropy's only when it holds the marker :data:`WORK_MARKER`, written when the build makes the folder;
  any other existing folder there is refused with one line naming it (:func:`open_work`). It is a
  resumable cache: kept after a failure (a rerun resumes), removed after a successful build, and
  removed after a failure that left nothing in it (:func:`close_work`).
* **Encoder.** A shard whose sidecar records another encoder (fingerprint, pooling, max length, width)
  than the index's is refused unless ``allow_other_encoder``; a shard encoded through a transform is
  refused (the build applies the index's own calibration to raw encoder vectors) (:func:`check_encoder`).
* **Order.** Row ``i`` of the shards, in order, is line ``i`` of the corpus. ``isotropy encode --engine
  dask`` records in each shard's sidecar the sha256 of the text it encoded: those lines of the corpus must
  hash the same (as bytes, or as sentences when the recorded text file is at hand), else the shard is
  named. Shards are taken in the order given (a glob: by name); when the sidecars prove the numeric
  order (``p2`` before ``p10``) instead, that one is taken and said. Without such records a glob whose
  name order and numeric order differ is refused: nothing proves which one the corpus follows
  (:func:`order_shards`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IsotropyError
from ..storage.integrity import describe_provenance, provenance_of_record, verifying
from ..storage.text import read_sentences
from ..storage.vectors import read_sidecar, sidecar_path

__all__ = ["WORK_MARKER", "work_path", "check_apart", "check_work", "open_work", "close_work", "check_encoder", "order_shards"]

WORK_MARKER = ".isotropy-index-work"  # in every work folder a build made: the proof it is isotropy's
_COMPARED = ("fingerprint", "pooling", "max_length", "dim")  # as storage.integrity compares encoders


# --------------------------------------------------------------------------- the work folder


def work_path(output: str | os.PathLike, work: str | os.PathLike | None) -> Path:
    """The work folder: ``work``, else ``OUTPUT.parts`` beside the output (``-o idx/`` is ``idx``)."""
    if work is not None:
        return Path(work)
    out = Path(output)  # a Path drops a trailing slash
    if not out.name:
        out = out.resolve()
    return out.parent / f"{out.name}.parts"


def check_apart(path: Path, inputs: list[Any], what: str) -> None:
    """Refuse ``path`` (the output or the work folder) when it is, holds or lies inside one of ``inputs``."""
    out = path.resolve()
    for item in inputs:
        if item is None or not isinstance(item, (str, os.PathLike)) or not os.path.lexists(item):
            continue
        src = Path(item).resolve()
        if out == src:
            raise IsotropyError(f"the {what} {path} is the input {item}: it would be overwritten; choose another output")
        if src.is_dir() and out.is_relative_to(src):
            raise IsotropyError(f"the {what} {path} lies inside the input folder {item}; choose an output outside it")
        if src.is_relative_to(out):
            raise IsotropyError(f"the input {item} lies inside the {what} {path}, which would be replaced; choose another output")


def _is_ours(work: Path) -> bool:
    marker = work / WORK_MARKER
    if work.is_symlink() or not work.is_dir() or marker.is_symlink() or not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("kind") == "index-work"
    except (OSError, ValueError, AttributeError):
        return False


def check_work(work: Path) -> None:
    """Refuse, before any work, a work folder that exists and is not isotropy's (no :data:`WORK_MARKER`)."""
    if os.path.lexists(work) and not _is_ours(work):
        raise IsotropyError(
            f"{work} exists and is not the work folder of an isotropy index build (it lacks {WORK_MARKER}); "
            f"refusing to write into it: move it away, or choose another output (if an older isotropy made it, "
            f"it is a cache of that build: delete it)"
        )


def open_work(work: Path, output: Path) -> None:
    """Make the work folder, marked as isotropy's, or check that the existing one is."""
    check_work(work)
    if os.path.lexists(work):
        return
    work.mkdir()
    body = {"library": "isotropy", "kind": "index-work", "output": output.name}
    (work / WORK_MARKER).write_text(json.dumps(body) + "\n", encoding="utf-8")


def close_work(work: Path, success: bool) -> None:
    """After a build: a successful one removes its work folder (a cache: the index holds everything);
    a failed one removes it only when it holds nothing but its marker (else a rerun resumes from it)."""
    if not _is_ours(work):
        return
    if success or {p.name for p in work.iterdir()} <= {WORK_MARKER}:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- what the sidecars record


def _sidecars(shards: list[Path], digests: list[str]) -> list[dict | None]:
    """Each shard's sidecar (None without one); a sidecar that does not vouch for the shard's bytes is refused."""
    out = []
    for p, digest in zip(shards, digests):
        meta = read_sidecar(p)
        if meta is not None and meta.get("npy_sha256") != digest:
            if not verifying():
                meta = None  # --no-verify: its records are not about these bytes, so none is used
            else:
                raise IsotropyError(
                    f"{p} does not match the sha256 its sidecar {sidecar_path(p)} records: it changed since isotropy "
                    f"wrote it, so nothing the sidecar says about it (encoder, source text) holds; encode it again"
                )
        out.append(meta)
    return out


def _provenance(meta: dict) -> dict | None:
    if isinstance(meta.get("provenance"), dict):
        return meta["provenance"]
    if meta.get("format") == "isotropy-vector-shard":
        got = {
            "model": meta.get("model"),
            "fingerprint": meta.get("model_fingerprint"),
            "pooling": meta.get("pooling"),
            "max_length": meta.get("max_length"),
            "dim": meta.get("dim"),
        }
        return {k: v for k, v in got.items() if v is not None}
    return None


def check_encoder(shards: list[Path], digests: list[str], encoder: Any, allow: bool) -> list[dict | None]:
    """Refuse a shard whose sidecar records another encoder than ``encoder`` (unless ``allow``) or a transform;
    returns the shards' sidecars (None for a shard without one)."""
    metas = _sidecars(shards, digests)
    mine = provenance_of_record(encoder.record(), encoder.dim) or {}
    for p, meta in zip(shards, metas):
        if meta is None:
            continue
        if meta.get("format") == "isotropy-vector-shard" and meta.get("transform_hash") is not None:
            raise IsotropyError(
                f"{p} holds vectors encoded through a transform (its sidecar records one): the index build calibrates "
                f"the encoder's raw vectors itself; encode the shards without --transform"
            )
        theirs = _provenance(meta)
        if allow or not theirs:
            continue
        differ = [k for k in _COMPARED if theirs.get(k) is not None and mine.get(k) is not None and theirs[k] != mine[k]]
        if differ:
            diffs = "; ".join(f"{k}: {str(theirs[k])[:16]} vs {str(mine[k])[:16]}" for k in differ)
            raise IsotropyError(
                f"{p} was encoded by another encoder ({describe_provenance(theirs)}) than the index's "
                f"({encoder.describe()}; {diffs}): its rows and the queries would live in different spaces; encode the "
                f"shards with the same model and settings, or pass --allow-other-encoder to index them anyway"
            )
    return metas


# --------------------------------------------------------------------------- the order of the shards


def _natural_key(p: Path) -> list[tuple[int, Any]]:
    return [(0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", str(p))]


class _Corpus:
    """The corpus's bytes and line starts, to hash any run of its lines as the text file it came from."""

    def __init__(self, corpus: str | os.PathLike, sentences: list[str]) -> None:
        raw = Path(corpus).read_bytes()
        self.raw = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
        ends = np.flatnonzero(np.frombuffer(self.raw, dtype=np.uint8) == ord("\n")) + 1
        self.starts, self.sentences = np.concatenate([[0], ends]).tolist(), sentences

    def matches(self, first: int, rows: int, meta: dict) -> bool:
        """Whether lines ``first`` .. ``first + rows - 1`` are the text the sidecar ``meta`` records."""
        if first + rows > len(self.sentences):
            return False
        end = self.starts[first + rows] if first + rows < len(self.starts) else len(self.raw)
        chunk = self.raw[self.starts[first] : end]
        ends = [chunk, chunk[:-1] if chunk.endswith(b"\n") else chunk + b"\n"]  # with or without the last newline
        want = meta["source_sha256"]
        if any(hashlib.sha256(pre + c).hexdigest() == want for pre in (b"", b"\xef\xbb\xbf") for c in ends):
            return True
        source = Path(str(meta.get("source", "")))  # the text file itself, when at hand: compared as sentences
        try:
            if source.is_file() and hashlib.sha256(source.read_bytes()).hexdigest() == want:
                return read_sentences(source, allow_empty_file=True) == self.sentences[first : first + rows]
        except (OSError, IsotropyError):
            pass
        return False


def _source_record(meta: dict | None) -> dict | None:
    if meta is None or meta.get("format") != "isotropy-vector-shard" or not isinstance(meta.get("source_sha256"), str):
        return None
    return meta


def _first_mismatch(order: list[int], rows: list[int], records: list[dict | None], corpus: _Corpus) -> int | None:
    first = 0
    for i in order:
        if records[i] is not None and not corpus.matches(first, rows[i], records[i]):
            return i
        first += rows[i]
    return None


def order_shards(
    corpus: str | os.PathLike,
    sentences: list[str],
    shards: list[Path],
    rows: list[int],
    metas: list[dict | None],
    globbed: bool,
) -> tuple[list[int], str | None]:
    """The order of ``shards`` whose rows are the corpus's lines, proven where sidecars allow (see the
    module docs), and a line to say when it is not the order given; one line naming a shard otherwise."""
    given = list(range(len(shards)))
    natural = sorted(given, key=lambda i: _natural_key(shards[i])) if globbed else given
    records = [_source_record(m) for m in metas]
    if not any(records):
        if natural != given:
            names = ", ".join(shards[i].name for i in given[:4])
            raise IsotropyError(
                f"the shards sort one way by name ({names}, ...) and another by number, and no sidecar records the text "
                f"each was encoded from, so nothing proves which order {corpus} follows: rename them with zero-padded "
                f"numbers (p01, p02, ..., p10) so both orders agree, or encode them with 'isotropy encode --engine dask' "
                f"(its sidecars prove the order)"
            )
        return given, None
    text = _Corpus(corpus, sentences)
    bad = _first_mismatch(given, rows, records, text)
    if bad is None:
        return given, None
    if natural != given and _first_mismatch(natural, rows, records, text) is None:
        return natural, (
            f"the shards' sidecars show that {corpus} follows their numeric order ({', '.join(shards[i].name for i in natural[:3])}, "
            f"...), not their name order: indexed in that order"
        )
    first = sum(rows[i] for i in given[: given.index(bad)])
    source = records[bad].get("source") or records[bad].get("source_name")
    raise IsotropyError(
        f"shard {shards[bad]} was encoded from {source}, but lines {first + 1}-{first + rows[bad]} of {corpus} (where "
        f"its rows fall, in the shards' name order) are other text: the corpus and the shards are in different orders "
        f"or of different text; build the corpus from the shards' text files in the shards' order"
    )
