"""What an engine is: something that maps a picklable function over a list of jobs (in
order) and bounds requests across all its workers. Engines are registered classes
(:func:`ctxtool.run.engines.register_engine`); ``local`` is the default and needs nothing
extra, ``ray`` needs ``pip install 'ctxtool[ray]'`` and is imported only when chosen."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

J = TypeVar("J")
T = TypeVar("T")


class Limiter(Protocol):
    """At most ``limit`` holders at once, across every worker of an engine."""

    limit: int

    def acquire(self) -> None: ...

    def release(self) -> None: ...


class ThreadLimiter:
    """A :class:`Limiter` for one process (its threads): a bounded semaphore that counts
    the most holders it ever had (``peak``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._sem = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self.held = 0
        self.peak = 0

    def acquire(self) -> None:
        self._sem.acquire()
        with self._lock:
            self.held += 1
            self.peak = max(self.peak, self.held)

    def release(self) -> None:
        with self._lock:
            self.held -= 1
        self._sem.release()

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a ThreadLimiter bounds the threads of one process: it does not travel to workers")


class Engine:
    """Runs jobs. ``workers``: processes (local) or concurrent tasks (ray); None: the engine decides."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""

    def __init__(self, *, workers: int | None = None, address: str | None = None) -> None:
        self.workers = workers
        self.address = address

    def map(self, fn: Callable[[J], T], jobs: Sequence[J]) -> list[T]:
        """``fn`` over ``jobs``, results in the order of ``jobs`` (``fn`` is a module-level
        function: it is pickled to the workers)."""
        raise NotImplementedError

    def imap(self, fn: Callable[[J], T], jobs: Sequence[J]) -> Iterator[T]:
        """:meth:`map`, each result given as soon as it and those before it are done (so the
        caller can pass it on and let it go)."""
        return iter(self.map(fn, jobs))

    def limiter(self, limit: int) -> Limiter:
        """A limiter shared by every worker of this engine."""
        return ThreadLimiter(limit)

    def close(self) -> None:
        """Release what the engine started (a local Ray cluster)."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
