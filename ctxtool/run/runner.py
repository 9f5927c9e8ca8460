"""One runner for every file command: read -> operate -> write (:func:`run_file`). An
operation (:class:`ctxtool.run.operation.Operation`, picklable options) starts a task per input,
which changes each transcript and returns a report; reports merge, so parts run by processes or
engines add up to a serial run. docs/architecture.md (Data flow, step 4) says how it splits and writes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from .. import formats
from ..errors import CtxtoolError, Failure
from ..io.events import EventLog
from ..io.files import check_input, input_size
from ..io.outputs import refuse_log_clash
from ..io.paths import refuse_overwrite
from ..model import Transcript
from .operation import FileResults, FileRun, Operation, R, Results, event_log

if TYPE_CHECKING:
    from .engines import Sharding

#: a dataset file at least this large is split across processes unless ``jobs`` is given
PARALLEL_MIN_BYTES = 8 * 1024 * 1024


FR = TypeVar("FR", bound=FileResults[Any])


class FileKeywords(TypedDict, total=False):
    """The keywords of :func:`run_file` a library file function passes on as they are (its
    own defaults: :func:`run_file`'s): formats, events, the error policy, processes, shards
    and a Parquet dataset's conversation column."""

    fmt: str | None
    to: str | None
    events: EventLog | str | Path | None
    on_error: str
    jobs: int | None
    engine: Sharding | None
    messages_column: str | None


def run_each(cls: type[FR], op: Operation[Results[Any]], path: str, output: str | None = None, **kw: Any) -> FR:
    """:func:`run_file` for an operation with one result per transcript, as ``cls``."""
    run = run_file(op, path, output, **kw)
    return cls(path, output, run.format, run.report.items, run.skipped)


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
    keep_ending: bool = True,
) -> FileRun[R]:
    """Run ``op`` over every transcript of ``path`` and write them to ``output``.

    ``jobs``: processes for a dataset file (one transcript per line); None: one per core
    when the file is at least :data:`PARALLEL_MIN_BYTES`; 1: this process only.
    ``check`` gets the finished output file before it replaces anything (see
    :func:`ctxtool.io.outputs.atomic_output`). ``progress`` is called per transcript (serial runs).
    ``threads``: transcripts in flight at once in each process (for operations that wait on
    a model). A transcript the operation fails on goes to the error policy like an unreadable
    record (``skip``: reported and left out; written unchanged for ``Operation.keep_failed``).
    An operation with ``checks_output`` runs in this process (its task checks the whole
    output). ``name``: what errors and reports call the input (default ``path``; e.g. a
    FIFO spooled to a temporary file). ``engine``: run as shards on an engine
    (:class:`ctxtool.run.engines.Sharding`: ``path`` may be a glob or a URL, ``output`` is a
    directory of shards, or one file when joined). A Parquet dataset (a ``.parquet`` file, or a
    directory of them: shards) runs through :mod:`ctxtool.io.parquet`, its conversation in the
    column ``messages_column`` (None: found). ``keep_ending``: written back in its own format, the
    output ends its bytes as ``path`` does (a byte order mark, ``\\r\\n`` lines, no final newline;
    :class:`ctxtool.io.outputs.LikeSource`); False: plain ``\\n`` lines (a part of a joined output)."""
    # lazy: start-up (loaded only when this runs: ..io)
    from ..io import parquet_paths

    if jobs is not None and jobs < 1:
        raise CtxtoolError("--jobs must be at least 1", kind=Failure.USAGE)
    refuse_log_clash(path, output, events.path if isinstance(events, EventLog) else events)
    if engine is None and parquet_paths.is_parquet_dir(path):  # shards: one per file, on this host's processes
        # lazy: start-up (loaded only when this runs: .engines)
        from .engines import Sharding, get_engine

        engine = Sharding(get_engine("local", workers=jobs))
    if engine is not None:
        if output is not None and not op.writes:
            raise CtxtoolError(f"{op.name} writes no transcripts", kind=Failure.USAGE)
        log = event_log(events)
        sharded = engine.run_file(op, path, output, fmt=fmt, to=to, on_error=on_error, log=log, check=check,
                                  threads=threads, messages_column=messages_column, local=run_file)
        if log is not None and log.path is not None:
            log.flush()
        return sharded
    if output is not None:
        if not op.writes:
            raise CtxtoolError(f"{op.name} writes no transcripts", kind=Failure.USAGE)
        refuse_overwrite(path, output)
    if parquet_paths.is_parquet_name(path):
        # lazy: start-up (loaded only when this runs: ..io.parquet)
        from ..io import parquet

        return parquet.run_file(op, path, output, column=messages_column, fmt=fmt, to=to, on_error=on_error,
                                events=event_log(events), progress=progress, threads=threads, runner=run_file)
    if messages_column is not None:
        raise CtxtoolError("--messages-column names a column of a Parquet dataset (.parquet)", path=path,
                           kind=Failure.USAGE)
    check_input(path)  # a FIFO or /dev/fd/N is read like a file (streamed, not split)
    log = event_log(events)
    size = input_size(path)
    plan = None
    n = jobs if jobs is not None else (os.cpu_count() or 1)
    if n > 1 and to is None and size is not None and op.parallel and not op.checks_output:
        min_bytes = PARALLEL_MIN_BYTES if jobs is None else 1
        ranges = n * op.ranges_per_job()
        if op.max_range_bytes:
            ranges = max(ranges, -(-size // op.max_range_bytes))
        plan = formats.split_plan(path, fmt, ranges, min_bytes, lines=False, writes=output is not None)  # numbered as they run
    if plan is not None:
        # lazy: start-up (`ctxtool stats` would load ctxtool.run.parallel)
        from .parallel import run_parallel

        run = run_parallel(op, path, output, plan, min(n, len(plan[1])), on_error, log, check, threads)
    else:
        # lazy: start-up (loaded only when this runs: .serial)
        from .serial import run_serial

        run = run_serial(op, path, name or path, output, fmt, to, on_error, log, progress, check, threads,
                         keep_ending=keep_ending)
    run.file_bytes_before = size
    if output not in (None, "-"):
        run.file_bytes_after = input_size(str(output))
    if log is not None and log.path is not None:
        log.flush()
    return run
