"""Codex CLI rollout files (``~/.codex/sessions/.../rollout-*.jsonl``): ``{"timestamp", "type",
"payload"}`` lines (``session_meta``, ``response_item``, ``event_msg``, ``turn_context``,
``compacted``), and the older layout without the ``payload`` wrapper.

Response items are read by :mod:`ctxtool.formats.codex_items`; usage comes from ``token_count``
events. Details: docs/architecture.md, "Formats as ctxtool reads them"."""

from __future__ import annotations

import copy
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import CtxtoolError
from ..io.jsonl import Source
from ..model import (
    Block,
    Compaction,
    Line,
    Message,
    Record,
    Transcript,
    Usage,
    is_injected,
    source_lines,
    token_count,
)
from .base import (
    RECORD_ERRORS,
    CompactionNote,
    ErrorPolicy,
    Format,
    entry_items,
    exact_obj,
    put_meta,
    read_meta,
    template,
)
from .codex_events import event_messages
from .codex_items import (
    EPOCH,
    LINE_TYPES,
    RESPONSE_TYPES,
    decode_item,
    render_items,
    text_of,
)


@dataclass
class _WriteState:
    """What the writer carries from line to line: the last timestamp and cumulative usage."""

    ts: str = EPOCH
    total: Usage | None = None


