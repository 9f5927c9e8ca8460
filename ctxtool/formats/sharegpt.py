"""ShareGPT datasets: ``{conversations: [{from, value}], system?, tools?}`` records, in the
dataset layouts of :mod:`ctxtool.formats.dataset`.

Turns map by ``from`` (human, gpt, system, function_call, observation ...); calls and results
pair by position, their synthetic ids never written. The mapping: docs/architecture.md,
"Formats as ctxtool reads them"."""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..io.jsonl import Source
from ..model import Block, Line, Message, Transcript
from ..text import lazyre
from .base import put_meta, read_meta, template
from .dataset import MESSAGE_KEYS, DatasetFormat

FROM_ROLE = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "system": "system",
    "function_call": "call",
    "tool_call": "call",
    "observation": "tool",
    "tool": "tool",
    "function": "tool",
    "tool_response": "tool",
    "ipython": "tool",
}
KEYS = ("conversations", *(k for k in MESSAGE_KEYS if k != "conversations"))
SYSTEM_HINT = "sharegpt_system"  # a record's system field
ITEM_HINT = "sharegpt_system_item"  # a {"from": "system"} turn
_THINK = lazyre.compile(r"<think>(.*?)</think>(\s*)", re.DOTALL)


def _is_turn(o: Any) -> bool:
    return isinstance(o, dict) and "from" in o and "value" in o


def _dumps(obj: Any) -> str:
    """JSON text the way most ShareGPT datasets write it (Python's json.dumps)."""
    return json.dumps(obj, ensure_ascii=False)


def _as_text(v: Any) -> str:
    return v if isinstance(v, str) else _dumps(v)


# -- reading -------------------------------------------------------------------
def _decode_calls(value: Any) -> list[Block]:
    parsed = value
    if isinstance(value, str):
        try:
            parsed = jsonio.loads(value)
        except CtxtoolError:
            parsed = None
    calls = parsed if isinstance(parsed, list) else [parsed]
    if calls and all(isinstance(c, dict) and "name" in c for c in calls):
        return [
            Block("tool_call", name=c.get("name"), arguments=c.get("arguments", c.get("parameters")))
            for c in calls
        ]
    return [Block("tool_call", arguments=_as_text(value), extra={"unparsed": True})]


def decode_turn(o: dict[str, Any], line: Line) -> Message:
    frm = o.get("from")
    kind = FROM_ROLE.get(frm.lower() if isinstance(frm, str) else "", "user")
    v = o.get("value")
    blocks: list[Block] = []
    if kind == "call":
        role = "assistant"
        blocks = _decode_calls(v)
    elif kind == "tool":
        role = "tool"
        blocks = [Block("tool_result", text=_as_text(v) if v is not None else "")]
    else:
        role = kind
        text = _as_text(v) if v is not None else ""
        m = _THINK.match(text) if role == "assistant" else None
        if m:
            blocks.append(Block("thinking", text=m.group(1), extra={"think_sep": m.group(2)}))
            text = text[m.end() :]
        blocks.append(Block("text", text=text))
    extra = {ITEM_HINT: True} if role == "system" else {}
    return Message(role, blocks, metadata=read_meta(o), lines=[line], extra=extra)


# -- writing -------------------------------------------------------------------
def _from(tmpl: dict[str, Any], kind: str, default: str) -> str:
    f = tmpl.get("from")
    if isinstance(f, str) and FROM_ROLE.get(f.lower()) == kind:
        return f
    return default


def _call_obj(b: Block) -> dict[str, Any]:
    return {"name": b.name, "arguments": b.arguments}


def _calls_value(calls: list[Block], orig: Any) -> Any:
    """The function_call value; the original text when the calls are unchanged."""
    if len(calls) == 1 and (calls[0].extra or {}).get("unparsed") and calls[0].name is None:
        return calls[0].arguments_text()
    if orig is not None:
        try:
            before = _decode_calls(orig)
        except (TypeError, ValueError):
            before = []
        if [(c.name, c.arguments) for c in before] == [(c.name, c.arguments) for c in calls]:
            return orig
    objs = [_call_obj(b) for b in calls]
    return _dumps(objs[0] if len(objs) == 1 else objs)


