"""export: a transcript as readable markdown or one self-contained HTML file."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from .commands_redact import RedactFlag, SecretsFromOpt, options
from .common import FormatOpt, OutOpt, registry_option
from .console import err_line

ToExport = Annotated[
    str | None,
    registry_option("--to", registry="ctxtool.export:RENDERERS",
                    help="The document's format (default: from the -o suffix, .html/.htm or .md, else markdown)."),
]
CollapseOpt = Annotated[
    int | None,
    typer.Option("--collapse", min=0, help="Tool outputs, arguments and injected text longer than this many characters (default 2,000) are folded (HTML) or clipped with a note (markdown); 0: never."),
]
TitleOpt = Annotated[str | None, typer.Option("--title", help="Document title (default: the input's file name).")]
PageOpt = Annotated[
    int | None,
    typer.Option("--page-size", min=0, help="HTML: messages per page (default 250; the page's pager shows one at a "
                 "time; with -o DIR/ each page is its own file); 0: one page."),
]
ExportPath = Annotated[
    str | None,
    typer.Argument(help="Transcript file (gzip/zstd too), FIFO, <(process substitution) or - for stdin; a directory "
                   "(or nothing: the default session stores of Claude Code, Codex and pi) writes one HTML page per "
                   "session and an index.html into the directory -o DIR/ names. One file with -o DIR/: its pages as "
                   "files (page-001.html ...) linked from each other and from the contents, and index.html.",
                   show_default=False),
]


def export(path: ExportPath = None, to: ToExport = None, output: OutOpt = None, fmt: FormatOpt = None,
           collapse: CollapseOpt = None, title: TitleOpt = None, page_size: PageOpt = None, redact: RedactFlag = False,
           secrets_from: SecretsFromOpt = None) -> None:
    """A readable transcript: user and assistant turns, tool calls with their arguments, tool
    outputs (long ones folded), thinking folded, images (HTML: embedded when the transcript holds
    them), compaction boundaries and summaries, and injected content (reminders, command output,
    caveats, hook output, meta lines) marked apart from the user's words. HTML adds contents linking
    each user turn, compaction and record, the assistant's Markdown rendered, pages, search and
    expand/collapse all (one inline script its Content-Security-Policy allows; nothing fetched)."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.export)
    from ..export import PAGES_INDEX, export_path
    from ..export.base import DEFAULT_COLLAPSE, DEFAULT_PAGE_SIZE, ExportOptions
    from ..export.index import INDEX, IndexResult

    opts = ExportOptions(collapse=DEFAULT_COLLAPSE if collapse is None else collapse, title=title,
                         page_size=DEFAULT_PAGE_SIZE if page_size is None else page_size)
    secrets = options(secrets_from) if redact or secrets_from else None
    res = export_path(path, output, to, fmt=fmt, options=opts, redact=secrets)
    if isinstance(res, IndexResult):
        for p in res.pages:
            if p.error:
                err_line(f"ctxtool: warning: skipped {p.error}" if p.source in p.error else
                         f"ctxtool: warning: skipped {p.source}: {p.error}")
        err_line(f"wrote {len(res.written):,} session page(s) and {os.path.join(str(output), INDEX)}")
    elif res.pages:
        err_line(f"wrote {res.messages:,} message(s) in {res.transcripts:,} transcript(s) as HTML pages and "
                 f"{os.path.join(str(output), PAGES_INDEX)} ({res.bytes:,} bytes)")
    elif res.output:
        err_line(f"wrote {res.to} export of {res.messages:,} message(s) in {res.transcripts:,} transcript(s) "
                 f"to {res.output} ({res.bytes:,} bytes)")


def register(app: typer.Typer) -> None:
    app.command("export")(export)
