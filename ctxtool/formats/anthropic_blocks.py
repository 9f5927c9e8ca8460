"""One Anthropic content-block codec, used by the ``anthropic``, ``claude-code`` and ``cline`` formats:
:func:`decode_content` / :func:`decode_block` read blocks, :func:`render_content` writes them back
(an unchanged block as its source). Unknown block types and unknown fields are kept and written
back as they came. Details: docs/architecture.md, "Formats as ctxtool reads them"."""

from __future__ import annotations

from typing import Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..model import Block
from . import images
from .base import SERVER_TOOL

__all__ = ["decode_block", "decode_content", "render_block", "render_content", "render_group", "groups", "tool_input"]

KEPT = "anthropic_block"  # a block (or part) ctxtool has no place for, kept whole
STR_PART = "anthropic_str"  # a bare string in a content list
FIELDS = "anthropic"  # other fields of a known block
REDACTED = "redacted_thinking"
IN_RESULT = "tool_result_image"  # an image returned inside the tool result before it
_KNOWN = {
    "text": ("type", "text"),
    "thinking": ("type", "thinking", "signature"),
    "tool_use": ("type", "id", "name", "input"),
    "tool_result": ("type", "tool_use_id", "content", "is_error"),
}


# -- reading -------------------------------------------------------------------
def _extra_keys(p: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any] | None:
    rest = {k: v for k, v in p.items() if k not in known}
    return {FIELDS: rest} if rest else None


def _text(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else jsonio.dumps_text(v)


def derived_text(p: dict[str, Any]) -> str:
    """A text for a block type ctxtool has no place for (kept verbatim)."""
    for k in ("text", "content", "input"):
        if k in p:
            return _text(p[k])
    return ""


def decode_content(c: Any) -> list[Block]:
    """``content`` (a string, a list of blocks, or null) as blocks."""
    if c is None:
        return []
    if isinstance(c, str):
        return [Block("text", text=c)]
    if not isinstance(c, list):
        return [Block("text", text=jsonio.dumps_text(c), extra={KEPT: c})]
    out: list[Block] = []
    for p in c:
        out.extend(decode_block(p))
    return out


def decode_block(p: Any) -> list[Block]:
    """One content block as ctxtool blocks (a tool result's images follow it)."""
    if isinstance(p, str):
        return [Block("text", text=p, extra={STR_PART: True})]
    if not isinstance(p, dict):
        return [Block("text", text=jsonio.dumps_text(p), extra={KEPT: p})]
    t = p.get("type")
    if t == "text" and isinstance(p.get("text"), str):
        return [Block("text", text=p["text"], extra=_extra_keys(p, _KNOWN["text"]))]
    if t == "thinking":
        extra = _extra_keys(p, _KNOWN["thinking"]) or {}
        if "signature" in p:
            extra["signature"] = p["signature"]
        return [Block("thinking", text=_text(p.get("thinking")), extra=extra or None)]
    if t == REDACTED:
        extra = {"anthropic_type": REDACTED, "data": p.get("data"), **(_extra_keys(p, ("type", "data")) or {})}
        return [Block("thinking", text="", extra=extra)]
    if t == "tool_use":
        more = _extra_keys(p, _KNOWN["tool_use"])
        return [Block("tool_call", id=p.get("id"), name=p.get("name"), arguments=p.get("input"), extra=more)]
    if t == "tool_result":
        return _decode_tool_result(p)
    if t in ("image", "document"):
        return [Block("image", data=p)]
    return [Block("text", text=derived_text(p), extra={KEPT: p})]


def _decode_tool_result(p: dict[str, Any]) -> list[Block]:
    c = p.get("content")
    extra: dict[str, Any] = _extra_keys(p, _KNOWN["tool_result"]) or {}
    found: list[Block] = []
    if c is None:
        text = ""
        if "content" not in p:
            extra["no_content"] = True
    elif isinstance(c, str):
        text = c
    elif isinstance(c, list):
        extra["content_list"] = True
        texts = []
        for part in c:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict) and part.get("type") in ("image", "document"):
                found.append(Block("image", data=part, extra={IN_RESULT: True}))
            else:  # search_result and other parts: kept as text
                texts.append(_text(part))
        text = "\n".join(texts)
    else:
        text = jsonio.dumps_text(c)
    b = Block("tool_result", id=p.get("tool_use_id"), text=text, is_error=bool(p.get("is_error")), extra=extra or None)
    return [b, *found]


