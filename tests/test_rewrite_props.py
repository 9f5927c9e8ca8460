"""Hypothesis: a record an operation writes again keeps every field it did not change as
its source wrote it: numbers in any form and place (1.50, 1E5, -0, integers beyond 64
bits, items of arrays), strings with escapes and non-ASCII text, in the source's style
(Python's ``json.dumps`` defaults, or compact UTF-8).

Checked on window (drops messages) and truncate (cuts a tool output): the fields of the
record and of each kept message, read back exactly (``jsontext.parse_exact``: every
number with its text), are those of the source; truncate or trim, then restore, gives the
file back byte for byte, for dataset records, JSON documents and session files alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool import window_file
from ctxtool.io import jsontext
from ctxtool.tool_outputs import algorithms as toolout
from ctxtool.tool_outputs import files as tools_ops

NUMBER_TEXTS = st.one_of(
    st.integers(-(10**25), 10**25).map(str),
    st.sampled_from(["-0", "1.50", "1E5", "2.5e-07", "0.000005", "-0.0", "100.0", "1e400", "3.14159265358979323846"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
TEXT = st.text(alphabet=st.sampled_from(list('ab :,[]{}"\\/\n\té€😀0123456789.')), max_size=20)


def Raw(text: str) -> tuple[str, str]:  # noqa: N802
    """A number's source text, written as it is (a tuple: no JSON value is one)."""
    return ("number", text)


def _values(depth: int = 0) -> st.SearchStrategy[object]:
    leaf = st.one_of(st.none(), st.booleans(), NUMBER_TEXTS.map(Raw), TEXT)
    if depth >= 2:
        return leaf
    inner = _values(depth + 1)
    return st.one_of(leaf, st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=3))


def dumps(v: object, spaced: bool, ascii: bool) -> str:
    """JSON text with Python's separators (", ", ": ") or compact ones, non-ASCII escaped
    (\\uXXXX) or raw UTF-8: each of the four ways real files are written; a :func:`Raw`
    number as its text."""
    item, key = (", ", ": ") if spaced else (",", ":")
    if isinstance(v, tuple):
        return v[1]
    if isinstance(v, list):
        return "[" + item.join(dumps(x, spaced, ascii) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + item.join(json.dumps(k, ensure_ascii=ascii) + key + dumps(x, spaced, ascii) for k, x in v.items()) + "}"
    return json.dumps(v, ensure_ascii=ascii)


@st.composite
def records(draw: st.DrawFn) -> tuple[str, int]:
    spaced, ascii = draw(st.booleans()), draw(st.booleans())
    # the only non-ASCII text may be in the output that is cut: the style must not be lost with it
    accent = draw(st.sampled_from(["", "é", "€", "😀"]))
    extra = {f"x_{k}": draw(_values()) for k in range(draw(st.integers(1, 3)))}
    n = draw(st.integers(3, 6))
    msgs = []
    for i in range(n):
        m: dict[str, object] = {"role": "user", "content": f"task {i} " + "u" * 30}
        if draw(st.booleans()):
            m["meta"] = draw(_values())
        msgs.append(m)
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}]})
        out: dict[str, object] = {"role": "tool", "tool_call_id": f"call_{i}", "content": "\n".join(f"line {k}" + (accent if k == 30 else "") for k in range(60))}
        if draw(st.booleans()):
            out["meta"] = draw(_values())
        msgs.append(out)
    after = draw(st.integers(0, len(extra)))  # fields after the messages too: the list is found between
    keys = list(extra)
    rec = {**{k: extra[k] for k in keys[after:]}, "messages": msgs, **{k: extra[k] for k in keys[:after]}}
    return dumps(rec, spaced, ascii), n


SLOW = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
PROPS = settings(max_examples=250, deadline=None, suppress_health_check=SLOW)


def _exact(text: str) -> object:
    return jsontext.parse_exact(text)


