"""OpenAI Chat Completions messages, alone or inside dataset records, in every layout of
:mod:`ctxtool.formats.dataset`; content a string, ``null`` or a list of parts (``text``,
``image_url``, LLaMA-Factory's ``{"type", "value"}`` blocks)."""

from __future__ import annotations

from typing import Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..model import Block, Line, Message, Metadata, Transcript, Usage, token_count
from . import images
from .base import META_KEY, SERVER_TOOL, is_synthetic, put_meta, read_meta, template
from .dataset import DatasetFormat

__all__ = ["FORMAT", "OpenAIFormat", "decode_message", "render_message"]

PART = "openai_part"  # a content part kept whole (written back as it came)
ROLE_MAP = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool", "function": "tool"}


def _is_message(o: Any) -> bool:
    return isinstance(o, dict) and o.get("role") in ROLE_MAP and ("content" in o or "tool_calls" in o)


def _looks_openai(msgs: list[Any]) -> int:
    """Confidence that a list of dicts is OpenAI chat messages (not Anthropic blocks)."""
    if not msgs:
        return 0
    roles = ROLE_MAP
    for m in msgs[:50]:  # each a message (_is_message, inlined: asked of every record detected)
        if not (isinstance(m, dict) and m.get("role") in roles and ("content" in m or "tool_calls" in m)):
            return 0
    for m in msgs[:200]:
        if m.get("tool_calls") or m.get("role") == "tool" or m.get("tool_call_id"):
            return 90
        c = m.get("content")
        if isinstance(c, list):
            for part in c:
                if isinstance(part, dict) and part.get("type") in ("tool_use", "tool_result"):
                    return 0  # Anthropic content blocks
    return 70


def _part_to_block(p: Any) -> Block:
    if isinstance(p, str):
        return Block("text", text=p)
    t = p.get("type")
    if t in ("text", "input_text", "output_text"):
        txt = p.get("text", p.get("value", ""))
        return Block("text", text=txt if isinstance(txt, str) else jsonio.dumps_text(txt))
    if t in ("reasoning", "thinking"):
        txt = p.get("value", p.get("text", p.get("thinking", "")))
        return Block("thinking", text=txt if isinstance(txt, str) else jsonio.dumps_text(txt))
    if t in ("image_url", "image", "input_image"):
        return Block("image", data=p)
    if t == "tool_call" and "value" in p:
        v = p["value"]
        name, args = None, v
        if isinstance(v, str):
            try:
                parsed = jsonio.loads(v)
            except CtxtoolError:
                parsed = None
            if isinstance(parsed, dict) and "name" in parsed:
                name, args = parsed.get("name"), parsed.get("arguments")
        elif isinstance(v, dict):
            name, args = v.get("name"), v.get("arguments")
        return Block("tool_call", name=name, arguments=args, extra={"value_block": True, "value": v})
    txt = p.get("text", p.get("value", ""))
    return Block("text", text=txt if isinstance(txt, str) else jsonio.dumps_text(txt), extra={PART: p})


def _content_text(c: Any) -> str:
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(b.text for b in (_part_to_block(p) for p in c) if b.type == "text")
    return jsonio.dumps_text(c)


def decode_message(o: dict[str, Any], line: Line) -> Message:
    role = ROLE_MAP[o["role"]]
    blocks: list[Block] = []
    get = o.get
    c = get("content")
    calls = get("tool_calls")
    if not (c is None or isinstance(c, (str, list))):
        raise CtxtoolError(f"message content must be a string, a list or null, not {type(c).__name__}", line=line.lineno)
    if calls is not None and not isinstance(calls, list):
        raise CtxtoolError("tool_calls must be a list", line=line.lineno)
    if role == "tool":
        blocks.append(Block("tool_result", text=_content_text(c), id=get("tool_call_id"), name=get("name")))
    else:
        rc = get("reasoning_content")
        if rc and isinstance(rc, str):
            blocks.append(Block("thinking", rc))
        if isinstance(c, str):
            blocks.append(Block("text", c))
        elif c is not None:
            blocks.extend(_part_to_block(p) for p in c)
        if calls:
            for tc in calls:
                fn = tc.get("function") or {}
                blocks.append(Block("tool_call", "", tc.get("id"), fn.get("name"), fn.get("arguments")))
        fc = get("function_call")
        if isinstance(fc, dict):
            blocks.append(Block("tool_call", name=fc.get("name"), arguments=fc.get("arguments"), extra={"legacy": True}))
    usage = None
    u = get("usage")
    model = get("model")
    if u is None:  # mini-swe-agent keeps the model's response (litellm's) in extra.response
        ex = get("extra")
        resp = ex.get("response") if isinstance(ex, dict) else None
        if isinstance(resp, dict):
            u = resp.get("usage")
            model = model if model is not None else resp.get("model")
    if isinstance(u, dict):
        details = u.get("prompt_tokens_details")
        try:
            cached = token_count(details.get("cached_tokens") if isinstance(details, dict) else None)
            usage = Usage(token_count(u.get("prompt_tokens")) - cached, token_count(u.get("completion_tokens")), 0, cached)
        except CtxtoolError as e:
            e.line = line.lineno
            raise
    meta = read_meta(o) if META_KEY in o else Metadata()
    return Message(role, blocks, get("id"), meta, usage, None, model if isinstance(model, str) else None, [line])


