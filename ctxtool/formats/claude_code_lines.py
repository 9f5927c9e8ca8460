"""Claude Code log lines: the content, usage, flag and metadata codec the ``claude-code``
format reads and writes with (see :mod:`ctxtool.formats.claude_code`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..model import KIND_COMPACTION_SUMMARY, Block, Line, Message, Transcript, Usage, token_count
from . import anthropic_blocks as codec
from .base import META_KEY, exact_obj

MESSAGE_TYPES = ("user", "assistant")


# -- reading -------------------------------------------------------------------
def decode_content(c: Any) -> list[Block]:
    """``message.content`` as blocks (the Anthropic codec; a string or a list of blocks)."""
    if not isinstance(c, (str, list)):
        raise CtxtoolError("message content is neither a string nor a list of blocks")
    return codec.decode_content(c)


def decode_usage(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    return Usage(
        token_count(u.get("input_tokens")),
        token_count(u.get("output_tokens")),
        token_count(u.get("cache_creation_input_tokens")),
        token_count(u.get("cache_read_input_tokens")),
    )


def only_tool_results(c: Any) -> bool:
    return (
        isinstance(c, list)
        and bool(c)
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in c)
    )


def is_cc_line(o: Any) -> bool:
    return (
        isinstance(o, dict)
        and isinstance(o.get("type"), str)
        and "sessionId" in o
        and "uuid" in o
        and "parentUuid" in o
    )


@dataclass(frozen=True, slots=True)
class BoundaryInfo:
    """What a ``compact_boundary`` line records of its compaction: Claude Code 2.1 writes
    ``compactMetadata`` in its session files (camelCase) and ``compact_metadata`` in its SDK
    stream (snake_case); both are read. ``preserved``: the uuids of the messages the
    compaction kept verbatim (``preservedMessages.uuids``)."""

    trigger: str | None = None
    pre_tokens: int | None = None
    post_tokens: int | None = None
    cumulative_dropped_tokens: int | None = None
    duration_ms: int | None = None
    preserved: tuple[str, ...] = ()
    logical_parent: str | None = None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def boundary_info(o: Any) -> BoundaryInfo:
    """The compaction a ``compact_boundary`` line records (empty for any other value)."""
    if not isinstance(o, dict):
        return BoundaryInfo()
    md = o.get("compactMetadata")
    if not isinstance(md, dict):
        md = o.get("compact_metadata")
    md = md if isinstance(md, dict) else {}

    def get(camel: str, snake: str) -> Any:
        return md[camel] if camel in md else md.get(snake)

    pm = get("preservedMessages", "preserved_messages")
    uuids = pm.get("uuids") if isinstance(pm, dict) else None
    trig = md.get("trigger")
    lp = o.get(LOGICAL) if LOGICAL in o else o.get("logical_parent_uuid")
    return BoundaryInfo(
        trig if isinstance(trig, str) else None,
        _int(get("preTokens", "pre_tokens")),
        _int(get("postTokens", "post_tokens")),
        _int(get("cumulativeDroppedTokens", "cumulative_dropped_tokens")),
        _int(get("durationMs", "duration_ms")),
        tuple(u for u in uuids if isinstance(u, str)) if isinstance(uuids, list) else (),
        lp if isinstance(lp, str) else None,
    )


# -- writing -------------------------------------------------------------------
def group_key(group: list[Block]) -> bytes:
    return jsonio.dumps([b.to_json() for b in group])


def encode_content(msg: Message, string_ok: bool) -> Any:
    """The ``message.content`` of a message; unchanged blocks reuse their source objects."""
    content = msg.content
    if string_ok and len(content) == 1 and content[0].type == "text" and not content[0].extra:
        return content[0].text
    originals: dict[bytes, Any] = {}
    for ln in msg.lines if own_line(msg) is not None else ():
        m = ln.obj.get("message") if isinstance(ln.obj, dict) else None
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list):
            for d in c:
                originals.setdefault(group_key(codec.decode_block(d)), d)
    out = []
    for g in codec.groups(content):
        orig = originals.get(group_key(g)) if originals else None
        out.append(orig if orig is not None else codec.render_group(g, id_first=True))
    return out


def store_meta(obj: dict[str, Any], msg: Message) -> None:
    """ctxtool metadata under ``ctxtool``; what the line's own flags say is not repeated."""
    md = msg.metadata.to_json()
    if md.get("kind") == KIND_COMPACTION_SUMMARY:
        del md["kind"]  # carried by isCompactSummary
    if msg.role == "system":
        md["role"] = "system"  # Claude Code logs have no system lines: a meta user line
    if md:
        obj[META_KEY] = md
    else:
        obj.pop(META_KEY, None)


