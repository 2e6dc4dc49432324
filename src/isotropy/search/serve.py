"""``isotropy serve``: an index and its model loaded once, searched over a small HTTP JSON API (layer 5).

FastAPI routes on uvicorn (the optional extra ``serve``): a well-kept framework rather than
our own HTTP handling, which would have to get parsing, keep-alive and shutdown right.

* ``GET /search?q=...&k=10`` -- one query: ``{"query", "k", "hits": [{"rank", "id", "score",
  "text"}], "warning", "took_ms"}``;
* ``POST /search`` with ``{"queries": [...], "k": 10}`` -- several at once: ``{"k", "results":
  [{"query", "hits"}], "warning", "took_ms"}``;
* ``GET /health`` -- ``{"status": "ok", "model", "pooling", "max_length", "fingerprint",
  "size", "dim", "index", "transform", "load_seconds"}``.

A bad request (no query, a ``k`` that is not a positive integer or above :data:`MAX_K`, too
many queries, a body that is not JSON) gets a 4xx whose body is ``{"error": "one line"}``.
Searches run one at a time (a lock): a tokenizer and a torch model are not safe to share
between threads, and one search takes milliseconds.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

from ..errors import IsotropyError
from .index import Index

__all__ = ["MAX_K", "MAX_QUERIES", "create_app", "listening_socket", "load_and_serve", "make_server"]

MAX_K = 1000  # hits per query
MAX_QUERIES = 1000  # queries per POST


def _imports():
    try:
        import fastapi
        import uvicorn
    except ImportError as exc:
        raise IsotropyError(
            f"isotropy serve needs fastapi and uvicorn ({exc.name} is missing): pip install 'isotropy[serve]'"
        ) from None
    return fastapi, uvicorn


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise IsotropyError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    return k


def health(index: Index, load_seconds: float | None = None) -> dict[str, Any]:
    """What ``GET /health`` answers: the model, the index's size and the encoder's weights fingerprint."""
    rec = index.encoder.record()
    t = index.transform
    return {
        "status": "ok",
        "model": rec.get("model"),
        "pooling": rec.get("pooling"),
        "max_length": rec.get("max_length"),
        "fingerprint": rec.get("fingerprint"),
        "size": len(index),
        "dim": index.dim,
        "index": index.kind,
        "transform": None if t is None else t.describe(),
        "load_seconds": None if load_seconds is None else round(load_seconds, 3),
    }


def create_app(index: Index, load_seconds: float | None = None):
    """The FastAPI application serving ``index`` (see the module docs for the routes)."""
    fastapi, _ = _imports()
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    app = fastapi.FastAPI(title="isotropy search", docs_url=None, redoc_url=None)
    lock = threading.Lock()
    info = health(index, load_seconds)

    def run(queries: list[str], k: int) -> tuple[Any, float]:
        k = _check_k(k)
        if not queries:
            raise IsotropyError("no query: give q=... (GET) or a non-empty 'queries' list (POST)")
        if len(queries) > MAX_QUERIES:
            raise IsotropyError(f"too many queries: {len(queries)} (at most {MAX_QUERIES} a request)")
        start = time.perf_counter()
        with lock:
            res = index.search(queries, k)
        return res, round(1000 * (time.perf_counter() - start), 3)

    @app.exception_handler(IsotropyError)
    async def _bad(request: Any, exc: IsotropyError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Any, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "body")) or "request"
        return JSONResponse({"error": f"{where}: {err.get('msg', 'invalid request')}"}, status_code=422)

    @app.get("/health")
    def get_health() -> dict[str, Any]:
        return info

    @app.get("/search")
    def get_search(q: str = fastapi.Query(..., description="the query sentence"), k: int = 10) -> dict[str, Any]:
        res, took = run([q], k)
        return {"query": q, "k": res.k, "hits": res.hits(0), "warning": res.warning, "took_ms": took}

    @app.post("/search")
    def post_search(body: dict[str, Any] = fastapi.Body(...)) -> dict[str, Any]:
        queries, k = body.get("queries"), body.get("k", 10)
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            raise IsotropyError('the body must be {"queries": ["a query", ...], "k": 10}')
        res, took = run(queries, k)
        return {**res.to_dict(), "took_ms": took}

    return app


def make_server(index: Index, host: str = "127.0.0.1", port: int = 8000, load_seconds: float | None = None):
    """A ``uvicorn.Server`` for ``index`` (``server.run()`` blocks; ``server.should_exit = True`` stops it)."""
    _, uvicorn = _imports()
    config = uvicorn.Config(create_app(index, load_seconds), host=host, port=port, log_level="warning", access_log=False)
    return uvicorn.Server(config)


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket for uvicorn, made with ``proto=IPPROTO_TCP``.

    Not ``socket.create_server``: it leaves ``proto`` 0, the accepted connections inherit it, and
    asyncio sets ``TCP_NODELAY`` only on sockets whose proto is ``IPPROTO_TCP``; without it, a reply
    on a kept-alive connection waited ~40 ms for the client's delayed ACK (Nagle's algorithm), which
    was most of a search's latency as a client saw it (docs/BENCHMARKS.md, serve)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if os.name == "posix":  # as socket.create_server: a restarted server may rebind a port in TIME_WAIT
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return sock


def load_and_serve(
    index_dir: str | os.PathLike, host: str = "127.0.0.1", port: int = 8000, *, device: str | None = None, echo=print
) -> None:
    """Load the index (and its model) once, then serve it until interrupted."""
    _imports()
    if not 0 <= port <= 65535:
        raise IsotropyError(f"--port must be from 0 to 65535, got {port}")
    try:  # bound before the model loads: a taken port or a bad host is one line, at once, not a uvicorn traceback
        sock = listening_socket(host, port)
    except OSError as exc:
        raise IsotropyError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        start = time.perf_counter()
        index = Index.load(index_dir, device=device)
        load_seconds = time.perf_counter() - start
        server = make_server(index, host, port, load_seconds)
    except BaseException:
        sock.close()
        raise
    echo(f"loaded {index_dir} ({len(index)} sentences) in {load_seconds:.1f} s; serving on http://{host}:{sock.getsockname()[1]}")
    try:
        server.run(sockets=[sock])  # uvicorn shuts down gracefully on Ctrl-C, then raises it again
    except KeyboardInterrupt:
        echo("stopped")
