"""``ctxtool check``: whether to compact now, by the trigger policy registry (:mod:`ctxtool.policies`)."""

from __future__ import annotations

import functools
from typing import Annotated, Any

import typer

from .. import policies
from . import common
from .common import (
    fmt_int,
    short_label,
    stdout_console,
    table_rows,
    warn_skipped,
)
from .exits import ExitCode
from .render import Emitter, JsonlOpt

#: ``--policy``: one of the trigger policy registry's names (former names accepted)
POLICY_HELP = "; ".join(f"{p.name} ({p.help})" for p in policies.POLICIES.values())
PolicyOpt = Annotated[
    str,
    common.registry_option("--policy", "-p", registry=policies.POLICIES, show_default=False,
                           help=f"Which trigger decides (default {policies.DEFAULT}): {POLICY_HELP}."),
]




# -- check ------------------------------------------------------------------------------


def check(
    paths: common.Paths,
    policy: PolicyOpt = policies.DEFAULT,
    context_window: common.WindowOpt = None,
    model: common.ModelOpt = None,
    reserve_tokens: common.ReserveOpt = None,
    max_tokens: common.MaxTokensOpt = None,
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
    # lazy: start-up (`ctxtool --help` would load ctxtool.policies.check, ctxtool.policies.settings, ctxtool.tokens.context)
    from ..policies.check import check_files, check_settings

    cfg, _info, tok = common.resolve_settings(
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
    s, _context = check_settings(cfg)
    run = functools.partial(check_files, paths, config=cfg, policy=policy, tokenizer=tok, fmt=fmt,
                            on_error=on_error.value, jobs=jobs)
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

        warn_skipped(run(item))
        em.finish({"totals": totals})
        needed = totals["compact"] > 0
    else:
        results: list[Any] = []
        warn_skipped(run(results.append))
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
    # lazy: start-up (`ctxtool --help` would load ctxtool.cli.table)
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


def register(app: typer.Typer) -> None:
    app.command("check")(check)
