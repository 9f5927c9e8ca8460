"""Cline / Roo Code task histories (``tasks/<id>/api_conversation_history.json``): Anthropic
messages whose tool calls travel as XML-style tags in text and whose results are text blocks
headed ``[tool for 'arg'] Result:``, paired by position.

Read with the Anthropic codec (:mod:`.anthropic_blocks`); a changed message is rendered back as
tags and headers. Details: docs/architecture.md, "Formats as ctxtool reads them"."""

from __future__ import annotations

import re
from typing import Any

from ..io.jsonl import Source
from ..model import Block, Line, Message, Transcript
from ..text import lazyre
from . import anthropic_blocks as codec
from .anthropic import AnthropicFormat, decode_message, own_template, render_message

#: the tools of Cline and Roo Code (a tag is a call only when it names one of these)
TOOLS = frozenset(
    {
        "execute_command", "read_file", "write_to_file", "replace_in_file", "search_files", "list_files",
        "list_code_definition_names", "browser_action", "use_mcp_tool", "access_mcp_resource",
        "ask_followup_question", "attempt_completion", "plan_mode_respond", "new_task", "load_mcp_documentation",
        "web_fetch", "condense", "summarize_task", "report_bug", "new_rule", "apply_diff", "insert_content",
        "search_and_replace", "switch_mode", "fetch_instructions", "codebase_search", "update_todo_list",
        "run_slash_command", "generate_image", "list_files_top_level", "list_files_recursive",
    }
)
_CALL = lazyre.compile(r"<(?P<name>[a-z_]+)>(?P<body>.*?)</(?P=name)>", re.S)
_PARAM = lazyre.compile(r"<(?P<k>[a-z_]+)>\n?(?P<v>.*?)\n?</(?P=k)>", re.S)
# a multi-line argument (a command of several lines) stays in the header, up to a bound
_HEAD = lazyre.compile(r"\[(?P<name>[a-z_]+)(?: for (?P<arg>.{0,4000}?))?\] Result:", re.S)
JOIN = "cline_text"  # pieces of one source text block: (block number, piece number)
XML = "cline_xml"  # the tag a call was read from
HEAD = "cline_head"  # the header a result was read from
SPLIT = "cline_split"  # the header was a text block of its own


def _params(body: str) -> dict[str, str]:
    return {m["k"]: m["v"] for m in _PARAM.finditer(body)}


def _calls_in(text: str) -> list[re.Match[str]]:
    return [m for m in _CALL.finditer(text) if m["name"] in TOOLS]


def _split_call_text(b: Block, n: int) -> list[Block]:
    """An assistant text block as text and tool_call pieces (marked to be joined again)."""
    found = _calls_in(b.text)
    if not found:
        return [b]
    out: list[Block] = []
    pos = 0
    k = 0

    def piece(x: Block) -> None:
        nonlocal k
        x.extra = {**(x.extra or {}), JOIN: [n, k]}
        out.append(x)
        k += 1

    for m in found:
        piece(Block("text", text=b.text[pos : m.start()]))
        piece(Block("tool_call", name=m["name"], arguments=_params(m["body"]), extra={XML: m[0]}))
        pos = m.end()
    piece(Block("text", text=b.text[pos:]))
    return out


def _read_results(blocks: list[Block]) -> list[Block]:
    """User text blocks that start with a ``[tool ...] Result:`` header as tool results."""
    out: list[Block] = []
    i = 0
    while i < len(blocks):
        b = blocks[i]
        m = _HEAD.match(b.text) if b.type == "text" and not b.extra else None
        if m is None:
            out.append(b)
            i += 1
            continue
        rest = b.text[m.end() :]
        nxt = blocks[i + 1] if i + 1 < len(blocks) else None
        if not rest.strip() and nxt is not None and nxt.type == "text" and not nxt.extra \
                and not nxt.text.startswith("<environment_details>") and not _HEAD.match(nxt.text):
            out.append(Block("tool_result", text=nxt.text, name=m["name"], extra={HEAD: b.text, SPLIT: True}))
            i += 2
            continue
        out.append(Block("tool_result", text=rest, name=m["name"], extra={HEAD: b.text[: m.end()]}))
        i += 1
    return out


