"""Plain-text helpers shared by the heuristic summarizer, compaction and the CLI (never the
grader, which keeps its own rules): a one-line clip and the sentences of a text outside its code
fences."""

from __future__ import annotations

import re

from . import lazyre

_SPACE = lazyre.compile(r"\s+")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (whitespace runs as one space), clipped to ``limit`` with "…"."""
    s = _SPACE.sub(" ", text).strip()
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


def sentences(text: str, split: re.Pattern[str], min_len: int = 1) -> list[str]:
    """The pieces of ``text`` between ``split`` matches, outside ``` code fences, stripped of
    list and quote marks, of ``min_len`` characters or more."""
    out = []
    in_code = False
    for raw in text.split("\n"):
        if raw.strip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for s in split.split(raw):
            s = s.strip(" -*#>\t")
            if len(s) >= min_len:
                out.append(s)
    return out