def _same(a: object, b: object) -> bool:
    """Equal values, every number with the same text."""
    if isinstance(a, float | int) and not isinstance(a, bool):
        return type(b) is type(a) and (str(a) == str(b) if isinstance(a, jsontext.FloatText | jsontext.IntText) else a == b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _check(src: str, out_bytes: bytes) -> None:
    before, after = _exact(src), _exact(out_bytes.decode())
    assert isinstance(before, dict) and isinstance(after, dict)
    assert list(after) == list(before)
    for k in before:
        if k != "messages":
            assert _same(before[k], after[k]), k
    for m in after["messages"]:  # each kept message's own fields, as the source had them
        if "meta" in m:
            assert any(_same(m["meta"], o.get("meta")) for o in before["messages"]), m


@PROPS
@given(records(), st.sampled_from(["window", "truncate"]))
def test_a_rewritten_record_keeps_the_fields_it_did_not_change(tmp_path: Path, rec: tuple[str, int], op: str) -> None:
    src, n = rec
    p, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    p.write_text(src + "\n", encoding="utf-8")
    if op == "window":
        window_file(str(p), str(out), max_messages=4, max_chars=10**9)
    else:
        r = tools_ops.truncate_file(str(p), str(out), limits=toolout.Limits(max_lines=20), cache=str(tmp_path / "cache"))
        assert r.truncated == n
    _check(src, out.read_bytes())


def test_a_record_is_written_again_around_its_message_list(tmp_path: Path) -> None:
    """A changed record whose message list holds no number keeps every other field's bytes
    (``formats.base.splice_messages``): escapes and numbers as written, before and after the
    list, even where another field holds a ``messages`` key of its own or the next key's
    text inside a string."""
    msgs = [{"role": "user", "content": 'say "messages": [1] and , "z": 2'},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "\n".join(f"line {k}" for k in range(60))}]
    head = '{"meta": {"messages": [1.50, -0]}, "w": "caf\\u00E9 \\/", "messages": '
    tail = ', "z": 1E5, "y": [0, -0]}'
    p, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    p.write_text(head + json.dumps(msgs) + tail + "\n", encoding="utf-8")
    r = tools_ops.truncate_file(str(p), str(out), limits=toolout.Limits(max_lines=20), cache=str(tmp_path / "cache"))
    assert r.truncated == 1
    data = out.read_bytes()
    assert data.startswith(head.encode()) and data.endswith(tail.encode() + b"\n")
    got = json.loads(data)
    assert got["messages"][:2] == msgs[:2] and got["messages"][2]["content"].startswith("line 0\nline 1\n")


@pytest.mark.parametrize("fast", [True, False])
def test_only_the_numbers_of_messages_still_there_decide_the_splice(tmp_path: Path, fast: bool) -> None:
    """A float in a message window drops does not stop the splice (it is not written again);
    one in a message it keeps does, and the exact writer keeps its text."""
    head = '{"w": "caf\\u00E9 \\/", "messages": '
    old = {"role": "user", "content": "old", "weight": 0.50}
    msgs = [{"role": "user", "content": f"turn {k}"} for k in range(6)]
    p, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    p.write_text(head + json.dumps([old, *msgs]).replace("0.5", "0.50") + "}\n")
    window_file(str(p), str(out), max_messages=2, max_chars=10**9, keep_first_user=False, fast=fast)
    assert out.read_bytes().startswith(head.encode()) and b"0.50" not in out.read_bytes()
    p.write_text(head + json.dumps([*msgs, old]).replace("0.5", "0.50") + "}\n")
    window_file(str(p), str(out), max_messages=2, max_chars=10**9, keep_first_user=False, fast=fast)
    data = out.read_bytes()
    assert b'"weight": 0.50' in data and json.loads(data)["messages"][-1]["content"] == "old"


def test_a_record_with_a_field_nested_too_deep_to_compare_is_written_whole(tmp_path: Path) -> None:
    """The splice's check compares the record's other fields; one nested 1,000 deep (beyond
    Python's comparison depth) sends the record to the exact writer, which handles it."""
    msgs = [{"role": "user", "content": f"turn {k}"} for k in range(6)]
    deep = "[" * 1000 + "]" * 1000
    p, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    p.write_text('{"x": ' + deep + ', "messages": ' + json.dumps(msgs) + "}\n")
    window_file(str(p), str(out), max_messages=2, max_chars=10**9)
    assert out.read_bytes().startswith(b'{"x": ' + deep.encode() + b', "messages": [')


