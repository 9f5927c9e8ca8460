"""Markdown: one heading per turn; tool calls and outputs in fenced blocks, long ones clipped
with a note; thinking and compaction summaries folded in ``<details>`` (GitHub renders them)."""

from __future__ import annotations

from collections.abc import Iterator

from ..text import lazyre
from .base import Renderer, clip_note, plural, register, short_label
from .walk import ExportedTranscript, Marker, Turn, TurnPart

ROLE_NAMES = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"}
_TICKS = lazyre.compile(r"`{3,}")


def fence(text: str, info: str = "") -> str:
    """``text`` in a fenced block whose fence no backtick run inside can close."""
    longest = max((len(m.group()) for m in _TICKS.finditer(text)), default=2)
    f = "`" * (longest + 1)
    return f"{f}{info}\n{text}\n{f}\n"


def quote(text: str) -> str:
    return "\n".join("> " + ln if ln else ">" for ln in text.splitlines() or [""]) + "\n"


def inline(text: str) -> str:
    """A short label as inline code (names, ids)."""
    ticks = "``" if "`" in text else "`"
    return f"{ticks}{text.replace(chr(10), ' ')}{ticks}"


def turn_heading(t: Turn) -> str:
    bits = [f"{t.number}", ROLE_NAMES.get(t.role, t.role.title())]
    if t.injected:
        bits[1] += f" (injected: {t.injected})"
    if t.model:
        bits.append(t.model)
    if t.timestamp:
        bits.append(t.timestamp)
    if t.hidden:
        bits.append("hidden from " + " and ".join(t.hidden))
    return "### " + " · ".join(bits)


@register
class MarkdownRenderer(Renderer):
    name = "markdown"
    suffixes = (".md", ".markdown")
    description = "Markdown (GitHub flavoured): headings per turn, fenced tool calls and outputs."

    def document(self, title: str, views: Iterator[ExportedTranscript]) -> Iterator[str]:
        yield f"# {title}\n"
        count = 0
        for v in views:
            count += 1
            if count > 1 or "#" in v.label:
                yield f"\n## {short_label(v.label)}\n"
            yield f"\n_{v.format} transcript{' ' + inline(v.id) if v.id else ''}: {plural(v.turns, 'message')}"
            yield f"{', ' + plural(v.markers, 'compaction') if v.markers else ''}._\n"
            for item in v.items:
                yield "\n"
                yield self.marker(item) if isinstance(item, Marker) else self.turn(item)
        if count == 0:
            yield "\n_No transcript in this file._\n"

    def turn(self, t: Turn) -> str:
        out = [turn_heading(t) + "\n"]
        for p in t.parts:
            out.append("\n" + self.part(p, t))
        return "".join(out)

    def clipped(self, text: str, info: str = "") -> str:
        if not self.options.long(text):
            return fence(text, info)
        shown = text[: self.options.collapse]
        return fence(shown, info) + f"\n_({clip_note(len(shown), text)})_\n"

    def part(self, p: TurnPart, t: Turn) -> str:
        k = p.kind
        if k == "text" and t.role == "system":  # a system prompt's own headings stay inside its fold
            return f"<details><summary>System prompt ({len(p.text):,} characters)</summary>\n\n{quote(p.text)}\n</details>\n"
        if k == "text":
            return (p.text.strip("\n") or "_(empty)_") + "\n"
        if k == "injected" and p.label == "summary":
            return f"<details><summary>Compaction summary ({len(p.text):,} characters)</summary>\n\n{quote(p.text)}\n</details>\n"
        if k == "injected":
            return f"**Injected ({p.label})**\n\n" + self.clipped(p.text, "text")
        if k == "thinking":
            return f"<details><summary>Thinking ({len(p.text):,} characters)</summary>\n\n{quote(p.text)}\n</details>\n"
        if k == "call":
            head = f"**Tool call** {inline(p.label)}" + (f" · id {inline(p.call_id)}" if p.call_id else "")
            return head + "\n\n" + (self.clipped(p.text, "json") if p.text else "_(no arguments)_\n")
        if k == "output":
            head = "**Tool output**" + (f" {inline(p.label)}" if p.label else "")
            head += (f" · id {inline(p.call_id)}" if p.call_id else "") + (" · **error**" if p.error else "")
            return head + "\n\n" + self.clipped(p.text, "text")
        if k == "image":
            return f"_[{p.label}]_\n"
        return p.text + "\n"

    def marker(self, m: Marker) -> str:
        if m.kind == "notice":
            head = f"**{m.title}**" + (f" · {m.timestamp}" if m.timestamp else "")
            return quote(head) + ">\n" + quote(m.summary) + "\n"
        bits = ["Compaction boundary" if m.kind == "boundary" else "Compaction"]
        if m.trigger:
            bits.append(m.trigger)
        if m.tokens_before is not None:
            bits.append(f"{m.tokens_before:,} tokens before")
        if m.timestamp:
            bits.append(m.timestamp)
        out = "---\n\n**" + bits[0] + "**" + "".join(" · " + b for b in bits[1:]) + "\n"
        if m.summary:
            out += f"\n<details><summary>Summary ({len(m.summary):,} characters)</summary>\n\n{quote(m.summary)}\n</details>\n"
        return out + "\n---\n"
