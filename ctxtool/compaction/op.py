"""Compaction as a file operation of the one runner: :class:`CompactOp` compacts each transcript
(on several threads for slow models) and asks the runner for ``read_first`` (a bad record or an
empty input fails before any model call), ``keep_failed`` (under ``skip`` a transcript that
cannot be compacted is written unchanged and reported) and ``checks_output`` (the output is read
back and validated; only problems the compaction introduced count). Events are logged in input
order once the output is final."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .. import formats
from ..errors import CtxtoolError, Failure
from ..formats.base import ErrorPolicy, Format
from ..model import Transcript
from ..run.operation import Operation, RunContext, Task
from ..summarizers import CacheCounts, Summarizer
from ..summarizers.heuristic import HeuristicSummarizer
from ..tokens.count import get_tokenizer
from . import pins
from .core import Outcome, compact_transcript
from .report import RecordReport
from .settings import CompactOptions

Progress = Callable[[int, int, RecordReport], None]


@dataclass(slots=True)
class CompactPart:
    """What the task of a :class:`CompactOp` reports: one outcome per transcript written (in
    input order), the summary cache's hits and misses, the output's format and size."""

    outcomes: list[Outcome] = field(default_factory=list)
    output_format: str = ""
    cache_hits: int = 0
    cache_misses: int = 0
    bytes_written: int | None = None

    def merge(self, other: CompactPart) -> None:
        self.outcomes.extend(other.outcomes)
        self.output_format = self.output_format or other.output_format
        self.cache_hits += other.cache_hits
        self.cache_misses += other.cache_misses
        if other.bytes_written is not None:
            self.bytes_written = (self.bytes_written or 0) + other.bytes_written


@dataclass(frozen=True)
class CompactOp(Operation[CompactPart]):
    """``ctxtool compact`` as an operation: the options, the summary model (None: the
    heuristic summary), ``dry_run`` (plan only), ``validate_output``. ``progress`` is called
    with (done, total, report) per transcript; it is not pickled (a worker has none)."""

    name: ClassVar[str] = "compact"
    read_first: ClassVar[bool] = True
    keep_failed: ClassVar[bool] = True
    checks_output: ClassVar[bool] = True

    options: CompactOptions = field(default_factory=CompactOptions)
    summarizer: Summarizer | None = None
    dry_run: bool = False
    validate_output: bool = True
    progress: Progress | None = field(default=None, compare=False, repr=False)
    hint: bool = False  # --agent-hint: a compacted transcript ends with a note naming the cache's tools

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, progress=None)  # a callback stays in its process

    def start(self, ctx: RunContext) -> Task[CompactPart]:
        return CompactTask(self, ctx)


def _cache_counts(summarizer: Summarizer) -> tuple[int, int]:
    return (summarizer.hits, summarizer.misses) if isinstance(summarizer, CacheCounts) else (0, 0)


class CompactTask(Task[CompactPart]):
    def __init__(self, op: CompactOp, ctx: RunContext) -> None:
        self.op, self.ctx = op, ctx
        self.summarizer: Summarizer = op.summarizer if op.summarizer is not None else HeuristicSummarizer()
        self.tok = get_tokenizer(op.options.tokenizer)
        self.part = CompactPart()
        self.target: Format | None = None
        self.total = 0
        self.pending: dict[int, Outcome] = {}
        self.counts = _cache_counts(self.summarizer)
        self.logged = False

    def begin(self, ahead: Sequence[Transcript]) -> None:
        if not ahead and self.ctx.worker:  # one record or range of a larger input: may be empty
            return
        if not ahead:
            skipped = self.ctx.policy.skipped
            raise CtxtoolError("no transcripts in the input" + (f" ({len(skipped)} unreadable record(s) skipped)"
                                                                if skipped else ""), path=self.ctx.path)
        self.target = formats.get_format(self.ctx.to or ahead[0].format)
        self.part.output_format = self.target.name
        self.total = len(ahead)
        self.counts = _cache_counts(self.summarizer)

    def apply(self, t: Transcript) -> Transcript:
        assert self.target is not None
        o = compact_transcript(t, self.summarizer, self.op.options, dry_run=self.op.dry_run, tok=self.tok,
                               out_format=self.target.name)
        if self.op.hint and o.report.status == "compacted":
            # lazy: start-up (loaded only when this runs: ..agent.tools)
            from ..agent.tools import add_hint

            add_hint(o.transcript)
        self.pending[id(t)] = o
        return o.transcript

    def commit(self, t: Transcript) -> None:
        self._done(self.pending.pop(id(t)))

    def failed(self, t: Transcript, err: CtxtoolError) -> None:
        self._done(failed(t, err))

    def _done(self, o: Outcome) -> None:
        self.part.outcomes.append(o)
        if self.op.progress is not None:
            self.op.progress(len(self.part.outcomes), self.total, o.report)

    def check(self, tmp: str, written: Sequence[Transcript], read: Sequence[Transcript], last: bool) -> Collection[int]:
        assert self.target is not None
        bad = validate_written(tmp, self.target, list(written), list(read)) if self.op.validate_output else {}
        if bad and not last and self.ctx.policy.mode == "skip":
            for i, e in bad.items():  # written again as read: the outcome of a failure
                self.part.outcomes[i] = failed(read[i], e)
            return bad.keys()
        if bad:
            first = bad[min(bad)]
            first.message += "; nothing written"
            raise first
        self.part.bytes_written = os.path.getsize(tmp)
        return ()

    def finish(self) -> CompactPart:
        h1, m1 = _cache_counts(self.summarizer)
        self.part.cache_hits, self.part.cache_misses = h1 - self.counts[0], m1 - self.counts[1]
        self._log()
        return self.part

    def close(self) -> None:
        self._log()  # after a failure: what was done until then

    def _log(self) -> None:
        if self.logged or self.ctx.events is None:
            return
        self.logged = True
        for o in self.part.outcomes:
            for kind, fields in o.events:
                self.ctx.events.emit(kind, **fields)


def failed(t: Transcript, e: CtxtoolError) -> Outcome:
    """The outcome of a transcript that could not be compacted: itself, unchanged, reported."""
    rep = RecordReport(t.label, t.index, t.id, status="error", format=t.format, error=e.message,
                       messages_before=len(t.messages), messages_after=len(t.messages))
    return Outcome(t, rep, [("compaction_end", {"transcript": t.label, "error": e.message})])


def introduced(before: Sequence[tuple[str, str]], after: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The problems of ``after`` the input did not have. Problems are matched by code: a
    compaction renumbers positional call ids, so the same unanswered call can change its name."""
    left = Counter(code for code, _ in before)
    out = []
    for code, text in after:
        if left[code] > 0:
            left[code] -= 1
        else:
            out.append((code, text))
    return out


