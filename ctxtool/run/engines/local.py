"""The default engine: this host's process pool (:func:`ctxtool.run.pool.worker_pool`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from .base import Engine, J, Limiter, T


class LocalEngine(Engine):
    name: ClassVar[str] = "local"
    help: ClassVar[str] = "this host: a process per core (the default; nothing extra to install)"

    def __init__(self, *, workers: int | None = None, address: str | None = None) -> None:
        super().__init__(workers=workers, address=address)
        self._manager: Any = None

    def map(self, fn: Callable[[J], T], jobs: Sequence[J]) -> list[T]:
        return list(self.imap(fn, jobs))

    def imap(self, fn: Callable[[J], T], jobs: Sequence[J]) -> Iterator[T]:
        n = min(len(jobs), self.workers or os.cpu_count() or 1)
        if n <= 1:
            yield from (fn(j) for j in jobs)
            return
        # lazy: start-up (loaded only when this runs: ..pool)
        from ..pool import gc_paused, worker_pool

        with worker_pool(n) as ex, gc_paused():
            yield from ex.map(fn, jobs)

    def limiter(self, limit: int) -> Limiter:
        """A limiter every worker process of this host shares: a semaphore held by a manager
        process (its proxies travel to the workers; a thread semaphore does not)."""
        import multiprocessing

        if self._manager is None:
            self._manager = multiprocessing.Manager()
        return ProcessLimiter(self._manager, limit)

    def close(self) -> None:
        if self._manager is not None:
            self._manager.shutdown()
            self._manager = None


class ProcessLimiter:
    """A :class:`~ctxtool.run.engines.base.Limiter` for the processes of one host (it pickles:
    proxies of a manager's semaphore and counters); ``peak``: the most holders at once."""

    def __init__(self, manager: Any, limit: int) -> None:
        self.limit = limit
        self._sem = manager.BoundedSemaphore(limit)
        self._lock = manager.Lock()
        self._counts = manager.list([0, 0])  # held, peak

    def acquire(self) -> None:
        self._sem.acquire()
        with self._lock:
            held = self._counts[0] + 1
            self._counts[0] = held
            if held > self._counts[1]:
                self._counts[1] = held

    def release(self) -> None:
        with self._lock:
            self._counts[0] = self._counts[0] - 1
        self._sem.release()

    @property
    def peak(self) -> int:
        return int(self._counts[1])
