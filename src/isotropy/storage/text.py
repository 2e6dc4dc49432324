"""Sentence files: UTF-8 text, one sentence a line, or standard input (layer 2)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from ..errors import IsotropyError

__all__ = ["read_sentences", "iter_sentences", "read_json_lines"]


def read_sentences(path: str | os.PathLike, *, allow_empty_file: bool = False) -> list[str]:
    """Read a UTF-8 text file (or ``-`` for standard input), one sentence a line.

    Every line becomes one sentence, empty and whitespace-only lines included, so
    row ``i`` of anything computed from it belongs to line ``i + 1``. Only the line
    terminator is stripped. A byte-order mark at the start is ignored.
    """
    name = "standard input" if str(path) == "-" else str(path)
    if str(path) == "-":
        raw = sys.stdin.buffer.read()
    else:
        p = Path(path)
        if not p.is_file():
            raise IsotropyError(f"{p} does not exist or is not a file")
        raw = p.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    nul = raw.find(b"\x00")
    if nul >= 0:  # valid UTF-8, but no text file holds one: a binary file given by mistake
        line = raw.count(b"\n", 0, nul) + 1
        raise IsotropyError(f"{name} line {line} holds a NUL byte: it is a binary file, not UTF-8 text")
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the final newline ends the last line; it does not start a new one
    sentences = []
    for number, line in enumerate(lines, start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IsotropyError(f"{name} line {number} is not valid UTF-8 (byte {exc.start + 1} of the line)") from None
        sentences.append(text[:-1] if text.endswith("\r") else text)
    if not sentences and not allow_empty_file:
        raise IsotropyError(f"{name} is empty: there is nothing to encode")
    return sentences


def iter_sentences(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Stream ``(line number, sentence)`` from a UTF-8 text file (or ``-``), one line at a time.

    The same rules as :func:`read_sentences` (a leading byte-order mark is ignored, only the
    line terminator is stripped, a NUL byte or invalid UTF-8 is one error naming the line),
    in memory bounded by the longest line: for corpora too large to hold.
    """
    name = "standard input" if str(path) == "-" else str(path)
    if str(path) != "-" and not Path(path).is_file():
        raise IsotropyError(f"{path} does not exist or is not a file")
    with contextlib.ExitStack() as stack:
        fh = sys.stdin.buffer if str(path) == "-" else stack.enter_context(open(path, "rb"))
        for number, line in enumerate(fh, start=1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
                if not line:  # a file holding a byte-order mark only holds no line
                    return
            if b"\x00" in line:
                raise IsotropyError(f"{name} line {number} holds a NUL byte: it is a binary file, not UTF-8 text")
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise IsotropyError(f"{name} line {number} is not valid UTF-8 (byte {exc.start + 1} of the line)") from None
            text = text[:-1] if text.endswith("\n") else text
            yield number, text[:-1] if text.endswith("\r") else text


def iter_json_objects(path: str | os.PathLike, holds: str) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for every non-blank line of a JSON Lines file (read as
    :func:`iter_sentences` reads text); a line that is not JSON, or not a JSON object, is one error
    naming the file and line (``holds``: what an object must hold, for that message)."""
    for number, line in iter_sentences(path):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise IsotropyError(f"{path} line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise IsotropyError(f"{path} line {number}: expected a JSON object with {holds}")
        yield number, rec


def read_json_lines(file: Path) -> list[str]:
    """One JSON string a line (an index's sentence file); anything else is one error naming the line."""
    if not file.is_file():
        raise IsotropyError(f"{file.parent} is missing {file.name}; it is not a complete index")
    out = []
    with open(file, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            try:
                s = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise IsotropyError(f"{file} line {number} is not a JSON string: {exc}") from None
            if not isinstance(s, str):
                raise IsotropyError(f"{file} line {number} is not a JSON string")
            out.append(s)
    return out
