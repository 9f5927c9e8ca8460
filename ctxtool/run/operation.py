"""What an operation is: a picklable :class:`Operation` of options, bound to one input (a file, or
a byte range in a worker) by ``start``, becomes a :class:`Task` that changes each transcript in
place (``apply``) and reports at the end (``finish``). Reports merge (:func:`merge_reports`), so
the parts of a file run by several processes or machines add up to a serial run's report.
:class:`MapOp` makes any function of a transcript an operation."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from .. import formats
from ..errors import CtxtoolError
from ..formats.base import ErrorPolicy, Format
from ..io import jsonl as jsonio
from ..io.events import EventLog
from ..model import Transcript


class Mergeable(Protocol):
    def merge(self, other: Any, /) -> None: ...


R = TypeVar("R", bound=Mergeable)
T = TypeVar("T")


def merge_reports(reports: Iterable[R]) -> R:
    """The first report with every other merged into it, in order."""
    it = iter(reports)
    first = next(it, None)
    if first is None:
        raise ValueError("merge_reports() needs at least one report")
    for r in it:
        first.merge(r)
    return first


@dataclass(slots=True)
class Results(Generic[T]):
    """A report that is one result per transcript (window, repair, cut): merging appends."""

    items: list[T] = field(default_factory=list)

    def merge(self, other: Results[T]) -> None:
        self.items.extend(other.items)


@dataclass(slots=True)
class RunContext:
    """What a task may use while it runs: the input's name, the error policy (a record an
    operation cannot handle goes to ``policy.handle``), the event log, whether it runs
    in a worker process (one of several: no threads of its own), the output format the
    user asked for (``to``; None: each transcript's own) and whether the input is one record."""

    path: str
    policy: ErrorPolicy
    events: EventLog | None = None
    worker: bool = False
    to: str | None = None
    record: bool = False  # one record (ctxtool.run.records.process): its report is that record's alone


class Task(Generic[R]):
    """An operation bound to one input: ``apply`` to each transcript, then ``finish``
    (the order of the calls: :mod:`ctxtool.run.serial`)."""

    def read(self, src: jsonio.Source, fmt: str | Format | None, policy: ErrorPolicy) -> Iterator[Transcript]:
        """The transcripts of ``src`` in format ``fmt`` (None: detected). An operation that
        needs less than the whole model may read the records itself (``stats`` tallies
        dataset records from their parsed values, :mod:`ctxtool.stats.fast`)."""
        return formats.read_source(src, fmt, policy)

    def begin(self, ahead: Sequence[Transcript]) -> None:
        """Called once before the first ``apply`` with the transcripts read ahead: all of
        them (``Operation.read_first``), else the first one, or none: the input is empty."""

    def apply(self, t: Transcript) -> Transcript | None:
        """Change ``t`` in place (None), or return the transcript to write instead."""
        raise NotImplementedError

    def commit(self, t: Transcript) -> None:
        """Called in input order after ``apply`` succeeded (apply may run on several threads)."""

    def failed(self, t: Transcript, err: CtxtoolError) -> None:
        """Called in input order instead of ``commit`` when ``apply`` raised ``err``, before
        the error policy acts (``fail``: the run stops; ``skip``: ``t`` is left out, or
        written as it was read with ``Operation.keep_failed``)."""

    def check(self, tmp: str, written: Sequence[Transcript], read: Sequence[Transcript], last: bool) -> Collection[int]:
        """With ``Operation.checks_output``: the written output (``tmp``, before it replaces
        anything) and the transcripts in it, beside the same transcripts as read. Raise to
        reject it, or return the positions to write again as they were read (``last``: the
        rewrite itself: accept or raise)."""
        return ()

    #: the task gathers what it stores beside the output (refs, into packs) until ``flush``:
    #: an output read as it is written (stdout, a FIFO) is held back until then
    gathers: ClassVar[bool] = False

    def flush(self) -> None:
        """Store what the output written so far names (refs gathered for packs): called before
        any of it replaces a file or reaches a reader (:func:`ctxtool.run.serial.write_checked`;
        a worker's part is joined after ``finish``)."""

    def finish(self) -> R:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (called after ``finish``, or after a failure)."""


class MapTask(Task[Results[T]]):
    """A task that calls ``fn`` on each transcript and keeps its results (or passes each to
    ``sink``, in input order)."""

    def __init__(self, fn: Callable[[Transcript], T], sink: Callable[[T], None] | None = None) -> None:
        self.fn = fn
        self.sink = sink  # given: each result goes there in input order, not held
        self.results: Results[T] = Results()
        self.pending: dict[int, T] = {}

    def apply(self, t: Transcript) -> None:
        self.pending[id(t)] = self.fn(t)

    def commit(self, t: Transcript) -> None:
        r = self.pending.pop(id(t))
        if self.sink is None:
            self.results.items.append(r)
        else:
            self.sink(r)

    def finish(self) -> Results[T]:
        return self.results


class Operation(Generic[R]):
    """A file operation. Subclasses are (frozen) dataclasses of their options, so they pickle."""

    name: ClassVar[str] = ""
    #: False for operations that only read (stats): they have no output
    writes: ClassVar[bool] = True
    #: False for operations that cannot be pickled (:class:`MapOp` of a closure): never split
    parallel: ClassVar[bool] = True
    #: False: workers run without the cyclic collector (many small objects kept to the end)
    collect_garbage: ClassVar[bool] = True
    #: False: over many files (:func:`ctxtool.run.manyfiles.run_files`) each file's run comes back on its own, not
    #: merged with the next ones of the same job (the caller needs each file's report)
    merge_files: ClassVar[bool] = True
    #: True: the whole input is read before the first transcript is applied (operations that
    #: call a model: a bad record or an empty input fails before any call; ``begin`` sees all)
    read_first: ClassVar[bool] = False
    #: True: under ``skip`` a transcript the operation fails on is written as it was read
    #: (and reported by the task's ``failed``), not left out
    keep_failed: ClassVar[bool] = False
    #: True: ``Task.check`` validates the written output against the input (one process)
    checks_output: ClassVar[bool] = False
    #: True: the operation never changes the parsed values it reads in place (it only reads
    #: them, or builds its output from new values): :func:`ctxtool.run.records.process` hands
    #: it a caller's parsed record as it is; False: a copy (the record's bytes parsed again)
    shares_source: ClassVar[bool] = False
    #: True (with ``shares_source``): the operation makes a caller's parsed record's bytes
    #: itself (:func:`ctxtool.formats.base.record_bytes`) wherever it may write the record as
    #: read, so :func:`ctxtool.run.records.process` does not make them first; a record it
    #: writes without having made them is one it changed (fewer messages)
    makes_record_bytes: ClassVar[bool] = False

    #: the largest byte range a process is given (None: no limit): what a range's report
    #: holds until the parent takes it stays bounded however large the file
    max_range_bytes: ClassVar[int | None] = None

    def ranges_per_job(self) -> int:
        """Byte ranges per process: more than one when the cost of a byte varies."""
        return 1

    def prepare(self) -> None:
        """Called once in the parent before workers start (create directories, load tables)."""

    def collect(self, reports: Iterable[R]) -> R:
        """One file's report from its parts (byte ranges, shards), given in input order as
        each is done: merged (an operation may pass on what it streams and let it go)."""
        return merge_reports(reports)

    def start(self, ctx: RunContext) -> Task[R]:
        raise NotImplementedError


class MapOp(Operation[Results[T]]):
    """Any function of a transcript as an operation (its results are the report). Run in one
    process unless ``parallel``: a function that pickles (module-level, or a
    ``functools.partial`` of one with picklable arguments) may run on worker processes; a
    closure does not pickle. ``key``: what the function does, as settings (its repr: a sharded
    run's ``_done`` entries made under the same key are reused by a re-run); None: the
    function's repr, which names its address, so a re-run redoes every shard."""

    name: ClassVar[str] = "each"

    def __init__(self, fn: Callable[[Transcript], T], name: str = "each", parallel: bool = False,
                 sink: Callable[[T], None] | None = None, key: str | None = None) -> None:
        self.fn = fn
        self.label = name
        self.parallel = parallel  # type: ignore[misc]  # per instance: whether fn pickles
        self.sink = sink  # given: the results go there in input order as they are known (the report holds none)
        self.key = key

    def __repr__(self) -> str:
        return object.__repr__(self) if self.key is None else f"MapOp({self.label!r}, {self.key!r})"

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, sink=None)  # a callback stays in its process: the parent passes results on

    def collect(self, reports: Iterable[Results[T]]) -> Results[T]:
        if self.sink is None:
            return merge_reports(reports)
        for part in reports:  # a worker's results, in input order as each part is done
            for r in part.items:
                self.sink(r)
        return Results()

    def start(self, ctx: RunContext) -> Task[Results[T]]:
        return MapTask(self.fn, None if ctx.worker else self.sink)


@dataclass(slots=True)
class FileResults(Generic[T]):
    """One result per transcript of a file (window, repair, cut), with the file's facts.
    Subclasses add ``totals``."""

    path: str
    output: str | None
    format: str | None
    transcripts: list[T]
    skipped: list[str]

    def totals(self) -> dict[str, Any]:
        return {"transcripts": len(self.transcripts)}

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "output": self.output,
            "format": self.format,
            "totals": self.totals(),
            "transcripts": [t.to_json() for t in self.transcripts],  # type: ignore[attr-defined]
            "skipped": self.skipped,
        }


@dataclass(slots=True)
class FileRun(Generic[R]):
    """What :func:`run_file` did: the operation's report plus the file-level facts."""

    report: R
    path: str
    output: str | None
    format: str | None
    transcripts: int
    errors: list[CtxtoolError]  # the records --on-error skip left out, in file order
    jobs: int = 1
    file_bytes_before: int | None = None
    file_bytes_after: int | None = None
    files: int = 1  # input files this run covers (run_files: a worker's consecutive files come as one run)

    @property
    def skipped(self) -> list[str]:
        return [str(e) for e in self.errors]


def event_log(events: EventLog | str | Path | None) -> EventLog | None:
    return events if isinstance(events, EventLog) or events is None else EventLog(events)
