"""Moved to :mod:`isotropy.search.build_dask` (``index build`` lives next to :class:`isotropy.search.Index`); this old path
still answers every name, with a DeprecationWarning, and goes in 1.0."""

from ._moved import forward

__getattr__ = forward(__name__, "isotropy.search.build_dask")
