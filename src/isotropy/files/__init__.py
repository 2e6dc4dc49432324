"""The library's file-level jobs: read inputs from files, check outputs before any work, call the library, write.

Each ``isotropy`` command that reads or writes vector files or an index is one call here
(:mod:`isotropy.cli` only parses options and prints); they are usable from Python too
(``isotropy.fit_file("whitening", "X.npy", "white/")``): every one takes keyword arguments,
checks its output (:func:`isotropy.storage.artifacts.check_output`) and every input it can
before encoding anything, streams what can be streamed, and raises one-line
:class:`~isotropy.errors.IsotropyError` for bad input.

* :mod:`.vectors`: :func:`encode_file`, :func:`fit_file`, :func:`transform_file`;
* the index jobs live next to :class:`isotropy.search.Index` (:mod:`isotropy.search.build`: :func:`build_index`,
  :func:`build_auto_index`, :func:`add_to_index`, :func:`search_index`, :func:`default_whitening`;
  :mod:`isotropy.search.build_dask`; :mod:`isotropy.search.shards`) and are re-exported here; the old module
  paths ``isotropy.files.index``, ``.index_scale`` and ``.index_shards`` answer with a DeprecationWarning.
"""

from __future__ import annotations

from ..search.build import add_to_index, build_auto_index, build_index, default_whitening, search_index
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
