"""The compactions a session recorded itself (Claude Code compact_boundary, pi compaction,
Codex compacted, found by :mod:`ctxtool.stats.compactions`), each scored on the part it replaced:
BEFORE is the session up to the compaction, AFTER up to and with its summary, and what the
session did next (up to its next compaction) is where continuation probes come from."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CtxtoolError, Failure
from ..model import Message, Transcript, source_lines
from ..tokens.context import is_summary
from ..tokens.count import Tokenizer
from .core import BUDGET, ScoreReport, score

if TYPE_CHECKING:
    from ..summarizers import Summarizer


@dataclass(frozen=True, slots=True)
class Recorded:
    number: int  # the compaction's number in the session (1-based)
    kind: str  # boundary | compaction | compacted | summary
    before: Transcript
    after: Transcript
    future: list[Message] = field(default_factory=list)  # the session's messages after it


def _prefix(t: Transcript, n: int) -> Transcript:
    return Transcript(t.format, list(t.entries[:n]), t.path, t.index, t.id, t.record, t.messages_key, t.lineno, t.extra)


def recorded(t: Transcript) -> Iterator[Recorded]:
    """BEFORE, AFTER and what followed, for each compaction ``t`` recorded."""
    # lazy: start-up (loaded only when this runs: ..stats.compactions)
    from ..stats.compactions import transcript_compactions

    at_line: dict[int, int] = {}
    for i, e in enumerate(t.entries):
        lines = source_lines(e)
        if lines and lines[0].lineno is not None:
            at_line.setdefault(lines[0].lineno, i)
    found = []
    for c in transcript_compactions(t).compactions:
        at = at_line.get(c.line) if c.line is not None else None
        if at is not None:
            found.append((c, at))
    for n, (c, at) in enumerate(found):
        j = at + 1  # the summary message(s) written with it belong to AFTER
        while j < len(t.entries):
            e = t.entries[j]
            if isinstance(e, Message) and not is_summary(e):
                break
            j += 1
        end = found[n + 1][1] if n + 1 < len(found) else len(t.entries)
        future = [e for e in t.entries[j:end] if isinstance(e, Message) and e.agent_visible]
        yield Recorded(c.number, c.kind, _prefix(t, at), _prefix(t, j), future)


def score_recorded(t: Transcript, *, tok: Tokenizer | None = None, budget: int = BUDGET,
                   judge: Summarizer | None = None, number: int | None = None) -> Iterator[tuple[Recorded, ScoreReport]]:
    """Each recorded compaction of ``t`` (``number``: that one only) with its score; the
    report's labels name it: ``PATH@N (before)`` and ``PATH@N (KIND)``."""
    for r in recorded(t):
        if number is None or r.number == number:
            rep = score(r.before, r.after, tok=tok, budget=budget, future=r.future, judge=judge)
            rep.before, rep.after = f"{t.label}@{r.number} (before)", f"{t.label}@{r.number} ({r.kind})"
            yield r, rep


def score_recorded_files(path: str | Path, *, fmt: str | None = None, tok: Tokenizer | None = None,
                         budget: int = BUDGET, judge: Summarizer | None = None,
                         number: int | None = None) -> Iterator[ScoreReport]:
    """The compactions the sessions of ``path`` (a file, ``-``, or a directory) recorded
    themselves, each scored on the part it replaced (``number``: only each session's
    compaction of that number; one that no session recorded is an error)."""
    # lazy: start-up (loaded only when this runs: ..formats)
    from ..formats import read

    found = 0
    for t in read(str(path), fmt):
        for _, rep in score_recorded(t, tok=tok, budget=budget, judge=judge, number=number):
            found += 1
            yield rep
    if number is not None and not found:
        raise CtxtoolError(f"no session here recorded a compaction #{number} (`ctxtool compactions` lists them)",
                           path=str(path), kind=Failure.USAGE)
