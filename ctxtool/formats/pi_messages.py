"""pi session entries: the message codec the ``pi`` format reads and writes with
(content parts, usage, tool calls; see :mod:`ctxtool.formats.pi`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..model import Block, Usage, source_lines, token_count
from . import images

EPOCH = "1970-01-01T00:00:00.000Z"
ENTRY_TYPES = (
    "session",
    "message",
    "compaction",
    "model_change",
    "thinking_level_change",
    "custom",
    "custom_message",
    "branch_summary",
    "label",
    "session_info",
)
MESSAGE_ROLES = ("user", "assistant", "toolResult", "bashExecution", "custom", "hookMessage", "branchSummary", "compactionSummary")
PART = "pi_part"  # a content part kept whole (written back as it came)
SYSTEM_CUSTOM_TYPE = "ctxtool.system"  # how a system prompt from another format is carried


# -- helpers -----------------------------------------------------------------------------
def iso_to_ms(ts: str) -> int:
    """An ISO timestamp as Unix milliseconds (0 when unparsable)."""
    try:
        d = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return 0
    if d.tzinfo is None:
        d = d.replace(tzinfo=UTC)
    return int(d.timestamp() * 1000)


lines_of = source_lines


def det_hex(*parts: Any) -> str:
    import hashlib  # not at import: hashlib loads OpenSSL

    return hashlib.sha1("|".join(str(p) for p in parts).encode("utf-8")).hexdigest()


def content_blocks(c: Any) -> list[Block]:
    """User-like content (a string, or text/image parts) as blocks."""
    if isinstance(c, str):
        return [Block("text", text=c)]
    out = []
    for p in c if isinstance(c, list) else []:
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
            out.append(Block("text", text=p["text"]))
        elif isinstance(p, dict) and p.get("type") == "image":
            out.append(Block("image", data=p))
        else:
            txt = p.get("text", "") if isinstance(p, dict) else p
            out.append(Block("text", text=txt if isinstance(txt, str) else jsonio.dumps_text(txt), extra={PART: p}))
    return out


def content_parts(blocks: list[Block]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for b in blocks:
        if b.type == "image":
            img = images.pi_part(b.data)
            parts.append(img if img is not None else {"type": "text", "text": "[image]"})
        elif isinstance((b.extra or {}).get(PART), dict):
            part = b.extra[PART]  # type: ignore[index]
            parts.append(part if content_blocks([part])[0].text == b.text else {"type": "text", "text": b.text})
        else:
            parts.append({"type": "text", "text": b.text})
    return parts


def usage_in(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    return Usage(
        input=token_count(u.get("input")),
        output=token_count(u.get("output")),
        cache_creation=token_count(u.get("cacheWrite")),
        cache_read=token_count(u.get("cacheRead")),
    )


def usage_out(u: Usage) -> dict[str, Any]:
    return {
        "input": u.input,
        "output": u.output,
        "cacheRead": u.cache_read,
        "cacheWrite": u.cache_creation,
        "totalTokens": u.total,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def assistant_block(p: Any) -> Block:
    if isinstance(p, dict):
        t = p.get("type")
        if t == "text":
            return Block("text", text=p.get("text") or "")
        if t == "thinking":
            return Block("thinking", text=p.get("thinking") or "")
        if t == "toolCall":
            return Block("tool_call", id=p.get("id"), name=p.get("name"), arguments=p.get("arguments"))
        if t == "image":
            return Block("image", data=p)
    txt = p.get("text", "") if isinstance(p, dict) else p
    return Block("text", text=txt if isinstance(txt, str) else jsonio.dumps_text(txt), extra={PART: p})


def same_block(a: Block, b: Block) -> bool:
    return (a.type, a.text, a.id, a.name, a.arguments, a.data) == (b.type, b.text, b.id, b.name, b.arguments, b.data)


def tool_args(b: Block) -> Any:
    a = b.arguments
    if isinstance(a, str):
        try:
            parsed = jsonio.loads(a)
        except CtxtoolError:
            return {"input": a}
        return parsed if isinstance(parsed, dict) else {"input": a}
    return a if a is not None else {}


def decode_message(m: dict[str, Any]) -> tuple[str, list[Block], dict[str, Any]] | None:
    """A pi ``AgentMessage`` as (role, blocks, hints); ``None`` for unknown roles."""
    role = m.get("role")
    if role == "user":
        return "user", content_blocks(m.get("content")), {}
    if role == "assistant":
        c = m.get("content")
        return "assistant", [assistant_block(p) for p in c] if isinstance(c, list) else content_blocks(c), {}
    if role == "toolResult":
        parts = m.get("content")
        texts = [p.get("text", "") for p in parts or [] if isinstance(p, dict) and p.get("type") == "text"]
        images = [p for p in parts or [] if isinstance(p, dict) and p.get("type") == "image"]
        if isinstance(parts, str):
            texts = [parts]
        b = Block(
            "tool_result",
            id=m.get("toolCallId"),
            name=m.get("toolName"),
            text="\n".join(texts),
            is_error=bool(m.get("isError", False)),
            extra={"images": images} if images else None,
        )
        return "tool", [b], {}
    if role == "bashExecution":
        text = f"$ {m.get('command', '')}\n{m.get('output', '')}"
        return "user", [Block("text", text=text)], {"bash_execution": True}
    if role in ("custom", "hookMessage"):
        return "user", content_blocks(m.get("content")), {"pi_role": role}
    if role in ("branchSummary", "compactionSummary"):
        return "user", [Block("text", text=m.get("summary") or "")], {"pi_role": role}
    return None


