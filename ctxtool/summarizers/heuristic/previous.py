"""A previous summary, carried: ctxtool's own sections are merged item by item; the sections
of other summaries (Claude Code's numbered "Primary Request and Intent" ... "Optional Next
Step", pi's checkpoints, any ``## Heading``) are mapped onto ours and carried whole, as quoted
blocks; a free-form summary is one block. Over the budget, whole blocks go, least important
first: nothing is cut from the middle of one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...model import PINNED_PREFIX
from ...text import lazyre
from ..prompt import clip, strip_file_lists
from .text import quote, split_headings, unquote

#: the sections of ctxtool's heuristic summary, in order
SECTIONS = ("Goal", "Current State", "User Requests", "Constraints & Preferences", "Progress", "Key Decisions",
            "Files Changed", "Next Steps", "Critical Context", "Read Set")
#: the title prefix of a carried block (a ``### `` subsection holding a quote)
EARLIER = "Earlier: "
#: (title pattern, our section, importance: lower goes first when over budget)
SECTION_MAP: tuple[tuple[re.Pattern[str], str, int], ...] = tuple(
    (lazyre.compile(rx, re.I), target, rank) for rx, target, rank in (
        (r"primary request|intent|\bgoal|objective", "Goal", 90),
        (r"user messages|user requests|user feedback", "Goal", 85),
        (r"constraint|preference|\brules?\b|requirement|instruction", "Constraints & Preferences", 80),
        (r"pending|next step|to-?do|remaining|open question", "Next Steps", 75),
        (r"current (work|task|state|status)|in progress|status", "Progress", 70),
        (r"decision|approach|rationale|design|problem solving", "Key Decisions", 65),
        (r"error|fix|blocked|problem", "Progress", 60),
        (r"complete|done|progress|work|change", "Progress", 50),
        (r"file|code|command", "Critical Context", 40),
        (r"concept|context|background|branch|note", "Critical Context", 30),
    )
)
DEFAULT_TARGET = ("Critical Context", 20)
_CC_SUMMARY = lazyre.compile(r"^Summary:\s*$", re.M)
_CC_HEADING = lazyre.compile(r"^(?:#{1,3}\s*)?(\d{1,2})\.\s+\**([A-Z][^:\n*]{2,60}?)\**:?\s*$")
_CC_INTRO = "This session is being continued from a previous conversation"


@dataclass(slots=True)
class Carried:
    """A part of a previous summary carried verbatim into one of our sections."""

    target: str
    title: str
    text: str
    rank: int

    def lines(self) -> list[str]:
        return ["", f"### {EARLIER}{self.title}", *quote(self.text)]


@dataclass(slots=True)
class Previous:
    own: dict[str, str] = field(default_factory=dict)  # bodies of ctxtool's own sections
    blocks: list[Carried] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # what did not fit, for the record
    at: int | None = None  # where the first one was among the summarized messages (-1: before them)

    def in_section(self, name: str) -> list[Carried]:
        return [b for b in self.blocks if b.target == name]

    def chars(self) -> int:
        return sum(len(b.text) for b in self.blocks)


def target_of(title: str) -> tuple[str, int]:
    """Our section (and the importance) of a foreign summary section."""
    for rx, target, rank in SECTION_MAP:
        if rx.search(title):
            return target, rank
    return DEFAULT_TARGET


def _carried(title: str, text: str) -> Carried | None:
    text = text.strip("\n")
    if not text.strip():
        return None
    target, rank = target_of(title)
    return Carried(target, title, text, rank)


def _claude_code(text: str) -> list[Carried] | None:
    """Claude Code's compact summary: an ``Analysis:`` part, then ``Summary:`` and numbered
    sections (``1. Primary Request and Intent:`` ...). None when ``text`` is not one."""
    m = _CC_SUMMARY.search(text)
    pre, post = (text[: m.start()], text[m.end():]) if m else ("", text)
    heads: list[tuple[int, int, str]] = []  # (start, end, title)
    pos = 0
    for ln in post.splitlines(keepends=True):
        h = _CC_HEADING.match(ln.rstrip("\n"))
        if h and int(h.group(1)) == len(heads) + 1:
            heads.append((pos, pos + len(ln), h.group(2).strip()))
        pos += len(ln)
    if len(heads) < 2 or not (m or re.search(r"primary request", heads[0][2], re.I)):
        return None
    out: list[Carried] = []
    pre_lines = [ln for ln in pre.strip().splitlines() if not ln.startswith(_CC_INTRO)]
    analysis = "\n".join(pre_lines).strip()
    analysis = re.sub(r"^Analysis:\s*", "", analysis)
    if (c := _carried("Analysis", analysis)) is not None:
        out.append(Carried("Critical Context", "Analysis", c.text, 10))
    lead = post[: heads[0][0]].strip()
    if lead and (c := _carried("Summary", lead)) is not None:
        out.append(c)
    for i, (_, end, title) in enumerate(heads):
        stop = heads[i + 1][0] if i + 1 < len(heads) else len(post)
        if (c := _carried(title, post[end:stop])) is not None:
            out.append(c)
    return out


def _own(sections: dict[str, str], prev: Previous) -> None:
    """ctxtool's own sections: the carried blocks inside them come out as blocks again."""
    for name, body in sections.items():
        lead, subs = split_headings(body, 3)
        keep = [lead] if lead else []
        for title, sub in subs.items():
            if title.startswith(EARLIER) or title == "Earlier summary":  # (the latter: before version 2)
                t = title[len(EARLIER):] if title.startswith(EARLIER) else "Earlier summary"
                quoted = [ln for ln in sub.splitlines() if ln.startswith(">")]
                rest = "\n".join(ln for ln in sub.splitlines() if not ln.startswith(">")).strip()
                target, rank = target_of(t)
                prev.blocks.append(Carried(name if name in SECTIONS else target, t, unquote(quoted), rank))
                if rest:
                    keep.append(rest)
            else:
                keep.append(f"### {title}\n{sub}")
        prev.own[name] = "\n\n".join(keep)


