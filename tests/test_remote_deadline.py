"""A timeout that bounds (issue 10, item 6): ``--timeout`` is a deadline for the whole
request, however slowly a server trickles its reply, and the tries of one summary share an
overall deadline.

The server here is a real socket on 127.0.0.1, in a thread, that sends its (valid) reply one
byte every ``interval`` seconds: from the status line on (``"headers"``), or after complete
headers (``"body"``). It gives up after ``give_up`` seconds, so a client without a deadline
fails these tests by taking too long rather than by hanging.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from ctxtool.cli import main
from ctxtool.cli.exits import ExitCode
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.summarizers import SummaryRequest, get_summarizer

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "claude_code_session.jsonl"
REQ = SummaryRequest(system="sys", prompt="summarize this", max_tokens=64)


def reply_bytes(text: str = "a trickled summary") -> tuple[bytes, bytes]:
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
    head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
    return head, body


class Trickle:
    """Accepts connections; answers each request one byte every ``interval`` seconds."""

    def __init__(self, phase: str, interval: float = 0.5, give_up: float = 8.0) -> None:
        self.phase = phase
        self.interval = interval
        self.give_up = give_up
        self.requests = 0
        self.sent = 0
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Trickle:
        self._threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next(
                    (int(v) for k, _, v in (ln.partition(b":") for ln in head.split(b"\r\n")) if k.lower() == b"content-length"),
                    0,
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests += 1
                rhead, rbody = reply_bytes()
                if self.phase == "body":
                    conn.sendall(rhead)
                    slow = rbody
                else:
                    slow = rhead + rbody
                end = time.monotonic() + self.give_up
                for i in range(len(slow)):
                    if self._stop.wait(self.interval) or time.monotonic() > end:
                        return
                    conn.sendall(slow[i : i + 1])
                    self.sent += 1
            except OSError:  # the client hung up: what a deadline does
                return


@pytest.fixture(autouse=True)
def _no_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CTXTOOL_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_one_request_ends_by_its_deadline(phase: str) -> None:
    with Trickle(phase) as srv:
        s = get_summarizer("openai", base_url=srv.base_url, model="m", timeout=1.0, retries=0)
        t0 = time.monotonic()
        with pytest.raises(CtxtoolError) as e:
            s.summarize(REQ)
        elapsed = time.monotonic() - t0
        s.close()
    assert elapsed < 1.0 + 1.5, f"a 1 s deadline took {elapsed:.1f} s"
    assert e.value.kind == Failure.REMOTE
    msg = str(e.value)
    assert "\n" not in msg and "timed out" in msg and f"127.0.0.1:{srv.port}" in msg and "(after 1 try)" in msg
    assert srv.sent >= 1  # the server did trickle: the deadline, not a read timeout, ended it


def test_the_tries_share_an_overall_deadline() -> None:
    with Trickle("body", interval=0.2) as srv:
        s = get_summarizer(
            "openai", base_url=srv.base_url, model="m", timeout=1.0, retries=5, total_timeout=2.5, backoff_base=0.01
        )
        t0 = time.monotonic()
        with pytest.raises(CtxtoolError) as e:
            s.summarize(REQ)
        elapsed = time.monotonic() - t0
        s.close()
    assert elapsed < 2.5 + 1.5, f"a 2.5 s overall deadline took {elapsed:.1f} s"
    assert srv.requests == 3  # 1 s, 1 s, then the 0.5 s left
    assert "deadline for all tries" in str(e.value) and "(after 3 tries)" in str(e.value)


class Once:
    """Answers one request with ``reply`` (raw HTTP bytes), then closes."""

    def __init__(self, status: str, body: bytes, headers: str = "") -> None:
        self.reply = (
            f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{headers}"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode() + body
        self.request = b""
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(5)
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self._t = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        try:
            conn, _ = self._sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            while b"\r\n\r\n" not in self.request:
                self.request += conn.recv(65536)
            head = self.request.split(b"\r\n\r\n")[0].decode().lower()
            n = int(head.split("content-length:")[1].split("\r\n")[0])
            while len(self.request.split(b"\r\n\r\n", 1)[1]) < n:
                self.request += conn.recv(65536)
            conn.sendall(self.reply)

    def __enter__(self) -> Once:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._t.join(5)
        self._sock.close()


def test_a_retry_after_beyond_the_overall_deadline_ends_the_retries() -> None:
    slept: list[float] = []
    with Once("429 Too Many Requests", b'{"error": {"message": "slow down"}}', "retry-after: 30\r\n") as srv:
        s = get_summarizer("openai", base_url=srv.base_url, model="m", timeout=5.0, retries=4, sleep=slept.append)
        with pytest.raises(CtxtoolError) as e:  # 30 s would pass the 25 s for all tries: no wait
            s.summarize(REQ)
        s.close()
    assert slept == [] and "no time left for another try within 25 s" in str(e.value)
    assert "(after 1 try)" in str(e.value) and e.value.kind == Failure.REMOTE


def test_a_reply_that_cannot_be_decoded_is_a_remote_error() -> None:
    with Once("200 OK", b"this is not gzip", "content-encoding: gzip\r\n") as srv:
        s = get_summarizer("openai", base_url=srv.base_url, model="m", timeout=5.0, retries=0)
        with pytest.raises(CtxtoolError) as e:
            s.summarize(REQ)
        s.close()
    assert e.value.kind == Failure.REMOTE and "unreadable reply" in str(e.value)


def test_a_reply_nested_too_deep_is_a_remote_error() -> None:
    with Once("200 OK", b"[" * 100_000 + b"]" * 100_000) as srv:
        s = get_summarizer("openai", base_url=srv.base_url, model="m", timeout=5.0, retries=0)
        with pytest.raises(CtxtoolError) as e:
            s.summarize(REQ)
        s.close()
    assert e.value.kind == Failure.REMOTE and "malformed reply" in str(e.value)


def test_lone_surrogates_go_out_as_question_marks_and_come_back_from_the_cache(tmp_path: Path) -> None:
    from ctxtool.summarizers.cache import CachedSummarizer

    reply = json.dumps({"choices": [{"message": {"content": "kept \udc80 as is"}}]}).encode()
    with Once("200 OK", reply) as srv:
        s = CachedSummarizer(get_summarizer("openai", base_url=srv.base_url, model="m", retries=0), tmp_path)
        req = SummaryRequest(system="s", prompt="bad \udc80 byte")
        assert s.summarize(req) == "kept \udc80 as is"
        s.close()
    assert '"bad ? byte"' in srv.request.decode("utf-8")
    again = CachedSummarizer(get_summarizer("openai", base_url=srv.base_url, model="m"), tmp_path)
    assert again.summarize(req) == "kept \udc80 as is" and again.hits == 1


def test_compact_timeout_bounds_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: `--timeout 1` against a server trickling a byte every 0.5 s."""
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CTXTOOL_SUMMARIZER_RETRIES", "0")
    out = tmp_path / "out.jsonl"
    with Trickle("headers") as srv:
        t0 = time.monotonic()
        code = main([
            "compact", str(SAMPLE), "--force", "--keep-recent-tokens", "500", "--summarizer", "openai", "--base-url", srv.base_url,
            "--summary-model", "m", "--timeout", "1", "--no-cache", "-o", str(out),
        ])
        elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == ExitCode.REMOTE, err
    assert elapsed < 1 + 2.0, f"--timeout 1 took {elapsed:.1f} s"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "timed out" in lines[0] and "Traceback" not in err
    assert not out.exists()
