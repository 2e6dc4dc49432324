"""``isotropy serve``: an index and its model loaded once, searched over a small HTTP JSON API (layer 5).

FastAPI routes on uvicorn (the optional extra ``serve``): a well-kept framework rather than
our own HTTP handling, which would have to get parsing, keep-alive and shutdown right.

* ``GET /search?q=...&k=10&rerank=100`` -- one query (``rerank``, optional: candidates re-scored with the
  exact vectors of an ``ivfpq``/``opq`` index built with ``--keep-vectors``; default: ``serve --rerank``, else the
  index's): ``{"query", "k", "hits": [{"rank", "id", "score",
  "text"}], "warning", "warnings", "took_ms"}``;
* ``POST /search`` with ``{"queries": [...], "k": 10, "rerank": 100}`` (``rerank`` optional) -- several at once: ``{"k", "results":
  [{"query", "hits"}], "warning", "warnings", "took_ms"}``;
* ``GET /health`` -- ``{"status": "ok", "model", "pooling", "max_length", "fingerprint",
  "size", "dim", "index", "transform", "load_seconds", "generation", "warnings"}``.

A bad request (no query, an empty one, a ``k`` that is not a positive integer or above :data:`MAX_K`,
too many or too long queries, a body that is not JSON or over the cap) gets a 4xx whose body is
``{"error": "one line"}``. Searches run one at a time (a lock): a tokenizer and a torch model are
not safe to share between threads, and one search takes milliseconds.

Safe by default on a laptop (#31, S1): there is no authentication, so only requests naming one
of the bound host's names in their ``Host:`` header are answered (Starlette's
``TrustedHostMiddleware``: a web page under DNS rebinding cannot read the index), the body is
capped before it is read whole (:class:`BodyLimit`), as are the number and length of queries,
and no response holds an absolute path (the model is named by its folder's name).

The index folder is watched (#31, U36): each request compares its ``config.json``'s inode, size
and modification time (one ``stat``) with the version loaded; after ``isotropy index add`` (or a
rebuild) the new version is loaded whole and swapped in, and a version that cannot be loaded is
reported in every response's ``warnings`` while the old one keeps serving.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import IsotropyError, Terminated
from .index import Index

__all__ = [
    "MAX_K",
    "MAX_RERANK",
    "MAX_QUERIES",
    "MAX_BODY",
    "MAX_QUERY_CHARS",
    "BodyLimit",
    "allowed_hosts",
    "is_loopback",
    "public_bind_warning",
    "create_app",
    "listening_socket",
    "load_and_serve",
    "make_server",
]

MAX_K = 1000  # hits per query
MAX_RERANK = 10_000  # candidates re-scored per query (each reads one exact vector)
MAX_QUERIES = 1000  # queries per POST (--max-queries)
MAX_BODY = 1 << 20  # bytes of a request body (--max-body): 1 MiB holds a thousand long queries
MAX_QUERY_CHARS = 10_000  # characters of one query (--max-query-chars); the encoder truncates at max_length anyway
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


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


def _check_rerank(rerank: Any) -> int | None:
    if rerank is not None and (isinstance(rerank, bool) or not isinstance(rerank, int) or not 0 <= rerank <= MAX_RERANK):
        raise IsotropyError(f"rerank must be an integer from 0 to {MAX_RERANK}, got {rerank!r}")
    return rerank


class RequestError(IsotropyError):
    """A request the server refuses, with its HTTP status (413: too large, 422: unprocessable)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


