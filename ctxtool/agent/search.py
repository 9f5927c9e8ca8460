"""Where in some transcripts a string appeared: which transcript, which message (its index and its
line in the file), which block, with a snippet. For an agent reading a compacted transcript: the
summary names a file or an error, this finds the messages it came from. Plain case-insensitive
substring search over every block's text (text, thinking, calls, results), one transcript at a time."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import CtxtoolError, Failure

SNIPPET = 200  # characters shown around a hit


@dataclass(slots=True)
class SearchHit:
    path: str
    transcript: int  # the transcript's index in its file (datasets hold many)
    message: int  # the message's index in the transcript's message list (0-based)
    line: int | None  # the line of the file it starts on
    role: str
    block: str  # text, thinking, tool_call NAME, tool_result
    snippet: str

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path, "transcript": self.transcript, "message": self.message, "line": self.line,
            "role": self.role, "block": self.block, "snippet": self.snippet,
        }


@dataclass(slots=True)
class SearchResult:
    query: str
    files: int = 0
    hits: list[SearchHit] = field(default_factory=list)
    more: bool = False  # stopped at max_hits: more may follow

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "files": self.files, "hit_count": len(self.hits), "more": self.more,
                "hits": [h.to_json() for h in self.hits]}


def _blocks(msg: Any) -> Iterable[tuple[str, str]]:
    for b in msg.content:
        if b.type == "tool_call":
            yield f"tool_call {b.name or ''}".rstrip(), f"{b.name or ''} {b.arguments_text()}"
        elif b.type in ("text", "thinking", "tool_result"):
            yield b.type, b.text


def _snippet(text: str, at: int, n: int) -> str:
    lo = max(0, at - SNIPPET // 2)
    hi = min(len(text), at + n + SNIPPET // 2)
    s = text[lo:hi].replace("\n", " ")
    return ("..." if lo else "") + s + ("..." if hi < len(text) else "")


def search_transcripts(
    query: str,
    paths: Iterable[str],
    *,
    fmt: str | None = None,
    max_hits: int | None = None,
    skip: int = 0,
) -> SearchResult:
    """The messages of the transcripts in ``paths`` whose blocks hold ``query`` (any case),
    in file and message order; one hit per block. ``skip`` passes over the first hits (the
    next page), ``max_hits`` stops after that many (``more`` set)."""
    # lazy: start-up (loaded only when this runs: ..formats)
    from ..formats import read

    if not query:
        raise CtxtoolError("the query is empty", kind=Failure.USAGE)
    q = query.casefold()
    res = SearchResult(query)
    seen = 0
    for path in paths:
        res.files += 1
        for t in read(path, fmt):
            for i, msg in enumerate(t.messages):
                for kind, text in _blocks(msg):
                    at = text.casefold().find(q)
                    if at < 0:
                        continue
                    seen += 1
                    if seen <= skip:
                        continue
                    if max_hits is not None and len(res.hits) >= max_hits:
                        res.more = True
                        return res
                    res.hits.append(SearchHit(str(path), t.index, i, msg.lineno, msg.role, kind, _snippet(text, at, len(query))))
    return res
