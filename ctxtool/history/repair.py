"""adk-code history normalization: make every tool call and result pair up (renamed duplicate
ids, dropped duplicate calls and orphan results, a trailing assistant's unanswered calls
stripped, an aborted result for every other unanswered call), each change reported; ``repair``
then ``validate`` is clean. It refuses a transcript with a result that has no call id (exit 4):
its pairing cannot be trusted. The steps and why: docs/architecture.md, "History"."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import CtxtoolError, Failure
from ..formats.base import is_synthetic
from ..model import Block, Message, Transcript, transcript_json
from ..run.operation import FileResults, MapTask, Operation, Results, RunContext, Task
from ..run.runner import run_each
from .pairing import pair

ABORTED_TEXT = "aborted"

# change kinds
DUPLICATE_MESSAGE_DROPPED = "duplicate_message_dropped"
DUPLICATE_ID_RENAMED = "duplicate_id_renamed"
DUPLICATE_CALL_DROPPED = "duplicate_call_dropped"
ORPHAN_RESULT_DROPPED = "orphan_result_dropped"
DUPLICATE_RESULT_DROPPED = "duplicate_result_dropped"
TRAILING_CALL_STRIPPED = "trailing_call_stripped"
EMPTY_MESSAGE_DROPPED = "empty_message_dropped"
ABORTED_RESULT_ADDED = "aborted_result_added"
CHANGE_KINDS = (
    DUPLICATE_MESSAGE_DROPPED,
    DUPLICATE_ID_RENAMED,
    DUPLICATE_CALL_DROPPED,
    ORPHAN_RESULT_DROPPED,
    DUPLICATE_RESULT_DROPPED,
    TRAILING_CALL_STRIPPED,
    EMPTY_MESSAGE_DROPPED,
    ABORTED_RESULT_ADDED,
)


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    message_id: str | None
    line: int | None  # source line of the message (None for new ones or JSON documents)
    call_id: str | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message_id": self.message_id,
            "line": self.line,
            "call_id": self.call_id,
            "detail": self.detail,
        }

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else (f"[{self.message_id}]" if self.message_id else "")
        call = f" {self.call_id!r}" if self.call_id else ""
        return f"{self.kind}{call}{(' at ' + where) if where else ''}{(': ' + self.detail) if self.detail else ''}"


@dataclass(slots=True)
class RepairResult:
    transcript: str
    path: str
    index: int
    id: str | None
    messages_before: int
    messages_after: int = 0
    changes: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def counts(self) -> dict[str, int]:
        c = Counter(ch.kind for ch in self.changes)
        return {k: c[k] for k in CHANGE_KINDS if c[k]}

    def to_json(self) -> dict[str, Any]:
        return {
            **transcript_json(self),
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "changed": self.changed,
            "counts": self.counts(),
            "changes": [c.to_json() for c in self.changes],
        }


def _same(a: Message, b: Message) -> bool:
    return a.role == b.role and [x.to_json() for x in a.content] == [x.to_json() for x in b.content]


def repair(t: Transcript, *, strip_trailing: bool = True) -> RepairResult:
    """Normalize ``t`` in place (see the module doc); ``strip_trailing=False`` answers a
    trailing assistant's unanswered calls with aborted results instead of stripping them."""
    refuse_untrusted(t)
    res = RepairResult(t.label, t.path, t.index, t.id, len(t.messages))
    ch = res.changes
    doomed: set[int] = set()

    def drop(m: Message, kind: str, detail: str = "") -> None:
        doomed.add(id(m))
        ch.append(Change(kind, m.id, m.lineno, None, detail))

    # 1. duplicate message ids
    msgs = t.messages
    seen: dict[str, Message] = {}
    used_ids = {m.id for m in msgs if m.id is not None}
    for m in msgs:
        if m.id is None:
            continue
        first = seen.get(m.id)
        if first is None:
            seen[m.id] = m
            continue
        if _same(first, m):
            drop(m, DUPLICATE_MESSAGE_DROPPED, "an exact copy of an earlier message")
            continue
        old = m.id
        k = 2
        while f"{old}-{k}" in used_ids:
            k += 1
        m.id = f"{old}-{k}"
        used_ids.add(m.id)
        m.touch()
        ch.append(Change(DUPLICATE_ID_RENAMED, old, m.lineno, None, f"renamed to {m.id!r}"))
    if doomed:
        t.remove(doomed)
        doomed.clear()

    # 2 and 3. duplicate calls, orphan and duplicate results
    msgs = t.messages
    p = pair(msgs)
    strip: dict[int, set[int]] = {}  # message index -> ids of blocks to remove
    for i, b in p.duplicate_calls:
        strip.setdefault(i, set()).add(id(b))
        ch.append(Change(DUPLICATE_CALL_DROPPED, msgs[i].id, msgs[i].lineno, b.id,
                         "reuses the id of an earlier call that is still unanswered"))
    for i, b in p.orphans:
        strip.setdefault(i, set()).add(id(b))
        ch.append(Change(ORPHAN_RESULT_DROPPED, msgs[i].id, msgs[i].lineno, b.id, "no tool call before it"))
    for i, b in p.duplicate_results:
        strip.setdefault(i, set()).add(id(b))
        ch.append(Change(DUPLICATE_RESULT_DROPPED, msgs[i].id, msgs[i].lineno, b.id, "the call already has a result"))
    if strip:
        for i, blocks in strip.items():
            m = msgs[i]
            m.content = [b for b in m.content if id(b) not in blocks]
            m.touch()
            if not m.content:
                drop(m, EMPTY_MESSAGE_DROPPED, "nothing left after removing tool blocks")
        if doomed:
            t.remove(doomed)
            doomed.clear()
        # removing a duplicate call can turn its result into a second result: go again
        msgs = t.messages
        p = pair(msgs)
        if p.duplicate_results or p.orphans or p.duplicate_calls:
            for i, b in p.duplicate_calls + p.orphans + p.duplicate_results:
                m = msgs[i]
                m.content = [x for x in m.content if x is not b]
                m.touch()
                kind = DUPLICATE_CALL_DROPPED if b.type == "tool_call" else DUPLICATE_RESULT_DROPPED
                ch.append(Change(kind, m.id, m.lineno, b.id, "left over after removing a duplicate call"))
                if not m.content:
                    drop(m, EMPTY_MESSAGE_DROPPED, "nothing left after removing tool blocks")
            if doomed:
                t.remove(doomed)
                doomed.clear()

    # 4. a trailing assistant's unanswered calls (the tool-output cache spec)
    if strip_trailing:
        while True:
            msgs = t.messages
            if not msgs or msgs[-1].role != "assistant":
                break
            last = msgs[-1]
            open_ids = {id(b) for b in pair(msgs).trailing(msgs)}
            if not open_ids:
                break
            for b in last.content:
                if id(b) in open_ids:
                    ch.append(Change(TRAILING_CALL_STRIPPED, last.id, last.lineno, b.id,
                                     f"unanswered call to {b.name or '?'} at the end of the transcript"))
            last.content = [b for b in last.content if id(b) not in open_ids]
            last.touch()
            if last.content:
                break
            drop(last, EMPTY_MESSAGE_DROPPED, "a trailing assistant message with only unanswered tool calls")
            t.remove(doomed)
            doomed.clear()

    # 5. aborted results for the remaining unanswered calls
    msgs = t.messages
    p = pair(msgs)
    missing: dict[int, list[Block]] = {}
    for ci, b, ri in p.pairs:
        if ri is None:
            missing.setdefault(ci, []).append(b)
    if missing:
        role = _result_role(msgs)
        is_tool = [m.role == "tool" or any(b.type == "tool_result" for b in m.content) for m in msgs]
        inserts: dict[int, list[Message]] = {}  # anchor message index -> new messages after it
        for ci, calls in missing.items():
            anchor = ci
            while anchor + 1 < len(msgs) and is_tool[anchor + 1]:
                anchor += 1
            for b in calls:
                rb = Block("tool_result", id=b.id, text=ABORTED_TEXT, is_error=True, name=b.name)
                if is_synthetic(b):  # positional formats: the writer must not emit the id
                    rb.extra = {"synthetic_id": True}
                new = Message(role, [rb])
                new.dirty = True
                inserts.setdefault(anchor, []).append(new)
                ch.append(Change(ABORTED_RESULT_ADDED, msgs[ci].id, msgs[ci].lineno, b.id,
                                 f"call to {b.name or '?'} had no result"))
        _insert_after(t, msgs, inserts)

    res.messages_after = len(t.messages)
    return res


