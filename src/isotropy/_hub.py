"""Can the Hugging Face hub be reached? Decided within seconds (layer 1).

transformers retries an unreachable hub for most of a minute before it fails; isotropy
asks first, so a model id that cannot be fetched is one line at once. The offline switch
and the endpoint are huggingface_hub's own (``HF_HUB_OFFLINE``, ``HF_ENDPOINT``).
"""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlparse

__all__ = ["hub_offline_reason", "PROBE_TIMEOUT"]

PROBE_TIMEOUT = 3.0  # seconds; huggingface_hub's own request timeouts are 10 s and more


def hub_offline_reason(timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why the hub cannot be reached (None when it answers), decided within ``timeout`` seconds."""
    from huggingface_hub import constants, is_offline_mode

    if is_offline_mode():
        return "HF_HUB_OFFLINE is set"
    for var in ("TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):  # the libraries that read their own switch
        if os.environ.get(var, "").strip().upper() in ("1", "TRUE", "YES", "ON"):
            return f"{var} is set"
    url = urlparse(constants.ENDPOINT)
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    result: list[str | None] = [f"no answer from {host} within {timeout:.0f} s"]

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result[0] = None
        except OSError as exc:
            result[0] = f"{host} is unreachable ({exc.strerror or exc})"

    # name resolution has no timeout of its own: run the probe in a thread and stop waiting
    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return result[0]
