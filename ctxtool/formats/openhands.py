"""OpenHands event streams and evaluation outputs (an event array, one event per line, or
``output.jsonl`` records with the events under ``history``).

Message actions are messages, actions and observations with ``tool_call_metadata`` calls and
results (``finish`` a terminal call), every other event a record kept verbatim; a changed event is
its source with ``content`` or ``args`` replaced. Details: docs/architecture.md."""

from __future__ import annotations

import copy
from typing import Any

from ..errors import CtxtoolError
from ..io.jsonl import Source
from ..model import Block, Line, Message, Record, Transcript, Usage, token_count
from .base import META_KEY, TERMINAL_CALL, assign_positional_ids, is_synthetic, put_meta, read_meta, template
from .dataset import DatasetFormat

__all__ = ["FORMAT", "OpenHandsFormat"]

SOURCES = ("user", "agent", "environment")
TERMINAL = ("finish",)  # actions that end the run: no observation answers them


def _is_event(o: Any) -> bool:
    return isinstance(o, dict) and o.get("source") in SOURCES and ("action" in o or "observation" in o)


# older releases (OpenDevin, the first openhands-resolver output.jsonl) wrote events without
# ``source``, ``args`` or call ids: an action's arguments and ``thought`` at its top level,
# its observation the next event (paired by position)
ACTION_FIELDS = ("action", "thought", "is_confirmed", "security_risk", "keep_prompt", "kernel_init_code",
                 "wait_for_response", "images_urls")


def _is_old_event(o: Any) -> bool:
    return isinstance(o, dict) and "source" not in o and (
        isinstance(o.get("action"), str) or isinstance(o.get("observation"), str))


def _any_event(o: Any) -> bool:
    return _is_event(o) or _is_old_event(o)


def decode_old_event(o: dict[str, Any], line: Line, spoken: bool) -> Message | Record:
    """An event of an older release; ``spoken``: the agent acted already (a ``message``
    after that is the agent's, before it the user's)."""
    if "observation" in o:
        if o.get("observation") in ("null", None) or "content" not in o:
            return Record(line, kind=f"observation:{o.get('observation')}")
        return Message("tool", [Block("tool_result", text=_str(o.get("content")), name=_str(o.get("observation")) or None)],
                       lines=[line], extra={"old_event": True})
    action = o.get("action")
    if action == "message":
        return Message("assistant" if spoken else "user", [Block("text", text=_str(o.get("content")))], lines=[line],
                       extra={"old_event": True})
    if action in ("system",):
        return Message("system", [Block("text", text=_str(o.get("content")))], lines=[line], extra={"old_event": True})
    blocks = [Block("text", text=o["thought"])] if _str(o.get("thought")) else []
    call = Block("tool_call", name=_str(action) or None, arguments={k: v for k, v in o.items() if k not in ACTION_FIELDS})
    if action in TERMINAL:
        call.extra = {TERMINAL_CALL: True}
    blocks.append(call)
    return Message("assistant", blocks, lines=[line], extra={"old_event": True})


def render_old_event(msg: Message, tmpl: dict[str, Any]) -> list[dict[str, Any]]:
    """A changed message of an older release's event: its source event, ``content`` (an
    observation, a message) or ``thought`` (an action) replaced."""
    o = dict(tmpl)
    results = [b for b in msg.content if b.type == "tool_result"]
    if "observation" in o:
        o["content"] = "\n".join(b.text for b in results) if results else "\n".join(b.text for b in msg.content if b.type == "text")
    elif o.get("action") == "message" or o.get("action") == "system":
        o["content"] = "\n".join(b.text for b in msg.content if b.type in ("text", "thinking"))
    else:
        thought = "\n".join(b.text for b in msg.content if b.type in ("text", "thinking"))
        if thought or "thought" in o:
            o["thought"] = thought
    put_meta(o, msg)
    return [o]


