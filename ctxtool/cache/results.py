"""What the ref cache's operations return: typed results with their JSON shapes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class RefInfo:
    """One stored ref: the tool-output cache spec ``ToolOutputRef`` (id, byte_size, line_count) plus provenance.

    ``byte_size`` and ``line_count`` are of the content (-1 when unknown: a ref file with no
    manifest entry that cannot be read); ``stored_bytes`` is the ref file's size on disk.
    """

    id: str
    byte_size: int
    line_count: int
    kind: str = "output"  # output | source (a message's original source lines)
    sources: list[dict[str, Any]] = field(default_factory=list)
    created: float | None = None
    present: bool = True
    new: bool = False  # written by this put (not already in the cache)
    stored_bytes: int = 0

    def ref_json(self) -> dict[str, Any]:
        """The ``output_ref`` a message carries (the tool-output cache spec)."""
        return {"id": self.id, "byte_size": self.byte_size, "line_count": self.line_count}

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sha256": self.id,
            "byte_size": self.byte_size,
            "line_count": self.line_count,
            "kind": self.kind,
            "sources": self.sources,
            "created": self.created,
            "present": self.present,
            "stored_bytes": self.stored_bytes,
        }


@dataclass(slots=True)
class ShowResult:
    ref: str
    offset: int
    limit: int | None
    total_lines: int
    lines: list[tuple[int, str]]
    cut_lines: int = 0  # lines shown cut at ``max_line`` characters
    capped: bool = False  # the page stopped before ``limit`` lines at ``max_bytes``

    def render(self) -> str:
        """Like a file reader: right-aligned line numbers, a tab, the line."""
        return "".join(f"{n:>6}\t{text}\n" for n, text in self.lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "offset": self.offset,
            "limit": self.limit,
            "total_lines": self.total_lines,
            "returned": len(self.lines),
            "lines": [{"n": n, "text": t} for n, t in self.lines],
        }


@dataclass(slots=True)
class GrepMatch:
    ref: str
    line: int
    text: str
    match: bool = True  # False for context lines

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "line": self.line, "text": self.text, "match": self.match}


@dataclass(slots=True)
class GrepResult:
    pattern: str
    refs_searched: int
    matches: list[GrepMatch]
    more: bool = False  # stopped at max_matches: more may follow
    timed_out: bool = False  # out of time between two lines (``stopped_at``: the next to search)
    stopped_at: tuple[str, int] | None = None

    @property
    def match_count(self) -> int:
        return sum(1 for m in self.matches if m.match)

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "refs_searched": self.refs_searched,
            "match_count": self.match_count,
            "matches": [m.to_json() for m in self.matches],
        }


@dataclass(slots=True)
class VerifyResult:
    checked: int = 0
    ok: int = 0
    corrupted: list[str] = field(default_factory=list)  # bad content, or not a regular file
    missing: list[str] = field(default_factory=list)  # in the manifest, no file
    unlisted: list[str] = field(default_factory=list)  # a file with no manifest entry
    stray: list[str] = field(default_factory=list)  # names that are not ref ids
    problems: dict[str, str] = field(default_factory=dict)  # corrupted ref -> what is wrong

    @property
    def clean(self) -> bool:
        return not self.corrupted and not self.missing

    def to_json(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "ok": self.ok,
            "corrupted": self.corrupted,
            "problems": self.problems,
            "missing": self.missing,
            "unlisted": self.unlisted,
            "stray": self.stray,
            "clean": self.clean,
        }


@dataclass(slots=True)
class GcResult:
    referenced: int
    kept: int
    deleted: list[RefInfo]
    bytes_freed: int  # disk bytes of the deleted ref files (what the cache shrinks by)
    dry_run: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "referenced": self.referenced,
            "kept": self.kept,
            "deleted": [r.to_json() for r in self.deleted],
            "deleted_count": len(self.deleted),
            "bytes_freed": self.bytes_freed,
        }
