"""Round 5 of the hostile-input audit (issue #42), the serve and search surfaces: ids are the audit's.

The app is tested in-process (Starlette's TestClient) where it can be; what must survive a crash that would
take the test runner with it (a memory-mapped file cut short: SIGBUS) runs in a child process, and what needs a
socket (a body that never arrives, SIGHUP) runs a real server on 127.0.0.1, on a port the kernel picks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import ROOT, run_cli, tiny_model2vec

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from isotropy._terminal import printable  # noqa: E402
from isotropy.encoders import Encoder  # noqa: E402
from isotropy.errors import IsotropyError  # noqa: E402
from isotropy.search import Index  # noqa: E402

CORPUS = ["the cat sat on the mat", "a dog ran", "the dog sat on a mat", "a cat ran", "the mat", "a dog sat on the cat"]
WORDS = ["the", "a", "cat", "dog", "sat", "ran", "on", "mat", "river", "stone", "light", "house"]
DEADLINE_S = 60  # bound on any wait for a child process or a socket (never reached unless something hangs)


def _lines(path: Path, lines) -> Path:
    path.write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    return path


def _table(folder: Path, dim: int = 8) -> Path:
    """A word-vector file of :data:`WORDS` (a static model without torch)."""
    vecs = np.random.default_rng(3).standard_normal((len(WORDS), dim))
    path = folder / "words.txt"
    path.write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n" for w, v in zip(WORDS, vecs)), encoding="utf-8")
    return path


def _client(index_dir: Path, **options):
    from isotropy.search.serve import allowed_hosts, create_app

    app = create_app(
        Index.load(index_dir), 0.5, hosts=allowed_hosts("127.0.0.1"), index_dir=index_dir, log=lambda _: None, **options
    )
    with warnings.catch_warnings():  # starlette would rather have httpx2; httpx is what the suite has
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

        return TestClient(app, base_url="http://127.0.0.1:8765", raise_server_exceptions=False)


def _no_absolute_path(text: str, *roots: Path) -> None:
    for root in roots:
        for spelled in {str(root), str(root.resolve())}:
            assert spelled not in text, text


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A model2vec model folder ``m`` and a flat index ``idx`` built with it (its absolute path recorded)."""
    root = tmp_path_factory.mktemp("r5serve")
    Index(Encoder(str(tiny_model2vec(root / "m")))).add(CORPUS).save(root / "idx")
    return root


@pytest.fixture
def private(folder, tmp_path) -> Path:
    """A copy of the model and the index that a test may damage (the copy's config names the copy's model)."""
    shutil.copytree(folder / "m", tmp_path / "m")
    Index(Encoder(str(tmp_path / "m"))).add(CORPUS).save(tmp_path / "idx")
    return tmp_path


@pytest.fixture(scope="module")
def pq_folder(tmp_path_factory) -> Path:
    """``table`` (8-dim word vectors), ``pq``: an ivfpq index of 400 lines keeping its vectors, ``ondisk``: the
    same built into on-disk inverted lists (``index.ivfdata``) as the Dask build merges them, ``flat``."""
    import faiss
    from faiss.contrib.ondisk import merge_ondisk

    root = tmp_path_factory.mktemp("r5pq")
    table = _table(root)
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS[:8], size=int(rng.integers(2, 9)))) + f" {WORDS[8 + i % 4]}" for i in range(400)]
    _lines(root / "corpus.txt", lines)
    params = {"bytes_per_vector": 4, "nlist": 4, "nprobe": 4}
    Index(Encoder(str(table)), None, "ivfpq", keep_vectors=True, **params).add(lines).save(root / "pq")
    built = Index(Encoder(str(table)), None, "ivfpq", **params).add(lines)
    faiss.write_index(built._index, str(root / "shard.faiss"))
    trained = faiss.clone_index(built._index)
    trained.reset()
    (root / "work").mkdir()
    merge_ondisk(trained, [str(root / "shard.faiss")], str(root / "work" / "index.ivfdata"))
    built._index = trained
    built.save(root / "ondisk")
    Index(Encoder(str(table))).add(lines).save(root / "flat")
    return root


# --------------------------------------------------------------------------- S1, U32, U31: no absolute path in a response