def parse_previous(summary: str | None) -> Previous:
    prev = Previous()
    text = strip_file_lists(summary or "")
    text = re.split(rf"^{re.escape(PINNED_PREFIX)}", text, maxsplit=1, flags=re.M)[0].strip()  # pinned: not summary
    if not text:
        return prev
    cc = _claude_code(text)
    if cc is not None:
        prev.blocks = cc
        return prev
    lead, sections = split_headings(text, 2)
    if not sections:
        prev.blocks.append(Carried("Critical Context", "Summary", text, 50))
        return prev
    if lead and (c := _carried("Summary", lead)) is not None:
        prev.blocks.append(Carried("Critical Context", c.title, c.text, 20))
    _own({k: v for k, v in sections.items() if k in SECTIONS}, prev)
    for title, body in sections.items():
        if title not in SECTIONS and (c := _carried(title, body)) is not None:
            prev.blocks.append(c)
    return prev


def fit(prev: Previous, budget: int) -> Previous:
    """Drop whole carried blocks, least important first, until they fit ``budget`` characters.
    The most important block is never dropped; only when it alone is more than twice the
    budget is it clipped (head and tail, the clip marked)."""
    order = sorted(range(len(prev.blocks)), key=lambda i: (prev.blocks[i].rank, -i))
    gone: set[int] = set()
    total = prev.chars()
    for i in order[:-1]:
        if total <= budget:
            break
        b = prev.blocks[i]
        gone.add(i)
        total -= len(b.text)
        prev.dropped.append(f"{b.title} ({len(b.text):,} characters)")
    prev.blocks = [b for i, b in enumerate(prev.blocks) if i not in gone]
    if len(prev.blocks) == 1 and len(prev.blocks[0].text) > 2 * budget:
        b = prev.blocks[0]
        prev.dropped.append(f"the middle of {b.title} ({len(b.text) - budget:,} characters)")
        b.text = clip(b.text, budget)
    return prev
