"""The claude-code format: detection, lossless round trips, merging of split API messages, rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CORPUS, SAMPLES, corpus_files, json_items, write_bytes

from ctxtool import formats
from ctxtool.errors import CtxtoolError
from ctxtool.formats.base import ErrorPolicy
from ctxtool.formats.claude_code import FORMAT
from ctxtool.io.jsonl import Source, open_source
from ctxtool.model import KIND_COMPACTION_SUMMARY, Block, Compaction, Cont, Message, Record, Transcript, Usage

SAMPLE = SAMPLES / "claude_code_session.jsonl"

# distinct API messages (assistant message.id values) per corpus file, from PROVENANCE.md
DISTINCT_API_MSGS = {
    "spotter_ae4a77f8_main.jsonl": 217,
    "spotter_ae4a77f8_subagent_acompact-946d2b.jsonl": 1,
    "spotter_ae4a77f8_subagent_aac57f5.jsonl": 3,
    "spotter_tool_heavy.jsonl": 4,
    "codemie_session-624a4a58.jsonl": 55,
    "codemie_session-9eda1058.jsonl": 5,
    "codemie_incremental-subagents_turn-2.jsonl": 11,
    "codemie_incremental-subagents_turn-2_agent-a485154.jsonl": 6,
    "claude_code_session.jsonl": 8,  # the sample
}


def cc_params() -> list:  # type: ignore[type-arg]
    params = [pytest.param(SAMPLE, id="samples/claude_code_session.jsonl")]
    files = sorted((CORPUS / "claude_code").glob("*.jsonl")) if (CORPUS / "claude_code").is_dir() else []
    if not files:
        params.append(pytest.param(None, marks=pytest.mark.skip(reason="../shared/corpus not present")))
    return params + [pytest.param(p, id=f"claude_code/{p.name}") for p in files]


def read_one(path: Path | str, fmt: str | None = None) -> Transcript:
    ts = list(formats.read(path, fmt))
    assert len(ts) == 1
    return ts[0]


def read_bytes(data: bytes, tmp_path: Path, name: str = "x.jsonl", fmt: str | None = None) -> Transcript:
    p = tmp_path / name
    p.write_bytes(data)
    return read_one(p, fmt)


def lines_of(p: Path) -> list[bytes]:
    return [ln for ln in p.read_bytes().splitlines() if ln.strip()]


def blocks_sig(m: Message) -> list[tuple]:  # type: ignore[type-arg]
    return [(b.type, b.text, b.id, b.name, b.arguments, b.is_error) for b in m.content]


# -- detection and lossless round trips ---------------------------------------------
@pytest.mark.parametrize("path", cc_params())
def test_detected_as_claude_code(path: Path) -> None:
    assert formats.detect(open_source(path)).name == "claude-code"


@pytest.mark.parametrize("path", cc_params())
def test_unchanged_write_is_byte_identical(path: Path) -> None:
    t = read_one(path)
    assert t.format == "claude-code"
    out = write_bytes([t])
    assert out.splitlines() == lines_of(path)


@pytest.mark.parametrize("path", cc_params())
def test_via_canonical_and_back(path: Path, tmp_path: Path) -> None:
    canon = write_bytes(formats.read(path), "ctxtool")
    back = read_bytes(canon, tmp_path, "canon.jsonl")
    assert back.format == "ctxtool"
    out = write_bytes([back], "claude-code")
    assert json_items(out, "jsonl") == [json.loads(ln) for ln in lines_of(path)]


@pytest.mark.parametrize("path", cc_params())
def test_distinct_api_messages(path: Path) -> None:
    t = read_one(path)
    keys = {m.usage_key for m in t.messages if m.role == "assistant"}
    assert None not in keys
    assert len(keys) == DISTINCT_API_MSGS[path.name]
    # messages sharing an API call share one Usage (the final figures of that call)
    by_key: dict[str, Usage] = {}
    for m in t.messages:
        if m.usage_key is not None and m.usage is not None:
            assert by_key.setdefault(m.usage_key, m.usage) is m.usage


@pytest.mark.parametrize("path", cc_params())
def test_dirty_render_is_faithful(path: Path, tmp_path: Path) -> None:
    t = read_one(path)
    before = [(m.role, blocks_sig(m), m.metadata.kind, m.usage_key) for m in t.messages]
    for m in t.messages:
        m.touch()
    back = read_bytes(write_bytes([t]), tmp_path)
    assert [(m.role, blocks_sig(m), m.metadata.kind, m.usage_key) for m in back.messages] == before
    # records are untouched, but for a parent that was a later line of a message now written
    # as one line: they point at the line written instead (the resume chain holds)
    def unlinked(o: dict) -> dict:  # type: ignore[type-arg]
        return {k: v for k, v in o.items() if k not in ("parentUuid", "ctxtool")}

    assert [unlinked(e.line.obj) for e in back.entries if isinstance(e, Record)] == [
        unlinked(e.line.obj) for e in t.entries if isinstance(e, Record)
    ]
    assert_chain(json_items(write_bytes([back]), "jsonl"))


def assert_chain(objs: list) -> None:  # type: ignore[type-arg]
    """Every parentUuid is null, outside the file as the source had it, or an earlier line's uuid."""
    seen: set[str] = set()
    for o in objs:
        p = o.get("parentUuid")
        assert p is None or p in seen or o is objs[0], o
        if isinstance(o.get("uuid"), str):
            seen.add(o["uuid"])


