"""Gemini CLI's JSONL session files (``~/.gemini/tmp/<project>/chats/session-*.jsonl``),
where later lines update earlier records by id (``$set`` checkpoints, ``$rewindTo``).

Reading replays Gemini's own loader and keeps every line; writing a changed record does what
Gemini's writer does, without the stale copies. The record codec is :mod:`ctxtool.formats.gemini`'s;
the details: docs/architecture.md, "Formats as ctxtool reads them"."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..io import jsontext
from ..io.jsonl import Source
from ..model import Cont, Entry, Line, Message, Record, Transcript
from .base import STRUCTURE_ERRORS, ErrorPolicy, Format, exact_obj, malformed, placed
from .gemini import ROLE, build_record, decode_record, subagent_info

#: message hint on the message carrying a record's versions: where its first version is
#: ("line": a line of its own; "member": an item of a checkpoint's or legacy line's
#: messages). Only the first can be a member: a checkpoint drops every earlier version.
VERSIONS = "gemini_first"
LINE, MEMBER = "line", "member"
UUID_NS = uuid.UUID("3b0c1f6e-5a2d-4e7b-9f1a-6c8d2e4b7a90")


def is_metadata(o: Any) -> bool:
    return isinstance(o, dict) and isinstance(o.get("sessionId"), str) and isinstance(o.get("projectHash"), str)


def _is_rewind(o: Any) -> bool:
    return isinstance(o, dict) and isinstance(o.get("$rewindTo"), str)


def _is_record(o: Any) -> bool:
    return isinstance(o, dict) and isinstance(o.get("id"), str)


def members(o: Any) -> list[Any] | None:
    """The records a line carries in a list: a checkpoint's ``$set.messages``, or the
    ``messages`` of a whole legacy session on one line (None: not such a line)."""
    if not isinstance(o, dict) or _is_rewind(o) or _is_record(o):
        return None
    s = o.get("$set")
    if isinstance(s, dict):
        return s["messages"] if isinstance(s.get("messages"), list) else None
    if is_metadata(o) and isinstance(o.get("messages"), list):
        msgs: list[Any] = o["messages"]
        return msgs
    return None


def _is_checkpoint(o: Any) -> bool:
    return isinstance(o, dict) and isinstance(o.get("$set"), dict) and isinstance(o["$set"].get("messages"), list)


def replay(objs: list[Any]) -> dict[str, list[tuple[int, int | None]]]:
    """Gemini's ``loadConversationRecord`` over the lines' values: each record id still
    there at the end, in Gemini's order, with where its versions are (line index, and the
    item index inside a checkpoint or legacy line)."""
    state: dict[str, list[tuple[int, int | None]]] = {}
    for li, o in enumerate(objs):
        if _is_rewind(o):
            target = o["$rewindTo"]
            if target in state:
                ids = list(state)
                for gone in ids[ids.index(target):]:
                    del state[gone]
            else:
                state.clear()
        elif _is_record(o):
            state.setdefault(o["id"], []).append((li, None))
        else:
            items = members(o)
            if items is None:
                continue
            if _is_checkpoint(o):
                state.clear()
            for k, m in enumerate(items):
                if _is_record(m):
                    state.setdefault(m["id"], []).append((li, k))
    return state


SESSION_FIELDS = ("sessionId", "projectHash", "startTime", "lastUpdated", "messages", "summary", "memoryScratchpad",
                  "directories", "kind")


def session_fields(objs: list[Any]) -> dict[str, Any]:
    """The session's fields as Gemini's loader ends up with them (the metadata line, then
    every ``$set``), in the JSON session file's order; ``messages`` a placeholder."""
    meta: dict[str, Any] = {}
    for o in objs:
        if isinstance(o, dict) and not _is_rewind(o) and not _is_record(o):
            if isinstance(o.get("$set"), dict):
                meta.update(o["$set"])
            elif is_metadata(o):
                meta.update(o)
    return {k: (None if k == "messages" else meta[k]) for k in SESSION_FIELDS if k in meta or k == "messages"}


def _kind(o: Any) -> str:
    if _is_rewind(o):
        return "gemini:rewind"
    if _is_record(o):
        return "gemini:superseded"
    if _is_checkpoint(o):
        return "gemini:checkpoint"
    if isinstance(o, dict) and "$set" in o:
        return "gemini:set"
    return "gemini:metadata" if is_metadata(o) else "gemini:line"


