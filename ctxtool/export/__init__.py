"""Readable exports of a transcript file: markdown or one self-contained HTML file
(:func:`export_file`, the renderer from the suffix). A transcript becomes an
:class:`~ctxtool.export.walk.ExportedTranscript` (turns and compaction markers, decided once in
:mod:`ctxtool.export.walk`); a registered renderer draws it as a stream of text, written through
:func:`ctxtool.io.outputs.atomic_output`."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import formats
from ..errors import CtxtoolError, Failure
from ..io import files as fileio
from ..io import outputs
from ..io.paths import refuse_overwrite
from ..model import Transcript
from . import html as _html  # noqa: F401 - registers the renderer
from . import markdown as _markdown  # noqa: F401 - registers the renderer
from .base import RENDERERS, ExportOptions, plural, renderer_for_output
from .html import PAGE_BREAK, HtmlRenderer, esc, head, tail
from .index import IndexResult, export_index
from .walk import ExportedTranscript, view

if TYPE_CHECKING:
    from ..redact.core import Redactor
    from ..redact.detect import RedactOptions


@dataclass(frozen=True, slots=True)
class ExportResult:
    path: str
    output: str | None
    to: str
    transcripts: int
    messages: int
    compactions: int
    bytes: int
    pages: bool = False  # written as page files and their index in the directory ``output``

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "output": self.output, "to": self.to, "transcripts": self.transcripts,
                "messages": self.messages, "compactions": self.compactions, "bytes": self.bytes}


@dataclass(slots=True)
class _Tally:
    transcripts: int = 0
    messages: int = 0
    compactions: int = 0

    def count(self, views: Iterable[ExportedTranscript]) -> Iterator[ExportedTranscript]:
        for v in views:
            self.transcripts += 1
            self.messages += v.turns
            self.compactions += v.markers
            yield v


def render(transcripts: Iterable[Transcript], to: str = "markdown", options: ExportOptions | None = None,
           title: str = "Transcript") -> str:
    """The whole document for ``transcripts`` as one string."""
    r = RENDERERS.get(to)(options or ExportOptions())
    return "".join(r.document((options and options.title) or title, (view(t) for t in transcripts)))


def _check_suffix(out: str | None, name: str, implied: str | None) -> None:
    """An output name that says another kind of file than the one written is an error:
    another renderer's suffix (``-o out.html --to markdown``) or a known type that is not text
    (``-o out.pdf``, ``.png``, ``.json``). A name without a suffix, or one no type is known
    for (``.out``), or ``.txt``, is written as asked."""
    if out is None or implied == name:
        return
    import mimetypes

    base = os.path.basename(out.lower().removesuffix(".gz").removesuffix(".zst"))
    suffix = os.path.splitext(base)[1]
    kind = mimetypes.MimeTypes(filenames=()).guess_type("x" + suffix)[0] if suffix else None  # Python's own table
    if implied is None and kind in (None, "text/plain"):
        return
    kinds = ", ".join(f"{n} ({' '.join(r.suffixes)})" for n, r in RENDERERS.items())
    said = f"an {implied} name" if implied else f"a {suffix} name"
    raise CtxtoolError(f"{said} for a {name} export: export writes {kinds}; name the output for --to, or drop --to",
                       path=out, kind=Failure.USAGE)


#: the file of page n when a session is exported as pages (:func:`export_pages`)
PAGE_FILE = "page-{:03d}.html"
PAGES_INDEX = "index.html"


def export_pages(path: str | Path, output: str | Path, *, fmt: str | None = None,
                 options: ExportOptions | None = None, redact: RedactOptions | None = None) -> ExportResult:
    """Export ``path`` as HTML pages in the directory ``output`` (made if missing): one file per
    page of :attr:`ExportOptions.page_size` messages (``page-001.html`` ...), each with the whole
    table of contents at its side linking into the right page and links to the previous and
    next page, and ``index.html``: the contents and the list of pages. The input is read once
    (pages wait in a temporary directory until the contents are known)."""
    import shutil
    import tempfile

    out = Path(output)
    if out.exists() and not out.is_dir():
        raise CtxtoolError("exporting as pages writes a directory: give -o DIR/", path=str(out), kind=Failure.USAGE)
    fileio.check_input(path)
    outputs.output_dir(out)
    opts = options or ExportOptions()
    r = HtmlRenderer(opts, page_file=PAGE_FILE.format)
    title = opts.title or ("stdin" if str(path) == "-" else os.path.basename(str(path)))
    tally = _Tally()
    written = 0
    with contextlib.ExitStack() as stack:
        redactor = None
        if redact is not None:
            # lazy: start-up (`ctxtool export` would load ctxtool.io.events)
            from ..redact.core import Redactor

            redactor = stack.enter_context(Redactor(redact))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=".ctxtool-pages-", dir=out)))
        bodies = [tmp / "1"]
        fh = stack.enter_context(bodies[0].open("wb"))
        for piece in r.body(tally.count(view(t) for t in _read(path, fmt, redactor))):
            first, *rest = piece.split(PAGE_BREAK)
            fh.write(first.encode("utf-8", "replace"))
            for part in rest:  # the next page's file
                fh.close()
                bodies.append(tmp / str(len(bodies) + 1))
                fh = stack.enter_context(bodies[-1].open("wb"))
                fh.write(part.encode("utf-8", "replace"))
        fh.close()
        n = len(bodies)
        toc = tail(r.contents(r.records))

        def nav(k: int) -> str:
            prev = f"<a href=\"{PAGE_FILE.format(k - 1)}\">&#8592; previous</a>" if k > 1 else "&#8592; previous"
            nxt = f"<a href=\"{PAGE_FILE.format(k + 1)}\">next &#8594;</a>" if k < n else "next &#8594;"
            return (f"<nav class=\"pages meta\"><a href=\"{PAGES_INDEX}\">contents</a> · {prev} · page {k} of {n}"
                    f" · {nxt}</nav>\n")

        for k, body in enumerate(bodies, 1):
            with outputs.atomic_output(str(out / PAGE_FILE.format(k))) as page, body.open("rb") as src:
                for text in (head(f"{title} · page {k} of {n}"), nav(k)):
                    page.write(text.encode("utf-8"))
                shutil.copyfileobj(src, page, 1 << 20)
                for text in (nav(k), toc):
                    page.write(text.encode("utf-8"))
            written += (out / PAGE_FILE.format(k)).stat().st_size
            body.unlink()
        links = "".join(f"<li><a href=\"{PAGE_FILE.format(k)}\">page {k}</a></li>\n" for k in range(1, n + 1))
        index = (head(title) + f"<div class=\"meta\">{plural(tally.messages, 'message')} in "
                 f"{plural(tally.transcripts, 'transcript')}, {plural(n, 'page')} of at most "
                 f"{esc(str(opts.page_size or 'all'))} messages; the contents link each user turn and compaction "
                 f"to its page.</div>\n<ol class=\"pages\">\n{links}</ol>\n" + toc)
        with outputs.atomic_output(str(out / PAGES_INDEX)) as fh_index:
            fh_index.write(index.encode("utf-8", "replace"))
        written += (out / PAGES_INDEX).stat().st_size
    return ExportResult(str(path), str(out), "html", tally.transcripts, tally.messages, tally.compactions, written,
                        pages=True)


def _read(path: str | Path, fmt: str | None, redactor: Redactor | None) -> Iterator[Transcript]:
    """The transcripts of ``path`` as export reads them: a Claude Code session file brings its
    subagents' transcripts (one unit); with ``redactor``, each redacted as it passes."""
    # lazy: start-up (loaded only when this runs: ..formats.walk)
    from ..formats.walk import iter_paths

    files = list(iter_paths([str(path)], subagents=True)) if str(path) != "-" else ["-"]
    read: Iterator[Transcript] = (t for f in files for t in formats.read(f, fmt if f == str(path) else None))
    if redactor is not None:
        # lazy: start-up (`ctxtool export` would load ctxtool.io.events)
        from ..redact import redacted

        read = redacted(read, redactor)
    return read


