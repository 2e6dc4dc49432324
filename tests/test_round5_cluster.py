"""Round 5 audit (issue #42), the cluster's client side: a scheduler address that accepts and never answers (H1, H2:
S2-064, S1-064), and an interrupt while the local cluster starts (T2: S2-039)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers import run_cli

pytest.importorskip("distributed")


class _Listener:
    """A loopback port that accepts connections; ``greeting`` is what it writes on accept (None: stays silent)."""

    def __init__(self, greeting: bytes | None) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.greeting, self.accepted, self.stop = greeting, [], threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(conn)
            if self.greeting:
                conn.sendall(self.greeting)

    def __enter__(self) -> _Listener:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        for conn in self.accepted:
            conn.close()
        self.sock.close()


def test_probe_refuses_a_port_that_accepts_and_stays_silent():
    from isotropy.distributed.cluster import probe
    from isotropy.errors import IsotropyError

    with _Listener(None) as silent:
        with pytest.raises(IsotropyError, match="accepts connections but did not answer as a Dask scheduler") as err:
            probe(silent.address, 0.5)
        assert silent.address in str(err.value) and len(silent.accepted) == 1
    with _Listener(b"\x00" * 8) as speaking:  # a scheduler writes its handshake on accept
        probe(speaking.address, 0.5)


def test_a_real_scheduler_passes_the_probe():
    import logging

    import distributed

    from isotropy.distributed.cluster import probe

    with distributed.LocalCluster(
        n_workers=0, processes=False, dashboard_address=":0", silence_logs=logging.CRITICAL, scheduler_kwargs={"protocol": "tcp"}
    ) as cluster:
        probe(cluster.scheduler_address, 5.0)


def test_a_command_on_a_silent_address_is_one_line(tmp_path, monkeypatch):
    import isotropy.distributed.cluster as cluster

    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", 0.5)
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "a.txt").write_text("a cat sleeps\na dog barks\n", encoding="utf-8")
    args = ["encode", "-o", str(tmp_path / "out"), "--model", "glove-6b-50d", "--engine", "dask"]
    with _Listener(None) as silent:
        code, _, err = run_cli([*args, "--input", str(tmp_path / "shards" / "*.txt"), "--address", silent.address])
    assert code == 2 and err.count("\n") == 1 and "did not answer as a Dask scheduler" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]


@pytest.mark.parametrize("resume", ["at_once", "after_the_caller_left"])
def test_an_interrupt_while_the_local_cluster_starts_prints_no_traceback_at_exit(tmp_path, resume):
    # SIGINT is sent by the worker's own start (no timing to race): Dask's exit hook then finds a cluster whose
    # worker never finished starting, which it used to try to close, printing a traceback after our line.
    # Dask's loop thread went on starting that worker after client_for had left (its process then spawned as ours
    # exited, and died on our semaphores, already gone: a traceback in 1 run of 5). "after_the_caller_left" holds
    # the start until the caller has the KeyboardInterrupt, so that order is certain: the loop must be stopped by
    # then, and no worker process ever starts.
    script = tmp_path / "start.py"
    script.write_text(
        "import asyncio, os, signal, threading\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as a shell sends it, even if inherited ignored\n"
        "import distributed, psutil\n"
        "left = threading.Event()\n"
        "start = distributed.Nanny.start_unsafe\n"
        "async def interrupted(self):\n"
        "    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as the first worker starts\n"
        f"    while {resume == 'after_the_caller_left'} and not left.is_set():\n"
        "        await asyncio.sleep(0.01)\n"
        "    return await start(self)\n"
        "distributed.Nanny.start_unsafe = interrupted\n"
        "from isotropy.distributed.cluster import client_for\n"
        "try:\n"
        "    with client_for(None, 1):\n"
        "        pass\n"
        "except KeyboardInterrupt:\n"
        "    left.set()\n"
        "    print('interrupted')\n"
        "    print('loops', sum(t.name == 'IO loop' and t.is_alive() for t in threading.enumerate()))\n"
        "    print('children', len(psutil.Process().children(recursive=True)))\n",
        encoding="utf-8",
    )
    src = Path(__file__).resolve().parents[1] / "src"
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(src)},
    )
    lines = proc.stdout.split("\n")
    assert lines[:2] == ["interrupted", "loops 0"], proc.stdout + proc.stderr
    if resume == "after_the_caller_left":
        assert lines[2] == "children 0", proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr


def test_distill_on_a_silent_address_is_one_line_before_the_vocabulary_pass(tmp_path, monkeypatch, tiny_model_dir):
    import isotropy.distill.run as run
    import isotropy.distributed.cluster as cluster

    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", 0.5)
    monkeypatch.setattr(run, "distill_static", lambda *a, **k: pytest.fail("the vocabulary pass ran"))
    corpus = tmp_path / "c.txt"
    corpus.write_text("a cat sleeps on the mat\na dog barks at the moon\n", encoding="utf-8")
    with _Listener(None) as silent:
        code, _, err = run_cli(
            ["distill", "-o", str(tmp_path / "d"), "--model", str(tiny_model_dir), "--dims", "16", "--corpus", str(corpus)]
            + ["--engine", "dask", "--address", silent.address]
        )
    assert code == 2 and err.count("\n") == 1 and "did not answer as a Dask scheduler" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]
