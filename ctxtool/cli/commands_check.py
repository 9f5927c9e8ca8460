"""cut and check: where to cut history (pi-style cut points) and whether to compact now (the
trigger policy registry, :mod:`ctxtool.policies`)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from .. import policies
from ..errors import CtxtoolError, ExitCode
from . import common
from .common import (
    fmt_int,
    json_needs_output,
    resolve_model,
    short_label,
    stdout_console,
    table_rows,
    warn_skipped,
)
from .render import Emitter, JsonlOpt, emit

#: ``--policy``: one of the trigger policy registry's names (former names accepted)
POLICY_HELP = "; ".join(f"{p.name} ({p.help})" for p in policies.all())
PolicyOpt = Annotated[
    str,
    common.choice_option("--policy", "-p", names=policies.names(), aliases=policies.ALIASES,
                         help=f"Which trigger decides (default {policies.DEFAULT}): {POLICY_HELP}."),
]

ReserveOpt = Annotated[
    int | None, typer.Option("--reserve-tokens", min=0, help="Tokens reserved for the response (default 16384, compaction.reserve_tokens).")
]


def _settings(
    *,
    model: str | None = None,
    tokenizer: str | None = None,
    context_window: int | None = None,
    flags: dict[str, Any] | None = None,
) -> tuple[Any, Any, Any]:
    """(Config, ModelInfo | None, Tokenizer) with flags over env over file over defaults."""
    from ..config import Config
    from ..tokens import get_tokenizer

    f = dict(flags or {})
    f["compaction.context_window"] = context_window
    f["model"] = model
    cfg = Config(f)
    tok_name = tokenizer or (cfg["tokenizer"] if cfg.source("tokenizer") != "default" else None)
    info, tok = resolve_model(model or cfg["model"] or None, tok_name)
    return cfg, info, get_tokenizer(tok)


def _each(paths: list[str], fmt: str | None, on_error: common.OnError, op: Callable[[Any], Any],
          sink: Callable[[Any], None], jobs: int | None = None, messages_column: str | None = None) -> None:
    """``op``'s result for every transcript of ``paths`` passed to ``sink`` as each is known
    (nothing written), the records left out warned about at the end. ``op`` pickles (a
    ``functools.partial`` of a module-level function): many small files run on every core
    (:func:`ctxtool.manyfiles.each_result`)."""
    from ..formats import iter_paths
    from ..manyfiles import each_result

    warn_skipped(each_result(op, iter_paths(paths), sink, fmt=fmt, on_error=on_error.value, jobs=jobs,
                             messages_column=messages_column))


def _transform(
    path: str,
    fmt: str | None,
    on_error: common.OnError,
    output: str | None,
    to: str | None,
    dry_run: bool,
    as_json: bool,
    op: Callable[[Any], Any],
    messages_column: str | None = None,
) -> list[Any]:
    """Run ``op`` (which changes a transcript in place and returns a report) over ``path``
    with the runner, writing to ``output`` unless ``dry_run``; returns the reports."""
    from ..runner import Each, run_file

    json_needs_output(as_json, dry_run, output)
    run = run_file(Each(op), path, None if dry_run else (output or "-"), fmt=fmt, to=to, on_error=on_error.value,
                   messages_column=messages_column)
    warn_skipped(run.skipped)
    return run.report.items


# -- cut --------------------------------------------------------------------------------


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
    reserve_tokens: ReserveOpt = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=0, help="The effective limit in tokens when no context window is known (default 8000, compaction.max_tokens).")
    ] = None,
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
    from ..history import cut_transcript
    from ..triggers import TriggerSettings

    if output and len(paths) != 1:
        raise CtxtoolError("-o takes one input file", code=ExitCode.USAGE)
    cfg, _info, tok = _settings(
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
    budget: int | None = int(cfg["compaction.keep_recent_tokens"])
    if keep_recent is not None and keep_recent_tokens is None:
        budget = None  # --keep-recent alone: the Go agent's message-count split
    s = TriggerSettings.from_config(cfg)
    limit: int | None = None
    if s.context_window:
        limit, _ = s.effective_limit()
    elif cfg.source("compaction.max_tokens") != "default" and s.max_tokens > 0:
        limit = s.max_tokens

    op = functools.partial(cut_transcript, keep_recent_tokens=budget, keep_recent=int(cfg["compaction.keep_recent"]),
                           effective_limit=limit, tokenizer=tok, apply=output is not None)

    machine = as_json or as_jsonl
    if output:
        reports = _transform(paths[0], fmt, on_error, output, to, False, machine, op, messages_column)
        if output == "-":
            _render_cut_summary(reports, common.ForPeople(sys.stderr))
            return
    else:
        reports = []
        _each(paths, fmt, on_error, op, reports.append, jobs, messages_column)
    if not machine:
        _render_cut(reports)
        return
    totals = {
        "transcripts": len(reports),
        "need_cut": sum(1 for r in reports if r.cut.cut_index is not None),
        "messages_dropped": sum(r.messages_dropped for r in reports),
    }
    head = {"keep_recent_tokens": budget, "keep_recent": int(cfg["compaction.keep_recent"]), "effective_limit": limit,
            "tokenizer": tok.name, "output": output}
    emit("cut", head, items=(r.to_json() for r in reports), tail={"totals": totals}, jsonl=as_jsonl)


def _render_cut(reports: list[Any]) -> None:
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


# -- check ------------------------------------------------------------------------------


def check(
    paths: common.Paths,
    policy: PolicyOpt = policies.DEFAULT,
    context_window: common.WindowOpt = None,
    model: common.ModelOpt = None,
    reserve_tokens: ReserveOpt = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=0, help="The effective limit in tokens when no context window is known (default 8000, compaction.max_tokens).")] = None,
    max_messages: Annotated[int | None, typer.Option("--max-messages", min=0, help="Compact at this many messages when no token limit is known (default 50, compaction.max_messages).")] = None,
    threshold_ratio: Annotated[float | None, typer.Option("--threshold-ratio", min=0.0, max=1.0, help="The ratio policy's share of the window (default 0.8, compaction.threshold_ratio).")] = None,
    tokenizer: common.TokenizerOpt = None,
    fmt: common.FormatOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    on_error: common.OnErrorOpt = common.OnError.fail,
    jobs: common.JobsOpt = None,
) -> None:
    """Should this transcript be compacted now? Reports used tokens (usage-aware, counted
    from the last compaction boundary), the limit, the percentage and every policy's
    verdict. The context window comes from --context-window or --model, the config, what
    the transcript records (Codex), the registry entry of its last model, else unknown.
    Exit status: 0 when no compaction is needed, 5 when any transcript needs it under
    --policy (2 for a missing window under --policy ratio)."""
    from ..context import ContextSettings
    from ..policies import PolicySettings
    from ..policies.check import check_transcript

    cfg, _info, tok = _settings(
        model=model,
        tokenizer=tokenizer,
        context_window=context_window,
        flags={
            "compaction.reserve_tokens": reserve_tokens,
            "compaction.max_tokens": max_tokens,
            "compaction.max_messages": max_messages,
            "compaction.threshold_ratio": threshold_ratio,
        },
    )
    cs = ContextSettings.from_config(cfg)
    w = cs.resolve(None)
    s = PolicySettings.from_config(cfg, context_window=w.window, window_source=w.source)
    one = functools.partial(check_transcript, settings=s.with_window(None, "none"), policy=policy, tokenizer=tok,
                            context=cs)
    unknown: set[str | None] = set()  # models recorded but not in the registry (a warning each)
    if as_json or as_jsonl:
        totals = {"transcripts": 0, "compact": 0}
        em = Emitter("check", {"policy": policy, "settings": s.to_json()}, jsonl=as_jsonl)

        def item(r: Any) -> None:  # a stream: each verdict as it comes
            if not r.context.window:
                unknown.add(r.context.model)
            totals["transcripts"] += 1
            totals["compact"] += r.compact
            em.item(r.to_json())

        _each(paths, fmt, on_error, one, item, jobs)
        em.finish({"totals": totals})
        needed = totals["compact"] > 0
    else:
        results: list[Any] = []
        _each(paths, fmt, on_error, one, results.append, jobs)
        _render_check(results, s, policy)
        needed = any(r.compact for r in results)
        unknown.update(r.context.model for r in results if not r.context.window)
    common.warn_unknown_models(unknown)
    if needed:
        raise typer.Exit(int(ExitCode.THRESHOLD))


def _window_text(c: Any) -> str:
    if c.window:
        return f"{c.window:,} ({c.window_source})"
    return "unknown" + (f" (model {c.model} is not in the registry)" if c.model else "")


def _render_check(results: list[Any], s: Any, policy: str) -> None:
    from .table import SIMPLE_HEAD, Table

    con = stdout_console()
    windows = {_window_text(r.context) for r in results}
    window = windows.pop() if len(windows) == 1 else "per transcript"
    if len(results) == 1:
        r = results[0]
        c = r.context
        how = (f"usage {c.usage_tokens:,} + trailing {c.trailing_tokens:,}" if c.tokens_source == "usage" else "estimate")
        after = f", after the last compaction ({c.boundary})" if c.boundary else ""
        con.print(f"{short_label(r.transcript)}: {r.messages:,} messages · used {c.tokens:,} tokens ({how}{after}, "
                  f"{r.tokenizer})", highlight=False)
        con.print(f"estimator: {c.estimator}", highlight=False)
        con.print(f"context window {window}", highlight=False)
        t = Table(box=SIMPLE_HEAD, pad_edge=False)
        for col in ("policy", "from", "rule", "used", "limit", "used %", "verdict"):
            t.add_column(col, justify="right" if col in ("used", "limit", "used %") else "left")
        for v in r.verdicts:
            verdict = v.status
            if v.hard_limit is not None:
                verdict += f" (stop at {v.hard_limit:,})"
            t.add_row(
                ("* " if v.policy == policy else "  ") + v.policy,
                v.origin,
                v.rule,
                fmt_int(v.used) + (" msgs" if v.unit == "messages" else ""),
                fmt_int(v.limit),
                "-" if v.percent is None else f"{v.percent:.1f}%",
                verdict,
                style="bold" if v.policy == policy else None,
            )
        t.fit(con.width, ("from",))
        con.print(t)
        for v in r.verdicts:
            if v.reason and v.status not in ("ok", "compact"):
                con.print(f"{v.policy}: {v.reason}", highlight=False)
        if r.error is not None:
            con.print(f"estimate {r.error.text}", highlight=False)
        if r.could_flip:
            con.print(f"within that error the verdict could flip: {', '.join(r.could_flip)}", highlight=False)
        con.print(f"verdict ({policy}): {'COMPACT' if r.compact else 'no compaction needed'}", highlight=False)
        return
    t = Table(title=f"policy {policy} · context window {window}", title_justify="left", box=SIMPLE_HEAD, pad_edge=False)
    for col in ("transcript", "messages", "used tokens", "window", "limit", "used %", "verdict"):
        t.add_column(col, justify="left" if col in ("transcript", "verdict") else "right")
    shown, t.caption = table_rows(results, lambda r: (r.compact, r.verdict.percent or 0.0, r.context.tokens), "closest to compaction")
    for r in shown:
        v = r.verdict
        t.add_row(
            short_label(r.transcript),
            fmt_int(r.messages),
            fmt_int(r.context.tokens),
            fmt_int(r.context.window),
            fmt_int(v.limit),
            "-" if v.percent is None else f"{v.percent:.1f}%",
            v.status,
        )
    t.fit(con.width, ("messages", "limit"))
    con.print(t)
    n = sum(1 for r in results if r.compact)
    con.print(f"{n:,} of {len(results):,} transcript(s) need compaction ({policy})", highlight=False)


def _clip(s: str | None, n: int = 24) -> str:
    if not s:
        return "-"
    return s if len(s) <= n else s[: n - 1] + "…"


def register(app: typer.Typer) -> None:
    app.command("cut")(cut)
    app.command("check")(check)