def apply_flags(obj: dict[str, Any], msg: Message) -> None:
    if msg.metadata.kind == KIND_COMPACTION_SUMMARY:
        obj["isVisibleInTranscriptOnly"] = True
        obj["isCompactSummary"] = True
    else:
        obj.pop("isCompactSummary", None)
    if msg.extra.get("is_meta") or msg.role == "system":
        obj["isMeta"] = True
    elif obj.get("isMeta"):
        del obj["isMeta"]


def usage_json(u: Usage, base: dict[str, Any] | None = None) -> dict[str, Any]:
    d = dict(base or {})
    d["input_tokens"] = u.input
    d["cache_creation_input_tokens"] = u.cache_creation
    d["cache_read_input_tokens"] = u.cache_read
    d["output_tokens"] = u.output
    return d


def own_line(msg: Message) -> dict[str, Any] | None:
    """The message's first source line if it is a Claude Code message line (not another format's)."""
    if not msg.lines:
        return None
    o = msg.lines[0].obj
    if isinstance(o, dict) and o.get("type") in MESSAGE_TYPES and isinstance(o.get("message"), dict):
        return o
    return None


def foreign_timestamp(msg: Message) -> str | None:
    """The timestamp another format's source line carries (Codex, pi), if any."""
    if msg.lines and isinstance(msg.lines[0].obj, dict):
        ts = msg.lines[0].obj.get("timestamp")
        if isinstance(ts, str):
            return ts
    return None


def valid_uuid(s: Any) -> str | None:
    if not isinstance(s, str):
        return None
    try:
        return str(uuid.UUID(s))
    except ValueError:
        return None


# -- the resume chain (parentUuid) kept when an operation drops lines ---------------------
def nearest_kept(p: str, parents: dict[str, Any], kept: set[str]) -> str | None:
    """The first of ``p`` and its ancestors (by ``parents``) that is ``kept``; ``None`` if none is."""
    cur: Any = p
    for _ in range(len(parents) + 1):
        if not isinstance(cur, str) or cur in kept:
            return cur if isinstance(cur, str) else None
        if cur not in parents:  # beyond this file (a resumed session's earlier file): kept as it was
            return cur
        cur = parents[cur]
    return None  # a cycle


RELINKED = "relinked_from"  # under the line's ``ctxtool`` key: the parentUuid it had in its source
#: a compact_boundary's ``logicalParentUuid`` (the last message before it), as RELINKED
LOGICAL = "logicalParentUuid"
LOGICAL_RELINKED = "logical_relinked_from"


def relink(ln: Line, parent: str | None, key: str = "parentUuid", was_key: str = RELINKED) -> Line:
    """``ln`` with ``parentUuid`` (or ``key``) set to ``parent``; the parent it had is kept
    under ``ctxtool.relinked_from`` (``was_key``; the first one, across several relinks), so
    the link comes back when that line is written again (``restore``)."""
    o = exact_obj(ln)
    new = dict(o)
    meta = dict(o.get(META_KEY)) if isinstance(o.get(META_KEY), dict) else {}
    if was_key in meta and parent == meta[was_key]:  # back to the source's parent
        meta.pop(was_key)
    else:
        meta.setdefault(was_key, o.get(key))
    new[key] = parent
    new.pop(META_KEY, None)
    if meta:
        new[META_KEY] = meta
    return Line(new, lineno=ln.lineno, exact=True)


#: under a compact_boundary's ``ctxtool`` key: the ``compactMetadata`` it had in its source,
#: when the uuids it names (preservedSegment, preservedMessages) were relinked
METADATA_RELINKED = "compact_metadata_relinked_from"
_SEGMENT_KEYS = ("headUuid", "anchorUuid", "tailUuid")
_LIST_KEYS = ("uuids", "allUuids")


def _relinked_metadata(md: dict[str, Any], parents: dict[str, Any], kept: set[str]) -> dict[str, Any]:
    """``md`` with the uuids it names that are gone pointing at the nearest line still there
    (one uuid) or left out (a list): a uuid this file never held is kept as it is."""
    def gone(u: Any) -> bool:
        return isinstance(u, str) and u in parents and u not in kept

    out = dict(md)
    for key in ("preservedSegment", "preservedMessages"):
        sub = md.get(key)
        if not isinstance(sub, dict):
            continue
        new = dict(sub)
        for k in _SEGMENT_KEYS:
            if gone(sub.get(k)):
                new[k] = nearest_kept(sub[k], parents, kept)
        for k in _LIST_KEYS:
            v = sub.get(k)
            if isinstance(v, list) and any(gone(u) for u in v):
                new[k] = [u for u in v if not gone(u)]
        out[key] = new
    return out


