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
    assert h["fingerprint"] == index.encoder.fingerprint()
    assert h["model"] == os.path.basename(index.encoder.record()["model"])  # a local folder by its name only (#31, S1)
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


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_cli_serves_until_interrupted(static_index, signum):
    """`isotropy serve INDEX --port 0` prints its address, answers, and stops cleanly on Ctrl-C and on SIGTERM
    (how service managers stop a server: exit 0 and "stopped", not 143; U39 of #31)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "isotropy.cli", "serve", str(static_index), "--port", "0"],
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
        proc.send_signal(signum)
        proc.wait(timeout=60)
    err = proc.stderr.read()
    assert proc.returncode == 0, err  # stopping a server is not an error
    assert err.strip().endswith("stopped")


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


# --------------------------------------------------------------------------- #31: safe by default, reloads, clean stops

WORDS = sorted({w for s in CORPUS for w in s.split()})


@pytest.fixture(scope="module")
def static_index(tmp_path_factory):
    """An index over a tiny word-vector table (no torch): the app is tested in-process."""
    from isotropy.encoders import Encoder

    folder = tmp_path_factory.mktemp("serve-static")
    vecs = np.random.default_rng(1).standard_normal((len(WORDS), 8))
    table = folder / "tiny.glove.txt"
    table.write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n" for w, v in zip(WORDS, vecs)), encoding="utf-8")
    Index(Encoder(str(table))).add(CORPUS).save(folder / "idx")
    assert not [p for p in (folder / "idx").rglob("*") if p.name.endswith(".lock")]  # U44 of #31: none inside
    return folder / "idx"


def _client(index_dir, **options):
    import warnings

    from isotropy.search.serve import allowed_hosts, create_app

    app = create_app(
        Index.load(index_dir), 0.5, hosts=allowed_hosts("127.0.0.1"), index_dir=index_dir, log=lambda _: None, **options
    )
    with warnings.catch_warnings():  # starlette would rather have httpx2; httpx is what the suite has
        warnings.simplefilter("ignore")  # StarletteDeprecationWarning
        from starlette.testclient import TestClient

        return TestClient(app, base_url="http://127.0.0.1:8765")


def test_only_the_bound_host_names_are_answered(static_index):
    """S1 of #31: a page under DNS rebinding sends its own Host: refused; loopback names and --allow-host answered."""
    from isotropy.search.serve import allowed_hosts

    client = _client(static_index)
    assert client.get("/search", params={"q": "cat"}, headers={"host": "attacker.example"}).status_code == 400
    for host in ("127.0.0.1:8765", "localhost", "[::1]:8765"):
        assert client.get("/search", params={"q": "cat"}, headers={"host": host}).status_code == 200, host
    assert "search.example" in allowed_hosts("127.0.0.1", ["search.example"])
    assert allowed_hosts("10.1.2.3")[-1] == "10.1.2.3" and "[::1]" in allowed_hosts("::1")
    with pytest.raises(Exception, match="wildcard"):
        allowed_hosts("127.0.0.1", ["a*b"])


def test_health_and_errors_hold_no_absolute_path(static_index):
    client = _client(static_index)
    h = client.get("/health").json()
    assert h["model"] == "tiny.glove.txt" and h["generation"] == 1 and h["warnings"] == []
    assert str(static_index.parent) not in client.get("/health").text


@pytest.mark.parametrize(
    "request_kwargs, status, words",
    [
        ({"content": b'{"queries": ["cat"], "pad": "' + b"x" * 3000 + b'"}'}, 413, ("too large", "2,048")),
        ({"content": iter([b'{"queries": ', b'["cat"], "pad": "' + b"x" * 3000 + b'"}'])}, 413, ("too large",)),  # chunked
        ({"json": {"queries": ["cat"] * 6}}, 413, ("too many queries", "at most 5")),
        ({"json": {"queries": ["cat " * 30]}}, 413, ("query 1 of 1", "at most 100")),
        ({"json": {"queries": ["cat", "  "]}}, 422, ("query 2 of 2 is empty",)),
    ],
)
def test_bodies_queries_and_their_lengths_are_capped(static_index, request_kwargs, status, words):
    """S1/U32 of #31: a body over --max-body is refused before it is read whole; too many, too long or empty queries."""
    client = _client(static_index, max_body=2048, max_queries=5, max_query_chars=100)
    r = client.post("/search", headers={"content-type": "application/json"}, **request_kwargs)
    assert r.status_code == status, r.text
    assert all(w in r.json()["error"] for w in words), r.json()
    assert client.post("/search", json={"queries": ["cat"] * 5}).status_code == 200