@pytest.mark.parametrize("path", cc_params())
def test_fresh_render_is_faithful(path: Path, tmp_path: Path) -> None:
    """Messages with no source lines (as from another format) render to lines that read back the same."""
    t = read_one(path)
    before = [(m.role, blocks_sig(m), m.metadata.kind, m.extra.get("is_meta", False)) for m in t.messages]
    for m in t.messages:
        m.lines = []
        m.dirty = True
    out = write_bytes([t])
    assert out == write_bytes([t])  # deterministic
    back = read_bytes(out, tmp_path)
    after = [(m.role, blocks_sig(m), m.metadata.kind, m.extra.get("is_meta", False)) for m in back.messages]
    assert after == before
    sid = t.extra["session"]["sessionId"]
    for o in json_items(out, "jsonl"):
        if o.get("type") in ("user", "assistant"):
            assert o["sessionId"] == sid
            assert o["uuid"]


# -- reading details --------------------------------------------------------------------
def test_sample_structure() -> None:
    t = read_one(SAMPLE)
    assert t.id == "3b8f2c1d-7e4a-4c9b-a2d5-9f6e1b0c8a47"
    assert t.extra["session"]["cwd"] == "/home/dev/projects/ledgerlite"
    first = t.messages[1]  # after the user request
    assert first.role == "assistant"
    assert [b.type for b in first.content] == ["thinking", "text", "tool_call", "tool_call"]
    assert len(first.lines) == 4
    assert first.id == first.lines[0].obj["uuid"]
    assert first.content[0].extra and first.content[0].extra["signature"].startswith("Eo")
    # usage: the final figures of the call (output_tokens grows line by line)
    assert first.usage == Usage(input=3, output=214, cache_creation=7512, cache_read=17940)
    # continuation entries sit where the later lines were, before the interleaved progress line
    kinds = [type(e).__name__ for e in t.entries[:8]]
    assert kinds == ["Record", "Message", "Message", "Cont", "Cont", "Cont", "Record", "Message"]
    tool = t.entries[7]
    assert isinstance(tool, Message) and tool.role == "tool"
    assert tool.content[0].is_error and tool.content[0].text.startswith("Exit code 1")
    records = [e.kind for e in t.entries if isinstance(e, Record)]
    assert "progress" in records and "file-history-snapshot" in records and "system:turn_duration" in records
    big = max((b for m in t.messages for b in m.tool_results()), key=lambda b: len(b.text))
    assert big.text.count("\n") > 200


