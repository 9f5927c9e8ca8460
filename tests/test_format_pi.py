"""The pi session format: detection, lossless round trips, re-linking, compaction entries."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import CORPUS, SAMPLES, corpus_files, write_bytes

from ctxtool import formats
from ctxtool.formats import pi
from ctxtool.formats.base import ErrorPolicy
from ctxtool.io.jsonl import open_source
from ctxtool.model import Block, Compaction, Message, Metadata, Record, Transcript, Usage

SAMPLE = SAMPLES / "pi_session.jsonl"
CORPUS_FILE = CORPUS / "pi" / "pi_before-compaction.jsonl"


def pi_files() -> list:  # type: ignore[type-arg]
    params = [pytest.param(SAMPLE, id="samples/pi_session.jsonl")]
    files = sorted((CORPUS / "pi").glob("*.jsonl")) if (CORPUS / "pi").is_dir() else []
    return params + [pytest.param(p, id=f"pi/{p.name}") for p in files]


def lines_of(data: bytes) -> list:  # type: ignore[type-arg]
    return [json.loads(x) for x in data.splitlines() if x.strip()]


def read_one(p: Path) -> Transcript:
    ts = list(formats.read(p))
    assert len(ts) == 1
    return ts[0]


def reread(data: bytes, tmp_path: Path, name: str = "out.jsonl") -> Transcript:
    p = tmp_path / name
    p.write_bytes(data)
    ts = list(formats.read(p))
    assert len(ts) == 1
    return ts[0]


def shape(t: Transcript) -> list[tuple]:  # type: ignore[type-arg]
    return [
        (m.role, m.id, [(b.type, b.text, b.id, b.name if b.type == "tool_call" else None, b.arguments) for b in m.content])
        for m in t.messages
    ]


def need_corpus() -> Path:
    if not CORPUS_FILE.exists():
        pytest.skip("../shared/corpus not present")
    return CORPUS_FILE


@pytest.mark.parametrize("path", pi_files())
def test_detected(path: Path) -> None:
    assert formats.detect(open_source(path)).name == "pi"


@pytest.mark.parametrize("path", pi_files())
def test_unchanged_round_trip_is_byte_identical(path: Path) -> None:
    out = write_bytes([read_one(path)])
    src = path.read_bytes()
    assert lines_of(out) == lines_of(src)
    assert out == b"".join(x + b"\n" for x in src.splitlines() if x.strip())


@pytest.mark.parametrize("path", pi_files())
def test_canonical_round_trip(path: Path, tmp_path: Path) -> None:
    t = read_one(path)
    back = reread(write_bytes([t], "ctxtool"), tmp_path, "canon.jsonl")
    assert back.format == "ctxtool" and back.id == t.id
    assert back.extra["session"] == t.extra["session"]
    assert lines_of(write_bytes([back], "pi")) == lines_of(path.read_bytes())


@pytest.mark.parametrize("path", pi_files())
def test_dirty_messages_render_like_the_source(path: Path, tmp_path: Path) -> None:
    t = read_one(path)
    before = shape(t)
    for m in t.messages:
        m.touch()
    for c in t.compactions:
        c.dirty = True
    out = write_bytes([t])
    assert lines_of(out) == lines_of(path.read_bytes())
    assert shape(reread(out, tmp_path)) == before


def test_corpus_counts() -> None:
    t = read_one(need_corpus())
    assert len(t.messages) == 990
    bash = [m for m in t.messages if m.extra.get("bash_execution")]
    roles = Counter(m.role for m in t.messages if not m.extra.get("bash_execution"))
    assert roles == {"user": 55, "assistant": 484, "tool": 448}
    assert len(bash) == 3 and all(m.role == "user" and m.text().startswith("$ ") for m in bash)
    assert bash[0].text().startswith("$ ls\nAGENTS.md\n")
    assert len(t.compactions) == 2
    c = t.compactions[0]
    assert c.tokens_before == 175004 and c.details == {"firstKeptEntryIndex": 293} and c.first_kept_id is None
    assert c.summary.startswith("# Context Checkpoint")
    assert t.id == "ffae836b-9420-4060-ac13-7745215f90ff"
    assert t.extra["session"]["cwd"] == "/Users/badlogic/workspaces/pi-mono"
    kinds = Counter(e.kind for e in t.entries if isinstance(e, Record))
    assert kinds == {"session": 1, "model_change": 5, "thinking_level_change": 5}
    calls = [b for m in t.messages for b in m.tool_calls()]
    results = [b for m in t.messages for b in m.tool_results()]
    assert len(calls) == 454 and len(results) == 448
    assert sum(b.is_error for b in results) == 12
    first = t.messages[1]
    assert first.model == "claude-opus-4-5"
    assert first.usage == Usage(input=2775, output=141, cache_creation=0, cache_read=0)


def test_sample_shape() -> None:
    t = read_one(SAMPLE)
    assert t.extra["pi_style"] == "ids"
    assert [m.id for m in t.messages][:2] == ["e02d6a95", "7a3f5c10"]
    [c] = t.compactions
    assert c.first_kept_id == "0b7c3e18" and c.tokens_before == 8350
    assert c.details["details"]["modifiedFiles"] == ["src/tidewater/stations.py", "tests/test_stations.py"]
    kept = next(m for m in t.messages if m.id == "0b7c3e18")
    assert kept.role == "user" and kept.text() == "run the whole suite"
    err = [b for m in t.messages for b in m.tool_results() if b.is_error]
    assert len(err) == 1 and err[0].name == "bash"
    assert max(len(b.text) for m in t.messages for b in m.tool_results()) > 2000
    assert t.messages[-1].usage == Usage(input=3, output=142, cache_creation=1187, cache_read=2310)


def test_sniff_rejects_other_formats() -> None:
    others = [p for p in corpus_files() if p.parent.name != "pi"] + [
        p for p in SAMPLES.glob("*") if p.is_file() and not p.name.startswith("pi")
    ]
    for p in others:
        try:
            src = open_source(p)
        except Exception:  # noqa: BLE001 - not a transcript at all
            continue
        assert pi.FORMAT.sniff(src.sample(), src) == 0, p


def new_pair() -> list[Message]:
    return [
        Message(
            "assistant",
            [
                Block("thinking", text="Check the README."),
                Block("text", text="Reading the README."),
                Block("tool_call", id="toolu_new", name="read", arguments='{"path": "README.md"}'),
            ],
            usage=Usage(input=5, output=20, cache_read=100),
            model="claude-sonnet-4-5",
            metadata=Metadata(kind="note"),
        ),
        Message("tool", [Block("tool_result", id="toolu_new", name="read", text="# tidewater\n")]),
    ]


def test_new_messages_are_linked_into_the_tree(tmp_path: Path) -> None:
    t = read_one(SAMPLE)
    pos = next(i for i, e in enumerate(t.entries) if isinstance(e, Message) and e.role == "tool")
    t.entries[pos + 1 : pos + 1] = new_pair()
    out = write_bytes([t])
    assert write_bytes([t]) == out  # deterministic ids and timestamps
    objs = lines_of(out)
    assert objs[0]["type"] == "session"
    prev = None
    for o in objs[1:]:
        assert o["parentId"] == prev  # still one linear branch
        prev = o["id"]
    assert len({o["id"] for o in objs[1:]}) == len(objs) - 1
    new = [o for o in objs if o.get("type") == "message" and "toolu_new" in json.dumps(o)]
    assert new[0]["message"]["content"][2] == {"type": "toolCall", "id": "toolu_new", "name": "read", "arguments": {"path": "README.md"}}
    assert new[0]["message"]["usage"]["cacheRead"] == 100 and new[0]["message"]["stopReason"] == "toolUse"
    assert new[1]["message"]["role"] == "toolResult" and new[1]["message"]["toolName"] == "read"
    back = reread(out, tmp_path)
    msgs = back.messages
    i = next(k for k, m in enumerate(msgs) if m.tool_calls() and m.tool_calls()[0].id == "toolu_new")
    a, r = msgs[i], msgs[i + 1]
    assert [(b.type, b.text) for b in a.content[:2]] == [("thinking", "Check the README."), ("text", "Reading the README.")]
    assert a.metadata.kind == "note" and a.usage == Usage(5, 20, 0, 100) and a.model == "claude-sonnet-4-5"
    assert r.role == "tool" and r.tool_results()[0].text == "# tidewater\n"
    assert back.compactions[0].first_kept_id == "0b7c3e18"


def test_removed_message_relinks(tmp_path: Path) -> None:
    t = read_one(SAMPLE)
    doomed = next(m for m in t.messages if m.extra.get("bash_execution"))
    t.remove({id(doomed)})
    objs = lines_of(write_bytes([t]))
    for a, b in zip(objs[1:], objs[2:], strict=False):
        assert b["parentId"] == a["id"]
    assert len(reread(write_bytes([t]), tmp_path).messages) == 14


def test_index_style_keeps_first_kept_entry(tmp_path: Path) -> None:
    t = read_one(need_corpus())
    kept = t.entries[293]
    assert isinstance(kept, Message) and kept.text() == "i reviwed what we have, it's good. continue"
    t.entries[5:5] = new_pair()
    doomed = t.messages[20]
    t.remove({id(doomed)})
    objs = lines_of(write_bytes([t]))
    comps = [o for o in objs if o["type"] == "compaction"]
    assert [c["firstKeptEntryIndex"] for c in comps] == [294, 552]
    assert objs[294]["message"]["content"][0]["text"] == kept.text()
    assert all("id" not in o and "parentId" not in o for o in objs[1:])  # version 1 entries have no ids
    back = reread(write_bytes([t]), tmp_path)
    assert len(back.messages) == 991


def test_render_compaction_both_styles(tmp_path: Path) -> None:
    t = read_one(SAMPLE)
    t.entries.append(Compaction(summary="## Goal\nShip it.", first_kept_id="0b7c3e18", tokens_before=9100))
    o = lines_of(write_bytes([t]))[-1]
    assert o["type"] == "compaction" and o["firstKeptEntryId"] == "0b7c3e18" and o["tokensBefore"] == 9100
    assert o["parentId"] == lines_of(SAMPLE.read_bytes())[-1]["id"] and o["timestamp"].startswith("2025-11-05")
    assert reread(write_bytes([t]), tmp_path).compactions[-1].summary == "## Goal\nShip it."

    t1 = read_one(need_corpus())
    c = t1.compactions[1]
    c.dirty = True
    c.summary = "shorter"
    objs = lines_of(write_bytes([t1]))
    assert objs[628] == {**lines_of(CORPUS_FILE.read_bytes())[628], "summary": "shorter"}


def test_convert_from_another_format(tmp_path: Path) -> None:
    t = Transcript("openai", id="conv-1")
    t.entries = [
        Message("system", [Block("text", text="You are a helpful agent.")]),
        Message("user", [Block("text", text="List files")]),
        Message("assistant", [Block("tool_call", id="c1", name="ls", arguments={"path": "."})], usage=Usage(100, 10)),
        Message("tool", [Block("tool_result", id="c1", name="ls", text="a.py\nb.py")]),
        Message("assistant", [Block("text", text="Two files.")]),
    ]
    out = write_bytes([t], "pi")
    objs = lines_of(out)
    assert objs[0] == {"type": "session", "version": 3, "id": "conv-1", "timestamp": "1970-01-01T00:00:00.000Z", "cwd": ""}
    assert objs[1]["type"] == "custom_message" and objs[1]["customType"] == "ctxtool.system"
    back = reread(out, tmp_path)
    assert back.format == "pi"
    assert [(m.role, [(b.type, b.text, b.id) for b in m.content]) for m in back.messages] == [
        (m.role, [(b.type, b.text, b.id) for b in m.content]) for m in t.messages
    ]


def test_bad_lines(tmp_path: Path) -> None:
    data = SAMPLE.read_bytes().splitlines()
    data.insert(4, b'{"type":"message","id":"x","parentId":null,"timestamp":"t"}')
    data.insert(4, b'"just a string"')
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"\n".join(data) + b"\n")
    with pytest.raises(Exception, match=r"bad\.jsonl:5"):
        list(formats.read(p, "pi"))
    policy = ErrorPolicy("skip")
    [t] = list(formats.read_source(open_source(p), "pi", policy))
    assert [e.line for e in policy.skipped] == [5, 6]
    assert len(t.messages) == 15


@pytest.mark.parametrize("summary", ["NaN", "12", "[\"a\"]", "{\"text\": \"a\"}"])
def test_a_compaction_whose_summary_is_not_text_is_an_input_error(summary: str, tmp_path: Path) -> None:
    """A compaction entry's summary of another type is the source's shape: one error naming
    the line (exit 3), not an internal error when its tokens are counted (bad-input suite,
    seed 5150, case 4340: "summary": NaN through `check`)."""
    import subprocess
    import sys

    lines = SAMPLE.read_text().splitlines()
    k = next(i for i, x in enumerate(lines) if json.loads(x).get("type") == "compaction")
    lines[k] = re.sub(r'"summary":"(?:[^"\\]|\\.)*"', '"summary":' + summary, lines[k], count=1)
    assert '"summary":' + summary in lines[k]
    bad = tmp_path / "pi.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    for cmd in (["check", "--context-window", "4000"], ["stats"], ["compact", "--dry-run"]):
        r = subprocess.run([sys.executable, "-m", "ctxtool", *cmd, str(bad)], capture_output=True, text=True)
        assert r.returncode == 3, (cmd, r.stderr)
        assert r.stderr.strip().splitlines() == [r.stderr.strip()] and f"pi.jsonl:{k + 1}: malformed pi entry" in r.stderr
