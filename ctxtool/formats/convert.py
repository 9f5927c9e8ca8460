"""``ctxtool convert``: every transcript of a file written in another format (changed in
nothing else, unless redacted first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..model import Transcript
from ..run.operation import FileRun, MapOp, MapTask, Operation, Results, RunContext, Task
from ..run.runner import run_file
from . import get_format

if TYPE_CHECKING:
    from ..redact.detect import RedactOptions
    from ..run.engines.shards import Sharding


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


def convert_file(
    path: str, output: str | None, to: str, *, fmt: str | None = None, on_error: str = "fail", records: bool = False,
    redact: RedactOptions | None = None, engine: Sharding | None = None,
) -> FileRun[Results[Any]]:
    """``ctxtool convert``: every transcript of ``path`` written to ``output`` in format ``to``
    (``records``: with each transcript's label and message count in ``report.items``;
    ``redact``: each transcript's secrets replaced first, as ``ctxtool redact`` does;
    ``engine``: as shards, e.g. a directory into a directory, see :func:`run_file`)."""
    get_format(to)  # an unknown name is a usage error before anything is read
    if redact is None:
        return run_file(Identity(records), path, output, fmt=fmt, to=to, on_error=on_error, engine=engine)
    # lazy: start-up (`ctxtool convert` would load ctxtool.redact)
    from ..redact.core import Redactor  # lazy: only --redact loads the redactor

    with Redactor(redact) as r:
        def redacted(t: Transcript) -> dict[str, Any] | None:
            r.redact(t)
            return _converted(t) if records else None

        key = f"redact {redact.fingerprint()} records={records}"
        return run_file(MapOp(redacted, "convert", key=key), path, output, fmt=fmt, to=to, on_error=on_error,
                        engine=engine)