def render_message(msg: Message, tmpl: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A message as OpenAI chat messages (a tool message per tool result)."""
    out: list[dict[str, Any]] = []
    results = [b for b in msg.content if b.type == "tool_result"]
    for b in results:
        o: dict[str, Any] = dict(tmpl or {}) if msg.role == "tool" and len(results) == 1 else {}
        o["role"] = "tool"
        if b.id and not is_synthetic(b):
            o["tool_call_id"] = b.id
        o["content"] = b.text
        if b.name and "name" in (tmpl or {}):
            o["name"] = b.name
        put_meta(o, msg)
        out.append(o)
    rest = [b for b in msg.content if b.type != "tool_result"]
    if rest or not results:
        role = "system" if msg.role == "system" else ("assistant" if msg.role == "assistant" else "user")
        o = dict(tmpl or {}) if not results else {}
        if o.get("role") == "developer" and role == "system":
            role = "developer"
        o["role"] = role
        value_style = any(b.extra and b.extra.get("value_block") for b in rest) or (
            isinstance(o.get("content"), list) and o["content"] and isinstance(o["content"][0], dict) and "value" in o["content"][0]
        )
        texts = [b for b in rest if b.type in ("text", "image") or (b.type == "thinking" and value_style)]
        # provider-side tools (e.g. Codex web_search) have no Chat Completions form
        calls = [b for b in rest if b.type == "tool_call" and not (b.extra or {}).get(SERVER_TOOL)]
        thinking = [b for b in rest if b.type == "thinking" and not value_style]
        if value_style:
            parts: list[Any] = []
            for b in rest:
                if b.type == "text":
                    parts.append({"type": "text", "value": b.text})
                elif b.type == "thinking":
                    parts.append({"type": "reasoning", "value": b.text})
                elif b.type == "tool_call":
                    parts.append({"type": "tool_call", "value": _call_value(b)})
                elif b.type == "image":
                    parts.append(b.data)
            o["content"] = parts
            calls = []
        elif len(texts) == 1 and texts[0].type == "text" and not (texts[0].extra or {}).get(PART):
            o["content"] = texts[0].text
        elif not texts:
            o["content"] = None if (calls or role == "assistant") else ([] if isinstance(o.get("content"), list) else "")
        else:
            o["content"] = [
                images.openai_part(b.data) if b.type == "image" else ((b.extra or {}).get(PART) or {"type": "text", "text": b.text})
                for b in texts
            ]
        if thinking:
            o["reasoning_content"] = "\n".join(b.text for b in thinking)
        else:
            o.pop("reasoning_content", None)
        if calls:
            o["tool_calls"] = [
                {
                    "id": b.id if not is_synthetic(b) else None,
                    "type": "function",
                    "function": {
                        "name": b.name,
                        "arguments": b.arguments if isinstance(b.arguments, str) else jsonio.dumps_text(b.arguments),
                    },
                }
                for b in calls
            ]
        else:
            o.pop("tool_calls", None)
        put_meta(o, msg)
        out.append(o)
    return out


def _call_value(b: Block) -> Any:
    """A LLaMA-Factory ``tool_call`` value: the original text when name and arguments are unchanged."""
    orig = (b.extra or {}).get("value")
    if orig is not None:
        parsed = jsonio.loads(orig) if isinstance(orig, str) else orig
        if isinstance(parsed, dict) and parsed.get("name") == b.name and parsed.get("arguments") == b.arguments:
            return orig
    return jsonio.dumps_text({"name": b.name, "arguments": b.arguments})


class OpenAIFormat(DatasetFormat):
    name = "openai"
    description = "OpenAI Chat Completions messages (JSONL, JSON array, or dataset records)"
    reads = "message per line, JSON array, record per line, array of records, one record"
    default_layout = "records_jsonl"
    item_needs = "an OpenAI chat message (needs 'role' and 'content')"

    def is_item(self, o: Any) -> bool:
        return _is_message(o)

    def score(self, items: list[Any], rec: dict[str, Any] | None = None, single: bool = False) -> int:
        return _looks_openai(items)

    def decode(self, o: dict[str, Any], line: Line) -> Message:
        return decode_message(o, line)

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        tmpl = template(msg)
        if tmpl and not _own_template(tmpl):
            tmpl = {}  # a line of another format (converted): do not copy its fields
        return render_message(msg, tmpl)


def _own_template(o: dict[str, Any]) -> bool:
    """Whether a message's source object is an OpenAI chat message (not an Anthropic response, a Claude Code line...)."""
    if not _is_message(o) or _looks_openai([o]) == 0:
        return False
    return not (o.get("type") == "message" and "stop_reason" in o)


FORMAT = OpenAIFormat()
