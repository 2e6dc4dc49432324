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

Every error's body is ``{"error": "one line"}`` (JSON): a bad request (no query, an empty one or one that is
not valid text, a ``k`` that is not a positive integer or above :data:`MAX_K`, too many or too long queries,
a body that is not JSON, over the cap or not sent whole in time) gets a 4xx, an unknown route 404, a
refused ``Host:`` 400, a served index whose memory-mapped file was cut short on disk 503, anything else 500.
(Only a request uvicorn cannot parse as HTTP at all gets uvicorn's own plain-text 400.)
Searches run one at a time (a lock): a tokenizer and a torch model are not safe to share between threads,
and one search takes milliseconds.

Safe by default on a laptop (#31, S1): there is no authentication, so only requests naming one
of the bound host's names in their ``Host:`` header are answered (:class:`~.serve_http.HostCheck`:
a web page under DNS rebinding cannot read the index), the body is capped before it is read whole and
must arrive within seconds (:class:`~.serve_http.BodyLimit`), as are the number and length of queries,
and no response holds an absolute path (:mod:`.served`: the model by its folder's name; paths in
messages cut to their last component).

The index folder is watched (#31, U36; :mod:`.served`): each request compares the ``stat`` of the files
that make the index with the version loaded; after ``isotropy index add`` (or a rebuild) the new version is
loaded whole and swapped in, and a version that cannot be loaded (or a deleted folder) is reported in
every response's ``warnings`` while the old one keeps serving; the next change is tried again.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

from .._checks import check_sentences
from ..errors import IsotropyError, Terminated
from .index import Index
from .serve_http import (
    BODY_TIMEOUT,
    LOOPBACK_NAMES,
    BodyLimit,
    HostCheck,
    allowed_hosts,
    is_loopback,
    listening_socket,
    public_bind_warning,
    url_of,
)
from .served import Served

__all__ = [
    "MAX_K",
    "MAX_RERANK",
    "MAX_QUERIES",
    "MAX_BODY",
    "MAX_QUERY_CHARS",
    "BODY_TIMEOUT",
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
ROUTES = "GET /search, POST /search, GET /health"


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
    try:
        check_sentences(queries, "query")  # a lone surrogate is valid JSON but not text: no tokenizer takes it
    except IsotropyError as exc:
        raise RequestError(str(exc), 422) from None


def _one_line(text: Any, limit: int = 300) -> str:
    words = " ".join(str(text).split())
    return words if len(words) <= limit else words[: limit - 3] + "..."


def _add_error_handlers(app: Any, served: Served) -> None:
    """Every error the app answers as ``{"error": "one line"}`` (module docs), absolute paths scrubbed."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    @app.exception_handler(IsotropyError)
    async def _bad(request: Any, exc: IsotropyError) -> JSONResponse:
        return JSONResponse({"error": served.scrub(_one_line(exc, 2000))}, status_code=getattr(exc, "status", 400))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Any, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0] if exc.errors() else {}
        if err.get("type") == "json_invalid":  # loc is ("body", byte offset): say what is wrong, then where
            declared = request.headers.get("content-length")
            of = f" of the {declared}-byte body" if declared else ""
            why = (err.get("ctx") or {}).get("error", "not JSON")
            return JSONResponse({"error": f"the request body is not valid JSON: {why} at byte {err['loc'][-1]}{of}"}, 422)
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "body")) or "request"
        return JSONResponse({"error": _one_line(f"{where}: {err.get('msg', 'invalid request')}")}, status_code=422)

    @app.exception_handler(HTTPException)
    async def _http(request: Any, exc: HTTPException) -> JSONResponse:
        path = _one_line(request.url.path, 200)
        if exc.status_code == 404:
            message = f"there is no {path} here: the routes are {ROUTES}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {path}: the routes are {ROUTES}"
        elif exc.__cause__ is not None:  # FastAPI could not parse the body (bad UTF-8, too deep, a huge number)
            message = f"the request body cannot be read as JSON ({_one_line(exc.__cause__, 200) or type(exc.__cause__).__name__})"
        else:
            message = _one_line(exc.detail)
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _failed(request: Any, exc: Exception) -> JSONResponse:  # the traceback goes to the server's log
        return JSONResponse({"error": f"the server failed on this request ({type(exc).__name__}); its log says more"}, 500)


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
    body_timeout: float = BODY_TIMEOUT,
):
    """The FastAPI application serving ``index`` (see the module docs for the routes).

    ``hosts``: the ``Host:`` names answered (default: the loopback names); ``index_dir``: the folder
    ``index`` was loaded from, watched and reloaded when it changes; ``log``: where reloads are said; ``rerank``:
    what ``index`` was loaded with (a reload keeps it); ``body_timeout``: seconds a request body may take.
    """
    fastapi, _ = _imports()

    app = fastapi.FastAPI(title="isotropy search", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit, limit=max_body, timeout=body_timeout)
    app.add_middleware(HostCheck, allowed_hosts=list(hosts or LOOPBACK_NAMES))
    served = Served(index, load_seconds, index_dir, log or (lambda line: print(line, file=sys.stderr)), rerank)
    app.state.served = served
    _add_error_handlers(app, served)

    def run(queries: list[str], k: int, rerank: Any = None) -> tuple[Any, float, list[str]]:
        k, rerank = _check_k(k), _check_rerank(rerank)
        _check_queries(queries, max_queries, max_query_chars)
        start = time.perf_counter()
        with served.lock:
            served.refresh()
            damaged = served.damaged()
            if damaged:  # reading it would kill the server (SIGBUS): refused until a good version is loaded
                raise RequestError("; ".join([damaged, *(n for n in served.notes() if n != damaged)]), 503)
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


def _check_limits(port: int, max_body: int, max_queries: int, max_query_chars: int) -> None:
    if not 0 <= port <= 65535:
        raise IsotropyError(f"--port must be from 0 to 65535, got {port}")
    for option, value in (("--max-body", max_body), ("--max-queries", max_queries), ("--max-query-chars", max_query_chars)):
        if value < 1:
            raise IsotropyError(f"{option} must be a positive integer, got {value}")


def _run_until_stopped(server: Any, sock: Any) -> None:
    """``server.run`` until SIGINT, SIGTERM or SIGHUP, each a graceful stop (a terminal closed, a service
    manager's reload-less stop): uvicorn handles the first two; SIGHUP is handed to it the same way."""
    from ..storage.signals import terminate_as_interrupt

    hup = getattr(signal, "SIGHUP", None)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(hup, server.handle_exit) if hup is not None and main else None
    try:
        with terminate_as_interrupt():  # SIGTERM (how service managers stop a server) stops it like Ctrl-C
            server.run(sockets=[sock])  # uvicorn shuts down gracefully on a signal, then raises it again
    except KeyboardInterrupt:
        pass
    except Terminated as exc:  # uvicorn stopped gracefully, then raised the signal again
        if exc.signum not in (signal.SIGTERM, hup):
            raise
    finally:
        if previous is not None:
            signal.signal(hup, previous)


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
    """Load the index (and its model) once, then serve it until interrupted (Ctrl-C, SIGTERM, SIGHUP: a clean stop)."""
    _imports()
    _check_limits(port, max_body, max_queries, max_query_chars)
    hosts = allowed_hosts(host, allow_hosts)
    if not os.path.lexists(index_dir):
        raise IsotropyError(f"{index_dir} does not exist: it is not a folder of a saved index")
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
    echo(f"loaded {index_dir} ({len(index)} sentences) in {load_seconds:.1f} s; serving on {url_of(host, sock.getsockname()[1])}")
    _run_until_stopped(server, sock)
    echo("stopped")
