"""Many sessions at once: one HTML page per session file and a searchable ``index.html`` listing
them (when, how many messages and compactions, the user's first words); :func:`export_index`
with no paths reads the default session stores. A file that cannot be read is listed with its
error and left out."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import formats
from ..errors import CtxtoolError, Failure
from ..io import outputs
from .base import RENDERERS, ExportOptions, plural
from .html import esc, head, tail
from .walk import ExportedTranscript, Turn, view

INDEX = "index.html"


@dataclass(slots=True)
class Page:
    """One session file's page and what the index says of it."""

    source: str
    page: str | None = None  # the page's name in the output directory (None: not written)
    format: str = ""
    transcripts: int = 0
    messages: int = 0
    compactions: int = 0
    first: str | None = None  # the first and last timestamps recorded
    last: str | None = None
    words: str = ""  # the user's first words
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "page": self.page, "format": self.format, "transcripts": self.transcripts,
                "messages": self.messages, "compactions": self.compactions, "first": self.first, "last": self.last,
                "words": self.words, "error": self.error}


@dataclass(slots=True)
class IndexResult:
    output: str
    pages: list[Page] = field(default_factory=list)

    @property
    def written(self) -> list[Page]:
        return [p for p in self.pages if p.page is not None]


def _noted(page: Page, views: Iterator[ExportedTranscript]) -> Iterator[ExportedTranscript]:
    """The views, noting on ``page`` what the index shows."""
    for v in views:
        page.transcripts += 1
        page.format = page.format or v.format
        page.messages += v.turns
        page.compactions += v.markers
        for item in v.items:
            if not isinstance(item, Turn):
                continue
            if item.timestamp:
                page.first = min(page.first or item.timestamp, item.timestamp)
                page.last = max(page.last or item.timestamp, item.timestamp)
            if not page.words and item.role == "user" and not item.injected:
                page.words = " ".join(" ".join(p.text for p in item.parts if p.kind == "text").split())[:200]
        yield v


def page_name(source: str, root: str | None) -> str:
    """A flat, readable file name for a session's page: its path under ``root``, with ``/``
    as ``--``."""
    rel = os.path.relpath(source, root) if root else os.path.basename(source)
    if rel.startswith(".."):
        rel = os.path.basename(source)
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in rel.replace(os.sep, "--"))
    return safe.lstrip(".-") + ".html"


def _inputs(paths: list[str] | None) -> list[tuple[str, str | None]]:
    """(file, the root its page name is made under): the files of each path given (a
    directory searched recursively), else of the default session stores."""
    # lazy: start-up (loaded only when this runs: ..formats.walk)
    from ..formats.walk import iter_paths

    if paths:
        out = []
        for p in paths:
            root = p if Path(p).is_dir() else None
            out += [(f, root) for f in iter_paths([p])]
        return out
    # lazy: start-up (loaded only when this runs: ..usage.stores)
    from ..usage.stores import default_stores, session_files

    stores = default_stores()
    used, files = session_files(None, stores)
    if not files:
        raise CtxtoolError("no session files in the default stores (give a file or directory): "
                           + (", ".join(s.path for s in stores) or "none found"), kind=Failure.NOT_FOUND)
    roots = [s.path for s in used]
    return [(f, next((r for r in roots if f.startswith(r.rstrip("/") + "/")), None)) for f in files]


def export_index(paths: list[str] | None, output: str | Path, *, fmt: str | None = None,
                 options: ExportOptions | None = None,
                 progress: Callable[[int, int, str], None] | None = None) -> IndexResult:
    """Write one HTML page per session file under ``output`` (a directory, made if missing)
    and ``index.html`` linking them. ``paths``: files or directories; None: the default
    session stores (Claude Code, Codex, pi)."""
    out = Path(output)
    if out.exists() and not out.is_dir():
        raise CtxtoolError("exporting many sessions writes a directory: give -o DIR", path=str(out), kind=Failure.USAGE)
    files = _inputs(paths)
    outputs.output_dir(out)
    opts = options or ExportOptions()
    result = IndexResult(str(out))
    names: set[str] = set()
    for n, (src, root) in enumerate(files):
        if progress is not None:
            progress(n, len(files), src)
        page = Page(src)
        result.pages.append(page)
        name = page_name(src, root)
        while name in names or name == INDEX:
            name = "x-" + name
        names.add(name)
        renderer = RENDERERS.get("html")(opts)
        try:
            with outputs.atomic_output(out / name) as fh:
                views = _noted(page, (view(t) for t in formats.read(src, fmt)))
                for piece in renderer.document(os.path.basename(src), views):
                    fh.write(piece.encode("utf-8", "replace"))
        except CtxtoolError as e:
            if e.kind == Failure.IO:
                raise
            page.error = str(e)
            continue
        page.page = name
    with outputs.atomic_output(out / INDEX) as fh:
        for piece in index_html(result, "sessions" if paths is None else ", ".join(paths)):
            fh.write(piece.encode("utf-8", "replace"))
    return result


def index_html(r: IndexResult, title: str) -> Iterator[str]:
    yield head(f"{len(r.written):,} sessions · {title}", contents=False)
    yield ("<table class=\"index\"><thead><tr><th>session</th><th>format</th><th>messages</th><th>compactions</th>"
           "<th>first</th><th>last</th><th>the user's first words</th></tr></thead><tbody>\n")
    for p in sorted(r.written, key=lambda p: p.last or "", reverse=True):
        yield (f"<tr class=\"item\"><td><a href=\"{esc(p.page or '')}\">{esc(os.path.basename(p.source))}</a><br>"
               f"<span class=\"meta\">{esc(os.path.dirname(p.source))}</span></td><td>{esc(p.format)}</td>"
               f"<td class=\"n\">{p.messages:,}</td><td class=\"n\">{p.compactions:,}</td>"
               f"<td>{esc(p.first or '-')}</td><td>{esc(p.last or '-')}</td><td class=\"w\">{esc(p.words)}</td></tr>\n")
    yield "</tbody></table>\n"
    bad = [p for p in r.pages if p.error]
    if bad:
        yield f"<h2>{plural(len(bad), 'file')} not exported</h2>\n<ul>\n"
        for p in bad:
            yield f"<li class=\"item\">{esc(p.source)}: {esc(p.error or '')}</li>\n"
        yield "</ul>\n"
    yield tail("")
