"""Beyond one machine: encode sentence shards and fit whitening on a Dask cluster (layer 4.7).

The whitening statistics (row count, mean, centred scatter, plus the two small
Ledoit-Wolf moments) merge exactly (:class:`isotropy.transforms.moments.Moments`), so a
fit on a billion sentences is a map -- each worker encodes one shard and accumulates
its statistics -- followed by a tree of merges. This package runs that on a user's
existing Dask cluster (``address=``) or on a local one (one worker process per
core). It is an optional extra: ``pip install 'isotropy[distributed]'``; the core
package never imports it. docs/DISTRIBUTED.md says why Dask rather than Ray and how
to run it on a real cluster.

Modules: :mod:`.spec` (what the client sends and gets back, the inputs),
:mod:`.cluster` (Dask, the client, gathering, the merge tree, errors as values),
:mod:`.workers` (a worker's encoder and transform caches),
:mod:`.tasks` (the worker side), :mod:`.api` (:func:`fit_moments`, :func:`fit_whitening`, :func:`encode`).

Design (decided once, here):

* **Workers get a spec, not a model.** :class:`EncoderSpec` is a handful of plain
  fields (model id or folder, pooling, max_length, batch size, device, backend) plus
  the model's fingerprint as the client saw it. Each worker process loads the model
  once and keeps it (``workers._ENCODERS``); a worker whose model files differ from the
  client's (another version of the folder on another node) fails with one clear line
  instead of silently mixing two models into one fit. ``backend="onnx"`` (``model`` =
  a folder written by ``isotropy export onnx``) encodes with onnxruntime instead of torch.
* **Exactness.** Shards are reduced by a fixed binary tree in input order (not in
  completion order), so a rerun gives bit-identical statistics, and the merge is
  Chan's exact pairwise update: the statistics equal ``numpy.cov`` of all the
  vectors to within 1e-9 relative. The vectors themselves are what the encoder
  produces for each shard; batches of different composition (another shard split,
  another batch size) change them at float32 rounding (~1e-7) -- that is the
  encoder's property, not the merge's (``batch_size=1`` makes them identical).
* **Retries.** Every task is submitted with ``retries`` (a task that raises is run
  again) and Dask reschedules tasks whose worker died. Tasks are idempotent: a
  shard's statistics are returned, never accumulated in place, and output files
  are written atomically, so a retried or duplicated task cannot count a shard twice.
  Bad input (an IsotropyError) is returned as a value instead of raised: it is not
  retried, leaves no traceback in the worker logs, and the client raises it as one line.
* **Resumable encoding.** Each vector shard ``OUT/<stem>.npy`` gets a sidecar
  ``OUT/<stem>.json`` (written last, atomically) recording the source file's size,
  mtime and sha256, the row count and width, the sha256 of the .npy, and the
  backend, model fingerprint, pooling, max_length and transform digest. A rerun skips
  a shard only when all of it verifies; anything else is encoded again. The transform
  digest is :func:`isotropy.storage.artifacts.folder_digest` of the transform folder
  (isotropy 0.1 recorded a sha256 of its own, so a rerun re-encodes, once, the shards
  that 0.1 wrote with a transform); a sidecar without ``backend`` (0.1's) reads as torch.
* **Fault injection** (for tests and chaos drills on a real cluster): when the
  environment variable ``ISOTROPY_FAULT_ONCE`` is ``raise:DIR`` or ``exit:DIR`` in a
  worker, the first attempt at each shard (marked by a file created in DIR) raises,
  or kills the worker process outright; a drill that creates a shard's marker first
  (``tasks.fault_marker``) spares that shard. ``raise-always:DIR`` or ``exit-always:DIR``
  fail every attempt at each shard whose marker is in DIR: a shard that never succeeds.
  ``distill --engine dask`` calls the hook in each corpus part once its first chunk is
  done (the part named ``CORPUS, lines A..B``). Unset, it costs one dictionary look-up.
"""

from __future__ import annotations

# FAULT_ENV, the sidecar format and the two pure reduction helpers under their 0.1 names
# (_merge = tasks.merge_stats, _tree = cluster.tree_reduce) stay importable here for tests and drills.
from .api import ENGINES, SHARDS_KIND, encode, fit_moments, fit_whitening  # noqa: F401
from .cluster import CONNECT_TIMEOUT  # noqa: F401
from .cluster import tree_reduce as _tree  # noqa: F401
from .spec import EncodeReport, EncoderSpec, ShardResult, expand_inputs
from .tasks import CHUNK_SENTENCES, FAULT_ENV, SIDECAR_FORMAT, SIDECAR_VERSION  # noqa: F401
from .tasks import merge_stats as _merge  # noqa: F401

__all__ = [
    "EncoderSpec",
    "ShardResult",
    "EncodeReport",
    "fit_moments",
    "fit_whitening",
    "encode",
    "expand_inputs",
    "ENGINES",
]
