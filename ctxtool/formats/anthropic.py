"""Anthropic Messages API: request bodies, message lists and dataset records (what the codec
reads and writes: :class:`AnthropicFormat`)."""

from __future__ import annotations

from typing import Any

from ..model import Block, Line, Message, Transcript, Usage, token_count
from .anthropic_blocks import decode_content, render_block, render_content
from .base import put_meta, read_meta, template
from .dataset import DatasetFormat

ROLES = ("user", "assistant", "system")
#: block types only the Anthropic Messages API uses
ANTHROPIC_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "document",
        "server_tool_use",
        "web_search_tool_result",
        "search_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
#: content part types or fields that only OpenAI-style messages use
OPENAI_PARTS = frozenset(
    {"image_url", "input_text", "output_text", "input_image", "input_audio", "refusal", "reasoning"}
)
OPENAI_FIELDS = ("tool_calls", "tool_call_id", "function_call", "reasoning_content", "refusal")
SYSTEM_HINT = "anthropic_system"  # a record's system field
ITEM_HINT = "anthropic_system_item"  # a {"role": "system"} item of a messages list


def _is_message(o: Any) -> bool:
    return isinstance(o, dict) and o.get("role") in ROLES and "content" in o


def _score(msgs: Any, *, request: bool = False) -> int:
    """Confidence that ``msgs`` are Anthropic messages (0 when OpenAI-specific fields appear)."""
    if not isinstance(msgs, list) or not msgs:
        return 0
    roles = ROLES
    for m in msgs[:50]:  # each a message (_is_message, inlined: asked of every record detected)
        if not (isinstance(m, dict) and m.get("role") in roles and "content" in m):
            return 0
    anthropic = False
    for m in msgs[:200]:
        if not isinstance(m, dict):
            return 0
        if m.get("role") not in ROLES or any(k in m for k in OPENAI_FIELDS):
            return 0
        c = m.get("content")
        if isinstance(c, list):
            for p in c:
                if not isinstance(p, dict):
                    continue
                t = p.get("type")
                if t in OPENAI_PARTS or "value" in p:
                    return 0
                if t in ANTHROPIC_BLOCKS or (t == "image" and isinstance(p.get("source"), dict)):
                    anthropic = True
                elif "cache_control" in p or "citations" in p:
                    anthropic = True
    if anthropic:
        return 95
    return 80 if request else 50


def _system_blocks_anthropic(system: Any) -> bool:
    return (
        isinstance(system, list)
        and bool(system)
        and all(isinstance(b, dict) and b.get("type") == "text" for b in system)
    )


def _record_score(rec: dict[str, Any], items: list[Any], *, single: bool) -> int:
    is_request = "system" in rec and (single or _system_blocks_anthropic(rec["system"]))
    is_request = is_request or ("max_tokens" in rec and rec.get("messages") is items)
    s = _score(items, request=is_request)
    if (
        s
        and _system_blocks_anthropic(rec.get("system"))
        and any(isinstance(b, dict) and "cache_control" in b for b in rec["system"])
    ):
        return 95
    return s


