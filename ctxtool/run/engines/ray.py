"""``--engine ray``: the jobs as a Ray Data dataset, one block (one task) per shard, on a cluster
at ``address`` or a local one started for the run. Jobs and results travel pickled
(cloudpickle); a job's error comes back as that error, the first in job order. The limiter is
an async actor holding a semaphore that every worker asks before a summary request
(``--max-in-flight``). Ray's own output stays off stdout (:func:`_init`). Why a task asks for a
fraction of a CPU: :data:`CPUS_PER_TASK`."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import pickle
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from ...errors import CtxtoolError, Failure
from .base import Engine, J, Limiter, T

CPUS_PER_TASK = 0.5

#: seconds a cluster's address has to take a connection before the run ends (Ray itself tries
#: again for minutes, printing a warning every few seconds)
REACH_TIMEOUT = 10.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise CtxtoolError("--engine ray needs Ray: pip install 'ctxtool[ray]'", kind=Failure.DEPENDENCY) from e
    return ray


def _run_row(row: dict[str, Any]) -> dict[str, Any]:
    fn, job = pickle.loads(row["job"])
    try:
        res: Any = ("ok", fn(job))
    except CtxtoolError as e:  # the user's error, as it is: raised again on the driver
        res = ("error", e)
    return {"i": row["i"], "result": pickle.dumps(res)}


class RayEngine(Engine):
    name: ClassVar[str] = "ray"
    help: ClassVar[str] = "a Ray cluster (--address, else a local one); pip install 'ctxtool[ray]'"

    def __init__(self, *, workers: int | None = None, address: str | None = None) -> None:
        super().__init__(workers=workers, address=address)
        self._started = False

    def _ray(self) -> Any:
        ray = import_ray()
        if not ray.is_initialized():
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
            if self.address:
                _init(ray, address=self.address, **kw)
            else:
                _init(ray, num_cpus=self.workers or os.cpu_count() or 1, **kw)
                self._started = True
        ctx = ray.data.DataContext.get_current()
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # after Ray Data's import set its own
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        ctx.execution_options.preserve_order = True  # a Parquet shard's rows in their order (ray_parquet)
        return ray

    def map(self, fn: Callable[[J], T], jobs: Sequence[J]) -> list[T]:
        if not jobs:
            return []
        ray = self._ray()
        dumps = ray.cloudpickle.dumps  # an operation defined in __main__ (a notebook) travels by value
        try:
            rows = [{"i": k, "job": dumps((fn, j))} for k, j in enumerate(jobs)]
        except (TypeError, pickle.PicklingError) as e:  # e.g. a summary model holding a connection
            raise CtxtoolError(f"--engine ray: this run cannot be sent to the workers ({e})", kind=Failure.USAGE) from e
        ds = ray.data.from_items(rows, override_num_blocks=len(rows)).map(_run_row, num_cpus=CPUS_PER_TASK)
        done = sorted(ds.take_all(), key=lambda r: r["i"])
        out: list[T] = []
        for r in done:
            kind, value = pickle.loads(r["result"])
            if kind == "error":
                raise value
            out.append(value)
        return out

    def limiter(self, limit: int) -> Limiter:
        ray = self._ray()
        return RayLimiter(_in_flight_actor(ray).remote(limit), limit)

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False


def _init(ray: Any, **kw: Any) -> None:
    """``ray.init(**kw)``, Ray's own output kept off stdout (the data), to stderr:

    - a driver prints what its cluster reports on the error channel (the raylet's "WARNING:
      N PYTHON worker processes have been started ...", published to every driver) from a
      thread of its own, ``ray._private.worker.listen_error_messages``, to ``sys.stdout``,
      whatever ``log_to_driver`` says: those lines are printed as Ray prints its workers'
      stderr (:func:`_errors_to_stderr`);
    - the processes ``ray.init`` starts (a local cluster: GCS, raylet, and the workers the
      raylet starts) inherit stderr as their stdout (:func:`_stdout_to_stderr`).

    A cluster that cannot be started or reached is a :class:`CtxtoolError` (``REMOTE``)."""
    _errors_to_stderr(ray)
    where = f"the Ray cluster at {kw['address']}" if kw.get("address") else "a local Ray cluster"
    if kw.get("address"):
        _reach(ray, kw["address"])
    with _stdout_to_stderr():
        try:
            ray.init(**kw)
        except (OSError, RuntimeError, ValueError) as e:  # no cluster there: the setting, not a bug
            raise CtxtoolError(f"--engine ray: {where} could not be started or reached: {e}",
                               kind=Failure.REMOTE) from e


def _reach(ray: Any, address: str) -> None:
    """A cluster address (``host:port``, ``ray://host:port``) where nothing takes a connection
    within :data:`REACH_TIMEOUT` is a :class:`CtxtoolError` (``REMOTE``) at once. A loopback
    host is also tried at this node's address, where Ray itself connects for it; ``auto`` and
    an address Ray reads otherwise are left to Ray."""
    client = address.startswith("ray://")
    target = address.removeprefix("ray://")
    if target in ("auto", "local") or "://" in target or "/" in target:
        return
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        host, port = target, "10001" if client else "6379"
    host = host.strip("[]")
    hosts = [host]
    if host in ("localhost", "127.0.0.1", "::1"):
        with contextlib.suppress(Exception):  # Ray's answer for this node, when it has one
            hosts.append(str(ray.util.get_node_ip_address()))
    error: OSError | None = None
    for h in hosts:
        try:
            with socket.create_connection((h, int(port)), timeout=REACH_TIMEOUT):
                return
        except OSError as e:
            error = error or e
    raise CtxtoolError(f"--engine ray: the Ray cluster at {address} could not be reached: nothing took a connection "
                       f"at {host}:{port} ({error})", kind=Failure.REMOTE)


def _errors_to_stderr(ray: Any) -> None:
    """Ray's printer of the error channel, ``print_to_stdstream``, told that every line is
    for stderr (``is_err``): the listener thread looks the function up at each message."""
    worker: Any = getattr(getattr(ray, "_private", None), "worker", None)
    show = getattr(worker, "print_to_stdstream", None)
    if show is None or getattr(show, "__wrapped__", None) is not None:  # not there, or done already
        return

    @functools.wraps(show)
    def to_stderr(data: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        return show({**data, "is_err": True}, *args, **kwargs)

    worker.print_to_stdstream = to_stderr


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 is stderr's while the block runs (the processes it starts keep it);
    then stdout again."""
    saved: int | None = None
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no descriptor 1 (closed, embedded use)
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    try:
        yield
    finally:
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


class RayLimiter:
    """A :class:`~ctxtool.run.engines.base.Limiter` backed by an actor: it pickles (the actor's
    handle), so every task of the cluster shares it."""

    def __init__(self, actor: Any, limit: int) -> None:
        self.actor = actor
        self.limit = limit

    def acquire(self) -> None:
        import ray

        ray.get(self.actor.acquire.remote())

    def release(self) -> None:
        import ray

        ray.get(self.actor.release.remote())

    @property
    def peak(self) -> int:
        import ray

        return int(ray.get(self.actor.peak.remote()))


@functools.cache
def _in_flight_actor(ray: Any) -> Any:
    """The actor class (defined once, when Ray is there)."""
    import asyncio

    @ray.remote(num_cpus=0)
    class InFlight:
        def __init__(self, limit: int) -> None:
            self.sem = asyncio.Semaphore(limit)
            self.held = 0
            self.most = 0

        async def acquire(self) -> None:
            await self.sem.acquire()
            self.held += 1
            self.most = max(self.most, self.held)

        async def release(self) -> None:
            self.held -= 1
            self.sem.release()

        async def peak(self) -> int:
            return self.most

    return InFlight
