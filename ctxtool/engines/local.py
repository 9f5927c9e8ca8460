"""The default engine: this host's process pool (:func:`ctxtool.pool.worker_pool`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import ClassVar

from .base import Engine, J, T


class LocalEngine(Engine):
    name: ClassVar[str] = "local"
    help: ClassVar[str] = "this host: a process per core (the default; nothing extra to install)"

    def map(self, fn: Callable[[J], T], jobs: Sequence[J]) -> list[T]:
        n = min(len(jobs), self.workers or os.cpu_count() or 1)
        if n <= 1:
            return [fn(j) for j in jobs]
        from ..pool import gc_paused, worker_pool

        with worker_pool(n) as ex, gc_paused():
            return list(ex.map(fn, jobs))
