"""archive, replay, instructions: tool-result archiving, a turn-by-turn replay of context
growth, and the AGENTS.md instruction hierarchy."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from ..archive import STRATEGIES as ARCHIVE_STRATEGIES
from ..errors import CtxtoolError, ExitCode
from . import common
from .common import (
    err_line,
    fmt_int,
    json_needs_output,
    out_line,
    resolve_model,
    stdout_console,
    warn_skipped,
)
from .render import JsonlOpt, emit

# archive --strategy: the archiver's strategies (ctxtool.archive.STRATEGIES)
SummaryStrategy = StrEnum("SummaryStrategy", {s: s for s in ARCHIVE_STRATEGIES})  # type: ignore[misc]


# -- archive ---------------------------------------------------------------------------------


def _archive_summarizer(cfg: Any) -> Any:
    """``summarize(prompt) -> str`` from the configured summarizer, or None for the heuristic."""
    kind = str(cfg["summarizer.kind"] or "heuristic")
    if kind == "heuristic":
        return None
    from ..summarizers import SummaryRequest, get_summarizer

    s = get_summarizer(kind, **_summarizer_options(cfg))

    def summarize(prompt: str) -> str:
        req = SummaryRequest(
            system="You summarize archived tool output for a coding agent. Be brief and factual.",
            prompt=prompt,
            max_tokens=400,
            style="tool_summary",
        )
        return str(s.summarize(req))

    return summarize


def _summarizer_options(cfg: Any) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for key in ("model", "base_url", "command", "timeout", "retries", "context_window"):
        v = cfg[f"summarizer.{key}"]
        if v not in ("", 0, None):
            opts[key] = v
    return opts


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
    events: Annotated[str | None, typer.Option("--events", help="Write the audit trail to FILE: one JSON line per archived result and one per summary.")] = None,
    on_error: common.OnErrorOpt = common.OnError.fail,
    join: common.JoinOpt = False,
) -> None:
    """Archive old tool results (the Go agent's tool-result archiving): while more than --tool-call-cutoff tool results are visible,
    the oldest is hidden from the agent (kept in the file, kind tool_result_archived) and one
    agent-only tool_summary message describing them is appended. Other messages are written
    back byte for byte."""
    from .. import archive as ar
    from ..config import Config
    from ..events import EventLog

    cfg = Config({
        "compaction.tool_call_cutoff": cutoff,
        "compaction.tool_summary_strategy": strategy.value if strategy else None,
    })
    n = int(cfg["compaction.tool_call_cutoff"])
    strat = str(cfg["compaction.tool_summary_strategy"])
    if strat not in ar.STRATEGIES:
        raise CtxtoolError(f"compaction.tool_summary_strategy: unknown strategy {strat!r}", code=ExitCode.USAGE)
    to_stdout = output is None or output == "-"
    json_needs_output(as_json or as_jsonl, dry_run, output)
    summarize = _archive_summarizer(cfg) if strat == "llm" else None
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
    write = out_line if not to_stdout or dry_run else err_line
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
    if not dry_run and not to_stdout:
        err_line(f"wrote {len(report.results):,} transcript(s) to {output}")


# -- replay ----------------------------------------------------------------------------------


def replay_cmd(
    paths: common.Paths,
    fmt: common.FormatOpt = None,
    model: common.ModelOpt = None,
    context_window: common.WindowOpt = None,
    tokenizer: common.TokenizerOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    plot: Annotated[
        str | None, typer.Option("--plot", metavar="FILE", help="Write the chart to FILE.png, FILE.svg or FILE.html (no dependency).")
    ] = None,
    index: Annotated[int | None, typer.Option("--index", min=0, help="Only the N-th transcript of a dataset file (from 0).")] = None,
    table: Annotated[bool, typer.Option("--table/--no-table", help="Show the per-turn table.")] = True,
    chart: Annotated[bool, typer.Option("--chart/--no-chart", help="Show the terminal chart.")] = True,
    height: Annotated[int, typer.Option("--height", min=3, max=60, help="Terminal chart height in rows.")] = 12,
) -> None:
    """Replay a transcript turn by turn as its agent did (adk-code's token tracker): input and
    output tokens per API call, running context, percent of the window, average turn size,
    turns left, where each trigger policy would have compacted and where the 95% hard limit
    would have stopped the agent. Table, --json, a terminal chart and --plot FILE."""
    from .. import replay as rp
    from ..config import Config

    cfg = Config({"compaction.context_window": context_window, "model": model})
    tok_name = tokenizer or (cfg["tokenizer"] if cfg.source("tokenizer") != "default" else None)
    info, tok = resolve_model(model or cfg["model"] or None, tok_name)
    from ..formats import iter_paths

    files = list(iter_paths(paths))
    reports = [r for f in files for r in rp.replay_file(f, fmt=fmt, tokenizer=tok, cfg=cfg, index=index)]
    path = files[0] if len(files) == 1 else None
    common.warn_unknown_models(r.context.model for r in reports if not r.window and r.context is not None)
    if plot:
        if not reports:
            raise CtxtoolError("no transcript to plot", path=path, code=ExitCode.INPUT)
        if len(reports) > 1:
            where = "in the file" if path else "in the files"
            err_line(f"ctxtool: {len(reports)} transcripts {where}; plotting the first (choose a file, and one with --index)")
        kind = rp.write_plot(reports[0], plot)
        err_line(f"wrote {kind} chart of {len(reports[0].turns)} turns to {plot}")
    if as_json or as_jsonl:
        totals = {"transcripts": len(reports), "turns": sum(len(r.turns) for r in reports),
                  "peak_tokens": max((r.peak_tokens for r in reports), default=0),
                  "stopped": sum(1 for r in reports if r.stopped_at is not None)}
        emit("replay", {"path": path if path else paths[0] if len(paths) == 1 else None, "index": index},
             items=(r.to_json() for r in reports), tail={"totals": totals},
             jsonl=as_jsonl)
        return
    if len(reports) == 1:
        _render_replay(reports[0], table=table, chart=chart, height=height)
    else:
        _render_many(reports)


def _render_replay(r: Any, *, table: bool, chart: bool, height: int) -> None:
    from .. import replay as rp
    from .table import SIMPLE_HEAD, Table

    con = stdout_console()
    if not con.is_terminal:
        con.width = max(con.width, 140)  # a pipe or a file: do not squeeze the table
    if table and r.turns:
        t = Table(title=rp.title(r), title_justify="left", box=SIMPLE_HEAD, pad_edge=False)
        for c, j in (("turn", "right"), ("line", "right"), ("input", "right"), ("output", "right"),
                     ("context", "right"), ("+turn", "right"), ("window", "right"), ("avg/turn", "right"),
                     ("turns left", "right"), ("src", "left"), ("events", "left")):
            t.add_column(c, justify=j)
        for tt in r.turns:
            ev = list(tt.fired)
            if tt.compacted_before:
                ev.insert(0, "compacted")
            style = "bold red" if "hard-limit" in tt.fired else ("yellow" if tt.fired else None)
            t.add_row(
                str(tt.number), fmt_int(tt.line), fmt_int(tt.input_tokens), fmt_int(tt.output_tokens),
                fmt_int(tt.context_tokens), fmt_int(tt.growth),
                "-" if tt.percent is None else f"{tt.percent:.1f}%", fmt_int(tt.average_turn),
                fmt_int(tt.turns_left), tt.source, " ".join(ev), style=style,
            )
        t.fit(con.width, ("line", "+turn", "avg/turn", "src", "output", "input"))
        con.print(t)
    if chart and r.turns:
        for line, pol in rp.terminal_chart(r, width=con.width, height=height):
            con.print_styled(line, rp.THRESHOLD_COLORS.get(pol or "", None) or "")
    f = r.final
    if f is None:
        con.print(f"{r.transcript}: no assistant turns", highlight=False)
        return
    w = f"{fmt_int(r.window)} ({r.window_source})" if r.window else "unknown (give --context-window or --model)"
    lines = [
        f"📊 {_k(f.context_tokens)}/{_k(r.window) if r.window else '?'}"
        + (f" ({f.percent:.1f}%)" if f.percent is not None else "")
        + (f" ~{f.turns_left:,} turns left" if f.turns_left is not None else "")
        + f" · Turn {f.number} | Input: {f.input_tokens:,}, Output: {f.output_tokens:,} | Avg/turn: {f.average_turn:,}"
        f" | Peak: {r.peak_tokens:,}",
        f"window {w} · tokenizer {r.tokenizer} · {len(r.turns):,} turns"
        + (f" · recorded compactions before turn(s) {', '.join(map(str, r.compactions))}" if r.compactions else ""),
    ]
    for name, hit in r.policies.items():
        th = hit.threshold
        where = f"turn {hit.first_turn}" if hit.first_turn else "never reached"
        more = f" (fired {len(hit.turns)}×: {', '.join(map(str, hit.turns[:8]))}{'…' if len(hit.turns) > 8 else ''})" if len(hit.turns) > 1 else ""
        verb = "stops the agent:" if th.stop else "compacts:"
        lines.append(f"  {name:<15} {th.label:<28} {th.origin:<11} {verb} {where}{more}")
    if r.accuracy is not None:
        lines.append(r.accuracy.summary)
    if r.context is not None and r.context.estimator:
        lines.append(f"estimator: {r.context.estimator}")
    if r.error is not None:
        lines.append(f"current context {r.error.text}"
                     + (f"; within it these could flip: {', '.join(r.could_flip)}" if r.could_flip else ""))
    for ln in lines:
        con.print(ln, highlight=False)


def _render_many(reports: list[Any]) -> None:
    from .table import Table

    con = stdout_console()
    t = Table(title=f"{len(reports):,} transcripts (use --index N for one transcript's turns and chart)", title_justify="left")
    for c in ("transcript", "turns", "peak", "final", "window", "first compaction", "hard limit"):
        t.add_column(c, justify="left" if c in ("transcript", "first compaction") else "right")
    shown = reports if len(reports) <= 50 else sorted(reports, key=lambda r: -r.peak_tokens)[:50]
    for r in shown:
        firsts = [(h.first_turn, n) for n, h in r.policies.items() if h.first_turn and not h.threshold.stop]
        first = min(firsts)[1] + f" @ {min(firsts)[0]}" if firsts else "-"
        f = r.final
        t.add_row(
            r.transcript.rsplit("/", 1)[-1], fmt_int(len(r.turns)), fmt_int(r.peak_tokens),
            fmt_int(f.context_tokens if f else 0), fmt_int(r.window), first, fmt_int(r.stopped_at),
        )
    if len(reports) > 50:
        t.caption = f"50 largest of {len(reports):,}"
    t.fit(con.width, ("final", "hard limit"))
    con.print(t)


def _k(v: int) -> str:
    if v >= 1_000_000:
        return f"{v / 1_000_000:.1f}M"
    if v >= 1000:
        return f"{v / 1000:.0f}K"
    return str(v)


# -- instructions ----------------------------------------------------------------------------


def instructions_cmd(
    directory: Annotated[str | None, typer.Argument(help="Working directory (default: the current one).", show_default=False)] = None,
    as_json: common.JsonOpt = False,
    show: Annotated[bool, typer.Option("--print", help="Print the merged instructions on stdout.")] = False,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Write the merged instructions to FILE (atomically).")] = None,
    max_bytes: Annotated[int | None, typer.Option("--max-bytes", min=0, help="Cap on the merged text (default 32 KiB, instructions.max_bytes).")] = None,
    tokenizer: common.TokenizerOpt = None,
) -> None:
    """Find the AGENTS.md instruction hierarchy (as adk-code merges it): the global file in ctxtool's config
    directory, the project root's (found by .git, .hg, go.mod, package.json or pyproject.toml)
    and the working directory's; merge them in that order under the 32 KiB cap and report
    sources, bytes, tokens and whether the text was cut."""
    from ..config import Config
    from ..instructions import load_instructions
    from ..jsonio import atomic_output

    cfg = Config({"instructions.max_bytes": max_bytes})
    tok = tokenizer or (cfg["tokenizer"] if cfg.source("tokenizer") != "default" else None) or "heuristic"
    res = load_instructions(directory, max_bytes=int(cfg["instructions.max_bytes"]), tokenizer=tok)
    if output:
        with atomic_output(output) as out:
            out.write(res.merged.encode("utf-8"))
        err_line(f"wrote {res.bytes:,} bytes of instructions to {output}")
    if as_json:
        emit("instructions", res.to_json())
        return
    if show:
        sys.stdout.write(res.merged)
        sys.stdout.flush()
        return
    w = common.ForPeople(sys.stdout)
    w.write(f"directory     {res.directory}\n")
    w.write(f"project root  {res.project_root or '(none found)'}\n")
    for s in res.sources:
        if not s.path:
            state = "no project root"
        elif not s.found:
            state = "not found"
        elif s.same_as:
            state = f"same file as {s.same_as}"
        elif s.included_bytes < s.bytes and res.truncated:
            state = f"{s.bytes:,} bytes, {s.included_bytes:,} included"
        else:
            state = f"{s.bytes:,} bytes"
        w.write(f"  {s.level:<8} {s.path or '-'}  ({state})\n")
    cut = f", cut from {res.total_bytes:,}" if res.truncated else ""
    w.write(
        f"merged: {res.num_sources} source(s), {res.bytes:,} bytes (cap {res.max_bytes:,}{cut}), "
        f"{res.tokens:,} tokens ({res.tokenizer}){' [TRUNCATED]' if res.truncated else ''}\n"
    )


def register(app: typer.Typer) -> None:
    app.command("archive")(archive_cmd)
    app.command("replay")(replay_cmd)
    app.command("instructions")(instructions_cmd)
