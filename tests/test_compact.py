"""compact: layouts, incremental summaries, guardrails, datasets, fault injection and the
long corpus transcripts (each compacts into a smaller valid file of its own format whose
kept lines are byte-identical to the input)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS

from ctxtool import formats
from ctxtool.compaction.core import compact_transcript
from ctxtool.compaction.run import compact_file, compact_paths
from ctxtool.compaction.settings import CompactOptions
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.history.validate import check_messages
from ctxtool.io.events import EventLog
from ctxtool.summarizers import ContextOverflowError
from ctxtool.summarizers import prompt as sp


# -- synthetic transcripts ------------------------------------------------------------------------------
def call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def conversation(turns: int = 6, tag: str = "a", filler: int = 1500) -> list[dict[str, Any]]:
    """An OpenAI chat conversation of a coding agent: reads, edits, shell commands, a failure."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(turns):
        if i == 0:
            text = (f"Please fix the failing test in src/app_{tag}.py. Do not change the public API. "
                    "Always run pytest after every edit.")
        else:
            text = f"Now step {i}: add option --opt{i} to the CLI in src/cli_{tag}.py."
        msgs.append({"role": "user", "content": text})
        msgs.append({"role": "assistant", "content": f"I'll read src/mod{i}_{tag}.py first.",
                     "tool_calls": [call(f"c{i}r", "read_file", path=f"src/mod{i}_{tag}.py")]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}r", "content": f"line {i}\n" + "x = 1\n" * (filler // 6)})
        msgs.append({"role": "assistant", "content": None,
                     "tool_calls": [call(f"c{i}e", "edit_file", path=f"src/mod{i}_{tag}.py", old="x = 1", new="x = 2")]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}e", "content": "edited"})
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call(f"c{i}b", "bash", command="pytest -q")]})
        out = "3 passed" if i % 2 else "FAILED tests/test_app.py::test_parse - AssertionError: expected 2"
        msgs.append({"role": "tool", "tool_call_id": f"c{i}b", "content": out})
        msgs.append({"role": "assistant", "content": f"Step {i} done. The cause was an off-by-one in parse(), "
                     "so I decided to use bisect instead of a linear scan because it is faster."})
    return msgs


def write_dataset(path: Path, n: int = 3, **kw: Any) -> Path:
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"r{i}", "split": "train", "messages": conversation(tag=f"r{i}", **kw)}) + "\n")
    return path


def write_chat(path: Path, **kw: Any) -> Path:
    path.write_text(json.dumps(conversation(**kw)))
    return path


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def opts(**kw: Any) -> CompactOptions:
    base: dict[str, Any] = {"force": True, "keep_recent_tokens": 400}
    base.update(kw)
    return CompactOptions(**base)


class Counting:
    """A summarizer that records its requests (optionally slow, failing or tiny-windowed)."""

    name = "counting"

    def __init__(self, reply: str = "## Goal\nfix it\n", window: int = 10**9, delay: float = 0.0,
                 fail_on: str | None = None, overflow_first: bool = False) -> None:
        self.reply = reply
        self.context_window = window
        self.delay = delay
        self.fail_on = fail_on
        self.overflow_first = overflow_first
        self.requests: list[Any] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0  # requests that overlapped: what --jobs is for

    def settings(self) -> dict[str, Any]:
        return {"kind": "counting", "reply": self.reply}

    def summarize(self, req: Any) -> str:
        with self.lock:
            self.requests.append(req)
            first = len(self.requests) == 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.delay:
            time.sleep(self.delay)
        with self.lock:
            self.in_flight -= 1
        if self.overflow_first and first:
            raise ContextOverflowError("prompt is too long")
        if self.fail_on and self.fail_on in req.prompt:
            raise CtxtoolError("summary model failed: 500", kind=Failure.REMOTE)
        return self.reply


# -- summary input (seeds 000/001) ---------------------------------------------------------------------------
def test_summary_input_strips_trailing_tool_calls_and_hidden_messages() -> None:
    from ctxtool.model import Block, Message, Metadata

    msgs = [
        Message("system", [Block("text", text="sys")]),
        Message("user", [Block("text", text="go")]),
        Message("user", [Block("text", text="hidden")], metadata=Metadata(agent_visible=False)),
        Message("assistant", [Block("text", text="calling"), Block("tool_call", id="c1", name="bash", arguments={"command": "ls"})]),
    ]
    out = sp.summary_input(msgs)
    assert [m.role for m in out] == ["user", "assistant"]
    assert out[-1].tool_calls() == [] and out[-1].text() == "calling"
    assert msgs[-1].tool_calls()  # the original is untouched
    only_call = msgs[:2] + [Message("assistant", [Block("tool_call", id="c2", name="bash", arguments={})])]
    assert [m.role for m in sp.summary_input(only_call)] == ["user"]