def _call_id(o: dict[str, Any]) -> str | None:
    tcm = o.get("tool_call_metadata")
    cid = tcm.get("tool_call_id") if isinstance(tcm, dict) else None
    return cid if isinstance(cid, str) else None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _usage(tcm: dict[str, Any], lineno: int | None) -> tuple[Usage | None, str | None, str | None]:
    mr = tcm.get("model_response")
    if not isinstance(mr, dict) or not isinstance(mr.get("usage"), dict):
        return None, None, None
    u = mr["usage"]
    details = u.get("prompt_tokens_details")
    try:
        cached = token_count(details.get("cached_tokens") if isinstance(details, dict) else None)
        usage = Usage(token_count(u.get("prompt_tokens")) - cached, token_count(u.get("completion_tokens")), 0, cached)
    except CtxtoolError as e:
        e.line = lineno
        raise
    rid, model = mr.get("id"), mr.get("model")
    return usage, rid if isinstance(rid, str) else None, model if isinstance(model, str) else None


def decode_event(o: dict[str, Any], line: Line) -> Message | Record:
    m = _decode_event(o, line)
    if isinstance(m, Message) and META_KEY in o:
        m.metadata = read_meta(o)
    return m


def _decode_event(o: dict[str, Any], line: Line) -> Message | Record:
    cid = _call_id(o)
    src = o.get("source")
    if "observation" in o:
        if cid is None:
            return Record(line, kind=f"observation:{o.get('observation')}")
        tcm = o["tool_call_metadata"]
        name = tcm.get("function_name")
        return Message("tool", [Block("tool_result", text=_str(o.get("content")), id=cid,
                                      name=name if isinstance(name, str) else None)], lines=[line])
    action = o.get("action")
    a = o.get("args")
    args: dict[str, Any] = a if isinstance(a, dict) else {}
    if cid is not None:
        tcm = o["tool_call_metadata"]
        name = tcm.get("function_name")
        blocks = [Block("text", text=args["thought"])] if _str(args.get("thought")) else []
        call = Block("tool_call", id=cid, name=name if isinstance(name, str) else _str(action) or None,
                     arguments={k: v for k, v in args.items() if k != "thought"})
        if action in TERMINAL:
            call.extra = {TERMINAL_CALL: True}
        blocks.append(call)
        usage, key, model = _usage(tcm, line.lineno)
        return Message("assistant", blocks, usage=usage, usage_key=key, model=model, lines=[line])
    if action in ("message", "system") and src in ("user", "agent"):
        text = args.get("content", o.get("message"))
        role = "system" if action == "system" else ("user" if src == "user" else "assistant")
        return Message(role, [Block("text", text=_str(text))], lines=[line])
    return Record(line, kind=f"action:{action}")


def _result_event(b: Block, tmpl: dict[str, Any]) -> dict[str, Any]:
    o: dict[str, Any] = copy.copy(tmpl) if "observation" in tmpl else {
        "source": "environment", "observation": "error", "message": b.text, "extras": {}}
    o["content"] = b.text
    if b.id and not is_synthetic(b) and "tool_call_metadata" not in o:
        o["tool_call_metadata"] = {"function_name": b.name, "tool_call_id": b.id}
    return o


def _call_event(b: Block, thought: str | None, tmpl: dict[str, Any]) -> dict[str, Any]:
    o: dict[str, Any]
    if "action" in tmpl and _call_id(tmpl) == b.id:
        o = copy.copy(tmpl)
    else:
        o = {"source": "agent", "action": b.name or "call", "args": {}}
        if b.id and not is_synthetic(b):
            o["tool_call_metadata"] = {"function_name": b.name, "tool_call_id": b.id}
    args = dict(b.arguments) if isinstance(b.arguments, dict) else ({"input": b.arguments} if b.arguments else {})
    a = o.get("args")
    old: dict[str, Any] = a if isinstance(a, dict) else {}
    if thought is not None and (thought or "thought" in old):
        args["thought"] = thought
    o["args"] = {**old, **args}
    return o


