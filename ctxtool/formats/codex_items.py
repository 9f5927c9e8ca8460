"""Codex response items: the item codec the ``codex`` format reads and writes with
(messages, reasoning, tool calls and outputs; see :mod:`ctxtool.formats.codex`)."""

from __future__ import annotations

from typing import Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..model import Block, Message
from . import images
from .base import SERVER_TOOL

LINE_TYPES = ("session_meta", "turn_context", "response_item", "event_msg", "compacted")
RESPONSE_TYPES = (
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "web_search_call",
    "local_shell_call",
)
ROLE_IN = {"developer": "system", "system": "system", "user": "user", "assistant": "assistant"}
PART = "codex_part"  # a content part kept whole (written back as it came)
EPOCH = "1970-01-01T00:00:00.000Z"


# -- reading -----------------------------------------------------------------------------
def text_of(v: Any) -> str:
    """A tool output as text: strings as they are, content-item lists and objects by their text."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        parts = []
        for it in v:
            if isinstance(it, str):
                parts.append(it)
            elif isinstance(it, dict) and isinstance(it.get("text"), str):
                parts.append(it["text"])
        return "\n".join(parts)
    if isinstance(v, dict):
        for k in ("content", "text", "output"):
            if k in v:
                return text_of(v[k])
    return jsonio.dumps_text(v)


def part_block(p: Any) -> Block:
    if isinstance(p, dict):
        t = p.get("type")
        if t in ("input_text", "output_text", "text") and isinstance(p.get("text"), str):
            return Block("text", text=p["text"])
        if t == "input_image":
            return Block("image", data=p)
        txt = p.get("text", p.get("refusal", ""))
        return Block("text", text=txt if isinstance(txt, str) else jsonio.dumps_text(txt), extra={PART: p})
    return Block("text", text=p if isinstance(p, str) else jsonio.dumps_text(p))


def reasoning_text(p: dict[str, Any]) -> str:
    texts = [s.get("text", "") for s in p.get("summary") or [] if isinstance(s, dict)]
    if not texts:
        texts = [c.get("text", "") for c in p.get("content") or [] if isinstance(c, dict)]
    return "\n".join(x for x in texts if isinstance(x, str))


def decode_item(p: dict[str, Any], names: dict[str, str]) -> tuple[str, list[Block]] | None:
    """A response item payload as (role, blocks); ``None`` for items that are not messages.

    ``names`` maps call ids to tool names (filled by calls, read by outputs).
    """
    t = p.get("type")
    if t == "message":
        role = ROLE_IN.get(p["role"])
        if role is None:
            return None
        c = p.get("content")
        blocks = [part_block(x) for x in c] if isinstance(c, list) else ([Block("text", text=c)] if isinstance(c, str) else [])
        return role, blocks
    if t == "agent_message":  # a message between agents (``author`` -> ``recipient``): the recipient's input
        c = p.get("content")
        return "user", [part_block(x) for x in c] if isinstance(c, list) else []
    if t == "reasoning":
        return "assistant", [Block("thinking", text=reasoning_text(p))]
    if t == "function_call":
        names[p["call_id"]] = p.get("name") or ""
        return "assistant", [Block("tool_call", id=p["call_id"], name=p.get("name"), arguments=p.get("arguments"))]
    if t == "custom_tool_call":
        names[p["call_id"]] = p.get("name") or ""
        return "assistant", [
            Block("tool_call", id=p["call_id"], name=p.get("name"), arguments=p.get("input"), extra={"custom": True})
        ]
    if t == "local_shell_call":
        cid = p.get("call_id") or p.get("id")
        if cid:
            names[cid] = "local_shell"
        return "assistant", [
            Block("tool_call", id=cid, name="local_shell", arguments=p.get("action"), extra={"item": "local_shell_call"})
        ]
    if t == "web_search_call":
        return "assistant", [
            Block("tool_call", id=p.get("id"), name="web_search", arguments=p.get("action"), extra={SERVER_TOOL: True})
        ]
    if t in ("function_call_output", "custom_tool_call_output"):
        out = p.get("output")
        is_error = isinstance(out, dict) and out.get("success") is False
        extra = {"custom": True} if t == "custom_tool_call_output" else None
        cid = p["call_id"]
        return "tool", [Block("tool_result", id=cid, text=text_of(out), name=names.get(cid), is_error=is_error, extra=extra)]
    return None


# -- writing -----------------------------------------------------------------------------
def call_payload(b: Block, tp: dict[str, Any] | None) -> dict[str, Any]:
    ex = b.extra or {}
    ttype = tp.get("type") if tp else None
    if ex.get(SERVER_TOOL) and b.name == "web_search" or ttype == "web_search_call":
        p: dict[str, Any] = {"type": "web_search_call", "status": "completed"}
        if b.id:
            p["id"] = b.id
        args = b.arguments
        if isinstance(args, str):
            try:
                args = jsonio.loads(args)
            except CtxtoolError:
                args = {"type": "search", "query": args}
        p["action"] = args if isinstance(args, dict) else {"type": "search", "query": b.arguments_text()}
        return p
    if ex.get("item") == "local_shell_call" or ttype == "local_shell_call":
        return {"type": "local_shell_call", "call_id": b.id, "status": "completed", "action": b.arguments}
    if ex.get("custom") or ttype == "custom_tool_call":
        return {"type": "custom_tool_call", "status": "completed", "call_id": b.id, "name": b.name, "input": b.arguments_text()}
    return {"type": "function_call", "name": b.name, "arguments": b.arguments_text(), "call_id": b.id}


def result_payload(b: Block, tp: dict[str, Any] | None) -> dict[str, Any]:
    custom = bool((b.extra or {}).get("custom")) or (tp is not None and tp.get("type") == "custom_tool_call_output")
    out: Any = b.text
    if tp is not None and "output" in tp and not isinstance(tp["output"], str) and text_of(tp["output"]) == b.text:
        out = tp["output"]  # a structured output whose text is unchanged
    return {"type": "custom_tool_call_output" if custom else "function_call_output", "call_id": b.id, "output": out}


def render_items(msg: Message, tp: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A message as Codex response item payloads; ``tp`` is its source payload (kept fields)."""
    out: list[dict[str, Any]] = []
    parts: list[Block] = []
    role = msg.role

    def flush() -> None:
        if not parts:
            return
        if role == "system":
            r, kind = "developer", "input_text"
        elif role == "assistant":
            r, kind = "assistant", "output_text"
        else:
            r, kind = "user", "input_text"
        if tp is not None and tp.get("type") == "message" and tp.get("role") in ("system", "developer") and r == "developer":
            r = tp["role"]
        content = []
        for b in parts:
            if b.type == "image":
                content.append(images.codex_part(b.data))
            elif (b.extra or {}).get(PART) and part_block(b.extra[PART]).text == b.text:  # type: ignore[index]
                content.append(b.extra[PART])  # type: ignore[index]
            else:
                content.append({"type": kind, "text": b.text})
        out.append({"type": "message", "role": r, "content": content})
        parts.clear()

    for b in msg.content:
        if b.type in ("text", "image"):
            parts.append(b)
            continue
        flush()
        if b.type == "thinking":
            p: dict[str, Any] = {"type": "reasoning", "summary": [{"type": "summary_text", "text": b.text}] if b.text else []}
            if tp is not None and tp.get("type") == "reasoning" and reasoning_text(tp) == b.text:
                p["summary"] = tp.get("summary", p["summary"])
            same = tp is not None and tp.get("type") == "reasoning"
            p["content"] = tp.get("content") if same else None  # type: ignore[union-attr]
            p["encrypted_content"] = tp.get("encrypted_content") if same else None  # type: ignore[union-attr]
            out.append(p)
        elif b.type == "tool_call":
            out.append(call_payload(b, tp))
        elif b.type == "tool_result":
            out.append(result_payload(b, tp))
        else:
            parts.append(Block("text", text=b.text))
    flush()
    if not out:
        out.append(
            {
                "type": "message",
                "role": {"system": "developer", "assistant": "assistant"}.get(role, "user"),
                "content": [],
            }
        )
    if tp is not None and tp.get("type") == "agent_message" and len(out) == 1 and out[0].get("type") == "message":
        out[0] = {**tp, "content": out[0]["content"]}  # still a message between agents (author, recipient)
    elif tp is not None and len(out) == 1 and out[0].get("type") == tp.get("type"):
        merged = dict(tp)  # keep the source's other fields (phase, status, id) and key order
        merged.update(out[0])
        out[0] = merged
    return out