def test_s1_a_reload_failing_on_the_model_names_no_absolute_path(private):
    """S3-040: the model's weights changed under a running server: the reload's warning names the model by its folder."""
    client = _client(private / "idx")
    weights = private / "m" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0xFF
    weights.write_bytes(bytes(data))
    os.utime(private / "idx" / "config.json")  # as the audit: a change to the index folder makes the server reload
    health, hits = client.get("/health").json(), client.get("/search", params={"q": "cat"}).json()
    for body in (health, hits):
        assert any("cannot be loaded" in w and "other model weights than m " in w for w in body["warnings"]), body
        _no_absolute_path(json.dumps(body), private)
    assert hits["hits"]  # the old index keeps serving


def test_u32_a_transform_path_edited_into_the_config_is_not_echoed(private):
    """S3-041: an index config edited to name an absolute transform path: the refusal names only its last component."""
    client = _client(private / "idx")
    cfg = json.loads((private / "idx" / "config.json").read_text())
    cfg["transform"] = {"kind": "whitening", "path": str(private / "elsewhere" / "secret-transform"), "digest": "0"}
    (private / "idx" / "config.json").write_text(json.dumps(cfg))
    for body in (client.get("/health").json(), client.get("/search", params={"q": "cat"}).json()):
        assert "cannot be loaded" in body["warnings"][-1] and "secret-transform" in body["warnings"][-1], body
        _no_absolute_path(json.dumps(body), private)


def test_u31_a_missing_model_folder_is_named_as_such(private):
    """S3-042: the index's model folder moved away: the line says so, by the folder's name (not a backend's rules)."""
    client = _client(private / "idx")
    (private / "m").rename(private / "m-moved")
    os.utime(private / "idx" / "config.json")
    warning = client.get("/health").json()["warnings"][-1]
    assert "the index's model folder m is missing" in warning and "static" not in warning
    _no_absolute_path(warning, private)
    code, _, err = run_cli(["search", private / "idx", "cat"])
    assert code == 2 and "the index's model folder m is missing" in err and len(err.strip().splitlines()) == 1


def test_the_scrub_cuts_any_absolute_path_to_its_last_component():
    from isotropy.search.served import scrub

    text = "a (/home/u/x/model.safetensors does not match) and '/srv/idx' but not a/b, http://h/x or 1/2"
    assert scrub(text) == "a (model.safetensors does not match) and 'idx' but not a/b, http://h/x or 1/2"
    assert scrub("/my models/m1 is gone", "/my models/m1") == "m1 is gone"  # a known path with a space, whole


# --------------------------------------------------------------------------- S2: terminal escapes in hits


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("a city\x1b]52;c;cm0gLXJmIH4K\x07 end", "a city end"),  # OSC 52 (the clipboard), ended by BEL
        ("title\x1b]0;owned\x1b\\ ok", "title ok"),  # OSC 0 (the window title), ended by ST
        ("\x1b[31mred\x1b[0m", "red"),  # CSI
        ("c1 \x9d0;x\x9c and \x9b2J", "c1  and "),  # 8-bit OSC and CSI
        ("dcs \x1bPq#0\x1b\\ after", "dcs  after"),
        ("bell\x07 del\x7f nul\x00", "bell\\x07 del\\x7f nul\\x00"),  # a lone control: escaped, visible
        ("abc \u202edcba", "abc \\u202edcba"),  # a bidirectional override
        ("tab\there\nnext", "tab here next"),
        ("café 模型 naïve", "café 模型 naïve"),
    ],
)
def test_s2_printable_strips_sequences_and_escapes_controls(raw, shown):
    assert printable(raw) == shown


