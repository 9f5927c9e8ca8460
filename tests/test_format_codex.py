"""The Codex CLI rollout format: detection, lossless round trips, rendering of changed and new messages."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import CORPUS, SAMPLES, corpus_files, write_bytes

from ctxtool import formats
from ctxtool.formats import codex
from ctxtool.formats.base import ErrorPolicy
from ctxtool.io.jsonl import open_source
from ctxtool.model import Block, Compaction, Message, Metadata, Record, Transcript, Usage

SAMPLE = SAMPLES / "codex_rollout.jsonl"


def codex_files() -> list:  # type: ignore[type-arg]
    params = [pytest.param(SAMPLE, id="samples/codex_rollout.jsonl")]
    files = sorted((CORPUS / "codex").glob("*.jsonl")) if (CORPUS / "codex").is_dir() else []
    return params + [pytest.param(p, id=f"codex/{p.name}") for p in files]


def lines_of(data: bytes) -> list:  # type: ignore[type-arg]
    return [json.loads(x) for x in data.splitlines() if x.strip()]


def read_one(p: Path | str) -> Transcript:
    ts = list(formats.read(p))
    assert len(ts) == 1
    return ts[0]


def read_bytes(data: bytes, tmp_path: Path, name: str = "out.jsonl", fmt: str | None = None) -> list[Transcript]:
    p = tmp_path / name
    p.write_bytes(data)
    return list(formats.read(p, fmt))


def shape(t: Transcript) -> list[tuple]:  # type: ignore[type-arg]
    return [
        (
            m.role,
            [
                (b.type, b.text, b.id, b.name if b.type == "tool_call" else None, b.arguments_text() if b.type == "tool_call" else None)
                for b in m.content
            ],
        )
        for m in t.messages
    ]


@pytest.mark.parametrize("path", codex_files())
def test_detected(path: Path) -> None:
    assert formats.detect(open_source(path)).name == "codex"


@pytest.mark.parametrize("path", codex_files())
def test_unchanged_round_trip_is_byte_identical(path: Path) -> None:
    out = write_bytes([read_one(path)])
    src = path.read_bytes()
    assert lines_of(out) == lines_of(src)
    assert out == b"".join(x + b"\n" for x in src.splitlines() if x.strip())


@pytest.mark.parametrize("path", codex_files())
def test_canonical_round_trip(path: Path, tmp_path: Path) -> None:
    canon = write_bytes([read_one(path)], "ctxtool")
    back = read_bytes(canon, tmp_path, "canon.jsonl")
    assert back[0].format == "ctxtool"
    assert back[0].id == read_one(path).id
    again = write_bytes(back, "codex")
    assert lines_of(again) == lines_of(path.read_bytes())


@pytest.mark.parametrize("path", codex_files())
def test_dirty_messages_render_like_the_source(path: Path, tmp_path: Path) -> None:
    t = read_one(path)
    before = shape(t)
    ids = [m.id for m in t.messages]
    for m in t.messages:
        m.touch()
    for c in t.compactions:
        c.dirty = True
    out = write_bytes([t])
    # Codex lines re-rendered from the model are the lines Codex wrote.
    assert lines_of(out) == lines_of(path.read_bytes())
    back = read_bytes(out, tmp_path)[0]
    assert shape(back) == before
    assert [m.id for m in back.messages] == ids


def test_corpus_counts() -> None:
    expected = {  # PROVENANCE: response_item messages, function + custom tool calls
        "codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl": (17, 102, 3),
        "localpush_redacted_rollout-2026-02-23T12-54-34-019c8a59.jsonl": (346, 365, 7),
    }
    files = {p.name: p for p in corpus_files() if p.parent.name == "codex"}
    if not files:
        pytest.skip("../shared/corpus not present")
    for name, (n_msgs, n_calls, n_web) in expected.items():
        t = read_one(files[name])
        calls = [b for m in t.messages for b in m.tool_calls()]
        web = [b for b in calls if (b.extra or {}).get("server_tool")]
        assert len(calls) - len(web) == n_calls
        assert len(web) == n_web and all(b.name == "web_search" for b in web)
        results = [b for m in t.messages for b in m.tool_results()]
        assert len(results) == n_calls
        assert {b.id for b in results} <= {b.id for b in calls}
        # messages from response_item "message" lines: text/image blocks only (plus the session_meta prompt)
        text_msgs = [m for m in t.messages if m.content and all(b.type in ("text", "image") for b in m.content)]
        assert len(text_msgs) == n_msgs + 1
        assert t.messages[0].role == "system" and t.messages[0].lines[0].obj["type"] == "session_meta"
        assert t.extra["context_window"] == 258400
        assert t.extra["session"]["id"] == t.id


def test_localpush_compaction_and_images() -> None:
    p = CORPUS / "codex" / "localpush_redacted_rollout-2026-02-23T12-54-34-019c8a59.jsonl"
    if not p.exists():
        pytest.skip("corpus file not present")
    t = read_one(p)
    [c] = t.compactions
    assert isinstance(c.details["replacement_history"], list)
    assert c.details["replacement_history"][-1]["type"] == "compaction"
    images = [b for m in t.messages for b in m.content if b.type == "image"]
    assert len(images) == 13 and all(b.data["type"] == "input_image" for b in images)
    kinds = {e.kind for e in t.entries if isinstance(e, Record)}
    assert {"turn_context", "event_msg:token_count", "event_msg:context_compacted"} <= kinds


def test_sample_usage_model_and_reasoning() -> None:
    t = read_one(SAMPLE)
    assert t.extra["model"] == "gpt-5-codex"
    assert t.extra["context_window"] == 272000
    with_usage = [m for m in t.messages if m.usage is not None]
    assert len(with_usage) == 5
    assert all(m.role == "assistant" and m.model == "gpt-5-codex" for m in with_usage)
    first = with_usage[0]
    assert first.tool_calls() and first.usage == Usage(input=6120 - 4864, output=142, cache_read=4864)
    assert len({m.usage_key for m in with_usage}) == 5
    thinking = [b for m in t.messages for b in m.content if b.type == "thinking"]
    assert thinking[0].text == "**Running the failing test**"
    assert "encrypted_content" not in json.dumps([b.to_json() for b in thinking])
    [patch] = [b for m in t.messages for b in m.tool_calls() if b.name == "apply_patch"]
    assert patch.extra == {"custom": True} and patch.arguments.startswith("*** Begin Patch")
    long = max((b for m in t.messages for b in m.tool_results()), key=lambda b: len(b.text))
    assert len(long.text) > 2000 and long.name == "shell"


def test_sniff_rejects_other_formats() -> None:
    others = [p for p in corpus_files() if p.parent.name != "codex"] + [
        p for p in SAMPLES.glob("*") if p.is_file() and not p.name.startswith("codex")
    ]
    for p in others:
        try:
            src = open_source(p)
        except Exception:  # noqa: BLE001 - not a transcript at all
            continue
        assert codex.FORMAT.sniff(src.sample(), src) == 0, p


def test_new_messages_render_and_read_back(tmp_path: Path) -> None:
    t = read_one(SAMPLE)
    call = Message(
        "assistant",
        [
            Block("thinking", text="Check the README too."),
            Block("text", text="Looking at the README."),
            Block("tool_call", id="call_new1", name="shell", arguments={"command": ["cat", "README.md"]}),
        ],
        metadata=Metadata(kind="note"),
    )
    result = Message("tool", [Block("tool_result", id="call_new1", text="# tidewater\n")])
    pos = next(i for i, e in enumerate(t.entries) if isinstance(e, Message) and e.role == "user" and "fails" in e.text())
    t.entries[pos + 1 : pos + 1] = [call, result]
    out = write_bytes([t])
    objs = lines_of(out)
    assert all(set(o) >= {"timestamp", "type", "payload"} for o in objs)
    back = read_one_bytes(out, tmp_path)
    msgs = back.messages
    i = next(k for k, m in enumerate(msgs) if m.tool_calls() and m.tool_calls()[0].id == "call_new1")
    assert [(m.role, [b.type for b in m.content]) for m in msgs[i - 2 : i + 2]] == [
        ("assistant", ["thinking"]),
        ("assistant", ["text"]),
        ("assistant", ["tool_call"]),
        ("tool", ["tool_result"]),
    ]
    assert msgs[i - 2].content[0].text == "Check the README too."
    assert msgs[i - 1].text() == "Looking at the README."
    assert msgs[i - 1].metadata.kind == "note"
    assert json.loads(msgs[i].tool_calls()[0].arguments) == {"command": ["cat", "README.md"]}
    assert msgs[i + 1].tool_results()[0].text == "# tidewater\n"
    # timestamps are copied from the neighbour: deterministic output
    assert write_bytes([t]) == out
    new_lines = [o for o in objs if o["type"] == "response_item" and o["payload"].get("call_id") == "call_new1"]
    assert new_lines[0]["timestamp"] == "2025-11-04T09:12:19.530Z"


def read_one_bytes(data: bytes, tmp_path: Path) -> Transcript:
    return read_bytes(data, tmp_path)[0]


def test_render_compaction(tmp_path: Path) -> None:
    t = read_one(SAMPLE)
    t.entries.append(Compaction(summary="## Goal\nFix the parser.", tokens_before=9000))
    out = write_bytes([t])
    objs = lines_of(out)
    assert objs[-2]["type"] == "compacted"
    assert objs[-2]["payload"]["message"] == "## Goal\nFix the parser."
    assert objs[-2]["payload"]["replacement_history"][0]["content"][0]["text"] == "## Goal\nFix the parser."
    assert objs[-1]["payload"] == {"type": "context_compacted"}
    back = read_one_bytes(out, tmp_path)
    assert back.compactions[0].summary == "## Goal\nFix the parser."


def test_convert_from_another_format(tmp_path: Path) -> None:
    t = Transcript("openai", id="conv-1")
    t.entries = [
        Message("system", [Block("text", text="You are a helpful agent.")]),
        Message("user", [Block("text", text="List files")]),
        Message(
            "assistant",
            [Block("tool_call", id="c1", name="ls", arguments='{"path": "."}')],
            usage=Usage(input=100, output=10, cache_read=50),
        ),
        Message("tool", [Block("tool_result", id="c1", text="a.py\nb.py")]),
        Message("assistant", [Block("text", text="Two files.")], usage=Usage(input=20, output=5, cache_read=160)),
    ]
    for m in t.entries:
        m.dirty = True  # type: ignore[union-attr]
    out = write_bytes([t], "codex")
    objs = lines_of(out)
    assert objs[0]["type"] == "session_meta" and objs[0]["payload"]["id"] == "conv-1"
    assert objs[0]["payload"]["base_instructions"]["text"] == "You are a helpful agent."
    assert sum(o["payload"].get("type") == "token_count" for o in objs if o["type"] == "event_msg") == 2
    back = read_one_bytes(out, tmp_path)
    assert back.format == "codex" and back.id == "conv-1"
    assert shape(back) == shape(t)
    assert [m.usage for m in back.messages if m.usage] == [Usage(100, 10, 0, 50), Usage(20, 5, 0, 160)]


def test_bad_lines(tmp_path: Path) -> None:
    data = SAMPLE.read_bytes().splitlines()
    data.insert(3, b'{"timestamp":"x","type":"response_item","payload":{"type":"function_call","name":"f"}}')
    data.insert(3, b"[1, 2]")
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"\n".join(data) + b"\n")
    with pytest.raises(Exception, match=r"bad\.jsonl:4"):
        list(formats.read(p, "codex"))
    policy = ErrorPolicy("skip")
    [t] = list(formats.read_source(open_source(p), "codex", policy))
    assert [e.line for e in policy.skipped] == [4, 5]
    assert len(t.messages) == len(read_one(SAMPLE).messages)


def test_legacy_layout(tmp_path: Path) -> None:
    lines = [
        {"id": "0a1b2c3d-0000-4000-8000-000000000001", "timestamp": "2025-06-01T10:00:00.000Z", "instructions": None,
         "git": {"branch": "main"}},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "{\"output\":\"a\\n\",\"metadata\":{\"exit_code\":0}}"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]
    p = tmp_path / "legacy.jsonl"
    p.write_bytes(b"".join(json.dumps(o).encode() + b"\n" for o in lines))
    assert formats.detect(open_source(p)).name == "codex"
    t = read_one(p)
    assert [m.role for m in t.messages] == ["user", "assistant", "tool", "assistant"]
    assert t.id == lines[0]["id"]
    for m in t.messages:
        m.touch()
    buf = io.BytesIO()
    formats.write([t], buf)
    assert lines_of(buf.getvalue()) == lines
