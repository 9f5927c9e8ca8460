"""The openai/anthropic summarizers against a real loopback server (tests/fake_llm.py)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from fake_llm import FakeLLM, Fault

from ctxtool.errors import CtxtoolError, Failure
from ctxtool.summarizers import ContextOverflowError, SummaryRequest, get_summarizer
from ctxtool.summarizers.remote import RemoteSummarizer, _retry_after

KEY = "sk-test-SECRET-0123456789abcdef"
KINDS = ("openai", "anthropic")


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(autouse=True)
def _no_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CTXTOOL_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def make(kind: str, llm: FakeLLM | None, **kw: object) -> RemoteSummarizer:
    opts: dict[str, object] = {
        "base_url": llm.base_url(kind) if llm else None,
        "model": "small-model",
        "api_key": KEY,
        "timeout": 5.0,
        "retries": 2,
        "backoff_base": 0.01,
        "seed": 7,
    }
    opts.update(kw)
    s = get_summarizer(kind, **opts)
    assert isinstance(s, RemoteSummarizer)
    return s


REQ = SummaryRequest(
    system="You summarize coding sessions.", prompt="User asked to fix the bug in foo.py.", max_tokens=512
)


# -- success and request shape ---------------------------------------------------------


def test_openai_request_shape(llm: FakeLLM) -> None:
    llm.reply = "the summary"
    with make("openai", llm, max_tokens=1000) as s:
        assert s.summarize(REQ) == "the summary"
    (r,) = llm.requests
    assert r.method == "POST" and r.path == "/v1/chat/completions"
    assert r.headers["authorization"] == f"Bearer {KEY}"
    assert r.headers["content-type"] == "application/json"
    assert r.body == {
        "model": "small-model",
        "messages": [
            {"role": "system", "content": "You summarize coding sessions."},
            {"role": "user", "content": "User asked to fix the bug in foo.py."},
        ],
        "max_tokens": 512,  # the request's, under the summarizer's cap
        "temperature": 0,
    }
    assert "tools" not in r.body


def test_anthropic_request_shape(llm: FakeLLM) -> None:
    llm.reply = "anthropic summary"
    with make("anthropic", llm, max_tokens=300) as s:
        assert s.summarize(REQ) == "anthropic summary"
    (r,) = llm.requests
    assert r.path == "/v1/messages"
    assert r.headers["x-api-key"] == KEY
    assert r.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in r.headers
    assert r.body["system"] == "You summarize coding sessions."
    assert r.body["messages"] == [{"role": "user", "content": "User asked to fix the bug in foo.py."}]
    assert r.body["max_tokens"] == 300  # capped by the summarizer's max_tokens
    assert r.body["model"] == "small-model"
    assert "tools" not in r.body


def test_anthropic_joins_text_blocks() -> None:
    def reply(rec):  # type: ignore[no-untyped-def]
        return Fault.error(
            200,
            body=b'{"content": [{"type": "thinking", "thinking": "x"}, {"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}',
        )

    with FakeLLM(reply=reply) as server, make("anthropic", server) as s:
        assert s.summarize(REQ) == "AB"


def test_key_from_environment(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-env")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    with make("openai", llm, api_key=None) as s:
        s.summarize(REQ)
    with make("anthropic", llm, api_key=None) as s:
        s.summarize(REQ)
    monkeypatch.setenv("CTXTOOL_API_KEY", "sk-ctxtool-env")
    with make("openai", llm, api_key=None) as s:
        s.summarize(REQ)
    assert llm.requests[0].headers["authorization"] == "Bearer sk-openai-env"
    assert llm.requests[1].headers["x-api-key"] == "sk-ant-env"
    assert llm.requests[2].headers["authorization"] == "Bearer sk-ctxtool-env"


def test_no_key_for_a_local_server(llm: FakeLLM) -> None:
    with make("openai", llm, api_key=None) as s:
        s.summarize(REQ)
    assert "authorization" not in llm.requests[0].headers


def test_usage_errors() -> None:
    with pytest.raises(CtxtoolError) as e:
        get_summarizer("openai", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    assert e.value.kind == Failure.USAGE and "model" in str(e.value)
    with pytest.raises(CtxtoolError) as e:
        get_summarizer("anthropic", model="claude-haiku-4-5")  # the real endpoint and no key
    assert e.value.kind == Failure.USAGE and "ANTHROPIC_API_KEY" in str(e.value)
    with pytest.raises(CtxtoolError) as e:
        get_summarizer("openai", model="m", base_url="ftp://example/v1", api_key=KEY)
    assert e.value.kind == Failure.USAGE
    with pytest.raises(CtxtoolError) as e:
        get_summarizer("nope")
    assert e.value.kind == Failure.USAGE


def test_bad_key_is_a_usage_error_without_the_key() -> None:
    with pytest.raises(CtxtoolError) as e:
        get_summarizer("openai", model="m", base_url="http://127.0.0.1:9/v1", api_key="sk-abc def\n")
    assert e.value.kind == Failure.USAGE and "sk-abc" not in str(e.value)


def test_fake_llm_runs_standalone() -> None:
    import subprocess
    import sys
    from pathlib import Path

    import httpx

    script = Path(__file__).with_name("fake_llm.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), "--duration", "20"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        r = httpx.post(
            url + "/v1/messages", json={"messages": [{"role": "user", "content": "hi"}]}, timeout=5
        )
        assert r.json()["content"][0]["text"] == "SUMMARY[2]: hi"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_settings_and_repr_hold_no_secret() -> None:
    s = get_summarizer(
        "openai",
        model="gpt-4o-mini",
        base_url="http://user:pw@127.0.0.1:8080/v1/",
        api_key=KEY,
        max_tokens=2000,
    )
    assert s.settings() == {
        "kind": "openai",
        "model": "gpt-4o-mini",
        "base_url": "127.0.0.1:8080/v1",
        "max_tokens": 2000,
        "temperature": 0,
    }
    assert KEY not in repr(s) and KEY not in str(s.settings()) and "pw" not in str(s.settings())


def test_context_window_resolution() -> None:
    base = {"base_url": "http://127.0.0.1:9/v1", "api_key": KEY}
    assert get_summarizer("openai", model="gpt-4", context_window=4000, **base).context_window == 4000
    assert get_summarizer("openai", model="gpt-4", **base).context_window == 8192  # registry
    assert (
        get_summarizer("openai", model="gpt-4", context_window=0, **base).context_window == 8192
    )  # 0 = unset
    assert get_summarizer("openai", model="gemma", **base).context_window == 128000  # unknown model


# -- retries --------------------------------------------------------------------------


def test_429_retry_after_is_honoured(llm: FakeLLM) -> None:
    llm.push(Fault.rate_limit(retry_after="1"), "after the wait")
    t0 = time.monotonic()
    with make("openai", llm, backoff_base=0.001) as s:
        assert s.summarize(REQ) == "after the wait"
    elapsed = time.monotonic() - t0
    t = llm.times()
    assert len(t) == 2
    assert t[1] - t[0] >= 0.95, "the client must wait Retry-After seconds"
    assert elapsed < 4


def test_retry_after_ms_header_and_cap(llm: FakeLLM) -> None:
    slept: list[float] = []
    llm.push(
        Fault.error(429, retry_after="30"),
        Fault.error(503, retry_after="100000"),
        Fault.rate_limit(None),
        "ok",
    )
    with make("anthropic", llm, retries=3, retry_after_cap=60, sleep=slept.append, total_timeout=1000) as s:
        assert s.summarize(REQ) == "ok"
    assert slept[0] == 30
    assert slept[1] == 60  # capped
    assert 0 < slept[2] <= 0.04  # no header: backoff (base 0.01, third try)


def test_retry_after_parsing() -> None:
    assert _retry_after({"retry-after": "2"}) == 2
    assert _retry_after({"retry-after": "1.5"}) == 1.5
    assert _retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert _retry_after({}) is None
    assert _retry_after({"retry-after": "soon"}) is None
    future = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (_retry_after({"retry-after": future}) or 0) <= 31
    past = format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)
    assert _retry_after({"retry-after": past}) == 0


def test_backoff_is_exponential_capped_and_seedable(llm: FakeLLM) -> None:
    runs = []
    for _ in range(2):
        slept: list[float] = []
        llm.push(*[Fault.error(500)] * 6, "ok")
        with make(
            "openai", llm, retries=6, backoff_base=1.0, backoff_cap=8.0, seed=42, sleep=slept.append
        ) as s:
            assert s.summarize(REQ) == "ok"
        runs.append(slept)
    assert runs[0] == runs[1], "same seed, same jitter"
    for i, d in enumerate(runs[0]):
        full = min(8.0, 2.0**i)
        assert full / 2 <= d <= full


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "fault",
    [
        Fault.error(500),
        Fault.error(502),
        Fault.malformed(),
        Fault.malformed(b'{"unexpected": 1}'),
        Fault.drop(),
    ],
    ids=["500", "502", "malformed-json", "malformed-shape", "drop"],
)
def test_transient_fault_then_success(llm: FakeLLM, kind: str, fault: Fault) -> None:
    llm.push(fault, "recovered")
    with make(kind, llm) as s:
        assert s.summarize(REQ) == "recovered"
    assert len(llm.requests) == 2


def test_empty_reply_is_retried(llm: FakeLLM) -> None:
    llm.push("   ", "non-empty")
    with make("openai", llm) as s:
        assert s.summarize(REQ) == "non-empty"


@pytest.mark.parametrize("kind", KINDS)
def test_exhausted_retries_raise_remote(llm: FakeLLM, kind: str) -> None:
    llm.reply = lambda rec: Fault.error(500)
    with make(kind, llm, retries=2) as s, pytest.raises(CtxtoolError) as e:
        s.summarize(REQ)
    err = e.value
    assert err.kind == Failure.REMOTE
    msg = str(err)
    assert f"127.0.0.1:{llm.port}" in msg and "HTTP 500" in msg and "3 tries" in msg
    assert "\n" not in msg and KEY not in msg
    assert len(llm.requests) == 3


def test_exhausted_connection_errors(llm: FakeLLM) -> None:
    llm.reply = lambda rec: Fault.drop()
    with make("openai", llm, retries=1) as s, pytest.raises(CtxtoolError) as e:
        s.summarize(REQ)
    assert e.value.kind == Failure.REMOTE and "connection error" in str(e.value)
    assert len(llm.requests) == 2


def test_refused_connection() -> None:
    with FakeLLM() as server:
        base = server.openai_base
    # the server is gone: connecting is refused at once
    with make("openai", None, base_url=base, retries=1) as s, pytest.raises(CtxtoolError) as e:
        s.summarize(REQ)
    assert e.value.kind == Failure.REMOTE and "connection error" in str(e.value)


def test_client_errors_are_not_retried_and_the_key_is_redacted(llm: FakeLLM) -> None:
    body = (
        '{"error": {"message": "Incorrect API key provided: ' + KEY + '", "code": "invalid_api_key"}}'
    ).encode()
    llm.push(Fault.error(401, body=body))
    with make("openai", llm, retries=3) as s, pytest.raises(CtxtoolError) as e:
        s.summarize(REQ)
    assert e.value.kind == Failure.REMOTE
    assert "HTTP 401" in str(e.value) and "invalid_api_key" in str(e.value)
    assert KEY not in str(e.value)
    assert len(llm.requests) == 1


def test_no_key_in_logs(llm: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    llm.push(Fault.error(500), Fault.drop(), Fault.rate_limit("0"))
    with make("anthropic", llm, retries=3) as s:
        s.summarize(REQ)
    llm.push(Fault.error(403, body=('{"error": {"message": "bad key ' + KEY + '"}}').encode()))
    with make("openai", llm) as s, pytest.raises(CtxtoolError):
        s.summarize(REQ)
    assert "retry" in caplog.text
    assert KEY not in caplog.text


# -- timeouts ---------------------------------------------------------------------------


def test_timeout_on_a_slow_server(llm: FakeLLM) -> None:
    llm.push(Fault.slow(3000))
    t0 = time.monotonic()
    with make("openai", llm, timeout=0.3, retries=0) as s, pytest.raises(CtxtoolError) as e:
        s.summarize(REQ)
    assert time.monotonic() - t0 < 2
    assert e.value.kind == Failure.REMOTE and "timed out" in str(e.value)
    assert f"127.0.0.1:{llm.port}" in str(e.value)


def test_timeout_then_success(llm: FakeLLM) -> None:
    llm.push(Fault.slow(2000), "second try")
    with make("anthropic", llm, timeout=0.3, retries=1) as s:
        assert s.summarize(REQ) == "second try"


# -- context overflow ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [400, 413])
def test_context_overflow(llm: FakeLLM, kind: str, status: int) -> None:
    llm.push(Fault.overflow(status))
    with make(kind, llm, retries=3) as s, pytest.raises(ContextOverflowError) as e:
        s.summarize(REQ)
    assert isinstance(e.value, CtxtoolError) and e.value.kind == Failure.REMOTE
    assert len(llm.requests) == 1, "an overflow is not retried"
    assert KEY not in str(e.value)


def test_llama_cpp_style_overflow(llm: FakeLLM) -> None:
    body = b'{"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error"}}'
    llm.push(Fault.error(400, body=body))
    with make("openai", llm) as s, pytest.raises(ContextOverflowError):
        s.summarize(REQ)


def test_plain_400_is_not_overflow(llm: FakeLLM) -> None:
    llm.push(
        Fault.error(
            400, body=b'{"error": {"message": "unknown parameter: foo", "type": "invalid_request_error"}}'
        )
    )
    with make("openai", llm) as s, pytest.raises(CtxtoolError) as e:
        s.summarize(REQ)
    assert not isinstance(e.value, ContextOverflowError)
    assert "unknown parameter" in str(e.value)


# -- concurrency -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_eight_threads_share_one_summarizer(kind: str) -> None:
    with FakeLLM(latency=0.2) as server, make(kind, server) as s:
        # a few transient faults mixed in: each thread still gets its own answer
        server.push(Fault.error(500), Fault.drop())
        prompts = [f"prompt number {i}" for i in range(16)]
        t0 = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            out = list(pool.map(lambda p: s.summarize(SummaryRequest(system="sys", prompt=p)), prompts))
        elapsed = time.monotonic() - t0
        assert out == [f"SUMMARY[{len(p)}]: {p}" for p in prompts]
        assert len(server.requests) == 18
        assert server.max_in_flight >= 6, "requests ran in parallel over the pool"
        assert elapsed < 2.0, f"16 requests of 200 ms on 8 threads took {elapsed:.2f} s"
        # the pool reused connections rather than opening one per request
        assert threading.active_count() < 60


# -- travelling to other processes (engines) --------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_pickles_as_settings_without_the_key(kind: str, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    s = make(kind, llm)
    blob = pickle.dumps(s)
    assert KEY.encode() not in blob  # the key never travels with a job
    monkeypatch.setenv("CTXTOOL_API_KEY", "sk-worker-own-key")  # the worker's own environment
    copy = pickle.loads(blob)
    assert copy.settings() == s.settings()
    mine = str(s.summarize(REQ))
    assert str(copy.summarize(REQ)) == mine
    header = "authorization" if kind == "openai" else "x-api-key"
    assert "sk-worker-own-key" in llm.requests[-1].headers[header]
    copy.close()
    s.close()