def _det_uuid(*parts: Any) -> str:
    import hashlib  # not at import: detection imports this module, and hashlib loads OpenSSL

    h = hashlib.sha1("|".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return str(uuid.UUID(hex=h[:32]))


def _usage_json(u: Usage) -> dict[str, int]:
    return {
        "input_tokens": u.input + u.cache_read + u.cache_creation,
        "cached_input_tokens": u.cache_read,
        "output_tokens": u.output,
        "reasoning_output_tokens": 0,
        "total_tokens": u.total,
    }


def _event_text(e: Any) -> str | None:
    """The prompt of an ``event_msg`` ``user_message`` record, else ``None``."""
    if not isinstance(e, Record) or e.kind != "event_msg:user_message" or not isinstance(e.line.obj, dict):
        return None
    p = e.line.obj.get("payload")
    msg = p.get("message") if isinstance(p, dict) else None
    return msg if isinstance(msg, str) and msg.strip() else None


def _event_prompts(t: Transcript) -> None:
    """User prompts recorded only as ``event_msg`` ``user_message`` lines (Codex Desktop writes no
    ``response_item`` for them) become user messages. Codex CLI writes both, the response item
    first: an event that follows a user message of its turn (one that is not injected context),
    or repeats the text of one, stays a record, so each prompt is counted once."""
    texts = Counter(m.text().strip() for m in t.entries if isinstance(m, Message) and m.role == "user")
    pending: Message | None = None  # the user's message of this turn, not yet matched by its event
    for i, e in enumerate(t.entries):
        if isinstance(e, Message):
            if e.role != "user":
                pending = None
            elif not is_injected(e):
                pending = e
            continue
        text = _event_text(e)
        if text is None or not isinstance(e, Record):
            continue
        if pending is not None or texts[text.strip()] > 0:
            if pending is not None:
                texts[pending.text().strip()] -= 1
            else:
                texts[text.strip()] -= 1
            pending = None
            continue
        t.entries[i] = Message("user", [Block("text", text=text)], metadata=read_meta(e.line.obj), lines=[e.line])


class CodexFormat(Format):
    name = "codex"
    description = "Codex CLI rollout files (session_meta / response_item / event_msg lines)"
    reads = "JSONL"
    default_layout = "entries_jsonl"
    bookkeeping_records = ("event_msg", "response_item")
    #: the line types of a rollout, and those of Codex 0.145+ kept verbatim
    #: ``inter_agent_communication_metadata`` (``{"trigger_turn": bool}``) marks the
    #: ``agent_message`` item after it as one that starts a turn of the receiving agent
    known_records = frozenset((*LINE_TYPES, "world_state", "token_usage_record", "inter_agent_communication_metadata"))

    def unknown_records(self, t: Transcript) -> Counter[str]:
        """Line types beyond the five a rollout has (a legacy rollout's records are its own)."""
        return Counter() if t.extra.get("codex_layout") == "legacy" else super().unknown_records(t)

    # -- detection -----------------------------------------------------------------------
    def sniff(self, sample: list[Any], src: Source) -> int:
        if src.layout != "jsonl" or not sample:
            return 0
        objs = [o for o in sample if isinstance(o, dict)]
        if not objs or len(objs) != len(sample):
            return 0
        first = objs[0]
        # newer releases add line types (world_state, token_usage_record): any typed line with a
        # payload is a rollout line once some of them are of the types Codex always writes
        wrapped = [o for o in objs if isinstance(o.get("type"), str) and isinstance(o.get("payload"), dict)]
        if wrapped and any(o.get("type") in LINE_TYPES for o in wrapped):
            if len(wrapped) < len(objs) * 0.9:
                return 0
            return 98 if first.get("type") == "session_meta" else 85
        # The layout before the payload wrapper: a header, then bare items and state records.
        if "type" not in first and "id" in first and "timestamp" in first and ("instructions" in first or "git" in first):
            rest = objs[1:]
            if not rest or any(o.get("type") in RESPONSE_TYPES or o.get("record_type") for o in rest):
                return 80
        return 0

    # -- reading -------------------------------------------------------------------------
    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        t = Transcript("codex", path=src.path, index=0, lineno=1)
        t.extra["layout"] = "entries_jsonl"
        names: dict[str, str] = {}
        model: str | None = None
        last_assistant: Message | None = None
        last_total: Any = None
        legacy = False
        for ln in src.lines(policy):
            o = ln.obj
            try:
                if not isinstance(o, dict):
                    raise CtxtoolError("not a Codex rollout line (expected a JSON object)", path=src.path, line=ln.lineno)
                typ = o.get("type")
                wrapped = "payload" in o and isinstance(typ, str) and (typ in LINE_TYPES or not legacy)
                if not wrapped and ln.lineno == t.lineno and "id" in o and "timestamp" in o and "type" not in o:
                    legacy = True
                    t.extra["codex_layout"] = "legacy"
                    t.id = o.get("id")
                    t.extra["session"] = {"id": o.get("id")}
                    t.entries.append(Record(ln, kind="session_header"))
                    continue
                if not wrapped:
                    if legacy and typ in RESPONSE_TYPES:
                        m = self._item(o, o, ln, names, model)
                        if m is not None:
                            t.entries.append(m)
                            if m.role == "assistant":
                                last_assistant = m
                            continue
                    if legacy or typ == "response_item" or typ in LINE_TYPES:
                        t.entries.append(Record(ln, kind=str(typ or o.get("record_type") or "")))
                        continue
                    raise CtxtoolError("not a Codex rollout line (no 'type'/'payload')", path=src.path, line=ln.lineno)
                p = o["payload"]
                if not isinstance(p, dict) and typ in LINE_TYPES:
                    raise CtxtoolError(f"{typ} line: payload is not an object", path=src.path, line=ln.lineno)
                if typ not in LINE_TYPES:  # a line type this reader does not know: kept as it is
                    t.entries.append(Record(ln, kind=str(typ)))
                elif typ == "session_meta":
                    t.id = p.get("id", t.id)
                    t.extra["session"] = {
                        k: p.get(k) for k in ("id", "cwd", "cli_version", "model_provider") if k in p
                    }
                    bi = p.get("base_instructions")
                    text = bi.get("text") if isinstance(bi, dict) else (bi if isinstance(bi, str) else None)
                    if isinstance(text, str):
                        t.entries.append(Message("system", [Block("text", text=text)], metadata=read_meta(o), lines=[ln]))
                    else:
                        t.entries.append(Record(ln, kind="session_meta"))
                elif typ == "response_item":
                    m = self._item(p, o, ln, names, model)
                    if m is None:
                        t.entries.append(Record(ln, kind=f"response_item:{p.get('type')}"))
                    else:
                        t.entries.append(m)
                        if m.role == "assistant":
                            last_assistant = m
                elif typ == "turn_context":
                    if isinstance(p.get("model"), str):
                        model = p["model"]
                        t.extra["model"] = model
                    t.entries.append(Record(ln, kind="turn_context"))
                elif typ == "event_msg":
                    et = p.get("type")
                    if et == "token_count":
                        if isinstance(p.get("rate_limits"), dict):  # the account's limits as of this call
                            t.extra["rate_limits"] = p["rate_limits"]
                        info = p.get("info")
                        if isinstance(info, dict):
                            if info.get("model_context_window"):
                                t.extra["context_window"] = info["model_context_window"]
                            total = info.get("total_token_usage")
                            last = info.get("last_token_usage")
                            if isinstance(last, dict) and last_assistant is not None and total != last_total:
                                cached = token_count(last.get("cached_input_tokens"))
                                last_assistant.usage = Usage(
                                    input=token_count(last.get("input_tokens")) - cached,
                                    output=token_count(last.get("output_tokens")),
                                    cache_read=cached,
                                )
                                last_assistant.usage_key = f"codex-usage:{ln.lineno}"
                            last_total = total
                    elif et == "task_started" and p.get("model_context_window"):
                        t.extra["context_window"] = p["model_context_window"]
                    t.entries.append(Record(ln, kind=f"event_msg:{et}"))
                elif typ == "compacted":
                    details: dict[str, Any] = {}
                    if "replacement_history" in p:
                        details["replacement_history"] = p["replacement_history"]
                    if read_meta(o).extra.get("kept_after"):  # ctxtool's: the messages after it were kept
                        details["kept_after"] = True
                    msg = p.get("message", "")
                    t.entries.append(
                        Compaction(summary=msg if isinstance(msg, str) else text_of(msg), details=details, lines=[ln])
                    )
            except RECORD_ERRORS as e:
                policy.reject(e, src.path, ln.lineno, "Codex line")
        _event_prompts(t)
        event_messages(t)
        yield t

    def _item(
        self, p: dict[str, Any], o: dict[str, Any], ln: Line, names: dict[str, str], model: str | None
    ) -> Message | None:
        dec = decode_item(p, names)
        if dec is None:
            return None
        role, blocks = dec
        m = Message(
            role,
            blocks,
            id=p.get("id") if isinstance(p.get("id"), str) else None,
            metadata=read_meta(o),
            model=model if role == "assistant" else None,
            lines=[ln],
        )
        if p.get("type") == "agent_message":
            m.extra["agent_message"] = {k: p[k] for k in ("author", "recipient") if isinstance(p.get(k), str)}
        return m

    # -- writing -------------------------------------------------------------------------
    def render(self, msg: Message, t: Transcript) -> list[Any]:
        return self._render(msg, t, _WriteState(ts=self._neighbour_ts(msg, t)))

    def _neighbour_ts(self, msg: Message, t: Transcript) -> str:
        own = template(msg).get("timestamp")
        if isinstance(own, str):
            return own
        ts = EPOCH
        for e in t.entries:
            if e is msg:
                break
            lines = source_lines(e)
            for line in lines:
                if isinstance(line.obj, dict) and isinstance(line.obj.get("timestamp"), str):
                    ts = line.obj["timestamp"]
        return ts

    def _render(self, msg: Message, t: Transcript, st: _WriteState) -> list[Any]:
        tmpl = template(msg)
        t0 = tmpl.get("timestamp")
        ts: str = t0 if isinstance(t0, str) else st.ts
        legacy = t.extra.get("codex_layout") == "legacy"
        tpl = tmpl.get("payload")
        if tmpl.get("type") == "event_msg" and isinstance(tpl, dict) and tpl.get("type") == "user_message":
            if msg.role == "user" and all(b.type == "text" for b in msg.content):  # a prompt read from its event
                line = dict(tmpl)
                line["payload"] = {**tpl, "message": msg.text()}
                put_meta(line, msg)
                return [line]
            tmpl = {}
        if tmpl.get("type") == "session_meta" and isinstance(tmpl.get("payload"), dict):
            if msg.role == "system" and all(b.type == "text" for b in msg.content):
                payload = copy.deepcopy(tmpl["payload"])
                bi = payload.get("base_instructions")
                payload["base_instructions"] = {**(bi if isinstance(bi, dict) else {}), "text": msg.text()}
                line = dict(tmpl)
                line["payload"] = payload
                put_meta(line, msg)
                return [line]
            tmpl = {}
        tp: dict[str, Any] | None = None
        if tmpl.get("type") == "response_item" and isinstance(tmpl.get("payload"), dict):
            tp = tmpl["payload"]
        elif legacy and tmpl.get("type") in RESPONSE_TYPES:
            tp = tmpl
        items = render_items(msg, tp)
        out: list[Any] = []
        for p in items:
            if legacy:
                put_meta(p, msg)
                out.append(p)
                continue
            line = dict(tmpl) if tp is not None and len(items) == 1 and not legacy else {}
            line["timestamp"] = ts
            line["type"] = "response_item"
            line["payload"] = p
            put_meta(line, msg)
            out.append(line)
        if msg.usage is not None and msg.role == "assistant" and tp is None and not legacy:
            # A message from another format: its usage goes into a token_count event, as Codex writes it.
            out.append(self._token_count(msg.usage, ts, st, t))
        return out

    def _token_count(self, u: Usage, ts: str, st: _WriteState, t: Transcript) -> dict[str, Any]:
        total = Usage()  # the running tally: a copy, the messages' own usage is never changed
        if st.total is not None:
            total.add(st.total)
        total.add(u)
        st.total = total
        info: dict[str, Any] = {"total_token_usage": _usage_json(st.total), "last_token_usage": _usage_json(u)}
        cw = t.extra.get("context_window")
        info["model_context_window"] = cw if isinstance(cw, int) else None
        return {"timestamp": ts, "type": "event_msg", "payload": {"type": "token_count", "info": info, "rate_limits": None}}

    def record_compaction(self, t: Transcript, note: CompactionNote) -> list[Message | Compaction]:
        """A ``compacted`` item (its replacement_history: the summary as a user message)."""
        return [note.entry(note.prefixed), *note.pin_messages()]

    def read_compaction(self, t: Transcript, c: Compaction) -> tuple[str, Message | None]:
        """The summary; when it is short, the messages of its replacement_history carry the rest."""
        text, kept = super().read_compaction(t, c)
        hist = c.details.get("replacement_history")
        if isinstance(hist, list) and len(text.strip()) < 200:
            parts = [
                f"[{item.get('role', '?')}]: {p['text']}"
                for item in hist
                if isinstance(item, dict) and item.get("type") == "message"
                for p in item.get("content") or []
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
            if parts:
                text = (text + "\n\n" if text.strip() else "") + "\n".join(parts)
        return text, kept

    def render_compaction(self, c: Compaction, t: Transcript) -> list[Any]:
        return self._render_compaction(c, t, _WriteState(ts=self._compaction_ts(c, t)))

    def _compaction_ts(self, c: Compaction, t: Transcript) -> str:
        if c.lines and isinstance(c.lines[0].obj, dict) and isinstance(c.lines[0].obj.get("timestamp"), str):
            return c.lines[0].obj["timestamp"]
        ts = EPOCH
        for e in t.entries:
            if e is c:
                break
            if isinstance(e, Message):
                ts = self._neighbour_ts(e, t) if e.lines else ts
        return ts

    def _render_compaction(self, c: Compaction, t: Transcript, st: _WriteState) -> list[Any]:
        tmpl = dict(c.lines[0].obj) if c.lines and isinstance(exact_obj(c.lines[0]), dict) else {}
        t0 = tmpl.get("timestamp")
        ts: str = t0 if isinstance(t0, str) else st.ts
        history = c.details.get("replacement_history")
        if not isinstance(history, list):
            history = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": c.summary}]}]
        payload = dict(tmpl.get("payload") or {}) if tmpl.get("type") == "compacted" else {}
        payload["message"] = c.summary
        payload["replacement_history"] = history
        line = tmpl if tmpl.get("type") == "compacted" else {}
        line["timestamp"] = ts
        line["type"] = "compacted"
        line["payload"] = payload
        if not c.lines:
            # ctxtool keeps recent messages verbatim after its compaction (Codex items carry no
            # id to name the first): say so, so that their usage is not read as the new context's
            line["ctxtool"] = {"kept_after": True}
        out: list[Any] = [line]
        if not c.lines:  # Codex follows a new compaction with this event
            out.append({"timestamp": ts, "type": "event_msg", "payload": {"type": "context_compacted"}})
        return out

    def output_items(self, t: Transcript) -> Iterator[Line]:
        st = _WriteState()
        session_done = False
        legacy = t.extra.get("codex_layout") == "legacy"
        for e in t.entries:
            first_lines = source_lines(e)
            if not session_done:
                session_done = True
                if not legacy and not self._is_session_line(e):
                    # A transcript from another format: open it with a session_meta line,
                    # carrying a leading system prompt as the base instructions.
                    sys_msg = e if isinstance(e, Message) and e.role == "system" else None
                    first_ts = self._first_ts(t)
                    st.ts = first_ts
                    yield Line(self._session_meta(t, sys_msg, first_ts))
                    if sys_msg is not None and all(b.type == "text" for b in sys_msg.content):
                        continue
            for line in first_lines[:1]:
                if isinstance(line.obj, dict) and isinstance(line.obj.get("timestamp"), str):
                    st.ts = line.obj["timestamp"]
            yield from entry_items(e, lambda m: self._render(m, t, st), lambda c: self._render_compaction(c, t, st))

    @staticmethod
    def _is_session_line(e: Any) -> bool:
        lines = source_lines(e)
        return bool(lines) and isinstance(lines[0].obj, dict) and lines[0].obj.get("type") == "session_meta"

    @staticmethod
    def _first_ts(t: Transcript) -> str:
        for e in t.entries:
            lines = source_lines(e)
            for line in lines:
                if isinstance(line.obj, dict) and isinstance(line.obj.get("timestamp"), str):
                    return line.obj["timestamp"]
        return EPOCH

    def _session_meta(self, t: Transcript, sys_msg: Message | None, ts: str) -> dict[str, Any]:
        s0 = t.extra.get("session")
        sess: dict[str, Any] = s0 if isinstance(s0, dict) else {}
        sid = t.id or _det_uuid("codex-session", t.path, t.index)
        payload: dict[str, Any] = {
            "id": sid,
            "timestamp": ts,
            "cwd": sess.get("cwd") if isinstance(sess.get("cwd"), str) else "",
            "originator": "ctxtool",
            "cli_version": sess.get("cli_version") if isinstance(sess.get("cli_version"), str) else "0.0.0",
            "source": "cli",
            "model_provider": sess.get("model_provider") if isinstance(sess.get("model_provider"), str) else "openai",
        }
        line: dict[str, Any] = {"timestamp": ts, "type": "session_meta", "payload": payload}
        if sys_msg is not None and all(b.type == "text" for b in sys_msg.content):
            payload["base_instructions"] = {"text": sys_msg.text()}
            put_meta(line, sys_msg)
        return line


FORMAT = CodexFormat()
