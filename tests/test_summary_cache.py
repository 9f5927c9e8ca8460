"""CachedSummarizer: keys, hits/misses, persistence, file modes, concurrency, resume."""

from __future__ import annotations

import os
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM

from ctxtool.errors import CtxtoolError, Failure
from ctxtool.summarizers import SummaryRequest, get_summarizer
from ctxtool.summarizers.cache import CachedSummarizer, cache_key


class Counting:
    """A summarizer that counts its calls (and can fail on chosen prompts)."""

    name = "counting"
    context_window = 1000

    def __init__(self, tag: str = "v1", fail_on: set[str] | None = None, delay: float = 0.0) -> None:
        self.tag = tag
        self.calls = 0
        self.fail_on = fail_on or set()
        self.delay = delay
        self._lock = threading.Lock()

    def settings(self) -> dict[str, Any]:
        return {"kind": "counting", "tag": self.tag}

    def summarize(self, req: SummaryRequest) -> str:
        with self._lock:
            self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        if req.prompt in self.fail_on:
            raise CtxtoolError("boom", kind=Failure.REMOTE)
        return f"summary of {req.prompt!r} ({self.tag})"


REQ = SummaryRequest(
    system="sys", prompt="p1", previous_summary="prev", read_files=["a.py"], modified_files=["b.py"]
)


def test_hits_and_misses(tmp_path: Path) -> None:
    inner = Counting()
    c = CachedSummarizer(inner, tmp_path)
    assert c.name == "counting" and c.context_window == 1000 and c.settings() == inner.settings()
    first = c.summarize(REQ)
    assert c.summarize(REQ) == first
    assert c.summarize(replace(REQ, prompt="p2")) != first
    assert (c.hits, c.misses, inner.calls) == (1, 2, 2)


def test_persists_across_instances(tmp_path: Path) -> None:
    CachedSummarizer(Counting(), tmp_path).summarize(REQ)
    inner = Counting()
    c = CachedSummarizer(inner, tmp_path)
    assert c.summarize(REQ) == "summary of 'p1' (v1)"
    assert (c.hits, c.misses, inner.calls) == (1, 0, 0)
    # different settings: a different key
    other = Counting(tag="v2")
    assert CachedSummarizer(other, tmp_path).summarize(REQ) == "summary of 'p1' (v2)"
    assert other.calls == 1


@pytest.mark.parametrize(
    "change",
    [
        {"system": "other"},
        {"prompt": "other"},
        {"style": "retain"},
        {"previous_summary": None},
        {"read_files": ["c.py"]},
        {"modified_files": []},
        {"max_tokens": 100},
    ],
)
def test_key_covers_every_input(change: dict[str, Any]) -> None:
    s = {"kind": "x"}
    assert cache_key(s, REQ) != cache_key(s, replace(REQ, **change))
    assert cache_key(s, REQ) == cache_key(dict(s), replace(REQ))
    assert cache_key(s, REQ) != cache_key({"kind": "y"}, REQ)


def test_files_are_private_and_atomic(tmp_path: Path) -> None:
    c = CachedSummarizer(Counting(), tmp_path / "cache")
    c.summarize(REQ)
    d = tmp_path / "cache" / "summaries"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    files = list(d.iterdir())
    assert [f.name for f in files] == [c.key(REQ)]
    assert len(files[0].name) == 64
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert files[0].read_text("utf-8") == "summary of 'p1' (v1)"


def test_failures_are_not_cached_and_a_run_resumes(tmp_path: Path) -> None:
    prompts = [f"chunk {i}" for i in range(5)]
    first = CachedSummarizer(Counting(fail_on={"chunk 3"}), tmp_path)
    done = []
    with pytest.raises(CtxtoolError):
        for p in prompts:  # an interrupted dataset run
            done.append(first.summarize(replace(REQ, prompt=p)))
    assert len(done) == 3
    assert len(list((tmp_path / "summaries").iterdir())) == 3
    inner = Counting()
    second = CachedSummarizer(inner, tmp_path)
    out = [second.summarize(replace(REQ, prompt=p)) for p in prompts]
    assert out[:3] == done
    assert (second.hits, second.misses, inner.calls) == (3, 2, 2)


def test_unreadable_entry_is_a_miss(tmp_path: Path) -> None:
    c = CachedSummarizer(Counting(), tmp_path)
    c.path(REQ).parent.mkdir(parents=True)
    c.path(REQ).write_bytes(b"\xff\xfe not utf-8")
    assert c.summarize(REQ) == "summary of 'p1' (v1)"
    assert c.misses == 1
    assert c.path(REQ).read_text("utf-8") == "summary of 'p1' (v1)"


def test_unwritable_cache_still_returns_the_summary(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Breaking(Counting):  # the cache becomes unusable while the model works
        def summarize(self, req: SummaryRequest) -> str:
            (tmp_path / "summaries").rmdir()
            (tmp_path / "summaries").write_text("a file where the directory should be")
            return super().summarize(req)

    (tmp_path / "summaries").mkdir()
    c = CachedSummarizer(Breaking(), tmp_path)
    assert c.summarize(REQ) == "summary of 'p1' (v1)"  # paid for: returned, with a warning
    assert "cannot write the summary cache" in caplog.text and "summaries: is not a directory" in caplog.text


def test_a_file_in_place_of_the_cache_is_an_error_before_the_model_is_asked(tmp_path: Path) -> None:
    (tmp_path / "summaries").write_text("a file where the directory should be")
    inner = Counting()
    with pytest.raises(CtxtoolError) as e:
        CachedSummarizer(inner, tmp_path).summarize(REQ)
    assert e.value.kind == Failure.INPUT and str(tmp_path / "summaries") in str(e.value)
    assert inner.calls == 0


def test_concurrent_identical_requests_compute_once(tmp_path: Path) -> None:
    inner = Counting(delay=0.1)
    c = CachedSummarizer(inner, tmp_path)
    reqs = [REQ] * 8 + [replace(REQ, prompt=f"q{i}") for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        out = list(pool.map(c.summarize, reqs))
    assert len(set(out[:8])) == 1
    assert inner.calls == 9
    assert (c.hits, c.misses) == (7, 9)
    assert not [f for f in os.listdir(tmp_path / "summaries") if f.endswith(".tmp")]


def test_with_a_remote_summarizer(tmp_path: Path) -> None:
    with FakeLLM() as llm:
        remote = get_summarizer(
            "openai", base_url=llm.openai_base, model="m", api_key="sk-secret-xyz", backoff_base=0.01
        )
        c = CachedSummarizer(remote, tmp_path)
        a = c.summarize(REQ)
        b = CachedSummarizer(remote, tmp_path).summarize(REQ)
        assert a == b and len(llm.requests) == 1
        assert "sk-secret-xyz" not in str(c.settings())
        c.close()
