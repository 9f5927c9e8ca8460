"""The process pool of the runner: workers forked when it starts, each reading pickled jobs
(``fn(*args)``) from a pipe of its own and answering on another, that die with this process even
under ``kill -9`` (``PR_SET_PDEATHSIG`` on Linux; everywhere, end-of-file on a pipe only this
process holds). Without ``os.fork`` the standard library's pool stands in. Why no
``multiprocessing``: docs/architecture.md, "Running, in more detail"."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

PR_SET_PDEATHSIG = 1  # linux/prctl.h
_HEAD = 8  # bytes of a message's length, before it


class WorkerDied(RuntimeError):
    """A worker process ended without answering (killed: out of memory, a signal)."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker, as its text (the cause of the
    exception raised again here)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Job:
    """One submitted call: :meth:`result` waits for it (answering the other workers meanwhile)."""

    __slots__ = ("_data", "_pool", "_state", "_value")

    def __init__(self, pool: ForkPool, data: bytes) -> None:
        self._pool = pool
        self._data: bytes | None = data
        self._state = "queued"  # then running, done, failed or cancelled
        self._value: Any = None

    def result(self) -> Any:
        while self._state in ("queued", "running"):
            self._pool._answer_one()
        if self._state == "cancelled":
            raise RuntimeError("the job was cancelled")
        if self._state == "failed":
            raise self._value
        return self._value

    def cancel(self) -> bool:
        """Drop the job if it has not started (True); a started job runs to its end."""
        if self._state == "queued":
            self._pool._queue.remove(self)
            self._state, self._data = "cancelled", None
        return self._state == "cancelled"

    def done(self) -> bool:
        return self._state in ("done", "failed", "cancelled")


class _Worker:
    __slots__ = ("job", "jobs", "pid", "results")

    def __init__(self, pid: int, jobs: int, results: int) -> None:
        self.pid = pid
        self.jobs = jobs  # our end of its job pipe (we write)
        self.results = os.fdopen(results, "rb")  # our end of its answer pipe
        self.job: Job | None = None


class ForkPool:
    """``workers`` processes forked now, running submitted calls (see the module docstring)."""

    def __init__(self, workers: int, *, pdeathsig: bool = True, gc_enabled: bool = True) -> None:
        import gc
        import select

        self._queue: deque[Job] = deque()
        self._last = False  # no job will be submitted any more (no_more_jobs)
        self._workers: dict[int, _Worker] = {}  # by the answer pipe's descriptor
        self._idle: list[_Worker] = []
        self._poll = select.poll()
        self._death_r, self._death_w = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # what is buffered here is written once, not by each worker too
            with contextlib.suppress(Exception):
                stream.flush()
        if pdeathsig:
            _prctl()
        frozen = gc.isenabled()
        if frozen:
            gc.freeze()  # the workers' collector leaves this process's objects alone (their pages stay shared)
        try:
            for _ in range(workers):
                self._fork(pdeathsig, gc_enabled)
        finally:
            if frozen:
                gc.unfreeze()

    def _fork(self, pdeathsig: bool, gc_enabled: bool) -> None:
        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: it never returns
            code = 1
            try:
                for fd in (job_w, res_r, self._death_w, *(x for w in self._workers.values() for x in (w.jobs, w.results.fileno()))):
                    os.close(fd)
                _serve(job_r, res_w, self._death_r, parent, pdeathsig, gc_enabled)
                code = 0
            finally:
                os._exit(code)
        os.close(job_r)
        os.close(res_w)
        w = _Worker(pid, job_w, res_r)
        self._workers[res_r] = w
        self._poll.register(res_r, _POLLIN)
        self._idle.append(w)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Job:
        if self._last:
            raise RuntimeError("no_more_jobs() was called: no job may be submitted")
        job = Job(self, pickle.dumps((fn, args), pickle.HIGHEST_PROTOCOL))
        self._queue.append(job)
        self._dispatch()
        return job

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        jobs = [self.submit(fn, x) for x in items]
        return (j.result() for j in jobs)

    def no_more_jobs(self) -> None:
        """Every job is submitted: each worker is told (end-of-file on its job pipe) as soon
        as none is left for it, and exits once it has answered, while the others still run,
        instead of all of them at :meth:`close`."""
        self._last = True
        self._dispatch()

    def _dispatch(self) -> None:
        while self._queue and self._idle:
            job = self._queue.popleft()
            w = self._idle.pop()
            data, job._data, job._state, w.job = job._data or b"", None, "running", job
            try:
                _send(w.jobs, data)
            except OSError:  # it died while idle
                self._died(w)
        if self._last and not self._queue:  # each worker has read all it will get
            for w in self._workers.values():
                if w.jobs >= 0:
                    os.close(w.jobs)  # end-of-file: it exits once its job is answered
                    w.jobs = -1

    def _answer_one(self) -> None:
        """Wait for the next answer from any worker, and give that worker the next job."""
        if not any(w.job for w in self._workers.values()):
            raise RuntimeError("no job is running")
        w = self._workers[self._poll.poll()[0][0]]
        data = _receive(w.results)
        if data is None:
            self._died(w)
            return
        job, w.job = w.job, None
        try:
            ok, value, trace = pickle.loads(data)
        except Exception as e:  # noqa: BLE001 (an answer this process cannot read: the job's failure)
            ok, value, trace = False, e, None
        if job is not None:
            if not ok and trace:
                value.__cause__ = RemoteTraceback(trace)
            job._state, job._value = ("done" if ok else "failed"), value
        self._idle.append(w)
        self._dispatch()

    def _died(self, w: _Worker) -> None:
        _, status = os.waitpid(w.pid, 0)
        self._forget(w)
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit status {os.waitstatus_to_exitcode(status)}"
        lost = [w.job] if w.job is not None else []
        if not self._workers:  # none left to run the rest
            lost.extend(self._queue)
            self._queue.clear()
        for job in lost:
            job._state, job._data, job._value = "failed", None, WorkerDied(f"a worker process ended without answering ({how})")

    def _forget(self, w: _Worker) -> None:
        fd = w.results.fileno()
        self._poll.unregister(fd)
        del self._workers[fd]
        if w in self._idle:
            self._idle.remove(w)
        if w.jobs >= 0:
            os.close(w.jobs)
        w.results.close()

    def close(self, *, wait: bool = True) -> None:
        """``wait``: run every job submitted to its end; else drop the queued ones and kill
        the workers still running one. Then each worker, its job pipe closed, exits."""
        if wait:
            while self._queue or any(w.job for w in self._workers.values()):
                self._answer_one()
        for job in list(self._queue):
            job.cancel()
        for w in list(self._workers.values()):
            if w.job is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w.pid, signal.SIGKILL)
            if w.jobs >= 0:
                os.close(w.jobs)  # end-of-file: an idle worker exits
            w.jobs = -1
        for w in list(self._workers.values()):  # every job pipe closed first: they exit together
            with contextlib.suppress(ChildProcessError):
                os.waitpid(w.pid, 0)
            self._forget(w)
        os.close(self._death_r)
        os.close(self._death_w)


