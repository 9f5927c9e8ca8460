"""Structural validation: tool pairs, duplicate ids, trailing unanswered calls, and the
canonical JSON Schema for ctxtool's own files."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, ClassVar

from ..errors import CtxtoolError
from ..io.files import local_size, open_input, reopenable
from ..io.jsonl import loads
from ..model import Message, Transcript, transcript_json
from ..run.operation import Operation, RunContext, Task
from .pairing import is_terminal, pair

# problem codes
ORPHAN_RESULT = "orphan_result"  # a tool result whose call is not in the transcript
UNANSWERED_CALL = "unanswered_call"  # a tool call with no result
TRAILING_CALLS = "trailing_tool_calls"  # the last assistant message ends with unanswered calls
DUPLICATE_MESSAGE_ID = "duplicate_message_id"
DUPLICATE_CALL_ID = "duplicate_call_id"
DUPLICATE_RESULT = "duplicate_result"
SCHEMA = "schema"
UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class Problem:
    code: str
    message: str
    path: str
    line: int | None = None
    message_id: str | None = None
    transcript: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "message_id": self.message_id,
            "transcript": self.transcript,
        }

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        mid = f" [{self.message_id}]" if self.message_id else ""
        return f"{where}:{mid} {self.code}: {self.message}"


@dataclass(frozen=True, slots=True)
class TranscriptCheck:
    """One transcript's result: its messages and how many problems it has."""

    transcript: str
    path: str
    index: int
    id: str | None
    format: str
    messages: int
    problems: int

    def to_json(self) -> dict[str, Any]:
        return {
            **transcript_json(self),
            "format": self.format,
            "messages": self.messages,
            "problems": self.problems,
            "ok": not self.problems,
        }


@dataclass(slots=True)
class ValidationReport:
    files: int = 0
    transcripts: int = 0
    messages: int = 0
    problems: list[Problem] = field(default_factory=list)
    checked: list[TranscriptCheck] = field(default_factory=list)

    def merge(self, other: ValidationReport) -> None:
        self.files += other.files
        self.transcripts += other.transcripts
        self.messages += other.messages
        self.problems.extend(other.problems)
        self.checked.extend(other.checked)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for p in self.problems:
            counts[p.code] = counts.get(p.code, 0) + 1
        return {
            "ok": self.ok,
            "files": self.files,
            "transcripts": self.transcripts,
            "messages": self.messages,
            "problem_counts": counts,
            "problems": [p.to_json() for p in self.problems],
        }


def check_messages(msgs: list[Message], path: str = "-", label: str | None = None) -> list[Problem]:
    """Structural problems of a message list (the invariants every ctxtool operation keeps)."""
    problems: list[Problem] = []

    def add(code: str, text: str, m: Message) -> None:
        line = m.lineno
        where = label if (line is None and label and label != path) else None
        problems.append(Problem(code, text + (f" (in {where})" if where else ""), path, line, m.id, label))

    seen_ids: set[str] = set()
    for m in msgs:
        if m.id is not None:
            if m.id in seen_ids:
                add(DUPLICATE_MESSAGE_ID, f"message id {m.id!r} appears more than once", m)
            seen_ids.add(m.id)
    p = pair(msgs)
    for i, b in p.duplicate_calls:
        add(DUPLICATE_CALL_ID, f"tool call id {b.id!r} reused while an earlier call with it is unanswered", msgs[i])
    for i, b in p.orphans:
        add(ORPHAN_RESULT, f"tool result for {b.id!r} has no matching tool call before it", msgs[i])
    for i, b in p.duplicate_results:
        add(DUPLICATE_RESULT, f"tool call {b.id!r} already has a result", msgs[i])
    last = len(msgs) - 1
    trailing = {id(b) for b in p.trailing(msgs)}
    for ci, b in p.unanswered():
        if id(b) in trailing:
            add(TRAILING_CALLS, f"the last assistant message ends with unanswered tool call {b.id!r}", msgs[ci])
        elif not (ci == last and msgs[ci].role == "assistant" and is_terminal(b)):  # a terminal call ended the run
            add(UNANSWERED_CALL, f"tool call {b.id!r} has no result", msgs[ci])
    return problems


def check_transcript(t: Transcript) -> list[Problem]:
    return check_messages(t.messages, t.path, t.label)


@functools.lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return json.loads(resources.files("ctxtool").joinpath("schemas/transcript.schema.json").read_text("utf-8"))


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema())


