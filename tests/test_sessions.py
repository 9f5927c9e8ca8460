"""Issue 12: sessions as their tools write them today (newer Codex rollouts, Codex Desktop prompts,
Claude Code's resume chain after dropping lines, injected user-role lines, Cline exports)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS, SAMPLES, json_items, write_bytes

from ctxtool import formats
from ctxtool.history.cut import cut_transcript
from ctxtool.history.window import window
from ctxtool.model import Message, Record, Transcript, is_injected
from ctxtool.stats.transcript import transcript_stats
from ctxtool.summarizers.heuristic import structured_summary
from ctxtool.tokens.count import get_tokenizer

CC = sorted((CORPUS / "claude_code").glob("*.jsonl")) if (CORPUS / "claude_code").is_dir() else []
CODEX_0150 = SAMPLES / "codex_rollout_0150.jsonl"
DESKTOP = SAMPLES / "codex_desktop_rollout.jsonl"


def read_one(path: Path, fmt: str | None = None) -> Transcript:
    ts = list(formats.read(path, fmt))
    assert len(ts) == 1
    return ts[0]


def user_words(t: Transcript) -> list[str]:
    return [m.text() for m in t.messages if m.role == "user" and not is_injected(m)]


# -- 1. newer Codex rollouts: unknown line types are kept, not refused ----------------------
def test_codex_0150_rollout_is_detected_and_round_trips() -> None:
    raw = CODEX_0150.read_bytes()
    t = read_one(CODEX_0150)
    assert t.format == "codex"
    kinds = [e.kind for e in t.entries if isinstance(e, Record)]
    assert kinds.count("world_state") == 2 and kinds.count("token_usage_record") == 2
    line5 = t.entries[4]
    assert isinstance(line5, Record) and line5.line.lineno == 5 and line5.kind == "world_state"
    assert write_bytes([t]) == raw  # every line, known or not, byte for byte
    calls = [b for m in t.messages for b in m.tool_calls()]
    results = [b for m in t.messages for b in m.tool_results()]
    assert [b.id for b in calls] == [b.id for b in results] == ["call_k1", "call_k2"]
    assert user_words(t) == ["fix the parser: parse() returns None"]  # its event_msg is not a second one
    # with --format codex too, and after a change the unknown lines stay where they were
    t2 = read_one(CODEX_0150, "codex")
    t2.messages[-1].touch()
    out = [o for o in json_items(write_bytes([t2]), "jsonl")]
    assert [o["type"] for o in out] == [json.loads(x)["type"] for x in raw.splitlines()]


def test_codex_unknown_line_types_are_records(tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    lines = [json.loads(x) for x in CODEX_0150.read_bytes().splitlines()]
    lines.insert(3, {"timestamp": "2026-08-13T15:43:40.250Z", "ordinal": 99, "type": "holodeck_state", "payload": [1, 2]})
    p.write_text("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in lines))
    t = read_one(p)
    assert t.format == "codex" and any(isinstance(e, Record) and e.kind == "holodeck_state" for e in t.entries)
    assert write_bytes([t]) == p.read_bytes()


# -- 2. Codex Desktop: prompts that exist only as event_msg user_message ----------------------
def test_desktop_prompts_are_user_messages() -> None:
    t = read_one(DESKTOP)
    prompts = ["add a --verbose flag to the CLI", "now document it in the README", "run the tests"]
    assert user_words(t) == prompts
    st = transcript_stats(t, None, get_tokenizer("heuristic"))
    assert st.figures.by_role["user"].messages == 3 and st.figures.by_role["injected"].messages == 1
    summary = structured_summary(t.messages[:-3])
    assert "add a --verbose flag to the CLI" in summary and "no user request" not in summary
    assert write_bytes([t]) == DESKTOP.read_bytes()
    # a changed prompt is written back as the event it came from
    first = next(m for m in t.messages if m.text() == prompts[0])
    first.content[0].text = "add a --quiet flag"
    first.touch()
    ev = [o for o in json_items(write_bytes([t]), "jsonl") if o["payload"].get("type") == "user_message"]
    assert [o["payload"]["message"] for o in ev] == ["add a --quiet flag", *prompts[1:]]
    assert not any(o["type"] == "response_item" and o["payload"].get("role") == "user"
                   and "quiet" in json.dumps(o) for o in json_items(write_bytes([t]), "jsonl"))


@pytest.mark.skipif(not (CORPUS / "codex").is_dir(), reason="../shared/corpus not present")
def test_codex_cli_prompts_are_counted_once() -> None:
    # Codex CLI writes each prompt twice (response_item, then event_msg): read once
    t = read_one(CORPUS / "codex" / "codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl")
    assert user_words(t) == ["show tools", "let's update the defailt context compart to 90 in env var"]
    t = read_one(CORPUS / "codex" / "localpush_redacted_rollout-2026-02-23T12-54-34-019c8a59.jsonl")
    assert not any(m.lines[0].obj.get("type") == "event_msg" for m in t.messages)


# -- 3. Claude Code: dropping lines keeps the resume chain -----------------------------------
def assert_resume_chain(out: list[dict[str, Any]], tmp: Path) -> None:
    """Every parentUuid is null or an earlier line's uuid (the first line may point outside the
    file, as its source did), and the first prompt after the last chain root is reachable
    from the last line."""
    seen: set[str] = set()
    for i, o in enumerate(out):
        p = o.get("parentUuid")
        assert p is None or p in seen or i == 0, (i, o.get("type"))
        if isinstance(o.get("uuid"), str):
            seen.add(o["uuid"])
    by_uuid = {o["uuid"]: o for o in out if isinstance(o.get("uuid"), str)}
    chain: set[str] = set()
    cur = next((o for o in reversed(out) if isinstance(o.get("uuid"), str)), None)
    while cur is not None and cur["uuid"] not in chain:
        chain.add(cur["uuid"])
        cur = by_uuid.get(cur.get("parentUuid"))  # type: ignore[arg-type]
    tmp.write_text("".join(json.dumps(o) + "\n" for o in out))
    t = read_one(tmp)
    roots = [i for i, o in enumerate(out) if o.get("parentUuid") is None and isinstance(o.get("uuid"), str)]
    start = roots[-1] if roots else 0
    firsts = [m for m in t.messages if m.role == "user" and not is_injected(m) and m.lines
              and isinstance(m.lines[0].lineno, int) and m.lines[0].lineno - 1 >= start]
    if firsts:
        assert firsts[0].id in chain


@pytest.mark.parametrize("path", CC, ids=lambda p: p.name)
def test_window_and_cut_keep_the_resume_chain(path: Path, tmp_path: Path) -> None:
    t = read_one(path)
    r = window(t, max_messages=max(len(t.messages) // 3, 4))
    out = json_items(write_bytes([t]), "jsonl")
    assert_resume_chain(out, tmp_path / "w.jsonl")
    if r.dropped:
        orig = {json.loads(x).get("uuid") for x in path.read_bytes().splitlines()}
        assert {o.get("parentUuid") for o in out} <= orig | {None}
    t = read_one(path)
    cut_transcript(t, keep_recent_tokens=2000, apply=True)
    assert_resume_chain(json_items(write_bytes([t]), "jsonl"), tmp_path / "c.jsonl")


# -- 4. injected user-role lines are not the user's words ------------------------------------
@pytest.mark.parametrize("name", ["codemie_session-624a4a58.jsonl", "spotter_ae4a77f8_main.jsonl"])
def test_skill_documents_are_not_requests(name: str) -> None:
    path = CORPUS / "claude_code" / name
    if not path.is_file():
        pytest.skip("../shared/corpus not present")
    t = read_one(path)
    injected = [m for m in t.messages if is_injected(m)]
    assert injected and all(m.role == "user" for m in injected)
    summary = structured_summary(t.messages)
    assert "Base directory for this skill" not in summary
    st = transcript_stats(t, None, get_tokenizer("heuristic"))
    assert st.figures.by_role["injected"].messages == len(injected)
    assert st.figures.by_role["user"].messages == len(user_words(t))


def test_injected_classifier() -> None:
    from ctxtool.model import KIND_INJECTED, Block, Metadata

    def u(text: str, **kw: Any) -> Message:
        return Message("user", [Block("text", text=text)], **kw)

    assert is_injected(u("<local-command-stdout>ok</local-command-stdout>"))
    assert is_injected(u("Caveat: The messages below were generated by the user while running local commands. ..."))
    assert is_injected(u("<system-reminder>x</system-reminder>"))
    assert is_injected(u("anything", metadata=Metadata(kind=KIND_INJECTED)))
    assert is_injected(u("Base directory for this skill: /x"))
    assert not is_injected(u("fix the <system-reminder> parsing"))
    assert not is_injected(Message("assistant", [Block("text", text="<system-reminder>")]))


# -- 5. Cline / Roo exports: tool calls and results travel as text -------------------------------
CLINE = SAMPLES / "cline_api_conversation_history.json"


def test_cline_protocol_is_read() -> None:
    t = read_one(CLINE)
    assert t.format == "cline"
    calls = [b for m in t.messages for b in m.tool_calls()]
    results = [b for m in t.messages for b in m.tool_results()]
    assert [b.name for b in calls] == ["read_file", "replace_in_file", "execute_command", "attempt_completion"]
    assert calls[0].arguments == {"path": "src/math.ts"}
    assert [r.id for r in results] == [c.id for c in calls[:3]]  # paired by position
    assert results[0].text.startswith("export function add(a: string")
    assert results[2].text.startswith("\nCommand executed.")
    # unchanged: the same JSON; every message changed: still the same JSON
    assert json.loads(write_bytes([t])) == json.loads(CLINE.read_bytes())
    for m in t.messages:
        m.touch()
    assert json.loads(write_bytes([t])) == json.loads(CLINE.read_bytes())


def test_cline_validate_repair_truncate_restore(tmp_path: Path) -> None:
    from ctxtool.history.validate import check_messages

    t = read_one(CLINE)
    kinds = [p.code for p in check_messages(t.messages)]
    # only the last attempt_completion waits for the user; no orphan, nothing unanswered before it
    assert all(k == "trailing_tool_calls" for k in kinds)
    # truncate changes the result text only; the header and the other blocks stay
    t.messages[2].content[0].text = "export function add(...)"
    t.messages[2].touch()
    out = json.loads(write_bytes([t]))
    assert out[2]["content"][0] == {"type": "text", "text": "[read_file for 'src/math.ts'] Result:"}
    assert out[2]["content"][1] == {"type": "text", "text": "export function add(...)"}
    assert out[2]["content"][2]["text"].startswith("<environment_details>")
    # a changed call is written back as a tag
    call = t.messages[5].tool_calls()[0]
    call.arguments = {"command": "npm test -- --run", "requires_approval": "false"}
    t.messages[5].touch()
    p = tmp_path / "c.json"
    p.write_bytes(write_bytes([t]))
    back = read_one(p)
    assert back.messages[5].tool_calls()[0].arguments == call.arguments
    assert back.messages[2].tool_results()[0].text == "export function add(...)"


def test_cline_native_tool_use_answered_in_text(tmp_path: Path) -> None:
    """Newer Cline histories: native tool_use blocks, results still as '[tool] Result:' text
    (the shape of the public mike4567/MRA04242026 api_conversation_history.json)."""
    from ctxtool.history.validate import check_messages

    msgs = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nsummarize the repo\n</task>"}], "ts": 1},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tooluse_1", "name": "use_subagents",
                                           "input": {"prompt_1": "read package.json"}, "call_id": "tooluse_1"}],
         "modelInfo": {"modelId": "m", "providerId": "p", "mode": "plan"}, "ts": 2},
        {"role": "user", "content": [{"type": "text", "text": "[subagents] Result:\nSubagent results:\nTotal: 1"},
                                     {"type": "text", "text": "<environment_details>\n# Current Mode\nPLAN MODE\n</environment_details>"}],
         "ts": 3},
        {"role": "assistant", "content": [{"type": "text", "text": "The repo is a Next.js app."}], "ts": 4},
    ]
    p = tmp_path / "api_conversation_history.json"
    p.write_text(json.dumps(msgs, separators=(",", ":")))
    t = read_one(p)
    assert t.format == "cline"
    assert [r.id for m in t.messages for r in m.tool_results()] == ["tooluse_1"]
    assert check_messages(t.messages) == []
    for m in t.messages:
        m.touch()
    assert json.loads(write_bytes([t])) == msgs