@given(st.text())
def test_s2_printable_never_lets_a_control_character_through(text):
    import unicodedata

    out = printable(text)
    assert not any(unicodedata.category(c) == "Cc" for c in out)
    assert not any(c in out for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    if text.isascii() and text.isprintable():
        assert out == text


def test_s2_search_prints_no_escape_sequence_and_json_keeps_the_text(pq_folder, tmp_path):
    """S2-061: a document holding OSC 52 is printed without it; --json keeps it exact."""
    doc = "the cat sat\x1b]52;c;cm0gLXJmIH4K\x07 on the mat"
    corpus = _lines(tmp_path / "esc.txt", [doc, "a dog ran", "the river stone"])
    code, _, err = run_cli(["index", "build", corpus, "-o", tmp_path / "esc", "--model", pq_folder / "words.txt", "--no-whiten"])
    assert code == 0, err
    code, out, _ = run_cli(["search", tmp_path / "esc", "the cat sat on the mat\x1b]0;t\x07", "-n", "3"])
    assert code == 0 and "the cat sat on the mat" in out
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", out), repr(out)
    code, out, _ = run_cli(["search", tmp_path / "esc", "the cat sat on the mat", "-n", "3", "--json"])
    assert code == 0 and doc in [h["text"] for h in json.loads(out)["results"][0]["hits"]]


def test_s2_an_error_line_escapes_what_it_quotes(tmp_path):
    code, _, err = run_cli(["search", tmp_path / "idx\x1b]0;owned\x07", "cat"])
    assert code == 2 and "\x1b" not in err and "\x07" not in err and "does not exist" in err


# --------------------------------------------------------------------------- T3: a lone surrogate


def test_t3_a_lone_surrogate_is_a_422_with_our_error(folder):
    client = _client(folder / "idx")
    r = client.post("/search", content=b'{"queries": ["a \\ud800 man"], "k": 2}', headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json() == {"error": "query 1 of 1 is not valid text (a lone surrogate)"}
    assert client.get("/search", params={"q": "cat"}).status_code == 200


def test_t3_index_search_and_encode_refuse_a_lone_surrogate(folder):
    index = Index.load(folder / "idx")
    with pytest.raises(IsotropyError, match=r"^query 2 of 2 is not valid text \(a lone surrogate\)$"):
        index.search(["cat", "a \udc00 man"])
    with pytest.raises(IsotropyError, match=r"^sentence 1 of 1 is not valid text"):
        index.encoder.encode("\ud83d")


# --------------------------------------------------------------------------- T4, T5, T6: a mapped file cut short

CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    from pathlib import Path
    from isotropy.search import Index
    from isotropy.search.serve import create_app
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

    for idx, name in zip(map(Path, sys.argv[1::2]), sys.argv[2::2]):
        client = TestClient(create_app(Index.load(idx), index_dir=idx, log=lambda _: None), base_url="http://127.0.0.1:8765")
        q = {"q": "the cat sat", "k": 3, **({"rerank": 50} if name == "vectors.npy" else {})}
        before = client.get("/search", params=q).json()["hits"]
        good = (idx / name).read_bytes()
        with open(idx / name, "r+b") as fh:  # cut short in place (the same inode, still mapped), as `cp short over` does
            fh.truncate(100)
        cut = client.get("/search", params=q)
        health = client.get("/health").json()
        (idx / name).write_bytes(good)  # put back (in place): the next request loads it again
        after = client.get("/search", params=q).json()
        out = {"before": before, "status": cut.status_code, "cut": cut.json(), "health": health, "after": after}
        print(json.dumps(out), flush=True)
    """
)


def _child(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=DEADLINE_S * 3, env=env)


def test_t5_t6_a_served_mapped_file_cut_short_is_a_503_not_a_crash(pq_folder, tmp_path):
    """S3-044 (the kept vectors.npy), S3-043 (a Dask-built index's index.ivfdata) and a compressed index's own
    index.faiss (memory-mapped too) cut short in place under serve:
    a 503 with one line (the server lives), /health says why, and the file put back is served again. In a child
    process: the old code died there of SIGBUS, which would take the test runner with it."""
    cases = [("pq", "vectors.npy"), ("ondisk", "index.ivfdata"), ("pq", "index.faiss")]  # index.faiss: faiss's IO_FLAG_MMAP
    for kind, name in cases:
        shutil.copytree(pq_folder / kind, tmp_path / name / kind)
    done = _child("-c", CHILD, *(str(a) for kind, name in cases for a in (tmp_path / name / kind, name)))
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # the old code: -7 (SIGBUS)
    assert len(done.stdout.strip().splitlines()) == len(cases)
    for (kind, name), line in zip(cases, done.stdout.strip().splitlines()):
        out = json.loads(line)
        assert out["before"] and out["status"] == 503, out
        assert f"{kind}/{name} was cut short on disk" in out["cut"]["error"] and "\n" not in out["cut"]["error"]
        assert any("cut short" in w for w in out["health"]["warnings"])
        _no_absolute_path(json.dumps(out), tmp_path)
        assert out["after"]["hits"] == out["before"] and out["after"]["warnings"] == []


THREADS_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from isotropy.search import Index

    def live(tid):  # not exiting: a joined thread can still be listed for a moment after pthread_join returns
        try:
            with open(f"/proc/self/task/{tid}/stat") as fh:
                flags = int(fh.read().rsplit(")", 1)[1].split()[6])
        except (OSError, IndexError, ValueError):
            return False  # gone while we looked
        return not flags & 0x4  # PF_EXITING: set as the thread starts to exit, before its joiner wakes

    def count():
        return sum(live(tid) for tid in os.listdir("/proc/self/task"))

    index = Index.load(sys.argv[1])
    index.search(["a cat", "the dog", "a mat"], 3)  # a first search of several queries starts OpenMP's pool, which stays
    # the queries embedded first: the search alone is counted (a Python thread the encoder joined can still be
    # listed for a moment, so the count may fall between two counts, never rise)
    batches = [index.embed(q) for q in (["the cat sat"], ["a dog", "the mat", "a cat on the mat"])]  # 4, 12 lists
    before, after = count(), []
    for Q in batches:
        assert len(index.search_vectors(Q, 3).ids) == len(Q)
        after.append(count())
    print(json.dumps({"before": before, "after": after}))
    """
)


@pytest.mark.parametrize("kind", ["ondisk", "pq"])
def test_a_search_of_on_disk_lists_leaves_no_thread_reading_them(pq_folder, kind):
    """faiss's on-disk inverted lists start prefetch threads (one a probed list, up to 32) that page the lists in
    beside a search and outlive it: one still reading when the file was cut short before the next request died of
    SIGBUS, taking the server with it (T5/T6's child, now and then on a loaded machine). Each search now joins
    them: after it the process runs no more threads than before it (a count, not a clock; in a child process,
    where no other test's threads come and go; threads already exiting are not counted). ``pq``: a compressed
    index memory-mapped whole (IO_FLAG_MMAP), whose lists faiss reads as on-disk lists over index.faiss itself:
    they were not joined (T5/T6's index.faiss case died of SIGBUS in 6 of 40 runs on a loaded machine)."""
    if not Path("/proc/self/task").is_dir():
        pytest.skip("counts threads through Linux's /proc")
    done = _child("-c", THREADS_CHILD, str(pq_folder / kind))
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert max(out["after"]) <= out["before"], out


def test_t4_no_verify_on_a_truncated_ivfdata_is_one_line(pq_folder, tmp_path):
    """S6-020: --no-verify (no digest) memory-maps the lists: their size is checked against what the lists need
    first: one line, exit 2 (in a child process: the old code died of SIGBUS)."""
    shutil.copytree(pq_folder / "ondisk", tmp_path / "ondisk")
    with open(tmp_path / "ondisk" / "index.ivfdata", "r+b") as fh:
        fh.truncate(100)
    done = _child("-m", "isotropy.cli", "--no-verify", "search", str(tmp_path / "ondisk"), "the cat", "-n", "2")
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])  # the old code: -7 (SIGBUS)
    err = done.stderr
    assert err.startswith("error: ") and "index.ivfdata holds 100 bytes but its inverted lists need" in err
    assert len(err.strip().splitlines()) == 1  # faiss's own "updating ondisk filename" line is not shown either


