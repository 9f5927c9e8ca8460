"""Codex rollouts' messages written as events (``event_msg``): which of them are messages
the ``response_item`` lines do not hold (see :func:`event_messages`; the ``codex`` format,
:mod:`ctxtool.formats.codex`, calls it after reading)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..model import Block, Message, Record, Transcript
from .base import read_meta

__all__ = ["event_messages"]


#: ``item_completed`` item types (Codex 0.147 writes them PascalCase, serde's default) -> role
_ITEM_ROLES = {"AgentMessage": "assistant", "agent_message": "assistant", "UserMessage": "user", "user_message": "user"}


def _item_text(item: dict[str, Any]) -> str:
    """The text of an ``item_completed`` message item: its content parts' texts."""
    c = item.get("content")
    if isinstance(c, str):
        return c
    parts = [x.get("text") for x in c if isinstance(x, dict)] if isinstance(c, list) else []
    text = "\n".join(x for x in parts if isinstance(x, str))
    return text or (item["text"] if isinstance(item.get("text"), str) else "")


def _event_message(e: Any) -> tuple[str, str] | None:
    """(role, text) of an event that carries a whole message: ``agent_message`` (``message``)
    or ``item_completed`` with an AgentMessage / UserMessage item; else ``None``."""
    if not isinstance(e, Record) or not isinstance(e.line.obj, dict):
        return None
    p = e.line.obj.get("payload")
    if not isinstance(p, dict):
        return None
    if e.kind == "event_msg:agent_message":
        msg = p.get("message")
        return ("assistant", msg) if isinstance(msg, str) and msg.strip() else None
    if e.kind == "event_msg:item_completed":
        item = p.get("item")
        role = _ITEM_ROLES.get(str(item.get("type"))) if isinstance(item, dict) else None
        if role is not None and isinstance(item, dict):
            text = _item_text(item)
            return (role, text) if text.strip() else None
    return None


def _from_event(m: Message) -> bool:
    return bool(m.lines) and isinstance(m.lines[0].obj, dict) and m.lines[0].obj.get("type") == "event_msg"


def event_messages(t: Transcript) -> None:
    """Messages Codex wrote as events only. Across 0.151-0.153 (no schema version says which)
    a turn's messages are ``response_item`` lines, events (``user_message`` /
    ``agent_message``, and ``item_completed`` with a UserMessage / AgentMessage item: 0.147's
    PascalCase names), or both. In a turn (from one ``task_started`` to the next) that has
    response items of a role, the events of that role repeat them and stay records; in one
    that has none, its events are its messages, events of different kinds with one text
    being one message (``agent_message`` and ``item_completed`` for one reply). Each message
    is counted once, none lost."""
    bound = "event_msg:task_started"
    if not any(isinstance(e, Record) and e.kind == bound for e in t.entries):
        bound = "turn_context"
    start = 0
    for k in range(len(t.entries) + 1):
        if k == len(t.entries) or (isinstance(t.entries[k], Record) and t.entries[k].kind == bound):  # type: ignore[union-attr]
            _turn_events(t, start, k)
            start = k


def _turn_events(t: Transcript, a: int, b: int) -> None:
    entries = t.entries
    items = {e.role for e in entries[a:b] if isinstance(e, Message) and not _from_event(e)}
    seen: Counter[tuple[str, str, str]] = Counter()  # (role, text, event kind) made a message in this turn
    for i in range(a, b):
        e = entries[i]
        if isinstance(e, Message) and _from_event(e) and e.role == "user":  # a prompt _event_prompts made
            seen[("user", e.text().strip(), "event_msg:user_message")] += 1
            continue
        ev = _event_message(e)
        if ev is None or not isinstance(e, Record) or ev[0] in items:
            continue
        key = (ev[0], ev[1].strip())
        twin = next((x for x in seen if x[:2] == key and x[2] != e.kind and seen[x] > 0), None)
        if twin is not None:  # the same message, as an event of another kind
            seen[twin] -= 1
            continue
        seen[(*key, e.kind)] += 1
        entries[i] = Message(ev[0], [Block("text", text=ev[1])], metadata=read_meta(e.line.obj), lines=[e.line])
