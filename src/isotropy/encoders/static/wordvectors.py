"""Word-vector files: GloVe text, word2vec text and binary, fastText ``.vec``; parsed once into a memory-mapped cache (layer 4).

Formats (told apart by their first line, and ``.bin`` or undecodable bytes for binary):

* GloVe text: ``word v1 ... vd`` per line, no header (d from the first line);
* word2vec text / fastText ``.vec``: a header ``V d``, then GloVe-like lines;
* word2vec binary: the header ``V d\\n``, then per word ``word<space>`` and d little-endian float32
  (an optional newline after them).

A file is parsed once, streaming rows into a preallocated ``numpy`` memmap (``V + 1`` rows: the last is the
unknown token's zero row), so a 2M x 300 file never needs twice its size in memory; the cache folder
(``$ISOTROPY_CACHE/static/KEY``: ``vectors.npy``, ``tokens.json``, ``meta.json``) is keyed on the file's path and
verified on its size, modification time and a digest of its first and last MiB, so an edited source is parsed
again. Reloads are a memory map and a JSON read. Written atomically (:mod:`isotropy.storage`).

Every fault is one line naming the file and line: a ragged row, a value that is not a number, a header whose
count disagrees with the rows, a duplicate word, a truncated binary file, an empty file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ..._progress import ProgressBar
from ...errors import IsotropyError
from ...storage.atomic import atomic_dir
from .table import UNK

__all__ = ["load_word_vectors", "WORD_VECTOR_SUFFIXES", "cache_dir"]

WORD_VECTOR_SUFFIXES = (".txt", ".vec", ".bin", ".w2v")
CACHE_FORMAT = 1
SAMPLE = 1 << 20  # bytes hashed at each end of the source for the cache check
LINES = 20000  # text lines parsed at a time


def cache_dir() -> Path:
    from ..cache import default_cache_dir

    return default_cache_dir() / "static"


def _source_id(path: Path) -> dict:
    st = path.stat()
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        h.update(fh.read(SAMPLE))
        if st.st_size > SAMPLE:
            fh.seek(max(SAMPLE, st.st_size - SAMPLE))
            h.update(fh.read(SAMPLE))
    return {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sample": h.hexdigest()}


def _header(line: bytes) -> tuple[int, int] | None:
    parts = line.split()
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return None


def _is_binary(path: Path, header_len: int) -> bool:
    if path.suffix == ".bin":
        return True
    with open(path, "rb") as fh:
        fh.seek(header_len)
        chunk = fh.read(4096)
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(chunk) - 4  # not a multi-byte character cut by the 4096-byte read
    return b"\0" in chunk


def _count_lines(path: Path, start: int) -> int:
    n, last = 0, b"\n"
    with open(path, "rb") as fh:
        fh.seek(start)
        while block := fh.read(1 << 24):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def _bad(path: Path, line: int, what: str) -> IsotropyError:
    return IsotropyError(f"{path} line {line}: {what}; not a word-vector file (GloVe, word2vec or fastText)")


def _parse_chunk(path: Path, lines: list[bytes], first: int, dim: int, out: np.ndarray) -> list[str]:
    words, values = [], []
    for i, raw in enumerate(lines):
        try:
            text = raw.decode("utf-8").rstrip("\r\n").rstrip(" ")
        except UnicodeDecodeError:
            raise _bad(path, first + i, "not UTF-8 text") from None
        parts = text.split(" ")
        if len(parts) != dim + 1:
            raise _bad(path, first + i, f"{len(parts) - 1} values where the table has {dim} (a ragged row)")
        words.append(parts[0])
        values.extend(parts[1:])
    try:
        out[:] = np.array(values, dtype=np.float32).reshape(len(lines), dim)
    except ValueError:
        for i, raw in enumerate(lines):  # find the line to name
            try:
                np.array(raw.decode("utf-8").split(" ")[1:], dtype=np.float32)
            except ValueError:
                raise _bad(path, first + i, "a value that is not a number") from None
        raise
    if not np.isfinite(out).all():
        row = int(np.flatnonzero(~np.isfinite(out).all(axis=1))[0])
        raise _bad(path, first + row, "a value that is not finite")
    return words


def _parse_text(path: Path, vectors_path: Path, header: tuple[int, int] | None, header_len: int, show_progress):
    """Stream the text rows into a preallocated memmap of ``V + 1`` rows; return the words."""
    start_line = 2 if header else 1
    with open(path, "rb") as fh:
        fh.seek(header_len)
        first = fh.readline()
    if not first.strip():
        raise IsotropyError(f"{path} holds no word vector (it is empty)")
    n = _count_lines(path, header_len)
    dim = header[1] if header else len(first.decode("utf-8", "replace").rstrip().split(" ")) - 1
    if header and header[0] != n:
        raise IsotropyError(f"{path} line 1: the header says {header[0]} words, the file holds {n} rows")
    if dim < 1:
        raise _bad(path, start_line, "a word without values")
    table = np.lib.format.open_memmap(vectors_path, mode="w+", dtype=np.float32, shape=(n + 1, dim))
    words: list[str] = []
    with open(path, "rb") as fh, ProgressBar(n, show_progress, f"parsing {path.name}", min_total=200_000, unit="words") as bar:
        fh.seek(header_len)
        while True:
            lines = [line for _, line in zip(range(LINES), fh)]
            if not lines:
                break
            row = len(words)
            words.extend(_parse_chunk(path, lines, start_line + row, dim, table[row : row + len(lines)]))
            bar.advance(len(lines))
    table[n] = 0.0
    table.flush()
    return words, dim


def _parse_binary(path: Path, vectors_path: Path, header: tuple[int, int] | None, header_len: int, show_progress):
    if header is None:
        raise IsotropyError(f"{path} line 1: a binary word2vec file starts with a header 'WORDS DIM'")
    n, dim = header
    table = np.lib.format.open_memmap(vectors_path, mode="w+", dtype=np.float32, shape=(n + 1, dim))
    words: list[str] = []
    with open(path, "rb") as fh, ProgressBar(n, show_progress, f"parsing {path.name}", min_total=200_000, unit="words") as bar:
        fh.seek(header_len)
        for i in range(n):
            word = bytearray()
            while (c := fh.read(1)) != b" ":
                if not c:
                    raise IsotropyError(f"{path}: truncated after {i} of the {n} words its header announces")
                if c != b"\n" or word:
                    word += c
            vec = fh.read(4 * dim)
            if len(vec) != 4 * dim:
                raise IsotropyError(f"{path}: truncated in word {i + 1} of the {n} its header announces")
            try:
                words.append(word.decode("utf-8"))
            except UnicodeDecodeError:
                raise IsotropyError(f"{path}: word {i + 1} is not UTF-8") from None
            table[i] = np.frombuffer(vec, dtype="<f4")
            if i % 4096 == 0:
                bar.advance(min(4096, n - i))
    bad = np.flatnonzero(~np.isfinite(table[:n]).all(axis=1))
    if bad.size:
        raise IsotropyError(f"{path}: word {int(bad[0]) + 1} holds a value that is not finite")
    table[n] = 0.0
    table.flush()
    return words, dim


def _check_words(path: Path, words: list[str], first_line: int, unit: str = "line") -> None:
    seen: dict[str, int] = {}
    for i, w in enumerate(words):
        if w in seen:
            raise IsotropyError(f"{path} {unit} {first_line + i}: duplicate word {w!r} (first at {unit} {first_line + seen[w]})")
        seen[w] = i


def _parse(path: Path, folder: Path, show_progress) -> dict:
    with open(path, "rb") as fh:
        line = fh.readline()
    if not line.strip():
        raise IsotropyError(f"{path} holds no word vector (it is empty)")
    header = _header(line)
    header_len = len(line) if header else 0
    binary = _is_binary(path, header_len)
    parse = _parse_binary if binary else _parse_text
    words, dim = parse(path, folder / "vectors.npy", header, header_len, show_progress)
    _check_words(path, words, 2 if header and not binary else 1, "word" if binary else "line")
    unk = UNK if UNK not in words else "<isotropy-unknown>"
    tokens = [*words, unk]
    (folder / "tokens.json").write_text(json.dumps(tokens, ensure_ascii=False), encoding="utf-8")
    fmt = "word2vec-binary" if binary else ("word2vec-text" if header else "glove-text")
    return {"format": fmt, "words": len(words), "dim": dim}


def load_word_vectors(path: str | os.PathLike, show_progress: bool | None = None) -> tuple[list[str], np.ndarray, dict]:
    """``(tokens, memory-mapped (V + 1, d) float32 vectors, meta)`` of a word-vector file; the last token is the
    unknown one (a zero row). Parsed on first use into the cache, verified and memory-mapped afterwards."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise IsotropyError(f"word-vector file {path} does not exist")
    source = _source_id(path)
    key = hashlib.blake2b(str(path).encode(), digest_size=12).hexdigest()
    folder = cache_dir() / f"{path.name[:40]}-{key}"
    meta_path = folder / "meta.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("cache_format") == CACHE_FORMAT and meta.get("source") == source:
            vectors = np.load(folder / "vectors.npy", mmap_mode="r")
            tokens = json.loads((folder / "tokens.json").read_text(encoding="utf-8"))
            if vectors.shape == (meta["words"] + 1, meta["dim"]) and len(tokens) == meta["words"] + 1:
                return tokens, vectors, meta
    except (OSError, ValueError, KeyError, TypeError):
        pass  # a missing, stale or damaged cache entry is parsed again
    folder.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(folder) as tmp:
        meta = {"cache_format": CACHE_FORMAT, "source": source, **_parse(path, tmp, show_progress)}
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    return json.loads((folder / "tokens.json").read_text(encoding="utf-8")), vectors, meta