def refuse_untrusted(t: Transcript) -> None:
    """Raise unless every tool result of ``t`` names the call it answers (see the module doc)."""
    for m in t.messages:
        for b in m.content:
            if b.type == "tool_result" and not b.id:
                raise CtxtoolError(
                    "not repaired: a tool result has no call id, so its pairing cannot be trusted "
                    f"(read as {t.format}; is that the file's format?)",
                    path=t.path, line=m.lineno, kind=Failure.INVALID,
                )


def _result_role(msgs: list[Message]) -> str:
    for m in msgs:
        if any(b.type == "tool_result" for b in m.content):
            return m.role
    return "tool"


def _insert_after(t: Transcript, msgs: list[Message], inserts: dict[int, list[Message]]) -> None:
    """Put new messages right after message ``k`` (after its continuation lines and the
    bookkeeping lines that follow it, before the next message)."""
    pos = {id(m): k for k, m in enumerate(msgs)}
    out: list[Any] = []
    pending: list[Message] = []
    for e in t.entries:
        if isinstance(e, Message):
            if pending:
                out.extend(pending)
                pending = []
            out.append(e)
            k = pos.get(id(e))
            if k is not None and k in inserts:
                pending = inserts[k]
        else:
            out.append(e)
    out.extend(pending)
    t.entries = out


