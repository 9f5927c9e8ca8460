"""export: a transcript as readable markdown or one self-contained HTML file."""

from __future__ import annotations

from typing import Annotated

import typer

from .commands_redact import RedactFlag, SecretsFromOpt, options
from .common import FormatOpt, OnePath, OutOpt, err_line

ToExport = Annotated[
    str | None,
    typer.Option("--to", help="markdown or html (default: from the -o suffix, .html/.htm or .md, else markdown)."),
]
CollapseOpt = Annotated[
    int | None,
    typer.Option("--collapse", min=0, help="Tool outputs, arguments and injected text longer than this many characters (default 2,000) are folded (HTML) or clipped with a note (markdown); 0: never."),
]
TitleOpt = Annotated[str | None, typer.Option("--title", help="Document title (default: the input's file name).")]


def export(path: OnePath, to: ToExport = None, output: OutOpt = None, fmt: FormatOpt = None,
           collapse: CollapseOpt = None, title: TitleOpt = None, redact: RedactFlag = False,
           secrets_from: SecretsFromOpt = None) -> None:
    """A readable transcript: user and assistant turns, tool calls with their arguments, tool
    outputs (long ones folded), thinking folded, images (HTML: embedded when the transcript holds
    them), compaction boundaries and summaries, and injected content (reminders, command output,
    caveats, hook output, meta lines) marked apart from the user's words."""
    from ..export import DEFAULT_COLLAPSE, ExportOptions, export_file

    opts = ExportOptions(collapse=DEFAULT_COLLAPSE if collapse is None else collapse, title=title)
    res = export_file(path, output, to, fmt=fmt, options=opts,
                      redact=options(secrets_from) if redact or secrets_from else None)
    if res.output:
        err_line(f"wrote {res.to} export of {res.messages:,} message(s) in {res.transcripts:,} transcript(s) "
                 f"to {res.output} ({res.bytes:,} bytes)")


def register(app: typer.Typer) -> None:
    app.command("export")(export)