# -- writing -------------------------------------------------------------------
def _with_extra(d: dict[str, Any], b: Block) -> dict[str, Any]:
    more = (b.extra or {}).get(FIELDS)
    if isinstance(more, dict):
        for k, v in more.items():
            d.setdefault(k, v)
    return d


def tool_input(args: Any) -> dict[str, Any]:
    """Tool arguments as the object ``input`` (JSON text is parsed; anything else wrapped)."""
    if isinstance(args, dict):
        return args
    if args is None:
        return {}
    if isinstance(args, str):
        try:
            parsed = jsonio.loads(args)
        except CtxtoolError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {"input": args}


def render_block(b: Block) -> dict[str, Any]:
    """One ctxtool block as an Anthropic content block (tool results without their images)."""
    ex = b.extra or {}
    if b.type == "text":
        orig = ex.get(KEPT)
        if orig is not None and b.text == (derived_text(orig) if isinstance(orig, dict) else jsonio.dumps_text(orig)):
            return orig
        return _with_extra({"type": "text", "text": b.text}, b)
    if b.type == "thinking":
        if ex.get("anthropic_type") == REDACTED and not b.text:
            return _with_extra({"type": REDACTED, "data": ex.get("data")}, b)
        d: dict[str, Any] = {"type": "thinking", "thinking": b.text}
        if isinstance(ex.get("signature"), str):
            d["signature"] = ex["signature"]
        return _with_extra(d, b)
    if b.type == "tool_call":
        d = {"type": "server_tool_use" if ex.get(SERVER_TOOL) else "tool_use"}
        if b.id:
            d["id"] = b.id
        d["name"] = b.name or ""
        d["input"] = tool_input(b.arguments)
        return _with_extra(d, b)
    if b.type == "image":
        return images.anthropic_block(b.data)
    if b.type == "tool_result":
        return _render_tool_result(b, [], id_first=False)
    return {"type": "text", "text": b.text}


def _render_tool_result(b: Block, found: list[Block], *, id_first: bool) -> dict[str, Any]:
    ex = b.extra or {}
    d: dict[str, Any] = {}
    if b.id and id_first:
        d["tool_use_id"] = b.id
    d["type"] = "tool_result"
    if b.id and not id_first:
        d["tool_use_id"] = b.id
    if found or ex.get("content_list"):
        parts: list[Any] = [{"type": "text", "text": b.text}] if b.text or not found else []
        parts.extend(images.anthropic_block(i.data) for i in found)
        d["content"] = parts
    elif not (ex.get("no_content") and not b.text):
        d["content"] = b.text
    if b.is_error:
        d["is_error"] = True
    return _with_extra(d, b)


def groups(blocks: list[Block]) -> list[list[Block]]:
    """Blocks grouped as Anthropic content holds them: a tool result with the images it returned."""
    out: list[list[Block]] = []
    for b in blocks:
        if b.type == "image" and (b.extra or {}).get(IN_RESULT) and out and out[-1][0].type == "tool_result":
            out[-1].append(b)
        else:
            out.append([b])
    return out


def render_group(group: list[Block], *, id_first: bool = False) -> Any:
    """One group (see :func:`groups`) as one content block. ``id_first`` writes a tool
    result's ``tool_use_id`` before its ``type``, as Claude Code does."""
    b = group[0]
    if b.type == "tool_result":
        return _render_tool_result(b, group[1:], id_first=id_first)
    if b.type == "text" and (b.extra or {}).get(STR_PART):
        return b.text
    return render_block(b)


def render_content(blocks: list[Block], *, id_first: bool = False) -> list[Any]:
    """Blocks as Anthropic content (images that came from a tool result go back into it)."""
    out: list[Any] = []
    for g in groups(blocks):
        out.append(render_group(g, id_first=id_first))
        b = g[0]
        # one result that answered several calls (LLaMA-Factory): every call gets a result
        for aid in (b.extra or {}).get("answers", ()) if b.type == "tool_result" else ():
            out.append({"type": "tool_result", "tool_use_id": aid, "content": f"(included in the result for {b.id})"})
    return out
