"""Remote summary models over HTTP (OpenAI chat completions, Anthropic messages): one pooled
``httpx.Client`` per summarizer; transient failures retried with backoff and jitter, honouring
``Retry-After``; a too-long prompt raises :class:`~ctxtool.summarizers.ContextOverflowError`.
``timeout`` bounds one whole request, ``total_timeout`` all its tries. The API key is sent only as
a header, never logged or shown. The deadlines in detail: docs/architecture.md, "Compaction and
summaries"."""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..errors import CtxtoolError, Failure
from ..text import lazyre
from ..tokens.context import called_model_window
from . import ContextOverflowError, SummaryRequest, built_from
from .deadline import deadline_at, keep_deadlines

log = logging.getLogger("ctxtool.summarizers")

DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
ANTHROPIC_VERSION = "2023-06-01"

#: statuses worth another try besides 5xx
RETRY_STATUSES = frozenset({408, 409, 425, 429})

# What providers (and OpenAI-compatible servers such as llama.cpp, vLLM, Ollama) say
# when the prompt does not fit the model's window.
_OVERFLOW_RE = lazyre.compile(
    r"context_length_exceeded|context[ _-]length|context window|context size|exceed_context_size"
    r"|prompt is too long|too many (input )?tokens|maximum context|request_too_large|input is too long"
    r"|reduce the length",
    re.IGNORECASE,
)


class _Malformed(Exception):
    """A 2xx reply we cannot read a summary from."""


def create(kind: str, **options: Any) -> RemoteSummarizer:
    """Build an ``openai`` or ``anthropic`` summarizer (see :class:`RemoteSummarizer`) from the
    options it takes: ``model``, ``base_url``, ``api_key``, ``timeout``, ``retries``,
    ``context_window``, ``max_tokens``, ``backoff_base`` (s, default 0.5), ``backoff_cap`` (s,
    default 8), ``retry_after_cap`` (s, default 60), ``seed`` (jitter), ``max_connections``
    (default 16), ``total_timeout`` (s: the deadline for all tries of one summary, default
    ``timeout × (retries + 1)``), ``sleep`` (a ``time.sleep`` stand-in). Other options (another
    kind's) are ignored.
    """
    return built_from(RemoteSummarizer, options, kind)