class GeminiJsonlFormat(Format):
    name = "gemini-jsonl"
    description = "Gemini CLI JSONL session files (a metadata line, then records updated by id, $set, $rewindTo)"
    reads = "JSONL session (latest state of each record by id)"
    default_layout = "gemini_jsonl"
    record_family = "gemini"

    def sniff(self, sample: list[Any], src: Source) -> int:
        if src.layout != "jsonl" or not sample:
            return 0
        if is_metadata(sample[0]) and "type" not in sample[0]:
            return 96
        return 0

    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        lines = list(src.lines(policy))
        objs = [exact_obj(ln) if members(ln.obj) is not None else ln.obj for ln in lines]
        state = replay(objs)
        t = Transcript(self.name, path=src.path, index=0, lineno=lines[0].lineno if lines else None)
        t.extra["layout"] = self.default_layout
        t.record = session_fields(objs)  # what converting to the JSON session format keeps
        t.messages_key = "messages"
        if isinstance(t.record.get("sessionId"), str):
            t.id = t.record["sessionId"]
        starts: dict[tuple[int, int | None], str] = {}
        later: dict[int, tuple[str, int]] = {}
        for sid, versions in state.items():
            starts[versions[0]] = sid
            for part, (li, k) in enumerate(versions[1:], 2):
                if k is None:
                    later[li] = (sid, part)
        carriers: dict[str, Message | None] = {}

        def group(rid: str) -> list[Entry]:
            versions = state[rid]
            vlines = [lines[li] if k is None else Line((members(objs[li]) or [])[k], None, lines[li].lineno, True)
                      for li, k in versions]
            latest = vlines[-1]
            exact_obj(latest)  # every number as written: an unchanged record compares equal
            try:
                got = decode_record(latest.obj, latest.lineno)
            except CtxtoolError as e:
                policy.handle(placed(e, src.path, latest.lineno))
                got = []
            except STRUCTURE_ERRORS as e:
                policy.handle(malformed(e, src.path, latest.lineno))
                got = []
            msgs = [m for m in got if isinstance(m, Message)]
            if not msgs:  # info / error / warning records, or an unreadable one: kept as they are
                carriers[rid] = None
                return [Record(vlines[0], kind=f"gemini:{latest.obj.get('type')}")] if versions[0][1] is None else []
            for m in msgs:
                m.lines[0].lineno = latest.lineno
            carrier = msgs[-1]
            carrier.lines = [carrier.lines[0], *vlines]
            carrier.extra[VERSIONS] = LINE if versions[0][1] is None else MEMBER
            carriers[rid] = carrier
            out: list[Entry] = list(msgs)
            if versions[0][1] is None:
                out.append(Cont(carrier, 1))
            return out

        for li, ln in enumerate(lines):
            rid = starts.get((li, None))
            if rid is not None:
                t.entries.extend(group(rid))
                continue
            if li in later:
                lid, part = later[li]
                carrier = carriers.get(lid)
                t.entries.append(Cont(carrier, part) if carrier is not None else Record(ln, kind="gemini:record"))
                continue
            o = objs[li]
            t.entries.append(Record(ln, kind=_kind(o)))
            for k in range(len(members(o) or [])):
                rid = starts.get((li, k))
                if rid is not None:
                    t.entries.extend(e for e in group(rid) if not isinstance(e, Record))
        agent = subagent_info(t.record, t.id)
        if agent is not None:  # a subagent's transcript: part of its parent session
            t.extra["agent"] = agent
        yield t

    # -- writing ---------------------------------------------------------------
    def render(self, msg: Message, t: Transcript) -> list[Any]:
        return [build_record(msg, [])]

    def write(self, transcripts: Iterable[Transcript], out: IO[bytes]) -> None:
        for t in transcripts:
            for raw in _Writer(t).lines():
                out.write(raw)
                out.write(b"\n")


@dataclass
class _Group:
    """One record as the transcript now has it: its head message and tool messages."""

    head: Message | None
    tools: list[Message] = field(default_factory=list)
    carrier: Message | None = None
    record: dict[str, Any] | None = None
    unchanged: bool = False

    def first(self) -> str | None:
        return self.carrier.extra.get(VERSIONS) if self.carrier is not None else None