def test_corpus_flags() -> None:
    p = CORPUS / "claude_code" / "codemie_session-624a4a58.jsonl"
    if not p.exists():
        pytest.skip("../shared/corpus not present")
    t = read_one(p)
    summaries = [m for m in t.messages if m.metadata.kind == KIND_COMPACTION_SUMMARY]
    assert len(summaries) == 1 and summaries[0].role == "user"
    assert summaries[0].text().startswith("This session is being continued")
    assert any(e.kind == "system:compact_boundary" for e in t.entries if isinstance(e, Record))
    assert any(m.extra.get("is_meta") for m in t.messages)
    assert any(e.kind == "queue-operation" for e in t.entries if isinstance(e, Record))


def test_split_message_continues_across_records(tmp_path: Path) -> None:
    """codemie_session-9eda1058 style: lines of one response with summary lines between them."""
    t = read_one(SAMPLE)
    a = t.messages[1]
    lines = [ln.raw for ln in a.lines]
    progress = b'{"type":"summary","summary":"x","leafUuid":"l1"}'
    data = b"\n".join([lines[0], progress, lines[1], progress, lines[2]]) + b"\n"
    t2 = read_bytes(data, tmp_path)
    assert len(t2.messages) == 1
    assert [type(e).__name__ for e in t2.entries] == ["Message", "Record", "Cont", "Record", "Cont"]
    assert write_bytes([t2]) == data
    # a tool result line between two lines of the same response starts a new message, same usage_key
    tr = b'{"type":"user","uuid":"u9","parentUuid":null,"sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"ok"}]}}'
    t3 = read_bytes(b"\n".join([lines[0], lines[1], tr, lines[2], lines[3]]) + b"\n", tmp_path, "y.jsonl")
    assert [m.role for m in t3.messages] == ["assistant", "tool", "assistant"]
    assert t3.messages[0].usage_key == t3.messages[2].usage_key
    assert t3.messages[0].usage is t3.messages[2].usage


def test_tool_result_parts_and_images(tmp_path: Path) -> None:
    img = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    line = {
        "type": "user",
        "uuid": "11111111-1111-4111-8111-111111111111",
        "parentUuid": None,
        "sessionId": "s1",
        "message": {
            "role": "user",
            "content": [
                {
                    "tool_use_id": "toolu_1",
                    "type": "tool_result",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "text", "text": "b"},
                        {"type": "image", "source": img},
                    ],
                }
            ],
        },
        "toolUseResult": {"stdout": "a\nb"},
    }
    t = read_bytes(json.dumps(line).encode() + b"\n", tmp_path)
    (m,) = t.messages
    assert m.role == "tool"
    assert [b.type for b in m.content] == ["tool_result", "image"]
    assert m.content[0].text == "a\nb" and m.content[1].data == {"type": "image", "source": img}
    m.touch()  # unchanged content: the original block (parts) is reused, toolUseResult kept
    (o,) = json_items(write_bytes([t]), "jsonl")
    assert o == line
    m.content[0].text = "shortened"
    (o,) = json_items(write_bytes([t]), "jsonl")
    assert "toolUseResult" not in o
    assert o["message"]["content"] == [
        {
            "tool_use_id": "toolu_1",
            "type": "tool_result",
            "content": [{"type": "text", "text": "shortened"}, {"type": "image", "source": img}],
        }
    ]


