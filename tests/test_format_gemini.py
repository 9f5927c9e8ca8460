"""Gemini CLI's JSONL session files: read as Gemini's own loader reads them, written back
byte for byte, and changed so that Gemini's loader sees exactly the change."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from conftest import SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool import formats
from ctxtool.history.cut import cut_transcript
from ctxtool.history.validate import check_messages
from ctxtool.tool_outputs import files as tools_ops
from ctxtool.tool_outputs.algorithms import Limits

SAMPLE = SAMPLES / "gemini-jsonl_session.jsonl"
TIGHT = Limits(max_lines=3, max_bytes=120, max_chars=120, spill_threshold=40_000, max_line_length=60)


def gemini_load(data: bytes) -> list[dict[str, Any]]:
    """The conversation Gemini CLI's ``loadConversationRecord`` builds from a JSONL file
    (a JavaScript Map: ``set`` on a known id keeps its place), written here from its source
    independently of ctxtool's reader."""
    state: dict[str, dict[str, Any]] = {}
    for raw in data.splitlines():
        if not raw.strip():
            continue
        r = json.loads(raw)
        if isinstance(r.get("$rewindTo"), str):
            if r["$rewindTo"] in state:
                keys = list(state)
                for k in keys[keys.index(r["$rewindTo"]):]:
                    del state[k]
            else:
                state.clear()
        elif isinstance(r.get("id"), str):
            state[r["id"]] = r
        elif isinstance(r.get("$set"), dict):
            if isinstance(r["$set"].get("messages"), list):
                state.clear()
                for m in r["$set"]["messages"]:
                    if isinstance(m, dict) and isinstance(m.get("id"), str):
                        state[m["id"]] = m
        elif isinstance(r.get("sessionId"), str) and isinstance(r.get("projectHash"), str):
            for m in r.get("messages") or []:
                if isinstance(m, dict) and isinstance(m.get("id"), str):
                    state[m["id"]] = m
    return list(state.values())


def _dumps(o: Any) -> bytes:
    return json.dumps(o, separators=(",", ":"), ensure_ascii=False).encode()


def _results(recs: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in recs:
        for tc in r.get("toolCalls") or []:
            for part in tc.get("result") or []:
                out.append(json.dumps(part["functionResponse"]["response"]))
    return out


text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
long_text = st.lists(text, min_size=1, max_size=12).map("\n".join)


@st.composite
def sessions(draw: Any) -> list[dict[str, Any]]:
    """JSONL lines as Gemini CLI's chatRecordingService appends them: records written whole
    again when they change, ``$set`` updates, checkpoints and rewinds."""
    lines: list[dict[str, Any]] = [{"sessionId": "s1", "projectHash": "p1", "startTime": "t0", "lastUpdated": "t0"}]
    live: list[dict[str, Any]] = []
    n = 0
    for _ in range(draw(st.integers(1, 5))):
        n += 1
        u = {"id": f"u{n}", "timestamp": "t", "type": "user", "content": [{"text": draw(text)}]}
        lines.append(u)
        live.append(u)
        lines.append({"$set": {"lastUpdated": f"t{n}"}})
        g: dict[str, Any] = {"id": f"g{n}", "timestamp": "t", "type": "gemini", "content": draw(text), "thoughts": [], "model": "m"}
        lines.append(dict(g))
        calls = []
        for k in range(draw(st.integers(0, 3))):  # each batch of calls writes the record again
            cid = f"c{n}-{k}"
            calls.append({"id": cid, "name": "shell", "args": {"command": draw(text)},
                          "result": [{"functionResponse": {"id": cid, "name": "shell", "response": {"output": draw(long_text)}}}],
                          "status": "success", "timestamp": "t"})
            g = {**g, "toolCalls": list(calls)}
            lines.append(g)
        if draw(st.booleans()):
            g = {**g, "tokens": {"input": 10, "output": 2, "cached": 0, "total": 12}}
            lines.append(g)
        live.append(g)
        what = draw(st.sampled_from(["none", "none", "rewind", "checkpoint", "info"]))
        if what == "rewind" and len(live) > 2:
            at = draw(st.integers(1, len(live) - 1))
            lines.append({"$rewindTo": live[at]["id"]})
            live = live[:at]
        elif what == "checkpoint":
            lines.append({"$set": {"messages": list(live), "lastUpdated": "tc"}})
        elif what == "info":
            lines.append({"id": f"i{n}", "timestamp": "t", "type": "info", "content": draw(text)})
    return lines


def _write(path: Path, lines: list[dict[str, Any]]) -> bytes:
    data = b"".join(_dumps(o) + b"\n" for o in lines)
    path.write_bytes(data)
    return data


def _model(ts: list[Any]) -> list[Any]:
    return [[(m.role, [b.to_json() for b in m.content]) for m in t.messages] for t in ts]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=sessions())
