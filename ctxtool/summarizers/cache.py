"""A summary cache: the same request to the same summarizer is answered from disk.

The key is the SHA-256 of the summarizer's :meth:`settings` and everything in the
request that shapes the summary (system prompt, prompt, style, previous summary,
file lists, max tokens). Summaries live as UTF-8 files under
``<cache_dir>/summaries/<key>`` (directory 0700, files 0600, written atomically), so
re-runs are free and deterministic and an interrupted dataset run resumes where it
stopped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..paths import ensure_private_dir
from . import Summarizer, SummaryRequest

log = logging.getLogger("ctxtool.summarizers")

CACHE_VERSION = 1


def cache_key(settings: dict[str, Any], req: SummaryRequest) -> str:
    """The hex SHA-256 identifying ``req``'s summary under a summarizer's ``settings``."""
    doc = {
        "v": CACHE_VERSION,
        "settings": settings,
        "system": req.system,
        "prompt": req.prompt,
        "style": req.style,
        "previous_summary": req.previous_summary,
        "read_files": list(req.read_files),
        "modified_files": list(req.modified_files),
        "max_tokens": req.max_tokens,
    }
    raw = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class CachedSummarizer:
    """Wrap ``inner``; same interface, plus thread-safe ``hits`` / ``misses`` counters."""

    def __init__(self, inner: Summarizer, cache_dir: Path | str) -> None:
        self.inner = inner
        self.name = inner.name
        self.context_window = inner.context_window
        self.dir = Path(cache_dir) / "summaries"
        self._settings = inner.settings()
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._hits = 0
        self._misses = 0

    @property
    def hits(self) -> int:
        with self._lock:
            return self._hits

    @property
    def misses(self) -> int:
        with self._lock:
            return self._misses

    def settings(self) -> dict[str, Any]:
        return self.inner.settings()

    def key(self, req: SummaryRequest) -> str:
        return cache_key(self._settings, req)

    def path(self, req: SummaryRequest) -> Path:
        return self.dir / self.key(req)

    def summarize(self, req: SummaryRequest) -> str:
        key = self.key(req)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        # one computation per key at a time: concurrent identical requests wait for the first
        with key_lock:
            cached = self._read(key)
            if cached is not None:
                with self._lock:
                    self._hits += 1
                return cached
            with self._lock:
                self._misses += 1
            text = self.inner.summarize(req)
            try:
                self._write(key, text)
            except OSError as e:  # a summary we paid for is still good without the cache
                log.warning("cannot write the summary cache %s: %s", self.dir, e.strerror or e)
            return text

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def _read(self, key: str) -> str | None:
        try:
            return (self.dir / key).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def _write(self, key: str, text: str) -> None:
        ensure_private_dir(self.dir)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=self.dir)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(text.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.dir / key)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
