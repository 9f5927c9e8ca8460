"""Compaction forensics: every compaction a session recorded (the boundaries
:func:`ctxtool.tokens.context.view` knows), tokens before and after (recorded, else estimated),
turns and minutes since the previous one, *loops* (within ``loop_turns`` turns or
``loop_minutes`` minutes of the previous), and files read again after it. Sources of each figure:
docs/architecture.md, "Commands, in more detail"."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..formats.timestamps import entry_time, iso
from ..model import Compaction, Entry, Message, Record, Transcript, group_turns, source_lines
from ..tokens.context import BOUNDARY_RECORDS, estimate, is_summary, view

#: defaults of the loop rule (another compaction within this many turns or minutes)
LOOP_TURNS = 5
LOOP_MINUTES = 10.0


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    """One compaction of a transcript."""

    number: int  # 1-based, in the transcript
    kind: str  # boundary (Claude Code) | compaction (pi) | compacted (Codex) | summary (a summary message)
    timestamp: str | None
    trigger: str | None  # auto | manual, where the agent recorded it
    tokens_before: int | None
    tokens_before_source: str  # recorded | usage | estimate
    tokens_after: int | None
    tokens_after_source: str  # usage | estimate
    turns_since: int  # model turns since the previous compaction (or the start)
    minutes_since: float | None  # since the previous compaction (None for the first, or no times)
    loop: bool
    reread: tuple[str, ...] = ()  # files read before it and read again after it (before the next)
    line: int | None = None
    preserved_messages: int | None = None  # messages it kept verbatim, where recorded (Claude Code 2.1)
    cumulative_dropped_tokens: int | None = None  # tokens dropped by the session's compactions so far, where recorded

    @property
    def freed(self) -> int | None:
        if self.tokens_before is None or self.tokens_after is None:
            return None
        return self.tokens_before - self.tokens_after

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "kind": self.kind,
            "timestamp": self.timestamp,
            "trigger": self.trigger,
            "tokens_before": self.tokens_before,
            "tokens_before_source": self.tokens_before_source,
            "tokens_after": self.tokens_after,
            "tokens_after_source": self.tokens_after_source,
            "freed": self.freed,
            "turns_since": self.turns_since,
            "minutes_since": self.minutes_since,
            "loop": self.loop,
            "reread": list(self.reread),
            "line": self.line,
            "preserved_messages": self.preserved_messages,
            "cumulative_dropped_tokens": self.cumulative_dropped_tokens,
        }


@dataclass(frozen=True, slots=True)
class TranscriptCompactions:
    path: str
    label: str
    format: str
    turns: int  # model turns in the whole transcript
    compactions: tuple[CompactionEvent, ...]

    @property
    def loops(self) -> int:
        return sum(1 for c in self.compactions if c.loop)

    @property
    def reread(self) -> int:
        return sum(len(c.reread) for c in self.compactions)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "label": self.label,
            "format": self.format,
            "turns": self.turns,
            "count": len(self.compactions),
            "loops": self.loops,
            "reread_files": self.reread,
            "compactions": [c.to_json() for c in self.compactions],
        }


@dataclass(slots=True)
class CompactionsReport:
    loop_turns: int
    loop_minutes: float
    transcripts: list[TranscriptCompactions] = field(default_factory=list)

    @property
    def totals(self) -> dict[str, int]:
        ts = self.transcripts
        return {
            "transcripts": len(ts),
            "with_compactions": sum(1 for t in ts if t.compactions),
            "compactions": sum(len(t.compactions) for t in ts),
            "auto": sum(1 for t in ts for c in t.compactions if c.trigger == "auto"),
            "manual": sum(1 for t in ts for c in t.compactions if c.trigger == "manual"),
            "loops": sum(t.loops for t in ts),
            "reread_files": sum(t.reread for t in ts),
        }


# -- finding the compactions -------------------------------------------------------------------


@dataclass(slots=True)
class _Marker:
    at: int  # index into entries
    kind: str
    trigger: str | None
    recorded_before: int | None
    recorded_after: int | None = None  # Claude Code 2.1's postTokens
    dropped: int | None = None  # Claude Code 2.1's cumulativeDroppedTokens
    preserved: int | None = None  # messages kept verbatim (Claude Code 2.1's preservedMessages)


def _markers(entries: Sequence[Entry]) -> list[_Marker]:
    """The compaction boundaries, in order; a summary message right after a boundary (or
    another summary part) belongs to it."""
    out: list[_Marker] = []
    joined = False  # the last marker can still take a following summary message
    for i, e in enumerate(entries):
        if isinstance(e, Record) and e.kind in BOUNDARY_RECORDS:
            # lazy: start-up (`ctxtool --help` would load ctxtool.formats.anthropic_blocks)
            from ..formats.claude_code_lines import boundary_info

            b = boundary_info(e.line.obj)
            out.append(_Marker(i, "boundary", b.trigger, b.pre_tokens, b.post_tokens, b.cumulative_dropped_tokens,
                               len(b.preserved) if b.preserved else None))
            joined = True
        elif isinstance(e, Compaction):
            typ = e.lines[0].obj.get("type") if e.lines and isinstance(e.lines[0].obj, dict) else None
            trig = e.details.get("trigger")
            out.append(_Marker(i, "compacted" if typ == "compacted" else "compaction",
                               trig if isinstance(trig, str) else None, e.tokens_before))
            joined = False
        elif isinstance(e, Message):
            if is_summary(e):
                if not joined:
                    out.append(_Marker(i, "summary", None, None))
                joined = True
            elif e.agent_visible or e.role != "system":
                joined = False
    return out


def _line(e: Entry) -> int | None:
    lines = source_lines(e)
    return lines[0].lineno if lines else None


def _context(t: Transcript, entries: Sequence[Entry]) -> tuple[int, str]:
    """The usage-aware context tokens of the first ``entries`` (the resolver's rules)."""
    sub = Transcript(t.format, list(entries), t.path, t.index, t.id, t.record, t.messages_key, t.lineno, t.extra)
    est = estimate(view(sub))
    return est.tokens, est.source


def _session_cwd(t: Transcript) -> str | None:
    """The working directory the session records (Claude Code, Codex, pi headers), if any."""
    sess = t.extra.get("session") if isinstance(t.extra, dict) else None
    cwd = sess.get("cwd") if isinstance(sess, dict) else None
    return cwd if isinstance(cwd, str) and cwd.startswith("/") else None


def _normal(cwd: str | None, path: str) -> str:
    """One name for one file: a relative path joined to the session's directory, ``.`` and
    ``..`` resolved, so ``src/a.py`` and ``/repo/src/a.py`` are the same file."""
    import posixpath

    if cwd and not path.startswith(("/", "~")):
        path = posixpath.join(cwd, path)
    return posixpath.normpath(path) if path.startswith("/") else path


def transcript_compactions(
    t: Transcript, *, loop_turns: int = LOOP_TURNS, loop_minutes: float = LOOP_MINUTES
) -> TranscriptCompactions:
    """The compactions of one transcript (see the module's notes)."""
    # lazy: start-up (loaded only when this runs: ..summarizers.prompt)
    from ..summarizers.prompt import extract_files

    entries = t.entries
    markers = _markers(entries)
    # a model turn starts at its first assistant message: where, in entry indices
    msg_at = [i for i, e in enumerate(entries) if isinstance(e, Message)]
    turn_starts = [msg_at[g[0]] for g in group_turns([entries[i] for i in msg_at])]  # type: ignore[misc]
    events: list[CompactionEvent] = []
    read_before: set[str] = set()  # files read in earlier segments
    seg_start = 0
    prev_time = None
    prev_at = -1
    reread_by: list[list[str]] = []
    bounds = [m.at for m in markers] + [len(entries)]
    # the reads of each segment (before the first compaction, then after each)
    cwd = _session_cwd(t)
    for k, end in enumerate(bounds):
        seen: list[str] = []
        modified: set[str] = set()
        for e in entries[seg_start:end]:
            if not isinstance(e, Message) or e.role != "assistant":
                continue
            r, w = (list(map(functools.partial(_normal, cwd), files)) for files in extract_files([e]))
            for p in r:
                if k > 0 and p in read_before and p not in modified and p not in seen:
                    seen.append(p)
            modified.update(w)
            read_before.update(r)
        if k > 0:
            reread_by.append(seen)
        seg_start = end
    for n, m in enumerate(markers):
        e = entries[m.at]
        when = entry_time(e)
        turns_since = sum(1 for s in turn_starts if prev_at < s < m.at)
        minutes = None
        if when is not None and prev_time is not None and n > 0:
            minutes = round((when - prev_time).total_seconds() / 60, 2)
        loop = n > 0 and (turns_since <= loop_turns or (minutes is not None and minutes <= loop_minutes))
        if m.recorded_before is not None:
            before, before_src = m.recorded_before, "recorded"
        else:
            before, before_src = _context(t, entries[: m.at])
        nxt = markers[n + 1].at if n + 1 < len(markers) else len(entries)
        after_end = next((s for s in turn_starts if m.at < s < nxt), None)
        if after_end is not None:  # the whole first model call after it (its usage is on its last message)
            after_end = _turn_end(entries, after_end, nxt)
        if m.recorded_after is not None:
            after, after_src = m.recorded_after, "recorded"
        else:
            after, after_src = _context(t, entries[: after_end if after_end is not None else nxt])
        events.append(CompactionEvent(
            n + 1, m.kind, iso(when), m.trigger, before, before_src, after, after_src, turns_since, minutes, loop,
            tuple(reread_by[n]), _line(e), m.preserved, m.dropped,
        ))
        prev_time = when if when is not None else prev_time
        prev_at = m.at
    return TranscriptCompactions(t.path, t.label, t.format, len(turn_starts), tuple(events))


def _turn_end(entries: Sequence[Entry], start: int, stop: int) -> int:
    """The end (exclusive) of the model call starting at ``start``: through its first
    message with usage, else through its run of assistant messages."""
    j = start
    last = start
    while j < stop:
        e = entries[j]
        if isinstance(e, Message):
            if e.role != "assistant":
                break
            last = j
            if e.usage is not None and e.usage.total > 0:
                return j + 1
        j += 1
    return last + 1


def compactions(
    paths: Iterable[str | Path], *, fmt: str | None = None, loop_turns: int = LOOP_TURNS,
    loop_minutes: float = LOOP_MINUTES, jobs: int | None = None,
    each: Callable[[TranscriptCompactions], None] | None = None,
) -> CompactionsReport:
    """The compaction report of ``paths`` (files, directories, ``-``): one per transcript, in
    input order; ``each`` is called with every one as it is known (a stream). Many small
    session files are read by ``jobs`` processes (default: one per core;
    :func:`ctxtool.run.manyfiles.each_result`)."""
    import functools

    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base, ctxtool.formats.walk)
    from ..formats.walk import iter_paths
    from ..run.manyfiles import each_result

    rep = CompactionsReport(loop_turns, loop_minutes)

    def add(tc: TranscriptCompactions) -> None:
        rep.transcripts.append(tc)
        if each is not None:
            each(tc)

    one = functools.partial(transcript_compactions, loop_turns=loop_turns, loop_minutes=loop_minutes)
    each_result(one, iter_paths(paths, subagents=True), add, fmt=fmt, jobs=jobs)
    return rep