def render_message(msg: Message, tmpl: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def turn(frm: str, value: Any, base: dict[str, Any] | None) -> None:
        o = dict(base or {})
        o["from"] = frm
        o["value"] = value
        put_meta(o, msg)
        out.append(o)

    if msg.role == "tool" or (msg.content and all(b.type == "tool_result" for b in msg.content)):
        results = [b for b in msg.content if b.type == "tool_result"]
        for b in results:
            turn(_from(tmpl, "tool", "observation"), b.text, tmpl if len(results) == 1 else None)
        rest = [b for b in msg.content if b.type in ("text", "thinking")]
        if rest:
            turn("human", "\n".join(b.text for b in rest), None)
        if not out:
            turn(_from(tmpl, "tool", "observation"), "", tmpl)
        return out
    calls = [b for b in msg.content if b.type == "tool_call"]
    results = [b for b in msg.content if b.type == "tool_result"]
    thinking = [b for b in msg.content if b.type == "thinking"]
    texts = [b for b in msg.content if b.type == "text"]
    tmpl_is_call = FROM_ROLE.get(str(tmpl.get("from", "")).lower()) == "call"
    if msg.role == "system":
        frm, kind = "system", "system"
    elif msg.role == "assistant":
        frm, kind = "gpt", "assistant"
    else:
        frm, kind = "human", "user"
    if texts or thinking or not calls:
        value = "\n".join(b.text for b in texts)
        if thinking and msg.role == "assistant":
            sep = (thinking[0].extra or {}).get("think_sep", "\n\n")
            value = f"<think>{chr(10).join(b.text for b in thinking)}</think>{sep}{value}"
        elif thinking:
            value = (
                "\n".join([*(b.text for b in thinking), value])
                if value
                else "\n".join(b.text for b in thinking)
            )
        turn(_from(tmpl, kind, frm), value, None if tmpl_is_call else tmpl)
    if calls:
        orig = tmpl.get("value") if tmpl_is_call else None
        turn(_from(tmpl, "call", "function_call"), _calls_value(calls, orig), tmpl if tmpl_is_call else None)
    for b in results:  # tool results inside a user message (other formats)
        turn("observation", b.text, None)
    return out


class ShareGPTFormat(DatasetFormat):
    name = "sharegpt"
    description = "ShareGPT datasets ({conversations: [{from, value}]} records)"
    reads = "array, JSONL"
    default_layout = "records_array"
    keys = KEYS
    entries = False  # turns live in records only
    item_word = "turn"
    item_needs = "a ShareGPT turn (needs 'from' and 'value')"
    system_hint = SYSTEM_HINT
    item_hint = ITEM_HINT
    compaction_ack = "Understood. I have the summary of the earlier conversation and will continue from it."

    def records_per_line(self, src: Source) -> bool:
        return src.layout == "jsonl"

    def is_item(self, o: Any) -> bool:
        return _is_turn(o)

    def score(self, items: list[Any], rec: dict[str, Any] | None = None, single: bool = False) -> int:
        return 95

    def decode(self, o: dict[str, Any], line: Line) -> Message:
        return decode_turn(o, line)

    def owns_system(self, value: Any) -> bool:
        return isinstance(value, str)

    def decode_system(self, system: Any, lineno: int | None) -> Message | None:
        return Message("system", [Block("text", text=system)], lines=[Line(system, None, lineno)], extra={SYSTEM_HINT: True})

    def system_count(self, t: Transcript) -> int:
        return min(1, super().system_count(t))  # one system field; later system messages stay turns

    def system_value(self, msgs: list[Message]) -> Any:
        first = msgs[0]
        if first.lines and not first.dirty and first.extra.get(SYSTEM_HINT):
            return first.lines[0].obj
        return "\n".join(b.text for b in first.content if b.type in ("text", "thinking"))

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        if msg.extra.get(SYSTEM_HINT):
            return render_message(msg, {})
        tmpl = template(msg)
        return render_message(msg, tmpl if _is_turn(tmpl) else {})  # not a line of another format


FORMAT = ShareGPTFormat()
