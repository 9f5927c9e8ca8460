"""The runner's parallel part: a dataset file (one transcript per line) split into byte
ranges, each run by a worker process as a :class:`RangeJob` (pickled, complete in itself:
the operation with its options, no module state), the parts joined in order into the
output and the reports merged. :func:`ctxtool.run.runner.run_file` decides when to split;
:func:`run_range` runs one job in any process, or on any machine that sees the file."""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import IO, Any, Generic

from .. import formats
from ..errors import CtxtoolError
from ..formats.base import ErrorPolicy
from ..io import jsonl as jsonio
from ..io import jsontext
from ..io.events import EventLog
from ..io.files import check_input
from ..io.outputs import atomic_output, output_error
from ..io.paths import BUFFER, make_temp_dir
from ..model import Transcript
from .operation import FileRun, Operation, R, RunContext
from .pool import gc_paused, worker_pool
from .serial import TaskStream, run_serial


@dataclass(frozen=True, slots=True)
class RangeJob(Generic[R]):
    """One worker's job, complete in itself (it is pickled): the operation over one byte
    range of a dataset file, its transcripts written to ``part`` (None: not written)."""

    op: Operation[R]
    path: str
    start: int
    end: int
    first_line: int
    format: str
    part: str | None
    on_error: str
    events: bool
    threads: int = 1


@dataclass(slots=True)
class RangeResult(Generic[R]):
    report: R
    format: str | None
    transcripts: int
    errors: list[CtxtoolError]
    events: list[dict[str, Any]]


def run_range(job: RangeJob[R]) -> RangeResult[R]:
    """Run one :class:`RangeJob` (in any process, on any machine that sees the file)."""
    policy = ErrorPolicy(job.on_error)
    log = EventLog(None) if job.events else None
    task = job.op.start(RunContext(job.path, policy, log, worker=True))
    f = formats.get_format(job.format)
    stream = TaskStream(task, policy, job.threads, read_first=job.op.read_first, keep_failed=job.op.keep_failed)
    try:
        applied = stream(task.read(jsonio.open_range(job.path, job.start, job.end, job.first_line), f, policy))
        if job.part is None:
            for _ in applied:
                pass
        else:
            with open(job.part, "wb", BUFFER) as out:  # whole megabytes a system call, not two calls a record
                f.write(applied, out)
        report = task.finish()
    finally:
        task.close()
    return RangeResult(report, stream.format, stream.count, list(policy.skipped), log.events if log else [])


def _parts_dir(output: str) -> str:
    """Beside the output (the parts are joined into it), named for this process: the next
    run in that directory removes it if this process dies (:func:`ctxtool.io.paths.make_temp_dir`)."""
    # lazy: start-up (loaded only when this runs: tempfile)
    import tempfile

    base = tempfile.gettempdir() if output == "-" else os.path.dirname(os.path.abspath(output))
    try:
        os.makedirs(base, exist_ok=True)
        return make_temp_dir(base, "ctxtool-parts")
    except OSError as e:
        raise output_error(e, output) from e


def run_parallel(
    op: Operation[R],
    path: str,
    output: str | None,
    plan: tuple[str, list[tuple[int, int, int]]],
    workers: int,
    on_error: str,
    log: EventLog | None,
    check: Callable[[str], None] | None,
    threads: int,
) -> FileRun[R]:
    fname, ranges = plan
    op.prepare()
    parts = _parts_dir(output) if output is not None else None
    try:
        jobs = [
            RangeJob(op, path, a, b, line, fname, os.path.join(parts, f"{k}.part") if parts else None, on_error,
                     log is not None, threads)
            for k, (a, b, line) in enumerate(ranges)
        ]
        with worker_pool(workers, gc_enabled=op.collect_garbage) as ex, gc_paused():
            futures = [ex.submit(_sent, run_range, job) for job in _numbered_jobs(jobs)]
            _no_more_jobs(ex)
            results: list[RangeResult[R]] = []

            def reports() -> Iterator[R]:
                for f in futures:
                    results.append(_received(f.result()))
                    yield results[-1].report

            report = op.collect(reports())
        if output is not None:
            names = [j.part for j in jobs if j.part]
            with atomic_output(output, check, start_with=names[0] if names else None) as out:  # moved, not copied
                _join(names[1:], out)
    finally:
        if parts is not None:
            shutil.rmtree(parts, ignore_errors=True)
    if log is not None:
        for r in results:
            log.events.extend(r.events)
    fmt = next((r.format for r in results if r.format), None)
    return FileRun(
        report, path, output, fmt, sum(r.transcripts for r in results), [e for r in results for e in r.errors], workers
    )


