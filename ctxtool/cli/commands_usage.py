"""``ctxtool usage``: tokens and cost of the user's own sessions, by day, month, session,
project or model (the library: :mod:`ctxtool.usage`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..text import lazyre
from . import common
from .common import fmt_int, stdout_console
from .console import err_line, progress_bar
from .render import JsonlOpt, emit

if TYPE_CHECKING:
    from datetime import datetime, tzinfo

    from ..usage import UsageReport
    from ..usage.report import UsageRow

PROGRESS_FILES = 20  # a bar from this many session files, on a terminal


def usage(
    paths: Annotated[
        list[str] | None,
        typer.Argument(help="Session files or directories (searched recursively for *.jsonl). Default: the session "
                       "stores of Claude Code (~/.claude/projects, $CLAUDE_CONFIG_DIR, comma-separated), Codex "
                       "(~/.codex/sessions and archived_sessions, $CODEX_HOME), opencode (~/.local/share/opencode/opencode.db, "
                       "$XDG_DATA_HOME) and pi (~/.pi/agent/sessions, $PI_CODING_AGENT_DIR).",
                       show_default=False),
    ] = None,
    by: Annotated[str, common.registry_option("--by", "-b", registry="ctxtool.usage.report:GROUPINGS", help="One row per day, week (from Monday), month, 5-hour block (as "
                                   "Claude plans meter usage, like ccusage's blocks), session, project, model or agent (the main agent and each subagent).")] = "day",
    breakdown: Annotated[bool, typer.Option("--breakdown", help="Each row's calls per model too (JSON: each row's "
                                            "\"breakdown\").")] = False,
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
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base)
    from ..usage import usage_report

    cb, stop = _progress()
    try:
        report = usage_report(paths, by=by, since=since, until=until, timezone=timezone, progress=cb, jobs=jobs,
                              breakdown=breakdown)
    finally:
        stop()
    for s in report.skipped:
        err_line(f"ctxtool: warning: skipped {s.error}" if s.path in s.error else f"ctxtool: warning: skipped {s.path}: {s.error}")
    common.warn_unknown_models(report.unpriced_models)
    if as_json or as_jsonl:
        emit("usage", report.head_json(), items=report.rows_json(), key="rows", tail=report.tail_json(), jsonl=as_jsonl)
        return
    _table(report)


def _progress() -> tuple[Any, Any]:
    """A bar on stderr while scanning a large store (a terminal only)."""
    update, stop = progress_bar("scanning sessions", "usage", least=PROGRESS_FILES)
    if update is None:
        return None, stop

    def cb(done: int, total: int, path: str) -> None:
        update(done, total)

    return cb, stop


def _count(n: int, what: str) -> str:
    return f"{fmt_int(n)} {what}{'' if n == 1 else 's'}"


def _usd(row: UsageRow) -> str:
    """The cost: unknown when no call has a price, at least the priced part when some have none."""
    cost = row.cost
    if cost is None:
        return "unknown"
    return ("≥" if row.unpriced_messages else "") + f"${cost:,.2f}"


_SNAPSHOT = lazyre.compile(r"-(20\d{6}|latest)$")


def short_model(name: str) -> str:
    """A model name as a narrow table shows it: no provider prefix, no ``claude-``, no dated
    snapshot (``claude-sonnet-4-5-20250929`` -> ``sonnet-4-5``)."""
    n = name.rsplit("/", 1)[-1]
    n = n.removeprefix("claude-")
    return _SNAPSHOT.sub("", n) or name


#: optional columns, dropped in this order (then models shortened) while the table is wider
#: than the screen; the key, input, output and cost always stay, their numbers never cut
DROP_ORDER = ("calls", "cache write", "cache read", "total", "models", "last", "project")


#: the narrowest a column of names (models, projects) gets in a narrow table: longer ones fold
#: (a short model name such as ``gemini-2.5-flash`` fits whole; several models go one a line)
FOLD = 16


def _local(t: datetime | None, tz: tzinfo | None, short: bool = False) -> str:
    return t.astimezone(tz).strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M") if t is not None else "-"


def _project(row: UsageRow) -> str:
    names = sorted({p.rstrip("/").rsplit("/", 1)[-1] or p for p in row.projects})
    return ", ".join(names) or "-"


def _cells(report: UsageReport, row: UsageRow, short: bool, key: str | None = None) -> dict[str, str]:
    models = sorted({short_model(m) for m in row.models} if short else row.models)
    k = key if key is not None else row.key
    if report.by == "session" and short:
        k = k[:8]
    if report.by == "block" and row.ends is not None and report.now is not None and report.now < row.ends:
        left = int((row.ends - report.now).total_seconds() // 60)
        k += f" (active, {left // 60}h{left % 60:02d} left)"
    return {"key": k, "models": ("\n" if short else ", ").join(models), "project": _project(row), "last": _local(row.last, report.tz, short),
            "input": fmt_int(row.tokens.input), "output": fmt_int(row.tokens.output),
            "cache write": fmt_int(row.tokens.cache_creation), "cache read": fmt_int(row.tokens.cache_read),
            "total": fmt_int(row.tokens.total), "calls": fmt_int(row.messages), "cost": _usd(row)}


def _lines(report: UsageReport, short: bool) -> list[tuple[dict[str, str], bool]]:
    """Each row's cells, and its models' rows under it (--breakdown); True: a model's row."""
    out: list[tuple[dict[str, str], bool]] = []
    for r in report.rows:
        out.append((_cells(report, r, short), False))
        if r.by_model is not None:
            subs = sorted(r.by_model.values(), key=lambda x: (-(x.cost or 0.0), -x.tokens.total, x.key))
            for sub in subs:
                c = _cells(report, sub, True, "  └ " + (short_model(sub.key) if short else sub.key))
                c["models"] = c["project"] = c["last"] = ""
                out.append((c, True))
    return out


