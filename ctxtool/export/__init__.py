"""Readable exports of a transcript file: markdown or one self-contained HTML file.

    from ctxtool.export import export_file
    result = export_file("session.jsonl", "session.html")  # the renderer from the suffix

A transcript becomes a :class:`~ctxtool.export.walk.View` (turns and compaction markers,
decided once in :mod:`ctxtool.export.walk`); a registered renderer
(:func:`~ctxtool.export.base.register`: ``markdown``, ``html``) draws the views as a stream
of text, written through :func:`ctxtool.io.outputs.atomic_output`.
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
    DEFAULT_PAGE_SIZE,
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
    "DEFAULT_COLLAPSE", "DEFAULT_PAGE_SIZE", "ExportOptions", "ExportResult", "Marker", "Part", "Renderer", "Turn", "View",
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


def _check_suffix(out: str | None, name: str, implied: str | None) -> None:
    """An output name that says another kind of file than the one written is an error:
    another renderer's suffix (``-o out.html --to markdown``) or a known type that is not text
    (``-o out.pdf``, ``.png``, ``.json``). A name without a suffix, or one no type is known
    for (``.out``), or ``.txt``, is written as asked."""
    if out is None or implied == name:
        return
    import mimetypes

    from ..errors import CtxtoolError, ExitCode

    base = os.path.basename(out.lower().removesuffix(".gz").removesuffix(".zst"))
    suffix = os.path.splitext(base)[1]
    kind = mimetypes.MimeTypes(filenames=()).guess_type("x" + suffix)[0] if suffix else None  # Python's own table
    if implied is None and kind in (None, "text/plain"):
        return
    kinds = ", ".join(f"{n} ({' '.join(get_renderer(n).suffixes)})" for n in renderer_names())
    said = f"an {implied} name" if implied else f"a {suffix} name"
    raise CtxtoolError(f"{said} for a {name} export: export writes {kinds}; name the output for --to, or drop --to",
                       path=out, code=ExitCode.USAGE)


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
    from .. import formats
    from ..io import files as fileio
    from ..io import outputs

    out = None if output is None or str(output) == "-" else str(output)
    implied = renderer_for_output(out)
    name = to or implied or "markdown"
    _check_suffix(out, get_renderer(name).name, implied)
    opts = options or ExportOptions()
    renderer = get_renderer(name)(opts)
    fileio.check_input(path)
    title = opts.title or ("stdin" if str(path) == "-" else os.path.basename(str(path)))
    tally = _Tally()
    written = 0
    with outputs.atomic_output(out) as fh:
        # a Claude Code session file brings its subagents' transcripts (one unit)
        files = list(formats.iter_paths([str(path)], subagents=True)) if str(path) != "-" else ["-"]
        read: Iterable[Transcript] = (t for f in files for t in formats.read(f, fmt if f == str(path) else None))
        if redactor is not None:
            from ..redact import redacted

            read = redacted(read, redactor)
        for piece in renderer.document(title, tally.count(view(t) for t in read)):
            data = piece.encode("utf-8", "replace")
            fh.write(data)
            written += len(data)
    return ExportResult(str(path), out, renderer.name, tally.transcripts, tally.messages, tally.compactions, written)
