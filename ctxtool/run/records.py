"""One record at a time: a transcript record's bytes, or the record already parsed (a dict:
processed as its compact JSON bytes would be, never changed), in; the result's bytes and report
out, for engines that spread a dataset over processes or machines (Ray, Dask, Spark). The
operation is any file operation of :mod:`ctxtool.run.runner`; operations, results and reports
pickle, and reports merge into what a run over the whole file reports. A record the operation
leaves unchanged comes back byte for byte (the README's example: ``process(WindowOp(...), rec)``)."""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .. import formats
from ..errors import CtxtoolError
from ..formats.base import ErrorPolicy
from ..io import jsonl as jsonio
from ..io.events import EventLog
from ..io.jsonl import Source
from ..model import Line, Transcript
from .operation import Mergeable, Operation, RunContext, Task
from .serial import TaskStream, write_checked

R = TypeVar("R", bound=Mergeable)


@dataclass(slots=True)
class RecordResult(Generic[R]):
    """What :func:`process` made of one record."""

    data: bytes  # the record as written, without a newline (b"" when it was skipped)
    report: R
    format: str | None
    changed: bool  # data differs from the input's bytes
    skipped: list[str] = field(default_factory=list)  # the record, when --on-error skip dropped it
    events: list[dict[str, Any]] = field(default_factory=list)


def process(
    op: Operation[R],
    record: bytes | dict[str, Any] | list[Any],
    *,
    path: str = "-",
    line: int = 1,
    fmt: str | None = None,
    on_error: str = "fail",
    events: bool = False,
) -> RecordResult[R]:
    """Run ``op`` over one record (``path`` and ``line`` say where it came from: they name
    it in errors, events and reports, as in a run over the file). ``record``: its bytes, or
    its parsed value (a dict: processed as :func:`ctxtool.io.jsonl.dumps` of it would be).
    ``fmt``: the dataset's format (default: detected from this record; named, only that
    format's own detection is asked whether the record is one)."""
    policy = ErrorPolicy(on_error)
    src = Source(path, "jsonl", first_index=line - 1)
    obj: Any
    raw: bytes | None
    if isinstance(record, bytes):
        # a line ending is whitespace to JSON: the bytes are copied without it only for an
        # operation that writes (its output is compared with them); one that only reads
        # parses them as given, and an error is the one the bytes without it give
        raw = record = record.rstrip(b"\r\n") if op.writes else record
        try:
            obj = jsonio.loads(record, path=path, line=line, exact=False)  # as a file's lines: made exact when written
        except CtxtoolError as e:
            policy.handle(_unparsed(record, e, path, line))
            obj = None
    else:
        # its bytes only where they are needed (the output of an unchanged record, the
        # style of a changed one); its values copied (parsed from them) unless shared safely
        raw = jsonio.dumps(record) if not op.shares_source or (op.writes and not op.makes_record_bytes) else None
        obj = record if op.shares_source else jsonio.loads(raw or b"", path=path, line=line, exact=False)
    if obj is not None:
        src.peek.append(Line(obj, raw, line))
    given = src.peek[0] if raw is None and op.writes and src.peek else None  # its bytes made by the operation
    f = formats.get_format(fmt) if fmt else formats.detect(src) if src.peek else None
    if f is not None and src.peek and not f.records_per_line(src):
        raise CtxtoolError(f"a {f.name} line is not a whole transcript: process files with ctxtool.run.runner.run_file",
                           path=path, line=line)
    log = EventLog(None) if events else None
    task = op.start(RunContext(path, policy, log, worker=True, record=True))
    pairs: list[tuple[Transcript, Transcript]] | None = [] if op.checks_output else None
    stream = TaskStream(task, policy, read_first=op.read_first, keep_failed=op.keep_failed, pairs=pairs)
    try:
        ts = list(stream(task.read(src, f, policy))) if f is not None else []  # the task's read: stats' and window's fast tally
        data = _written(ts, f.name, task, pairs) if ts and op.writes and f is not None else b""
        report = task.finish()
    finally:
        task.close()
    if data.endswith(b"\n"):
        data = data[:-1]
    return RecordResult(
        data=data,
        report=report,
        format=stream.format,
        changed=op.writes and _changed(data, raw if given is None else given.raw),
        skipped=[str(e) for e in policy.skipped],
        events=log.events if log is not None else [],
    )


def _changed(data: bytes, raw: bytes | None) -> bool:
    """Whether a record was written other than as its bytes say; None: its bytes were never
    made (``Operation.makes_record_bytes``: only a record the operation changed)."""
    return raw is None or data != raw


def _unparsed(record: bytes, err: CtxtoolError, path: str, line: int) -> CtxtoolError:
    """Why ``record`` is not JSON, as its bytes without a line ending say (``err``: what
    they said with it; a parser's position past the end can differ)."""
    if not record.endswith((b"\n", b"\r")):
        return err
    try:
        jsonio.loads(record.rstrip(b"\r\n"), path=path, line=line, exact=False)
    except CtxtoolError as e:
        return e
    return err


def _written(ts: list[Transcript], fmt: str, task: Task[Any], pairs: list[tuple[Transcript, Transcript]] | None) -> bytes:
    """The record as written; checked by the task first when the operation asks (a file:
    the task's check reads it back)."""
    if pairs is None:
        out = io.BytesIO()
        formats.get_format(fmt).write(ts, out)
        return out.getvalue()
    with tempfile.TemporaryDirectory(prefix="ctxtool-record") as d:
        tmp = os.path.join(d, "record")
        write_checked(ts, tmp, fmt, None, task, pairs)
        with open(tmp, "rb") as fh:
            return fh.read()