class _Writer:
    def __init__(self, t: Transcript) -> None:
        self.t = t
        raws = [ln.raw for ln in _source_lines(t) if ln.raw is not None][:8]
        self.style = jsontext.Style.detect_lines(raws) if raws else jsontext.COMPACT
        self.groups: list[_Group] = []
        self.of: dict[int, _Group] = {}  # id(message) -> its group
        cur: _Group | None = None
        for e in t.entries:
            if isinstance(e, Record):
                cur = None
            elif isinstance(e, Message):
                if e.role == "tool" and cur is not None and (cur.head is None or cur.head.role == "assistant"):
                    cur.tools.append(e)
                else:
                    cur = _Group(None, [e]) if e.role == "tool" else _Group(e)
                    self.groups.append(cur)
                self.of[id(e)] = cur
        self.by_id: dict[str, _Group] = {}
        for n, g in enumerate(self.groups):
            self._settle(g, n)

    def _settle(self, g: _Group, n: int) -> None:
        g.carrier = next((m for m in (g.head, *g.tools) if m is not None and m.extra.get(VERSIONS) in (LINE, MEMBER)), None)
        rec = build_record(g.head, g.tools)
        if not isinstance(rec.get("id"), str):
            base = g.head.id if g.head is not None else g.tools[0].id
            if isinstance(base, str) and base.endswith("/results"):
                base = base[: -len("/results")]
            rec = {"id": base or str(uuid.uuid5(UUID_NS, f"{self.t.id}/{n}/{jsonio.dumps_text(rec)}")), **rec}
        g.record = rec
        if g.carrier is not None and len(g.carrier.lines) > 1:
            latest = exact_obj(g.carrier.lines[-1])
            g.unchanged = jsonio.dumps(rec) == jsonio.dumps(latest)
        self.by_id[rec["id"]] = g

    def lines(self) -> Iterator[bytes]:
        later_rewinds: list[int] = []  # entry indexes of rewinds and checkpoints
        for i, e in enumerate(self.t.entries):
            if isinstance(e, Record) and (_is_rewind(e.line.obj) or _is_checkpoint(e.line.obj)):
                later_rewinds.append(i)
        holders = self._holders()
        if not any(isinstance(e, Record) and is_metadata(e.line.obj) for e in self.t.entries):
            yield jsonio.dumps(self._metadata(), self.style)  # a transcript from another format
        for i, e in enumerate(self.t.entries):
            if isinstance(e, Record):
                yield self._record(e, i, holders.get(i, {}), any(j > i for j in later_rewinds))
            elif isinstance(e, Message):
                g = self.of[id(e)]
                if e is not (g.head or g.tools[0]):
                    continue
                if g.unchanged or (g.carrier is not None and g.first() == MEMBER and self._held(g, holders)):
                    continue  # its versions are written by their own lines / its checkpoint
                yield jsonio.dumps(g.record, self.style)
            elif isinstance(e, Cont):
                cg = self.of.get(id(e.message))
                if cg is None or not cg.unchanged or e.part >= len(e.message.lines):
                    continue
                if e.part > 1 or cg.first() == LINE:
                    ln = e.message.lines[e.part]
                    yield ln.raw if ln.raw is not None else jsonio.dumps(exact_obj(ln), self.style)

    def _metadata(self) -> dict[str, Any]:
        """The metadata line Gemini's loader needs (a session id and a project hash, which
        ctxtool cannot know: the hash of the session id stands in for it)."""
        sid = self.t.id or str(uuid.uuid5(UUID_NS, self.t.path))
        import hashlib  # not at import: hashlib loads OpenSSL

        return {"sessionId": sid, "projectHash": hashlib.sha256(sid.encode()).hexdigest()}

    def _holders(self) -> dict[int, dict[str, _Group]]:
        """For each checkpoint (entry index): the records whose first version it holds."""
        out: dict[int, dict[str, _Group]] = {}
        last: int | None = None
        for i, e in enumerate(self.t.entries):
            if isinstance(e, Record) and members(e.line.obj) is not None:
                last = i
            elif isinstance(e, Message) and last is not None:
                g = self.of[id(e)]
                if g.first() == MEMBER and g.record is not None:
                    out.setdefault(last, {})[g.record["id"]] = g
        return out

    def _held(self, g: _Group, holders: dict[int, dict[str, _Group]]) -> bool:
        return any(h is g for hs in holders.values() for h in hs.values())

    def _record(self, e: Record, i: int, held: dict[str, _Group], rewound_later: bool) -> bytes:
        ln = e.line
        items = members(ln.obj)
        if items is None:
            return ln.raw if ln.raw is not None else jsonio.dumps(exact_obj(ln), self.style)
        new: list[Any] = []
        for m in items:
            rid = m.get("id") if isinstance(m, dict) else None
            g = held.get(rid) if isinstance(rid, str) else None
            if g is not None and g.carrier is not None:
                new.append(exact_obj(g.carrier.lines[1]) if g.unchanged else g.record)
            elif (isinstance(rid, str) and rid not in self.by_id and not rewound_later
                  and isinstance(m, dict) and m.get("type") in ROLE):
                continue  # a message the operation removed: it leaves the checkpoint too
            else:
                new.append(m)
        if len(new) == len(items) and all(a is b for a, b in zip(new, items, strict=True)):
            return ln.raw if ln.raw is not None else jsonio.dumps(exact_obj(ln), self.style)
        obj = exact_obj(ln)
        if _is_checkpoint(obj):
            obj = {**obj, "$set": {**obj["$set"], "messages": new}}
        else:
            obj = {**obj, "messages": new}
        return jsonio.dumps(obj, self.style)


def _source_lines(t: Transcript) -> Iterator[Line]:
    for e in t.entries:
        if isinstance(e, Record):
            yield e.line
        elif isinstance(e, Cont) and e.part < len(e.message.lines):
            yield e.message.lines[e.part]


FORMAT = GeminiJsonlFormat()
