"""Compaction through a real summary model protocol: the loopback server of tests/fake_llm.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM, Fault
from test_compact import opts, write_chat, write_dataset

from ctxtool.compaction import run as cp
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.summarizers import get_summarizer
from ctxtool.summarizers import prompt as sp
from ctxtool.summarizers.cache import CachedSummarizer

REPLY = "## Goal\nFix the failing test.\n\n## Progress\n### Done\n- [x] edited\n"


def remote(kind: str, llm: FakeLLM, **kw: Any) -> Any:
    base: dict[str, Any] = {"base_url": llm.base_url(kind), "model": "small-summary-model", "api_key": "k",
                            "retries": 0, "backoff_base": 0.001}
    base.update(kw)
    return get_summarizer(kind, **base)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_remote_summary_request_and_output(kind: str, tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", filler=3000)
    out = tmp_path / "o.json"
    with FakeLLM(reply=REPLY) as llm:
        rep = cp.compact_file(src, out, options=opts(), summarizer=remote(kind, llm))
        reqs = list(llm.requests)
    assert rep.records[0].status == "compacted" and len(reqs) == 1
    req = reqs[0]
    assert req.body["model"] == "small-summary-model"  # a separate summary model (seed 001 2.6.2)
    assert "Do NOT continue the conversation" in req.system
    assert "<conversation>\n[User]: Please fix the failing test in src/app_a.py" in req.prompt
    assert "[Assistant tool calls]: read_file(" in req.prompt and "[Tool result" in req.prompt
    assert "characters omitted" in req.prompt  # tool results clipped to 1800 characters
    assert "## Constraints & Preferences" in req.prompt
    s = json.loads(out.read_text())[1]["content"]
    assert s.startswith(sp.SUMMARY_PREFIX + "\n\n" + REPLY.strip())
    # the file lists are ctxtool's, never the model's
    assert "<read-files>" in s and "<modified-files>\nsrc/mod0_a.py" in s


def test_overflow_is_recovered_by_chunking(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=6)
    with FakeLLM(reply=REPLY) as llm:
        llm.push(Fault.overflow())
        rep = cp.compact_file(src, tmp_path / "o.json", options=opts(), summarizer=remote("openai", llm))
        n = len(llm.requests)
    r = rep.records[0]
    assert r.status == "compacted" and r.chunks >= 2 and n == 1 + r.summary_calls


def test_small_summary_window_summarizes_in_chunks(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=8)
    with FakeLLM(reply=REPLY) as llm:
        rep = cp.compact_file(src, tmp_path / "o.json", options=opts(summary_max_tokens=500),
                              summarizer=remote("anthropic", llm, context_window=4000, max_tokens=500))
        prompts = [q.prompt for q in llm.requests]
    assert rep.records[0].chunks == len(prompts) > 1
    assert all("<previous-summary>" in p for p in prompts[1:])


def test_server_error_fails_cleanly_or_falls_back(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    out = tmp_path / "o.json"
    with FakeLLM(reply=REPLY) as llm:
        llm.push(Fault.error(500))
        with pytest.raises(CtxtoolError) as e:
            cp.compact_file(src, out, options=opts(), summarizer=remote("openai", llm))
        assert e.value.kind == Failure.REMOTE and not out.exists()
        llm.push(Fault.error(500))
        rep = cp.compact_file(src, out, options=opts(fallback=True), summarizer=remote("openai", llm))
    assert rep.records[0].fallback_used and "## Goal" in json.loads(out.read_text())[1]["content"]


def test_jobs_overlap_requests_and_cache_serves_rerun(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=8, turns=3, filler=300)
    with FakeLLM(reply=REPLY, latency=0.2) as llm:
        cp.compact_file(src, tmp_path / "o1.jsonl", options=opts(), summarizer=remote("openai", llm), jobs=1)
        serial_overlap = llm.max_in_flight
        llm.max_in_flight = 0
        cached = CachedSummarizer(remote("openai", llm), tmp_path / "cache")
        r8 = cp.compact_file(src, tmp_path / "o8.jsonl", options=opts(), summarizer=cached, jobs=8)
        parallel_overlap = llm.max_in_flight
        n = len(llm.requests)
        again = cp.compact_file(src, tmp_path / "o9.jsonl", options=opts(),
                                summarizer=CachedSummarizer(remote("openai", llm), tmp_path / "cache"), jobs=8)
        assert len(llm.requests) == n  # the re-run costs nothing
    # the server counts requests that overlapped (not timed: speed lives in `make bench`)
    assert serial_overlap == 1 and parallel_overlap > 1
    assert r8.cache_misses == 8 and again.cache_hits == 8 and again.cache_misses == 0
    assert (tmp_path / "o1.jsonl").read_bytes() == (tmp_path / "o8.jsonl").read_bytes() == (tmp_path / "o9.jsonl").read_bytes()
