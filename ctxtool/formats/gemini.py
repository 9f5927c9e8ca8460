"""Gemini CLI session files (``~/.gemini/tmp/<project_hash>/chats/session-*.json``): one JSON
document whose ``messages`` are ``user``, ``gemini`` and notice records.

A call and its result share a record: the assistant message and its tool message each take
their part of it as their source, so each changes alone. The newer JSONL files are
:mod:`ctxtool.formats.gemini_jsonl`, which shares this record codec."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..io.jsonl import Source
from ..model import Block, Compaction, Line, Message, Metadata, Record, Transcript, Usage, token_count
from .base import (
    META_KEY,
    STRUCTURE_ERRORS,
    ErrorPolicy,
    Format,
    document_style,
    malformed,
    put_meta,
    read_meta,
    write_document,
)

ROLE = {"user": "user", "gemini": "assistant"}
RESULT_AT = "gemini_result_at"  # hint: where each call's ``result`` was among its keys


def is_session(doc: Any) -> bool:
    msgs = doc.get("messages") if isinstance(doc, dict) else None
    return (isinstance(msgs, list) and "sessionId" in doc
            and all(isinstance(m, dict) and isinstance(m.get("type"), str) for m in msgs[:50]))


def parts_text(v: Any) -> str:
    """The text of Gemini parts (a string, a part, or a list of them)."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "\n".join(t for t in (parts_text(p) for p in v) if t)
    if isinstance(v, dict):
        if isinstance(v.get("text"), str):
            return str(v["text"])
        fr = v.get("functionResponse")
        if isinstance(fr, dict):
            resp = fr.get("response")
            if isinstance(resp, dict):
                for k in ("output", "error", "content"):
                    if k in resp:
                        return resp[k] if isinstance(resp[k], str) else jsonio.dumps_text(resp[k])
            return jsonio.dumps_text(resp)
        return jsonio.dumps_text(v)
    return jsonio.dumps_text(v)


def _with_text(result: Any, text: str, call: dict[str, Any]) -> Any:
    """``result`` (Gemini parts) with its text replaced by ``text``."""
    if parts_text(result) == text:
        return result
    if isinstance(result, list) and len(result) == 1 and isinstance(result[0], dict):
        fr = result[0].get("functionResponse")
        if isinstance(fr, dict) and isinstance(fr.get("response"), dict):
            resp = dict(fr["response"])
            key = next((k for k in ("output", "error", "content") if k in resp), "output")
            resp[key] = text
            return [{**result[0], "functionResponse": {**fr, "response": resp}}]
    return [{"functionResponse": {"id": call.get("id"), "name": call.get("name"), "response": {"output": text}}}]