def _is_cline(items: list[Any]) -> bool:
    for o in items[:400]:
        c = o.get("content") if isinstance(o, dict) else None
        for p in c if isinstance(c, list) else [c]:
            text = p.get("text") if isinstance(p, dict) else p
            if isinstance(text, str) and o.get("role") == "user" and _HEAD.match(text):
                return True
    return False


def _render_call(b: Block) -> str:
    src = (b.extra or {}).get(XML)
    if isinstance(src, str):
        m = _CALL.fullmatch(src)
        if m is not None and m["name"] == b.name and _params(m["body"]) == b.arguments:
            return src
    args = b.arguments if isinstance(b.arguments, dict) else {"input": b.arguments_text()}
    body = "".join(f"<{k}>\n{v}\n</{k}>\n" if "\n" in str(v) else f"<{k}>{v}</{k}>\n" for k, v in args.items())
    return f"<{b.name}>\n{body}</{b.name}>"


def render_cline_content(blocks: list[Block]) -> list[Any]:
    """Blocks as Cline content: joined call text, results as header + output, the rest as Anthropic."""
    out: list[Any] = []
    rest: list[Block] = []
    join: Any = None

    def flush() -> None:
        if rest:
            out.extend(codec.render_content(rest))
            rest.clear()

    for b in blocks:
        ex = b.extra or {}
        if JOIN in ex:
            flush()
            text = _render_call(b) if b.type == "tool_call" else b.text
            if join is not None and join == ex[JOIN][0] and out and isinstance(out[-1], dict):
                out[-1]["text"] += text
            else:
                out.append({"type": "text", "text": text})
            join = ex[JOIN][0]
            continue
        join = None
        if b.type == "tool_call" and (b.extra or {}).get("synthetic_id"):  # a call from another message
            flush()
            out.append({"type": "text", "text": _render_call(b)})
        elif b.type == "tool_result" and HEAD in ex:
            flush()
            if ex.get(SPLIT):
                out += [{"type": "text", "text": ex[HEAD]}, {"type": "text", "text": b.text}]
            else:
                out.append({"type": "text", "text": ex[HEAD] + b.text})
        else:
            rest.append(b)
    flush()
    return out


def _pair_native(msgs: list[Message]) -> None:
    """Newer histories have native ``tool_use`` blocks (with ids) but still answer them in text:
    a text result takes the id of the oldest call of the previous assistant message it has not
    yet answered."""
    open_calls: list[str] = []
    answered: set[str] = {b.id for m in msgs for b in m.tool_results() if b.id}
    for m in msgs:
        if m.role == "assistant":
            open_calls = [b.id for b in m.tool_calls() if b.id and b.id not in answered]
            continue
        for b in m.content:
            if b.type == "tool_result" and not b.id and open_calls and HEAD in (b.extra or {}):
                b.id = open_calls.pop(0)
                answered.add(b.id)


class ClineFormat(AnthropicFormat):
    name = "cline"
    reads = "JSON array"
    description = "Cline / Roo Code task histories (api_conversation_history.json: tool calls as XML tags)"
    default_layout = "entries_array"
    id_prefix = "cline_"

    def score(self, items: list[Any], rec: dict[str, Any] | None = None, single: bool = False) -> int:
        if rec is not None or not super().score(items) or not _is_cline(items):
            return 0
        return 97  # more specific than plain Anthropic messages

    def decode(self, o: dict[str, Any], line: Line) -> Message:
        m = decode_message(o, line)
        if m.role == "assistant":
            m.content = [p for i, b in enumerate(m.content) for p in (
                _split_call_text(b, i) if b.type == "text" and not b.extra else [b])]
        elif m.role == "user":
            m.content = _read_results(m.content)
        return m

    def _transcript(self, items: list[Any], src: Source, index: int, lineno: int | None) -> Transcript:
        t = super()._transcript(items, src, index, lineno)
        _pair_native(t.messages)
        return t

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        o = render_message(msg, own_template(msg))
        if msg.role != "system":
            o["content"] = render_cline_content(msg.content)
            if msg.role == "tool":
                o["role"] = "user"
        return [o]


FORMAT = ClineFormat()
