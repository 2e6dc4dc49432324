"""The per-process caches of a worker: the encoder of a spec and a fitted transform folder, each
loaded once per process and kept.

Below :mod:`.spec` and :mod:`.tasks`: :meth:`EncoderSpec.resolve` (on the client) and the shard
tasks (on the workers) both load their encoder here, so neither imports the other for it.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from ..errors import IsotropyError
from ..storage.artifacts import folder_digest

__all__ = ["worker_encoder", "worker_transform"]

_LOCK = threading.Lock()
_ENCODERS: dict[tuple, Any] = {}
_TRANSFORMS: dict[tuple, Any] = {}


def worker_encoder(spec: Any):
    """The encoder for ``spec`` (an :class:`~.spec.EncoderSpec`), loaded once per worker process (and on the client) and kept."""
    key = spec.key()
    with _LOCK:
        enc = _ENCODERS.get(key)
        if enc is None:
            enc = spec.build()
            if spec.fingerprint is not None and enc.fingerprint() != spec.fingerprint:
                raise IsotropyError(
                    f"the worker on {socket.gethostname()} loaded different weights for model {spec.model} "
                    f"(fingerprint {enc.fingerprint()} != {spec.fingerprint} on the client); "
                    f"make the same model files available to every worker"
                )
            _ENCODERS[key] = enc
    return enc


def worker_transform(path: str, digest: str):
    """The fitted transform folder ``path``, loaded once per worker process; it must be the client's copy."""
    from ..transforms import load_transform

    key = (path, digest)
    with _LOCK:
        model = _TRANSFORMS.get(key)
        if model is None:
            if folder_digest(path) != digest:
                raise IsotropyError(f"the transform {path} on {socket.gethostname()} differs from the client's copy")
            model = _TRANSFORMS[key] = load_transform(path)
    return model