def test_generated_sessions_round_trip_and_read_as_gemini_does(tmp_path: Path, lines: list[dict[str, Any]]) -> None:
    src = tmp_path / "session.jsonl"
    data = _write(src, lines)
    ts = list(formats.read(src))
    assert [t.format for t in ts] == ["gemini-jsonl"]
    state = gemini_load(data)
    # the messages are the latest state of each record, in Gemini's order
    heads = [m.id for m in ts[0].messages if m.role != "tool"]
    assert heads == [r["id"] for r in state if r["type"] in ("user", "gemini")]
    assert [b.text for m in ts[0].messages for b in m.content if b.type == "tool_result"] == [
        json.loads(x)["output"] for x in _results(state)]
    assert not check_messages(ts[0].messages)
    # byte for byte, directly and through canonical JSONL
    out = io.BytesIO()
    formats.write(ts, out)
    assert out.getvalue() == data
    canon = tmp_path / "c.jsonl"
    formats.write_path(ts, canon, "ctxtool")
    back = io.BytesIO()
    formats.write(list(formats.read(canon)), back, "gemini-jsonl")
    assert [json.loads(x) for x in back.getvalue().splitlines()] == [json.loads(x) for x in data.splitlines()]
    # every message written anew: Gemini sees the same conversation
    for m in ts[0].messages:
        m.touch()
    again = io.BytesIO()
    formats.write(ts, again)
    assert gemini_load(again.getvalue()) == state
    src.write_bytes(again.getvalue())
    assert _model(list(formats.read(src))) == _model(ts)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=sessions())
def test_truncate_changes_what_gemini_sees_and_restore_gives_the_file_back(tmp_path: Path, lines: list[dict[str, Any]]) -> None:
    src = tmp_path / "session.jsonl"
    data = _write(src, lines)
    short, back, cache = tmp_path / "short.jsonl", tmp_path / "back.jsonl", tmp_path / "cache"
    rep = tools_ops.truncate_file(str(src), str(short), limits=TIGHT, include="all", cache=cache)
    before, after = gemini_load(data), gemini_load(short.read_bytes())
    assert [r["id"] for r in after] == [r["id"] for r in before]
    assert len(_results(after)) == len(_results(before))
    if rep.truncated:
        assert _results(after) != _results(before)
        # no stale copy of a cut output is left in an older version of its record
        for r in before:
            for tc in r.get("toolCalls") or []:
                out = tc["result"][0]["functionResponse"]["response"]["output"]
                if len(out) > 400:
                    assert _dumps(out) not in short.read_bytes()
    tools_ops.restore_file(str(short), str(back), cache=cache)
    assert back.read_bytes() == data


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=sessions(), keep=st.integers(1, 6))
def test_dropped_messages_leave_with_every_version(tmp_path: Path, lines: list[dict[str, Any]], keep: int) -> None:
    """A cut drops records: Gemini must not find an older version of one (or its copy in a
    checkpoint) and show it again."""
    src = tmp_path / "session.jsonl"
    _write(src, lines)
    t = next(formats.read(src))
    cut_transcript(t, keep_recent=keep)
    out = io.BytesIO()
    formats.write([t], out)
    seen = gemini_load(out.getvalue())
    assert [r["id"] for r in seen if r["type"] in ("user", "gemini")] == [m.id for m in t.messages if m.role != "tool"]


