"""Input checks shared by every layer (layer 1): one clear IsotropyError line, or a clean value."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import IsotropyError

__all__ = ["check_matrix", "check_sentences", "check_weights", "check_int", "check_number", "ENGINES", "QUANTIZATIONS"]

# The values every door checks, defined once here, below everything that takes them (the command line's request,
# calibrate's pipeline, the index spec, the Dask API, the ONNX export), so none imports the heavy module that uses them.
ENGINES = ("dask",)  # --engine: the cluster engine (none: one process)
QUANTIZATIONS = ("int8",)  # --quantize: onnxruntime's dynamic int8 quantization of an ONNX graph

_SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair, alone: valid in JSON and Python, not text


def check_matrix(
    X: Any,
    name: str = "X",
    *,
    expected_dim: int | None = None,
    min_rows: int = 0,
    dtype: Any = np.float64,
    row_offset: int = 0,
) -> np.ndarray:
    """Return ``X`` as a 2-D finite array of ``dtype``, or raise one clear IsotropyError.

    ``row_offset`` is added to row numbers in messages, so a streamed chunk names
    the row of the whole input rather than of the chunk.
    """
    try:
        arr = np.asarray(X)
        if arr.dtype.kind == "c":  # numpy would drop the imaginary part with only a warning
            raise IsotropyError(f"{name} has complex values; sentence vectors must be real")
        arr = np.asarray(arr, dtype=dtype)
    except IsotropyError:
        raise
    except (TypeError, ValueError) as exc:
        raise IsotropyError(f"{name} must be a numeric matrix: {exc}") from None
    if arr.ndim == 1 and expected_dim is not None and arr.shape[0] == expected_dim:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise IsotropyError(f"{name} must be 2-D (rows x dimensions), got shape {arr.shape}")
    if expected_dim is not None and arr.shape[1] != expected_dim:
        raise IsotropyError(f"{name} has {arr.shape[1]} dimensions but {expected_dim} were expected")
    if arr.shape[0] < min_rows:
        raise IsotropyError(f"{name} has {arr.shape[0]} rows; at least {min_rows} are needed")
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int(np.flatnonzero(~finite.all(axis=1))[0])
        raise IsotropyError(f"{name} has a NaN or infinite value in row {bad + row_offset} (0-based)")
    return arr


def check_sentences(sentences: Sequence[str] | str, what: str = "sentence") -> list[str]:
    """A list of strings (one string becomes a list of one); anything else is a clear error."""
    if isinstance(sentences, str):
        sentences = [sentences]
    if sentences is None or isinstance(sentences, (bytes, bytearray, dict, set, frozenset)) or not hasattr(sentences, "__iter__"):
        # vectors come back row i for sentence i: a set has no order, a dict's keys are rarely meant
        hint = {
            bytes: " (decode them to str first)",
            bytearray: " (decode them to str first)",
            set: " (a set has no order: pass a list)",
            frozenset: " (a set has no order: pass a list)",
            dict: " (pass a list, e.g. list(d.values()))",
        }.get(type(sentences), "")
        got = "None" if sentences is None else type(sentences).__name__
        plural = what[:-1] + "ies" if what.endswith("y") else what + "s"
        raise IsotropyError(f"{plural} must be a string or a list of strings, got {got}{hint}")
    out = list(sentences)
    for i, s in enumerate(out):
        if not isinstance(s, str):
            raise IsotropyError(f"{what} {i} is a {type(s).__name__}, not a string")
        if not s.isascii() and _SURROGATE.search(s):  # no tokenizer takes it (a TypeError deep inside), nor UTF-8
            raise IsotropyError(f"{what} {i + 1} of {len(out)} is not valid text (a lone surrogate)")
    return out


def check_weights(weights: Any, n: int, what: str, row_offset: int = 0) -> np.ndarray:
    """``n`` weights, one a row, as float64 (finite, >= 0); every error is one line naming ``what`` and the row
    (``row_offset`` + its index)."""
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise IsotropyError(f"{what} must be numbers, one per row") from None
    if w.shape != (n,):
        raise IsotropyError(f"{what} must be one number per row ({n}), got shape {w.shape}")
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise IsotropyError(f"{what}: row {row_offset + i} (0-based) is {w[i]}; weights must be finite and >= 0")
    return w


def check_int(value: Any, name: str, *, minimum: int | None = None) -> int:
    """``value`` as an int when it is one (a Python or numpy integer, not a bool: ``"5"``, ``5.7`` and ``True``
    are refused rather than converted), at least ``minimum``; else one IsotropyError line naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise IsotropyError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise IsotropyError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def check_number(value: Any, name: str, *, positive: bool = False) -> float:
    """``value`` as a finite float when it is a real number (not a bool or a string: ``"1"`` and ``True`` are
    refused rather than converted), > 0 with ``positive``; else one IsotropyError line naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise IsotropyError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not np.isfinite(number) or (positive and number <= 0):
        raise IsotropyError(f"{name} must be a finite number{' > 0' if positive else ''}, got {value!r}")
    return number
