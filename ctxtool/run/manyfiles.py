"""One operation over many files (a user's sessions): :func:`run_files` is
:func:`ctxtool.run.runner.run_file` over each of them, the ones it would not split run whole on
every core (:func:`ctxtool.run.parallel.run_pooled`, imported only then); :func:`each_result`
does it for any function of a transcript that pickles, its results handed to a sink in
input order."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any

from .. import formats
from ..errors import CtxtoolError
from ..formats.base import ErrorPolicy
from ..io.files import local_size
from ..model import Transcript
from .operation import FileRun, MapOp, Operation, R, T
from .runner import PARALLEL_MIN_BYTES, run_file

if TYPE_CHECKING:
    from .engines import Sharding


#: several files that are not split add up to at least this many bytes: they run whole on
#: worker processes (:func:`run_files`; a pool costs tens of milliseconds)
FILES_MIN_BYTES = 1 << 20


def run_files(
    op: Operation[R],
    paths: list[str],
    *,
    fmt: str | None = None,
    on_error: str = "fail",
    jobs: int | None = None,
    progress: Callable[[Any], None] | None = None,
    engine: Sharding | None = None,
    messages_column: str | None = None,
) -> Generator[FileRun[R] | CtxtoolError, None, None]:
    """:func:`run_file` over each of ``paths``, in order: the runs, or the error that
    stopped a file (for the caller's error policy). Several local regular files that
    run_file would not split (below :data:`PARALLEL_MIN_BYTES`: one transcript each, or a
    small dataset; or larger but one transcript: a long session) are run whole by ``jobs``
    worker processes (default: one per core), a batch of files per job
    (:func:`ctxtool.run.parallel.run_pooled`); every other input (a large dataset, which
    run_file splits itself; stdin; a FIFO; a URL) runs in its turn in this process, as does
    every file on an ``engine``. A worker's report reaches the caller through
    ``op.collect``, as one part of its file; the runs of a job's consecutive files come as
    one, their reports merged in order. ``progress`` is called once per transcript."""
    n = jobs if jobs is not None else (os.cpu_count() or 1)
    pooled = n > 1 and op.parallel and engine is None and len(paths) > 1  # one file never pools
    sizes = [_whole_size(p, fmt) if pooled else None for p in paths]
    i = 0
    while i < len(paths):
        group: list[int] = []
        for size in sizes[i:]:
            if size is None:
                break
            group.append(size)
        if len(group) >= 2 and sum(group) >= FILES_MIN_BYTES:
            # lazy: start-up (`ctxtool stats` would load ctxtool.run.parallel)
            from .parallel import run_pooled

            yield from run_pooled(op, paths[i : i + len(group)], group, fmt, on_error, n, progress)
            i += len(group)
            continue
        try:
            yield run_file(op, paths[i], fmt=fmt, on_error=on_error, jobs=jobs, progress=progress, engine=engine,
                           messages_column=messages_column)
        except CtxtoolError as e:
            yield e
        i += 1


def each_result(
    fn: Callable[[Transcript], T],
    paths: Iterable[str],
    sink: Callable[[T], None],
    *,
    fmt: str | None = None,
    on_error: str = "fail",
    jobs: int | None = None,
    messages_column: str | None = None,
) -> list[str]:
    """Pass ``fn``'s result for every transcript of ``paths`` (files, ``-``) to ``sink``, in
    input order, as each is known: one at a time in this process, a job's or a byte range's
    at a time from worker processes; none is held. ``fn`` must pickle (see :class:`MapOp`):
    many small files run whole on every core (:func:`run_files`) and a large dataset file
    is split. Under ``fail`` the first error is raised; returns the records and files
    ``skip`` left out."""
    policy = ErrorPolicy(on_error)
    skipped: list[str] = []
    runs = run_files(MapOp(fn, parallel=True, sink=sink), list(paths), fmt=fmt, on_error=on_error, jobs=jobs,
                     messages_column=messages_column)
    try:
        for run in runs:
            if isinstance(run, CtxtoolError):
                policy.handle(run)  # raised under fail
                skipped.append(str(run))
            else:
                skipped.extend(run.skipped)
    finally:
        runs.close()  # an error: the worker processes stop now
    return skipped


def _whole_size(path: str, fmt: str | None) -> int | None:
    """The size of a local regular file that one :func:`run_files` may run whole on a worker
    (below PARALLEL_MIN_BYTES, or larger but not a dataset run_file would split: a long
    session), else None (a Parquet file: run_file reads it through ctxtool.io.parquet)."""
    # lazy: start-up (loaded only when this runs: ..io)
    from ..io.parquet_paths import is_parquet_name

    if is_parquet_name(path):
        return None
    size = local_size(path)
    if size is None or size < PARALLEL_MIN_BYTES:
        return size
    try:
        whole = formats.split_plan(path, fmt, 2, PARALLEL_MIN_BYTES, lines=False) is None
    except CtxtoolError:
        return None  # run_file says what is wrong, in its turn
    return size if whole else None
