"""ctxtool's own canonical JSONL (schema: ``schemas/transcript.schema.json``): a ``transcript``
header line per transcript, then its ``message``, ``record``, ``continuation`` and ``compaction``
entries; messages keep their source objects, so a file converted to it and back is reproduced."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..io.jsonl import Source
from ..model import Block, Compaction, Cont, Line, Message, Metadata, Record, Transcript, Usage
from .base import RECORD_ERRORS, CompactionNote, ErrorPolicy, Format, exact_obj

SCHEMA_VERSION = 1


def message_from_json(d: dict[str, Any]) -> Message:
    usage = d.get("usage")
    msg = Message(
        role=d["role"],
        content=[Block.from_json(b) for b in d.get("content", [])],
        id=d.get("id"),
        metadata=Metadata.from_json(d.get("metadata")),
        usage=Usage.from_json(usage) if isinstance(usage, dict) else None,
        usage_key=d.get("usage_key"),
        model=d.get("model"),
        extra=dict(d.get("hints") or {}),
    )
    src = d.get("source")
    if isinstance(src, list):
        msg.lines = [Line(o) for o in src]
    return msg


def message_to_json(m: Message, *, with_source: bool = True) -> dict[str, Any]:
    d = m.to_json()
    if m.usage_key is not None:
        d["usage_key"] = m.usage_key
    if m.extra:
        d["hints"] = m.extra
    if with_source and m.lines and not m.dirty:
        d["source"] = [exact_obj(ln) for ln in m.lines]
    return d


class CanonicalFormat(Format):
    name = "ctxtool"
    description = "ctxtool canonical JSONL (one header line per transcript, then its entries)"
    reads = "JSONL"
    default_layout = "canonical"

    def sniff(self, sample: list[Any], src: Source) -> int:
        if src.layout == "jsonl" and sample and isinstance(sample[0], dict):
            if sample[0].get("type") == "transcript" and "ctxtool" in sample[0]:
                return 100
        return 0

    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        if src.layout != "jsonl":
            raise CtxtoolError("ctxtool canonical transcripts are JSON Lines", path=src.path)
        cur: Transcript | None = None
        n = 0
        for ln in src.lines(policy):
            o = exact_obj(ln)  # source objects are written again: every number as written
            typ = o.get("type") if isinstance(o, dict) else None
            try:
                if typ == "transcript":
                    if cur is not None:
                        yield cur
                    cur = Transcript(
                        format="ctxtool",
                        path=src.path,
                        index=n,
                        id=o.get("id"),
                        record=o.get("record"),
                        messages_key=o.get("messages_key"),
                        lineno=ln.lineno,
                        extra={
                            "source_format": o.get("source_format"),
                            "source_layout": o.get("source_layout"),
                            **({"source_style": o["source_style"]} if isinstance(o.get("source_style"), dict) else {}),
                            **({"session": o["session"]} if "session" in o else {}),
                        },
                    )
                    n += 1
                    continue
                if cur is None:
                    raise CtxtoolError("entry before the first 'transcript' header", path=src.path, line=ln.lineno)
                if typ == "message":
                    m = message_from_json(o)
                    if not m.lines:
                        m.dirty = True
                    cur.entries.append(m)
                elif typ == "record":
                    cur.entries.append(Record(Line(o.get("source")), kind=o.get("kind", "")))
                elif typ == "continuation":
                    target = cur.entries[int(o["entry"])]
                    if not isinstance(target, Message):
                        raise CtxtoolError("continuation does not point at a message", path=src.path, line=ln.lineno)
                    cur.entries.append(Cont(target, int(o["part"])))
                elif typ == "compaction":
                    c = Compaction(
                        summary=o.get("summary", ""),
                        first_kept_id=o.get("first_kept_id"),
                        tokens_before=o.get("tokens_before"),
                        details=dict(o.get("details") or {}),
                    )
                    if isinstance(o.get("source"), list):
                        c.lines = [Line(x) for x in o["source"]]
                    else:
                        c.dirty = True
                    cur.entries.append(c)
                else:
                    raise CtxtoolError(f"unknown entry type {typ!r}", path=src.path, line=ln.lineno)
            except RECORD_ERRORS as e:
                policy.reject(e, src.path, ln.lineno, "entry")
        if cur is not None:
            yield cur

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        return [message_to_json(msg)]

    def header(self, t: Transcript) -> dict[str, Any]:
        h: dict[str, Any] = {"type": "transcript", "ctxtool": SCHEMA_VERSION}
        if t.id is not None:
            h["id"] = t.id
        sf = t.extra.get("source_format") or (t.format if t.format != "ctxtool" else None)
        if sf:
            h["source_format"] = sf
        sl = t.extra.get("source_layout")
        if sl:
            h["source_layout"] = sl
        if isinstance(t.extra.get("source_style"), dict):
            h["source_style"] = t.extra["source_style"]
        if t.record is not None:
            h["record"] = t.record
        if t.messages_key is not None:
            h["messages_key"] = t.messages_key
        if "session" in t.extra:
            h["session"] = t.extra["session"]
        return h

    def entries_json(self, t: Transcript) -> Iterator[dict[str, Any]]:
        # Entry indices in the written file: continuations refer to them.
        index = 0
        pos: dict[int, int] = {}
        for e in t.entries:
            if isinstance(e, Message):
                pos[id(e)] = index
                yield message_to_json(e)
                index += 1
            elif isinstance(e, Record):
                d: dict[str, Any] = {"type": "record", "source": exact_obj(e.line)}
                if e.kind:
                    d["kind"] = e.kind
                yield d
                index += 1
            elif isinstance(e, Cont):
                if e.message.dirty or id(e.message) not in pos:
                    continue
                yield {"type": "continuation", "entry": pos[id(e.message)], "part": e.part}
                index += 1
            elif isinstance(e, Compaction):
                c: dict[str, Any] = {"type": "compaction", "summary": e.summary}
                if e.first_kept_id is not None:
                    c["first_kept_id"] = e.first_kept_id
                if e.tokens_before is not None:
                    c["tokens_before"] = e.tokens_before
                if e.details:
                    c["details"] = e.details
                if e.lines and not e.dirty:
                    c["source"] = [exact_obj(ln) for ln in e.lines]
                yield c
                index += 1

    def record_compaction(self, t: Transcript, note: CompactionNote) -> list[Message | Compaction]:
        """A ``compaction`` entry with ``first_kept_id``; the summary as is."""
        return [note.entry(note.text), *note.pin_messages()]

    def write(self, transcripts: Iterable[Transcript], out: IO[bytes]) -> None:
        for t in transcripts:
            out.write(jsonio.dumps(self.header(t)))
            out.write(b"\n")
            for d in self.entries_json(t):
                out.write(jsonio.dumps(d))
                out.write(b"\n")


FORMAT = CanonicalFormat()
