"""A summary cache: the same request to the same summarizer is answered from disk
(``<cache_dir>/summaries/<key>``), so re-runs are free and deterministic and an interrupted run
resumes. Only a summary that passed the quality rules is stored; nothing inside the cache is
reached through a link. The key and the rules: docs/architecture.md, "The caches on disk"."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from ..cache.objstore import CacheDir, cache_root, open_root, sub
from ..errors import CtxtoolError
from . import Summarizer, SummaryRequest

log = logging.getLogger("ctxtool.summarizers")

CACHE_VERSION = 3  # 2: the endpoint's address is no longer part of the key; 3: a command's program bytes are

#: settings that say where a model is reached, not what it is: left out of the key
ADDRESS_KEYS = frozenset({"base_url", "url", "endpoint", "host", "port", "address"})


def cache_key(settings: dict[str, Any], req: SummaryRequest) -> str:
    """The hex SHA-256 identifying ``req``'s summary under a summarizer's ``settings``
    (model name and options; not the address it is served from)."""
    doc = {
        "v": CACHE_VERSION,
        "settings": {k: v for k, v in settings.items() if k not in ADDRESS_KEYS},
        "system": req.system,
        "prompt": req.prompt,
        "style": req.style,
        "previous_summary": req.previous_summary,
        "read_files": list(req.read_files),
        "modified_files": list(req.modified_files),
        "max_tokens": req.max_tokens,
    }
    raw = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def program_digest(argv: list[str]) -> str | None:
    """The SHA-256 of a command's program: its executable (found on PATH) and every argument
    that names a regular file, in order; None when the executable cannot be read."""
    if not argv:
        return None
    exe = shutil.which(argv[0]) or (argv[0] if os.sep in argv[0] else None)
    h = hashlib.sha256()
    for n, word in enumerate([exe or "", *argv[1:]]):
        try:
            if word and os.path.isfile(word):
                with open(word, "rb") as f:
                    h.update(f"{n}:".encode())
                    while chunk := f.read(1 << 20):
                        h.update(chunk)
            elif n == 0:
                return None
        except OSError:
            if n == 0:
                return None
    return h.hexdigest()


def passes(text: str, req: SummaryRequest) -> bool:
    """The quality rules compaction applies accept ``text`` as the summary of ``req``."""
    # lazy: start-up (loaded only when this runs: ..score.quality, .)
    from ..score.quality import reject
    from . import prompt as sp

    body = sp.parse_retain(text)[1] if req.style == "retain" else text
    return reject(sp.strip_prefix(body), req.prompt) is None


class CachedSummarizer:
    """Wrap ``inner``; same interface, plus thread-safe ``hits`` / ``misses`` counters."""

    def __init__(self, inner: Summarizer, cache_dir: Path | str) -> None:
        self.inner = inner
        self.name = inner.name
        self.context_window = inner.context_window
        self.root = cache_root(cache_dir)
        self.dir = sub(self.root, "summaries")
        self._settings = inner.settings()
        self.enabled = True
        if self._settings.get("kind") == "command":
            digest = program_digest([str(a) for a in self._settings.get("argv") or ()])
            self._settings = {**self._settings, "program_sha256": digest}
            if digest is None:
                self.enabled = False
                log.warning("the summary cache is off for this command: its program cannot be read")
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._hits = 0
        self._misses = 0

    def __getstate__(self) -> dict[str, Any]:
        """Pickles (to the workers of an engine) without its locks and counters."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_key_locks", "_hits", "_misses")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._key_locks = {}
        self._hits = self._misses = 0

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

    def __repr__(self) -> str:  # what a shard's settings hash sees: the model, not where its answers are kept
        return f"CachedSummarizer({self.inner!r})"

    def key(self, req: SummaryRequest) -> str:
        return cache_key(self._settings, req)

    def path(self, req: SummaryRequest) -> Any:
        """Where ``req``'s summary is kept (a Path; a URL string on object storage)."""
        return sub(self.dir, self.key(req))

    def summarize(self, req: SummaryRequest) -> str:
        if not self.enabled:
            return self.inner.summarize(req)
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
            if not passes(text, req):  # compaction will reject it: never serve it again
                return text
            try:
                self._write(key, text)
            except CtxtoolError as e:  # a summary we paid for is still good without the cache
                log.warning("cannot write the summary cache: %s", e)
            return text

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def _open(self, create: bool) -> CacheDir | None:
        root = open_root(self.root, create=create)
        if root is None:
            return None
        try:
            return root.subdir("summaries", create=create)
        finally:
            root.close()

    def _read(self, key: str) -> str | None:
        d = self._open(create=False)
        if d is None:
            return None
        try:
            # a summary is served as it is found: one hard link only, like a link never followed
            return d.read_bytes(key, single_link=True).decode("utf-8", "surrogatepass")
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        finally:
            d.close()

    def _write(self, key: str, text: str) -> None:
        d = self._open(create=True)
        assert d is not None
        try:
            # surrogatepass: a reply's lone surrogate ("\\udc80" in its JSON) comes back as it went in
            d.write_atomic(key, text.encode("utf-8", "surrogatepass"), fsync=True)
        finally:
            d.close()
