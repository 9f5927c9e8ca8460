"""The ``openai`` format: Chat Completions messages alone or inside dataset records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS, SAMPLES, write_bytes

from ctxtool import formats
from ctxtool.formats import openai
from ctxtool.io.jsonl import open_source
from ctxtool.model import Block, Message, Metadata, Transcript

SAMPLE_FILES = [SAMPLES / "openai_chat.json", SAMPLES / "openai_dataset.jsonl"]
CORPUS_FILES = sorted(
    p for d in ("openai_chat", "messages_jsonl") if (CORPUS / d).is_dir() for p in (CORPUS / d).glob("*")
)


def all_files() -> list[Any]:
    return [pytest.param(p, id=p.name) for p in SAMPLE_FILES + CORPUS_FILES]


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
                [(b.type, b.text, b.id, b.name, json.dumps(b.arguments, sort_keys=True)) for b in m.content],
            )
            for m in t.messages
        ]
        for t in ts
    ]


MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful agent."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this image?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_A",
                "type": "function",
                "function": {"name": "describe", "arguments": '{"url": "https://example.com/cat.png"}'},
            },
            {"id": "call_B", "type": "function", "function": {"name": "ocr", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_A", "content": "a cat on a sofa"},
    {"role": "tool", "tool_call_id": "call_B", "content": "no text found"},
    {"role": "assistant", "content": "A cat sitting on a sofa.", "reasoning_content": "The tool said cat."},
]


def _write(tmp_path: Path, name: str, obj: Any, jsonl: bool = False) -> Path:
    p = tmp_path / name
    if jsonl:
        p.write_text("".join(json.dumps(o) + "\n" for o in obj))
    else:
        p.write_text(json.dumps(obj, indent=2))
    return p


def layout_files(tmp_path: Path) -> dict[str, Path]:
    recs = [
        {"id": "a", "messages": MESSAGES, "score": 1.0},
        {"id": "b", "messages": MESSAGES[:2], "tools": []},
    ]
    return {
        "entries_jsonl": _write(tmp_path, "e.jsonl", MESSAGES, jsonl=True),
        "entries_array": _write(tmp_path, "e.json", MESSAGES),
        "records_jsonl": _write(tmp_path, "r.jsonl", recs, jsonl=True),
        "records_array": _write(tmp_path, "r.json", recs),
        "record_object": _write(tmp_path, "o.json", recs[0]),
    }


# -- detection -------------------------------------------------------------------
@pytest.mark.parametrize("path", all_files())
def test_detected_as_openai(path: Path) -> None:
    assert formats.detect(open_source(path)).name == "openai"


def test_layouts_detected(tmp_path: Path) -> None:
    for layout, p in layout_files(tmp_path).items():
        assert formats.detect(open_source(p)).name == "openai", layout
        assert formats.read_all(p)[0].extra["layout"] == layout


# -- round trips -----------------------------------------------------------------
@pytest.mark.parametrize("path", all_files())
def test_unchanged_write_back(path: Path) -> None:
    ts = formats.read_all(path)
    out = write_bytes(ts)
    assert parse(out) == parse(path.read_bytes())
    if ts[0].extra["layout"] in ("records_jsonl", "entries_jsonl"):
        assert out == path.read_bytes()


@pytest.mark.parametrize("path", all_files())
def test_ctxtool_and_back(path: Path, tmp_path: Path) -> None:
    q = tmp_path / "canon.jsonl"
    q.write_bytes(write_bytes(formats.read_all(path), "ctxtool"))
    back = formats.read_all(q)
    assert back[0].format == "ctxtool"
    assert parse(write_bytes(back, "openai")) == parse(path.read_bytes())


@pytest.mark.parametrize("path", all_files())
def test_all_dirty_rerender(path: Path, tmp_path: Path) -> None:
    ts = formats.read_all(path)
    before = signature(ts)
    for t in ts:
        for m in t.messages:
            m.touch()
    q = tmp_path / ("dirty" + path.suffix)
    q.write_bytes(write_bytes(ts))
    assert signature(formats.read_all(q, "openai")) == before


def test_layouts_round_trip(tmp_path: Path) -> None:
    for layout, p in layout_files(tmp_path).items():
        ts = formats.read_all(p)
        out = write_bytes(ts)
        assert parse(out) == parse(p.read_bytes()), layout
        if layout.endswith("jsonl"):
            assert out == p.read_bytes(), layout
        # all dirty: same JSON, since nothing changed
        for t in ts:
            for m in t.messages:
                m.touch()
        assert parse(write_bytes(ts)) == parse(p.read_bytes()), layout
        q = tmp_path / ("canon-" + layout + ".jsonl")
        q.write_bytes(write_bytes(formats.read_all(p), "ctxtool"))
        assert parse(write_bytes(formats.read_all(q), "openai")) == parse(p.read_bytes()), layout


# -- content -----------------------------------------------------------------------
def test_tool_calls_pair_with_tool_call_id(tmp_path: Path) -> None:
    [t] = formats.read_all(layout_files(tmp_path)["entries_array"])
    ms = t.messages
    assert [m.role for m in ms] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [b.id for b in ms[2].tool_calls()] == ["call_A", "call_B"]
    assert ms[2].tool_calls()[0].arguments == '{"url": "https://example.com/cat.png"}'
    assert [ms[3].content[0].id, ms[4].content[0].id] == ["call_A", "call_B"]
    assert [b.type for b in ms[1].content] == ["text", "image"]
    assert [b.type for b in ms[5].content] == ["thinking", "text"]


@pytest.mark.parametrize(
    "path", [p for p in SAMPLE_FILES] + [p for p in CORPUS_FILES if p.parent.name == "openai_chat"]
)
def test_every_result_has_its_call(path: Path) -> None:
    for t in formats.read_all(path):
        calls = {b.id for m in t.messages for b in m.tool_calls()}
        assert all(b.id and not b.id.startswith("call_0_") for m in t.messages for b in m.tool_calls())
        for m in t.messages:
            for b in m.tool_results():
                assert b.id in calls


def test_taubench_corpus_shape() -> None:
    p = CORPUS / "openai_chat" / "taubench_gpt-4o-airline.json"
    if not p.is_file():
        pytest.skip("corpus not present")
    ts = formats.read_all(p)
    assert len(ts) == 200 and sum(len(t.messages) for t in ts) == 5308
    assert all(t.messages_key == "traj" and t.extra["layout"] == "records_array" for t in ts)
    assert all(t.record is not None and "reward" in t.record for t in ts)


def test_llamafactory_value_blocks() -> None:
    p = CORPUS / "messages_jsonl" / "llamafactory_reason_tool_use_demo_50.jsonl"
    if not p.is_file():
        pytest.skip("corpus not present")
    ts = formats.read_all(p)
    assert len(ts) == 50 and sum(len(t.messages) for t in ts) == 274
    kinds = {b.type for t in ts for m in t.messages for b in m.content}
    assert {"text", "thinking", "tool_call"} <= kinds
    # no call ids in the source: results pair with calls by position, and ids are not written back
    for t in ts:
        calls = {b.id for m in t.messages for b in m.tool_calls()}
        assert all(b.id in calls for m in t.messages for b in m.tool_results() if b.id)


def test_samples_content() -> None:
    [chat] = formats.read_all(SAMPLES / "openai_chat.json")
    assert chat.extra["layout"] == "entries_array"
    longest = max(chat.messages, key=lambda m: m.chars())
    assert longest.role == "tool" and longest.chars() > 10000
    ds = formats.read_all(SAMPLES / "openai_dataset.jsonl")
    assert [t.id for t in ds] == ["ds-0001", "ds-0002", "ds-0003"]
    assert ds[1].record is not None and ds[1].record["metadata"]["difficulty"] == "medium"
    assert len(ds[1].messages[4].tool_calls()) == 2


def test_new_message_renders_and_reads_back(tmp_path: Path) -> None:
    p = layout_files(tmp_path)["entries_jsonl"]
    [t] = formats.read_all(p)
    new = [
        Message(
            "assistant",
            [
                Block("text", text="Checking."),
                Block("tool_call", id="call_N", name="f", arguments='{"x": 1}'),
            ],
        ),
        Message(
            "tool", [Block("tool_result", id="call_N", text="42")], metadata=Metadata(kind="tool_result")
        ),
    ]
    rendered = [openai.FORMAT.render(m, t) for m in new]
    assert rendered[0] == [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "call_N", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
            ],
        }
    ]
    assert rendered[1] == [
        {"role": "tool", "tool_call_id": "call_N", "content": "42", "ctxtool": {"kind": "tool_result"}}
    ]
    t.entries.extend(new)
    q = tmp_path / "new.jsonl"
    q.write_bytes(write_bytes([t]))
    [back] = formats.read_all(q)
    assert signature([Transcript("x", entries=back.messages[-2:])]) == signature(
        [Transcript("x", entries=new)]
    )  # type: ignore[arg-type]
    assert back.messages[-1].metadata.kind == "tool_result"


def test_convert_from_anthropic_drops_foreign_fields(tmp_path: Path) -> None:
    """Messages converted from another format do not inherit that format's fields."""
    msgs = [
        {"role": "user", "content": "hi"},
        {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": "Running."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]},
    ]
    p = _write(tmp_path, "an.jsonl", msgs, jsonl=True)
    out = parse(write_bytes(formats.read_all(p), "openai"))
    rec = out if isinstance(out, dict) else out[0]
    items = rec["messages"]
    assert items[1] == {
        "role": "assistant",
        "content": "Running.",
        "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    }
    assert items[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "a.txt"}