def decode_record(o: dict[str, Any], line_no: int | None) -> list[Message | Record]:
    role = ROLE.get(o.get("type", ""))
    if role is None:
        return [Record(Line(o), kind=f"gemini:{o.get('type')}")]
    blocks: list[Block] = []
    for th in o.get("thoughts") or []:
        if isinstance(th, dict):
            txt = "\n".join(x for x in (th.get("subject"), th.get("description")) if isinstance(x, str) and x)
            blocks.append(Block("thinking", text=txt, extra={"thought": th}))
    c = o.get("content")
    calls = o.get("toolCalls") or []
    if not isinstance(calls, list):
        raise CtxtoolError("toolCalls must be a list", line=line_no)
    text = parts_text(c)
    if text or not calls:
        blocks.append(Block("text", text=text))
    for tc in calls:
        blocks.append(Block("tool_call", id=tc.get("id"), name=tc.get("name"), arguments=tc.get("args")))
    usage = None
    tok = o.get("tokens")
    if isinstance(tok, dict):
        cached = token_count(tok.get("cached"))
        # Gemini CLI's ``output`` leaves out the thinking (``thoughts``, billed as output) and
        # ``input`` the tool-use prompt (``tool``); ``total`` is their sum with both
        usage = Usage(max(token_count(tok.get("input")) + token_count(tok.get("tool")) - cached, 0),
                      token_count(tok.get("output")) + token_count(tok.get("thoughts")), 0, cached)
    answered = [tc for tc in calls if "result" in tc]
    head_obj: dict[str, Any] = o
    extra: dict[str, Any] = {}
    if answered:
        head_obj = {k: v for k, v in o.items()}
        # the results (and the tool message's metadata, kept on the first answered call)
        # are the tool message's: the assistant's source is the record without them
        head_obj["toolCalls"] = [{k: v for k, v in tc.items() if k != "result" and (k != META_KEY or tc is not answered[0])}
                                 for tc in calls]
        extra[RESULT_AT] = [list(tc).index("result") if "result" in tc else None for tc in calls]
    model = o.get("model")
    out: list[Message | Record] = [Message(role, blocks, id=o.get("id") if isinstance(o.get("id"), str) else None,
                                           metadata=read_meta(o) if META_KEY in o else Metadata(), usage=usage,
                                           model=model if isinstance(model, str) else None, lines=[Line(head_obj)], extra=extra)]
    if answered:
        results = [Block("tool_result", text=parts_text(tc.get("result")), id=tc.get("id"), name=tc.get("name"),
                         is_error=tc.get("status") == "error") for tc in answered]
        src = {"results": [tc.get("result") for tc in answered]}
        meta = answered[0].get(META_KEY)
        out.append(Message("tool", results, id=f"{o.get('id')}/results", lines=[Line(src)],
                           metadata=Metadata.from_json(meta) if isinstance(meta, dict) else Metadata()))
    return out


def build_record(head: Message | None, tools: list[Message]) -> dict[str, Any]:
    src = head.lines[0].obj if head is not None and head.lines else None
    own = isinstance(src, dict) and src.get("type") in ROLE
    if head is not None and own and not head.dirty:
        rec = dict(src)  # type: ignore[arg-type]
    elif head is not None:
        rec = dict(src) if own else {}  # type: ignore[arg-type]
        rec["type"] = "gemini" if head.role == "assistant" else "user"
        if head.id is not None and "id" not in rec:
            rec["id"] = head.id
        thoughts = [b for b in head.content if b.type == "thinking"]
        if thoughts:
            rec["thoughts"] = [
                (b.extra or {}).get("thought") if decode_thought((b.extra or {}).get("thought")) == b.text
                else {"subject": "", "description": b.text} for b in thoughts
            ]
        elif rec.get("thoughts"):
            rec.pop("thoughts")  # an empty list stays as it was
        text = "\n".join(b.text for b in head.content if b.type == "text")
        before = rec.get("content")
        rec["content"] = before if parts_text(before) == text and "content" in rec else (
            [{"text": text}] if isinstance(before, list) else text)
        calls = [b for b in head.content if b.type == "tool_call"]
        if calls:
            old = {tc.get("id"): tc for tc in rec.get("toolCalls") or [] if isinstance(tc, dict)}
            rec["toolCalls"] = [{**old.get(b.id, {"status": "success"}), "id": b.id, "name": b.name,
                                 "args": b.arguments if b.arguments is not None else {}} for b in calls]
        elif rec.get("toolCalls"):
            rec.pop("toolCalls")
        put_meta(rec, head)
    else:
        rec = {"type": "gemini", "content": "", "toolCalls": []}
    results = [b for m in tools for b in m.content if b.type == "tool_result"]
    if not results:
        return rec
    srcs: list[Any] = []
    if len(tools) == 1 and tools[0].lines and isinstance(tools[0].lines[0].obj, dict):
        srcs = list(tools[0].lines[0].obj.get("results") or [])
        if tools[0].dirty and len(srcs) != len(results):
            srcs = []  # results added or removed: the source ones no longer line up
    by_id = {b.id: (i, b) for i, b in enumerate(results)}
    at = head.extra.get(RESULT_AT) if head is not None else None
    calls_out = []
    for k, tc in enumerate(rec.get("toolCalls") or []):
        got = by_id.get(tc.get("id"))
        if got is None:
            calls_out.append(tc)
            continue
        i, b = got
        result = srcs[i] if i < len(srcs) and parts_text(srcs[i]) == b.text else _with_text(srcs[i] if i < len(srcs) else None, b.text, tc)
        items = list(tc.items())
        pos = at[k] if isinstance(at, list) and k < len(at) and isinstance(at[k], int) else len(items)
        items.insert(min(pos, len(items)), ("result", result))
        new = dict(items)
        if i == 0 and tools:
            put_meta(new, tools[0])
        calls_out.append(new)
    rec["toolCalls"] = calls_out
    return rec


