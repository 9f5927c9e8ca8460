"""Deadlines for whole HTTP requests: httpx's timeouts bound each socket operation, these bound
the request. :func:`keep_deadlines` gives every connection pool of an ``httpx.Client`` a network
backend whose connections give each connect, read and write only the time left before the
calling thread's deadline (:func:`deadline_at`); pools stay shared between threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

_deadline = threading.local()  # .at: time.monotonic() by which this thread's request must end
_WRITE_CHUNK = 64 * 1024  # a write is split so that each part gets only the time left


def _time_left(timeout: float | None, exc: type[Exception]) -> float | None:
    """``timeout`` capped at the time left before this thread's deadline (``exc`` when none is)."""
    at = getattr(_deadline, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise exc("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every operation ends by the calling thread's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        view = memoryview(buffer)
        while view:
            self._inner.write(bytes(view[:_WRITE_CHUNK]), _time_left(timeout, httpcore.WriteTimeout))
            view = view[_WRITE_CHUNK:]

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(ssl_context, server_hostname, _time_left(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend, with connections that keep the caller's deadline."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(host, port, left, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:  # pragma: no cover - no unix sockets in the summarizers
        left = _time_left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, left, socket_options))

    def sleep(self, seconds: float) -> None:  # pragma: no cover - used by httpcore's retries only
        self._inner.sleep(seconds)


def keep_deadlines(client: httpx.Client) -> None:
    """Give every connection pool of ``client`` (direct and through proxies) the deadline backend.

    httpx builds its pools without a way to pass a network backend, so it is set on each pool
    (httpx 0.28 / httpcore 1.0: ``HTTPTransport._pool._network_backend``); a test sends a
    trickling reply through the client to prove it is in place.
    """
    transports = [client._transport, *client._mounts.values()]
    for t in transports:
        pool = getattr(t, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:
            if t is not None:  # pragma: no cover - a changed httpx; fail loudly rather than hang
                raise RuntimeError(f"cannot install request deadlines on {type(t).__name__}")
            continue
        if not isinstance(backend, _DeadlineBackend):
            pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]


@contextmanager
def deadline_at(at: float) -> Iterator[None]:
    """Within the block, this thread's requests must end by ``at`` (``time.monotonic()``)."""
    _deadline.at = at
    try:
        yield
    finally:
        _deadline.at = None
