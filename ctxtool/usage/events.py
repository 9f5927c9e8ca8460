"""One usage event per API call a transcript records, with the key that identifies the call
across files, registered per format, so a copied or resumed session is counted once. The keys:
docs/architecture.md, "Commands, in more detail"."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from ..model import Message, Transcript, Usage
from ..registry import Registry

Key = tuple[Any, ...]
KeyFn = Callable[[Transcript, Message, str | None], Key | None]

#: format name -> the function giving a message's dedupe key (None: counted, never deduped)
KEYS: Registry[KeyFn] = Registry("usage key")


def key_for(fmt: str) -> Callable[[KeyFn], KeyFn]:
    """A decorator: the function gives the dedupe key of format ``fmt``'s messages."""
    return partial(KEYS.register, name=fmt)


def _figures(u: Usage) -> tuple[int, int, int, int]:
    return (u.input, u.output, u.cache_creation, u.cache_read)


@key_for("claude-code")
def _claude_key(t: Transcript, m: Message, ts: str | None) -> Key | None:
    obj = m.lines[0].obj if m.lines and isinstance(m.lines[0].obj, dict) else {}
    req = obj.get("requestId")
    if m.usage_key is None:
        return None
    return ("claude-code", m.usage_key, req if isinstance(req, str) else None)


@key_for("codex")
def _codex_key(t: Transcript, m: Message, ts: str | None) -> Key | None:
    if ts is None or m.usage is None:
        return None
    return ("codex", ts, m.model, _figures(m.usage))


@key_for("pi")
def _pi_key(t: Transcript, m: Message, ts: str | None) -> Key | None:
    obj = m.lines[0].obj if m.lines and isinstance(m.lines[0].obj, dict) else {}
    inner = obj.get("message")
    ms = inner.get("timestamp") if isinstance(inner, dict) else None
    if m.id is None and ts is None and ms is None:
        return None
    # entry ids exist from session version 2; older files (and their forks) have times only
    return ("pi", m.id, ts, ms if isinstance(ms, (int, float)) else None, _figures(m.usage or Usage()))


def _default_key(t: Transcript, m: Message, ts: str | None) -> Key | None:
    if m.usage_key is not None:
        return (t.format, t.id, m.usage_key)
    if m.id is not None or ts is not None:
        return (t.format, t.id, m.id, ts, _figures(m.usage or Usage()))
    return None


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """One API call: when, which model, which session and project, its tokens."""

    key: Key | None
    time: datetime | None  # aware (UTC when the source gave no offset)
    model: str | None
    session: str
    project: str
    usage: Usage
    path: str
    agent: str = "main"  # the main agent, or the subagent that made the call (``--by agent``)


def _timestamp(m: Message) -> str | None:
    for ln in m.lines:
        obj = ln.obj
        if isinstance(obj, dict):
            ts = obj.get("timestamp")
            if isinstance(ts, str):
                return ts
    return None


def parse_time(ts: str | None) -> datetime | None:
    """An ISO-8601 timestamp as an aware datetime (naive: UTC); None when unreadable."""
    if not ts:
        return None
    from datetime import UTC

    try:
        dt = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def _session_info(t: Transcript) -> tuple[str, str]:
    sess = t.extra.get("session")
    cwd = sess.get("cwd") if isinstance(sess, dict) else None
    if not isinstance(cwd, str) or not cwd:
        cwd = "-" if t.path in ("-", "") else _parent_name(t.path)
    return (t.id or t.label), cwd


def agent_name(t: Transcript) -> str:
    """Which agent a transcript is: ``main``, or a subagent named by its type and id (a
    Claude Code ``subagents/agent-<id>.jsonl``; an opencode session started by another)."""
    a = t.extra.get("agent")
    if isinstance(a, dict):
        kind = a.get("type") or "subagent"
        return f"{kind} ({a.get('id')})" if a.get("id") else str(kind)
    return "main"


def _parent_name(path: str) -> str:
    from pathlib import Path

    return Path(path).parent.name or "-"


def events(t: Transcript) -> Iterator[UsageEvent]:
    """The usage events of one transcript, once per shared :class:`Usage` (a Claude Code
    message written over several lines carries one)."""
    keyfn = KEYS.get(t.format) if t.format in KEYS else _default_key
    session, project = _session_info(t)
    agent = agent_name(t)
    seen: set[int] = set()
    for m in t.iter_messages():
        u = m.usage
        if u is None or id(u) in seen:
            continue
        seen.add(id(u))
        ts = _timestamp(m)
        yield UsageEvent(keyfn(t, m, ts), parse_time(ts), m.model, session, project, u, t.path, agent)
