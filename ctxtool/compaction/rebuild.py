"""Rebuild: the new transcript around the summary. The summarized messages (and anything an
earlier compaction summarized) go; the summary is recorded before the first kept message by the
output format's :meth:`~ctxtool.formats.base.Format.record_compaction`; kept messages are not
touched, so writers copy their source lines. ``tool_digest`` passes the kept part through the
Go agent's archiver (:mod:`ctxtool.history.archive`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CtxtoolError, Failure
from ..formats import get_format
from ..formats.base import CompactionNote, Format
from ..history.archive import DIGEST_PREFIX, archive_messages
from ..model import (
    KIND_COMPACTION_SUMMARY,
    Block,
    Compaction,
    Cont,
    Entry,
    Message,
    Metadata,
    Record,
    Transcript,
)
from ..summarizers import prompt as sp
from . import pins
from .plan import Plan
from .settings import CompactOptions


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary ready to record: its body, the ``<retain>`` part (the tool-output cache spec) and the file lists."""

    body: str
    retain: str | None
    style: str
    read_files: list[str]
    modified_files: list[str]

    def text(self) -> str:
        """What the agent reads next (without the prefix)."""
        return sp.format_retain(self.retain or "", self.body) if self.style == "retain" else self.body.strip()

    def messages(self) -> list[Message]:
        """The summary as user message(s) (the tool-output cache spec: the retain part first)."""
        if self.style != "retain":
            return [summary_message(f"{sp.SUMMARY_PREFIX}\n\n{self.body.strip()}")]
        if self.retain and self.retain.strip():
            return [summary_message(f"{sp.SUMMARY_PREFIX}\n\n<retain>\n{self.retain.strip()}\n</retain>"),
                    summary_message(f"<summary>\n{self.body.strip()}\n</summary>")]
        return [summary_message(f"{sp.SUMMARY_PREFIX}\n\n<summary>\n{self.body.strip()}\n</summary>")]


@dataclass(frozen=True, slots=True)
class Rebuilt:
    transcript: Transcript
    visible: list[Message]  # what the agent now sees
    removed: int  # messages removed


def summary_message(text: str) -> Message:
    return Message("user", [Block("text", text=text)], metadata=Metadata(kind=KIND_COMPACTION_SUMMARY), dirty=True)


def _digest(keep: list[Message], cutoff: int) -> tuple[dict[int, Message], Message | None]:
    """The Go agent's recent-window digest: archived copies of the oldest kept tool results beyond
    ``cutoff`` (by the id of the original) and the digest message."""
    new, res = archive_messages(keep, cutoff=cutoff, strategy="heuristic", prefix=DIGEST_PREFIX)
    if not res.changed:
        return {}, None
    return {id(a): b for a, b in zip(keep, new, strict=False) if a is not b}, new[-1]


def _doomed(p: Plan, first_kept: Message | None) -> set[int]:
    """Messages before the first kept one (but the system prompt and adk-code's first request)
    and earlier summaries."""
    keep_before = {id(m) for m in p.view.messages if m.role == "system"}
    if p.initial is not None:
        keep_before.add(id(p.initial))
    kept = {id(m) for m in p.keep}
    doomed: set[int] = set()
    for m in p.view.messages:
        if m is first_kept:
            break
        if id(m) not in keep_before:
            doomed.add(id(m))
    doomed.update(id(m) for m in p.view.messages if m.metadata.kind == KIND_COMPACTION_SUMMARY and id(m) not in kept)
    return doomed


def rebuild(t: Transcript, p: Plan, summary: Summary, opts: CompactOptions, target: Format) -> Rebuilt:
    """A new transcript (the input is not changed) in which ``target`` recorded the summary.
    Records among the summarized messages go when their format calls them bookkeeping."""
    dropped = get_format(t.format).bookkeeping_records
    first_kept = p.keep[0] if p.keep else None
    if first_kept is None:  # retain with 0 turns: nothing kept, the summary would go last
        raise CtxtoolError("nothing would be kept after the summary", kind=Failure.USAGE)
    doomed = _doomed(p, first_kept)
    archived, digest = _digest(p.keep, opts.tool_call_cutoff) if opts.tool_digest else ({}, None)
    out = Transcript(format=t.format, entries=[], path=t.path, index=t.index, id=t.id, record=t.record,
                     messages_key=t.messages_key, lineno=t.lineno, extra=dict(t.extra))
    text = summary.text()
    pinned = pins.to_record(opts.pins, (m for m in p.view.messages if id(m) in doomed), p.keep)
    note = CompactionNote(text=text, prefixed=f"{sp.SUMMARY_PREFIX}\n\n{text}", messages=summary.messages(),
                          first_kept=first_kept, tokens_before=p.context_tokens,
                          trigger="manual" if opts.force else "auto",
                          read_files=summary.read_files, modified_files=summary.modified_files,
                          pins=[pins.pin_text(x) for x in pinned])
    new_entries: list[Entry] = []
    visible: list[Message] = []
    first_doomed_seen = inserted = False
    for e in t.entries:
        if e is first_kept and not inserted:
            for x in target.record_compaction(out, note):
                new_entries.append(x)
                if isinstance(x, Compaction):  # the agent reads its summary as a message
                    visible.append(summary_message(x.summary))
                    visible += [Message("user", [Block("text", text=b)]) for b in x.details.get("pins") or ()]
                elif isinstance(x, Message):
                    visible.append(x)
            inserted = True
        if isinstance(e, Message):
            if id(e) in doomed:
                first_doomed_seen = True
                continue
            e2 = archived.get(id(e), e)
            new_entries.append(e2)
            visible.append(e2)
        elif isinstance(e, Cont):
            if id(e.message) not in doomed and id(e.message) not in archived:
                new_entries.append(e)
        elif isinstance(e, Compaction):
            continue  # merged into the new summary
        elif isinstance(e, Record):
            if not (first_doomed_seen and not inserted and dropped and e.kind.startswith(dropped)):
                new_entries.append(e)
    if digest is not None:
        new_entries.append(digest)
        visible.append(digest)
    out.entries = new_entries
    lost = pins.missing_in(pinned, visible)
    if lost:
        raise pins.error(lost, t.path)
    return Rebuilt(out, [m for m in visible if m.agent_visible], len(doomed))
