"""``ctxtool usage``: tokens and cost of the user's own sessions, by day, month, session,
project or model (the library: :mod:`ctxtool.usage`)."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from . import common
from .common import err_line, fmt_int, stderr_console, stdout_console
from .render import JsonlOpt, emit

if TYPE_CHECKING:
    from ..usage import UsageReport

PROGRESS_FILES = 20  # a bar from this many session files, on a terminal


class By(StrEnum):
    day = "day"
    month = "month"
    session = "session"
    project = "project"
    model = "model"
    agent = "agent"


def usage(
    paths: Annotated[
        list[str] | None,
        typer.Argument(help="Session files or directories (searched recursively for *.jsonl). Default: the session "
                       "stores of Claude Code (~/.claude/projects, $CLAUDE_CONFIG_DIR, comma-separated), Codex "
                       "(~/.codex/sessions and archived_sessions, $CODEX_HOME), opencode (~/.local/share/opencode/opencode.db, "
                       "$XDG_DATA_HOME) and pi (~/.pi/agent/sessions, $PI_CODING_AGENT_DIR).",
                       show_default=False),
    ] = None,
    by: Annotated[By, typer.Option("--by", "-b", help="One row per day, month, session, project, model or agent (the main agent and each subagent).")] = By.day,
    since: Annotated[str | None, typer.Option("--since", help="First day counted: YYYY-MM-DD, today, yesterday or Nd (the last N days).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Last day counted (included), same forms as --since.")] = None,
    timezone: Annotated[str | None, typer.Option("--timezone", "-z", help="IANA time zone of the days (e.g. UTC, Europe/Berlin). Default: local.")] = None,
    jobs: common.JobsOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
) -> None:
    """Tokens (input, output, cache write, cache read) and cost in USD of agent sessions, each API
    call counted once across copied and resumed sessions. Prices: `ctxtool models`, overridable
    by the user's models file."""
    from ..usage import usage_report

    cb, stop = _progress()
    try:
        report = usage_report(paths, by=by.value, since=since, until=until, timezone=timezone, progress=cb, jobs=jobs)
    finally:
        stop()
    for s in report.skipped:
        err_line(f"ctxtool: warning: skipped {s.error}" if s.path in s.error else f"ctxtool: warning: skipped {s.path}: {s.error}")
    if as_json or as_jsonl:
        emit("usage", report.head_json(), items=report.rows_json(), key="rows", tail=report.tail_json(), jsonl=as_jsonl)
        return
    _table(report)


def _progress() -> tuple[Any, Any]:
    """A bar on stderr while scanning a large store (a terminal only)."""
    if not sys.stderr.isatty():
        return None, lambda: None
    state: dict[str, Any] = {}

    def cb(done: int, total: int, path: str) -> None:
        if total < PROGRESS_FILES:
            return
        if "bar" not in state:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            bar = Progress(TextColumn("scanning sessions"), BarColumn(), MofNCompleteColumn(),
                           console=stderr_console(), transient=True)
            state["task"] = bar.add_task("usage", total=total)
            bar.start()
            state["bar"] = bar
        state["bar"].update(state["task"], completed=done)

    def stop() -> None:
        if "bar" in state:
            state["bar"].stop()

    return cb, stop


def _count(n: int, what: str) -> str:
    return f"{fmt_int(n)} {what}{'' if n == 1 else 's'}"


def _usd(x: float, unpriced: int) -> str:
    return f"${x:,.2f}" + ("*" if unpriced else "")


def _table(report: UsageReport) -> None:
    from ..usage import GROUPINGS
    from .table import Table

    if not report.files:
        where = ", ".join(s.path for s in report.stores) or "no session store found (give a path)"
        err_line(f"ctxtool: no session files ({where})")
        return
    title = f"usage by {report.by} ({report.timezone}"
    if report.since or report.until:
        title += f", {report.since or '…'} to {report.until or '…'}"
    title += ")"
    t = Table(title=title, title_justify="left", show_footer=bool(report.rows))
    tot = report.total
    first = GROUPINGS[report.by].title
    t.add_column(first, footer="total", overflow="fold", min_width=10)
    if report.by != "model":
        widest = max((len(m) for r in report.rows for m in r.models), default=6)
        t.add_column("models", overflow="fold", min_width=min(widest, 17))
    for name, val in (("input", tot.tokens.input), ("output", tot.tokens.output),
                      ("cache write", tot.tokens.cache_write), ("cache read", tot.tokens.cache_read),
                      ("total", tot.tokens.total), ("calls", tot.messages)):
        t.add_column(name, justify="right", footer=fmt_int(val))
    t.add_column("cost", justify="right", footer=_usd(tot.cost_usd, tot.unpriced_messages))
    for r in report.rows:
        cells = [r.key]
        if report.by != "model":
            cells.append(", ".join(sorted(r.models)))
        cells += [fmt_int(r.tokens.input), fmt_int(r.tokens.output), fmt_int(r.tokens.cache_write),
                  fmt_int(r.tokens.cache_read), fmt_int(r.tokens.total), fmt_int(r.messages),
                  _usd(r.cost_usd, r.unpriced_messages)]
        t.add_row(*cells)
    con = stdout_console()
    con.print(t)
    notes = [_count(report.files, "file")]
    if report.duplicates:
        notes.append(f"{_count(report.duplicates, 'repeated call')} (copies, resumed sessions) counted once")
    if report.outside:
        notes.append(f"{_count(report.outside, 'call')} outside the dates")
    if report.skipped:
        notes.append(f"{_count(len(report.skipped), 'file')} skipped (see the warnings)")
    con.print("; ".join(notes))
    if report.unpriced_models:
        con.print(f"* not priced (unknown to the registry, see `ctxtool models`): {', '.join(report.unpriced_models)}")


def register(app: typer.Typer) -> None:
    app.command("usage")(usage)