_POLLIN = 1  # select.POLLIN (the same on every system with poll)


def _send(fd: int, data: bytes) -> None:
    """One message on a pipe: its length, then its bytes."""
    view = memoryview(len(data).to_bytes(_HEAD, "little") + data)
    while view:
        view = view[os.write(fd, view):]


def _receive(f: IO[bytes]) -> bytes | None:
    """The next message of a pipe, or None at its end (a message cut short: its writer died)."""
    head = f.read(_HEAD)
    if len(head) < _HEAD:
        return None
    size = int.from_bytes(head, "little")
    data = f.read(size)
    return data if len(data) == size else None


def _serve(job_r: int, res_w: int, death_r: int, parent: int, pdeathsig: bool, gc_enabled: bool) -> None:
    """A worker's life: answer each job read from ``job_r`` on ``res_w`` until end-of-file."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C stops the parent, which ends the workers
    with contextlib.suppress(OSError):
        sys.stdin.close()
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 (the worker's stdin until it exits)
    _worker_init(parent, death_r, pdeathsig, gc_enabled)
    jobs = os.fdopen(job_r, "rb")
    while (data := _receive(jobs)) is not None:
        try:
            fn, args = pickle.loads(data)
            answer = pickle.dumps((True, fn(*args), None), pickle.HIGHEST_PROTOCOL)
        except BaseException as e:  # noqa: BLE001 (every failure is the job's answer)
            import traceback

            trace = "".join(traceback.format_exception(e))
            try:
                answer = pickle.dumps((False, e, trace), pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 (an exception that does not pickle: its text)
                answer = pickle.dumps((False, RuntimeError(f"{type(e).__name__}: {e}"), trace), pickle.HIGHEST_PROTOCOL)
        _send(res_w, answer)


def _worker_init(parent: int, r: int, pdeathsig: bool, gc_enabled: bool) -> None:
    import gc

    if gc_enabled:
        gc.enable()  # forked while the parent paused it
    else:
        gc.disable()
    if pdeathsig and (prctl := _prctl()) is not None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(r,), name="ctxtool-parent-watch", daemon=True).start()


_PRCTL: list[Any] = []


def _prctl() -> Any:
    """Linux's ``prctl``, looked up once (before the workers are forked: each would load
    ctypes again); None elsewhere."""
    if not _PRCTL:
        fn = None
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError, ImportError):
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).prctl
        _PRCTL.append(fn)
    return _PRCTL[0]


def _watch_parent(r: int) -> None:
    while True:
        try:
            if not os.read(r, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    os._exit(1)


@contextlib.contextmanager
def worker_pool(workers: int, *, pdeathsig: bool = True, gc_enabled: bool = True) -> Iterator[Any]:
    """A pool of ``workers`` processes whose workers die with this process (see the module
    docstring): ``submit(fn, *args)`` gives a job whose ``result()`` waits for it; ``map``.
    Leaving the block normally waits for every job; leaving it by an exception drops the jobs
    not started and kills the workers still running one. ``gc_enabled``: whether the workers
    run the cyclic collector."""
    if not hasattr(os, "fork"):  # pragma: no cover (Windows)
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers) as ex:
            yield ex
        return
    pool = ForkPool(workers, pdeathsig=pdeathsig, gc_enabled=gc_enabled)
    try:
        yield pool
    except BaseException:
        pool.close(wait=False)
        raise
    pool.close()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while results of many small objects are unpickled and
    merged (it would rescan them again and again); it resumes as it was afterwards."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
