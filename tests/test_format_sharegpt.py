"""The ``sharegpt`` format: ``{conversations: [{from, value}]}`` dataset records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS, SAMPLES, write_bytes

from ctxtool import formats
from ctxtool.formats import sharegpt
from ctxtool.io.jsonl import open_source
from ctxtool.model import Block, Message, Metadata, Transcript

SAMPLE = SAMPLES / "sharegpt_dataset.json"
CORPUS_FILE = CORPUS / "sharegpt" / "llamafactory_glaive_toolcall_en_demo.json"


def files() -> list[Path]:
    out = [SAMPLE]
    if CORPUS_FILE.is_file():
        out.append(CORPUS_FILE)
    return out


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


@pytest.fixture
def jsonl_copy(tmp_path: Path) -> Path:
    recs = json.loads(SAMPLE.read_text())
    p = tmp_path / "sg.jsonl"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    return p


@pytest.fixture
def object_copy(tmp_path: Path) -> Path:
    rec = json.loads(SAMPLE.read_text())[0]
    rec = {"messages": rec["conversations"], "system": rec["system"], "tools": rec["tools"]}
    p = tmp_path / "one.json"
    p.write_text(json.dumps(rec, indent=2))
    return p


def all_files(jsonl_copy: Path, object_copy: Path) -> list[Path]:
    return [*files(), jsonl_copy, object_copy]


# -- detection -------------------------------------------------------------------
def test_detection(jsonl_copy: Path, object_copy: Path) -> None:
    for p in all_files(jsonl_copy, object_copy):
        src = open_source(p)
        assert formats.detect(src).name == "sharegpt", p
        src = open_source(p)
        assert formats.get_format("openai").sniff(src.sample(), src) == 0
        assert formats.get_format("anthropic").sniff(src.sample(), src) == 0


@pytest.mark.parametrize("name", ["openai_chat", "messages_jsonl"])
def test_not_detected_for_openai_files(name: str) -> None:
    found = sorted((CORPUS / name).glob("*")) if (CORPUS / name).is_dir() else []
    found += [
        SAMPLES / "openai_chat.json",
        SAMPLES / "openai_dataset.jsonl",
        SAMPLES / "anthropic_request.json",
    ]
    for p in found:
        if p.is_file():
            src = open_source(p)
            assert sharegpt.FORMAT.sniff(src.sample(), src) == 0, p


# -- reading ---------------------------------------------------------------------
def test_corpus_counts_and_pairing() -> None:
    if not CORPUS_FILE.is_file():
        pytest.skip("corpus not present")
    ts = formats.read_all(CORPUS_FILE)
    assert len(ts) == 300
    assert sum(len(t.messages) for t in ts) == 1914
    assert all(t.extra["layout"] == "records_array" and t.messages_key == "conversations" for t in ts)
    n_results = 0
    for t in ts:
        calls = {b.id for m in t.messages for b in m.tool_calls()}
        for m in t.messages:
            for b in m.tool_results():
                n_results += 1
                assert b.id in calls
        assert all(b.name for m in t.messages for b in m.tool_calls())
        assert isinstance(t.record, dict) and isinstance(t.record["tools"], str)
    assert n_results == 211


def test_sample_roles_and_pairing() -> None:
    ts = formats.read_all(SAMPLE)
    assert len(ts) == 3
    first = ts[0].messages
    assert first[0].role == "system" and first[0].extra.get("sharegpt_system")
    assert [m.role for m in first[1:4]] == ["user", "assistant", "tool"]
    call = first[2].content[0]
    assert (call.type, call.name, call.arguments) == (
        "tool_call",
        "get_weather",
        {"city": "Lisbon", "unit": "celsius"},
    )
    assert first[3].content[0].id == call.id
    # two calls in a row, then two results: paired by position
    second = ts[1].messages
    calls = [b for m in second for b in m.tool_calls()]
    results = [b for m in second for b in m.tool_results()]
    assert [c.name for c in calls] == ["convert_currency", "get_exchange_rate"]
    assert [r.id for r in results] == [c.id for c in calls]
    assert "40125.5" in results[0].text


# -- round trips -----------------------------------------------------------------
def test_unchanged_write_back(jsonl_copy: Path, object_copy: Path) -> None:
    for p in all_files(jsonl_copy, object_copy):
        out = write_bytes(formats.read_all(p))
        assert parse(out) == parse(p.read_bytes()), p
    assert write_bytes(formats.read_all(jsonl_copy)) == jsonl_copy.read_bytes()


def test_ctxtool_and_back(tmp_path: Path, jsonl_copy: Path, object_copy: Path) -> None:
    for p in all_files(jsonl_copy, object_copy):
        q = tmp_path / "canon.jsonl"
        q.write_bytes(write_bytes(formats.read_all(p), "ctxtool"))
        back = formats.read_all(q)
        assert back[0].format == "ctxtool"
        assert parse(write_bytes(back, "sharegpt")) == parse(p.read_bytes()), p


def test_all_dirty_rerender(tmp_path: Path, jsonl_copy: Path, object_copy: Path) -> None:
    for p in all_files(jsonl_copy, object_copy):
        ts = formats.read_all(p)
        before = signature(ts)
        for t in ts:
            for m in t.messages:
                m.touch()
        out = write_bytes(ts)
        # nothing changed, so the re-rendered records are the same JSON
        assert parse(out) == parse(p.read_bytes()), p
        q = tmp_path / ("dirty" + p.suffix)
        q.write_bytes(out)
        assert signature(formats.read_all(q, "sharegpt")) == before


def test_new_messages_render_and_read_back(tmp_path: Path) -> None:
    [t, *_] = formats.read_all(SAMPLE)
    new = [
        Message("user", [Block("text", text="And in Madrid?")], metadata=Metadata(kind="note")),
        Message("assistant", [Block("tool_call", name="get_weather", arguments={"city": "Madrid"})]),
        Message("tool", [Block("tool_result", text='{"temperature": 22}')]),
        Message("assistant", [Block("thinking", text="Warm."), Block("text", text="It's 22 °C in Madrid.")]),
    ]
    rendered = [sharegpt.FORMAT.render(m, t) for m in new]
    assert rendered[0] == [{"from": "human", "value": "And in Madrid?", "ctxtool": {"kind": "note"}}]
    assert rendered[1] == [
        {"from": "function_call", "value": '{"name": "get_weather", "arguments": {"city": "Madrid"}}'}
    ]
    assert rendered[2] == [{"from": "observation", "value": '{"temperature": 22}'}]
    assert rendered[3] == [{"from": "gpt", "value": "<think>Warm.</think>\n\nIt's 22 °C in Madrid."}]
    t.entries.extend(new)
    q = tmp_path / "new.json"
    q.write_bytes(write_bytes([t]))
    [back] = formats.read_all(q)
    tail = back.messages[-4:]
    assert [m.role for m in tail] == ["user", "assistant", "tool", "assistant"]
    assert tail[0].metadata.kind == "note"
    assert tail[1].content[0].name == "get_weather" and tail[1].content[0].arguments == {"city": "Madrid"}
    assert tail[2].content[0].id == tail[1].content[0].id
    assert [(b.type, b.text) for b in tail[3].content] == [
        ("thinking", "Warm."),
        ("text", "It's 22 °C in Madrid."),
    ]
    # synthetic ids are never written
    assert "call_" not in q.read_text()


def test_system_field_edit_and_removal() -> None:
    [t, *_] = formats.read_all(SAMPLE)
    t.messages[0].content[0].text = "You are terse."
    t.messages[0].touch()
    rec = parse(write_bytes([t]))[0]
    assert rec["system"] == "You are terse." and rec["conversations"][0]["from"] == "human"
    [t, *_] = formats.read_all(SAMPLE)
    t.remove({id(t.messages[0])})
    rec = parse(write_bytes([t]))[0]
    assert "system" not in rec and set(rec) == {"conversations", "tools"}


def test_parallel_calls_and_think_tags(tmp_path: Path) -> None:
    rec = {
        "conversations": [
            {"from": "human", "value": "Weather in A and B?"},
            {
                "from": "function_call",
                "value": '[{"name": "w", "arguments": {"c": "A"}}, {"name": "w", "arguments": {"c": "B"}}]',
            },
            {"from": "observation", "value": "sun"},
            {"from": "observation", "value": "rain"},
            {"from": "gpt", "value": "<think>\nA sunny, B rainy.\n</think>\n\nA: sun, B: rain."},
            {"from": "system", "value": "Conversation ended.", "loss": False},
        ]
    }
    p = tmp_path / "p.json"
    p.write_text(json.dumps([rec]))
    [t] = formats.read_all(p)
    ms = t.messages
    assert [b.name for b in ms[1].content] == ["w", "w"]
    assert [b.id for m in ms[2:4] for b in m.content] == [b.id for b in ms[1].content]
    assert [b.type for b in ms[4].content] == ["thinking", "text"] and ms[4].content[
        0
    ].text == "\nA sunny, B rainy.\n"
    assert ms[5].role == "system"
    for m in ms:
        m.touch()
    assert parse(write_bytes([t])) == [rec]
    ms[1].content[1].arguments = {"c": "C"}
    out = parse(write_bytes([t]))[0]["conversations"][1]["value"]
    assert json.loads(out) == [{"name": "w", "arguments": {"c": "A"}}, {"name": "w", "arguments": {"c": "C"}}]


def test_convert_openai_to_sharegpt(tmp_path: Path) -> None:
    p = SAMPLES / "openai_dataset.jsonl"
    out = parse(write_bytes(formats.read_all(p), "sharegpt"))
    assert isinstance(out, list) and len(out) == 3
    rec = out[0]
    assert rec["system"].startswith("You are an inventory assistant")
    assert [x["from"] for x in rec["messages"]] == ["human", "function_call", "observation", "gpt"]
    assert set(rec) == {"id", "messages", "metadata", "system"}
    q = tmp_path / "sg.json"
    q.write_text(json.dumps(out))
    back = formats.read_all(q)
    assert back[0].format == "sharegpt"
    # an assistant message with text and calls becomes a gpt turn and a function_call turn
    roles = [m.role for m in back[1].messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