def export_file(path: str | Path, output: str | Path | None = None, to: str | None = None, *,
                fmt: str | None = None, options: ExportOptions | None = None,
                redact: RedactOptions | None = None) -> ExportResult:
    """Export every transcript in ``path`` to ``output`` (``None``/``-``: stdout). ``to``
    defaults to what the output's suffix implies, else markdown. The input is read as it
    is written out (a large file is never held as one document). ``redact``: each
    transcript's secrets replaced first, as ``ctxtool redact`` does."""
    if redact is not None:
        # lazy: start-up (`ctxtool export` would load ctxtool.io.events)
        from ..redact.core import Redactor

        with Redactor(redact) as r:
            return _export(path, output, to, fmt, options, r)
    return _export(path, output, to, fmt, options, None)


def export_path(path: str | Path | None, output: str | Path | None = None, to: str | None = None, *,
                fmt: str | None = None, options: ExportOptions | None = None,
                redact: RedactOptions | None = None) -> ExportResult | IndexResult:
    """What ``ctxtool export`` writes for ``path``: a directory, or None (the default session
    stores), a page per session and ``index.html`` in the directory ``output``
    (:func:`export_index`); one transcript with a directory output (``DIR/`` or an existing
    directory), its pages as files (:func:`export_pages`); else one document (:func:`export_file`)."""
    out = None if output is None else str(output)
    if path is None or os.path.isdir(path):
        if out and not out.endswith("/") and not os.path.isdir(out) and os.path.splitext(out)[1]:
            raise CtxtoolError("exporting many sessions writes a directory of pages and index.html, not one file: "
                               f"give -o DIR/ (e.g. -o {os.path.splitext(out)[0]}/)", path=out, kind=Failure.USAGE)
        if redact is not None:
            raise CtxtoolError("--redact exports one transcript at a time: redact a directory with `ctxtool redact DIR -o OUT` "
                               "first, then export OUT", kind=Failure.USAGE)
        if to not in (None, "html"):
            raise CtxtoolError(f"--to {to}: many sessions export as HTML pages with an index", kind=Failure.USAGE)
        if not out or out == "-":
            raise CtxtoolError("exporting many sessions writes a directory of pages: give -o DIR", kind=Failure.USAGE)
        return export_index([str(path)] if path else None, out, fmt=fmt, options=options)
    if out and out != "-" and (out.endswith("/") or os.path.isdir(out)):
        if to not in (None, "html"):
            raise CtxtoolError(f"--to {to}: a directory output holds HTML pages", kind=Failure.USAGE)
        return export_pages(path, out, fmt=fmt, options=options, redact=redact)
    return export_file(path, output, to, fmt=fmt, options=options, redact=redact)


def _export(path: str | Path, output: str | Path | None, to: str | None, fmt: str | None,
            options: ExportOptions | None, redactor: Redactor | None) -> ExportResult:
    out = None if output is None or str(output) == "-" else str(output)
    implied = renderer_for_output(out)
    name = to or implied or "markdown"
    _check_suffix(out, RENDERERS.get(name).name, implied)
    opts = options or ExportOptions()
    renderer = RENDERERS.get(name)(opts)
    fileio.check_input(path)
    refuse_overwrite(str(path), out)  # a link named .md may lead to the input
    title = opts.title or ("stdin" if str(path) == "-" else os.path.basename(str(path)))
    tally = _Tally()
    written = 0
    read = _read(path, fmt, redactor)
    first = next(read, None)  # an input that is no transcript fails here, before a document's head is on stdout
    if first is not None:
        read = itertools.chain([first], read)
    with outputs.atomic_output(out) as fh:
        for piece in renderer.document(title, tally.count(view(t) for t in read)):
            data = piece.encode("utf-8", "replace")
            fh.write(data)
            written += len(data)
    return ExportResult(str(path), out, renderer.name, tally.transcripts, tally.messages, tally.compactions, written)
