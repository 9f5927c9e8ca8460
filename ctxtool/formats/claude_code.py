"""Claude Code session logs (``~/.claude/projects/<project>/<session>.jsonl``): one JSON object
per line; ``user`` and ``assistant`` lines with a ``message`` are messages, every other line a
record kept verbatim.

One API response written over several lines is one message (its usage counted once per call);
compactions stay as ``compact_boundary`` lines. Details: docs/architecture.md, "Formats as ctxtool reads them"."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..io.jsonl import Source
from ..model import (
    KIND_COMPACTION_SUMMARY,
    Compaction,
    Cont,
    Entry,
    Line,
    Message,
    Record,
    Transcript,
    Usage,
    source_lines,
)
from . import anthropic_blocks as codec
from .base import META_KEY, CompactionNote, ErrorPolicy, Format, read_meta, template
from .claude_code_agents import agent_info
from .claude_code_lines import (
    LOGICAL,
    LOGICAL_RELINKED,
    MESSAGE_TYPES,
    RELINKED,
    apply_flags,
    decode_content,
    decode_usage,
    encode_content,
    foreign_timestamp,
    is_cc_line,
    nearest_kept,
    only_tool_results,
    own_line,
    relink,
    relink_metadata,
    source_form,
    store_meta,
    usage_json,
    valid_uuid,
    window_rule,
)

#: line types Claude Code writes that are not messages (kept as records)
RECORD_TYPES = ("system", "summary", "progress", "file-history-snapshot", "queue-operation")
#: line types of Claude Code 2.1.x, known and kept verbatim as records: session titles, the
#: running cost, links between frames and continued sessions, away summaries, attachments
#: (a ``queued_command`` the user typed while the agent worked, hook output, files), tags
NEWER_RECORD_TYPES = ("custom-title", "ai-title", "agent-name", "cost-state", "frame-link", "continued-in",
                      "away_summary", "attachment", "tag", "last-prompt", "pr-link", "worktree-state")
#: fields of the first message line kept as the session template for new lines
SESSION_KEYS = ("sessionId", "cwd", "version", "gitBranch", "userType")
#: fields copied from a neighbouring line into a new one (sub-agent files, session slug)
NEIGHBOUR_KEYS = ("isSidechain", "agentId", "slug")
#: namespace of the deterministic uuids given to lines ctxtool writes
UUID_NS = uuid.UUID("6f1d3c52-8a8e-4f0e-9c4b-2b7f0e8d9a11")
SYNTHETIC_MODEL = "<synthetic>"  # what Claude Code itself puts on assistant lines it made up
SCAN_BACK = 64  # entries looked at backwards for a parent uuid / timestamp
PARENTS = "cc_parents"  # Transcript.extra: uuid -> parentUuid of every line read


class ClaudeCodeFormat(Format):
    name = "claude-code"
    description = "Claude Code session logs (~/.claude/projects/*/*.jsonl)"
    reads = "JSONL"
    default_layout = "entries_jsonl"
    bookkeeping_records = ("progress", "file-history-snapshot", "system:", "queue-operation")
    known_records = frozenset(RECORD_TYPES + NEWER_RECORD_TYPES)

    def __init__(self) -> None:
        # (id of the entries list, its length, id(entry) -> index): positions of entries
        # being rendered, rebuilt whenever an identity check fails
        self._pos: tuple[int, int, dict[int, int]] | None = None

    # -- detection -----------------------------------------------------------------
    def sniff(self, sample: list[Any], src: Source) -> int:
        if src.layout != "jsonl" or not sample or not all(isinstance(o, dict) for o in sample):
            return 0
        for o in sample:
            typ = o.get("type")
            if typ in MESSAGE_TYPES and is_cc_line(o) and isinstance(o.get("message"), dict):
                return 95
            if typ in ("system", "progress") and is_cc_line(o):
                return 90
        first = sample[0]
        typ = first.get("type")
        if typ == "file-history-snapshot" and "snapshot" in first:
            return 75
        if typ == "summary" and "leafUuid" in first:
            return 75
        if typ == "queue-operation" and "sessionId" in first and "operation" in first:
            return 60
        return 0

    # -- reading -------------------------------------------------------------------
    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        if src.layout != "jsonl":
            raise CtxtoolError("Claude Code sessions are JSON Lines", path=src.path)
        t = Transcript("claude-code", path=src.path, index=0)
        t.extra["layout"] = "entries_jsonl"
        open_msg: Message | None = None  # the assistant message later lines may continue
        usages: dict[str, Usage] = {}  # message.id -> the Usage shared by its messages
        fallback_session: dict[str, Any] | None = None
        parents: dict[str, Any] = {}  # uuid -> parentUuid of every source line (the resume chain)
        t.extra[PARENTS] = parents
        for ln in src.lines(policy):
            o = ln.obj
            if t.lineno is None:
                t.lineno = ln.lineno
            if not isinstance(o, dict):
                policy.handle(CtxtoolError("not a JSON object", path=src.path, line=ln.lineno))
                continue
            if isinstance(o.get("uuid"), str):
                parents[o["uuid"]] = o.get("parentUuid")
            typ = o.get("type")
            if not isinstance(typ, str):
                policy.handle(CtxtoolError("line has no 'type'", path=src.path, line=ln.lineno))
                continue
            if typ not in MESSAGE_TYPES:
                sub = o.get("subtype")
                t.entries.append(Record(ln, kind=f"{typ}:{sub}" if isinstance(sub, str) else typ))
                if fallback_session is None and "sessionId" in o:
                    fallback_session = {k: o[k] for k in SESSION_KEYS if k in o}
                continue
            m = o.get("message")
            if not isinstance(m, dict) or "content" not in m:
                policy.handle(
                    CtxtoolError(
                        f"{typ} line without a 'message' with 'content'", path=src.path, line=ln.lineno
                    )
                )
                continue
            try:
                blocks = decode_content(m["content"])
                usage = decode_usage(m.get("usage")) if typ == "assistant" else None
            except CtxtoolError as e:
                e.path, e.line = src.path, ln.lineno
                policy.handle(e)
                continue
            if "session" not in t.extra:
                t.extra["session"] = {k: o[k] for k in SESSION_KEYS if k in o}
                t.id = o.get("sessionId")
            mid = m.get("id") if typ == "assistant" and isinstance(m.get("id"), str) else None
            if mid is not None and usage is not None:
                shared = usages.get(mid)
                if shared is None:
                    usages[mid] = usage
                else:  # later lines repeat usage, output_tokens growing: keep the largest figures
                    shared.input = max(shared.input, usage.input)
                    shared.output = max(shared.output, usage.output)
                    shared.cache_creation = max(shared.cache_creation, usage.cache_creation)
                    shared.cache_read = max(shared.cache_read, usage.cache_read)
                    usage = shared
            if open_msg is not None and mid is not None and open_msg.usage_key == mid:
                open_msg.content.extend(blocks)
                open_msg.lines.append(ln)
                if open_msg.usage is None:
                    open_msg.usage = usage
                t.entries.append(Cont(open_msg, len(open_msg.lines) - 1))
                continue
            meta = read_meta(o)
            role = (
                "assistant"
                if typ == "assistant"
                else ("tool" if only_tool_results(m["content"]) else "user")
            )
            if meta.extra.get("role") == "system":
                role = "system"
                del meta.extra["role"]
            if o.get("isCompactSummary") and meta.kind is None:
                meta.kind = KIND_COMPACTION_SUMMARY
            msg = Message(
                role,
                blocks,
                id=o.get("uuid"),
                metadata=meta,
                usage=usage,
                usage_key=mid,
                model=m.get("model") if typ == "assistant" else None,
                lines=[ln],
            )
            if o.get("isMeta") and role != "system":
                msg.extra["is_meta"] = True
            t.entries.append(msg)
            open_msg = msg if typ == "assistant" else None
        if "session" not in t.extra and fallback_session:
            t.extra["session"] = fallback_session
            t.id = fallback_session.get("sessionId")
        agent = agent_info(src.path)
        if agent is not None:  # a subagent's transcript: part of its session
            t.extra["agent"] = agent
        yield t

    def agent_window(self, t: Transcript, model: str, registered: int) -> tuple[int, str] | None:
        return window_rule(t, model, registered)  # Claude Code's 200,000 without [1m] (claude_code_lines)

    # -- writing -------------------------------------------------------------------
    def source_line(self, ln: Line) -> Line | None:
        """A re-linked line with the parent it had in its source (``relinked_from``)."""
        return source_form(ln)

    def output_items(self, t: Transcript) -> Iterator[Line]:
        """The lines, with the resume chain kept: a line whose parent was dropped (window, cut,
        repair, archive) points at its nearest ancestor still written (``relink``), and so
        does a compact_boundary's ``logicalParentUuid``; the uuids its ``compactMetadata`` names
