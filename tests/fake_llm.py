"""A fake LLM endpoint on a real loopback socket, for tests and benchmarks.

``FakeLLM`` is a ``ThreadingHTTPServer`` on ``127.0.0.1`` (an ephemeral port) running
in a background thread. It speaks the OpenAI ``/v1/chat/completions`` (also
``/chat/completions``) and Anthropic ``/v1/messages`` protocols, records every request
(headers and JSON body), and answers each request from, in order:

1. the queue (:meth:`FakeLLM.push`): a reply text or a :class:`Fault`;
2. ``reply``: a text, or a function of the :class:`RecordedRequest` returning a text or a
   :class:`Fault`.

Faults: ``Fault.slow(ms)`` (sleep, then reply), ``Fault.rate_limit(retry_after)`` (429),
``Fault.error(status)`` (500 by default), ``Fault.malformed()`` (200 with a body that is
not a reply), ``Fault.drop()`` (close the connection without a reply),
``Fault.overflow()`` (the provider's context-too-long error). ``latency`` (seconds) is
added to every request. ``rate_limit_above=N``: a provider's concurrency limit: a request
arriving while N are already being served gets a 429 (counted in ``rate_limited``); a
request is served from its arrival until its reply is ready, not while the reply's bytes
are written back (``max_in_flight``: the most served at once).

Usage::

    with FakeLLM(reply="a summary", latency=0.2) as llm:
        get_summarizer("openai", base_url=llm.openai_base, model="m", api_key="k")
        ...
        llm.requests[0].body["messages"]

Everything stops by itself when the ``with`` block ends (sleeping handlers wake up).

Standalone (e.g. for a benchmark driving the CLI): ``python tests/fake_llm.py --latency 0.2``
prints the base URL on stdout and serves until ``--duration`` seconds have passed (or
SIGINT / SIGTERM), then prints what it served on stderr: requests, most in flight, 429s.
"""

from __future__ import annotations