def relink_metadata(ln: Line, parents: dict[str, Any], kept: set[str]) -> Line:
    """A compact_boundary line whose ``compactMetadata`` names only lines still written (see
    :func:`_relinked_metadata`); its source metadata kept under ``ctxtool`` (restore)."""
    o = ln.obj
    if not isinstance(o, dict) or o.get("subtype") != "compact_boundary" or not isinstance(o.get("compactMetadata"), dict):
        return ln
    m0 = o.get(META_KEY)
    meta: dict[str, Any] = m0 if isinstance(m0, dict) else {}
    src = meta.get(METADATA_RELINKED, o["compactMetadata"])
    if not isinstance(src, dict):
        return ln
    md = _relinked_metadata(src, parents, kept)
    if md == o["compactMetadata"] and (md == src) == (METADATA_RELINKED not in meta):
        return ln
    new = dict(exact_obj(ln))
    new["compactMetadata"] = md
    m2 = dict(meta)
    if md == src:
        m2.pop(METADATA_RELINKED, None)
    else:
        m2[METADATA_RELINKED] = src
    new.pop(META_KEY, None)
    if m2:
        new[META_KEY] = m2
    return Line(new, lineno=ln.lineno, exact=True)


def unrelink_metadata(ln: Line) -> Line:
    """``ln`` with the ``compactMetadata`` its source had (:func:`relink_metadata` undone)."""
    o = exact_obj(ln)
    meta = o.get(META_KEY)
    if not isinstance(meta, dict) or METADATA_RELINKED not in meta:
        return ln
    new = dict(o)
    m2 = dict(meta)
    new["compactMetadata"] = m2.pop(METADATA_RELINKED)
    new.pop(META_KEY, None)
    if m2:
        new[META_KEY] = m2
    return Line(new, lineno=ln.lineno, exact=True)


def source_form(ln: Line) -> Line | None:
    """A re-linked line as its source wrote it (its parent, its compact_boundary's logical
    parent and metadata as they were); ``None``: ``ln`` was not re-linked."""
    o = ln.obj
    meta = o.get(META_KEY) if isinstance(o, dict) else None
    if not isinstance(meta, dict) or not any(k in meta for k in (RELINKED, LOGICAL_RELINKED, METADATA_RELINKED)):
        return None
    if METADATA_RELINKED in meta:
        ln = unrelink_metadata(ln)
    if LOGICAL_RELINKED in meta:
        ln = relink(ln, meta[LOGICAL_RELINKED], LOGICAL, LOGICAL_RELINKED)
    return relink(ln, meta[RELINKED]) if RELINKED in meta else ln


# -- the window Claude Code runs a model with ------------------------------------------------
#: Claude Code's window for a Claude model named without the ``[1m]`` suffix, whatever the
#: model could take (its model configuration docs: the suffix enables the 1M-token window)
DEFAULT_WINDOW = 200_000


def window_rule(t: Transcript, model: str, registered: int) -> tuple[int, str] | None:
    """Claude Code runs a Claude model with a 200,000-token window unless it is named with
    the ``[1m]`` suffix (the registry gives those 1,000,000). The session files record the
    model without the suffix: a session whose recorded prompt (input plus cache tokens)
    went over 200,000 ran the 1M window, and a subagent whose ``.meta.json`` names a
    ``[1m]`` model too. ``None``: the registry's window holds."""
    # lazy: start-up (`ctxtool formats` would load ctxtool.tokens)
    from ..tokens.models import ONE_M_SUFFIX, ONE_M_WINDOW

    if registered <= DEFAULT_WINDOW or not model.startswith("claude") or model.endswith(ONE_M_SUFFIX):
        return None
    agent = t.extra.get("agent")
    if isinstance(agent, dict) and str(agent.get("model", "")).endswith(ONE_M_SUFFIX):
        return None
    top = max((m.usage.input + m.usage.cache_creation + m.usage.cache_read
               for m in t.messages if m.usage is not None), default=0)
    if top > DEFAULT_WINDOW:
        return max(registered, ONE_M_WINDOW), "transcript:prompt over 200,000"
    return DEFAULT_WINDOW, "claude-code:no [1m] suffix"
