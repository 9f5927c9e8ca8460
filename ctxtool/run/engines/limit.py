"""A summarizer behind a :class:`~ctxtool.run.engines.base.Limiter`: at most ``limit`` of its
requests in flight at once, across every thread (local) or every worker of a cluster (Ray).
Put it inside the summary cache (``CachedSummarizer(LimitedSummarizer(model, limiter))``):
a cache hit never waits for a slot, and a re-run served from the cache sends nothing."""

from __future__ import annotations

from typing import Any

from ...summarizers import Summarizer, SummaryRequest
from .base import Limiter


class LimitedSummarizer:
    def __init__(self, inner: Summarizer, limiter: Limiter) -> None:
        self.inner = inner
        self.limiter = limiter
        self.name = inner.name
        self.context_window = inner.context_window

    def settings(self) -> dict[str, Any]:
        return self.inner.settings()  # the limit does not change a summary: same cache key

    def __repr__(self) -> str:  # nor a shard's settings hash: a re-run with another limit resumes
        return f"LimitedSummarizer({self.inner!r})"

    def summarize(self, req: SummaryRequest) -> str:
        self.limiter.acquire()
        try:
            return self.inner.summarize(req)
        finally:
            self.limiter.release()

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()
