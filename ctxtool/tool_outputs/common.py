"""What truncate, trim and restore share: the report, the per-run context, block helpers."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cache import RefCache
from ..cache.results import RefInfo
from ..errors import CtxtoolError, Failure
from ..formats.base import ErrorPolicy
from ..io import jsonl as jsonio
from ..io.events import EventLog
from ..io.urls import is_url
from ..model import Block, Compaction, Cont, Line, Message, Record, Transcript
from ..tokens.context import ContextSettings
from ..tokens.count import Tokenizer

KINDS = ("tool_result", "thinking", "tool_call", "image")
DEFAULT_INCLUDE = ("tool_result",)
TRIM_PREFIX = "[tool output trimmed; ref="
BUDGET_MIN, BUDGET_MAX, BUDGET_SHARE = 20_000, 60_000, 0.25


SUMMED = (
    "transcripts", "messages", "outputs", "truncated", "spilled", "trimmed", "restored",
    "bytes_before", "bytes_after", "tokens_before", "tokens_after",
)
#: a transcript's own counts (``OpsReport.items``): the summed ones and the refs it stored first
COUNTED = (*SUMMED, "refs_written")


@dataclass(slots=True)
class OpsReport:
    """What one operation did to one file (or, summed, to several)."""

    op: str
    path: str
    output: str | None = None
    format: str | None = None
    transcripts: int = 0
    messages: int = 0
    outputs: int = 0  # blocks looked at (of the included kinds)
    truncated: int = 0
    spilled: int = 0
    trimmed: int = 0
    restored: int = 0  # messages put back
    bytes_before: int = 0  # of the blocks looked at
    bytes_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    refs_written: int = 0  # how many distinct refs the run stored that the cache did not hold: len(new_refs)
    budget: int | None = None
    file_bytes_before: int | None = None
    file_bytes_after: int | None = None
    skipped: list[str] = field(default_factory=list)
    #: one entry per transcript (its own counts), kept only when asked (``records=True``)
    items: list[dict[str, Any]] | None = None
    #: the refs it stored that were new to the cache, by id: parts of one run (processes meeting
    #: the same output at once, files sharing one) count each once, whichever stored it first
    new_refs: set[str] = field(default_factory=set, repr=False, compare=False)

    def stored(self, ref: str) -> None:
        """Count ``ref`` as written by this run (once, however often it is stored)."""
        self.new_refs.add(ref)
        self.refs_written = len(self.new_refs)

    def merge(self, other: OpsReport) -> None:
        """Add ``other`` (the report of another part of the same input, or another file)."""
        for k in SUMMED:
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.new_refs |= other.new_refs
        self.refs_written = len(self.new_refs)
        self.format = self.format or other.format
        self.skipped.extend(other.skipped)
        if self.items is not None and other.items is not None:
            self.items.extend(other.items)

    @property
    def changed(self) -> int:
        return self.truncated + self.spilled + self.trimmed

    @property
    def bytes_saved(self) -> int:
        return self.bytes_before - self.bytes_after

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "op": self.op,
            "path": self.path,
            "output": self.output,
            "format": self.format,
            "transcripts": self.transcripts,
            "messages": self.messages,
            "outputs": self.outputs,
            "truncated": self.truncated,
            "spilled": self.spilled,
            "trimmed": self.trimmed,
            "restored": self.restored,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "bytes_saved": self.bytes_saved,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.tokens_saved,
            "refs_written": self.refs_written,
            "file_bytes_before": self.file_bytes_before,
            "file_bytes_after": self.file_bytes_after,
        }
        if self.budget is not None:
            d["budget"] = self.budget
        if self.skipped:
            d["skipped"] = self.skipped
        return d


# -- shared helpers -----------------------------------------------------------------------


def as_cache(cache: RefCache | str | Path | None) -> RefCache:
    return cache if isinstance(cache, RefCache) else RefCache(cache)


def parse_include(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """``tool_result`` always; plus ``thinking``, ``tool_call``, ``image`` when asked."""
    if spec is None:
        return DEFAULT_INCLUDE
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = ["tool_result"]
    for raw in items:
        k = raw.strip().lower().replace("-", "_")
        if not k:
            continue
        k = {"tool_results": "tool_result", "tool_calls": "tool_call", "images": "image", "arguments": "tool_call", "all": "*"}.get(k, k)
        if k == "*":
            return KINDS
        if k not in KINDS:
            raise CtxtoolError(f"unknown kind {raw!r} for --include; choose from: {', '.join(KINDS)}", kind=Failure.USAGE)
        if k not in out:
            out.append(k)
    return tuple(out)


def default_budget(context_window: int | None) -> int | None:
    """The tool-output cache spec: clamp(context_window * 0.25, 20k, 60k)."""
    if not context_window:
        return None
    return int(min(BUDGET_MAX, max(BUDGET_MIN, context_window * BUDGET_SHARE)))


def transcript_window(t: Transcript, settings: ContextSettings | None = None) -> int | None:
    """The window for ``t`` in :mod:`ctxtool.tokens.context`'s one order: flags, config, what the
    transcript records, its model's registry entry."""
    return (settings or ContextSettings()).resolve(t).window


