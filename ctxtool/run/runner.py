"""One runner for every file command: read -> operate -> write (:func:`run_file`). An
:class:`Operation` (picklable options) starts a :class:`Task` per input, which changes each
transcript and returns a report; reports merge, so parts run by processes or engines add up
to a serial run. docs/architecture.md (Data flow, step 4) says how it splits and writes."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from .. import formats
from ..errors import CtxtoolError, ExitCode
from ..formats.base import ErrorPolicy, Format
from ..io import jsonl as jsonio
from ..io.events import EventLog
from ..model import Transcript

if TYPE_CHECKING:
    from ..redact import RedactOptions
    from .engines import Sharding

#: a dataset file at least this large is split across processes unless ``jobs`` is given
PARALLEL_MIN_BYTES = 8 * 1024 * 1024


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
    in a worker process (one of several: no threads of its own) and the output format the
    user asked for (``to``; None: each transcript's own)."""

    path: str
    policy: ErrorPolicy
    events: EventLog | None = None
    worker: bool = False
    to: str | None = None


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
    closure does not pickle."""

    name: ClassVar[str] = "each"

    def __init__(self, fn: Callable[[Transcript], T], name: str = "each", parallel: bool = False,
                 sink: Callable[[T], None] | None = None) -> None:
        self.fn = fn
        self.label = name
        self.parallel = parallel  # type: ignore[misc]  # per instance: whether fn pickles
        self.sink = sink  # given: the results go there in input order as they are known (the report holds none)

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


@dataclass(frozen=True)
class Identity(Operation[Results[Any]]):
    """Changes nothing: ``convert`` is reading and writing in another format. ``records``:
    each transcript's label and message count are its result (``convert --json``)."""

    name: ClassVar[str] = "convert"
    records: bool = False

    def start(self, ctx: RunContext) -> Task[Results[Any]]:
        return MapTask(_converted if self.records else _nothing)


def _nothing(t: Transcript) -> None:
    return None


def _converted(t: Transcript) -> dict[str, Any]:
    return {"transcript": t.label, "path": t.path, "index": t.index, "id": t.id, "format": t.format,
            "messages": sum(1 for _ in t.iter_messages())}


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


FR = TypeVar("FR", bound=FileResults[Any])


def run_each(cls: type[FR], op: Operation[Results[Any]], path: str, output: str | None = None, **kw: Any) -> FR:
    """:func:`run_file` for an operation with one result per transcript, as ``cls``."""
    run = run_file(op, path, output, **kw)
    return cls(path, output, run.format, run.report.items, run.skipped)


def convert_file(
    path: str, output: str | None, to: str, *, fmt: str | None = None, on_error: str = "fail", records: bool = False,
    redact: RedactOptions | None = None, engine: Sharding | None = None,
) -> FileRun[Results[Any]]:
    """``ctxtool convert``: every transcript of ``path`` written to ``output`` in format ``to``
    (``records``: with each transcript's label and message count in ``report.items``;
    ``redact``: each transcript's secrets replaced first, as ``ctxtool redact`` does;
    ``engine``: as shards, e.g. a directory into a directory, see :func:`run_file`)."""
    formats.get_format(to)  # an unknown name is a usage error before anything is read
    if redact is None:
        return run_file(Identity(records), path, output, fmt=fmt, to=to, on_error=on_error, engine=engine)
    from ..redact import Redactor

    with Redactor(redact) as r:
        def redacted(t: Transcript) -> dict[str, Any] | None:
            r.redact(t)
            return _converted(t) if records else None

        return run_file(MapOp(redacted, "convert"), path, output, fmt=fmt, to=to, on_error=on_error, engine=engine)


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


