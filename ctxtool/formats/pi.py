"""pi coding-agent sessions (``~/.pi/agent/sessions/--<cwd>--/<time>_<uuid>.jsonl``): one entry
per line (``session``, ``message``, ``compaction`` and bookkeeping types).

Version 2+ entries form a tree (``id``/``parentId``): when messages are added or removed the
writer re-links a linear session and keeps the compaction's first kept entry. Entry types and
how each is read: docs/architecture.md, "Formats as ctxtool reads them"."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import CtxtoolError
from ..io.jsonl import Source
from ..model import Block, Compaction, Cont, Entry, Line, Message, Record, Transcript, Usage
from . import images
from .base import (
    RECORD_ERRORS,
    CompactionNote,
    ErrorPolicy,
    Format,
    exact_obj,
    put_meta,
    read_meta,
    template,
)
from .pi_messages import (
    ENTRY_TYPES,
    EPOCH,
    MESSAGE_ROLES,
    SYSTEM_CUSTOM_TYPE,
    assistant_block,
    content_blocks,
    content_parts,
    decode_message,
    det_hex,
    iso_to_ms,
    lines_of,
    same_block,
    tool_args,
    usage_in,
    usage_out,
)


# -- the format --------------------------------------------------------------------------
@dataclass
class _WriteState:
    """What the writer carries from line to line."""

    ts: str = EPOCH
    ms: int | None = None
    last_id: str | None = None
    api: str | None = None
    provider: str | None = None
    model: str | None = None
    index: int = 0  # position of the next written entry (firstKeptEntryIndex)
    positions: dict[int, int] = field(default_factory=dict)  # id(entry) -> written position
    used: set[str] = field(default_factory=set)

    def see(self, obj: Any) -> None:
        """Update from a line about to be written."""
        if not isinstance(obj, dict):
            return
        if isinstance(obj.get("timestamp"), str):
            self.ts = obj["timestamp"]
        m = obj.get("message")
        if isinstance(m, dict):
            if isinstance(m.get("timestamp"), int):
                self.ms = m["timestamp"]
            if m.get("role") == "assistant":
                self.api = m.get("api", self.api)
                self.provider = m.get("provider", self.provider)
                self.model = m.get("model", self.model)
        if obj.get("type") == "session":
            self.provider = obj.get("provider", self.provider)
            self.model = obj.get("modelId", self.model)
        if obj.get("type") == "model_change":
            self.provider = obj.get("provider", self.provider)
            self.model = obj.get("modelId", self.model)
        if isinstance(obj.get("id"), str) and obj.get("type") != "session":
            self.last_id = obj["id"]
            self.used.add(obj["id"])


class PiFormat(Format):
    #: pi's session entry types (its session format, ``SessionEntry``) that are not messages
    known_records = frozenset(("session", "model_change", "thinking_level_change", "label", "custom", "session_info",
                               "message", "branch_summary", "custom_message", "compaction"))
    name = "pi"
    description = "pi coding-agent session files (session / message / compaction lines)"
    reads = "JSONL"
    default_layout = "entries_jsonl"

    # -- detection -----------------------------------------------------------------------
    def sniff(self, sample: list[Any], src: Source) -> int:
        if src.layout != "jsonl" or not sample or not all(isinstance(o, dict) for o in sample):
            return 0
        if any("uuid" in o or "sessionId" in o or "payload" in o for o in sample):
            return 0
        first = sample[0]
        if first.get("type") == "session" and "id" in first and "timestamp" in first:
            return 97
        known = [o for o in sample if o.get("type") in ENTRY_TYPES]
        if len(known) < len(sample):
            return 0
        msgs = [o for o in known if o.get("type") == "message"]
        if msgs and all(isinstance(o.get("message"), dict) and o["message"].get("role") in MESSAGE_ROLES for o in msgs):
            return 75
        return 0

    # -- reading -------------------------------------------------------------------------
    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        t = Transcript("pi", path=src.path, index=0, lineno=1)
        t.extra["layout"] = "entries_jsonl"
        by_index: list[Entry | None] = []  # file entries in order (firstKeptEntryIndex)
        by_id: dict[str, Entry] = {}
        refs: list[tuple[Compaction, Entry]] = []
        linear = True
        prev_id: str | None = None
        has_ids = False
        for ln in src.lines(policy):
            o = ln.obj
            entry: Entry | None = None
            try:
                if not isinstance(o, dict) or not isinstance(o.get("type"), str):
                    raise CtxtoolError("not a pi session entry (expected an object with 'type')", path=src.path, line=ln.lineno)
                typ = o["type"]
                if typ == "session":
                    t.id = o.get("id") if isinstance(o.get("id"), str) else t.id
                    t.extra["session"] = {k: v for k, v in o.items() if k != "type"}
                    entry = Record(ln, kind="session")
                elif typ == "message":
                    entry = self._message(o, ln)
                elif typ == "custom_message":
                    c = o.get("content")
                    role = "system" if o.get("customType") == SYSTEM_CUSTOM_TYPE else "user"
                    entry = Message(role, content_blocks(c), id=o.get("id"), metadata=read_meta(o), lines=[ln],
                                    extra={"pi_entry": "custom_message"})
                elif typ == "branch_summary":
                    entry = Message("user", [Block("text", text=o.get("summary") or "")], id=o.get("id"),
                                    metadata=read_meta(o), lines=[ln], extra={"pi_entry": "branch_summary"})
                elif typ == "compaction":
                    details = {
                        k: o[k] for k in ("firstKeptEntryIndex", "firstKeptEntryId", "details", "fromHook") if k in o
                    }
                    tb = o.get("tokensBefore")
                    c = Compaction(
                        summary=o.get("summary") or "",
                        first_kept_id=o.get("firstKeptEntryId") if isinstance(o.get("firstKeptEntryId"), str) else None,
                        tokens_before=tb if isinstance(tb, int) else None,
                        details=details,
                        lines=[ln],
                    )
                    idx = o.get("firstKeptEntryIndex")
                    target = by_index[idx] if isinstance(idx, int) and 0 <= idx < len(by_index) else None
                    if target is None and c.first_kept_id is not None:
                        target = by_id.get(c.first_kept_id)
                    if target is not None:
                        refs.append((c, target))
                    elif idx == len(by_index):  # it keeps itself on: the entries after it predate it
                        c.details["kept_after"] = True
                    entry = c
                else:
                    entry = Record(ln, kind=typ)
            except RECORD_ERRORS as e:
                policy.reject(e, src.path, ln.lineno, "pi entry")
            by_index.append(entry)
            if entry is None:
                continue
            t.entries.append(entry)
            if isinstance(o, dict) and o.get("type") != "session" and "id" in o:
                has_ids = True
                by_id[str(o["id"])] = entry
                if o.get("parentId") != prev_id:
                    linear = False
                prev_id = o.get("id")
        t.extra["pi_style"] = "ids" if has_ids else "index"
        t.extra["pi_linear"] = linear
        t.extra["pi_refs"] = refs
        yield t

    def _message(self, o: dict[str, Any], ln: Line) -> Message | Record:
        m = o.get("message")
        if not isinstance(m, dict):
            raise ValueError("message entry without a 'message' object")
        dec = decode_message(m)
        if dec is None:
            return Record(ln, kind=f"message:{m.get('role')}")
        role, blocks, hints = dec
        meta = read_meta(o)
        if m.get("excludeFromContext") is True and meta.agent_visible is None:
            meta.agent_visible = False
        return Message(
            role,
            blocks,
            id=o.get("id") if isinstance(o.get("id"), str) else None,
            metadata=meta,
            usage=usage_in(m.get("usage")) if role == "assistant" else None,
            model=m.get("model") if isinstance(m.get("model"), str) else None,
            lines=[ln],
            extra=hints,
        )

    # -- writing -------------------------------------------------------------------------
    def _style(self, t: Transcript) -> str:
        return str(t.extra.get("pi_style") or "ids")

    def _state_before(self, target: Any, t: Transcript) -> _WriteState:
        st = _WriteState()
        for e in t.entries:
            for line in lines_of(e):
                if isinstance(line.obj, dict) and isinstance(line.obj.get("id"), str):
                    st.used.add(line.obj["id"])
        for e in t.entries:
            if e is target:
                break
            lines = lines_of(e)
            if isinstance(e, Cont):
                continue
            for line in lines[:1]:
                st.see(line.obj)
            st.index += 1
        return st

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        return self._render(msg, t, self._state_before(msg, t))

    def render_compaction(self, c: Compaction, t: Transcript) -> list[Any]:
        return [self._render_compaction(c, t, self._state_before(c, t))]

    def record_compaction(self, t: Transcript, note: CompactionNote) -> list[Message | Compaction]:
        """A ``compaction`` entry (the summary as is, with pi's file lists) pointing at the first kept entry."""
        c = note.entry(note.text)
        c.details["details"] = {"readFiles": note.read_files, "modifiedFiles": note.modified_files}
        pins = note.pin_messages()  # kept from the first pin on: the pins sit between the entry and the kept part
        for i, m in enumerate(pins):
            m.id = det_hex(t.id, "pin", note.first_kept.id, i)[:8]
        if pins:
            c.first_kept_id = pins[0].id
        t.extra["pi_refs"] = [*(t.extra.get("pi_refs") or ()), (c, pins[0] if pins else note.first_kept)]
        return [c, *pins]

    def read_compaction(self, t: Transcript, c: Compaction) -> tuple[str, Message | None]:
        target = next((e for cc, e in t.extra.get("pi_refs") or () if cc is c), None)
        if isinstance(target, Message):
            return c.summary, target
        return super().read_compaction(t, c)

    def _new_id(self, st: _WriteState, t: Transcript, *salt: Any) -> str:
        n = 0
        while True:
            h = det_hex(t.id, st.index, n, *salt)[:8]
            if h not in st.used:
                st.used.add(h)
                return h
            n += 1

    def _entry(self, typ: str, tmpl: dict[str, Any], msg_id: str | None, st: _WriteState, t: Transcript, salt: str) -> dict[str, Any]:
        """The common entry fields, from the template or new (id and parentId in version 2+ files)."""
        o: dict[str, Any] = dict(tmpl) if tmpl.get("type") == typ else {}
        o["type"] = typ
        if self._style(t) == "ids":
            eid = o.get("id") if isinstance(o.get("id"), str) else msg_id
            if not eid:
                eid = self._new_id(st, t, typ, salt)
            o["id"] = eid
            if "parentId" not in o or t.extra.get("pi_linear", True):
                o["parentId"] = st.last_id
        if not isinstance(o.get("timestamp"), str):
            o["timestamp"] = st.ts
        # keep the usual key order: type, id, parentId, timestamp, ...
        head: dict[str, Any] = {k: o.pop(k) for k in ("type", "id", "parentId", "timestamp") if k in o}
        return {**head, **o}

    def _ms(self, tm: dict[str, Any], st: _WriteState, ts: str) -> int:
        v = tm.get("timestamp")
        if isinstance(v, int):
            return v
        return st.ms if st.ms is not None and ts == st.ts else iso_to_ms(ts)

    def _render(self, msg: Message, t: Transcript, st: _WriteState) -> list[Any]:
        tmpl = template(msg)
        m0 = tmpl.get("message")
        tm: dict[str, Any] = dict(m0) if isinstance(m0, dict) else {}
        out: list[dict[str, Any]] = []
        salt = msg.role + msg.text()[:64]
        pi_entry = msg.extra.get("pi_entry") or (tmpl.get("type") if tmpl.get("type") in ("custom_message", "branch_summary") else None)
        if pi_entry == "branch_summary" or (pi_entry == "custom_message" and not msg.tool_results()) or msg.role == "system":
            if pi_entry == "branch_summary":
                o = self._entry("branch_summary", tmpl, msg.id, st, t, salt)
                o["summary"] = msg.text()
            else:
                o = self._entry("custom_message", tmpl, msg.id, st, t, salt)
                if msg.role == "system" and tmpl.get("type") != "custom_message":
                    o["customType"] = SYSTEM_CUSTOM_TYPE
                    o["display"] = False
                o["content"] = o["content"] if content_blocks(o.get("content")) == msg.content else content_parts(msg.content)
                o.setdefault("customType", "ctxtool")
                o.setdefault("display", True)
            put_meta(o, msg)
            return [o]
        results = msg.tool_results()
        rest = [b for b in msg.content if b.type != "tool_result"]
        for i, b in enumerate(results):
            use_tmpl = i == 0 and tm.get("role") == "toolResult"
            o = self._entry("message", tmpl if use_tmpl else {}, msg.id if i == 0 else None, st, t, salt + str(i))
            base = dict(tm) if use_tmpl else {}
            m: dict[str, Any] = {"role": "toolResult", "toolCallId": b.id, "toolName": b.name or base.get("toolName") or ""}
            parts: list[dict[str, Any]] = [{"type": "text", "text": b.text}]
            parts += list((b.extra or {}).get("images") or [])
            m["content"] = parts
            if "details" in base:
                m["details"] = base["details"]
            m["isError"] = b.is_error
            m["timestamp"] = self._ms(base, st, o["timestamp"])
            o["message"] = {**base, **m} if base else m
            put_meta(o, msg)
            out.append(o)
            if isinstance(o.get("id"), str):
                st.last_id = o["id"]
        if rest or not results:
            use_tmpl = not results or tm.get("role") not in ("toolResult",)
            o = self._entry("message", tmpl if use_tmpl else {}, msg.id if not results else None, st, t, salt + "m")
            base = dict(tm) if use_tmpl else {}
            o["message"] = self._agent_message(msg, rest, base, st, o["timestamp"])
            put_meta(o, msg)
            out.append(o)
        return out

    def _agent_message(
        self, msg: Message, blocks: list[Block], base: dict[str, Any], st: _WriteState, ts: str
    ) -> dict[str, Any]:
        ms = self._ms(base, st, ts)
        role = msg.role
        if role == "assistant":
            c0 = base.get("content")
            orig: list[Any] = c0 if base.get("role") == "assistant" and isinstance(c0, list) else []
            content: list[Any] = []
            for i, b in enumerate(blocks):
                if i < len(orig) and same_block(assistant_block(orig[i]), b):
                    content.append(orig[i])  # unchanged: keep signatures and partial JSON
                elif b.type == "thinking":
                    content.append({"type": "thinking", "thinking": b.text})
                elif b.type == "tool_call":
                    content.append({"type": "toolCall", "id": b.id, "name": b.name, "arguments": tool_args(b)})
                elif b.type == "image":
                    content.append(images.pi_part(b.data) or {"type": "text", "text": "[image]"})
                else:
                    content.append({"type": "text", "text": b.text})
            m: dict[str, Any] = {"role": "assistant", "content": content}
            m["api"] = base.get("api") or st.api or "anthropic-messages"
            m["provider"] = base.get("provider") or st.provider or "anthropic"
            m["model"] = msg.model or base.get("model") or st.model or ""
            if msg.usage is not None:
                m["usage"] = base["usage"] if usage_in(base.get("usage")) == msg.usage else usage_out(msg.usage)
            else:
                m["usage"] = usage_out(Usage())
            m["stopReason"] = base.get("stopReason") or ("toolUse" if any(b.type == "tool_call" for b in blocks) else "stop")
            m["timestamp"] = ms
            return {**base, **m} if base.get("role") == "assistant" else m
        bash = msg.extra.get("bash_execution") or base.get("role") == "bashExecution"
        text = "\n".join(b.text for b in blocks if b.type == "text")
        if bash and text.startswith("$ ") and all(b.type == "text" for b in blocks):
            command, _, output = text[2:].partition("\n")
            m = {"role": "bashExecution", "command": command, "output": output}
            m["exitCode"] = base.get("exitCode", 0)
            m["cancelled"] = base.get("cancelled", False)
            m["truncated"] = base.get("truncated", False)
            m["timestamp"] = ms
            return {**base, **m} if base.get("role") == "bashExecution" else m
        pi_role = msg.extra.get("pi_role") if msg.extra.get("pi_role") in ("custom", "hookMessage") else None
        m = {"role": pi_role or "user"}
        if base.get("role") == m["role"] and content_blocks(base.get("content")) == blocks:
            m["content"] = base["content"]
        elif isinstance(base.get("content"), str) and all(b.type == "text" for b in blocks) and len(blocks) == 1:
            m["content"] = blocks[0].text
        else:
            m["content"] = content_parts(blocks)
        m["timestamp"] = ms
        return {**base, **m} if base.get("role") == m["role"] else m

    def _render_compaction(self, c: Compaction, t: Transcript, st: _WriteState) -> dict[str, Any]:
        tmpl = dict(c.lines[0].obj) if c.lines and isinstance(exact_obj(c.lines[0]), dict) else {}
        o = self._entry("compaction", tmpl, None, st, t, "compaction" + c.summary[:64])
        o["summary"] = c.summary
        self._set_first_kept(o, c, t, st)
        o["tokensBefore"] = c.tokens_before if c.tokens_before is not None else o.get("tokensBefore", 0)
        for k in ("details", "fromHook"):
            if k in c.details and k not in o:
                o[k] = c.details[k]
        return o

    def _set_first_kept(self, o: dict[str, Any], c: Compaction, t: Transcript, st: _WriteState) -> None:
        target = next((e for cc, e in t.extra.get("pi_refs") or [] if cc is c), None)
        if self._style(t) == "index":
            pos = st.positions.get(id(target)) if target is not None else None
            if pos is None:
                idx = c.details.get("firstKeptEntryIndex")
                pos = idx if isinstance(idx, int) else st.index  # nothing kept before the compaction
            o.pop("firstKeptEntryId", None)
            o["firstKeptEntryIndex"] = pos
        else:
            kept = c.first_kept_id or c.details.get("firstKeptEntryId")
            o.pop("firstKeptEntryIndex", None)
            o["firstKeptEntryId"] = kept if isinstance(kept, str) else o.get("id")

    def output_items(self, t: Transcript) -> Iterator[Line]:
        st = _WriteState()
        for e in t.entries:
            for line in lines_of(e):
                if isinstance(line.obj, dict) and isinstance(line.obj.get("id"), str):
                    st.used.add(line.obj["id"])
        relink = self._style(t) == "ids" and t.extra.get("pi_linear", True)
        first = t.entries[0] if t.entries else None
        first_lines = lines_of(first) if first is not None else []
        if not (first_lines and isinstance(first_lines[0].obj, dict) and first_lines[0].obj.get("type") == "session"):
            header = self._header(t)
            st.see(header)
            st.index += 1
            yield Line(header)
        for e in t.entries:
            if isinstance(e, Cont):
                if not e.message.dirty and e.part < len(e.message.lines):
                    yield e.message.lines[e.part]
                continue
            st.positions[id(e)] = st.index
            fresh: list[Any] = []
            reuse: list[Line] = []
            if isinstance(e, Message):
                if e.lines and not e.dirty:
                    reuse = e.lines[:1]
                else:
                    fresh = self._render(e, t, st)
            elif isinstance(e, Record):
                reuse = [e.line]
            elif isinstance(e, Compaction):
                if e.lines and not e.dirty:
                    reuse = list(e.lines)
                    obj = exact_obj(e.lines[0])
                    if isinstance(obj, dict) and self._style(t) == "index" and "firstKeptEntryIndex" in obj:
                        fixed = dict(obj)
                        self._set_first_kept(fixed, e, t, st)
                        if fixed != obj:
                            reuse, fresh = [], [fixed]
                else:
                    fresh = [self._render_compaction(e, t, st)]
            for line in reuse:
                obj = exact_obj(line) if relink else line.obj
                if relink and isinstance(obj, dict) and "parentId" in obj and obj.get("parentId") != st.last_id:
                    obj = {**obj, "parentId": st.last_id}
                    line = Line(obj)
                st.see(obj)
                st.index += 1
                yield line
            for obj in fresh:
                st.see(obj)
                st.index += 1
                yield Line(obj)

    def _header(self, t: Transcript) -> dict[str, Any]:
        sess = t.extra.get("session") if isinstance(t.extra.get("session"), dict) else {}
        ts = EPOCH
        for e in t.entries:
            lines = lines_of(e)
            if lines and isinstance(lines[0].obj, dict) and isinstance(lines[0].obj.get("timestamp"), str):
                ts = lines[0].obj["timestamp"]
                break
        sid = t.id or str(uuid.UUID(hex=det_hex("pi-session", t.path, t.index)[:32]))
        h: dict[str, Any] = {"type": "session", "version": 3, "id": sid, "timestamp": ts}
        cwd = sess.get("cwd") if isinstance(sess, dict) else None
        h["cwd"] = cwd if isinstance(cwd, str) else ""
        return h


FORMAT = PiFormat()