def test_an_empty_query_or_one_without_a_known_word_is_said(static_index):
    """U32/U40 of #31: an empty q is 422; a query of unknown words gets hits ranked by nothing: a warning says so."""
    client = _client(static_index)
    r = client.get("/search", params={"q": ""})
    assert r.status_code == 422 and "empty" in r.json()["error"]
    body = client.post("/search", json={"queries": ["cat river", "zzz qqq"], "k": 3}).json()
    assert len(body["warnings"]) == 1 and "1 of 2 queries hold no word" in body["warnings"][0] and "row 2" in body["warnings"][0]
    assert client.get("/search", params={"q": "cat", "k": 3}).json()["warnings"] == []


def test_the_served_index_is_reloaded_when_index_add_changes_it(static_index, tmp_path):
    """U36 of #31: after `index add`, the next request sees the new sentences (the folder is reloaded, whole)."""
    import shutil

    from isotropy.files import add_to_index

    idx = tmp_path / "idx"
    shutil.copytree(static_index, idx)
    client = _client(idx)
    assert client.get("/health").json()["size"] == len(CORPUS)
    add_to_index(idx, _lines(tmp_path / "more.txt", ["the horse sat near the piano bridge"]), show_progress=False)
    h = client.get("/health").json()
    assert h["size"] == len(CORPUS) + 1 and h["generation"] == 2 and h["warnings"] == []
    hits = client.get("/search", params={"q": "the horse sat near the piano bridge", "k": 1}).json()["hits"]
    assert hits[0]["id"] == len(CORPUS)
    (idx / "sentences.jsonl").write_text("broken\n", encoding="utf-8")  # a change that cannot be loaded: said, old one kept
    os.utime(idx / "config.json", ns=(0, 0))
    body = client.get("/search", params={"q": "cat", "k": 1}).json()
    assert body["hits"] and "cannot be loaded" in body["warnings"][-1] and str(tmp_path) not in body["warnings"][-1]


def _lines(path, lines):
    path.write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    return path


def test_the_cli_limits_match_the_servers_and_a_public_bind_is_warned(static_index):
    from isotropy.cli import serve_command
    from isotropy.search import serve

    assert (serve_command.MAX_BODY, serve_command.MAX_QUERIES, serve_command.MAX_QUERY_CHARS) == (
        serve.MAX_BODY,
        serve.MAX_QUERIES,
        serve.MAX_QUERY_CHARS,
    )
    assert serve.is_loopback("127.0.0.1") and serve.is_loopback("::1") and serve.is_loopback("localhost")
    assert not serve.is_loopback("0.0.0.0") and not serve.is_loopback("192.168.1.4")
    line = serve.public_bind_warning("0.0.0.0", serve.allowed_hosts("0.0.0.0"))
    assert line.startswith("warning:") and "NO authentication" in line and "\n" not in line


def test_search_and_encode_say_how_many_rows_hold_no_known_word(static_index, tmp_path):
    """U40/U41 of #31: a zero vector ranks the index by nothing; `search` and `encode` say so on stderr."""
    from helpers import run_cli

    code, out, err = run_cli(["search", static_index, "cat river", "zzz", "-n", "2"])
    assert code == 0 and "warning: 1 of 2 queries hold no word the static model knows (row 2)" in err
    (tmp_path / "c.txt").write_text("the cat sat\nqqq www\nthe dog\nzzz\n", encoding="utf-8")
    table = static_index.parent / "tiny.glove.txt"
    code, _, err = run_cli(["encode", tmp_path / "c.txt", "-o", tmp_path / "v.npy", "--model", table])
    assert code == 0 and "warning: 2 of 4 sentences hold no word the static model knows (rows 2, 4)" in err