def _layout(report: UsageReport, width: int) -> tuple[list[str], bool]:
    """The columns that fit ``width`` and whether model names are shortened: all of them
    when they fit; else the optional ones dropped in :data:`DROP_ORDER`, names shortened."""
    cols = ["key"]
    if report.by != "model":
        cols.append("models")
    if report.by == "session":
        cols += ["project", "last"]
    cols += ["input", "output", "cache write", "cache read", "total", "calls", "cost"]
    tot = _total(report, False)

    def need(cs: list[str], short: bool) -> int:
        lines = [c for c, _ in _lines(report, short)] + [tot]
        widths = [max(len(c if c != "key" else _first(report)), *(_width(x[c]) for x in lines)) for c in cs]
        if short:  # names fold onto more lines
            widths = [min(w, FOLD) if c in ("models", "project") else w for c, w in zip(cs, widths, strict=True)]
        return sum(widths) + 3 * len(cs) + 1

    if need(cols, False) <= width:
        return cols, False
    for c in DROP_ORDER:
        if need(cols, True) <= width:
            break
        if c in cols:
            cols.remove(c)
    return cols, True


def _width(cell: str) -> int:
    """A cell's width: its longest line."""
    return max(len(ln) for ln in cell.split("\n"))


def _total(report: UsageReport, short: bool) -> dict[str, str]:
    """The footer's cells (numbers only)."""
    return {**_cells(report, report.total, short, "total"), "models": "", "project": "", "last": ""}


def _first(report: UsageReport) -> str:
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base)
    from ..usage.report import GROUPINGS

    return GROUPINGS.get(report.by).title


def _table(report: UsageReport) -> None:
    # lazy: start-up (`ctxtool --help` would load ctxtool.cli.table)
    from .table import Table

    if not report.files:
        where = ", ".join(s.path for s in report.stores) or "no session store found (give a path)"
        err_line(f"ctxtool: no session files ({where})")
        return
    con = stdout_console()
    cols, short = _layout(report, con.width)
    title = f"usage by {report.by} ({report.timezone}"
    if report.since or report.until:
        title += f", {report.since or '…'} to {report.until or '…'}"
    title += ")"
    lines = _lines(report, short)
    tot = _total(report, short)
    t = Table(title=title, title_justify="left", show_footer=bool(report.rows))
    for c in cols:
        widest = max((_width(x[c]) for x, _ in lines), default=0)
        if c == "key":
            t.add_column(_first(report), footer="total", overflow="fold", min_width=min(max(widest, 5), 16))
        elif c in ("models", "project"):
            t.add_column(c, overflow="fold", min_width=min(widest, FOLD))
        elif c == "last":
            t.add_column("last activity", no_wrap=True, min_width=widest)
        else:  # numbers: never cut, never wrapped
            t.add_column(c, justify="right", footer=tot[c], no_wrap=True, min_width=max(widest, len(tot[c])))
    for cells, _sub in lines:
        t.add_row(*(cells[c] for c in cols))
    con.print(t)
    notes = [_count(report.files, "file")]
    if report.duplicates:
        notes.append(f"{_count(report.duplicates, 'repeated call')} (copies, resumed sessions) counted once")
    if report.outside:
        notes.append(f"{_count(report.outside, 'call')} outside the dates")
    if report.skipped:
        notes.append(f"{_count(len(report.skipped), 'file')} skipped (see the warnings)")
    con.print("; ".join(notes))
    dropped = [c for c in ("cache write", "cache read", "total", "calls") if c not in cols]
    if dropped:
        con.print(f"narrow screen: no {', '.join(dropped)} (--json has them)")
    if report.unpriced_models:
        con.print(f"cost unknown for models not in the registry: {', '.join(report.unpriced_models)} "
                  "(≥: the priced calls only; see the warning)")


def register(app: typer.Typer) -> None:
    app.command("usage")(usage)