# -- reading -------------------------------------------------------------------
def _usage(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None

    def n(k: str) -> int:
        return token_count(u.get(k))

    return Usage(
        n("input_tokens"), n("output_tokens"), n("cache_creation_input_tokens"), n("cache_read_input_tokens")
    )


def decode_message(o: dict[str, Any], line: Line) -> Message:
    c = o.get("content")
    blocks = decode_content(c)
    role = o["role"]
    if (
        role == "user"
        and isinstance(c, list)
        and c
        and all(isinstance(p, dict) and p.get("type") == "tool_result" for p in c)
    ):
        role = "tool"
    return Message(
        role,
        blocks,
        id=o.get("id") if isinstance(o.get("id"), str) else None,
        metadata=read_meta(o),
        usage=_usage(o.get("usage")),
        model=o.get("model") if isinstance(o.get("model"), str) else None,
        lines=[line],
        extra={ITEM_HINT: True} if role == "system" else {},
    )


def decode_system(system: Any, lineno: int | None) -> Message:
    """A record's ``system`` field as a system message that remembers its shape."""
    blocks = decode_content(system)
    return Message("system", blocks, lines=[Line(system, None, lineno)], extra={SYSTEM_HINT: True})


# -- writing -------------------------------------------------------------------
def _plain_text(blocks: list[Block]) -> bool:
    return len(blocks) == 1 and blocks[0].type == "text" and not blocks[0].extra


def render_message(msg: Message, tmpl: dict[str, Any] | None = None) -> dict[str, Any]:
    o: dict[str, Any] = dict(tmpl or {})
    if msg.role == "system":
        o["role"] = "system"
    elif msg.role == "assistant":
        o["role"] = "assistant"
    else:
        o["role"] = "user"
    string_ok = "content" not in o or isinstance(o.get("content"), str)
    if msg.role != "tool" and string_ok and _plain_text(msg.content):
        o["content"] = msg.content[0].text
    else:
        o["content"] = render_content(msg.content)
    put_meta(o, msg)
    return o


def render_system(msgs: list[Message]) -> Any:
    """The ``system`` field for the leading system messages."""
    if len(msgs) == 1:
        m = msgs[0]
        if m.lines and not m.dirty and m.extra.get(SYSTEM_HINT):
            return m.lines[0].obj
        orig = m.lines[0].obj if m.lines and m.extra.get(SYSTEM_HINT) else None
        if not isinstance(orig, list) and _plain_text(m.content):
            return m.content[0].text
        if not isinstance(orig, list) and not m.content:
            return ""
    return [render_block(b) for m in msgs for b in m.content if b.type != "tool_result"] or ""


def own_template(msg: Message) -> dict[str, Any] | None:
    """The message's source object when it is an Anthropic message (not a line of another format)."""
    tmpl = template(msg)
    if not _is_message(tmpl) or _score([tmpl]) == 0:
        return None
    return tmpl


class AnthropicFormat(DatasetFormat):
    """Layouts read and written back as they came (the same as the ``openai`` format):

    * ``record_object``: one request body ``{model, max_tokens, system, messages, tools, ...}``
    * ``records_jsonl`` / ``records_array``: dataset records with messages under a key
      (``messages``, ``conversations``, ... as in :data:`dataset.MESSAGE_KEYS`)
    * ``entries_jsonl`` / ``entries_array``: one message per line, or a JSON array of messages

    Every field other than the messages is kept. A record's ``system`` field (a
    string or a list of text blocks) becomes a leading system message with the hint
    ``anthropic_system`` and is written back to the ``system`` field in its original
    shape. Messages may be request messages ``{role, content}`` or response objects
    ``{id, type: "message", role, model, content, usage, ...}`` (usage is read).

    Content blocks: ``text``; ``thinking`` (its ``signature`` kept in ``Block.extra``);
    ``redacted_thinking`` (a thinking block with empty text, ``data`` kept);
    ``tool_use`` (a tool call whose arguments are ``input``); ``tool_result`` (text
    parts joined by newlines, images inside it become image blocks right after it);
    ``image`` and ``document`` (image blocks whose ``data`` is the source block).
    Other block types are kept verbatim as text blocks. A user message holding only
    tool results has role ``tool``.

    Writing changed or new messages:

    * in record layouts the leading system messages go to the record's ``system``
      field (a string when it was one and still is one text block, else a list of
      text blocks; several leading system messages become one list). A system
      message read from a ``{"role": "system"}`` item of a messages list (hint
      ``anthropic_system_item``) stays an item, and so does a system message later
      in the conversation: the Messages API has no other place for it;
    * the record keeps the original ``system`` value (also in canonical headers); it
      is replaced from the system message on writing, or dropped when that message
      was removed;
    * in entries layouts (no record) system messages are ``{"role": "system"}`` items;
    * tool messages become user messages with ``tool_result`` blocks;
    * tool arguments that are not a JSON object are wrapped as ``{"arguments": ...}``;
    * a message's id, usage and model are kept when it was read from this format
      (its source object is the template) and not added to new messages, since
      request messages have no such fields.
    """

    name = "anthropic"
    description = "Anthropic Messages API (request bodies, message lists, dataset records)"
    reads = "message per line, JSON array, record per line, array of records, one record"
    default_layout = "record_object"
    id_prefix = "toolu_"
    item_needs = "an Anthropic message (needs 'role' user/assistant and 'content')"
    system_hint = SYSTEM_HINT
    item_hint = ITEM_HINT

    def is_item(self, o: Any) -> bool:
        return _is_message(o)

    def score(self, items: list[Any], rec: dict[str, Any] | None = None, single: bool = False) -> int:
        return _score(items) if rec is None else _record_score(rec, items, single=single)

    def decode(self, o: dict[str, Any], line: Line) -> Message:
        return decode_message(o, line)

    def decode_system(self, system: Any, lineno: int | None) -> Message | None:
        return decode_system(system, lineno)

    def system_value(self, msgs: list[Message]) -> Any:
        return render_system(msgs)

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        if msg.extra.get(SYSTEM_HINT) and msg.role == "system":
            # a record's system field written as a message (entries layouts): no template
            return [render_message(msg, None)]
        return [render_message(msg, own_template(msg))]


FORMAT = AnthropicFormat()