# --------------------------------------------------------------------------- hosts


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address) is reachable from this machine only."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The ``Host:`` names a server bound to ``host`` answers: the loopback names, the bound host
    (a wildcard bind: this machine's name instead) and ``extra`` (``--allow-host``; ``*``: any)."""
    bare = host.strip("[]")
    names = list(LOOPBACK_NAMES)
    if bare in ("0.0.0.0", "::", ""):
        names.append(socket.gethostname())
    else:
        names.append(f"[{bare}]" if ":" in bare else bare)
    for name in extra:
        name = name.strip()
        if not name:
            raise IsotropyError("--allow-host is empty: give a host name (or * for any, which disables the check)")
        if "*" in name[1:] or (name.startswith("*") and name != "*" and not name.startswith("*.")):
            raise IsotropyError(f"--allow-host {name!r}: a wildcard must be '*' or lead a domain ('*.example.org')")
        names.append(f"[{name}]" if ":" in name and not name.startswith("[") else name)
    return list(dict.fromkeys(n.lower() for n in names))


def public_bind_warning(host: str, hosts: list[str]) -> str:
    """The line ``serve`` prints when it listens beyond this machine (there is no authentication)."""
    return (
        f"warning: serving on {host}, reachable from other machines, with NO authentication: anyone who can "
        f"reach it can read every sentence of the index; bind 127.0.0.1 unless that is what you want "
        f"(answered Host: names: {', '.join(hosts)}; add names with --allow-host)"
    )


# --------------------------------------------------------------------------- the body cap


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes gets 413 without being read whole.

    Written here because neither Starlette nor uvicorn caps a body: a declared ``Content-Length``
    over the limit is refused before any byte is read; a chunked body is read up to the limit
    (at most ``limit`` bytes are ever held) and refused as soon as it passes it.
    """

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, int(limit)

    async def _refuse(self, send: Any, received: int | None) -> None:
        import json

        size = "" if received is None else f" ({received:,} bytes or more)"
        body = json.dumps({"error": f"the request body is too large{size}: at most {self.limit:,} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        try:
            if declared is not None and int(declared) > self.limit:
                await self._refuse(send, int(declared))
                return
        except ValueError:
            pass  # a malformed length is the server's to refuse (uvicorn answers 400)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)  # a disconnect: hand it on
                return
            size += len(message.get("body", b""))
            if size > self.limit:
                await self._refuse(send, size)
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        await self.app(scope, _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}], receive), send)


def _replay(messages: list[dict], then: Any = None) -> Any:
    async def receive() -> dict:
        if messages:
            return messages.pop(0)
        return await then() if then is not None else {"type": "http.disconnect"}

    return receive


# --------------------------------------------------------------------------- the served index


def _public_model(name: Any) -> Any:
    """A model as a response may name it: a local folder or file by its last component, never its absolute path."""
    if isinstance(name, str) and (os.path.isabs(name) or os.path.exists(name)):
        return Path(name).name
    return name


def health(index: Index, load_seconds: float | None = None) -> dict[str, Any]:
    """What ``GET /health`` answers: the model, the index's size and the encoder's weights fingerprint."""
    rec = index.encoder.record()
    t = index.transform
    return {
        "status": "ok",
        "model": _public_model(rec.get("model")),
        "pooling": rec.get("pooling"),
        "max_length": rec.get("max_length"),
        "fingerprint": rec.get("fingerprint"),
        "size": len(index),
        "dim": index.dim,
        "index": index.kind,
        "transform": None if t is None else t.describe(),
        "load_seconds": None if load_seconds is None else round(load_seconds, 3),
    }


def _version(index_dir: Path | None) -> tuple | None:
    """What identifies the saved version of an index folder, for one ``stat``: every save renames a new folder in."""
    if index_dir is None:
        return None
    try:
        st = os.stat(index_dir / "config.json")
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Served:
    """The index being served, reloaded when its folder changes on disk (module docs)."""

    def __init__(
        self, index: Index, load_seconds: float | None, index_dir: str | os.PathLike | None, log: Any, rerank: int | None
    ) -> None:
        self.index, self.load_seconds, self.log, self.rerank = index, load_seconds, log, rerank
        self.dir = None if index_dir is None else Path(index_dir)
        self.version = _version(self.dir)
        self.generation, self.stale = 1, None  # stale: one line while a changed folder cannot be loaded
        self.lock = threading.Lock()

    def refresh(self) -> None:
        """Under the lock: load the folder again when its version changed (atomic: swapped in only once loaded)."""
        now = _version(self.dir)
        if now is None or now == self.version:
            return
        self.version = now  # tried once per version on disk: a broken one is not reloaded on every request
        start = time.perf_counter()
        try:
            fresh = Index.load(self.dir, device=_device_of(self.index), rerank=self.rerank)
        except IsotropyError as exc:
            self.stale = (
                f"the index folder changed on disk but cannot be loaded ({_scrub(str(exc), self.dir)}); "
                f"still serving the version loaded before"
            )
            self.log(f"warning: {self.stale}")
            return
        self.index, self.load_seconds, self.stale = fresh, time.perf_counter() - start, None
        self.generation += 1
        self.log(f"reloaded {self.dir.name} ({len(fresh)} sentences): it changed on disk")

    def info(self) -> dict[str, Any]:
        return {**health(self.index, self.load_seconds), "generation": self.generation, "warnings": self.notes()}

    def notes(self) -> list[str]:
        return [self.stale] if self.stale else []


def _device_of(index: Index) -> str | None:
    """The device the served model runs on, for loading the next version there too."""
    device = getattr(index.encoder, "device", None)
    return None if device is None else str(device)


def _scrub(text: str, *paths: Any) -> str:
    """``text`` with the absolute spellings of ``paths`` replaced by their last component."""
    for p in paths:
        if p is None:
            continue
        for spelled in {str(Path(p).resolve()), str(Path(p).absolute()), str(p)}:
            if os.path.isabs(spelled):
                text = text.replace(spelled, Path(p).name)
    return text


def _check_queries(queries: list[str], max_queries: int, max_chars: int) -> None:
    if not queries:
        raise IsotropyError("no query: give q=... (GET) or a non-empty 'queries' list (POST)")
    if len(queries) > max_queries:
        raise RequestError(f"too many queries: {len(queries)} (at most {max_queries} a request)", 413)
    for i, q in enumerate(queries, start=1):  # numbered from 1, as `isotropy search` numbers them
        if not q.strip():
            raise RequestError(f"query {i} of {len(queries)} is empty: there is nothing to search for", 422)
        if len(q) > max_chars:
            raise RequestError(f"query {i} of {len(queries)} is {len(q):,} characters long: at most {max_chars:,}", 413)


def create_app(
    index: Index,
    load_seconds: float | None = None,
    *,
    hosts: list[str] | None = None,
    max_body: int = MAX_BODY,
    max_queries: int = MAX_QUERIES,
    max_query_chars: int = MAX_QUERY_CHARS,
    index_dir: str | os.PathLike | None = None,
    log: Any = None,
    rerank: int | None = None,
):
    """The FastAPI application serving ``index`` (see the module docs for the routes).

    ``hosts``: the ``Host:`` names answered (default: the loopback names); ``index_dir``: the folder
    ``index`` was loaded from, watched and reloaded when it changes; ``log``: where reloads are said; ``rerank``: what ``index`` was loaded with (a reload keeps it).
    """
    fastapi, _ = _imports()
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    app = fastapi.FastAPI(title="isotropy search", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit, limit=max_body)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(hosts or LOOPBACK_NAMES), www_redirect=False)
    served = Served(index, load_seconds, index_dir, log or (lambda line: print(line, file=sys.stderr)), rerank)
    app.state.served = served

    def run(queries: list[str], k: int, rerank: Any = None) -> tuple[Any, float, list[str]]:
        k, rerank = _check_k(k), _check_rerank(rerank)
        _check_queries(queries, max_queries, max_query_chars)
        start = time.perf_counter()
        with served.lock:
            served.refresh()
            saved = dict(served.index.params)
            try:  # this request's re-ranking depth, the served one's restored after
                if rerank is not None:
                    served.index.set_search_params(rerank=rerank)
                res = served.index.search(queries, k)
            finally:
                served.index.params.clear()
                served.index.params.update(saved)
            notes = served.notes()
        warnings = [*([res.warning] if res.warning else []), *notes]
        return res, round(1000 * (time.perf_counter() - start), 3), warnings

    @app.exception_handler(IsotropyError)
    async def _bad(request: Any, exc: IsotropyError) -> JSONResponse:
        return JSONResponse({"error": _scrub(str(exc), served.dir)}, status_code=getattr(exc, "status", 400))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Any, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "body")) or "request"
        return JSONResponse({"error": f"{where}: {err.get('msg', 'invalid request')}"}, status_code=422)

    @app.get("/health")
    def get_health() -> dict[str, Any]:
        with served.lock:
            served.refresh()
            return served.info()

    @app.get("/search")
    def get_search(
        q: str = fastapi.Query(..., description="the query sentence"), k: int = 10, rerank: int | None = None
    ) -> dict[str, Any]:
        res, took, warnings = run([q], k, rerank)
        return {"query": q, "k": res.k, "hits": res.hits(0), "warning": res.warning, "warnings": warnings, "took_ms": took}

    @app.post("/search")
    def post_search(body: dict[str, Any] = fastapi.Body(...)) -> dict[str, Any]:
        queries, k = body.get("queries"), body.get("k", 10)
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            raise IsotropyError('the body must be {"queries": ["a query", ...], "k": 10}')
        res, took, warnings = run(queries, k, body.get("rerank"))
        return {**res.to_dict(), "warnings": warnings, "took_ms": took}

    return app


def make_server(index: Index, host: str = "127.0.0.1", port: int = 8000, load_seconds: float | None = None, **options: Any):
    """A ``uvicorn.Server`` for ``index`` (``server.run()`` blocks; ``server.should_exit = True`` stops it);
    ``options`` go to :func:`create_app` (``hosts`` defaults to :func:`allowed_hosts` of ``host``)."""
    _, uvicorn = _imports()
    options.setdefault("hosts", allowed_hosts(host))
    app = create_app(index, load_seconds, **options)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
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
        sock.bind((host.strip("[]"), port))
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return sock


def _check_limits(port: int, max_body: int, max_queries: int, max_query_chars: int) -> None:
    if not 0 <= port <= 65535:
        raise IsotropyError(f"--port must be from 0 to 65535, got {port}")
    for option, value in (("--max-body", max_body), ("--max-queries", max_queries), ("--max-query-chars", max_query_chars)):
        if value < 1:
            raise IsotropyError(f"{option} must be a positive integer, got {value}")


def load_and_serve(
    index_dir: str | os.PathLike,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    device: str | None = None,
    rerank: int | None = None,
    allow_hosts: list[str] | tuple[str, ...] = (),
    max_body: int = MAX_BODY,
    max_queries: int = MAX_QUERIES,
    max_query_chars: int = MAX_QUERY_CHARS,
    echo=print,
) -> None:
    """Load the index (and its model) once, then serve it until interrupted (Ctrl-C, SIGTERM: a clean stop)."""
    from ..storage.signals import terminate_as_interrupt

    _imports()
    _check_limits(port, max_body, max_queries, max_query_chars)
    hosts = allowed_hosts(host, allow_hosts)
    try:  # bound before the model loads: a taken port or a bad host is one line, at once, not a uvicorn traceback
        sock = listening_socket(host, port)
    except OSError as exc:
        raise IsotropyError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        start = time.perf_counter()
        index = Index.load(index_dir, device=device, rerank=rerank)
        load_seconds = time.perf_counter() - start
        limits = {"max_body": max_body, "max_queries": max_queries, "max_query_chars": max_query_chars}
        server = make_server(index, host, port, load_seconds, hosts=hosts, index_dir=index_dir, log=echo, rerank=rerank, **limits)
    except BaseException:
        sock.close()
        raise
    if not is_loopback(host):
        echo(public_bind_warning(host, hosts))
    echo(f"loaded {index_dir} ({len(index)} sentences) in {load_seconds:.1f} s; serving on http://{host}:{sock.getsockname()[1]}")
    try:
        with terminate_as_interrupt():  # SIGTERM (how service managers stop a server) stops it like Ctrl-C
            server.run(sockets=[sock])  # uvicorn shuts down gracefully on a signal, then raises it again
    except KeyboardInterrupt:
        pass
    except Terminated as exc:  # uvicorn stopped gracefully, then raised the signal again
        if exc.signum != signal.SIGTERM:
            raise
    echo("stopped")