class RemoteSummarizer:
    """Summarize with a remote chat model; ``kind`` is ``openai`` or ``anthropic``."""

    def __init__(
        self,
        kind: str,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 4,
        context_window: int | None = None,
        max_tokens: int = 4096,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        retry_after_cap: float = 60.0,
        seed: int | None = None,
        max_connections: int = 16,
        sleep: Callable[[float], None] | None = None,
        total_timeout: float | None = None,
    ) -> None:
        if kind not in DEFAULT_BASE_URLS:
            raise CtxtoolError(f"unknown remote summarizer {kind!r}", kind=Failure.USAGE)
        backoff_base, backoff_cap, retry_after_cap = float(backoff_base), float(backoff_cap), float(retry_after_cap)
        max_connections = int(max_connections)
        if not model:
            raise CtxtoolError(
                f"the {kind} summarizer needs a model: pass --model or set summarizer.model",
                kind=Failure.USAGE,
            )
        base = (base_url or DEFAULT_BASE_URLS[kind]).rstrip("/")
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CtxtoolError(
                f"summarizer base URL must be http(s)://host[/path], got {base!r}", kind=Failure.USAGE
            )
        if timeout <= 0:
            raise CtxtoolError(f"summarizer timeout must be positive, got {timeout}", kind=Failure.USAGE)
        if retries < 0:
            raise CtxtoolError(f"summarizer retries must be >= 0, got {retries}", kind=Failure.USAGE)
        if total_timeout is not None and not float(total_timeout) > 0:
            raise CtxtoolError(f"summarizer total_timeout must be positive, got {total_timeout}", kind=Failure.USAGE)
        if max_tokens <= 0:
            raise CtxtoolError(
                f"summarizer max_tokens must be positive, got {max_tokens}", kind=Failure.USAGE
            )

        # what a copy on another process or machine is built from (``__reduce__``): never the
        # key (a worker reads its own $CTXTOOL_API_KEY or provider variable), never ``sleep``
        self._init = {
            "kind": kind, "model": model, "base_url": base_url, "timeout": timeout, "retries": retries,
            "context_window": context_window, "max_tokens": max_tokens, "backoff_base": backoff_base,
            "backoff_cap": backoff_cap, "retry_after_cap": retry_after_cap, "seed": seed,
            "max_connections": max_connections, "total_timeout": total_timeout,
        }
        self.name = kind
        self.kind = kind
        self.model = model
        self.base_url = base
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.total_timeout = float(total_timeout) if total_timeout is not None else self.timeout * (self.retries + 1)
        self.max_tokens = int(max_tokens)
        self.context_window = called_model_window(context_window, model)
        self.backoff_base = max(0.0, backoff_base)
        self.backoff_cap = max(0.0, backoff_cap)
        self.retry_after_cap = max(0.0, retry_after_cap)
        self._sleep = sleep or time.sleep
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()

        # host[:port] without any user:password@ part, for settings and messages
        port = f":{parts.port}" if parts.port else ""
        self._host = f"{parts.hostname}{port}"
        self._base_path = parts.path.rstrip("/")
        path = "/chat/completions" if kind == "openai" else "/v1/messages"
        self._url = base + path
        self._endpoint = f"{self._host}{self._base_path}{path}"

        key = (api_key or os.environ.get("CTXTOOL_API_KEY") or os.environ.get(KEY_ENV[kind]) or "").strip()
        if key and not all(33 <= ord(c) < 127 for c in key):
            raise CtxtoolError(
                f"the {kind} summarizer's API key contains spaces or non-ASCII characters",
                kind=Failure.USAGE,
            )
        if not key and base_url in (None, "", DEFAULT_BASE_URLS[kind]):
            raise CtxtoolError(
                f"the {kind} summarizer needs an API key: set CTXTOOL_API_KEY or {KEY_ENV[kind]}",
                kind=Failure.USAGE,
            )
        self._secrets = tuple(s for s in {key, api_key or ""} if s)
        headers = {"content-type": "application/json", "accept": "application/json"}
        if kind == "openai":
            if key:
                headers["authorization"] = f"Bearer {key}"
        else:
            if key:
                headers["x-api-key"] = key
            headers["anthropic-version"] = ANTHROPIC_VERSION
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(self.timeout),
            limits=httpx.Limits(
                max_connections=max(1, max_connections),
                max_keepalive_connections=max(1, max_connections),
            ),
            follow_redirects=False,
        )
        keep_deadlines(self._client)

    # -- public interface -------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """What identifies this summarizer's output (the summary cache key); no secrets."""
        return {
            "kind": self.kind,
            "model": self.model,
            "base_url": f"{self._host}{self._base_path}",
            "max_tokens": self.max_tokens,
            "temperature": 0,
        }

    def summarize(self, req: SummaryRequest) -> str:
        # lone surrogates (a transcript's "\\ud800" escapes) cannot be sent as UTF-8: "?" stands in
        body = json.dumps(self._body(req), ensure_ascii=False).encode("utf-8", "replace")
        attempts = self.retries + 1
        last = "no reply"
        tried = 0
        end_all = time.monotonic() + self.total_timeout
        for attempt in range(attempts):
            wait_hint: float | None = None
            tried += 1
            limit = min(self.timeout, max(0.0, end_all - time.monotonic()))
            try:
                with deadline_at(time.monotonic() + limit):
                    resp = self._client.post(self._url, content=body)
            except httpx.TimeoutException:
                last = f"timed out: no complete reply within {limit:.3g} s"
                if limit < self.timeout:
                    last += f" (the {self.total_timeout:g} s deadline for all tries)"
            except httpx.TransportError as e:
                last = f"connection error: {self._redact(_first_line(str(e)) or type(e).__name__)}"
            except httpx.RequestError as e:  # e.g. a body its content-encoding cannot decode
                last = f"unreadable reply: {self._redact(_first_line(str(e)) or type(e).__name__)}"
            else:
                status = resp.status_code
                if 200 <= status < 300:
                    try:
                        return self._parse(resp)
                    except _Malformed as e:
                        last = f"HTTP {status} with a malformed reply: {e}"
                else:
                    detail = self._redact(_error_detail(resp))
                    if _is_overflow(status, detail):
                        raise ContextOverflowError(
                            f"{self.kind} summarizer: {self._endpoint}: HTTP {status}: "
                            f"the prompt does not fit the model's context window: {detail}"
                        )
                    if status in RETRY_STATUSES or status >= 500:
                        last = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
                        wait_hint = _retry_after(resp.headers)
                    else:
                        raise CtxtoolError(
                            f"{self.kind} summarizer: {self._endpoint}: HTTP {status}: {detail or resp.reason_phrase}",
                            kind=Failure.REMOTE,
                        )
            last = self._redact(last)
            if attempt + 1 < attempts:
                delay = self._delay(attempt, wait_hint)
                if time.monotonic() + delay >= end_all:  # the next try could not even start
                    last += f"; no time left for another try within {self.total_timeout:g} s"
                    break
                log.info(
                    "%s summarizer: %s: %s; retry %d/%d in %.2f s",
                    self.kind,
                    self._endpoint,
                    last,
                    attempt + 1,
                    self.retries,
                    delay,
                )
                self._sleep(delay)
        tries = "1 try" if tried == 1 else f"{tried} tries"
        raise CtxtoolError(
            f"{self.kind} summarizer: {self._endpoint}: {last} (after {tries})", kind=Failure.REMOTE
        )

    def close(self) -> None:
        self._client.close()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as its settings, for engines that run compaction on other processes or
        machines (``--engine ray``): the copy opens its own connections and takes its API
        key from its own environment, so no secret travels with the job."""
        return (_rebuild, (self._init,))

    def __enter__(self) -> RemoteSummarizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:  # never shows the key
        return f"RemoteSummarizer(kind={self.kind!r}, model={self.model!r}, endpoint={self._endpoint!r})"

    # -- internals --------------------------------------------------------------------

    def _effective_max_tokens(self, req: SummaryRequest) -> int:
        if req.max_tokens and req.max_tokens > 0:
            return min(int(req.max_tokens), self.max_tokens)
        return self.max_tokens

    def _body(self, req: SummaryRequest) -> dict[str, Any]:
        max_tokens = self._effective_max_tokens(req)
        if self.kind == "openai":
            messages = []
            if req.system:
                messages.append({"role": "system", "content": req.system})
            messages.append({"role": "user", "content": req.prompt})
            return {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": req.prompt}],
            "temperature": 0,
        }
        if req.system:
            body["system"] = req.system
        return body

    def _parse(self, resp: httpx.Response) -> str:
        try:
            data = json.loads(resp.content)
        except (ValueError, RecursionError) as e:  # RecursionError: JSON nested too deep
            raise _Malformed(f"not JSON ({_snippet(resp.text)!r})") from e
        if not isinstance(data, dict):
            raise _Malformed("not a JSON object")
        text: Any
        if self.kind == "openai":
            try:
                text = data["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError) as e:
                raise _Malformed("no choices[0].message.content") from e
            if isinstance(text, list):  # content parts
                text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        else:
            blocks = data.get("content")
            if not isinstance(blocks, list):
                raise _Malformed("no content blocks")
            text = "".join(
                b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"
            )
        if not isinstance(text, str):
            raise _Malformed("the summary is not a string")
        if not text.strip():
            raise _Malformed("empty summary")
        return text.strip()

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with equal jitter, or the server's Retry-After (capped)."""
        if retry_after is not None:
            return min(max(0.0, retry_after), self.retry_after_cap)
        d = min(self.backoff_cap, self.backoff_base * (2**attempt))
        with self._rng_lock:
            j = self._rng.random()
        return d / 2 + d / 2 * j

    def _redact(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "***")
        return text


def _first_line(s: str) -> str:
    return s.strip().splitlines()[0] if s.strip() else ""


def _snippet(s: str, n: int = 80) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _error_detail(resp: httpx.Response) -> str:
    """The provider's error message (OpenAI and Anthropic both use ``{"error": {...}}``)."""
    try:
        data = json.loads(resp.content)
    except (ValueError, RecursionError):
        return _snippet(resp.text, 200)
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            bits = [str(err[k]) for k in ("code", "type") if err.get(k) not in (None, "")]
            msg = err.get("message") or err.get("detail") or ""
            parts = [", ".join(dict.fromkeys(bits)), str(msg)]
            return _snippet(": ".join(p for p in parts if p), 300)
        if isinstance(err, str):
            return _snippet(err, 300)
    return _snippet(resp.text, 200)


def _is_overflow(status: int, detail: str) -> bool:
    if status == 413:
        return True
    return status in (400, 422) and bool(_OVERFLOW_RE.search(detail))


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    v = headers.get("retry-after")
    if not v:
        return None
    v = v.strip()
    try:
        return max(0.0, float(v))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _rebuild(init: dict[str, Any]) -> RemoteSummarizer:
    return RemoteSummarizer(**init)
