"""Hypothesis strategies for transcripts, shared by property tests.

``transcripts()`` draws model-level message lists: an optional system prompt, turns of
a user message (sometimes with an image, sometimes huge) followed by assistant steps
with parallel tool calls and their results (results sometimes missing, reordered,
duplicated or orphaned), and sometimes a trailing assistant with unanswered calls.

``openai_transcript(msgs)`` and ``canonical_transcript(msgs)`` write the messages in a
format and read them back, so every message has its source line (``raw`` bytes) the
way it has when read from a file; ``jsonl_bytes(t)`` writes a transcript back.

>>> from hypothesis import given
>>> @given(transcripts(clean=True))       # doctest: +SKIP
... def test_x(msgs): ...
"""

from __future__ import annotations

import io
from typing import Any

from hypothesis import strategies as st

from ctxtool.model import Block, Message, Transcript

_FILLER = "lorem ipsum dolor sit amet, consectetur adipiscing elit; "
IMAGE_DATA = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
TOOL_NAMES = ("bash", "read", "edit", "grep", "web_search")


def _text(n: int, tag: str) -> str:
    body = (_FILLER * (n // len(_FILLER) + 1))[:n]
    return f"{tag} {body}".rstrip()


class Msgs(list):  # type: ignore[type-arg]
    """A message list with a short repr (for hypothesis' falsifying examples)."""

    def __repr__(self) -> str:
        parts = []
        for m in self:
            bits = []
            for b in m.content:
                if b.type == "tool_call":
                    bits.append(f"call:{b.id}")
                elif b.type == "tool_result":
                    bits.append(f"result:{b.id}[{len(b.text)}]")
                else:
                    bits.append(f"{b.type}[{len(b.text)}]")
            parts.append(f"{m.role}({m.id}: {', '.join(bits)})")
        return "Msgs[" + "; ".join(parts) + "]"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


@st.composite
def _size(draw: Any, huge: bool) -> int:
    if huge and draw(st.integers(0, 9)) == 0:
        return draw(st.integers(20_000, 90_000))  # a huge single message
    return draw(st.integers(0, 600))


@st.composite
def transcripts(
    draw: Any,
    *,
    clean: bool = False,
    max_turns: int = 7,
    huge: bool = True,
    images: bool = True,
) -> list[Message]:
    """A list of messages; ``clean=True`` gives every call exactly one result and no orphans."""
    msgs: list[Message] = Msgs()
    counter = {"m": 0, "c": 0}

    def mid() -> str:
        counter["m"] += 1
        return f"m{counter['m']}"

    def cid() -> str:
        counter["c"] += 1
        return f"call_{counter['c']}"

    if draw(st.booleans()):
        msgs.append(Message("system", [Block("text", text=_text(draw(_size(huge)) % 2000, "system"))], id=mid()))
    n_turns = draw(st.integers(1, max_turns))
    for turn in range(n_turns):
        content = [Block("text", text=_text(draw(_size(huge)), f"user{turn}"))]
        if images and draw(st.integers(0, 5)) == 0:
            content.append(Block("image", data=IMAGE_DATA))
        msgs.append(Message("user", content, id=mid()))
        if draw(st.integers(0, 9)) == 0:
            msgs.append(Message("system", [Block("text", text=_text(40, "note"))], id=mid()))
        for step in range(draw(st.integers(0, 4))):
            blocks: list[Block] = []
            if draw(st.integers(0, 3)) == 0:
                blocks.append(Block("thinking", text=_text(draw(st.integers(1, 300)), "think")))
            if draw(st.booleans()):
                blocks.append(Block("text", text=_text(draw(_size(huge)), f"a{turn}.{step}")))
            calls = [
                Block("tool_call", id=cid(), name=draw(st.sampled_from(TOOL_NAMES)),
                      arguments={"arg": _text(draw(st.integers(0, 80)), "x")})
                for _ in range(draw(st.integers(0, 3)))
            ]
            blocks.extend(calls)
            if not blocks:
                blocks.append(Block("text", text=f"a{turn}.{step}"))
            msgs.append(Message("assistant", blocks, id=mid()))
            order = list(calls)
            if len(order) > 1 and draw(st.booleans()):
                order = draw(st.permutations(order))
            for c in order:
                if not clean and draw(st.integers(0, 7)) == 0:
                    continue  # a missing result
                res = Message("tool", [Block("tool_result", id=c.id, text=_text(draw(_size(huge)), f"out:{c.id}"))],
                              id=mid())
                msgs.append(res)
                if not clean and draw(st.integers(0, 15)) == 0:
                    # a duplicated result
                    msgs.append(Message("tool", [Block("tool_result", id=c.id, text="again")], id=mid()))
            if not clean and draw(st.integers(0, 15)) == 0:
                msgs.append(Message("tool", [Block("tool_result", id=f"ghost_{counter['c']}", text="orphan")], id=mid()))
        if draw(st.booleans()):
            msgs.append(Message("assistant", [Block("text", text=_text(draw(_size(huge)), f"final{turn}"))], id=mid()))
    if not clean and draw(st.integers(0, 3)) == 0:
        calls = [Block("tool_call", id=cid(), name="bash", arguments={"cmd": "ls"}) for _ in range(draw(st.integers(1, 2)))]
        text = [Block("text", text="let me look")] if draw(st.booleans()) else []
        msgs.append(Message("assistant", text + calls, id=mid()))
    return msgs


# -- building transcripts as read from a file ----------------------------------------------


def _read_bytes(data: bytes, fmt: str) -> Transcript:
    from ctxtool import formats
    from ctxtool.formats.base import ErrorPolicy
    from ctxtool.io.jsonl import Source, _numbered

    it = _numbered(io.BytesIO(data))
    src = Source("mem.jsonl", "jsonl", _rest=it, size=len(data))
    first = next(it, None)
    if first is not None:
        from ctxtool.io.jsonl import loads
        from ctxtool.model import Line

        src.peek.append(Line(loads(first[1]), first[1], first[0]))
    ts = list(formats.get_format(fmt).read(src, ErrorPolicy()))
    assert len(ts) == 1
    return ts[0]


def jsonl_bytes(t: Transcript, fmt: str | None = None) -> bytes:
    from ctxtool import formats

    buf = io.BytesIO()
    formats.write([t], buf, fmt)
    return buf.getvalue()


def openai_transcript(msgs: list[Message]) -> Transcript:
    """The messages as an OpenAI chat JSONL file (one line per message; tool messages carry
    one result each) read back; message ids are not kept by this format."""
    t = Transcript("openai", entries=list(msgs), path="mem.jsonl")
    t.extra["layout"] = "entries_jsonl"
    for m in msgs:
        m.dirty = True
    return _read_bytes(jsonl_bytes(t), "openai")


def canonical_transcript(msgs: list[Message]) -> Transcript:
    """The messages as a ctxtool canonical JSONL file, read back (ids kept; messages built
    here have no source objects, so they stay marked as changed)."""
    t = Transcript("ctxtool", entries=list(msgs), path="mem.jsonl")
    t.extra["layout"] = "canonical"
    for m in msgs:
        m.dirty = True
    return _read_bytes(jsonl_bytes(t), "ctxtool")


def message_lines(t: Transcript) -> list[bytes]:
    """The source line bytes of each message, in message order (JSONL formats)."""
    out = []
    for m in t.messages:
        assert m.lines and m.lines[0].raw is not None, "message has no source bytes"
        out.append(m.lines[0].raw)
    return out


def round_trip_checks(data: bytes, suffix: str, fmt: str, load: Any) -> None:
    """What every format's property test asks of a generated file (``load`` parses it into
    comparable values): read as ``fmt``; written back equal, directly and through canonical
    JSONL; truncate then restore gives it back; every message written anew reads back as the
    same model."""
    import tempfile
    from pathlib import Path

    from ctxtool import formats
    from ctxtool.tool_outputs import files as tools_ops
    from ctxtool.tool_outputs.algorithms import Limits

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / ("in" + suffix)
        src.write_bytes(data)
        ts = list(formats.read(src))
        assert ts and ts[0].format == fmt
        same = io.BytesIO()
        formats.write(ts, same)
        assert load(same.getvalue().decode()) == load(data.decode())
        canon = Path(d) / "c.jsonl"
        formats.write_path(ts, canon, "ctxtool")
        back = io.BytesIO()
        formats.write(list(formats.read(canon)), back, fmt)
        assert load(back.getvalue().decode()) == load(data.decode())
        short, restored = Path(d) / ("short" + suffix), Path(d) / ("back" + suffix)
        tight = Limits(max_lines=2, max_bytes=80, max_chars=80, spill_threshold=40_000, max_line_length=40)
        tools_ops.truncate_file(str(src), str(short), limits=tight, include="all", cache=Path(d) / "cache")
        tools_ops.restore_file(str(short), str(restored), cache=Path(d) / "cache")
        assert load(restored.read_text()) == load(data.decode())
        # every message written anew reads back as the same model
        for t in ts:
            for m in t.messages:
                m.touch()
        again = io.BytesIO()
        formats.write(ts, again)
        src.write_bytes(again.getvalue())
        ts2 = list(formats.read(src, fmt))
        model = [[(m.role, [b.to_json() for b in m.content]) for m in t.messages] for t in ts]
        model2 = [[(m.role, [b.to_json() for b in m.content]) for m in t.messages] for t in ts2]
        assert model == model2
