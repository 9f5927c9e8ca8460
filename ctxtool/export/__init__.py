"""Readable exports of a transcript file: markdown or one self-contained HTML file.

    from ctxtool.export import export_file
    result = export_file("session.jsonl", "session.html")  # the renderer from the suffix

A transcript becomes a :class:`~ctxtool.export.walk.View` (turns and compaction markers,
decided once in :mod:`ctxtool.export.walk`); a registered renderer
(:func:`~ctxtool.export.base.register`: ``markdown``, ``html``) draws the views as a stream
of text, written through :func:`ctxtool.outputs.atomic_output`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..model import Transcript
from . import html as _html  # noqa: F401 - registers the renderer
from . import markdown as _markdown  # noqa: F401 - registers the renderer
from .base import (
    DEFAULT_COLLAPSE,
    ExportOptions,
    Renderer,
    get_renderer,
    register,
    renderer_for_output,
    renderer_names,
)
from .walk import Marker, Part, Turn, View, view

if TYPE_CHECKING:
    from ..redact import RedactOptions, Redactor

__all__ = [
    "DEFAULT_COLLAPSE", "ExportOptions", "ExportResult", "Marker", "Part", "Renderer", "Turn", "View",
    "export_file", "get_renderer", "register", "render", "renderer_for_output", "renderer_names", "view",
]


@dataclass(frozen=True, slots=True)
class ExportResult:
    path: str
    output: str | None
    to: str
    transcripts: int
    messages: int
    compactions: int
    bytes: int

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "output": self.output, "to": self.to, "transcripts": self.transcripts,
                "messages": self.messages, "compactions": self.compactions, "bytes": self.bytes}


@dataclass(slots=True)
class _Tally:
    transcripts: int = 0
    messages: int = 0
    compactions: int = 0

    def count(self, views: Iterable[View]) -> Iterator[View]:
        for v in views:
            self.transcripts += 1
            self.messages += v.turns
            self.compactions += v.markers
            yield v


def render(transcripts: Iterable[Transcript], to: str = "markdown", options: ExportOptions | None = None,
           title: str = "Transcript") -> str:
    """The whole document for ``transcripts`` as one string."""
    r = get_renderer(to)(options or ExportOptions())
    return "".join(r.document((options and options.title) or title, (view(t) for t in transcripts)))


def export_file(path: str | Path, output: str | Path | None = None, to: str | None = None, *,
                fmt: str | None = None, options: ExportOptions | None = None,
                redact: RedactOptions | None = None) -> ExportResult:
    """Export every transcript in ``path`` to ``output`` (``None``/``-``: stdout). ``to``
    defaults to what the output's suffix implies, else markdown. The input is read as it
    is written out (a large file is never held as one document). ``redact``: each
    transcript's secrets replaced first, as ``ctxtool redact`` does."""
    if redact is not None:
        from ..redact import Redactor

        with Redactor(redact) as r:
            return _export(path, output, to, fmt, options, r)
    return _export(path, output, to, fmt, options, None)


def _export(path: str | Path, output: str | Path | None, to: str | None, fmt: str | None,
            options: ExportOptions | None, redactor: Redactor | None) -> ExportResult:
    from .. import fileio, formats, outputs

    out = None if output is None or str(output) == "-" else str(output)
    name = to or renderer_for_output(out) or "markdown"
    opts = options or ExportOptions()
    renderer = get_renderer(name)(opts)
    fileio.check_input(path)
    title = opts.title or ("stdin" if str(path) == "-" else os.path.basename(str(path)))
    tally = _Tally()
    written = 0
    with outputs.atomic_output(out) as fh:
        read = formats.read(path, fmt)
        if redactor is not None:
            from ..redact import redacted

            read = redacted(read, redactor)
        for piece in renderer.document(title, tally.count(view(t) for t in read)):
            data = piece.encode("utf-8", "replace")
            fh.write(data)
            written += len(data)
    return ExportResult(str(path), out, renderer.name, tally.transcripts, tally.messages, tally.compactions, written)