def test_serialize_clips_tool_results_to_1800_chars() -> None:
    from ctxtool.model import Block, Message

    m = Message("tool", [Block("tool_result", id="c1", text="y" * 5000, name="read")])
    s = sp.serialize([m])
    assert s.startswith("[Tool result read]: ")
    assert 1800 <= len(s) < 1900 and "characters omitted" in s


def test_extract_files_from_tool_calls() -> None:
    from ctxtool.model import Block, Message

    calls = [
        Block("tool_call", id="1", name="Read", arguments={"file_path": "/r/a.py"}),
        Block("tool_call", id="2", name="Edit", arguments={"file_path": "/r/b.py", "old_string": "x", "new_string": "y"}),
        Block("tool_call", id="3", name="exec_command", arguments=json.dumps({"cmd": "cat src/c.py | head"})),
        Block("tool_call", id="4", name="apply_patch", arguments={"input": "*** Begin Patch\n*** Update File: src/d.py\n@@\n*** Add File: src/e.py\n"}),
        Block("tool_call", id="5", name="bash", arguments={"command": "echo hi > out/f.txt"}),
        Block("tool_call", id="6", name="read", arguments={"path": "/r/b.py"}),
    ]
    read, mod = sp.extract_files([Message("assistant", calls)])
    assert read == ["/r/a.py", "src/c.py"]
    assert mod == ["/r/b.py", "src/d.py", "src/e.py", "out/f.txt"]


def test_file_lists_round_trip() -> None:
    s = sp.with_file_lists("## Goal\nx", ["a.py", "b.py"], ["b.py"])
    assert "<read-files>\na.py\n</read-files>" in s and "<modified-files>\nb.py\n</modified-files>" in s
    assert sp.parse_file_lists(s) == (["a.py"], ["b.py"])
    assert sp.strip_file_lists(s) == "## Goal\nx"


def test_prompt_has_directives_instructions_and_previous_summary() -> None:
    po = sp.PromptOptions(style="retain", summary_directives=("keep the ticket id",),
                          retain_directives=("tool output refs",), instructions="focus on the parser")
    system, prompt = sp.build_prompt("[User]: hi", "old summary", po)
    assert "<previous-summary>\nold summary" in prompt and "<retain>" in prompt and "<summary>" in prompt
    assert "- keep the ticket id" in prompt and "- tool output refs" in prompt and "focus on the parser" in prompt
    _, structured = sp.build_prompt("[User]: hi", None, sp.PromptOptions())
    for section in ("## Goal", "## Constraints & Preferences", "### Done", "### In Progress", "### Blocked",
                    "## Key Decisions", "## Next Steps", "## Critical Context"):
        assert section in structured


def test_parse_retain() -> None:
    assert sp.parse_retain("<retain>ref-1</retain>\n<summary>did things</summary>") == ("ref-1", "did things")
    assert sp.parse_retain("just text") == ("", "just text")