(Claude Code 2.1's preservedSegment and preservedMessages) point at lines still written
(``relink_metadata``). A ``progress`` line whose parent was
        dropped goes with it (the progress of a tool call no longer there)."""
        parents = t.extra.get(PARENTS)
        if not isinstance(parents, dict) or not parents:
            yield from super().output_items(t)
            return
        lines = list(super().output_items(t))
        written = {ln.obj["uuid"] for ln in lines if isinstance(ln.obj, dict) and isinstance(ln.obj.get("uuid"), str)}
        # the lines of what is still here (a message written as one line keeps its later lines' uuids)
        present = written | {ln.obj["uuid"] for e in t.entries for ln in source_lines(e)
                             if isinstance(ln.obj, dict) and isinstance(ln.obj.get("uuid"), str)}
        gone = set()
        for ln in lines:  # in order: a progress line's parent comes before it
            o = ln.obj
            if isinstance(o, dict) and o.get("type") == "progress":
                p = o.get("parentUuid")
                if isinstance(p, str) and p in parents and p not in present:
                    u = o.get("uuid")
                    if isinstance(u, str):
                        written.discard(u)
                        present.discard(u)
                    gone.add(id(ln))
        for ln in lines:
            if id(ln) in gone:
                continue
            o = ln.obj
            if isinstance(o, dict):
                p = o.get("parentUuid")
                meta = o.get(META_KEY)
                was = meta.get(RELINKED) if isinstance(meta, dict) else None
                if isinstance(was, str) and was in written and was != p:
                    ln = relink(ln, was)  # its own parent is back
                elif isinstance(p, str) and p in parents and p not in written:
                    ln = relink(ln, nearest_kept(p, parents, written))
                lp = ln.obj.get(LOGICAL)
                lwas = meta.get(LOGICAL_RELINKED) if isinstance(meta, dict) else None
                if isinstance(lwas, str) and lwas in written and lwas != lp:
                    ln = relink(ln, lwas, LOGICAL, LOGICAL_RELINKED)
                elif isinstance(lp, str) and lp in parents and lp not in written:
                    ln = relink(ln, nearest_kept(lp, parents, written), LOGICAL, LOGICAL_RELINKED)
                ln = relink_metadata(ln, parents, present)
            yield ln

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        if own_line(msg) is not None:
            return [self._render_existing(msg)]
        return [self._render_new(msg, t)]

    def _render_existing(self, msg: Message) -> dict[str, Any]:
        """The message's first line with its message replaced (one line even if it spanned several)."""
        obj = template(msg)
        m0 = obj.get("message")
        first: dict[str, Any] = m0 if isinstance(m0, dict) else {}
        mobj = dict(first)
        typ = "assistant" if msg.role == "assistant" else "user"
        obj["type"] = typ
        mobj["role"] = typ
        content = encode_content(msg, string_ok=isinstance(first.get("content"), str) or msg.role == "system")
        mobj["content"] = content
        if typ == "assistant":
            if msg.model:
                mobj["model"] = msg.model
            last = msg.lines[-1].obj.get("message") if isinstance(msg.lines[-1].obj, dict) else None
            if isinstance(last, dict) and "stop_reason" in last:
                mobj["stop_reason"] = last["stop_reason"]
            if msg.usage is not None:
                u0 = mobj.get("usage")
                mobj["usage"] = usage_json(msg.usage, u0 if isinstance(u0, dict) else None)
        obj["message"] = mobj
        if "toolUseResult" in obj and content != first.get("content"):
            del obj["toolUseResult"]  # the structured copy of an output that changed
        apply_flags(obj, msg)
        store_meta(obj, msg)
        return obj

    def _render_new(self, msg: Message, t: Transcript) -> dict[str, Any]:
        pos = self._position(msg, t)
        parent, ts, near = self._context(pos, t)
        obj = self._line_head(t, parent, near)
        uid = self._new_uuid(msg, t, pos)
        ts = foreign_timestamp(msg) or ts
        if msg.role == "assistant":
            calls = any(b.type == "tool_call" for b in msg.content)
            mobj: dict[str, Any] = {
                "model": msg.model or SYNTHETIC_MODEL,
                "id": msg.usage_key or f"msg_ctxtool_{uuid.UUID(uid).hex[:24]}",
                "type": "message",
                "role": "assistant",
                "content": self._fresh_content(msg, uid),
                "stop_reason": "tool_use" if calls else "end_turn",
                "stop_sequence": None,
            }
            if msg.usage is not None:
                mobj["usage"] = usage_json(msg.usage)
            obj["message"] = mobj
            obj["type"] = "assistant"
        else:
            obj["type"] = "user"
            obj["message"] = {
                "role": "user",
                "content": encode_content(msg, string_ok=msg.role in ("user", "system")),
            }
        obj["uuid"] = uid
        if ts is not None:
            obj["timestamp"] = ts
        apply_flags(obj, msg)
        store_meta(obj, msg)
        return obj

    def _fresh_content(self, msg: Message, uid: str) -> list[Any]:
        out = []
        for i, g in enumerate(codec.groups(msg.content)):
            d = codec.render_group(g, id_first=True)
            if isinstance(d, dict) and d.get("type") == "tool_use" and not d.get("id"):
                d = {"type": "tool_use", "id": f"toolu_ctxtool_{uuid.UUID(uid).hex[:16]}_{i}", **d}
            out.append(d)
        return out

    def record_compaction(self, t: Transcript, note: CompactionNote) -> list[Message | Compaction]:
        """A compaction entry, written as Claude Code's boundary + summary lines (``render_compaction``)."""
        c = note.entry(note.prefixed)
        if note.pins:  # blocks of the summary line: Claude Code's chain runs kept lines -> summary -> boundary
            c.details["pins"] = list(note.pins)
        return [c]

    def render_compaction(self, c: Compaction, t: Transcript) -> list[Any]:
        """What Claude Code writes on /compact: a compact_boundary line, then the summary as a user line."""
        pos = self._position(c, t)
        parent, ts, near = self._context(pos, t)
        tid = t.id or t.path
        b_uuid = str(uuid.uuid5(UUID_NS, f"{tid}|compact_boundary|{pos}"))
        # Claude Code rebuilds a session by walking parentUuid back from its last line. The
        # first kept line's parent was summarized away: the summary takes that uuid, so the
        # chain runs kept lines -> summary -> boundary with every kept line left as it was.
        s_uuid = self._stand_in(pos, t) or str(uuid.uuid5(UUID_NS, f"{tid}|compact_summary|{pos}"))
        boundary = self._line_head(t, None, near)
        boundary["logicalParentUuid"] = parent
        boundary.update(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
            }
        )
        if ts is not None:
            boundary["timestamp"] = ts
        cm: dict[str, Any] = {"trigger": c.details.get("trigger", "manual")}
        if c.tokens_before is not None:
            cm["preTokens"] = c.tokens_before
        boundary.update({"uuid": b_uuid, "level": "info", "compactMetadata": cm})
        summary = self._line_head(t, b_uuid, near)
        summary["type"] = "user"
        pins = c.details.get("pins") or []
        content: Any = [{"type": "text", "text": x} for x in [c.summary, *pins]] if pins else c.summary
        summary["message"] = {"role": "user", "content": content}
        summary["isVisibleInTranscriptOnly"] = True
        summary["isCompactSummary"] = True
        summary["uuid"] = s_uuid
        if ts is not None:
            summary["timestamp"] = ts
        if c.first_kept_id is not None:
            summary[META_KEY] = {"first_kept_id": c.first_kept_id}
        return [boundary, summary]

    def _stand_in(self, pos: int, t: Transcript) -> str | None:
        """The removed parent of the first kept line after the compaction at ``pos``, if any."""
        nxt = next((e for e in t.entries[pos + 1 :] if isinstance(e, Message)), None) if pos >= 0 else None
        if nxt is None or not nxt.lines or not isinstance(nxt.lines[0].obj, dict):
            return None
        parent = nxt.lines[0].obj.get("parentUuid")
        if not isinstance(parent, str) or valid_uuid(parent) is None:
            return None
        for e in t.entries:  # the parent must be gone from the transcript
            lines = source_lines(e)
            if any(isinstance(ln.obj, dict) and ln.obj.get("uuid") == parent for ln in lines):
                return None
        return parent

    # -- helpers for new lines -----------------------------------------------------
    def _line_head(self, t: Transcript, parent: str | None, near: dict[str, Any] | None) -> dict[str, Any]:
        """The common fields of a new line, in Claude Code's order."""
        sess = t.extra.get("session") or {}
        obj: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": bool((near or {}).get("isSidechain", False)),
        }
        if near and "agentId" in near:
            obj["agentId"] = near["agentId"]
        obj["userType"] = sess.get("userType", "external")
        for k in ("cwd", "sessionId", "version", "gitBranch"):
            if k in sess:
                obj[k] = sess[k]
        if "sessionId" not in obj:
            obj["sessionId"] = valid_uuid(t.id) or str(
                uuid.uuid5(UUID_NS, f"session|{t.id or t.path}|{t.index}")
            )
        if near and "slug" in near:
            obj["slug"] = near["slug"]
        return obj

    def _position(self, e: Entry, t: Transcript) -> int:
        """Index of ``e`` in ``t.entries`` (-1 if absent), cached across the calls of one write."""
        entries = t.entries
        c = self._pos
        if c is not None and c[0] == id(entries) and c[1] == len(entries):
            i = c[2].get(id(e))
            if i is not None and i < len(entries) and entries[i] is e:
                return i
        index = {id(x): i for i, x in enumerate(entries)}
        self._pos = (id(entries), len(entries), index)
        i = index.get(id(e), -1)
        return i if i >= 0 and entries[i] is e else -1

    def _new_uuid(self, msg: Message, t: Transcript, pos: int) -> str:
        """A uuid for a new line: the message's own id if it is one, else a deterministic uuid5."""
        own = valid_uuid(msg.id)
        if own is not None:
            return own
        tid = t.id or t.path
        if msg.id:
            return str(uuid.uuid5(UUID_NS, f"{tid}|{pos}|{msg.id}"))
        body = jsonio.dumps_text([b.to_json() for b in msg.content])
        return str(uuid.uuid5(UUID_NS, f"{tid}|{pos}|{msg.role}|{body}"))

    def _context(self, pos: int, t: Transcript) -> tuple[str | None, str | None, dict[str, Any] | None]:
        """Parent uuid, timestamp and a neighbouring source line for a new line at ``pos``."""
        parent: str | None = None
        ts: str | None = None
        near: dict[str, Any] | None = None
        if pos < 0:
            return None, None, None
        for i in range(pos - 1, max(-1, pos - 1 - SCAN_BACK), -1):
            e = t.entries[i]
            o: Any = None
            if isinstance(e, Message):
                if own_line(e) is None:  # rendered anew
                    if parent is None:
                        parent = self._new_uuid(e, t, i)
                    if ts is None:
                        ts = foreign_timestamp(e)
                elif not e.dirty:
                    o = e.lines[-1].obj
                else:
                    o = e.lines[0].obj
            elif isinstance(e, Cont):
                if not e.message.dirty and e.part < len(e.message.lines) and own_line(e.message) is not None:
                    o = e.message.lines[e.part].obj
            elif isinstance(e, Record):
                o = e.line.obj
            if isinstance(o, dict):
                if parent is None and isinstance(o.get("uuid"), str):
                    parent = o["uuid"]
                if ts is None and isinstance(o.get("timestamp"), str):
                    ts = o["timestamp"]
                if near is None and o.get("type") in MESSAGE_TYPES:
                    near = o
            if parent is not None and ts is not None and near is not None:
                break
        return parent, ts, near


FORMAT = ClaudeCodeFormat()

__all__ = ["FORMAT", "ClaudeCodeFormat"]
