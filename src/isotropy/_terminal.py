"""Text a user or a document supplied, made safe to print to a terminal (layer 1).

An indexed document, a query or a file name may hold terminal control sequences: an OSC
(``ESC ] 52 ; c ; ... BEL`` writes the reader's clipboard, ``ESC ] 0 ; ... BEL`` the window title),
a CSI (colours, cursor moves, screen clearing), a DCS/APC string, the 8-bit C1 forms of all of
these, or bidirectional overrides that make a line read differently from what it holds.
:func:`printable` strips every such sequence and escapes each remaining control character
(``\\x07``), so what reaches the terminal is the text's printable content only. JSON output
keeps the text exact (JSON escapes control characters itself); only human output goes through here.

Written by hand: the standard library has no such function, and the terminal libraries at hand
(click, rich) strip ANSI colour codes only, and only when the output is not a terminal.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_SEQUENCES = re.compile(
    r"""
    (?: \x1b\[ | \x9b ) [0-?]* [ -/]* [@-~]?             # CSI: parameters, intermediates, final byte
  | (?: \x1b[\]PX^_] | [\x90\x98\x9d\x9e\x9f] )          # OSC, DCS, SOS, PM, APC (7- and 8-bit) ...
    [^\x07\x1b\x9c]* (?: \x07 | \x1b\\ | \x9c )?         # ... their payload, up to BEL or ST (or the end)
  | \x1b [ -/]* [0-~]?                                   # any other escape (charset, keypad, ...)
    """,
    re.VERBOSE,
)
# what is left after the sequences: C0 and C1 controls, DEL, the bidirectional overrides and isolates,
# the line and paragraph separators; tab and newline too (one printed line stays one line)
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    c = match.group()
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(text: str) -> str:
    """``text`` as it may be printed to a terminal: control sequences removed, other control characters
    escaped (``\\x07``, ``\\u202e``); tabs and newlines become spaces. Plain text is returned unchanged."""
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to do
    text = _SEQUENCES.sub("", text)
    text = text.replace("\t", " ").replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return _CONTROLS.sub(_escape, text)
