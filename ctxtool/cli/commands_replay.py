"""``ctxtool replay``: a turn-by-turn replay of context growth (adk-code's token tracker)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from ..errors import CtxtoolError, Failure
from ..history.archive import STRATEGIES as ARCHIVE_STRATEGIES
from . import common
from .common import configured_model, fmt_int, stdout_console
from .console import err_line
from .render import JsonlOpt, emit

# archive --strategy: the archiver's strategies (ctxtool.history.archive.STRATEGIES)
SummaryStrategy = StrEnum("SummaryStrategy", {s: s for s in ARCHIVE_STRATEGIES})  # type: ignore[misc]


# -- archive ---------------------------------------------------------------------------------


def replay_cmd(
    paths: common.Paths,
    fmt: common.FormatOpt = None,
    model: common.ModelOpt = None,
    context_window: common.WindowOpt = None,
    tokenizer: common.TokenizerOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    plot: Annotated[
        str | None, common.path_option("--plot", help="Write the chart to FILE.png, FILE.svg or FILE.html (no dependency).")
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
    # lazy: start-up (`ctxtool --help` would load ctxtool.policies.settings)
    from ..config import Config
    from ..replay.charts import write_plot
    from ..replay.core import replay_file

    cfg = Config({"compaction.context_window": context_window, "model": model})
    info, tok = configured_model(model, tokenizer, cfg)
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.walk)
    from ..formats.walk import iter_paths

    files = list(iter_paths(paths))
    if plot:
        # lazy: start-up (`ctxtool --help` would load ctxtool.io)
        from ..io.paths import refuse_overwrite

        refuse_overwrite(files, plot)  # a link named .svg may lead to an input
    reports = [r for f in files for r in replay_file(f, fmt=fmt, tokenizer=tok, cfg=cfg, index=index)]
    path = files[0] if len(files) == 1 else None
    common.warn_unknown_models(r.context.model for r in reports if not r.window and r.context is not None)
    if plot:
        if not reports:
            raise CtxtoolError("no transcript to plot", path=path, kind=Failure.INPUT)
        if len(reports) > 1:
            where = "in the file" if path else "in the files"
            err_line(f"ctxtool: {len(reports)} transcripts {where}; plotting the first (choose a file, and one with --index)")
        kind = write_plot(reports[0], plot)
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
    # lazy: start-up (`ctxtool --help` would load ctxtool.cli.table, ctxtool.policies.settings)
    from ..replay.charts import terminal_chart
    from ..replay.core import THRESHOLD_COLORS, title
    from .table import SIMPLE_HEAD, Table

    con = stdout_console()
    if not con.is_terminal:
        con.width = max(con.width, 140)  # a pipe or a file: do not squeeze the table
    if table and r.turns:
        t = Table(title=title(r), title_justify="left", box=SIMPLE_HEAD, pad_edge=False)
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
        for line, pol in terminal_chart(r, width=con.width, height=height):
            con.print_styled(line, THRESHOLD_COLORS.get(pol or "", None) or "")
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
    # lazy: start-up (`ctxtool --help` would load ctxtool.cli.table)
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


def register(app: typer.Typer) -> None:
    app.command("replay")(replay_cmd)
