"""The library's file-level jobs: read inputs from files, check outputs before any work, call the library, write.

Each ``isotropy`` command that reads or writes vector files or an index is one call here
(:mod:`isotropy.cli` only parses options and prints); they are usable from Python too
(``isotropy.fit_file("whitening", "X.npy", "white/")``): every one takes keyword arguments,
checks its output (:func:`isotropy.storage.artifacts.check_output`) and every input it can
before encoding anything, streams what can be streamed, and raises one-line
:class:`~isotropy.errors.IsotropyError` for bad input.

* :mod:`.vectors`: :func:`encode_file`, :func:`fit_file`, :func:`transform_file`;
* :mod:`.index`: :func:`build_index` (:func:`build_auto_index`: ``--method auto``), :func:`add_to_index`, :func:`search_index` (and
  :func:`default_whitening`, what ``index build`` fits on the corpus by default).
"""

from __future__ import annotations

from .index import add_to_index, build_auto_index, build_index, default_whitening, search_index
from .vectors import ENCODE_CHUNK, encode_file, fit_file, transform_file

__all__ = [
    "ENCODE_CHUNK",
    "encode_file",
    "fit_file",
    "transform_file",
    "build_index",
    "build_auto_index",
    "add_to_index",
    "search_index",
    "default_whitening",
]
