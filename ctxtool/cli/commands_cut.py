"""``ctxtool cut``: where to cut history (pi-style cut points, with the Go agent's fallbacks)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from ..errors import CtxtoolError, Failure
from . import common, console
from .common import fmt_int, json_needs_output, short_label, stdout_console, table_rows, warn_skipped
from .render import JsonlOpt, emit


def cut(
    paths: common.Paths,
    keep_recent_tokens: Annotated[
        int | None,
        typer.Option("--keep-recent-tokens", "-k", min=0, help="Tokens to keep verbatim (default 20000, compaction.keep_recent_tokens; 0: use --keep-recent)."),
    ] = None,
    keep_recent: Annotated[
        int | None,
        typer.Option("--keep-recent", min=1, help="Messages to keep when no token budget is given (default 5, compaction.keep_recent). Given alone, it selects the message-count split."),
    ] = None,
    context_window: common.WindowOpt = None,
    model: common.ModelOpt = None,
    reserve_tokens: common.ReserveOpt = None,
    max_tokens: common.MaxTokensOpt = None,
    tokenizer: common.TokenizerOpt = None,
    fmt: common.FormatOpt = None,
    output: common.OutOpt = None,
    to: common.ToOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    on_error: common.OnErrorOpt = common.OnError.fail,
    jobs: common.JobsOpt = None,
    messages_column: common.MessagesColumnOpt = None,
) -> None:
    """Find where to cut history (pi-style cut points, with the Go agent's fallbacks): walk back from the newest
    message until --keep-recent-tokens are kept and cut at the nearest user message; never at
    a tool result, never between a tool call and its result. When even the newest turn is
    larger, cut mid-turn at an assistant message and flag the turn as split. The budget is
    clamped to half of the effective limit (context window minus reserve; else a configured
    MaxTokens). cut_index indexes the message list as `ctxtool convert --to ctxtool` orders
    it; null when nothing needs cutting. With -o, write the kept messages (and system
    prompts) unchanged."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.history.cut)
    from ..history.cut import CutSettings, cut_file, cut_files

    if output and len(paths) != 1:
        raise CtxtoolError("-o takes one input file", kind=Failure.USAGE)
    cfg, _info, tok = common.resolve_settings(
        model=model,
        tokenizer=tokenizer,
        context_window=context_window,
        flags={
            "compaction.keep_recent_tokens": keep_recent_tokens,
            "compaction.keep_recent": keep_recent,
            "compaction.reserve_tokens": reserve_tokens,
            "compaction.max_tokens": max_tokens,
        },
    )
    # --keep-recent alone: the Go agent's message-count split
    settings = CutSettings.from_config(cfg, by_messages=keep_recent is not None and keep_recent_tokens is None)

    machine = as_json or as_jsonl
    reports: list[Any] = []
    if output:
        json_needs_output(machine, False, output)
        run = cut_file(paths[0], output, settings, tokenizer=tok, fmt=fmt, to=to, on_error=on_error.value,
                       messages_column=messages_column)
        warn_skipped(run.skipped)
        reports = run.report.items
        if output == "-":
            _render_cut_summary(reports, console.PrintableStream(sys.stderr))
            return
    else:
        warn_skipped(cut_files(paths, reports.append, settings, tokenizer=tok, fmt=fmt, on_error=on_error.value,
                               jobs=jobs, messages_column=messages_column))
    if not machine:
        _render_cut(reports)
        return
    totals = {
        "transcripts": len(reports),
        "need_cut": sum(1 for r in reports if r.cut.cut_index is not None),
        "messages_dropped": sum(r.messages_dropped for r in reports),
    }
    head = {"keep_recent_tokens": settings.keep_recent_tokens, "keep_recent": settings.keep_recent,
            "effective_limit": settings.effective_limit, "tokenizer": tok.name, "output": output}
    emit("cut", head, items=(r.to_json() for r in reports), tail={"totals": totals}, jsonl=as_jsonl)


def _render_cut(reports: list[Any]) -> None:
    # lazy: start-up (`ctxtool --help` would load ctxtool.cli.table)
    from .table import SIMPLE_HEAD, Table

    con = stdout_console()
    r0 = reports[0] if reports else None
    cap = ""
    if r0 is not None:
        c = r0.cut
        cap = (
            f"keep budget {fmt_int(c.keep_budget)} tokens" if c.keep_budget else f"keep recent {c.keep_recent} messages"
        ) + f" · effective limit {fmt_int(r0.effective_limit)} · {r0.tokenizer}"
    t = Table(title=f"cut points · {cap}", title_justify="left", box=SIMPLE_HEAD, pad_edge=False)
    for col in ("transcript", "msgs", "cut_index", "first_kept_id", "tokens", "kept", "summarized", "kept msgs", "split"):
        t.add_column(col, justify="left" if col in ("transcript", "first_kept_id", "split") else "right")
    shown, t.caption = table_rows(reports, lambda r: r.cut.tokens_before, "with the most tokens")
    for r in shown:
        c = r.cut
        t.add_row(
            short_label(r.transcript),
            fmt_int(r.messages),
            "-" if c.cut_index is None else str(c.cut_index),
            _clip(c.first_kept_id, 14),
            fmt_int(c.tokens_before),
            fmt_int(c.tokens_kept),
            fmt_int(c.messages_summarized),
            fmt_int(c.messages_kept),
            f"yes@{c.turn_start_index}" if c.split_turn else "no",
        )
    t.fit(con.width, ("first_kept_id", "split", "msgs", "kept msgs"))
    con.print(t)
    n_cut = sum(1 for r in reports if r.cut.cut_index is not None)
    applied = [r for r in reports if r.applied]
    line = f"{n_cut:,} of {len(reports):,} transcript(s) need a cut"
    if applied:
        line += f" · dropped {sum(r.messages_dropped for r in applied):,} message(s)"
    con.print(line, highlight=False)


def _render_cut_summary(reports: list[Any], out: Any) -> None:
    n_cut = sum(1 for r in reports if r.cut.cut_index is not None)
    dropped = sum(r.messages_dropped for r in reports)
    out.write(f"ctxtool: cut {n_cut:,} of {len(reports):,} transcript(s), dropped {dropped:,} message(s)\n")


def _clip(s: str | None, n: int = 24) -> str:
    if not s:
        return "-"
    return s if len(s) <= n else s[: n - 1] + "…"


def register(app: typer.Typer) -> None:
    app.command("cut")(cut)