def test_t4_no_verify_on_a_truncated_vectors_file_is_one_line(pq_folder, tmp_path):
    shutil.copytree(pq_folder / "pq", tmp_path / "pq")
    data = (tmp_path / "pq" / "vectors.npy").read_bytes()
    (tmp_path / "pq" / "vectors.npy").write_bytes(data[: len(data) - 64])
    code, _, err = run_cli(["--no-verify", "search", tmp_path / "pq", "the cat", "-n", "2"])
    assert code == 2 and f"holds {len(data) - 64:,} bytes but its header's rows need {len(data):,}" in err
    assert len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------- W10, U12, U13, U21: search and build


def test_w10_search_index_takes_a_bare_string_as_one_query(folder):
    """S7-031: as Index.search does; it searched 'c', 'a', 't' before."""
    from isotropy import search_index

    res = search_index(folder / "idx", "cat", k=2)
    assert res.queries == ["cat"] and res.ids.shape == (1, 2)


@pytest.mark.parametrize(
    "kind, option, words",
    [
        ("flat", "--nprobe", "--nprobe applies to ivf, ivfpq or opq indexes; this index is flat"),
        ("pq", "--ef-search", "this index is ivfpq"),
    ],
)
def test_u12_a_search_knob_the_index_does_not_have_is_refused(pq_folder, kind, option, words):
    """S2-011: refused with one line, as --rerank on a flat index is (it was ignored without a word)."""
    code, _, err = run_cli(["search", pq_folder / kind, "the cat", option, "4"])
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_u13_an_ivfpq_index_that_finds_fewer_hits_says_so_beside_k_above_the_size(pq_folder):
    """S2-013: -n above the index's size on an ivfpq index probing 1 of its 4 lists: both warnings, a truthful k."""
    code, out, err = run_cli(["search", pq_folder / "pq", "the cat sat", "-n", "5000", "--nprobe", "1", "--json"])
    body = json.loads(out)
    hits = len(body["results"][0]["hits"])
    assert code == 0 and body["k"] == 400 and hits < 400  # k: the depth searched; the hits found are fewer
    assert "k=5000 is larger than the index, which holds 400 sentences: searching for all 400" in body["warning"]
    assert "found fewer than 400 hits for 1 of 1 queries (raise nprobe)" in body["warning"] and "returning all" not in err


