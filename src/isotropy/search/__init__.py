"""Semantic search over calibrated sentence vectors: an :class:`Index` on a faiss index.

Pipeline, identical for documents and queries: encode (the index's own
:class:`~isotropy.encoders.Encoder`) -> optional transform (a fitted whitening or
flow, or one fitted on the corpus itself) -> L2-normalise -> faiss inner-product
index, so scores are cosine similarities in the transformed space.

Modules: :mod:`.index` (the :class:`Index`: add and search), :mod:`.spec` (:class:`IndexSpec`: what an
index build is asked for, checked once), :mod:`.build` (``index build``/``index add``/``search`` on files),
:mod:`.build_dask` (``index build --engine dask``) and :mod:`.shards` (what it proves about its shards first),
:mod:`.kinds` (the faiss kinds), :mod:`.store` (the saved folder: write, read back, verify), :mod:`.mapped` (the
memory-mapped files of a loaded index, checked before each search), :mod:`.serve` (``isotropy serve``;
:mod:`.serve_http`, :mod:`.served`), :mod:`.results`.

Index kinds (faiss does the work; this package adds the sentence store, the
encoder/transform bookkeeping and the save format):

* ``flat`` (default): exact search, ``faiss.IndexFlatIP``.
* ``hnsw``: approximate, ``faiss.IndexHNSWFlat`` with inner product; ``m`` links
  per node, ``ef_construction`` (build quality), ``ef_search`` (query quality/speed).
* ``ivf``: approximate, ``faiss.IndexIVFFlat`` with inner product, for large
  corpora; ``nlist`` lists, trained (k-means) on the first batch added -- ``None``
  picks ``min(4 sqrt(n), n / 39)`` (faiss wants >= 39 training points per list);
  ``nprobe`` lists visited per query.
* ``ivfpq``, ``opq``: compressed, :mod:`.pq` -- product-quantised codes of ``bytes_per_vector``
  bytes behind an inverted file (``opq``: after faiss's learnt rotation), an HNSW coarse quantiser
  from 1M rows; ``keep_vectors`` keeps the exact vectors (``vectors.npy``) for ``rerank``. Saved
  indexes of these kinds are memory-mapped on load (read-only: ``Index.load(..., mmap=False)`` to
  add); one built with ``--engine dask`` (:func:`isotropy.search.build_dask.build_index_dask`)
  holds its inverted lists on disk in ``index.ivfdata`` beside ``index.faiss``.

Saved index (a folder, written to a temporary sibling and renamed into place, so
an interrupted build or ``add`` never leaves a half index that a search would load):

* ``config.json`` -- library tag, ``kind: "index"``, ``format_version`` (the artefact header), the encoder (backend, model, weights fingerprint,
  pooling, max_length), the transform (kind, subfolder, digest of its files), the
  index kind and parameters, the dimension, the row count, and ``encoding_key``,
  a digest of everything that determines how a sentence becomes a vector; ``generation``,
  new at every save (a save back to the folder an index was loaded from checks it);
* ``state.safetensors`` -- the row count (cross-checked on load);
* ``index.faiss`` -- ``faiss.write_index`` output;
* ``sentences.jsonl`` -- one JSON string per line (a sentence given through the API
  may contain newlines), row ``i`` = id ``i``;
* ``transform/`` -- the fitted transform's own saved folder (absent for raw vectors);
  built with ``--method auto`` (:func:`isotropy.search.build.build_auto_index`), ``config.json`` also holds the
  ``selection`` evidence (``Index.selection``).

On load the encoder is rebuilt from the recorded settings -- its backend too, so an index
over an ONNX export reloads on onnxruntime -- and its weights fingerprint, and the recomputed ``encoding_key``, must match the recorded ones:
a config edited to point at another model, pooling, max_length or transform is
refused with one clear error, so queries are always encoded like the corpus.
"""

from __future__ import annotations

from .index import INDEX_KINDS, Index
from .results import SearchResults, format_results
from .spec import IndexCalibration, IndexSpec

__all__ = ["Index", "IndexSpec", "IndexCalibration", "SearchResults", "INDEX_KINDS", "format_results"]
