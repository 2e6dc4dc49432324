"""isotropy serve: a server started on 127.0.0.1 inside the suite, queried by an HTTP client."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from isotropy.search import Index  # noqa: E402
from isotropy.search.serve import MAX_K, listening_socket, make_server  # noqa: E402

CORPUS = [f"the {a} sat near the {b}" for a in ("cat", "dog", "bird", "horse") for b in ("river", "market", "piano", "bridge")]
DEADLINE_S = 60  # bounded wait for the server to answer /health (a loaded 2-core machine is slow, never this slow)


def wait_healthy(url: str) -> dict:
    end = time.monotonic() + DEADLINE_S
    while True:
        try:
            r = httpx.get(f"{url}/health", timeout=5)
            if r.status_code == 200:
                return r.json()
        except httpx.TransportError:
            pass
        if time.monotonic() > end:
            raise AssertionError(f"{url}/health did not answer within {DEADLINE_S} s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def saved_index(tiny_model_dir, tmp_path_factory):
    from isotropy.encoders import Encoder

    path = tmp_path_factory.mktemp("serve") / "idx"
    Index(Encoder(str(tiny_model_dir), max_length=32)).add(CORPUS).save(path)
    return path


@pytest.fixture(scope="module")
def served(saved_index):
    """(url, index): the saved index loaded once and served from a thread on a socket bound here (no port race)."""
    index = Index.load(saved_index)
    server = make_server(index, load_seconds=1.0)
    sock = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_healthy(url)
    yield url, index
    server.should_exit = True
    thread.join(timeout=30)
    sock.close()
    assert not thread.is_alive()


def test_health_names_the_model_the_size_and_the_fingerprint(served):
    url, index = served
    h = httpx.get(f"{url}/health").json()
    assert h["status"] == "ok" and h["size"] == len(CORPUS) and h["dim"] == index.dim
    assert h["fingerprint"] == index.encoder.fingerprint() and h["model"] == index.encoder.record()["model"]
    assert h["load_seconds"] == 1.0


def test_get_search_gives_the_hits_of_index_search(served):
    url, index = served
    r = httpx.get(f"{url}/search", params={"q": "a dog by the river", "k": 5})
    assert r.status_code == 200
    body = r.json()
    ref = index.search(["a dog by the river"], k=5).hits(0)
    assert [h["id"] for h in body["hits"]] == [h["id"] for h in ref]
    assert [h["text"] for h in body["hits"]] == [CORPUS[h["id"]] for h in ref]
    np.testing.assert_allclose([h["score"] for h in body["hits"]], [h["score"] for h in ref], atol=1e-5)
    assert body["query"] == "a dog by the river" and body["k"] == 5 and body["took_ms"] >= 0


def test_post_search_answers_several_queries(served):
    url, index = served
    queries = ["piano music", CORPUS[3], "horses"]
    body = httpx.post(f"{url}/search", json={"queries": queries, "k": 3}).json()
    ref = index.search(queries, k=3)
    assert [r["query"] for r in body["results"]] == queries
    for i, r in enumerate(body["results"]):
        assert [h["id"] for h in r["hits"]] == [h["id"] for h in ref.hits(i)]
    assert body["results"][1]["hits"][0]["id"] == 3  # a corpus sentence finds itself first


def test_k_above_the_index_size_returns_everything_with_a_warning(served):
    url, _ = served
    body = httpx.get(f"{url}/search", params={"q": "cat", "k": 100}).json()
    assert len(body["hits"]) == len(CORPUS) and "larger than the index" in body["warning"]


@pytest.mark.parametrize(
    "method, path, kwargs, status, words",
    [
        ("GET", "/search", {}, 422, ("q",)),
        ("GET", "/search", {"params": {"q": "cat", "k": "ten"}}, 422, ("k",)),
        ("GET", "/search", {"params": {"q": "cat", "k": 0}}, 400, ("k must be",)),
        ("GET", "/search", {"params": {"q": "cat", "k": MAX_K + 1}}, 400, ("k must be",)),
        ("POST", "/search", {"json": {"queries": []}}, 400, ("no query",)),
        ("POST", "/search", {"json": {"queries": "cat"}}, 400, ("queries",)),
        ("POST", "/search", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 422, ("JSON",)),
        ("GET", "/nowhere", {}, 404, ()),
    ],
)
def test_bad_requests_get_a_4xx_with_one_line(served, method, path, kwargs, status, words):
    url, _ = served
    r = httpx.request(method, f"{url}{path}", **kwargs)
    assert r.status_code == status
    message = r.json().get("error") or r.json().get("detail")
    assert isinstance(message, str) and "\n" not in message
    assert all(w.lower() in message.lower() for w in words), message


def test_the_cli_serves_until_interrupted(saved_index):
    """`isotropy serve INDEX --port 0` prints its address, answers, and exits on SIGINT."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "isotropy.cli", "serve", str(saved_index), "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = proc.stderr.readline()  # blocks until the first line: the address (or an error, which fails below)
        m = re.search(r"serving on (http://127\.0\.0\.1:\d+)", line)
        assert m, line
        assert wait_healthy(m.group(1))["size"] == len(CORPUS)
        assert httpx.get(f"{m.group(1)}/search", params={"q": "cat"}).json()["hits"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read()  # Ctrl-C stops a server: not an error
    assert proc.stderr.read().strip().endswith("stopped")


def test_a_taken_port_or_a_missing_index_is_one_line(saved_index, tmp_path):
    from helpers import run_cli

    with socket.create_server(("127.0.0.1", 0)) as taken:
        code, _, err = run_cli(["serve", saved_index, "--port", taken.getsockname()[1]])
    assert code == 2 and err.startswith("error: cannot listen on 127.0.0.1:") and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["serve", tmp_path / "nothing", "--port", "0"])
    assert code == 2 and "nothing" in err and len(err.strip().splitlines()) == 1


def test_served_connections_send_without_waiting_for_acks():
    """The listening socket uvicorn serves on hands asyncio connections with TCP_NODELAY set (as uvicorn accepts
    them: loop.create_server(sock=...)): without it a kept-alive client waited ~40 ms a reply (Nagle + delayed ACK)."""
    import asyncio

    sock = listening_socket("127.0.0.1", 0)
    assert sock.proto == socket.IPPROTO_TCP

    async def accept_one() -> int:
        seen: asyncio.Future = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport):
                seen.set_result(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        async with server:
            reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            nodelay = await asyncio.wait_for(seen, DEADLINE_S)
            await reader.read()
            writer.close()
        return nodelay

    assert asyncio.run(accept_one()) != 0