import argparse
import collections
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected behaviour for one request."""

    kind: str  # slow | status | malformed | drop | overflow
    ms: int = 0
    status: int = 0
    retry_after: str | None = None
    body: bytes | None = None
    text: str | None = None  # the reply after a ``slow`` delay (default: the usual reply)

    @classmethod
    def slow(cls, ms: int, text: str | None = None) -> Fault:
        return cls("slow", ms=ms, text=text)

    @classmethod
    def rate_limit(cls, retry_after: str | float | None = None, status: int = 429) -> Fault:
        return cls("status", status=status, retry_after=None if retry_after is None else str(retry_after))

    @classmethod
    def error(cls, status: int = 500, body: bytes | None = None, retry_after: str | None = None) -> Fault:
        return cls("status", status=status, body=body, retry_after=retry_after)

    @classmethod
    def malformed(cls, body: bytes = b'{"choices": [ this is not json') -> Fault:
        return cls("malformed", body=body)

    @classmethod
    def drop(cls) -> Fault:
        return cls("drop")

    @classmethod
    def overflow(cls, status: int = 400) -> Fault:
        return cls("overflow", status=status)


@dataclass(slots=True)
class RecordedRequest:
    index: int
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes
    body: Any  # parsed JSON, or None
    protocol: str  # openai | anthropic | unknown
    started: float = 0.0
    fault: Fault | None = None

    @property
    def system(self) -> str:
        b = self.body if isinstance(self.body, dict) else {}
        if self.protocol == "anthropic":
            return str(b.get("system") or "")
        return "".join(str(m.get("content", "")) for m in b.get("messages", []) if m.get("role") == "system")

    @property
    def prompt(self) -> str:
        b = self.body if isinstance(self.body, dict) else {}
        users = [m for m in b.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            return ""
        c = users[-1].get("content", "")
        if isinstance(c, list):
            return "".join(str(p.get("text", "")) for p in c if isinstance(p, dict))
        return str(c)


Reply = str | Callable[[RecordedRequest], "str | Fault"]


def default_reply(req: RecordedRequest) -> str:
    """A deterministic reply derived from the prompt."""
    p = " ".join(req.prompt.split())
    return f"SUMMARY[{len(req.prompt)}]: {p[:60]}"


_ERRORS = {
    "openai": {
        429: {
            "message": "Rate limit reached for requests",
            "type": "requests",
            "code": "rate_limit_exceeded",
        },
        "overflow": {
            "message": "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        },
        "other": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
        },
    },
    "anthropic": {
        429: {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"},
        "overflow": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
        "other": {"type": "api_error", "message": "Internal server error"},
    },
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    owner: FakeLLM


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms delayed-ACK stalls)
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") in ("/v1/models", "/models", "/health"):
            self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/chat/completions"):
            protocol = "openai"
        elif path.endswith("/v1/messages"):
            protocol = "anthropic"
        else:
            protocol = "unknown"
        rec = owner._record(
            self.command,
            self.path,
            dict((k.lower(), v) for k, v in self.headers.items()),
            raw,
            body,
            protocol,
        )
        over = owner._enter()
        self._counted = True
        try:
            if over and rec.protocol != "unknown":
                rec.fault = Fault.rate_limit(retry_after="0")
                self._error(rec.protocol, 429, _ERRORS[rec.protocol][429], {"retry-after": "0"})
                return
            self._serve(owner, rec)
        finally:
            self._answered()

    def _answered(self) -> None:
        """The request is out of flight once its reply is ready, before its bytes go back (as a
        provider counts it): a client that reads the reply and sends its next request at once
        is not counted twice while this thread finishes writing."""
        if getattr(self, "_counted", False):
            self._counted = False
            self.server.owner._leave()

    def _serve(self, owner: FakeLLM, rec: RecordedRequest) -> None:
        if owner.latency > 0:
            owner._stopping.wait(owner.latency)
        if rec.protocol == "unknown":
            self._json(404, {"error": {"message": f"no route {rec.path}"}})
            return
        action = owner._next_action(rec)
        text: str | None = None
        if isinstance(action, Fault):
            rec.fault = action
            f = action
            if f.kind == "slow":
                owner._stopping.wait(f.ms / 1000)
                text = f.text
            elif f.kind == "drop":
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            elif f.kind == "malformed":
                self._raw(200, f.body or b"", "application/json")
                return
            elif f.kind == "overflow":
                self._error(rec.protocol, f.status or 400, _ERRORS[rec.protocol]["overflow"])
                return
            elif f.kind == "status":
                headers = {"retry-after": f.retry_after} if f.retry_after is not None else {}
                if f.body is not None:
                    self._raw(f.status, f.body, "application/json", headers)
                else:
                    err = _ERRORS[rec.protocol].get(f.status, _ERRORS[rec.protocol]["other"])
                    self._error(rec.protocol, f.status, err, headers)
                return
            else:  # pragma: no cover - a typo in a test
                raise ValueError(f"unknown fault {f.kind!r}")
        else:
            text = action
        if text is None:
            r = owner.reply if not callable(owner.reply) else owner.reply(rec)
            text = r if isinstance(r, str) else default_reply(rec)
        self._json(200, owner._success(rec, text))

    def _error(
        self, protocol: str, status: int, err: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        body = {"type": "error", "error": err} if protocol == "anthropic" else {"error": err}
        self._json(status, body, headers)

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._raw(status, json.dumps(obj).encode(), "application/json", headers)

    def _raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self._answered()
        try:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout test): nothing to do
            self.close_connection = True


class FakeLLM:
    """A loopback OpenAI/Anthropic endpoint; see the module docstring."""

    def __init__(
        self, reply: Reply = default_reply, *, latency: float = 0.0, port: int = 0, rate_limit_above: int | None = None
    ) -> None:
        self.reply: Reply = reply
        self.latency = latency
        self.rate_limit_above = rate_limit_above
        self.rate_limited = 0  # requests answered 429 for going over ``rate_limit_above``
        self._port = port
        self.requests: list[RecordedRequest] = []
        self._queue: collections.deque[str | Fault] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._in_flight = 0
        self.max_in_flight = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> FakeLLM:
        srv = _Server(("127.0.0.1", self._port), _Handler)
        srv.owner = self
        self._server = srv
        self._thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._server is not None, "FakeLLM is not running"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (the Anthropic base URL)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (the OpenAI base URL)."""
        return self.url + "/v1"

    anthropic_base = url

    def base_url(self, kind: str) -> str:
        return self.openai_base if kind == "openai" else self.url

    # -- scripting ------------------------------------------------------------------

    def push(self, *actions: str | Fault) -> FakeLLM:
        """Queue replies and faults, consumed one per request in arrival order."""
        with self._lock:
            self._queue.extend(actions)
        return self

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def times(self) -> list[float]:
        """Arrival times (``time.monotonic``) of the recorded requests."""
        with self._lock:
            return [r.started for r in self.requests]

    # -- internals (called from handler threads) ------------------------------------

    def _record(
        self, method: str, path: str, headers: dict[str, str], raw: bytes, body: Any, protocol: str
    ) -> RecordedRequest:
        with self._lock:
            rec = RecordedRequest(
                len(self.requests), method, path, headers, raw, body, protocol, time.monotonic()
            )
            self.requests.append(rec)
            return rec

    def _next_action(self, rec: RecordedRequest) -> str | Fault | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if callable(self.reply):
            r = self.reply(rec)
            return r
        return self.reply

    def _enter(self) -> bool:
        """Count a request in; True when it goes over ``rate_limit_above`` (it gets a 429)."""
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            over = self.rate_limit_above is not None and self._in_flight > self.rate_limit_above
            if over:
                self.rate_limited += 1
            return over

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _success(self, rec: RecordedRequest, text: str) -> dict[str, Any]:
        body = rec.body if isinstance(rec.body, dict) else {}
        model = str(body.get("model", "fake"))
        in_tok = max(1, (len(rec.system) + len(rec.prompt)) // 4)
        out_tok = max(1, len(text) // 4)
        if rec.protocol == "anthropic":
            return {
                "id": f"msg_fake_{rec.index}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": in_tok, "output_tokens": out_tok},
            }
        return {
            "id": f"chatcmpl-fake-{rec.index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": in_tok,
                "completion_tokens": out_tok,
                "total_tokens": in_tok + out_tok,
            },
        }


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A running :class:`FakeLLM`; import it into a test module (or a conftest) to use it."""
    with FakeLLM() as llm:
        yield llm


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Serve a fake OpenAI/Anthropic endpoint on 127.0.0.1.")
    ap.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    ap.add_argument("--duration", type=float, default=600.0, help="stop after this many seconds")
    ap.add_argument("--rate-limit-above", type=int, default=None, help="answer 429 above N requests in flight")
    args = ap.parse_args(argv)
    with FakeLLM(latency=args.latency, port=args.port, rate_limit_above=args.rate_limit_above) as llm:
        print(llm.url, flush=True)
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):  # a background job of a script ignores SIGINT unless told
            signal.signal(sig, lambda *_: llm._stopping.set())
        llm._stopping.wait(args.duration)
        # what it served, on stderr when it stops (at --duration, on SIGINT or SIGTERM)
        sys.stderr.write(json.dumps({"requests": len(llm.requests), "max_in_flight": llm.max_in_flight,
                                     "rate_limited": llm.rate_limited}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
