"""truncate / trim / restore over transcripts: lossless round trips on every corpus file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import all_transcript_params, source_items

from ctxtool import formats
from ctxtool.cache import RefCache
from ctxtool.errors import CtxtoolError
from ctxtool.io.events import EventLog
from ctxtool.model import Block, Message, Transcript
from ctxtool.tool_outputs.algorithms import PRESETS, Limits
from ctxtool.tool_outputs.common import default_budget, parse_include
from ctxtool.tool_outputs.files import restore_file, trim_file, truncate_file
from ctxtool.tool_outputs.restore import restore_transcript
from ctxtool.tool_outputs.truncate import trim_transcript, truncate_transcript

# tight limits so that every file has something to cut
TIGHT = Limits(max_lines=20, max_bytes=2000, max_chars=3000, spill_threshold=40_000, max_line_length=300)


def items_of(p: Path) -> list:  # type: ignore[type-arg]
    return source_items(p)[0]


@pytest.mark.parametrize("path", all_transcript_params())
def test_truncate_then_restore_is_lossless(path: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    short = tmp_path / ("short" + path.suffix)
    back = tmp_path / ("back" + path.suffix)
    ev = EventLog(tmp_path / "events.jsonl")
    rep = truncate_file(str(path), str(short), limits=TIGHT, include="all", cache=cache, events=ev)
    assert rep.tokens_after <= rep.tokens_before
    rep2 = restore_file(str(short), str(back), cache=cache)
    assert (rep2.restored > 0) == bool(ev.events)
    assert back.read_bytes() == path.read_bytes()  # the file as it was, byte for byte
    if rep.truncated + rep.spilled:
        assert (tmp_path / "events.jsonl").exists()
        assert short.read_bytes() != path.read_bytes()


@pytest.mark.parametrize("path", all_transcript_params())
def test_trim_then_restore_is_lossless(path: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    short = tmp_path / ("trim" + path.suffix)
    back = tmp_path / ("back" + path.suffix)
    rep = trim_file(str(path), str(short), budget=500, cache=cache)
    assert rep.tokens_after <= rep.tokens_before
    restore_file(str(short), str(back), cache=cache)
    # byte for byte: how the file was written (escaping, layout) comes back with the stash,
    # even when the text that showed it was trimmed (samples/anthropic_request.json)
    assert back.read_bytes() == path.read_bytes()


def test_truncated_message_carries_refs_and_notice(tmp_path: Path) -> None:
    big = "\n".join(f"line {i}" for i in range(1000))
    src = tmp_path / "chat.jsonl"
    rows = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": big},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    ev = EventLog()
    rep = truncate_file(str(src), str(out), limits=PRESETS.get("head-tail"), cache=tmp_path / "c", events=ev)
    assert rep.truncated == 1 and rep.bytes_saved > 0 and rep.tokens_saved > 0
    t = next(formats.read(out))
    tool = t.messages[-1]
    text = tool.content[0].text
    assert text.startswith("line 0\n") and "[... omitted 744 of 1,000 lines ...]" in text
    assert "line 999" in text
    ref = tool.metadata.output_ref
    assert ref is not None and ref["line_count"] == 1000 and ref["byte_size"] == len(big.encode())
    assert f"ref={ref['id']}" in text and "original 1,000 lines" in text
    assert RefCache(tmp_path / "c").read_text(ref["id"]) == big
    (e,) = ev.events
    assert e["event"] == "truncate" and e["tool"] == "bash" and e["ref"] == ref["id"]
    assert e["bytes_before"] > e["bytes_after"]


def _transcript(outputs: list[str]) -> Transcript:
    t = Transcript("openai")
    for i, o in enumerate(outputs):
        t.entries.append(Message("assistant", [Block("tool_call", id=f"c{i}", name="read", arguments="{}")], id=f"a{i}"))
        t.entries.append(Message("tool", [Block("tool_result", id=f"c{i}", text=o)], id=f"t{i}"))
    return t


def test_trim_oldest_first_keeps_newest(tmp_path: Path) -> None:
    t = _transcript(["a" * 4000, "b" * 4000, "c" * 4000, "d" * 4000])  # 1000 tokens each
    cache = RefCache(tmp_path)
    rep = trim_transcript(t, 2500, cache)
    texts = [m.content[0].text for m in t.messages if m.role == "tool"]
    assert texts[0].startswith("[tool output trimmed; ref=") and texts[1].startswith("[tool output trimmed; ref=")
    assert texts[2] == "c" * 4000 and texts[3] == "d" * 4000
    assert rep.trimmed == 2 and rep.tokens_before == 4000 and rep.tokens_after <= 2500
    ref = t.messages[1].metadata.output_ref["id"]
    assert cache.read_text(ref) == "a" * 4000
    # the newest output is kept even when it alone exceeds the budget
    t2 = _transcript(["x" * 40_000])
    assert trim_transcript(t2, 100, cache).trimmed == 0
    # restore brings every output back
    restore_transcript(t, cache)
    assert [m.content[0].text for m in t.messages if m.role == "tool"] == ["a" * 4000, "b" * 4000, "c" * 4000, "d" * 4000]


def test_trim_after_truncate_points_at_the_full_output(tmp_path: Path) -> None:
    big = "\n".join(str(i) for i in range(5000))
    t = _transcript([big, "small"])
    cache = RefCache(tmp_path)
    truncate_transcript(t, PRESETS.get("head-tail"), cache)
    first_ref = t.messages[1].metadata.output_ref["id"]
    trim_transcript(t, 1, cache)
    assert t.messages[1].content[0].text == f"[tool output trimmed; ref={first_ref}; read it with tool_output_cache]"
    restore_transcript(t, cache)
    assert t.messages[1].content[0].text == big


def test_include_kinds(tmp_path: Path) -> None:
    t = Transcript("openai")
    t.entries.append(Message("assistant", [Block("thinking", text="t" * 100_000), Block("tool_call", id="c", name="w", arguments={"body": "z" * 100_000})]))
    t.entries.append(Message("tool", [Block("tool_result", id="c", text="ok")]))
    cache = RefCache(tmp_path)
    rep = truncate_transcript(t, Limits(), cache)
    assert rep.changed == 0 and rep.outputs == 1
    rep = truncate_transcript(t, Limits(), cache, include=parse_include("thinking,tool_call"))
    assert rep.truncated == 2
    assert len(t.messages[0].content[0].text) < 60_000
    assert isinstance(t.messages[0].content[1].arguments, str)
    restore_transcript(t, cache)
    assert t.messages[0].content[1].arguments == {"body": "z" * 100_000}
    with pytest.raises(CtxtoolError):
        parse_include("videos")


def test_default_budget() -> None:
    assert default_budget(None) is None
    assert default_budget(32_000) == 20_000
    assert default_budget(128_000) == 32_000
    assert default_budget(1_000_000) == 60_000


def test_output_may_not_overwrite_input(tmp_path: Path) -> None:
    p = tmp_path / "a.jsonl"
    p.write_text('{"role":"user","content":"hi"}\n')
    with pytest.raises(CtxtoolError, match="overwrite the input"):
        truncate_file(str(p), str(p), cache=tmp_path / "c")


def test_restore_refuses_a_corrupted_stash(tmp_path: Path) -> None:
    src = tmp_path / "chat.jsonl"
    src.write_text(json.dumps({"role": "tool", "tool_call_id": "x", "content": "y\n" * 5000}) + "\n")
    out = tmp_path / "out.jsonl"
    truncate_file(str(src), str(out), cache=tmp_path / "c", limits=PRESETS.get("head-tail"))
    msg = next(formats.read(out)).messages[0]
    cache = RefCache(tmp_path / "c")
    cache.path_for(msg.metadata.extra["source_ref"]).write_bytes(b"{}")
    with pytest.raises(CtxtoolError, match="corrupted"):
        restore_file(str(out), str(tmp_path / "back.jsonl"), cache=cache)
    assert not (tmp_path / "back.jsonl").exists()


def test_truncate_to_another_format_and_restore(tmp_path: Path) -> None:
    src = tmp_path / "chat.jsonl"
    rows = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out\n" * 3000},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    canon = tmp_path / "c.jsonl"
    truncate_file(str(src), str(canon), to="ctxtool", cache=tmp_path / "c", limits=PRESETS.get("head-tail"))
    back = tmp_path / "back.jsonl"
    restore_file(str(canon), str(back), to="openai", cache=tmp_path / "c")
    assert items_of(back) == rows


@pytest.mark.parametrize("path", all_transcript_params())
def test_stashes_point_at_output_refs_instead_of_copying_them(path: Path, tmp_path: Path) -> None:
    """A message's source stash must not hold its cut outputs a second time (the cache would
    double); restore still gives the input back (checked above for every file)."""
    cache = RefCache(tmp_path / "cache")
    truncate_file(str(path), None, limits=TIGHT, cache=cache)
    man = cache.manifest()
    outputs = [cache.read_text(r) for r, i in man.items() if i.kind == "output"]
    big = [o for o in outputs if len(o) >= 256]
    stashes = [cache.read_bytes(r) for r, i in man.items() if i.kind == "source"]
    if big:
        assert stashes
    for s in stashes:
        for o in big:
            assert json.dumps(o, ensure_ascii=False)[1:-1].encode() not in s
            assert json.dumps(o)[1:-1].encode() not in s


@pytest.mark.parametrize("op", ["truncate", "trim"])
def test_a_message_nested_as_deep_as_the_readers_accept_is_stashed_and_restored(op: str, tmp_path: Path) -> None:
    """A tool result with a field nested 1,000 levels deep (orjson reads 1,024): its stash is
    walked for the texts already in refs without running out of frames (the bad-input suite,
    seed 4242, case 2338: an internal error before)."""
    deep = "[" * 1000 + "1" + "]" * 1000
    big = json.dumps("\n".join(f"line {i}" for i in range(300)))
    src = tmp_path / "deep.jsonl"
    src.write_text('{"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": null, "tool_calls": '
                   '[{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}, '
                   '{"role": "tool", "tool_call_id": "c1", "content": ' + big + ', "meta": ' + deep + "}, "
                   '{"role": "assistant", "content": null, "tool_calls": [{"id": "c2", "type": "function", "function": '
                   '{"name": "bash", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c2", "content": "ok"}]}\n')
    short, back = tmp_path / "short.jsonl", tmp_path / "back.jsonl"
    if op == "truncate":
        truncate_file(str(src), str(short), limits=TIGHT, cache=tmp_path / "c")
    else:
        trim_file(str(src), str(short), budget=10, cache=tmp_path / "c")
    assert len(short.read_bytes()) < len(src.read_bytes())
    restore_file(str(short), str(back), cache=tmp_path / "c")
    assert back.read_bytes() == src.read_bytes()
