"""compactions: every compaction the sessions recorded, loops and files read again."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..stats import compactions as cp
from ..stats.compactions import LOOP_MINUTES, LOOP_TURNS
from .common import FormatOpt, JobsOpt, JsonOpt, Paths, fmt_int, stdout_console
from .render import Emitter, JsonlOpt


def compactions_cmd(
    paths: Paths,
    fmt: FormatOpt = None,
    loop_turns: Annotated[
        int, typer.Option("--loop-turns", min=0, help="A compaction within this many model turns of the previous one is a loop.")
    ] = LOOP_TURNS,
    loop_minutes: Annotated[
        float, typer.Option("--loop-minutes", min=0, help="A compaction within this many minutes of the previous one is a loop.")
    ] = LOOP_MINUTES,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
    as_jsonl: JsonlOpt = False,
) -> None:
    """Every compaction recorded (Claude Code compact_boundary, pi compaction, Codex compacted,
    ctxtool summaries): when, auto or manual, tokens before and after, model turns between
    compactions; flags compaction loops and files read again after a compaction."""
    if as_json or as_jsonl:
        em = Emitter("compactions", {"loop_turns": loop_turns, "loop_minutes": loop_minutes}, jsonl=as_jsonl)
        rep = cp.compactions(paths, fmt=fmt, loop_turns=loop_turns, loop_minutes=loop_minutes, jobs=jobs,
                             each=lambda t: em.item(t.to_json()))  # a stream: each transcript as it comes
        em.finish({"totals": rep.totals})
        return
    _render(cp.compactions(paths, fmt=fmt, loop_turns=loop_turns, loop_minutes=loop_minutes, jobs=jobs))


def _render(rep: Any) -> None:
    # lazy: start-up (`ctxtool --help` would load ctxtool.cli.table)
    from .table import Table

    con = stdout_console()
    for t in rep.transcripts:
        if not t.compactions:
            continue
        tab = Table(title=f"{t.label} · {t.format} · {t.turns:,} turns · {len(t.compactions)} compaction(s)",
                    title_justify="left")
        for c in ("#", "when", "trigger", "before", "after", "turns since", "min since", "loop", "read again"):
            tab.add_column(c, justify="right" if c in ("#", "before", "after", "turns since", "min since") else "left")
        for c in t.compactions:
            before = fmt_int(c.tokens_before) + ("" if c.tokens_before_source == "recorded" else "~")
            after = fmt_int(c.tokens_after) + ("" if c.tokens_after_source in ("usage", "recorded") else "~")
            tab.add_row(
                str(c.number), c.timestamp or "-", c.trigger or "-", before, after, fmt_int(c.turns_since),
                "-" if c.minutes_since is None else f"{c.minutes_since:g}", "LOOP" if c.loop else "",
                f"{len(c.reread)} file(s)" if c.reread else "",
            )
        tab.fit(con.width, ("min since", "turns since", "trigger"))
        con.print(tab)
        for c in t.compactions:
            if c.preserved_messages is not None or c.cumulative_dropped_tokens is not None:
                kept = f"{c.preserved_messages:,} message(s) kept verbatim" if c.preserved_messages is not None else ""
                dropped = (f"{c.cumulative_dropped_tokens:,} tokens dropped by the session so far"
                           if c.cumulative_dropped_tokens is not None else "")
                con.print(f"#{c.number} (as Claude Code recorded it): " + " · ".join(x for x in (kept, dropped) if x),
                          highlight=False)
            if c.reread:
                con.print(f"read again after #{c.number}: " + ", ".join(c.reread[:8])
                          + (f" (+{len(c.reread) - 8} more)" if len(c.reread) > 8 else ""), highlight=False)
    tot = rep.totals
    con.print(
        f"{tot['compactions']:,} compaction(s) in {tot['with_compactions']:,} of {tot['transcripts']:,} transcript(s)"
        f" · auto {tot['auto']:,} · manual {tot['manual']:,} · loops {tot['loops']:,}"
        f" (within {rep.loop_turns} turns or {rep.loop_minutes:g} min) · files read again {tot['reread_files']:,}"
        " · ~ estimated",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.command("compactions")(compactions_cmd)