def test_changed_tool_result_drops_tool_use_result() -> None:
    t = read_one(SAMPLE)
    tool = next(m for m in t.messages if m.role == "tool" and len(m.content[0].text) > 5000)
    tool.content[0].text = "[output archived]"
    tool.touch()
    out = write_bytes([t]).splitlines()
    src = lines_of(SAMPLE)
    assert len(out) == len(src)
    changed = [i for i, (a, b) in enumerate(zip(out, src, strict=True)) if a != b]
    assert len(changed) == 1
    o = json.loads(out[changed[0]])
    assert "toolUseResult" not in o
    assert o["message"]["content"][0]["content"] == "[output archived]"
    assert o["uuid"] == tool.id and o["sourceToolAssistantUUID"]


def test_merged_message_renders_as_one_line() -> None:
    t = read_one(SAMPLE)
    a = t.messages[1]
    a.content[1].text = "Reproducing the failure first."
    a.touch()
    out = [json.loads(x) for x in write_bytes([t]).splitlines()]
    assert len(out) == len(lines_of(SAMPLE)) - 3
    o = out[2]
    assert o["uuid"] == a.id
    assert [b["type"] for b in o["message"]["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    assert o["message"]["content"][2]["caller"] == {"type": "direct"}  # unchanged blocks kept whole
    assert o["message"]["usage"]["output_tokens"] == 214
    assert o["message"]["usage"]["service_tier"] == "standard"


def test_bad_lines(tmp_path: Path) -> None:
    good = lines_of(SAMPLE)[1]
    data = b"\n".join([good, b"[1, 2]", b'{"no": "type"}', b'{"type": "user", "uuid": "x"}', good]) + b"\n"
    p = tmp_path / "bad.jsonl"
    p.write_bytes(data)
    with pytest.raises(CtxtoolError) as ei:
        list(formats.read(p, "claude-code"))
    assert ei.value.line == 2 and ei.value.path == str(p)
    policy = ErrorPolicy("skip")
    (t,) = formats.read(p, "claude-code", policy)
    assert [e.line for e in policy.skipped] == [2, 3, 4]
    assert len(t.messages) == 2


# -- writing new entries -------------------------------------------------------------
def test_new_message_reads_back(tmp_path: Path) -> None:
    t = read_one(SAMPLE)
    new = Message("user", [Block("text", text="hi")])
    t.entries.insert(2, new)
    out = write_bytes([t])
    assert out == write_bytes([t])
    objs = json_items(out, "jsonl")
    o = objs[2]
    assert o["type"] == "user" and o["message"] == {"role": "user", "content": "hi"}
    assert o["parentUuid"] == t.entries[1].lines[0].obj["uuid"]
    assert o["sessionId"] == t.id and o["cwd"] == "/home/dev/projects/ledgerlite"
    assert o["timestamp"] == t.entries[1].lines[0].obj["timestamp"]
    assert o["version"] == "2.1.39" and "ctxtool" not in o
    back = read_bytes(out, tmp_path)
    m = back.entries[2]
    assert isinstance(m, Message) and m.role == "user" and blocks_sig(m) == blocks_sig(new)


def test_new_assistant_and_tool_messages(tmp_path: Path) -> None:
    t = read_one(SAMPLE)
    call = Block("tool_call", id="toolu_new", name="Bash", arguments='{"command": "ls"}')
    a = Message("assistant", [Block("text", text="Listing."), call], usage=Usage(5, 7, 0, 100))
    r = Message("tool", [Block("tool_result", id="toolu_new", text="a.py", is_error=True)])
    t.entries += [a, r]
    back = read_bytes(write_bytes([t]), tmp_path)
    a2, r2 = back.messages[-2:]
    assert a2.role == "assistant" and r2.role == "tool"
    assert a2.content[1].arguments == {"command": "ls"}
    assert a2.usage == Usage(5, 7, 0, 100) and a2.usage_key and a2.model == "<synthetic>"
    assert blocks_sig(r2) == blocks_sig(r)
    o = a2.lines[0].obj
    assert o["message"]["stop_reason"] == "tool_use" and o["slug"] == "steady-rounding-heron"
    assert r2.lines[0].obj["parentUuid"] == o["uuid"]


def test_system_and_meta_roles_survive(tmp_path: Path) -> None:
    t = Transcript("claude-code")
    t.entries = [
        Message("system", [Block("text", text="You are terse.")]),
        Message("user", [Block("text", text="<command-name>/clear</command-name>")], extra={"is_meta": True}),
        Message("user", [Block("text", text="hello")]),
    ]
    out = write_bytes([t])
    objs = json_items(out, "jsonl")
    assert (
        objs[0]["type"] == "user" and objs[0]["isMeta"] is True and objs[0]["ctxtool"] == {"role": "system"}
    )
    assert objs[1]["isMeta"] is True and "ctxtool" not in objs[1]
    assert objs[2]["parentUuid"] == objs[1]["uuid"]
    back = read_bytes(out, tmp_path, fmt="claude-code")
    assert [m.role for m in back.messages] == ["system", "user", "user"]
    assert [m.extra.get("is_meta", False) for m in back.messages] == [False, True, False]
    assert back.messages[0].metadata.is_empty()


def test_render_compaction(tmp_path: Path) -> None:
    t = read_one(SAMPLE)
    t.entries.append(Compaction(summary="Fixed rounding in parse_amount.", tokens_before=36000))
    out = write_bytes([t])
    boundary, summary = json_items(out, "jsonl")[-2:]
    last_uuid = t.messages[-1].lines[0].obj["uuid"]
    assert boundary["type"] == "system" and boundary["subtype"] == "compact_boundary"
    assert boundary["content"] == "Conversation compacted"
    assert boundary["compactMetadata"] == {"trigger": "manual", "preTokens": 36000}
    assert boundary["parentUuid"] is None
    assert summary["parentUuid"] == boundary["uuid"] and summary["isCompactSummary"] is True
    assert summary["message"] == {"role": "user", "content": "Fixed rounding in parse_amount."}
    # same shape as the corpus compactions
    p = CORPUS / "claude_code" / "spotter_ae4a77f8_main.jsonl"
    if p.exists():
        real = [json.loads(x) for x in lines_of(p)]
        i = next(i for i, o in enumerate(real) if o.get("subtype") == "compact_boundary")
        assert set(real[i]) <= set(boundary) | {"logicalParentUuid"}
        assert set(real[i + 1]) <= set(summary) | {"thinkingMetadata"}
    assert boundary["logicalParentUuid"] in (last_uuid, json_items(out, "jsonl")[-3].get("uuid"))
    back = read_bytes(out, tmp_path)
    m = back.messages[-1]
    assert m.metadata.kind == KIND_COMPACTION_SUMMARY and m.text() == "Fixed rounding in parse_amount."


def test_from_openai(tmp_path: Path) -> None:
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is in the folder?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
        {"role": "assistant", "content": "Two Python files."},
    ]
    p = tmp_path / "chat.jsonl"
    p.write_text("".join(json.dumps(m) + "\n" for m in msgs))
    out = write_bytes(formats.read(p), "claude-code")
    assert FORMAT.sniff([json.loads(x) for x in out.splitlines()], _source(out, tmp_path)) > 0
    back = read_bytes(out, tmp_path, "cc.jsonl", "claude-code")
    assert [m.role for m in back.messages] == ["system", "user", "assistant", "tool", "assistant"]
    call = back.messages[2].content[0]
    assert (call.type, call.id, call.name, call.arguments) == ("tool_call", "call_1", "ls", {"path": "."})
    assert back.messages[3].content[0].id == "call_1" and back.messages[3].content[0].text == "a.py\nb.py"
    assert len({m.id for m in back.messages}) == 5


# -- detection of other formats -----------------------------------------------------------
OTHER_FORMATS = {
    "openai": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    "anthropic": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    "codex": [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "x"}},
        {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": {"type": "message"}},
    ],
    "pi": [
        {"type": "session", "id": "s", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/x"},
        {"type": "message", "message": {"role": "user", "content": "hi"}},
    ],
    "canonical": [{"type": "transcript", "ctxtool": 1}, {"type": "message", "role": "user", "content": []}],
}


def _source(data: bytes, tmp_path: Path) -> Source:
    p = tmp_path / "sniff.jsonl"
    p.write_bytes(data)
    return open_source(p)


@pytest.mark.parametrize("name", sorted(OTHER_FORMATS))
def test_sniff_rejects_other_formats(name: str, tmp_path: Path) -> None:
    data = b"".join(json.dumps(o).encode() + b"\n" for o in OTHER_FORMATS[name])
    src = _source(data, tmp_path)
    assert FORMAT.sniff(src.sample(), src) == 0


@pytest.mark.parametrize("path", [p for p in corpus_files() if p.parent.name != "claude_code"] or [None])
def test_sniff_rejects_other_corpus_files(path: Path | None) -> None:
    if path is None:
        pytest.skip("../shared/corpus not present")
    src = open_source(path)
    assert FORMAT.sniff(src.sample(), src) == 0


def test_cont_of_removed_message_is_dropped() -> None:
    t = read_one(SAMPLE)
    a = t.messages[1]
    t.remove({id(a)})
    assert not any(isinstance(e, Cont) and e.message is a for e in t.entries)
    # its 4 lines go, and so do the progress lines of its tool calls (parented by its lines)
    gone = {ln.obj["uuid"] for ln in a.lines}
    progress = [o for o in map(json.loads, lines_of(SAMPLE)) if o.get("type") == "progress" and o.get("parentUuid") in gone]
    assert len(progress) == 1
    out = write_bytes([t]).splitlines()
    assert len(out) == len(lines_of(SAMPLE)) - 4 - len(progress)
    assert not any(json.loads(ln).get("uuid") == progress[0]["uuid"] for ln in out)


def test_restore_puts_a_continuation_back_after_a_relinked_line(tmp_path: Path) -> None:
    """spotter_ae4a77f8_main style: a progress line between two lines of one response points at
    the first; truncating the response re-links it, and restore still finds it (by its source
    form) and puts the second line back after it: the input comes back."""
    from ctxtool.tool_outputs import files as tools_ops
    from ctxtool.tool_outputs.algorithms import Limits

    long_text = "\n".join(f"step {k}: looked at the parser and the lexer once more" for k in range(40))
    rows = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
         "message": {"role": "user", "content": "fix the parser"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s",
         "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "thinking", "thinking": long_text, "signature": "sig"}]}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "a1", "sessionId": "s",
         "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "text", "text": "Running make."}]}},
        {"type": "progress", "uuid": "p1", "parentUuid": "a2", "sessionId": "s", "data": {"type": "hook_progress"}},
        {"type": "assistant", "uuid": "a3", "parentUuid": "p1", "sessionId": "s",
         "message": {"id": "msg_1", "role": "assistant",
                     "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}]}},
        {"type": "user", "uuid": "u2", "parentUuid": "a3", "sessionId": "s",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}},
    ]
    src = tmp_path / "s.jsonl"
    src.write_bytes(b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows))
    short, back = tmp_path / "short.jsonl", tmp_path / "back.jsonl"
    tight = Limits(max_lines=10, max_bytes=1000, max_chars=1500, spill_threshold=40_000, max_line_length=200)
    rep = tools_ops.truncate_file(str(src), str(short), limits=tight, include="all", cache=tmp_path / "c")
    assert rep.truncated >= 1
    progress = next(json.loads(x) for x in short.read_bytes().splitlines() if b'"progress"' in x)
    assert progress["ctxtool"] == {"relinked_from": "a2"}  # it points at the merged line now
    tools_ops.restore_file(str(short), str(back), cache=tmp_path / "c")
    assert [json.loads(x) for x in back.read_bytes().splitlines()] == rows
