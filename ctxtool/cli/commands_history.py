"""window and repair: rewrite history as a sliding window or bookends (AgentCore.Context) and
normalize it (adk-code)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from . import common, console
from .common import fmt_int, json_needs_output, short_label, stdout_console, table_rows, warn_skipped
from .console import err_line
from .render import JsonlOpt, emit


def _strategies() -> tuple[str, ...]:
    # lazy: start-up (loaded only when this runs: ..history.window)
    from ..history.window import STRATEGIES

    return STRATEGIES


DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Report what would change; write nothing.")]


def _to_stdout(output: str | None, dry_run: bool) -> bool:
    return not dry_run and (output is None or output == "-")


# -- window -----------------------------------------------------------------------------


@common.run_flags
def window(
    path: common.OnePath,
    output: common.OutOpt = None,
    strategy: Annotated[str | None, typer.Option("--strategy", "-s", click_type=common.Choice(_strategies), help="sliding: keep the newest messages that fit; bookends: keep the first and the last, drop the middle (default sliding).")] = None,
    max_messages: Annotated[int | None, typer.Option("--max-messages", min=1, help="Messages to keep, system prompt excluded (default 100).")] = None,
    max_chars: Annotated[int | None, typer.Option("--max-chars", min=1, help="Characters to keep (default 500,000).")] = None,
    keep_first_user: Annotated[bool | None, typer.Option("--keep-first-user/--no-keep-first-user", help="Always keep the first user message (default on).")] = None,
    fmt: common.FormatOpt = None,
    to: common.ToOpt = None,
    dry_run: DryRunOpt = False,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    run: common.RunFlags = common.DEFAULT_RUN,
) -> None:
    """Keep a window of the history (AgentCore.Context's truncate) and write it to -o. A tool call and
    its result are dropped or kept together; system prompts are always kept; kept messages
    are copied byte for byte. Reports the dropped counts (on stderr when the transcript
    goes to stdout)."""
    # lazy: start-up (`ctxtool repair` would load ctxtool.config, ctxtool.formats.base)
    from ..config import Config
    from ..history.window import window_file, window_settings

    cfg = Config({"window.strategy": strategy, "window.max_messages": max_messages,
                  "window.max_chars": max_chars, "window.keep_first_user": keep_first_user})
    kw = window_settings(cfg)
    machine = as_json or as_jsonl
    json_needs_output(machine, dry_run, output)
    with run.sharding(path, None if dry_run else output) as sh:
        rep = window_file(path, None if dry_run else (output or "-"), **kw, fmt=fmt, to=to, **run.keywords(sh))
    warn_skipped(rep.skipped)
    reports = rep.transcripts
    if _to_stdout(output, dry_run):
        dropped = sum(r.dropped for r in reports)
        err_line(f"ctxtool: window ({kw['strategy']}) dropped {dropped:,} message(s) from {len(reports):,} transcript(s)")
        return
    if machine:
        totals = {
            "transcripts": len(reports),
            "messages_before": sum(r.messages_before for r in reports),
            "messages_after": sum(r.messages_after for r in reports),
            "dropped": sum(r.dropped for r in reports),
            "chars_before": sum(r.chars_before for r in reports),
            "chars_after": sum(r.chars_after for r in reports),
        }
        emit("window", {"settings": kw, "output": None if dry_run else output, "dry_run": dry_run},
             items=(r.to_json() for r in reports), tail={"totals": totals}, jsonl=as_jsonl)
        return
    # lazy: start-up (`ctxtool --help` would load ctxtool.cli.table)
    from .table import SIMPLE_HEAD, Table

    con = stdout_console()
    t = Table(
        box=SIMPLE_HEAD,
        pad_edge=False,
        title=f"window {kw['strategy']} · max {kw['max_messages']:,} messages, {kw['max_chars']:,} chars"
        f" · keep first user {'on' if kw['keep_first_user'] else 'off'}",
        title_justify="left",
    )
    for col in ("transcript", "msgs", "kept", "dropped", "calls dropped", "chars", "chars kept", "note"):
        # one line a transcript: the label gives way (shortened with …), not the figures or the note
        t.add_column(col, justify="left" if col in ("transcript", "note") else "right",
                     no_wrap=col != "transcript", min_width=None if col == "transcript" else len(col),
                     overflow="ellipsis")
    shown, t.caption = table_rows(reports, lambda r: (r.dropped, r.chars_before - r.chars_after), "with the most dropped")
    for r in shown:
        note = ", ".join(x for x in ("first user kept" if r.kept_first_user else "", "over limit" if r.over_limit else "") if x)
        t.add_row(short_label(r.transcript), fmt_int(r.messages_before), fmt_int(r.messages_after), fmt_int(r.dropped),
                  fmt_int(r.dropped_tool_calls), fmt_int(r.chars_before), fmt_int(r.chars_after), note)
    con.print(t)
    where = "nothing written (dry run)" if dry_run else f"wrote {output}"
    con.print(f"dropped {sum(r.dropped for r in reports):,} message(s) · {where}", highlight=False)


# -- repair -----------------------------------------------------------------------------


def repair(
    path: common.OnePath,
    output: common.OutOpt = None,
    keep_trailing_calls: Annotated[bool, typer.Option("--abort-trailing-calls", help="Answer a trailing assistant's unanswered calls with aborted results instead of stripping them.")] = False,
    fmt: common.FormatOpt = None,
    to: common.ToOpt = None,
    dry_run: DryRunOpt = False,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    limit: Annotated[int, typer.Option("--limit", min=0, help="How many changes to list (all with --json).")] = 50,
    on_error: common.OnErrorOpt = common.OnError.fail,
    jobs: common.JobsOpt = None,
    messages_column: common.MessagesColumnOpt = None,
    join: common.JoinOpt = False,
) -> None:
    """Normalize history (adk-code's history normalization) and write it to -o: add a result marked aborted for every
    call that has none, drop results without a call, remove duplicate ids, strip a trailing
    assistant's unanswered tool calls. Reports each change. `repair` then `validate` is
    always clean; unchanged messages are copied byte for byte."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base)
    from ..history.repair import repair_file

    machine = as_json or as_jsonl
    json_needs_output(machine, dry_run, output)
    with common.sharding(None, [path], None if dry_run else output, None, join, jobs) as sh:
        rep = repair_file(path, None if dry_run else (output or "-"), strip_trailing=not keep_trailing_calls, fmt=fmt,
                          to=to, on_error=on_error.value, jobs=jobs, messages_column=messages_column, engine=sh)
    warn_skipped(rep.skipped)
    reports = rep.transcripts
    changes = [(r, c) for r in reports for c in r.changes]
    if _to_stdout(output, dry_run):
        err_line(f"ctxtool: repair made {len(changes):,} change(s) in {sum(1 for r in reports if r.changed):,} of {len(reports):,} transcript(s)")
        return
    counts: dict[str, int] = {}
    for r in reports:
        for k, v in r.counts().items():
            counts[k] = counts.get(k, 0) + v
    if machine:
        totals = {"transcripts": len(reports), "changed": sum(1 for r in reports if r.changed), "changes": len(changes),
                  "counts": counts}
        emit("repair", {"output": None if dry_run else output, "dry_run": dry_run},
             items=(r.to_json() for r in reports), tail={"totals": totals}, jsonl=as_jsonl)
        return
    out = console.PrintableStream(sys.stdout)
    multi = len(reports) > 1
    for r, c in changes[:limit]:
        out.write((f"{short_label(r.transcript)}: " if multi else "") + str(c) + "\n")
    if len(changes) > limit:
        out.write(f"... and {len(changes) - limit:,} more (use --json for all)\n")
    summary = ", ".join(f"{k} {v:,}" for k, v in counts.items()) or "no changes"
    where = "nothing written (dry run)" if dry_run else f"wrote {output}"
    out.write(f"{len(reports):,} transcript(s), {sum(1 for r in reports if r.changed):,} changed: {summary} · {where}\n")


def register(app: typer.Typer) -> None:
    app.command("window")(window)
    app.command("repair")(repair)