def _text_event(msg: Message, text: str, tmpl: dict[str, Any]) -> dict[str, Any]:
    o: dict[str, Any]
    if "action" in tmpl and _call_id(tmpl) is None:
        o = copy.copy(tmpl)
    else:
        source = "user" if msg.role == "user" else "agent"
        o = {"source": source, "action": "system" if msg.role == "system" else "message"}
    a = o.get("args")
    args: dict[str, Any] = dict(a) if isinstance(a, dict) else {}
    args["content"] = text
    o["args"] = args
    if "message" in o or not tmpl:
        o["message"] = text
    return o


def render_event(msg: Message, tmpl: dict[str, Any]) -> list[dict[str, Any]]:
    """A message as events: its source event with the changed fields replaced, else new ones."""
    text = "\n".join(b.text for b in msg.content if b.type in ("text", "thinking"))
    out = [_result_event(b, tmpl) for b in msg.content if b.type == "tool_result"]
    calls = [b for b in msg.content if b.type == "tool_call"]
    out += [_call_event(b, text if k == 0 else None, tmpl) for k, b in enumerate(calls)]
    if not out:
        out.append(_text_event(msg, text, tmpl))
    for o in out:
        put_meta(o, msg)
    return out


class OpenHandsFormat(DatasetFormat):
    name = "openhands"
    reads = "JSON array, JSONL, record per line"
    description = "OpenHands event streams (JSON array of events) and evaluation output.jsonl (history)"
    default_layout = "entries_array"
    keys = ("history",)
    id_prefix = "oh_"
    item_word = "event"
    item_needs = "an OpenHands event (needs 'source' and 'action' or 'observation')"

    def is_item(self, o: Any) -> bool:
        return _any_event(o)

    def score(self, items: list[Any], rec: dict[str, Any] | None = None, single: bool = False) -> int:
        if items and all(_is_event(o) for o in items[:50]):
            return 95
        # an older release's events (no source): only inside an output.jsonl record (its
        # ``history`` beside ``instruction`` or ``instance_id``), never a bare list
        old = rec is not None and ("instruction" in rec or "instance_id" in rec)
        return 90 if old and items and all(_any_event(o) for o in items[:50]) else 0

    def decode(self, o: dict[str, Any], line: Line) -> Message:
        e = decode_event(o, line)
        if isinstance(e, Record):  # entries_jsonl reads through decode: keep the event whole
            return Message("system", [], lines=[line], extra={"record": True})
        return e

    def read(self, src: Source, policy: Any) -> Any:
        for t in super().read(src, policy):
            if t.extra.get("layout") == "entries_jsonl":
                t.entries = [Record(e.lines[0], kind="event") if isinstance(e, Message) and e.extra.get("record")
                             else e for e in t.entries]
            yield t

    def _transcript(self, items: list[Any], src: Source, index: int, lineno: int | None) -> Transcript:
        t = Transcript(self.name, path=src.path, index=index, lineno=lineno)
        spoken = False
        for i, o in enumerate(items):
            if not _any_event(o):
                raise CtxtoolError(f"event {i} is not {self.item_needs}", path=src.path, line=lineno)
            try:
                if _is_event(o):
                    t.entries.append(decode_event(o, Line(o, None, lineno)))
                    continue
                e = decode_old_event(o, Line(o, None, lineno), spoken)
                if isinstance(e, Message):
                    spoken = spoken or e.role == "assistant"
                    if META_KEY in o:
                        e.metadata = read_meta(o)
                t.entries.append(e)
            except CtxtoolError as e:
                e.message = f"event {i}: {e.message}"
                e.path, e.line = e.path or src.path, e.line or lineno
                raise
        assign_positional_ids(t.messages, f"{self.id_prefix}{index}_")
        return t

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        tmpl = template(msg)
        if _is_old_event(tmpl) and msg.extra.get("old_event"):
            return render_old_event(msg, tmpl)
        return render_event(msg, tmpl if _is_event(tmpl) else {})


FORMAT = OpenHandsFormat()
