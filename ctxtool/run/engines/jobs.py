"""A shard, what a worker is given to run it (pickled, complete in itself) and what it
sends back, with the writes both sides make."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import CtxtoolError
from ...io.outputs import atomic_output
from ..operation import FileRun, Operation


@dataclass(frozen=True, slots=True)
class Shard:
    """One unit of work: ``input`` whole (``start`` None) or bytes ``start``..``end`` of it."""

    name: str
    input: str
    size: int | None
    start: int | None = None
    end: int | None = None
    first_line: int = 1
    format: str | None = None  # the dataset's format (ranges)
    stamp: str | None = None  # the input's version: mtime (local), ETag or modification time (URL)

    def key(self) -> dict[str, Any]:
        return {"input": self.input, "size": self.size, "stamp": self.stamp, "start": self.start, "end": self.end}


@dataclass(frozen=True, slots=True)
class ShardJob:
    """What a worker needs for one shard (pickled): complete in itself."""

    op: Operation[Any]
    shard: Shard
    output: str | None  # where the shard's transcripts go (None: not written)
    done: str | None  # its _done entry
    settings: str
    fmt: str | None
    to: str | None
    on_error: str
    events: bool
    #: runs one whole input in this process (:func:`ctxtool.run.runner.run_file`, given by the driver)
    local: Callable[..., FileRun[Any]]
    threads: int = 1
    messages_column: str | None = None  # a Parquet shard's conversation column (None: found)
    #: written as one part of a joined output: in plain ``\n`` lines, whatever its source's ending
    #: (parts of several sources joined keep none of theirs: the join would mix them)
    plain: bool = False


@dataclass(slots=True)
class ShardResult:
    name: str
    report: Any
    format: str | None
    transcripts: int
    errors: list[CtxtoolError]
    events: list[dict[str, Any]] = field(default_factory=list)
    reused: bool = False  # written by an earlier run with the same settings
    io: str | None = None  # who read and wrote it, when not this package (Ray Data's Parquet I/O)

    def to_json(self, shard: Shard) -> dict[str, Any]:
        return {
            "name": self.name, **shard.key(), "first_line": shard.first_line, "format": self.format,
            "transcripts": self.transcripts, "skipped": [str(e) for e in self.errors], "reused": self.reused,
            **({"io": self.io} if self.io else {}),
        }


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


def _put(dest: str, data: bytes) -> None:
    with atomic_output(dest) as out:
        out.write(data)
