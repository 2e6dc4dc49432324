"""``isotropy serve``'s HTTP edges: the bound hosts, the ``Host:`` check, the request body's cap and deadline (layer 5).

Plain ASGI pieces around the FastAPI app of :mod:`.serve`, each answering a refusal with the server's own
error body, ``{"error": "one line"}`` (JSON), like every other error of the server:

* :class:`HostCheck`: Starlette's ``TrustedHostMiddleware`` (a page under DNS rebinding sends its own
  ``Host:``), its plain-text refusal rewritten as our JSON;
* :class:`BodyLimit`: a body over the cap is refused (413) before it is read whole, and a body that does not
  arrive whole within :data:`BODY_TIMEOUT` seconds (a ``Content-Length`` larger than what is sent) gets
  408 and the connection closed: uvicorn bounds idle keep-alive connections, not a request body being read.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
from typing import Any

from ..errors import IsotropyError

__all__ = [
    "BODY_TIMEOUT",
    "LOOPBACK_NAMES",
    "BodyLimit",
    "HostCheck",
    "allowed_hosts",
    "is_loopback",
    "listening_socket",
    "public_bind_warning",
    "send_error",
    "url_of",
]

BODY_TIMEOUT = 10.0  # seconds a request body may take to arrive whole (a search's body is a few KiB)
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


async def send_error(send: Any, status: int, message: str, close: bool = False) -> None:
    """Answer ``{"error": message}`` with ``status`` straight on the ASGI ``send`` (``close``: then close the connection)."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# --------------------------------------------------------------------------- hosts


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address) is reachable from this machine only."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_of(host: str, port: int) -> str:
    """The URL a client types for a server bound to ``host``: an IPv6 address in brackets (``http://[::1]:8000``)."""
    bare = host.strip("[]")
    return f"http://[{bare}]:{port}" if ":" in bare else f"http://{bare}:{port}"


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


class HostCheck:
    """Starlette's ``TrustedHostMiddleware`` (the matching is its own), its refusal answered as our JSON error.

    The inner app is wrapped so that it marks the request as passed; a response started for a request
    that did not pass is the middleware's refusal, and is replaced."""

    PASSED = "isotropy.host_checked"

    def __init__(self, app: Any, allowed_hosts: list[str]) -> None:
        from starlette.middleware.trustedhost import TrustedHostMiddleware

        async def passed(scope: Any, receive: Any, send: Any) -> None:
            scope[self.PASSED] = True
            await app(scope, receive, send)

        self.check = TrustedHostMiddleware(passed, allowed_hosts=allowed_hosts, www_redirect=False)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.check(scope, receive, send)
            return

        async def guarded(message: dict) -> None:
            if scope.get(self.PASSED):
                await send(message)
            elif message["type"] == "http.response.start":
                await send_error(send, 400, _host_refusal(scope))

        await self.check(scope, receive, guarded)


def _host_refusal(scope: Any) -> str:
    host = dict(scope.get("headers") or ()).get(b"host", b"").decode("latin-1")[:200]
    return (
        f"the Host header {host!r} is not a name this server answers (a page under DNS rebinding would send its "
        "own); use 127.0.0.1 or localhost, or start the server with --allow-host NAME"
    )


# --------------------------------------------------------------------------- the body cap and deadline


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes gets 413 without being read whole; one that has not
    arrived whole ``timeout`` seconds after the request began gets 408 and the connection is closed.

    Written here because neither Starlette nor uvicorn caps a body or bounds its reading: a declared
    ``Content-Length`` over the limit is refused before any byte is read; a chunked body is read up to
    the limit (at most ``limit`` bytes are ever held) and refused as soon as it passes it.
    """

    def __init__(self, app: Any, limit: int, timeout: float = BODY_TIMEOUT) -> None:
        self.app, self.limit, self.timeout = app, int(limit), float(timeout)

    async def _refuse(self, send: Any, received: int | None) -> None:
        size = "" if received is None else f" ({received:,} bytes or more)"
        await send_error(send, 413, f"the request body is too large{size}: at most {self.limit:,} bytes")

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
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        chunks, size, more = [], 0, True
        while more:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                await send_error(
                    send,
                    408,
                    f"the request body did not arrive whole within {self.timeout:g} s ({size:,} bytes of "
                    f"{'an unknown length' if declared is None else declared.decode('latin-1') + ' declared'}); closing",
                    close=True,
                )
                return
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