def test_u21_index_build_and_add_say_which_rows_hold_no_known_word(pq_folder, tmp_path):
    """S2-059: as encode and search do: the count and the first rows."""
    corpus = _lines(tmp_path / "oov.txt", ["the cat sat", "qqzzx wwkkv", "a dog", "qqzzx"])
    code, _, err = run_cli(["index", "build", corpus, "-o", tmp_path / "io", "--model", pq_folder / "words.txt", "--no-whiten"])
    assert code == 0 and "warning: " in err and "2 of 4 sentences hold no word the static model knows (rows 2, 4)" in err
    code, _, err = run_cli(["index", "add", tmp_path / "io", _lines(tmp_path / "more.txt", ["zzz", "the mat"])])
    assert code == 0 and "1 of 2 sentences hold no word the static model knows (row 1)" in err
    code, _, err = run_cli(
        ["index", "build", corpus, "-o", tmp_path / "auto", "--model", pq_folder / "words.txt", "--method", "auto"]
    )
    assert code == 0 and "2 of 4 sentences hold no word" in err


# --------------------------------------------------------------------------- U23, U24: every error is our JSON


@pytest.mark.parametrize(
    "method, path, kwargs, status, words",
    [
        ("GET", "/nowhere", {}, 404, ("no /nowhere here", "GET /search")),
        ("PUT", "/search", {}, 405, ("PUT is not allowed",)),
        ("GET", "/search", {"params": {"q": "cat"}, "headers": {"host": "evil.example"}}, 400, ("Host header", "--allow-host")),
        ("POST", "/search", {"content": b'{"queries": ["\xff"]}'}, 400, ("cannot be read as JSON", "utf-8")),
        ("POST", "/search", {"content": b"[" * 100_000 + b"]" * 100_000}, 400, ("cannot be read as JSON",)),
        ("POST", "/search", {"content": b'{"k": ' + b"9" * 5000 + b"}"}, 400, ("cannot be read as JSON",)),
        (
            "POST",
            "/search",
            {"content": b'{"queries"', "headers": {"content-length": "10"}},
            422,
            ("not valid JSON", "at byte 10"),
        ),
    ],
)
def test_u23_u24_every_error_body_is_one_json_line(folder, method, path, kwargs, status, words):
    """S3-006, S3-009: 404/405, the Host refusal and bodies FastAPI cannot parse: {"error": "one line"}, never a
    bare byte offset nor {"detail": ...}."""
    client = _client(folder / "idx")
    headers = {"content-type": "application/json", **kwargs.pop("headers", {})}
    r = client.request(method, path, headers=headers, **kwargs)
    assert r.status_code == status and r.headers["content-type"] == "application/json", r.text
    body = r.json()
    assert list(body) == ["error"] and "\n" not in body["error"], body
    assert all(w in body["error"] for w in words), body
    assert not re.fullmatch(r"\d+: .*", body["error"])


# --------------------------------------------------------------------------- U25, U26, U29, U30: the server process