def test_sample_reads_as_gemini_shows_it() -> None:
    data = SAMPLE.read_bytes()
    t = next(formats.read(SAMPLE))
    assert t.format == "gemini-jsonl" and t.id == "8d3c2a10-4b5e-4f6a-9c7d-1e2f3a4b5c6d"
    state = gemini_load(data)
    assert [m.id for m in t.messages if m.role != "tool"] == [r["id"] for r in state if r["type"] != "info"]
    # the rewound prompt is not a message; the record written twice is one message
    assert "0d9e1c2b-4444-4a2b-8c3d-000000000004" not in [m.id for m in t.messages]
    assert [m.role for m in t.messages] == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    first = t.messages[1]
    assert [b.name for b in first.content if b.type == "tool_call"] == ["run_shell_command", "read_file"]
    assert t.messages[6].content[1].is_error  # status "error"
    assert t.messages[3].usage is not None and t.messages[3].usage.input == 10480 - 8800


def test_sample_converts_to_the_json_session_format(tmp_path: Path) -> None:
    out = tmp_path / "session.json"
    formats.write_path(list(formats.read(SAMPLE)), out, "gemini")
    doc = json.loads(out.read_bytes())
    assert [m["type"] for m in doc["messages"]] == ["user", "gemini", "gemini", "user", "gemini", "gemini"]
    # the session's fields as Gemini's loader has them: the metadata line, then every $set
    assert list(doc) == ["sessionId", "projectHash", "startTime", "lastUpdated", "messages", "summary", "kind"]
    assert doc["lastUpdated"] == "2026-05-12T08:32:03.001Z" and doc["summary"].startswith("Fix the nightly")
    assert _model(list(formats.read(out))) == _model(list(formats.read(SAMPLE)))


def test_other_formats_become_sessions_gemini_can_load(tmp_path: Path) -> None:
    src = SAMPLES / "openai_chat.json"
    out = tmp_path / "s.jsonl"
    formats.write_path(list(formats.read(src)), out, "gemini-jsonl")
    lines = [json.loads(x) for x in out.read_bytes().splitlines()]
    assert isinstance(lines[0]["sessionId"], str) and isinstance(lines[0]["projectHash"], str)
    state = gemini_load(out.read_bytes())
    t = next(formats.read(out))
    assert t.format == "gemini-jsonl" and len(state) == len([m for m in t.messages if m.role != "tool"])
    assert all(isinstance(r["id"], str) for r in state)
    assert not check_messages(t.messages)
    again = tmp_path / "again.jsonl"
    formats.write_path(list(formats.read(out)), again)
    assert again.read_bytes() == out.read_bytes()


def test_numbers_keep_their_text_in_unchanged_and_changed_records(tmp_path: Path) -> None:
    lines = [b'{"sessionId":"s","projectHash":"p"}',
             b'{"id":"u1","timestamp":"t","type":"user","content":"hi","score":1.50}',
             b'{"id":"g1","timestamp":"t","type":"gemini","content":"a","tokens":{"input":10,"output":2,"cached":0,"total":12},"t":1e-7}',
             b'{"id":"g1","timestamp":"t","type":"gemini","content":"ab","tokens":{"input":10,"output":2,"cached":0,"total":12},"t":1e-7}']
    src = tmp_path / "s.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    t = next(formats.read(src))
    out = io.BytesIO()
    formats.write([t], out)
    assert out.getvalue() == src.read_bytes()
    t.messages[1].content[0].text = "changed"
    t.messages[1].touch()
    out = io.BytesIO()
    formats.write([t], out)
    assert b'"score":1.50' in out.getvalue() and b'"t":1e-7' in out.getvalue() and b'"changed"' in out.getvalue()
