"""The client side of the cluster: Dask's import, the scheduler probe, the client, gathering
results in input order, the fixed merge tree, and input errors carried as values."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .._progress import ProgressBar
from ..errors import IsotropyError

__all__ = [
    "import_dask",
    "probe",
    "client_for",
    "worker_processes",
    "gather",
    "tree_reduce",
    "input_errors_as_values",
    "raise_error_value",
]

CONNECT_TIMEOUT = 5.0  # seconds to reach an existing scheduler before failing

# What a worker of ours imports for its first task, loaded once in the forkserver that the local cluster's worker
# processes are forked from (worker_processes); a spawned worker imports them itself at each start, a restart after
# a lost worker included (BENCHMARKS dask-start). The model classes' own modules load with the model.
WORKER_PRELOAD = ("distributed", "numpy", "torch", "transformers.modeling_utils", "isotropy.distributed.tasks")


def import_dask():
    try:
        import distributed
    except ImportError:
        raise IsotropyError("the distributed engine needs Dask: pip install 'isotropy[distributed]'") from None
    return distributed


def probe(address: str, timeout: float) -> None:
    """Fail within about ``timeout`` seconds, naming the address, when nothing there answers as a Dask scheduler.

    Two checks: something listens (a refused or unroutable connection fails at once or at the timeout), and, on
    plain TCP, it speaks first as a Dask scheduler does (the comm handshake: the scheduler writes its own message
    on accept, before it reads ours). A port that accepts and stays silent (another service, a stuck scheduler)
    would otherwise hang ``distributed.Client``, whose timeout does not bound that handshake. TLS and websocket
    addresses only get the first check (their peer waits for our side to speak first).
    """
    m = re.match(r"^(?:(tcp|tls|ucx|inproc|ws|wss)://)?\[?([^\]/]*?)\]?:(\d+)/?$", address.strip())
    if not m:
        raise IsotropyError(f"cannot use the Dask scheduler address {address!r}: expected tcp://HOST:PORT")
    scheme, host, port = m.groups()
    if scheme not in (None, "tcp", "tls", "ws", "wss"):
        return
    try:
        conn = socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout)
    except OSError as exc:
        raise IsotropyError(
            f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({exc.strerror or exc}); "
            f"is it running, and is the address right?"
        ) from None
    with conn:
        if scheme not in (None, "tcp"):
            return
        try:
            conn.settimeout(timeout)
            spoke = bool(conn.recv(1))
        except OSError:  # socket.timeout included: the peer accepted and said nothing
            spoke = False
    if not spoke:
        raise IsotropyError(
            f"{address} accepts connections but did not answer as a Dask scheduler within {timeout:g} s "
            f"(another service on that port, or a stuck scheduler?)"
        )


@contextlib.contextmanager
def client_for(address: Any = None, n_workers: int | None = None) -> Iterator[Any]:
    """A Dask client: on ``address`` (a scheduler address or an existing ``distributed.Client``),
    or on a fresh local cluster of ``n_workers`` processes (default: one per core), torn down after."""
    distributed = import_dask()
    if address is not None and not isinstance(address, (str, os.PathLike)):
        if not isinstance(address, distributed.Client):
            raise IsotropyError(f"address must be a scheduler address or a distributed.Client, not {type(address).__name__}")
        yield address
        return
    if address is not None:
        address = str(address)
        probe(address, CONNECT_TIMEOUT)
        try:
            client = distributed.Client(address, timeout=CONNECT_TIMEOUT * 2, set_as_default=False)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise IsotropyError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None
        try:
            yield client
        finally:
            client.close()
        return
    with _local_client(distributed, n_workers) as client:
        yield client


@contextlib.contextmanager
def worker_processes() -> Iterator[str]:
    """Start a local cluster's worker processes from a forkserver that has imported what our tasks need
    (``WORKER_PRELOAD``), for as long as the block runs; yields the start method.

    Dask spawns each worker process afresh by default (``distributed.worker.multiprocessing-method: spawn``), so each
    start, and each restart after a lost worker, imports torch and transformers again (docs/BENCHMARKS.md, section
    dask-start, measures both ways). The nanny reads the method at every start, so the block must last as long as
    the cluster.
    A worker gets this process's environment as it was when the block started (Dask's nanny sets it in the worker).
    Where there is no forkserver (Windows), or ``fork`` is configured, nothing changes; blocks may nest.
    A preloaded module that fails to import is skipped by the forkserver; the task then imports what it needs.
    """
    import multiprocessing

    import dask
    from distributed.utils import get_mp_context

    key = "distributed.worker.multiprocessing-method"
    method = dask.config.get(key)
    if method not in ("spawn", "forkserver") or "forkserver" not in multiprocessing.get_all_start_methods():
        yield method
        return
    # A forked worker's environment is the forkserver's (this process's when the first worker started), not this
    # process's now, as a spawned one's is: the nanny gives each worker the environment as the block starts.
    environ = {**dask.config.get("distributed.nanny.environ"), **os.environ}
    with dask.config.set({key: "forkserver", "distributed.nanny.environ": environ}):
        # Dask's own preload is set on its first call; ours replaces it. It applies when the forkserver starts: once
        # per process, at the first worker start (a forkserver already running keeps what it has imported).
        get_mp_context().set_forkserver_preload(list(WORKER_PRELOAD))
        yield "forkserver"


@contextlib.contextmanager
def _local_client(distributed: Any, n_workers: int | None) -> Iterator[Any]:
    import logging
    import tempfile

    import dask

    n = int(n_workers or os.cpu_count() or 1)
    if n < 1:
        raise IsotropyError(f"n_workers must be at least 1, got {n_workers}")
    with tempfile.TemporaryDirectory(prefix="isotropy-dask-") as scratch, worker_processes():
        # One single-threaded worker process per core; Dask sets OMP/MKL threads to 1 in
        # each, so torch in n workers does not oversubscribe the n cores. A worker holds only
        # the task it runs (saturation 1, not Dask's 1.1, which queues a second one on it):
        # Dask counts a worker's death against every task it holds, so a shard that kills
        # its worker is then the only one blamed, and the one named.
        with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}):
            cluster = _start_local_cluster(
                distributed,
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                local_directory=scratch,
                # CRITICAL, not ERROR: a loaded machine makes workers log heartbeat errors while the
                # cluster is torn down after a failure; the failure itself reaches the user as one line
                silence_logs=logging.CRITICAL,
            )
        try:
            with distributed.Client(cluster, set_as_default=False) as client:
                yield client
        finally:
            cluster.close()


def _start_local_cluster(distributed: Any, **options: Any) -> Any:
    """``distributed.LocalCluster(**options)``; interrupted while it starts (Ctrl-C, SIGTERM), the half-started
    cluster is kept from Dask's exit hook, which would try to close it and print a traceback after our one line
    (``close_clusters`` asserts on a cluster still starting), and its loop's unretrieved task errors are not
    logged. Its worker processes end with us: each watches a pipe from its nanny, which runs in this process."""
    from distributed.deploy.spec import SpecCluster

    before = set(SpecCluster._instances)
    try:
        return distributed.LocalCluster(**options)
    except BaseException:
        for cluster in set(SpecCluster._instances) - before:
            cluster.shutdown_on_close = False
            # the start still running on Dask's loop thread fails as the process exits; its task's error would be
            # logged at exit ("Task exception was never retrieved") after our one line
            loop = getattr(getattr(cluster, "loop", None), "asyncio_loop", None)
            if loop is not None:
                loop.set_exception_handler(lambda loop, context: None)
            _halt(cluster)
        raise


def _halt(cluster: Any, timeout: float = 10.0) -> None:
    """End what a cluster interrupted while it started still has running: its loop first, so that no worker start
    begins after, then each worker process its nanny had asked for (started, it is killed; still being created,
    that is waited for). Left alone, a start under way on Dask's threads creates its process as this one exits: the
    child then finds this process's semaphores gone (its queues cannot be rebuilt) and prints a traceback after
    our one line. Dask has no public call for this (``close`` asserts on a cluster still starting), hence the
    private names, each looked up with a default."""
    runner = getattr(cluster, "_loop_runner", None)
    if runner is not None:
        runner.stop(timeout=timeout)
    # a nanny still starting is in the cluster's _created, not yet in its workers (SpecCluster adds it once started)
    started = list(getattr(cluster, "workers", {}).values())
    for nanny in {id(n): n for n in [*started, *list(getattr(cluster, "_created", ()))]}.values():
        process = getattr(getattr(nanny, "process", None), "process", None)  # Nanny -> WorkerProcess -> AsyncProcess
        queue, thread = getattr(process, "_watch_q", None), getattr(process, "_watch_message_thread", None)
        if queue is None or thread is None:
            continue
        queue.put_nowait({"op": "stop"})  # queued after any start asked for: the thread ends once that has run
        thread.join(timeout)
        child = getattr(process, "_process", None)
        if child is not None and child.pid is not None:
            child.kill()
            child.join(timeout)


def gather(
    client: Any,
    futures: list,
    label: str,
    sources: list[Path],
    show_progress: bool | None,
    fetch: bool = True,
    *,
    what: str = "shard",
    after: str = "",
) -> list:
    """Results of ``futures`` in submission order, a progress bar advancing as they finish.

    A task that raised (after its retries) re-raises here; a shard whose worker was lost
    more often than the scheduler allows (``distributed.scheduler.allowed-failures``; a
    lost worker's shards are otherwise run again elsewhere) becomes one line naming the
    shard (``what``: the noun it is named by, ``after``: what the line adds, such as what
    a rerun keeps).

    ``fetch=False``: nothing comes back (the results feed a reduction on the workers), and
    each finished future's place in ``futures`` is emptied, so that the client holds none
    of them and a result is freed on its worker once the reduction has read it (a corpus
    part's token sums are a few hundred MB: the dask distill of 1M lines, all 62 parts held
    to the end of the pass, peaked at 18 GB across its processes; with each let go, 5 GB).
    The scheduler still knows each task while its reduction needs it, so a lost
    worker's results are computed again.
    """
    distributed = import_dask()
    index = {f.key: i for i, f in enumerate(futures)}
    results: list = [None] * len(futures)
    with ProgressBar(len(futures), show_progress, label, min_total=2) as bar:
        for fut in distributed.as_completed(futures, loop=client.loop):
            i = index[fut.key]
            try:
                if fetch or fut.status == "error":
                    results[i] = raise_error_value(fut.result())  # re-raises the task's error
            except distributed.KilledWorker as exc:
                # Dask counts a death against every task the worker held, queued ones too: say what is known
                times = getattr(exc, "allowed_failures", None)
                times = "repeatedly" if not isinstance(times, int) else f"{times + 1} times"
                raise IsotropyError(
                    f"{what} {sources[i]} failed: the Dask worker processes holding it died {times} "
                    f"(out of memory? a crash in the model?){after}"
                ) from None
            if not fetch:
                futures[i] = None
            bar.advance()
    return results


def tree_reduce(items: Sequence[Any], combine) -> Any:
    """Reduce ``items`` by a fixed binary tree in input order: ``combine(a, b, depth, i)``.

    Pairs (0,1), (2,3), ... then pairs of those, an odd one out carried up. The shape
    depends only on the number of items, never on which task finished first, so
    the floating-point result is the same on every run.
    """
    level, depth = list(items), 0
    if not level:
        raise IsotropyError("nothing to reduce")
    while len(level) > 1:
        depth += 1
        nxt = [combine(level[i], level[i + 1], depth, i) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


# --------------------------------------------------------------------------- input errors as values


def input_errors_as_values(fn):
    """Run a task so that bad input (an IsotropyError) comes back as ``{"error": line}``.

    Dask would retry a raising task (the same bad line fails every time) and log each
    attempt's traceback on the worker; an error returned as a value is neither retried
    nor logged, and the client raises it as the one line it is. Worker crashes and
    other exceptions still raise, so they are retried.
    """

    @functools.wraps(fn)
    def task(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except IsotropyError as exc:
            return {"error": str(exc)}

    return task


def is_error_value(result: Any) -> bool:
    return isinstance(result, dict) and set(result) == {"error"}


def raise_error_value(result: Any) -> Any:
    if is_error_value(result):
        raise IsotropyError(result["error"])
    return result
