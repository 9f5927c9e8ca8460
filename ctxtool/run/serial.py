"""The runner's serial part: the transcripts of one input through a task in input order (several
in flight with ``threads``), then written, and checked before anything is replaced.
:class:`TaskStream` is the one loop every run uses (a whole file, a byte range, one record);
:func:`write_checked` writes atomically. What the loop asks of a task, step by step:
docs/architecture.md, "Running, in more detail"."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any

from .. import formats
from ..errors import CtxtoolError, Failure
from ..formats.base import ErrorPolicy
from ..io import jsonl as jsonio
from ..io.outputs import HeldOutput, LikeSource, atomic_output, seen_at_end
from ..model import Transcript

if TYPE_CHECKING:
    from ..io.events import EventLog
    from .operation import FileRun, Operation, R, Task

Outcome = tuple[Transcript, CtxtoolError | None]  # what to write (the input or its replacement), the failure


class TaskStream:
    """Transcripts through a task, in input order: counts them, notes the format, and gives a
    transcript the task failed on to the error policy. ``threads`` > 1 applies the task to
    several transcripts at once (for operations that wait on a model; ``Task.apply`` must
    then be thread-safe). ``pairs``: a list that receives (as read, as written) per
    transcript written, for :func:`write_checked`."""

    def __init__(self, task: Task[Any], policy: ErrorPolicy, threads: int = 1,
                 progress: Callable[[Transcript], None] | None = None, *, read_first: bool = False,
                 keep_failed: bool = False, pairs: list[tuple[Transcript, Transcript]] | None = None) -> None:
        self.task, self.policy, self.threads, self.progress = task, policy, threads, progress
        self.read_first, self.keep_failed, self.pairs = read_first, keep_failed, pairs
        self.format: str | None = None
        self.count = 0

    def __call__(self, ts: Iterable[Transcript]) -> Iterator[Transcript]:
        ts = self._begin(ts)
        if self.threads <= 1:
            for t in ts:
                out = self._done(t, self._apply(t))
                if out is not None:
                    yield out
            return
        from collections import deque
        from concurrent.futures import Future, ThreadPoolExecutor

        ex = ThreadPoolExecutor(self.threads, thread_name_prefix="ctxtool-run")
        pending: deque[tuple[Transcript, Future[Outcome]]] = deque()
        try:
            for t in ts:
                pending.append((t, ex.submit(self._apply, t)))
                while len(pending) > 2 * self.threads or (pending and pending[0][1].done()):
                    t0, f = pending.popleft()
                    if (out := self._done(t0, f.result())) is not None:
                        yield out
            while pending:
                t0, f = pending.popleft()
                if (out := self._done(t0, f.result())) is not None:
                    yield out
        finally:
            ex.shutdown(wait=True, cancel_futures=True)

    def _begin(self, ts: Iterable[Transcript]) -> Iterator[Transcript]:
        if self.read_first:
            ahead = list(ts)
            self.task.begin(ahead)
            yield from ahead
            return
        it = iter(ts)
        first = next(it, None)
        self.task.begin([] if first is None else [first])
        if first is not None:
            yield from chain((first,), it)

    def _apply(self, t: Transcript) -> Outcome:
        try:
            new = self.task.apply(t)
        except CtxtoolError as e:
            if e.path is None:
                e.path = t.path
            if e.line is None and t.record is not None:  # one record's line; a session spans many
                e.line = t.lineno
            return t, e
        return (t if new is None else new), None

    def _done(self, t: Transcript, res: Outcome) -> Transcript | None:
        out, err = res
        if err is not None:
            if err.kind == Failure.INTERNAL:  # the output, the cache: not this transcript's fault
                raise err
            self.task.failed(t, err)
            if not (self.keep_failed and self.policy.mode == "skip"):
                self.policy.handle(err)  # fail: raises; skip: reported and left out
                return None
        else:
            self.task.commit(t)
        if self.format is None:
            self.format = t.format
        self.count += 1
        if self.pairs is not None:
            self.pairs.append((t, out))
        if self.progress is not None:
            self.progress(out)
        return out


class _Rewrite(Exception):
    def __init__(self, positions: Collection[int]) -> None:
        super().__init__(f"{len(positions)} transcript(s) to write as read")
        self.positions = positions


def write_checked(
    ts: Iterable[Transcript],
    output: str,
    to: str | None,
    check: Callable[[str], None] | None,
    task: Task[Any] | None = None,
    pairs: list[tuple[Transcript, Transcript]] | None = None,
    like: jsonio.Source | None = None,
    same: Callable[[], bool] | None = None,
) -> None:
    """Write ``ts`` to ``output`` atomically (``to``: in that format, else the first one's),
    ``check`` seeing the finished file first. ``task.flush`` stores what the output names
    (refs) before it is seen: once it is written, or, for stdout or a FIFO, read as it is
    written, before each chunk is passed on. With ``task`` and ``pairs`` (filled by the
    :class:`TaskStream` that produces ``ts``), ``task.check`` sees it too and may name
    positions to write as they were read: the file is then written again and checked once
    more (``last``: the task must accept it or raise). ``like``: the source being read, whose
    ending the output keeps when ``same`` says it is written in the source's format
    (:class:`ctxtool.io.outputs.LikeSource`)."""
    target = formats.get_format(to) if to else None

    def write(out: Any, items: Iterable[Transcript]) -> None:
        sink = LikeSource(out, like, same or (lambda: True)) if like is not None and not like.plain_ending() else out
        formats.write(items, sink, target)
        if isinstance(sink, LikeSource):
            sink.finish()

    if task is None or pairs is None:
        with atomic_output(output, check) as out:
            held = None
            if task is not None and task.gathers and check is None and not seen_at_end(output):
                held = HeldOutput(out, task.flush)  # stdout or a FIFO, read as it is written
            write(held or out, ts)
            if held is not None:
                held.release()
            elif task is not None:
                task.flush()  # before the output is seen
        return

    def checked(last: bool) -> Callable[[str], None]:
        def run(tmp: str) -> None:
            if check is not None:
                check(tmp)
            redo = task.check(tmp, [w for _, w in pairs], [o for o, _ in pairs], last)
            if redo and last:
                raise CtxtoolError("the output was rejected after it was written again", kind=Failure.INTERNAL)
            if redo:
                raise _Rewrite(redo)

        return run

    try:
        with atomic_output(output, checked(False)) as out:
            write(out, ts)
            task.flush()
    except _Rewrite as r:
        pairs[:] = [(o, o if i in r.positions else w) for i, (o, w) in enumerate(pairs)]
        with atomic_output(output, checked(True)) as out:
            write(out, [w for _, w in pairs])
            task.flush()


def run_serial(
    op: Operation[R],
    path: str,
    name: str,
    output: str | None,
    fmt: str | None,
    to: str | None,
    on_error: str,
    log: EventLog | None,
    progress: Callable[[Transcript], None] | None,
    check: Callable[[str], None] | None,
    threads: int,
    worker: bool = False,
    keep_ending: bool = True,
) -> FileRun[R]:
    # lazy: start-up (loaded only when this runs: .operation)
    from .operation import FileRun, RunContext

    policy = ErrorPolicy(on_error)
    task = op.start(RunContext(name, policy, log, worker=worker, to=to))
    pairs: list[tuple[Transcript, Transcript]] | None = [] if op.checks_output and output is not None else None
    stream = TaskStream(task, policy, threads, progress, read_first=op.read_first, keep_failed=op.keep_failed,
                        pairs=pairs)
    try:
        src = jsonio.open_source(path, name=name)
        applied = stream(task.read(src, fmt, policy))
        if output is None:
            for _ in applied:
                pass
        else:
            # written back in its own format, the output ends its lines as the source did
            same = lambda: to is None or formats.get_format(to).name == stream.format  # noqa: E731
            write_checked(applied, output, to, check, task, pairs, like=src if keep_ending else None, same=same)
        report = task.finish()
    finally:
        task.close()
    return FileRun(report, name, output, stream.format, stream.count, list(policy.skipped))