# -- files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepairOp(Operation[Results[RepairResult]]):
    """:func:`repair` as a file operation (see :mod:`ctxtool.run.runner`)."""

    name: ClassVar[str] = "repair"
    strip_trailing: bool = True

    def start(self, ctx: RunContext) -> Task[Results[RepairResult]]:
        return MapTask(lambda t: repair(t, strip_trailing=self.strip_trailing))


@dataclass(slots=True)
class RepairReport(FileResults[RepairResult]):
    """What :func:`repair_file` changed, per transcript and in total."""

    @property
    def changes(self) -> list[Change]:
        return [c for r in self.transcripts for c in r.changes]

    def counts(self) -> dict[str, int]:
        c = Counter(ch.kind for r in self.transcripts for ch in r.changes)
        return {k: c[k] for k in CHANGE_KINDS if c[k]}

    def totals(self) -> dict[str, Any]:
        return {
            "transcripts": len(self.transcripts),
            "changed": sum(1 for r in self.transcripts if r.changed),
            "changes": sum(len(r.changes) for r in self.transcripts),
            "counts": self.counts(),
        }


def repair_file(
    path: str,
    output: str | None = None,
    *,
    strip_trailing: bool = True,
    fmt: str | None = None,
    to: str | None = None,
    on_error: str = "fail",
    jobs: int | None = None,
    messages_column: str | None = None,
    engine: Any = None,
) -> RepairReport:
    """``ctxtool repair``: normalize every transcript of ``path`` and write them to ``output``
    (``-``: stdout; None: nothing, a dry run). ``engine``: run as shards
    (:class:`ctxtool.run.engines.Sharding`, e.g. a directory into a directory)."""
    return run_each(RepairReport, RepairOp(strip_trailing), path, output, fmt=fmt, to=to, on_error=on_error, jobs=jobs,
                    messages_column=messages_column, engine=engine)
