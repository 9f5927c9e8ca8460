"""``ctxtool archive``: old tool results archived (the Go agent's tool-result archiving)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from ..errors import CtxtoolError, Failure
from ..history import archive as ar
from ..history.archive import STRATEGIES as ARCHIVE_STRATEGIES
from ..io.events import EventLog
from . import common
from .common import json_needs_output, warn_skipped
from .console import err_line, out_line
from .render import JsonlOpt, emit

# archive --strategy: the archiver's strategies (ctxtool.history.archive.STRATEGIES)
SummaryStrategy = StrEnum("SummaryStrategy", {s: s for s in ARCHIVE_STRATEGIES})  # type: ignore[misc]


# -- archive ---------------------------------------------------------------------------------


def archive_cmd(
    path: common.OnePath,
    output: common.OutOpt = None,
    cutoff: Annotated[
        int | None, typer.Option("--tool-call-cutoff", "-n", min=0, help="Visible tool results to keep (default 10, compaction.tool_call_cutoff; the Go agent's ToolCallCutoff).")
    ] = None,
    strategy: Annotated[
        SummaryStrategy | None,
        typer.Option("--tool-summary", help="Summary of archived results: llm (the configured summarizer; heuristic when "
                     "none), heuristic (local digest, 800 chars) or off. Default: compaction.tool_summary_strategy."),
    ] = None,
    fmt: common.FormatOpt = None,
    to: common.ToOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would be archived; write nothing.")] = False,
    events: Annotated[str | None, common.path_option("--events", help="Write the audit trail to FILE: one JSON line per archived result and one per summary.")] = None,
    on_error: common.OnErrorOpt = common.OnError.fail,
    join: common.JoinOpt = False,
) -> None:
    """Archive old tool results (the Go agent's tool-result archiving): while more than --tool-call-cutoff tool results are visible,
    the oldest is hidden from the agent (kept in the file, kind tool_result_archived) and one
    agent-only tool_summary message describing them is appended. Other messages are written
    back byte for byte."""
    # lazy: start-up (`ctxtool archive` would load ctxtool.config, ctxtool.compaction)
    from ..compaction.settings import summarizer_from_config
    from ..config import Config

    cfg = Config({
        "compaction.tool_call_cutoff": cutoff,
        "compaction.tool_summary_strategy": strategy.value if strategy else None,
    })
    n = int(cfg["compaction.tool_call_cutoff"])
    strat = str(cfg["compaction.tool_summary_strategy"])
    if strat not in ar.STRATEGIES:
        raise CtxtoolError(f"compaction.tool_summary_strategy: unknown strategy {strat!r}", kind=Failure.USAGE)
    json_needs_output(as_json or as_jsonl, dry_run, output, events)
    summarize = ar.summarize_with(summarizer_from_config(cfg, cache=False)) if strat == "llm" else None
    log = EventLog(events)
    with common.sharding(None, [path], None if dry_run else output, None, join) as sh:
        report = ar.archive_file(
            path, output, cutoff=n, strategy=strat, summarize=summarize, fmt=fmt, to=to, on_error=on_error.value,
            events=log, dry_run=dry_run, engine=sh,
        )
    log.flush()
    warn_skipped(report.skipped)
    for r in report.results:
        if r.fallback and summarize is not None:
            err_line(f"ctxtool: {r.transcript}: llm summary failed, used the heuristic one ({r.fallback})")
    if as_json or as_jsonl:
        d = report.to_json()
        items = d.pop("results")
        totals = {k: d.pop(k) for k in ("transcripts", "changed", "archived_results", "tokens_before", "tokens_after")}
        head = {"path": d.pop("path"), "output": None if dry_run else d.pop("output"), "dry_run": dry_run,
                "cutoff": n, "strategy": strat}
        emit("archive", head, items=items, tail={"totals": totals, "skipped": d.pop("skipped")}, jsonl=as_jsonl)
        return
    write = err_line if common.report_to_stderr(output, events, dry_run) else out_line
    for r in report.results:
        if len(report.results) > 20 and not r.changed:
            continue
        if r.changed:
            tools = ", ".join(sorted({t for a in r.archived for t in a.tools}))
            write(
                f"{r.transcript}: archived {r.archived_count:,} of {r.visible_before:,} tool results "
                f"({len(r.archived):,} message{'s' if len(r.archived) != 1 else ''}: {tools}); {r.visible_after:,} stay visible; summary "
                f"{len(r.summary or ''):,} chars ({r.strategy_used}); agent-visible tokens "
                f"{r.tokens_before:,} -> {r.tokens_after:,}"
            )
        else:
            why = "strategy off" if r.strategy == "off" else f"{r.visible_before:,} visible tool results <= cutoff {n}"
            write(f"{r.transcript}: nothing archived ({why})")
    if len(report.results) > 1:
        j = report.to_json()
        write(
            f"{j['transcripts']:,} transcripts, {j['changed']:,} changed, {j['archived_results']:,} tool results "
            f"archived; agent-visible tokens {j['tokens_before']:,} -> {j['tokens_after']:,}"
        )
    if not dry_run and not (output is None or output == "-"):
        reused = report.written - len(report.results)
        err_line(f"wrote {report.written:,} transcript(s) to {output}"
                 + (f" ({reused:,} of them by an earlier run, reused: its report is not repeated)" if reused > 0 else ""))


# -- replay ----------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    app.command("archive")(archive_cmd)