def run_file(
    op: Operation[R],
    path: str,
    output: str | None = None,
    *,
    fmt: str | None = None,
    to: str | None = None,
    on_error: str = "fail",
    jobs: int | None = None,
    events: EventLog | str | Path | None = None,
    progress: Callable[[Transcript], None] | None = None,
    check: Callable[[str], None] | None = None,
    threads: int = 1,
    name: str | None = None,
    engine: Sharding | None = None,
    messages_column: str | None = None,
) -> FileRun[R]:
    """Run ``op`` over every transcript of ``path`` and write them to ``output``.

    ``jobs``: processes for a dataset file (one transcript per line); None: one per core
    when the file is at least :data:`PARALLEL_MIN_BYTES`; 1: this process only.
    ``check`` gets the finished output file before it replaces anything (see
    :func:`ctxtool.io.jsonl.atomic_output`). ``progress`` is called per transcript (serial runs).
    ``threads``: transcripts in flight at once in each process (for operations that wait on
    a model). A transcript the operation fails on goes to the error policy like an unreadable
    record (``skip``: reported and left out; written unchanged for ``Operation.keep_failed``).
    An operation with ``checks_output`` runs in this process (its task checks the whole
    output). ``name``: what errors and reports call the input (default ``path``; e.g. a
    FIFO spooled to a temporary file). ``engine``: run as shards on an engine
    (:class:`ctxtool.run.engines.Sharding`: ``path`` may be a glob or a URL, ``output`` is a
    directory of shards, or one file when joined). A Parquet dataset (a ``.parquet`` file, or a
    directory of them: shards) runs through :mod:`ctxtool.io.parquet`, its conversation in the
    column ``messages_column`` (None: found)."""
    from ..io import parquet
    from ..io.paths import refuse_overwrite

    if jobs is not None and jobs < 1:
        raise CtxtoolError("--jobs must be at least 1", code=ExitCode.USAGE)
    if engine is None and parquet.is_parquet_dir(path):  # shards: one per file, on this host's processes
        from .engines import Sharding, get_engine

        engine = Sharding(get_engine("local", workers=jobs))
    if engine is not None:
        if output is not None and not op.writes:
            raise CtxtoolError(f"{op.name} writes no transcripts", code=ExitCode.USAGE)
        log = event_log(events)
        sharded = engine.run_file(op, path, output, fmt=fmt, to=to, on_error=on_error, log=log, check=check,
                                  threads=threads, messages_column=messages_column)
        if log is not None and log.path is not None:
            log.flush()
        return sharded
    if output is not None:
        if not op.writes:
            raise CtxtoolError(f"{op.name} writes no transcripts", code=ExitCode.USAGE)
        refuse_overwrite(path, output)
    if parquet.is_parquet_name(path):
        return parquet.run_file(op, path, output, column=messages_column, fmt=fmt, to=to, on_error=on_error,
                                events=event_log(events), progress=progress, threads=threads)
    if messages_column is not None:
        raise CtxtoolError("--messages-column names a column of a Parquet dataset (.parquet)", path=path,
                           code=ExitCode.USAGE)
    jsonio.check_input(path)  # a FIFO or /dev/fd/N is read like a file (streamed, not split)
    log = event_log(events)
    size = jsonio.input_size(path)
    plan = None
    n = jobs if jobs is not None else (os.cpu_count() or 1)
    if n > 1 and to is None and size is not None and op.parallel and not op.checks_output:
        min_bytes = PARALLEL_MIN_BYTES if jobs is None else 1
        ranges = n * op.ranges_per_job()
        if op.max_range_bytes:
            ranges = max(ranges, -(-size // op.max_range_bytes))
        plan = formats.split_plan(path, fmt, ranges, min_bytes, lines=False)  # numbered as they run
    if plan is not None:
        from .parallel import run_parallel

        run = run_parallel(op, path, output, plan, min(n, len(plan[1])), on_error, log, check, threads)
    else:
        from .serial import run_serial

        run = run_serial(op, path, name or path, output, fmt, to, on_error, log, progress, check, threads)
    run.file_bytes_before = size
    if output not in (None, "-"):
        run.file_bytes_after = jsonio.input_size(str(output))
    if log is not None and log.path is not None:
        log.flush()
    return run
