"""Word-vector files: GloVe text, word2vec text and binary, fastText ``.vec``, parsed into arrays (layer 4).

Formats (told apart by their first line, and ``.bin`` or undecodable bytes for binary):

* GloVe text: ``word v1 ... vd`` per line, no header (d: the most common width of the first lines);
* word2vec text / fastText ``.vec``: a header ``V d``, then GloVe-like lines;
* word2vec binary: the header ``V d\\n``, then per word ``word<space>`` and d little-endian float32
  (an optional newline after them).

What a careless or hostile file gets (issue #31): a UTF-8 byte-order mark before the first line is skipped
(W1); blank lines at the end are ignored, a blank line elsewhere is an error naming it (U3); a word holding
spaces (GloVe 840B has a few: ``. . .``, ``at name@domain.com``) takes the last d fields as its vector and
the rest as the word, counted in ``meta["words_with_spaces"]``, while a row whose extra fields are all numbers
is still a ragged row (U8); a binary header announcing fewer or more words than the file holds is refused
with both counts, as the text formats refuse it (W2). Every other fault is one line naming the file and
line: a ragged row, a value that is not a number or not finite, a duplicate word, an empty file.

:func:`parse_word_vectors` streams the rows into an array made by ``alloc`` (a memory map in the parse
cache, :mod:`.parsecache`, or plain memory), so a 2M x 300 file never needs twice its size in memory, and
returns with it the sha256 of every byte it parsed (the cache's key on the content, hashed while parsing:
the file is not read again for it). Whether the table is lower-cased is decided here too
(:func:`case_policy`), from the words the tokenizer can produce, by a rule no single line can flip (U6).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..._progress import ProgressBar
from ...errors import IsotropyError
from .table import UNK, WORD_PATTERN

__all__ = ["parse_word_vectors", "case_policy", "WORD_VECTOR_SUFFIXES"]

WORD_VECTOR_SUFFIXES = (".txt", ".vec", ".bin", ".w2v")
BOM = b"\xef\xbb\xbf"
BLOCK = 1 << 22  # bytes read at a time (text rows: about this many per parsed chunk)
WIDTH_SAMPLE = 200  # lines whose most common width gives d when there is no header
CASED_SHARE = 0.01  # a table is case-sensitive when more than this share of its words (and more than one) hold capitals

Alloc = Callable[[tuple[int, int]], np.ndarray]


def _header(line: bytes) -> tuple[int, int] | None:
    parts = line.split()
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return None


def _start(path: Path) -> tuple[tuple[int, int] | None, int]:
    """``(header or None, offset of the first row)``, past a byte-order mark."""
    with open(path, "rb") as fh:
        line = fh.readline()
    bom = len(BOM) if line.startswith(BOM) else 0
    if not line[bom:].strip():
        raise IsotropyError(f"{path} holds no word vector (it is empty)")
    header = _header(line[bom:])
    return header, (len(line) if header else bom)


def _is_binary(path: Path, start: int) -> bool:
    if path.suffix == ".bin":
        return True
    with open(path, "rb") as fh:
        fh.seek(start)
        chunk = fh.read(4096)
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(chunk) - 4  # not a multi-byte character cut by the 4096-byte read
    return b"\0" in chunk


def _bad(path: Path, line: int, what: str) -> IsotropyError:
    return IsotropyError(f"{path} line {line}: {what}; not a word-vector file (GloVe, word2vec or fastText)")


def _fields(raw: bytes) -> list[str]:
    return raw.decode("utf-8").rstrip("\r\n").rstrip(" ").split(" ")


def _numbers(parts: list[str]) -> bool:
    try:
        [float(p) for p in parts]
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------- text


def _count_rows(path: Path, start: int) -> int:
    """Rows up to the last line holding anything but blanks (trailing blank lines are no rows)."""
    seen, rows = 0, 0
    with open(path, "rb") as fh:
        fh.seek(start)
        while block := fh.read(1 << 24):
            body = block.rstrip(b" \t\r\n")
            if body:
                rows = seen + body.count(b"\n") + 1
            seen += block.count(b"\n")
    return rows


def _width(path: Path, start: int) -> int:
    """d of a file without header: the most common number of values on its first lines."""
    with open(path, "rb") as fh:
        fh.seek(start)
        lines = [line for _, line in zip(range(WIDTH_SAMPLE), fh) if line.strip()]
    widths = Counter(len(line.rstrip(b"\r\n").rstrip(b" ").split(b" ")) - 1 for line in lines)
    return widths.most_common(1)[0][0] if widths else 0


def _parse_chunk(path: Path, lines: list[bytes], first: int, dim: int, out: np.ndarray) -> tuple[list[str], int]:
    """The words of ``lines`` (their vectors written to ``out``) and how many of them hold spaces."""
    words, values, spaced = [], [], 0
    for i, raw in enumerate(lines):
        try:
            parts = _fields(raw)
        except UnicodeDecodeError:
            raise _bad(path, first + i, "not UTF-8 text") from None
        if len(parts) != dim + 1:
            if parts == [""]:
                raise _bad(path, first + i, "a blank line")
            if len(parts) <= dim + 1 or _numbers(parts[1:-dim]):
                raise _bad(path, first + i, f"{len(parts) - 1} values where the table has {dim} (a ragged row)")
            spaced += 1  # a word holding spaces: the last dim fields are its vector
            words.append(" ".join(parts[:-dim]))
            values.extend(parts[-dim:])
            continue
        words.append(parts[0])
        values.extend(parts[1:])
    try:
        out[:] = np.array(values, dtype=np.float32).reshape(len(lines), dim)
    except ValueError:
        for i, raw in enumerate(lines):  # find the line to name
            if not _numbers(_fields(raw)[-dim:]):
                raise _bad(path, first + i, "a value that is not a number") from None
        raise
    if not np.isfinite(out).all():
        row = int(np.flatnonzero(~np.isfinite(out).all(axis=1))[0])
        raise _bad(path, first + row, "a value that is not finite")
    return words, spaced


def _parse_text(path: Path, alloc: Alloc, header, start: int, show_progress) -> tuple[list[str], np.ndarray, dict]:
    """Stream the text rows into ``alloc((V + 1, d))``, hashing every byte read; return the words."""
    first_line = 2 if header else 1
    n = _count_rows(path, start)
    if n == 0:
        raise IsotropyError(f"{path} holds no word vector (it is empty)")
    if header and header[0] != n:
        raise IsotropyError(f"{path} line 1: the header says {header[0]} words, the file holds {n} rows")
    dim = header[1] if header else _width(path, start)
    if dim < 1:
        raise _bad(path, first_line, "a word without values")
    table = alloc((n + 1, dim))
    words: list[str] = []
    spaced, h = 0, hashlib.sha256()
    with open(path, "rb") as fh, ProgressBar(n, show_progress, f"parsing {path.name}", min_total=200_000, unit="words") as bar:
        h.update(fh.read(start))
        while lines := fh.readlines(BLOCK):
            h.update(b"".join(lines))
            rows = lines[: n - len(words)]  # past the last row: trailing blank lines, hashed only
            if rows:
                row = len(words)
                got, s = _parse_chunk(path, rows, first_line + row, dim, table[row : row + len(rows)])
                words.extend(got)
                spaced += s
                bar.advance(len(rows))
    if len(words) != n:
        raise IsotropyError(f"{path} changed while it was read ({n} rows counted, {len(words)} parsed); try again")
    table[n] = 0.0
    fmt = "word2vec-text" if header else "glove-text"
    return words, table, {"format": fmt, "sha256": h.hexdigest(), "words_with_spaces": spaced}


# --------------------------------------------------------------------------- binary


class _Records:
    """A binary word2vec body read in blocks, each hashed once, one ``(word, vector bytes)`` record at a time."""

    def __init__(self, fh: Any, h: Any, start: int, dim: int) -> None:
        self.fh, self.h, self.size = fh, h, 4 * dim
        h.update(fh.read(start))
        self.buf, self.pos, self.partial = b"", 0, False

    def _more(self) -> bool:
        block = self.fh.read(BLOCK)
        if not block:
            return False
        self.h.update(block)
        self.buf, self.pos = self.buf[self.pos :] + block, 0
        return True

    def next(self) -> tuple[bytes, bytes] | None:
        """The next record, or None at the end of the file (``partial``: bytes were left that make no record)."""
        while True:
            space = self.buf.find(b" ", self.pos)
            if space >= 0 and len(self.buf) - space - 1 >= self.size:
                word, vec = self.buf[self.pos : space].lstrip(b"\n"), self.buf[space + 1 : space + 1 + self.size]
                self.pos = space + 1 + self.size
                return word, vec
            if not self._more():
                self.partial = bool(self.buf[self.pos :].strip())
                return None


def _parse_binary(path: Path, alloc: Alloc, header, start: int, show_progress) -> tuple[list[str], np.ndarray, dict]:
    if header is None:
        raise IsotropyError(f"{path} line 1: a binary word2vec file starts with a header 'WORDS DIM'")
    n, dim = header
    if dim < 1:
        raise _bad(path, 1, "a header of words without values")
    most = (path.stat().st_size - start) // (4 * dim + 2)  # a record is at least a letter, a space and d floats
    if n > most:  # refused before allocating n rows
        raise IsotropyError(f"{path} line 1: the header says {n} words, the file holds at most {most} (truncated)")
    table = alloc((n + 1, dim))
    words: list[str] = []
    h = hashlib.sha256()
    with open(path, "rb") as fh, ProgressBar(n, show_progress, f"parsing {path.name}", min_total=200_000, unit="words") as bar:
        records = _Records(fh, h, start, dim)
        for i in range(n):
            record = records.next()
            if record is None:
                cut = ": its last word is cut short" if records.partial else ""
                raise IsotropyError(f"{path} line 1: the header says {n} words, the file holds {i} (truncated{cut})")
            try:
                words.append(record[0].decode("utf-8"))
            except UnicodeDecodeError:
                raise IsotropyError(f"{path}: word {i + 1} is not UTF-8") from None
            table[i] = np.frombuffer(record[1], dtype="<f4")
            if i % 4096 == 0:
                bar.advance(min(4096, n - i))
        extra = 0
        while records.next() is not None:  # the header must not hide words (W2): count what follows
            extra += 1
    if extra or records.partial:
        more = " and more bytes" if records.partial else ""
        raise IsotropyError(f"{path} line 1: the header says {n} words, the file holds {n + extra}{more}")
    bad = np.flatnonzero(~np.isfinite(table[:n]).all(axis=1))
    if bad.size:
        raise IsotropyError(f"{path}: word {int(bad[0]) + 1} holds a value that is not finite")
    table[n] = 0.0
    return words, table, {"format": "word2vec-binary", "sha256": h.hexdigest(), "words_with_spaces": 0}


# --------------------------------------------------------------------------- the whole file


def _check_words(path: Path, words: list[str], first_line: int, unit: str = "line") -> None:
    seen: dict[str, int] = {}
    for i, w in enumerate(words):
        if w in seen:
            raise IsotropyError(f"{path} {unit} {first_line + i}: duplicate word {w!r} (first at {unit} {first_line + seen[w]})")
        seen[w] = i


def case_policy(words: list[str]) -> dict[str, Any]:
    """Whether a table of ``words`` is lower-cased (its input lower-cased before lookup), and why.

    Only words the tokenizer can produce count (``[UNK]``, ``<s>``, a word with spaces never match a token, so
    they cannot make the table cased); the table is case-sensitive when more than 1% of those words, and more
    than one, hold a capital letter, so no single line flips it (U6). The cased words of a lower-cased table
    can never match; they are counted (and a few named) for the load note."""
    token = re.compile(WORD_PATTERN)
    capitals = [w for w in words if w != w.lower() and token.fullmatch(w)]
    lower = len(capitals) <= max(1, CASED_SHARE * len(words))
    return {"lowercase": lower, "capitalised": len(capitals), "capitalised_examples": capitals[:3]}


def parse_word_vectors(path: Path, alloc: Alloc, show_progress: bool | None = None) -> tuple[list[str], np.ndarray, dict]:
    """``(tokens, (V + 1, d) float32 vectors from alloc, meta)`` of a word-vector file; the last token is the unknown
    one (a zero row). ``meta``: format, words, dim, the sha256 of the file's bytes, the case policy."""
    header, start = _start(path)
    binary = _is_binary(path, start)
    parse = _parse_binary if binary else _parse_text
    words, table, meta = parse(path, alloc, header, start, show_progress)
    _check_words(path, words, 2 if header and not binary else 1, "word" if binary else "line")
    unk = UNK if UNK not in words else "<isotropy-unknown>"
    meta = {**meta, "words": len(words), "dim": int(table.shape[1]), **case_policy(words)}
    return [*words, unk], table, meta