def block_text(b: Block) -> str:
    if b.type == "tool_call":
        return b.arguments_text()
    if b.type == "image":
        return jsonio.dumps_text(b.data)
    return b.text


def tool_of(b: Block, names: dict[str, str]) -> str | None:
    if b.type == "tool_call":
        return b.name
    if b.type == "tool_result":
        return b.name or (names.get(b.id) if b.id else None)
    return None


def block_json(b: Block) -> dict[str, Any]:
    return {
        "type": b.type,
        "text": b.text,
        "id": b.id,
        "name": b.name,
        "arguments": b.arguments,
        "is_error": b.is_error,
        "data": b.data,
        "extra": b.extra,
    }


def block_from(d: dict[str, Any]) -> Block:
    return Block(
        d["type"],
        text=d.get("text") or "",  # None where restore puts back a field from its own ref
        id=d.get("id"),
        name=d.get("name"),
        arguments=d.get("arguments"),
        is_error=bool(d.get("is_error", False)),
        data=d.get("data"),
        extra=d.get("extra"),
    )


@dataclass(slots=True)
class Change:
    index: int
    block: Block  # the new block
    entry: dict[str, Any]  # the output_refs entry
    field: str  # which field of the original block the ref holds: text | arguments | data


class Ctx:
    """What one operation needs while it walks transcripts."""

    def __init__(
        self,
        op: str,
        cache: RefCache,
        tok: Tokenizer,
        events: EventLog | None,
        report: OpsReport,
        policy: ErrorPolicy | None = None,
    ) -> None:
        self.op = op
        self.policy = policy
        self.cache = cache
        self.tok = tok
        self.events = events
        self.report = report
        self._t: Transcript | None = None
        self._pos: dict[int, int] = {}
        self._preds: dict[int, str] | None = None
        self._src_path: str | None = None
        self.stashes: list[tuple[Message, dict[str, Any]]] = []  # this transcript's, not yet stored
        self._src_file = ""

    def source(self, t: Transcript, msg: Message, tool: str | None, kind: str) -> dict[str, Any]:
        if self._src_path != t.path:
            self._src_path = t.path
            self._src_file = t.path if t.path == "-" or is_url(t.path) else os.path.abspath(t.path)
        return {
            "file": self._src_file,
            "transcript": t.id if t.id is not None else t.index,
            "message_id": msg.id,
            "line": msg.lineno,
            "tool": tool,
            "block": kind,
        }

    def put(self, data: str | bytes, *, kind: str, source: dict[str, Any]) -> RefInfo:
        info = self.cache.put(data, kind=kind, source=source)
        if info.new:
            self.report.stored(info.id)
        return info

    def put_output(self, data: bytes, digest: str, lines: int, *, source: dict[str, Any]) -> RefInfo:
        """An output already encoded, hashed and counted (``lines`` as :func:`count_lines`)."""
        info = self.cache._put(data, digest, lines, "output", source)
        if info.new:
            self.report.stored(info.id)
        return info

    def position(self, t: Transcript, msg: Message) -> int:
        """The message's ordinal in its transcript (stashes of identical messages stay distinct)."""
        if self._t is not t:
            self._t = t
            self._pos = {id(m): i for i, m in enumerate(t.iter_messages())}
            self._preds = None
        return self._pos.get(id(msg), -1)

    def predecessors(self, t: Transcript, msg: Message) -> dict[int, str]:
        """id(Line) -> key of the line written just before it (to put continuation lines back)."""
        self.position(t, msg)
        if self._preds is None:
            self._preds = {}
            prev = ""
            for _, ln in emitted(t):
                self._preds[id(ln)] = prev
                prev = line_key(ln)
        return self._preds

    def handle(self, err: CtxtoolError) -> None:
        """A message the operation cannot handle: raise, or (``--on-error skip``) report it."""
        if self.policy is None:
            raise err
        self.policy.handle(err)

    def emit(self, kind: str, **fields: Any) -> None:
        if self.events is not None:
            self.events.emit(kind, **fields)

    def emit_block(self, kind: str, t: Transcript, msg: Message, tool: str | None, b: Block, **fields: Any) -> None:
        """An event about one block of one message (truncate, spill, trim)."""
        self.emit(
            kind,
            file=t.path,
            transcript=t.id if t.id is not None else t.index,
            message_id=msg.id,
            line=msg.lineno,
            tool=tool,
            block=b.type,
            **fields,
        )


def existing_entry(msg: Message, index: int) -> dict[str, Any] | None:
    for e in msg.metadata.extra.get("output_refs") or []:
        if isinstance(e, dict) and e.get("block") == index:
            return e
    return None



def line_key(ln: Line) -> str:

    return hashlib.sha1(ln.raw if ln.raw is not None else jsonio.dumps(ln.obj)).hexdigest()[:20]


def emitted(t: Transcript) -> Iterator[tuple[Any, Line]]:
    """Each entry with the source line it writes when unchanged, in order."""
    for e in t.entries:
        if isinstance(e, Message):
            if e.lines:
                yield e, e.lines[0]
        elif isinstance(e, Cont):
            if e.part < len(e.message.lines):
                yield e, e.message.lines[e.part]
        elif isinstance(e, Record):
            yield e, e.line
        elif isinstance(e, Compaction):
            for ln in e.lines:
                yield e, ln
