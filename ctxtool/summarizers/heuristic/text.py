"""Text helpers shared by the section extractors: one-line clips, sentences, de-duplication,
and the parser of a structured summary's ``## Section`` bodies (fence-aware)."""

from __future__ import annotations

import re

from ...text import lazyre
from ...text.prose import sentences as _sentences
from ..prompt import strip_file_lists

_SENT_RE = lazyre.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|\n+")
_HEADING_RE = lazyre.compile(r"^(#{2,3})\s+(.+?)\s*$")


def sentences(text: str) -> list[str]:
    """The sentences of a text outside code fences (12 characters or more)."""
    return _sentences(text, _SENT_RE, 12)


def dedupe(items: list[str], limit: int, keep: str = "first") -> list[str]:
    """Case-insensitive de-duplication, then the first (or last) ``limit`` items, in order."""
    seen: set[str] = set()
    out: list[str] = []
    seq = items if keep == "first" else list(reversed(items))
    for x in seq:
        k = x.lower()
        if k in seen:
            continue
        seen.add(k)
        out.append(x)
    out = out[:limit]
    return out if keep == "first" else list(reversed(out))


def _headings(text: str, level: int) -> list[tuple[int, int, str]]:
    """``(start, end of heading line, title)`` of each heading of ``level`` outside code fences
    and quoted blocks."""
    out = []
    pos = 0
    in_code = False
    for ln in text.splitlines(keepends=True):
        s = ln.strip()
        if s.startswith("```") and not ln.startswith(">"):
            in_code = not in_code
        elif not in_code and (m := _HEADING_RE.match(ln.rstrip("\n"))) and len(m.group(1)) == level:
            out.append((pos, pos + len(ln), m.group(2).strip()))
        pos += len(ln)
    return out


def split_headings(text: str, level: int) -> tuple[str, dict[str, str]]:
    """The text before the first heading of ``level`` and each heading's body."""
    hs = _headings(text, level)
    if not hs:
        return text.strip(), {}
    out: dict[str, str] = {}
    for i, (_, end, title) in enumerate(hs):
        stop = hs[i + 1][0] if i + 1 < len(hs) else len(text)
        body = text[end:stop].strip()
        out[title] = f"{out[title]}\n\n{body}" if title in out else body
    return text[: hs[0][0]].strip(), out


def parse_sections(summary: str) -> dict[str, str]:
    """The ``## Section`` bodies of a structured summary (empty for free-form text)."""
    return split_headings(strip_file_lists(summary or ""), 2)[1]


def parse_subsections(body: str) -> dict[str, str]:
    return split_headings(body, 3)[1]


def items(body: str) -> list[str]:
    """The list items of a section body (quoted blocks, headings and placeholders left out);
    an item's indented continuation lines stay part of it."""
    out: list[str] = []
    for ln in body.splitlines():
        if ln.startswith(">") or ln.lstrip().startswith("#"):
            continue
        if ln.startswith("  ") and out:
            out[-1] += "\n" + ln[2:]
            continue
        s = ln.strip()
        if not s:
            continue
        s = re.sub(r"^(?:[-*]\s+(?:\[[ x]\]\s+)?|\d+\.\s+)", "", s)
        if s and not s.startswith("(none"):
            out.append(s)
    return out


def quote(text: str) -> list[str]:
    """``text`` as a Markdown block quote (headings inside stay inert)."""
    return [f"> {ln}" if ln.strip() else ">" for ln in text.splitlines()]


def unquote(lines: list[str]) -> str:
    return "\n".join(ln[2:] if ln.startswith("> ") else ln[1:] for ln in lines).strip("\n")


def verbatim_item(text: str, prefix: str = "- ") -> list[str]:
    """A list item holding ``text`` verbatim: continuation lines indented."""
    lines = text.strip("\n").splitlines() or [""]
    return [prefix + lines[0]] + [f"  {ln}" for ln in lines[1:]]