@pytest.fixture
def live(folder):
    """A real server on 127.0.0.1 (a port the kernel picks) whose request bodies must arrive within 0.5 s."""
    from isotropy.search.serve import listening_socket, make_server

    server = make_server(Index.load(folder / "idx"), body_timeout=0.5, log=lambda _: None)
    sock = listening_socket("127.0.0.1", 0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(timeout=DEADLINE_S)
    sock.close()


def test_u25_a_body_shorter_than_its_length_is_answered_408_and_closed(live):
    """S3-010: Content-Length 500, 31 bytes sent: 408 and the connection closed, not held open forever."""
    body = b'{"queries": ["cat"], "k": 2}   '
    with socket.create_connection(("127.0.0.1", live), timeout=DEADLINE_S) as conn:
        conn.sendall(
            b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n" + body
        )
        received = b""
        while chunk := conn.recv(65536):  # returns b"" once the server closes the connection
            received += chunk
    head, _, payload = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"application/json" in head, received
    assert "did not arrive whole within 0.5 s (31 bytes of 500 declared)" in json.loads(payload)["error"]


def test_u26_sighup_stops_the_server_cleanly(folder):
    """S3-022: SIGHUP (a closed terminal) stops serve as SIGTERM and Ctrl-C do: exit 0, "stopped"."""
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "isotropy.cli", "serve", str(folder / "idx"), "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stderr.readline()  # the address: the server is about to answer
        assert re.search(r"serving on http://127\.0\.0\.1:\d+", line), line
        import httpx

        url = re.search(r"http://\S+", line).group()
        for _ in range(DEADLINE_S * 10):  # until uvicorn answers (bounded)
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                threading.Event().wait(0.1)
    finally:
        proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=DEADLINE_S)
    err = proc.stderr.read()
    assert proc.returncode == 0 and err.strip().endswith("stopped"), (proc.returncode, err)


def test_u29_an_ipv6_address_is_printed_in_brackets(folder, monkeypatch):
    """S3-033: `--host ::1` printed http://::1:PORT, which no client takes."""
    from isotropy.search import serve

    assert serve.url_of("::1", 8000) == "http://[::1]:8000" and serve.url_of("[::1]", 1) == "http://[::1]:1"
    assert serve.url_of("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    try:
        socket.socket(socket.AF_INET6).close()
        with socket.create_server(("::1", 0), family=socket.AF_INET6):
            pass
    except OSError:
        pytest.skip("no IPv6 loopback here")
    lines: list[str] = []
    monkeypatch.setattr(serve, "_run_until_stopped", lambda server, sock: sock.close())
    serve.load_and_serve(folder / "idx", "::1", 0, echo=lines.append)
    assert re.search(r"serving on http://\[::1\]:\d+$", lines[0]), lines


def test_u30_a_missing_index_folder_is_said_to_not_exist(tmp_path):
    """S3-038: "nosuch is not a folder of a fitted isotropy artefact" -> "nosuch does not exist" (serve and search)."""
    for args in (["serve", tmp_path / "nosuch", "--port", "0"], ["search", tmp_path / "nosuch", "cat"]):
        code, _, err = run_cli(args)
        assert code == 2 and err.strip().endswith("nosuch does not exist: it is not a folder of a saved index"), err


# --------------------------------------------------------------------------- U27, U28: the watched folder


def test_u27_a_folder_replaced_in_two_steps_is_loaded_once_complete(private, tmp_path):
    """S3-028: a folder holding only config.json (cannot be loaded), then completed: the completed one is served."""
    client = _client(private / "idx")
    Index(Encoder(str(private / "m"))).add([*CORPUS, "the river stone"]).save(tmp_path / "next")
    (private / "idx").rename(tmp_path / "old")
    (private / "idx").mkdir()
    shutil.copy2(tmp_path / "next" / "config.json", private / "idx" / "config.json")
    body = client.get("/search", params={"q": "cat"}).json()
    assert body["hits"] and "cannot be loaded" in body["warnings"][-1]
    for f in (tmp_path / "next").iterdir():
        if f.name != "config.json":
            (shutil.copytree if f.is_dir() else shutil.copy2)(f, private / "idx" / f.name)
    h = client.get("/health").json()
    assert h["size"] == len(CORPUS) + 1 and h["generation"] == 2 and h["warnings"] == []


def test_u28_a_deleted_folder_is_said_while_the_old_index_serves(private):
    """S3-030: the served folder deleted: every response says so; the old index keeps serving; back: said no more."""
    client = _client(private / "idx")
    (private / "idx").rename(private / "away")
    body = client.get("/search", params={"q": "cat"}).json()
    assert body["hits"] and any("the index folder idx was deleted or moved away" in w for w in body["warnings"])
    (private / "away").rename(private / "idx")
    assert client.get("/health").json()["warnings"] == []
