"""The ``anthropic`` format: Messages API request bodies, message lists and dataset records."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS, SAMPLES, write_bytes

from ctxtool import formats
from ctxtool.formats import anthropic
from ctxtool.io.jsonl import open_source
from ctxtool.model import Block, Message, Metadata, Transcript

SAMPLE = SAMPLES / "anthropic_request.json"

SIG = "EqQBCkYIBxgCKkBmYWtlLXNpZ25hdHVyZQ=="

# An agent exchange in the exact shape of the Messages API, including response objects.
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "List the files in the project root."},
    {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "I should call ls.", "signature": SIG},
            {"type": "text", "text": "Listing the files."},
            {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"command": "ls"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 1200,
            "output_tokens": 45,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 2000,
        },
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "README.md\nsetup.py\nsrc\n"}
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "tool_use", "id": "toolu_02", "name": "screenshot", "input": {}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_02",
                "content": [
                    {"type": "text", "text": "screen captured"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                    },
                ],
            },
            {"type": "text", "text": "That is my desktop."},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_03",
                "content": "command not found",
                "is_error": True,
            }
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Done.", "citations": None}]},
]

REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": "You are a careful shell agent.",
    "messages": [m for m in MESSAGES if m.get("type") != "message"],
    "tools": [{"name": "bash", "description": "Run a command", "input_schema": {"type": "object"}}],
}


def _write(tmp_path: Path, name: str, obj: Any, jsonl: bool = False) -> Path:
    p = tmp_path / name
    if jsonl:
        p.write_text("".join(json.dumps(o) + "\n" for o in obj))
    else:
        p.write_text(json.dumps(obj, indent=2))
    return p


def layout_files(tmp_path: Path) -> dict[str, Path]:
    rec_a = {"id": "r1", "messages": MESSAGES, "metadata": {"split": "train"}}
    rec_b = {
        "id": "r2",
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": MESSAGES[:3],
    }
    return {
        "entries_jsonl": _write(tmp_path, "a.jsonl", MESSAGES, jsonl=True),
        "entries_array": _write(tmp_path, "a.json", MESSAGES),
        "records_jsonl": _write(tmp_path, "r.jsonl", [rec_a, rec_b], jsonl=True),
        "records_array": _write(tmp_path, "r.json", [rec_a, rec_b]),
        "record_object": _write(tmp_path, "req.json", REQUEST),
    }


def parse(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return [json.loads(line) for line in data.splitlines() if line.strip()]


def signature(ts: list[Transcript]) -> list[Any]:
    return [
        [
            (
                m.role,
                [
                    (b.type, b.text, b.id, b.name, json.dumps(b.arguments, sort_keys=True), b.is_error)
                    for b in m.content
                ],
            )
            for m in t.messages
        ]
        for t in ts
    ]


def all_files(tmp_path: Path) -> list[Path]:
    return [SAMPLE, *layout_files(tmp_path).values()]


# -- detection -------------------------------------------------------------------
def test_detects_sample_and_every_layout(tmp_path: Path) -> None:
    for p in all_files(tmp_path):
        assert formats.detect(open_source(p)).name == "anthropic", p


@pytest.mark.parametrize("name", ["openai_chat", "messages_jsonl", "sharegpt"])
def test_not_detected_for_other_corpus_files(name: str) -> None:
    files = sorted((CORPUS / name).glob("*")) if (CORPUS / name).is_dir() else []
    if not files:
        pytest.skip("corpus not present")
    for p in files:
        src = open_source(p)
        assert anthropic.FORMAT.sniff(src.sample(), src) == 0, p


def test_sniff_plain_messages_lower_than_openai(tmp_path: Path) -> None:
    p = _write(
        tmp_path, "plain.json", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    )
    src = open_source(p)
    a = anthropic.FORMAT.sniff(src.sample(), src)
    o = formats.get_format("openai").sniff(src.sample(), src)
    assert 0 < a < o
    assert formats.detect(open_source(p)).name == "openai"


def test_sniff_zero_for_openai_fields(tmp_path: Path) -> None:
    msgs = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    p = _write(tmp_path, "oa.json", msgs)
    src = open_source(p)
    assert anthropic.FORMAT.sniff(src.sample(), src) == 0


def test_request_with_plain_messages_is_anthropic(tmp_path: Path) -> None:
    req = {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "system": "Be terse.",
        "messages": [{"role": "user", "content": "hi"}],
    }
    p = _write(tmp_path, "req.json", req)
    assert formats.detect(open_source(p)).name == "anthropic"


# -- reading ---------------------------------------------------------------------
def test_reads_blocks_roles_usage(tmp_path: Path) -> None:
    [t] = formats.read_all(layout_files(tmp_path)["entries_jsonl"])
    ms = t.messages
    assert [m.role for m in ms] == ["user", "assistant", "tool", "assistant", "user", "tool", "assistant"]
    a = ms[1]
    assert a.id == "msg_01XFDUDYJgAACzvnptvVoYEL" and a.model == "claude-sonnet-4-5"
    assert a.usage is not None and (
        a.usage.input,
        a.usage.output,
        a.usage.cache_creation,
        a.usage.cache_read,
    ) == (1200, 45, 300, 2000)
    assert [b.type for b in a.content] == ["thinking", "text", "tool_call"]
    assert a.content[0].extra == {"signature": SIG}
    call = a.content[2]
    assert (call.id, call.name, call.arguments) == ("toolu_01", "bash", {"command": "ls"})
    res = ms[2].content[0]
    assert (res.type, res.id, res.text) == ("tool_result", "toolu_01", "README.md\nsetup.py\nsrc\n")
    red = ms[3].content[0]
    assert (
        red.type == "thinking" and red.text == "" and red.extra and red.extra["data"] == "EmwKAhgBEgy3va3pzix"
    )
    mixed = ms[4]
    assert [b.type for b in mixed.content] == ["tool_result", "image", "text"]
    assert mixed.content[0].text == "screen captured"
    assert mixed.content[1].data["source"]["media_type"] == "image/png"
    assert ms[5].content[0].is_error


def test_request_system_field_becomes_leading_message() -> None:
    [t] = formats.read_all(SAMPLE)
    assert t.extra["layout"] == "record_object"
    first = t.messages[0]
    assert first.role == "system" and first.extra.get("anthropic_system")
    assert len(first.content) == 2 and first.content[1].extra == {
        "anthropic": {"cache_control": {"type": "ephemeral"}}
    }
    kinds = {b.type for m in t.messages for b in m.content}
    assert kinds == {"text", "thinking", "tool_call", "tool_result", "image"}
    calls = {b.id for m in t.messages for b in m.tool_calls()}
    results = {b.id for m in t.messages for b in m.tool_results()}
    assert results and results <= calls
    assert t.record is not None and t.record["tools"][0]["name"] == "bash"


# -- round trips -----------------------------------------------------------------
def test_unchanged_write_back_json_equal(tmp_path: Path) -> None:
    for p in all_files(tmp_path):
        out = write_bytes(formats.read_all(p))
        assert parse(out) == parse(p.read_bytes()), p


def test_layouts_round_trip(tmp_path: Path) -> None:
    files = layout_files(tmp_path)
    for layout, p in files.items():
        ts = formats.read_all(p)
        assert ts[0].extra["layout"] == layout
        out = write_bytes(ts)
        if layout in ("entries_jsonl", "records_jsonl"):
            assert out == p.read_bytes(), layout
        assert parse(out) == parse(p.read_bytes()), layout


def test_ctxtool_and_back(tmp_path: Path) -> None:
    for p in all_files(tmp_path):
        canon = write_bytes(formats.read_all(p), "ctxtool")
        q = tmp_path / "canon.jsonl"
        q.write_bytes(canon)
        back = formats.read_all(q)
        assert back[0].format == "ctxtool"
        assert parse(write_bytes(back, "anthropic")) == parse(p.read_bytes()), p


def test_all_dirty_rerender_reads_back(tmp_path: Path) -> None:
    for p in all_files(tmp_path):
        ts = formats.read_all(p)
        before = signature(ts)
        for t in ts:
            for m in t.messages:
                m.touch()
        out = write_bytes(ts)
        q = tmp_path / ("dirty" + p.suffix)
        q.write_bytes(out)
        again = formats.read_all(q, "anthropic")
        assert signature(again) == before, p
        # the system field keeps its shape
        if isinstance(parse(p.read_bytes()), dict):
            assert type(parse(out)["system"]) is type(parse(p.read_bytes())["system"])


def test_dirty_unchanged_content_is_json_equal_for_request() -> None:
    ts = formats.read_all(SAMPLE)
    for m in ts[0].messages:
        m.touch()
    assert parse(write_bytes(ts)) == parse(SAMPLE.read_bytes())


def test_new_message_renders_valid_and_reads_back(tmp_path: Path) -> None:
    [t] = formats.read_all(layout_files(tmp_path)["record_object"])
    new = [
        Message(
            "assistant",
            [
                Block("text", text="Checking."),
                Block("tool_call", id="toolu_new", name="bash", arguments={"command": "pwd"}),
            ],
        ),
        Message("tool", [Block("tool_result", id="toolu_new", text="/work", is_error=False)]),
        Message("user", [Block("text", text="ok")], metadata=Metadata(kind="note")),
    ]
    t.entries.extend(new)
    rendered = [anthropic.FORMAT.render(m, t)[0] for m in new]
    assert rendered[0] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_new", "name": "bash", "input": {"command": "pwd"}},
        ],
    }
    assert rendered[1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_new", "content": "/work"}],
    }
    assert rendered[2]["content"] == "ok" and rendered[2]["ctxtool"] == {"kind": "note"}
    q = tmp_path / "new.json"
    q.write_bytes(write_bytes([t]))
    [back] = formats.read_all(q)
    tail = back.messages[-3:]
    assert signature([Transcript("x", entries=tail)]) == signature([Transcript("x", entries=new)])  # type: ignore[arg-type]
    assert tail[2].metadata.kind == "note"


def test_system_field_edits(tmp_path: Path) -> None:
    p = layout_files(tmp_path)["record_object"]
    # edited: still a string
    [t] = formats.read_all(p)
    t.messages[0].content[0].text = "New system prompt."
    t.messages[0].touch()
    assert parse(write_bytes([t]))["system"] == "New system prompt."
    # removed: the field goes
    [t] = formats.read_all(p)
    t.remove({id(t.messages[0])})
    out = parse(write_bytes([t]))
    assert "system" not in out and len(out["messages"]) == len(REQUEST["messages"])
    # list-shaped system stays a list of text blocks with its cache_control
    [t] = formats.read_all(SAMPLE)
    t.messages[0].content[0].text = "Short."
    t.messages[0].touch()
    sysf = parse(write_bytes([t]))["system"]
    assert sysf[0] == {"type": "text", "text": "Short."} and sysf[1]["cache_control"] == {"type": "ephemeral"}


def test_convert_from_openai_puts_system_in_field(tmp_path: Path) -> None:
    msgs = [
        {"role": "system", "content": "Be helpful."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "assistant", "content": "Sunny in Rome."},
    ]
    p = _write(tmp_path, "oa.json", msgs)
    out = parse(write_bytes(formats.read_all(p), "anthropic"))
    assert out["system"] == "Be helpful."
    assert out["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Rome"}}
    ]
    assert out["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"}],
    }
    q = tmp_path / "conv.json"
    q.write_text(json.dumps(out))
    assert formats.detect(open_source(q)).name == "anthropic"


def test_system_item_in_messages_stays_item(tmp_path: Path) -> None:
    msgs = [{"role": "system", "content": "sys"}, *copy.deepcopy(MESSAGES)]
    rec = {"id": "x", "messages": msgs}
    p = _write(tmp_path, "rec.jsonl", [rec], jsonl=True)
    ts = formats.read_all(p, "anthropic")
    for m in ts[0].messages:
        m.touch()
    out = json.loads(write_bytes(ts))  # one JSONL record
    assert out["messages"][0] == {"role": "system", "content": "sys"} and "system" not in out


def test_convert_to_openai_keeps_content(tmp_path: Path) -> None:
    out = write_bytes(formats.read_all(SAMPLE), "openai")
    q = tmp_path / "oa.json"
    q.write_bytes(out)
    [t] = formats.read_all(q, "openai")
    roles = [m.role for m in t.messages]
    assert roles[0] == "system" and "tool" in roles
    assert sum(len(m.tool_calls()) for m in t.messages) == 4


def test_convert_from_claude_code(tmp_path: Path) -> None:
    """A Claude Code session becomes one request body: no Claude Code fields, signatures and pairing kept."""
    p = SAMPLES / "claude_code_session.jsonl"
    if not p.is_file():
        pytest.skip("no claude-code sample")
    try:
        ts = formats.read_all(p, "claude-code")
    except ModuleNotFoundError:
        pytest.skip("claude-code format not built")
    src_calls = sum(len(m.tool_calls()) for t in ts for m in t.messages)
    out = parse(write_bytes(ts, "anthropic"))
    assert isinstance(out, dict) and "messages" in out
    for m in out["messages"]:
        assert set(m) <= {"role", "content", "ctxtool"}, m.keys()
        assert m["role"] in ("user", "assistant", "system")
    q = tmp_path / "req.json"
    q.write_text(json.dumps(out))
    [back] = formats.read_all(q)
    assert back.format == "anthropic"
    calls = {b.id for m in back.messages for b in m.tool_calls()}
    assert len(calls) == src_calls
    assert all(b.id in calls for m in back.messages for b in m.tool_results())
    sigs = [
        b.extra.get("signature")
        for t in ts
        for m in t.messages
        for b in m.content
        if b.type == "thinking" and b.extra
    ]
    assert sigs == [
        b.extra.get("signature") for m in back.messages for b in m.content if b.type == "thinking" and b.extra
    ]