def test_fields_with_one_fast_value_keep_their_own_text(tmp_path: Path) -> None:
    """orjson reads "0" and "-0" as one object: each field gets the exact value of its key."""
    msgs = [{"role": "user", "content": f"turn {k}"} for k in range(6)]
    p, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    p.write_text('{"a": 0, "b": -0, "c": [0, -0], "messages": ' + json.dumps(msgs) + "}\n")
    window_file(str(p), str(out), max_messages=2, max_chars=10**9)
    assert out.read_bytes().startswith(b'{"a": 0, "b": -0, "c": [0, -0], "messages": [')


@PROPS
@given(records(), st.sampled_from(["truncate", "trim"]))
def test_restore_gives_the_record_back_byte_for_byte(tmp_path: Path, rec: tuple[str, int], op: str) -> None:
    """truncate or trim, then restore: the file as it was (the stash keeps each message's
    numbers exact, and restore makes the record exact before writing it again)."""
    src, n = rec
    p, out, back = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "back.jsonl"
    p.write_text(src + "\n", encoding="utf-8")
    cache = str(tmp_path / "cache")
    if op == "truncate":
        tools_ops.truncate_file(str(p), str(out), limits=toolout.Limits(max_lines=20), cache=cache)
    else:
        tools_ops.trim_file(str(p), str(out), budget=50, cache=cache)
    assert out.read_bytes() != p.read_bytes()
    tools_ops.restore_file(str(out), str(back), cache=cache)
    assert back.read_bytes() == p.read_bytes()


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW)
@given(st.lists(records(), min_size=1, max_size=3), st.sampled_from([None, 2, 4]), st.booleans(), st.booleans())
def test_a_document_comes_back_byte_for_byte(tmp_path: Path, recs: list[tuple[str, int]], indent: int | None,
                                             ascii: bool, final_newline: bool) -> None:
    """A JSON array of records, indented or on one line, escaped or raw, ending with a newline
    or not: truncate, then restore, gives the file back."""
    objs = [jsontext.parse_exact(r) for r, _ in recs]
    data = jsontext.encode(objs, jsontext.Style(",", ": " if indent else ":", ascii, indent)) + (b"\n" if final_newline else b"")
    p, out, back = tmp_path / "in.json", tmp_path / "out.json", tmp_path / "back.json"
    p.write_bytes(data)
    tools_ops.truncate_file(str(p), str(out), limits=toolout.Limits(max_lines=20), cache=str(tmp_path / "cache"))
    assert out.read_bytes() != data
    tools_ops.restore_file(str(out), str(back), cache=str(tmp_path / "cache"))
    assert back.read_bytes() == data


SESSION_SAMPLES = ["claude_code_session.jsonl", "codex_rollout.jsonl", "codex_desktop_rollout.jsonl", "pi_session.jsonl",
                   "gemini-jsonl_session.jsonl", "responses_items.jsonl"]


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW)
@given(st.sampled_from(SESSION_SAMPLES), st.data())
def test_a_session_file_with_any_numbers_comes_back_byte_for_byte(tmp_path: Path, name: str, data: st.DataObject) -> None:
    """Session files (a JSON line per entry) with a field of any value added to some lines, in
    the line's own style: truncate everything it can, then restore, gives the file back."""
    src = Path(__file__).resolve().parent.parent / "samples" / name
    lines = []
    for raw in src.read_bytes().splitlines():
        if raw.strip() and data.draw(st.booleans()):
            text = raw.decode()
            spaced = '", "' in text[:200]
            text = text[:-1] + (", " if spaced else ",") + '"x_extra"' + (": " if spaced else ":") + dumps(data.draw(_values()), spaced, False) + "}"
            raw = text.encode()
        lines.append(raw)
    p, out, back = tmp_path / ("in" + src.suffix), tmp_path / ("out" + src.suffix), tmp_path / ("back" + src.suffix)
    p.write_bytes(b"\n".join(lines) + b"\n")
    tools_ops.truncate_file(str(p), str(out), limits=toolout.Limits(max_lines=3, max_bytes=200), include="all",
                            cache=str(tmp_path / "cache"))
    tools_ops.restore_file(str(out), str(back), cache=str(tmp_path / "cache"))
    assert back.read_bytes() == p.read_bytes()