def validate_written(tmp: str, target: Format, new_ts: list[Transcript], old_ts: list[Transcript]) -> dict[int, CtxtoolError]:
    """The transcripts (by index) whose written output has a problem the compaction introduced."""
    # lazy: start-up (loaded only when this runs: ..history.validate)
    from ..history.validate import check_messages, validate_canonical_file

    if target.name == "ctxtool":
        probs = validate_canonical_file(tmp)
        if probs:
            raise CtxtoolError(f"compacted output fails the schema: {probs[0].message}", kind=Failure.INTERNAL)
    policy = ErrorPolicy("skip")
    back = list(formats.read(tmp, target, policy))
    if policy.skipped:
        raise CtxtoolError(f"compacted output does not read back: {policy.skipped[0].message}", kind=Failure.INTERNAL)
    if len(back) != len(new_ts):
        raise CtxtoolError(f"compacted output reads back as {len(back)} transcripts, expected {len(new_ts)}", kind=Failure.INTERNAL)
    bad: dict[int, CtxtoolError] = {}
    for i, (b, old) in enumerate(zip(back, old_ts, strict=True)):
        before = [(p.code, p.message) for p in check_messages(old.messages)]
        new = introduced(before, [(p.code, p.message) for p in check_messages(b.messages, b.path, b.label)])
        if lost := pins.missing(pins.recorded(new_ts[i]), b):
            bad[i] = pins.error(lost, old.path)
        elif new:
            code, text = new[0]
            bad[i] = CtxtoolError(f"compacted output would be invalid: {code}: {text} (transcript {old.label})",
                                  kind=Failure.INTERNAL, path=old.path, line=old.lineno if old.record is not None else None)
    return bad