def _no_more_jobs(ex: Any) -> None:
    """Every job is submitted: each worker exits as soon as it has answered its last one
    (:meth:`ctxtool.run.pool.ForkPool.no_more_jobs`), not all of them when the pool closes."""
    done = getattr(ex, "no_more_jobs", None)  # the standard library's pool (no fork) has none
    if done is not None:
        done()


def _sent(fn: Callable[..., Any], *args: Any) -> bytes:
    """``fn(*args)`` in a worker, pickled there with room for values nested as deeply as the
    readers accept (a transcript's id may be: :func:`ctxtool.io.jsontext.deep`); the pool's
    own pickling has the usual recursion limit."""
    out = fn(*args)
    with jsontext.deep():
        return pickle.dumps(out, pickle.HIGHEST_PROTOCOL)


def _received(data: bytes) -> Any:
    with jsontext.deep():
        return pickle.loads(data)


def _numbered_jobs(jobs: list[RangeJob[R]]) -> Iterator[RangeJob[R]]:
    """The jobs, each with its first line number, yielded as soon as it is known: the
    newlines before a range are counted here, one range at a time, while the workers already
    run the ranges before it (numbering is off the critical path: no read of the whole file
    before any worker starts)."""
    line = 1
    for k, job in enumerate(jobs):
        if k:
            prev = jobs[k - 1]
            line += jsonio.count_newlines(prev.path, prev.start, prev.end)
        yield job if job.first_line == line else replace(job, first_line=line)


def _join(parts: list[str], out: IO[bytes]) -> None:
    for p in parts:
        with open(p, "rb") as fh:
            shutil.copyfileobj(fh, out, 1 << 22)


#: many files (a user's sessions): whole files go to worker processes in jobs of about this
#: many bytes (fewer jobs than files: each one crosses between processes)
FILES_JOB_BYTES = 256 << 10


def run_pooled(op: Operation[R], paths: list[str], sizes: list[int], fmt: str | None, on_error: str, n: int,
               progress: Callable[[Any], None] | None) -> Iterator[FileRun[R] | CtxtoolError]:
    """The part of :func:`ctxtool.run.manyfiles.run_files` that runs whole files (``sizes``: their
    bytes) on ``n`` worker processes, a batch of about FILES_JOB_BYTES per job."""
    batches: list[list[str]] = [[]]
    held = 0
    for p, size in zip(paths, sizes, strict=True):
        if batches[-1] and held + size > FILES_JOB_BYTES:
            batches.append([])
            held = 0
        batches[-1].append(p)
        held += size
    op.prepare()
    with worker_pool(min(n, len(batches)), gc_enabled=op.collect_garbage) as ex, gc_paused():
        futures = [ex.submit(_sent, _run_whole, op, batch, fmt, on_error) for batch in batches]
        _no_more_jobs(ex)
        try:
            for f in futures:
                for run in _received(f.result()):
                    if isinstance(run, FileRun):
                        run.report = op.collect([run.report])  # its transcripts passed on here
                        if progress is not None:
                            stand_in = Transcript(run.format or "", path=run.path)
                            for _ in range(run.transcripts):
                                progress(stand_in)
                    yield run
        finally:  # the caller stopped (an error under --on-error fail): the jobs not started never run
            for f in futures:
                f.cancel()


def _run_whole(op: Operation[R], paths: list[str], fmt: str | None, on_error: str) -> list[FileRun[R] | CtxtoolError]:
    """One job of :func:`run_pooled` in a worker process: each file run whole. Consecutive
    runs come back as one, their reports merged in order as the caller merges them: one
    report crosses between the processes instead of one per file (each costs ~0.15 ms to
    pickle and unpickle, as much as reading a small session)."""
    out: list[FileRun[R] | CtxtoolError] = []
    for p in paths:
        try:
            check_input(p)
            run = run_serial(op, p, p, None, fmt, None, on_error, None, None, None, 1, worker=True)
        except CtxtoolError as e:
            out.append(e)
            continue
        last = out[-1] if out and op.merge_files else None
        if isinstance(last, FileRun):
            last.report.merge(run.report)
            last.transcripts += run.transcripts
            last.files += 1
            last.errors.extend(run.errors)
            last.format = last.format if last.format == run.format else None
        else:
            out.append(run)
    return out
