"""archive (seed 000 tool-result archiving): unit behaviour, generated transcripts, corpus."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import strategies
from conftest import SAMPLES, all_transcript_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool import formats
from ctxtool.history import archive as ar
from ctxtool.history.pairing import pair
from ctxtool.io.events import EventLog
from ctxtool.model import (
    KIND_TOOL_RESULT_ARCHIVED,
    KIND_TOOL_SUMMARY,
    Block,
    Message,
    Metadata,
    Transcript,
)

# -- a small generator of agent transcripts ---------------------------------------------------


@st.composite
def agent_messages(draw: st.DrawFn, multi_results: bool = True) -> list[Message]:
    """system, then turns of: user text, assistant calls (0-3), their results, a reply."""
    msgs = [Message("system", [Block("text", text="You are an agent.")])]
    n_turns = draw(st.integers(1, 7))
    call_no = 0
    text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
    for _ in range(n_turns):
        msgs.append(Message("user", [Block("text", text=draw(text) or "go")]))
        for _step in range(draw(st.integers(0, 3))):
            k = draw(st.integers(1, 3))
            calls = []
            for _c in range(k):
                call_no += 1
                calls.append(Block("tool_call", id=f"call_{call_no}", name=draw(st.sampled_from(["read", "bash", "grep"])),
                                   arguments={"path": f"f{call_no}.py"}))
            msgs.append(Message("assistant", calls))
            results = [
                Block("tool_result", id=c.id, text=draw(text) * draw(st.integers(1, 30)), is_error=draw(st.booleans()))
                for c in calls
            ]
            meta = lambda: Metadata(  # noqa: E731
                user_visible=draw(st.sampled_from([None, None, False])),
                agent_visible=draw(st.sampled_from([None, None, None, False])),
            )
            if multi_results and draw(st.booleans()):
                msgs.append(Message("tool", results, metadata=meta()))
            else:
                for r in results:
                    msgs.append(Message("tool", [r], metadata=meta()))
        msgs.append(Message("assistant", [Block("text", text=draw(text) or "done")]))
    return msgs


def _roundtrip_file(tmp: Path, msgs: list[Message], fmt: str) -> Path:
    t = Transcript(fmt, entries=list(msgs))
    p = tmp / f"in.{fmt}.jsonl"
    buf = io.BytesIO()
    formats.write([t], buf)
    p.write_bytes(buf.getvalue())
    return p


def _visible(msgs: list[Message]) -> int:
    return ar.visible_results(msgs)


def _check_archive(inp: Transcript, out: Transcript, cutoff: int, raw_lines: bool) -> None:
    a, b = inp.messages, out.messages
    n_summ = sum(1 for m in b if m.metadata.kind == KIND_TOOL_SUMMARY) - sum(
        1 for m in a if m.metadata.kind == KIND_TOOL_SUMMARY
    )
    archived_now = [
        i for i, (x, y) in enumerate(zip(a, b, strict=False))
        if x.agent_visible and not y.agent_visible
    ]
    # one summary exactly when something was archived, appended as the last message
    assert n_summ == (1 if archived_now else 0)
    if archived_now:
        s = b[-1]
        assert s.metadata.kind == KIND_TOOL_SUMMARY and s.role == "user"
        assert s.agent_visible and not s.user_visible
        assert len(s.text()) <= ar.HEURISTIC_MAX_CHARS
        assert len(b) == len(a) + 1
    else:
        assert len(b) == len(a)
    # at most `cutoff` results stay visible
    assert _visible(b) <= cutoff
    if not archived_now:
        assert _visible(b) == _visible(a)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        assert [blk.to_json() for blk in x.content] == [blk.to_json() for blk in y.content]
        if i in archived_now:
            assert y.metadata.kind == KIND_TOOL_RESULT_ARCHIVED
            assert y.user_visible == x.user_visible  # user visibility kept
            assert ar.is_result_message(x)
        else:
            # kept messages are byte-identical to the input
            assert x.metadata.to_json() == y.metadata.to_json()
            if raw_lines:
                assert [ln.raw for ln in x.lines] == [ln.raw for ln in y.lines]
            else:
                assert [ln.obj for ln in x.lines] == [ln.obj for ln in y.lines]
    # no orphan call or result: the pairing of the whole file is what it was
    pa, pb = pair(a), pair(b)
    assert len(pb.orphans) == len(pa.orphans) and len(pb.duplicate_results) == len(pa.duplicate_results)
    assert len(pb.unanswered()) == len(pa.unanswered())
    # in the agent's view, no visible result lost its call: calls are never hidden
    calls = lambda ms: [blk.id for m in ms if m.agent_visible for blk in m.tool_calls()]  # noqa: E731
    assert calls(b) == calls(a)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msgs=agent_messages(), cutoff=st.integers(0, 6), fmt=st.sampled_from(["ctxtool", "openai"]))
def test_archive_generated(tmp_path: Path, msgs: list[Message], cutoff: int, fmt: str) -> None:
    src = _roundtrip_file(tmp_path, msgs, fmt)
    out = tmp_path / f"out.{fmt}.jsonl"
    before = src.read_bytes()
    rep = ar.archive_file(src, out, cutoff=cutoff)
    assert src.read_bytes() == before  # the input is never modified
    inp = next(formats.read(src))
    got = next(formats.read(out))
    assert got.format == inp.format
    _check_archive(inp, got, cutoff, raw_lines=fmt == "ctxtool")
    assert rep.results[0].visible_after == _visible(got.messages)


@settings(max_examples=30, deadline=None)
@given(msgs=strategies.transcripts(huge=False), cutoff=st.integers(0, 5),
       fmt=st.sampled_from(["openai", "ctxtool"]))
def test_archive_messy_transcripts(msgs: list[Message], cutoff: int, fmt: str) -> None:
    """The shared generator's transcripts (missing, duplicated and orphan results, unanswered
    calls), written as JSONL, archived, written and read back."""
    build = strategies.openai_transcript if fmt == "openai" else strategies.canonical_transcript
    inp = build(msgs)
    data = strategies.jsonl_bytes(inp)
    t = strategies._read_bytes(data, fmt)
    ar.archive(t, cutoff=cutoff)
    out = strategies._read_bytes(strategies.jsonl_bytes(t), fmt)
    _check_archive(strategies._read_bytes(data, fmt), out, cutoff, raw_lines=True)


@settings(max_examples=25, deadline=None)
@given(msgs=agent_messages(), cutoff=st.integers(0, 4))
def test_archive_messages_pure(msgs: list[Message], cutoff: int) -> None:
    snapshot = [(m.metadata.to_json(), m.dirty) for m in msgs]
    new, res = ar.archive_messages(msgs, cutoff=cutoff)
    assert [(m.metadata.to_json(), m.dirty) for m in msgs] == snapshot
    if res.changed:
        assert ar.visible_results(new) <= cutoff
        assert new[-1].metadata.kind == KIND_TOOL_SUMMARY
    else:
        assert new == msgs


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=3000), limit=st.integers(1, 1500))
def test_clip_head_tail(text: str, limit: int) -> None:
    out = ar.clip_head_tail(text, limit)
    assert len(out) <= limit
    if len(text) <= limit:
        assert out == text
    elif limit >= 60:
        assert "chars clipped" in out
        head = out.split("\n[... ")[0]
        assert text.startswith(head)


# -- unit behaviour --------------------------------------------------------------------------


def _chat(n_results: int) -> Transcript:
    msgs = [Message("user", [Block("text", text="start")])]
    for k in range(n_results):
        msgs.append(Message("assistant", [Block("tool_call", id=f"c{k}", name="bash", arguments={"command": f"echo {k}"})]))
        msgs.append(Message("tool", [Block("tool_result", id=f"c{k}", text=f"output {k}\n" * (k + 1))]))
    msgs.append(Message("assistant", [Block("text", text="done")]))
    return Transcript("ctxtool", entries=list(msgs))


def test_archive_oldest_first_until_cutoff() -> None:
    t = _chat(14)
    ev = EventLog()
    r = ar.archive(t, cutoff=10, events=ev)
    assert r.visible_before == 14 and r.visible_after == 10
    assert [a.call_ids for a in r.archived] == [["c0"], ["c1"], ["c2"], ["c3"]]
    ms = t.messages
    assert all(not ms[2 + 2 * k].agent_visible for k in range(4))
    assert all(ms[2 + 2 * k].dirty for k in range(4))
    assert ms[10].agent_visible and not ms[10].dirty
    summary = ms[-1]
    assert summary is t.entries[-1]
    assert summary.metadata.to_json() == {"agent_visible": True, "user_visible": False, "kind": "tool_summary"}
    assert summary.text().startswith(ar.SUMMARY_PREFIX)
    assert "bash(echo 0)" in summary.text() and "bash(echo 3)" in summary.text()
    assert ev.count("tool_result_archived") == 4 and ev.count("tool_summary") == 1


def test_archive_nothing_when_under_cutoff_and_off() -> None:
    t = _chat(3)
    r = ar.archive(t, cutoff=3)
    assert not r.changed and len(t.messages) == 8
    t = _chat(12)
    r = ar.archive(t, cutoff=1, strategy="off")
    assert not r.changed and r.strategy_used == "off" and ar.visible_results(t.messages) == 12


def test_archive_keeps_user_visibility() -> None:
    t = _chat(3)
    t.messages[2].metadata = Metadata(user_visible=False)
    ar.archive(t, cutoff=1)
    assert t.messages[2].metadata.to_json() == {"agent_visible": False, "user_visible": False, "kind": "tool_result_archived"}
    assert t.messages[4].metadata.to_json() == {"agent_visible": False, "kind": "tool_result_archived"}


def test_archive_rerun_is_stable() -> None:
    t = _chat(6)
    ar.archive(t, cutoff=2)
    r2 = ar.archive(t, cutoff=2)
    assert not r2.changed
    assert sum(1 for m in t.messages if m.metadata.kind == KIND_TOOL_SUMMARY) == 1


def test_heuristic_summary_clipped_to_800() -> None:
    t = _chat(60)
    r = ar.archive(t, cutoff=0)
    assert r.summary is not None and len(r.summary) <= 800
    assert "more archived results" in r.summary and "bash(echo 0)" in r.summary and "bash(echo 59)" in r.summary


def test_llm_strategy_clips_input_and_output() -> None:
    seen: list[str] = []

    def summarize(prompt: str) -> str:
        seen.append(prompt)
        return "x" * 5000

    t = _chat(80)
    r = ar.archive(t, cutoff=2, strategy="llm", summarize=summarize)
    assert r.strategy_used == "llm" and r.fallback is None
    assert len(seen) == 1 and len(seen[0]) <= ar.LLM_INPUT_MAX_CHARS
    assert r.summary is not None and len(r.summary) <= ar.LLM_OUTPUT_MAX_CHARS
    assert r.summary.startswith(ar.SUMMARY_PREFIX)


def test_llm_strategy_falls_back_to_heuristic() -> None:
    def broken(prompt: str) -> str:
        raise RuntimeError("model unavailable")

    r = ar.archive(_chat(5), cutoff=1, strategy="llm", summarize=broken)
    assert r.strategy_used == "heuristic" and r.fallback and "model unavailable" in r.fallback
    r = ar.archive(_chat(5), cutoff=1, strategy="llm")
    assert r.strategy_used == "heuristic" and r.fallback == "no summarizer configured"


def test_mixed_user_message_is_not_archived() -> None:
    t = next(formats.read(SAMPLES / "anthropic_request.json"))
    mixed = [m for m in t.messages if m.tool_results() and not ar.is_result_message(m)]
    assert mixed
    ar.archive(t, cutoff=0)
    assert all(m.agent_visible for m in mixed)


def test_bad_strategy_and_cutoff() -> None:
    from ctxtool.errors import CtxtoolError

    with pytest.raises(CtxtoolError):
        ar.archive(_chat(2), strategy="magic")
    with pytest.raises(CtxtoolError):
        ar.archive(_chat(2), cutoff=-1)


# -- every sample and corpus file ------------------------------------------------------------


@pytest.mark.parametrize("path", all_transcript_params())
def test_archive_every_file(path: Path, tmp_path: Path) -> None:
    out = tmp_path / ("out" + path.suffix)
    before = path.read_bytes()
    rep = ar.archive_file(path, out, cutoff=3)
    assert path.read_bytes() == before
    ins = list(formats.read(path))
    outs = list(formats.read(out, ins[0].format))
    assert len(ins) == len(outs) == len(rep.results)
    jsonl = path.suffix == ".jsonl" and ins[0].extra.get("layout") == "entries_jsonl"
    for a, b, r in zip(ins, outs, rep.results, strict=True):
        assert r.visible_after <= 3
        _check_archive(a, b, 3, raw_lines=jsonl)