def decode_thought(th: Any) -> str | None:
    if not isinstance(th, dict):
        return None
    return "\n".join(x for x in (th.get("subject"), th.get("description")) if isinstance(x, str) and x)


def subagent_info(record: dict[str, Any], sid: str | None) -> dict[str, Any] | None:
    """A Gemini CLI subagent session's agent (``kind: "subagent"`` in its metadata): its id."""
    if record.get("kind") != "subagent":
        return None
    return {"id": sid, "type": "subagent"} if sid else {"type": "subagent"}


class GeminiFormat(Format):
    known_records = frozenset(("gemini:info", "gemini:error", "gemini:warning"))
    name = "gemini"
    description = "Gemini CLI session files (JSON: sessionId + messages of type user/gemini with toolCalls)"
    reads = "JSON session document"
    default_layout = "gemini_session"
    record_family = "gemini"

    def sniff(self, sample: list[Any], src: Source) -> int:
        return 95 if src.layout == "json" and sample and is_session(sample[0]) else 0

    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        doc = src.doc
        if not is_session(doc):
            raise CtxtoolError("not a Gemini CLI session (needs 'sessionId' and 'messages')", path=src.path)
        t = Transcript(self.name, path=src.path, index=0, id=str(doc.get("sessionId")))
        for k, o in enumerate(doc["messages"]):
            try:
                t.entries.extend(decode_record(o, None))
            except CtxtoolError as e:
                e.message = f"message {k}: {e.message}"
                e.path = src.path
                policy.handle(e)
            except STRUCTURE_ERRORS as e:
                policy.handle(malformed(e, src.path, None, f"message {k}"))
        t.record = {k: (None if k == "messages" else v) for k, v in doc.items()}
        t.messages_key = "messages"
        t.extra["layout"] = "gemini_session"
        if src.style is not None:
            t.extra["source_style"] = src.style.to_json()
        agent = subagent_info(t.record, t.id)
        if agent is not None:  # a subagent's session (``kind: "subagent"``): part of its parent's
            t.extra["agent"] = agent
        yield t

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        return [build_record(msg, [])]

    def write(self, transcripts: Iterable[Transcript], out: IO[bytes]) -> None:
        ts = list(transcripts)
        if not ts:
            return
        first = ts[0]
        doc: dict[str, Any] = dict(first.record) if first.record is not None and first.format == "gemini" else {
            "sessionId": first.id or "session", "messages": None}
        doc["messages"] = [r for t in ts for r in self.records(t)]
        write_document(out, doc, document_style(first))

    def records(self, t: Transcript) -> list[Any]:
        groups: list[tuple[Message | None, list[Message]] | Record] = []
        for e in t.entries:
            if isinstance(e, Record):
                groups.append(e)
            elif isinstance(e, Compaction):
                groups.append((Message("user", [Block("text", text=e.summary)], metadata=Metadata(kind="compaction_summary"),
                                       dirty=True), []))
            elif isinstance(e, Message):
                last = groups[-1] if groups else None
                if e.role == "tool" and isinstance(last, tuple) and (last[0] is None or last[0].role == "assistant"):
                    last[1].append(e)
                elif e.role == "tool":
                    groups.append((None, [e]))
                else:
                    groups.append((e, []))
        return [g.line.obj if isinstance(g, Record) else build_record(*g) for g in groups]


FORMAT = GeminiFormat()