def schema_errors(obj: Any) -> list[str]:
    """Why ``obj`` is not a valid canonical line (empty when it is)."""
    v = _validator()
    errs = sorted(v.iter_errors(obj), key=lambda e: list(e.path))
    out = []
    for e in errs:
        loc = "/".join(str(x) for x in e.path)
        out.append(f"{loc or '<line>'}: {e.message}" if len(e.message) < 300 else f"{loc}: {e.message[:300]}...")
    return out


def validate_canonical_file(path: str, label: str | None = None) -> list[Problem]:
    """Every line of a canonical JSONL file against the schema (``label``: its name in errors)."""
    problems: list[Problem] = []
    if path == "-":
        return problems
    name = label or path
    with open_input(path) as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            obj = loads(raw, path=name, line=n)
            for err in schema_errors(obj):
                problems.append(Problem(SCHEMA, err, name, n))
    return problems


@dataclass(frozen=True)
class ValidateOp(Operation[ValidationReport]):
    """The structural checks of every transcript of a file (see :mod:`ctxtool.run.runner`)."""

    name: ClassVar[str] = "validate"
    writes: ClassVar[bool] = False
    shares_source: ClassVar[bool] = True  # reads only
    merge_files: ClassVar[bool] = False  # validate reports each file's unreadable records after its problems

    def start(self, ctx: RunContext) -> Task[ValidationReport]:
        return _ValidateTask()


class _ValidateTask(Task[ValidationReport]):
    def __init__(self) -> None:
        self.report = ValidationReport()

    def apply(self, t: Transcript) -> None:
        msgs = t.messages
        self.report.transcripts += 1
        self.report.messages += len(msgs)
        found = check_messages(msgs, t.path, t.label)
        self.report.problems.extend(found)
        self.report.checked.append(TranscriptCheck(t.label, t.path, t.index, t.id, t.format, len(msgs), len(found)))

    def finish(self) -> ValidationReport:
        return self.report


def validate(
    paths: Iterable[str], fmt: str | None = None, on_error: str = "fail", jobs: int | None = None,
    messages_column: str | None = None,
) -> ValidationReport:
    """Schema (canonical files) and structure (every format) problems, with file, line and
    id. Unreadable records are problems too; ``on_error`` decides only about missing files.
    Many local files are read on ``jobs`` processes (default: one per core;
    :func:`ctxtool.run.manyfiles.run_files`)."""
    import contextlib

    # lazy: start-up (loaded only when this runs: ..formats.walk, ..io.parquet_paths, ..run.manyfiles, ..run.runner)
    from ..formats.walk import iter_paths
    from ..io.parquet_paths import is_parquet_dir, shard_files
    from ..run.manyfiles import run_files
    from ..run.runner import run_file

    report = ValidationReport()
    # a directory of Parquet shards: each file in its turn (a file is a report's unit)
    files = [f for p in iter_paths(paths) for f in ([s for s, _ in shard_files(p)] if is_parquet_dir(p) else [p])]
    i = 0
    while i < len(files):
        j = i  # local regular files from i to j: on every core, each file's run in turn
        while j < len(files) and local_size(files[j]) is not None:
            j += 1
        if j > i:
            with contextlib.closing(run_files(ValidateOp(), files[i:j], fmt=fmt, on_error="skip", jobs=jobs,
                                                  messages_column=messages_column)) as runs:
                for p, run in zip(files[i:j], runs, strict=True):
                    _add(report, p, p, run, on_error)
            i = j
            continue
        p = files[i]
        i += 1
        try:
            # the schema check reads the file a second time: a FIFO is spooled once
            with reopenable(p) if p != "-" else contextlib.nullcontext(p) as local:
                _add(report, p, local, run_file(ValidateOp(), local, name=p, fmt=fmt, on_error="skip", jobs=jobs,
                                            messages_column=messages_column),
                     on_error)
        except CtxtoolError as e:
            _add(report, p, p, e, on_error)
    return report


def _add(report: ValidationReport, p: str, local: str, run: Any, on_error: str) -> None:
    """One file's run (or the error that stopped it) into ``report``: its schema problems
    (a canonical file, read again from ``local``), its structural problems, then its
    unreadable records."""
    import contextlib

    report.files += 1
    if isinstance(run, CtxtoolError):
        if on_error != "skip" and run.line is None and "no such file" in run.message:
            raise run
        report.problems.append(Problem(UNREADABLE, run.message, run.path or p, run.line))
        return
    if run.format == "ctxtool" and p != "-":
        with contextlib.suppress(CtxtoolError):  # its unreadable lines are reported below
            report.problems.extend(validate_canonical_file(local, label=p))
    report.merge(run.report)
    for err in run.errors:
        report.problems.append(Problem(UNREADABLE, err.message, err.path or p, err.line))