# -- layouts on a dataset ----------------------------------------------------------------------------------
def test_summary_layout_dataset_keeps_other_fields_and_kept_messages(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl")
    before = sha(src)
    out = tmp_path / "out.jsonl"
    rep = compact_file(src, out, options=opts())
    assert sha(src) == before
    assert rep.count("compacted") == 3 and rep.ratio and rep.ratio > 1.5
    ins = [json.loads(x) for x in src.read_text().splitlines()]
    outs = [json.loads(x) for x in out.read_text().splitlines()]
    for a, b, r in zip(ins, outs, rep.records, strict=True):
        assert {k: v for k, v in a.items() if k != "messages"} == {k: v for k, v in b.items() if k != "messages"}
        assert b["messages"][0] == a["messages"][0]  # the system prompt
        s = b["messages"][1]
        assert s["role"] == "user" and s["content"].startswith("[Previous conversation summary]\n\n## Goal")
        assert s["ctxtool"]["kind"] == "compaction_summary"
        assert "<read-files>" in s["content"] and "<modified-files>" in s["content"]
        kept = b["messages"][2:]
        assert kept == a["messages"][-len(kept):] and len(kept) == r.kept_messages
        assert r.tokens_after < r.tokens_before
    for t in formats.read(out):
        assert check_messages(t.messages) == []


def test_retain_layout_keeps_last_turn(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    out = tmp_path / "o.json"
    rep = compact_file(src, out, options=opts(layout="retain", retain_directives=("exact error messages",)))
    r = rep.records[0]
    assert r.status == "compacted"
    msgs = json.loads(out.read_text())
    orig = json.loads(src.read_text())
    assert msgs[1]["content"].startswith("[Previous conversation summary]\n\n<retain>")
    assert "exact error messages" in msgs[1]["content"]
    assert msgs[2]["content"].startswith("<summary>\n## Goal")
    # the last turn: from the last user message on
    last_user = max(i for i, m in enumerate(orig) if m["role"] == "user")
    assert msgs[3:] == orig[last_user:]


def test_retain_last_turns_two(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    out = tmp_path / "o.json"
    compact_file(src, out, options=opts(layout="retain", retain_last_turns=2))
    msgs = json.loads(out.read_text())
    assert sum(1 for m in msgs[3:] if m["role"] == "user") == 2


def test_initial_layout_keeps_first_request_and_last_ten(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    out = tmp_path / "o.json"
    rep = compact_file(src, out, options=opts(layout="initial"))
    msgs = json.loads(out.read_text())
    orig = json.loads(src.read_text())
    assert msgs[0] == orig[0] and msgs[1] == orig[1]  # system + the initial request
    assert msgs[2]["content"].startswith("[Previous conversation summary]")
    kept = msgs[3:]
    assert 10 <= len(kept) <= 12 and kept == orig[-len(kept):]
    assert rep.records[0].kept_messages == len(kept)


def test_trigger_decides_and_force_overrides(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=3, filler=600)
    rep = compact_file(src, tmp_path / "o.json", options=CompactOptions(keep_recent_tokens=100))
    assert rep.records[0].status == "not_needed" and "effective-limit" in rep.records[0].reason
    assert json.loads((tmp_path / "o.json").read_text()) == json.loads(src.read_text())
    rep = compact_file(src, tmp_path / "o2.json", options=CompactOptions(keep_recent_tokens=100, context_window=1000, reserve_tokens=900))
    assert rep.records[0].trigger.startswith("effective-limit") and rep.records[0].status == "compacted"


def test_nothing_to_cut_is_ok(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=1, filler=60)
    rep = compact_file(src, tmp_path / "o.json", options=opts(keep_recent_tokens=100_000))
    assert rep.records[0].status == "nothing_to_cut"


# -- incremental ------------------------------------------------------------------------------------------
def test_incremental_dataset_merges_previous_summary_and_file_lists(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=4)
    first = tmp_path / "1.json"
    compact_file(src, first, options=opts())
    msgs = json.loads(first.read_text())
    read1, mod1 = sp.parse_file_lists(msgs[1]["content"])
    assert "src/mod0_a.py" in mod1
    # the conversation goes on, then is compacted again
    more = conversation(turns=4, tag="b")[1:]
    (tmp_path / "2in.json").write_text(json.dumps(msgs + more))
    counting = Counting(reply="## Goal\nmerged\n")
    rep = compact_file(tmp_path / "2in.json", tmp_path / "2.json", options=opts(), summarizer=counting)
    assert rep.records[0].incremental
    req = counting.requests[0]
    assert req.previous_summary and "## Goal" in req.previous_summary and "<read-files>" not in req.previous_summary
    assert "<previous-summary>" in req.prompt
    out = json.loads((tmp_path / "2.json").read_text())
    assert sum(1 for m in out if m.get("ctxtool", {}).get("kind") == "compaction_summary") == 1
    read2, mod2 = sp.parse_file_lists(out[1]["content"])
    assert set(mod1) <= set(mod2) and any("_b.py" in p for p in mod2)


def test_incremental_heuristic_keeps_earlier_goal(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=4)
    compact_file(src, tmp_path / "1.json", options=opts())
    msgs = json.loads((tmp_path / "1.json").read_text())
    (tmp_path / "2in.json").write_text(json.dumps(msgs + conversation(turns=4, tag="b")[1:]))
    compact_file(tmp_path / "2in.json", tmp_path / "2.json", options=opts())
    s = json.loads((tmp_path / "2.json").read_text())[1]["content"]
    assert "fix the failing test in src/app_a.py" in s  # the first goal survives two rounds
    assert "src/mod0_a.py" in s and "_b.py" in s


def test_canonical_records_a_compaction_entry_and_compacts_again(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=8)
    canon = tmp_path / "c.ctxtool.jsonl"
    compact_file(src, canon, to="ctxtool", options=opts(keep_recent_tokens=2500))
    lines = [json.loads(x) for x in canon.read_text().splitlines()]
    comp = [x for x in lines if x["type"] == "compaction"]
    assert len(comp) == 1
    assert comp[0]["summary"].startswith("## Goal") and comp[0]["tokens_before"] > 0
    t = next(iter(formats.read(canon)))
    assert t.compactions and t.format == "ctxtool"
    rep = compact_file(canon, tmp_path / "again.jsonl", options=opts(keep_recent_tokens=200))
    r = rep.records[0]
    assert r.incremental and r.status == "compacted"
    lines2 = [json.loads(x) for x in (tmp_path / "again.jsonl").read_text().splitlines()]
    assert sum(1 for x in lines2 if x["type"] == "compaction") == 1


# -- guardrails ------------------------------------------------------------------------------------------
def test_empty_summary_rejected_unless_fallback(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    with pytest.raises(CtxtoolError, match="empty summary"):
        compact_file(src, tmp_path / "o.json", options=opts(), summarizer=Counting(reply="  "))
    assert not (tmp_path / "o.json").exists()
    rep = compact_file(src, tmp_path / "o.json", options=opts(fallback=True), summarizer=Counting(reply=""))
    assert rep.records[0].fallback_used and rep.records[0].status == "compacted"
    assert "## Goal" in json.loads((tmp_path / "o.json").read_text())[1]["content"]


def test_summary_that_saves_nothing_is_rejected(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    huge = Counting(reply="blah " * 50_000)
    rep = compact_file(src, tmp_path / "o.json", options=opts(), summarizer=huge)
    assert rep.records[0].status == "not_smaller" and "not be smaller" in rep.records[0].reason
    assert rep.records[0].tokens_after == rep.records[0].tokens_before
    rep = compact_file(src, tmp_path / "o.json", options=opts(fallback=True), summarizer=huge)
    assert rep.records[0].fallback_used and rep.records[0].tokens_after < rep.records[0].tokens_before


def test_summary_stuck_in_a_loop_is_rejected(tmp_path: Path) -> None:
    """What a 270M model wrote in make test-llm: the same line, numbers aside, over and over."""
    src = write_chat(tmp_path / "c.json")
    loop = Counting(reply="<<SYS>>\n" + "".join(f"[Tool call: {2 * i}]: [tool call: {2 * i + 1}]\n" for i in range(30)))
    with pytest.raises(CtxtoolError, match="repeats one line"):
        compact_file(src, tmp_path / "o.json", options=opts(), summarizer=loop)
    assert not (tmp_path / "o.json").exists()
    rep = compact_file(src, tmp_path / "o.json", options=opts(fallback=True), summarizer=loop)
    assert rep.records[0].fallback_used and "## Goal" in json.loads((tmp_path / "o.json").read_text())[1]["content"]


def test_structured_summaries_are_not_taken_for_loops() -> None:
    ok = "\n".join(["## Goal", "Fix the parser", "## Progress", *(f"- [x] step {i}: edit src/mod_{i}.py" for i in range(20))])
    from ctxtool.score.quality import degenerate

    assert degenerate(ok) is None  # a list under the requested headings
    assert degenerate("\n".join(f"- [x] step {i}: edit src/mod_{i}.py" for i in range(20))) is not None
    assert degenerate("\n".join(["Summary:", *(["the user asked"] * 15)])) is not None
    assert degenerate("short\nshort\nshort") is None  # too few lines to judge
    assert degenerate("\n".join(f"{w} {i}" for i, w in enumerate("alpha beta gamma delta".split() * 5))) is None


def test_remote_failure_with_fallback_uses_heuristic(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    rep = compact_file(src, tmp_path / "o.json", options=opts(fallback=True), summarizer=Counting(fail_on="conversation"))
    assert rep.records[0].fallback_used


def test_report_and_events(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=2)
    ev = tmp_path / "ev.jsonl"
    rep = compact_file(src, tmp_path / "o.jsonl", options=opts(), events=ev)
    events = [json.loads(x) for x in ev.read_text().splitlines()]
    assert [e["event"] for e in events] == ["compaction_start", "compaction_end", "compaction"] * 2
    c = events[2]
    assert c["tokens_before"] > c["tokens_after"] > 0 and c["messages_removed"] > 0
    j = rep.to_json()
    assert j["compacted"] == 2 and j["ratio"] > 1 and j["per_record"][0]["ratio"] > 1
    assert j["per_record"][0]["messages_removed"] == rep.records[0].messages_removed > 0


def test_events_record_failures(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=2)
    log = EventLog()
    compact_file(src, tmp_path / "o.jsonl", options=opts(), events=log, on_error="skip",
                    summarizer=Counting(fail_on="src/app_r1.py"))
    ends = [e for e in log.events if e["event"] == "compaction_end"]
    assert any("error" in e for e in ends) and any("error" not in e for e in ends)


def test_dry_run_plans_without_model_or_output(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    s = Counting()
    rep = compact_file(src, tmp_path / "o.json", options=opts(), summarizer=s, dry_run=True)
    r = rep.records[0]
    assert r.status == "planned" and r.prompt_tokens > 0 and r.summarized_messages > 0 and r.cut
    assert not s.requests and not (tmp_path / "o.json").exists()


def test_tool_digest_archives_excess_kept_results(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=8, filler=1200)
    out = tmp_path / "o.json"
    compact_file(src, out, options=opts(keep_recent_tokens=1500, tool_digest=True, tool_call_cutoff=2))
    msgs = json.loads(out.read_text())
    # seed 000's archiver (the one `archive` uses): its digest, under the compaction's prefix
    assert msgs[-1]["content"].startswith("[Compaction tool digest] ")
    assert " older tool results were archived" in msgs[-1]["content"] and len(msgs[-1]["content"]) <= 800
    assert msgs[-1]["ctxtool"] == {"agent_visible": True, "user_visible": False, "kind": "tool_summary"}
    archived = [m for m in msgs if m.get("ctxtool", {}).get("kind") == "tool_result_archived"]
    visible_results = [m for m in msgs if m["role"] == "tool" and "ctxtool" not in m]
    assert archived and len(visible_results) == 2


# -- chunking ----------------------------------------------------------------------------------------------
def test_large_input_is_summarized_in_chunks_and_merged(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=8)
    s = Counting(window=4000)  # the summary model's window: far smaller than the input
    rep = compact_file(src, tmp_path / "o.json", options=opts(summary_max_tokens=500), summarizer=s)
    r = rep.records[0]
    assert r.chunks > 1 and r.summary_calls == len(s.requests) > 1
    assert all(len(q.system) + len(q.prompt) <= (4000 - 500) * 4 for q in s.requests)
    assert s.requests[1].previous_summary == s.reply  # each chunk merges into the running summary


def test_context_overflow_recovers_by_chunking(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=6)
    s = Counting(overflow_first=True)
    rep = compact_file(src, tmp_path / "o.json", options=opts(), summarizer=s)
    assert rep.records[0].status == "compacted" and rep.records[0].chunks >= 2 and len(s.requests) >= 3


# -- datasets: jobs, cache, errors ----------------------------------------------------------------------------
def test_jobs_run_in_parallel_with_identical_output(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=8, turns=3, filler=300)
    one, eight = Counting(delay=0.1), Counting(delay=0.1)
    compact_file(src, tmp_path / "o1.jsonl", options=opts(), summarizer=one, jobs=1)
    rep = compact_file(src, tmp_path / "o8.jsonl", options=opts(), summarizer=eight, jobs=8)
    assert (tmp_path / "o1.jsonl").read_bytes() == (tmp_path / "o8.jsonl").read_bytes()
    # overlap is counted, not timed (a loaded machine must not fail it; speed lives in `make bench`)
    assert one.max_in_flight == 1 and eight.max_in_flight > 1 and rep.jobs == 8


def test_cache_makes_second_run_free_and_identical(tmp_path: Path) -> None:
    from ctxtool.summarizers.cache import CachedSummarizer

    src = write_dataset(tmp_path / "d.jsonl", n=4, turns=3, filler=300)
    inner = Counting(reply="## Goal\ncached\n")
    r1 = compact_file(src, tmp_path / "o1.jsonl", options=opts(), summarizer=CachedSummarizer(inner, tmp_path / "cache"), jobs=2)
    n = len(inner.requests)
    r2 = compact_file(src, tmp_path / "o2.jsonl", options=opts(), summarizer=CachedSummarizer(inner, tmp_path / "cache"), jobs=2)
    assert len(inner.requests) == n  # nothing asked the second time
    assert (r1.cache_hits, r1.cache_misses) == (0, 4) and (r2.cache_hits, r2.cache_misses) == (4, 0)
    assert (tmp_path / "o1.jsonl").read_bytes() == (tmp_path / "o2.jsonl").read_bytes()


def test_interrupted_run_resumes_from_cache(tmp_path: Path) -> None:
    from ctxtool.summarizers.cache import CachedSummarizer

    src = write_dataset(tmp_path / "d.jsonl", n=4, turns=3, filler=300)
    failing = Counting(reply="## Goal\nx\n", fail_on="src/app_r2.py")
    with pytest.raises(CtxtoolError):
        compact_file(src, tmp_path / "o.jsonl", options=opts(), summarizer=CachedSummarizer(failing, tmp_path / "cache"))
    assert not (tmp_path / "o.jsonl").exists()
    ok = Counting(reply="## Goal\nx\n")
    rep = compact_file(src, tmp_path / "o.jsonl", options=opts(), summarizer=CachedSummarizer(ok, tmp_path / "cache"))
    assert rep.cache_hits == 2 and len(ok.requests) == 2


def test_failing_record_fails_the_run_unless_skip(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=3)
    before = sha(src)
    with pytest.raises(CtxtoolError, match="summary model failed"):
        compact_file(src, tmp_path / "o.jsonl", options=opts(), summarizer=Counting(fail_on="src/app_r1.py"), jobs=2)
    assert not (tmp_path / "o.jsonl").exists() and sha(src) == before
    rep = compact_file(src, tmp_path / "o.jsonl", options=opts(), summarizer=Counting(fail_on="src/app_r1.py"),
                          on_error="skip")
    assert [r.status for r in rep.records] == ["compacted", "error", "compacted"]
    raw_in = src.read_bytes().splitlines()
    raw_out = (tmp_path / "o.jsonl").read_bytes().splitlines()
    assert raw_out[1] == raw_in[1]  # the failed record is left unchanged, byte for byte


def test_compact_is_an_operation_of_the_one_runner(tmp_path: Path) -> None:
    """CompactOp pickles (its progress callback stays behind) and runs one record at a time
    through ctxtool.run.records, byte for byte what the file run writes, reports merging."""
    import pickle

    from ctxtool.compaction.op import CompactOp
    from ctxtool.run import records
    from ctxtool.run.operation import merge_reports

    src = write_dataset(tmp_path / "d.jsonl", n=3)
    seen: list[tuple[int, int]] = []
    rep = compact_file(src, tmp_path / "o.jsonl", options=opts(), progress=lambda n, total, r: seen.append((n, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]  # the whole input is read first: the total is known
    op = pickle.loads(pickle.dumps(CompactOp(opts(), progress=lambda n, total, r: None)))
    assert op.progress is None and op == CompactOp(opts())
    lines = src.read_bytes().splitlines()
    res = [records.process(op, rec, path=str(src), line=n, events=True) for n, rec in enumerate(lines, 1)]
    assert b"\n".join(r.data for r in res) + b"\n" == (tmp_path / "o.jsonl").read_bytes()
    merged = merge_reports(r.report for r in res)
    assert [o.report.status for o in merged.outcomes] == [r.status for r in rep.records] == ["compacted"] * 3
    assert [e["event"] for e in res[1].events] == ["compaction_start", "compaction_end", "compaction"]
    assert merged.bytes_written == sum(len(r.data) + 1 for r in res)
    failing = CompactOp(opts(), Counting(fail_on="src/app_r1.py"))  # under skip: written as read, reported
    res = [records.process(failing, rec, path=str(src), line=n, fmt="openai", on_error="skip") for n, rec in
           enumerate([lines[1], b'{"messages": [', lines[2]], 1)]
    assert [(r.changed, bool(r.skipped)) for r in res] == [(False, False), (True, True), (True, False)]  # dropped
    assert res[0].data == lines[1] and res[0].report.outcomes[0].report.status == "error" and res[1].data == b""


# -- fault injection: the input untouched, no partial output --------------------------------------------------
def _no_temp_files(d: Path) -> bool:
    return not [p for p in d.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]


def test_writer_failure_leaves_no_partial_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=3)
    before = sha(src)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    real = formats.write

    def broken(ts: Any, out: Any, fmt: Any = None) -> None:
        out.write(b'{"partial": true}\n')
        raise OSError("disk full")

    monkeypatch.setattr(formats, "write", broken)
    with pytest.raises(OSError, match="disk full"):
        compact_file(src, out_dir / "o.jsonl", options=opts())
    monkeypatch.setattr(formats, "write", real)
    assert not (out_dir / "o.jsonl").exists() and _no_temp_files(out_dir) and sha(src) == before


def test_invalid_rebuild_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebuild that leaves an orphan tool result fails validation: nothing is written."""
    src = write_chat(tmp_path / "c.json")
    out = tmp_path / "o.json"
    out.write_text("previous content")
    from ctxtool.compaction import core

    real = core.rebuild

    def orphaning(t: Any, p: Any, *a: Any, **kw: Any) -> Any:
        built = real(t, p, *a, **kw)
        new_t = built.transcript
        calls = [e for e in new_t.entries if getattr(e, "role", None) == "assistant" and e.tool_calls()]
        new_t.entries = [e for e in new_t.entries if e is not calls[0]]
        return built

    monkeypatch.setattr(core, "rebuild", orphaning)
    with pytest.raises(CtxtoolError, match="orphan_result"):
        compact_file(src, out, options=opts())
    assert out.read_text() == "previous content" and _no_temp_files(tmp_path)


def test_interrupt_leaves_no_output(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=3)

    class Interrupting(Counting):
        def summarize(self, req: Any) -> str:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compact_file(src, tmp_path / "o.jsonl", options=opts(), summarizer=Interrupting())
    assert not (tmp_path / "o.jsonl").exists() and _no_temp_files(tmp_path)


def test_output_must_not_be_the_input(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    before = sha(src)
    with pytest.raises(CtxtoolError, match="overwrite the input"):
        compact_file(src, src, options=opts())
    assert sha(src) == before


def test_split_turn_cut_leaves_no_orphans(tmp_path: Path) -> None:
    # one user request followed by a long run of tool calls: the cut lands mid-turn
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "Refactor everything in src/."}]
    for i in range(12):
        msgs.append({"role": "assistant", "content": f"step {i}", "tool_calls": [call(f"k{i}", "read_file", path=f"src/f{i}.py")]})
        msgs.append({"role": "tool", "tool_call_id": f"k{i}", "content": "z" * 2000})
    msgs.append({"role": "assistant", "content": "done"})
    src = tmp_path / "s.json"
    src.write_text(json.dumps(msgs))
    rep = compact_file(src, tmp_path / "o.json", options=opts(keep_recent_tokens=1500))
    r = rep.records[0]
    assert r.status == "compacted" and r.split_turn
    t = next(iter(formats.read(tmp_path / "o.json")))
    assert check_messages(t.messages) == []
    assert t.messages[2].role == "assistant"  # the kept part starts at an assistant message


def test_compact_paths(tmp_path: Path) -> None:
    a = write_chat(tmp_path / "a.json")
    b = write_dataset(tmp_path / "b.jsonl", n=2)
    reps = compact_paths([a, b], tmp_path / "out", options=opts())
    assert [r.count("compacted") for r in reps] == [1, 2]
    assert (tmp_path / "out" / "a.json").exists() and (tmp_path / "out" / "b.jsonl").exists()


# -- the long corpus transcripts ----------------------------------------------------------------------------
LONG = [
    ("claude_code/spotter_ae4a77f8_main.jsonl", {}),
    ("claude_code/codemie_session-624a4a58.jsonl", {}),
    ("codex/localpush_redacted_rollout-2026-02-23T12-54-34-019c8a59.jsonl", {"keep_recent_tokens": 2000}),
    ("codex/codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl", {}),
    ("pi/pi_before-compaction.jsonl", {}),
    ("openai_chat/taubench_gpt-4o-airline.json", {"keep_recent_tokens": 1000, "fallback": True}),
]


def long_params() -> list[Any]:
    return [
        pytest.param(CORPUS / rel, kw, id=rel.split("/")[0] + "/" + rel.split("/")[1][:30],
                     marks=pytest.mark.skipif(not (CORPUS / rel).is_file(), reason="corpus file not present"))
        for rel, kw in LONG
    ]


@pytest.mark.parametrize(("path", "kw"), long_params())
def test_long_corpus_transcript_compacts(path: Path, kw: dict[str, Any], tmp_path: Path) -> None:
    before = sha(path)
    out = tmp_path / path.name
    o = CompactOptions(force=True, **kw)
    ts = list(formats.read(path))
    outcomes = [compact_transcript(t, None, o) for t in ts]
    rep = compact_file(path, out, options=o)
    assert sha(path) == before
    assert rep.count("compacted") >= 1 and rep.count("error") == 0
    assert out.stat().st_size < path.stat().st_size
    assert rep.tokens_after < rep.tokens_before
    back = list(formats.read(out))
    assert len(back) == len(ts) and all(b.format == ts[0].format for b in back)
    for b, a in zip(back, ts, strict=True):
        old = {(p.code, p.message) for p in check_messages(a.messages)}
        assert {(p.code, p.message) for p in check_messages(b.messages)} <= old
    if path.suffix == ".jsonl":  # kept lines are byte-identical
        out_lines = set(out.read_bytes().splitlines())
        for oc in outcomes:
            kept = [m for m in oc.transcript.messages if m.lines and not m.dirty]
            assert kept
            for m in kept:
                for ln in m.lines:
                    assert ln.raw in out_lines
    else:  # a JSON dataset: the kept messages are the same objects, every other field kept
        doc_in = json.loads(path.read_bytes())
        doc_out = json.loads(out.read_bytes())
        for a, b, r in zip(doc_in, doc_out, rep.records, strict=True):
            key = next(k for k in a if isinstance(a[k], list) and a[k] and isinstance(a[k][0], dict) and "role" in a[k][0])
            assert {k: v for k, v in a.items() if k != key} == {k: v for k, v in b.items() if k != key}
            if r.status == "compacted":
                n = r.kept_messages
                assert b[key][-n:] == a[key][-n:]
            else:
                assert b == a


def test_pi_compaction_entry_is_recorded_the_pi_way(tmp_path: Path) -> None:
    path = CORPUS / "pi" / "pi_before-compaction.jsonl"
    if not path.is_file():
        pytest.skip("corpus file not present")
    out = tmp_path / "pi.jsonl"
    rep = compact_file(path, out, options=CompactOptions(force=True))
    r = rep.records[0]
    assert r.incremental  # the file already holds two compactions
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    comps = [(i, x) for i, x in enumerate(lines) if x["type"] == "compaction"]
    assert len(comps) == 1
    i, c = comps[0]
    # pi reads the messages from firstKeptEntryIndex on: the entry itself or the message after it
    assert c["firstKeptEntryIndex"] in (i, i + 1) and lines[i + 1]["type"] == "message"
    assert c["tokensBefore"] == r.context_tokens and c["summary"].startswith("## Goal")
    assert "<modified-files>" in c["summary"] and c["details"]["modifiedFiles"]
    assert lines[0]["type"] == "session"


def test_claude_code_compaction_is_a_boundary_and_summary(tmp_path: Path) -> None:
    path = CORPUS / "claude_code" / "codemie_session-624a4a58.jsonl"
    if not path.is_file():
        pytest.skip("corpus file not present")
    out = tmp_path / "cc.jsonl"
    rep = compact_file(path, out, options=CompactOptions(force=True))
    assert rep.records[0].incremental
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    bounds = [i for i, x in enumerate(lines) if x.get("subtype") == "compact_boundary"]
    assert len(bounds) == 1
    s = lines[bounds[0] + 1]
    assert s["isCompactSummary"] is True and s["message"]["content"].startswith("[Previous conversation summary]")
    assert lines[bounds[0]]["compactMetadata"]["trigger"] == "manual"


def _cc_files() -> list[Any]:
    d = CORPUS / "claude_code"
    files = sorted(d.glob("*.jsonl")) if d.is_dir() else []
    return [pytest.param(p, id=p.name) for p in files] or [pytest.param(None, marks=pytest.mark.skip("corpus absent"))]


@pytest.mark.parametrize("path", _cc_files())
def test_claude_code_resume_chain_reaches_the_summary(path: Path, tmp_path: Path) -> None:
    """Claude Code rebuilds a session by walking parentUuid back from the last line: after
    compaction that walk must go through every kept message, then the summary, then end at
    the compact_boundary (a root), with the kept lines untouched."""
    out = tmp_path / "cc.jsonl"
    rep = compact_file(path, out, options=CompactOptions(force=True, keep_recent_tokens=2000, fallback=True))
    if rep.records[0].status != "compacted":
        pytest.skip(f"not compacted: {rep.records[0].status}")
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    by_uuid = {x["uuid"]: x for x in lines if isinstance(x.get("uuid"), str)}
    last = [x for x in lines if x.get("type") in ("user", "assistant")][-1]
    chain, node = [], last
    while node is not None and node["uuid"] not in {c["uuid"] for c in chain}:
        chain.append(node)
        node = by_uuid.get(node.get("parentUuid"))
    assert chain[-1].get("subtype") == "compact_boundary" and chain[-1]["parentUuid"] is None
    assert chain[-2].get("isCompactSummary") is True
    src = set(path.read_bytes().splitlines())
    after = out.read_bytes().splitlines()[lines.index(chain[-2]) + 1 :]
    assert all(raw in src for raw in after)  # the kept lines are untouched
