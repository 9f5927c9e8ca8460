"""OpenAI Responses API item lists (what is sent to ``/v1/responses`` as ``input``), in the dataset
layouts of :mod:`ctxtool.formats.dataset`, read by Codex's item codec
(:mod:`ctxtool.formats.codex_items`); item types it does not know are opaque records, written
back as they came. Details: docs/architecture.md, "Formats as ctxtool reads them"."""

from __future__ import annotations

from typing import Any

from ..model import Line, Message, Metadata, Record, Transcript
from .base import META_KEY, put_meta, read_meta, template
from .codex_items import RESPONSE_TYPES, ROLE_IN, decode_item, render_items
from .dataset import MESSAGE_KEYS, DatasetFormat

KEYS = ("input", *MESSAGE_KEYS)
#: item types only the Responses API writes (a chat message list has none of them)
OWN_TYPES = frozenset(RESPONSE_TYPES) | {"compaction", "item_reference", "file_search_call",
                                          "computer_call", "computer_call_output", "image_generation_call",
                                          "code_interpreter_call", "mcp_call", "mcp_list_tools"}
#: Anthropic content-block types: a ``type: message`` object holding them is an Anthropic response
_ANTHROPIC_PARTS = frozenset({"text", "tool_use", "tool_result", "thinking", "redacted_thinking"})


def _short_message(o: dict[str, Any]) -> bool:
    return "type" not in o and o.get("role") in ROLE_IN and "content" in o


def is_item(o: Any) -> bool:
    if not isinstance(o, dict):
        return False
    t = o.get("type")
    return (isinstance(t, str) and t in OWN_TYPES) or _short_message(o)


def _anthropic(o: dict[str, Any]) -> bool:
    c = o.get("content")
    return o.get("type") == "message" and (
        "stop_reason" in o
        or isinstance(c, list) and any(isinstance(p, dict) and p.get("type") in _ANTHROPIC_PARTS for p in c)
    )


def score(items: list[Any]) -> int:
    """Confidence that ``items`` is a Responses item list: every item one, and at least one
    carrying a Responses item ``type`` (a chat message list has none)."""
    head = items[:200]
    for o in head:  # the cheaper test first (a loop: asked of every record detected)
        if isinstance(o, dict) and "type" in o:
            break
    else:
        return 0
    if not all(is_item(o) for o in head) or any(_anthropic(o) for o in head):
        return 0
    return 93


class ResponsesFormat(DatasetFormat):
    name = "responses"
    description = "OpenAI Responses API input item lists (message, function_call(_output), reasoning; others kept opaque)"
    default_layout = "entries_jsonl"
    reads = "item per line, JSON array, request bodies (`input`) per line, array, one body"
    keys = KEYS
    item_needs = "a Responses API input item (needs 'type', or 'role' and 'content')"

    def is_item(self, o: Any) -> bool:
        return is_item(o)

    def score(self, items: list[Any], rec: dict[str, Any] | None = None, single: bool = False) -> int:
        return score(items)

    def decode(self, o: dict[str, Any], line: Line) -> Message | Record:
        p = {"type": "message", **o} if _short_message(o) else o
        names: dict[str, str] = {}
        got = decode_item(p, names)
        if got is None:  # compaction, item references, provider tools: opaque, kept in place
            return Record(line, kind=f"item:{o.get('type')}")
        role, blocks = got
        meta = read_meta(o) if META_KEY in o else Metadata()
        return Message(role, blocks, id=o.get("id") if isinstance(o.get("id"), str) else None, metadata=meta, lines=[line])

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        tp = template(msg)
        if not is_item(tp):
            tp = {}  # a line of another format (converted): do not copy its fields
        short = bool(tp) and _short_message(tp)
        out = render_items(msg, {"type": "message", **tp} if short else (tp or None))
        if short and len(out) == 1 and out[0].get("type") == "message":
            out[0].pop("type")
        for o in out:  # ctxtool's metadata (visibility, output refs) on each item of the message
            put_meta(o, msg)
        return out


FORMAT = ResponsesFormat()
