"""compact: summarize the old part of a transcript and rebuild it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..compaction.layouts import LAYOUTS
from ..compaction.settings import CompactOptions, summarizer_from_config
from ..config import Config
from ..errors import CtxtoolError, Failure
from ..summarizers import SUMMARIZERS, Closeable
from . import common, console
from .commands_check import PolicyOpt
from .common import configured_model, warn_skipped
from .console import err_line, out_line, progress_bar
from .render import JsonlOpt, emit

if TYPE_CHECKING:
    from ..compaction.report import CompactReport, RecordReport

# CLI choices come from the registries: a registered layout or summarizer is offered here
D = CompactOptions()  # the defaults, stated once (ctxtool.config)
SINCE = common.SINCE
LAYOUT_HELP = "; ".join(f"{n}: {lay.help}" for n, lay in LAYOUTS.items())


class Style(StrEnum):
    structured = "structured"
    retain = "retain"


def compact(
    path: common.OnePath,
    output: common.OutOpt = None,
    fmt: common.FormatOpt = None,
    to: common.ToOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Compact regardless of the trigger.")] = False,
    layout: Annotated[
        str | None,
        common.registry_option("--layout", registry=LAYOUTS, help=f"{LAYOUT_HELP} (default {D.layout})."),
    ] = None,
    keep_recent_tokens: Annotated[int | None, typer.Option("--keep-recent-tokens", "-k", help=f"Tokens kept verbatim after the cut (default {D.keep_recent_tokens:,}).", min=0)] = None,
    retain_last_turns: Annotated[int | None, typer.Option("--retain-last-turns", help=f"Turns kept with --layout retain (default {D.retain_last_turns}).", min=0)] = None,
    keep_last_messages: Annotated[int | None, typer.Option("--keep-last-messages", help=f"Messages kept with --layout initial (default {D.keep_last_messages}).", min=0)] = None,
    summarizer: Annotated[str | None, common.registry_option("--summarizer", registry=SUMMARIZERS, help=f"The summary model: {', '.join(SUMMARIZERS.names())} (default: heuristic, offline).")] = None,
    summary_model: Annotated[str | None, typer.Option("--summary-model", help="The summary model (may differ from the agent's).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Endpoint of the openai/anthropic summarizer.")] = None,
    command: Annotated[str | None, typer.Option("--command", help="Program for --summarizer command (stdin: prompt, stdout: summary).")] = None,
    summary_window: Annotated[int | None, typer.Option("--summary-context-window", help="The summary model's window (larger inputs are summarized in chunks).", min=1)] = None,
    summary_max_tokens: Annotated[int | None, typer.Option("--summary-max-tokens", help=f"Longest summary asked of the model (default {D.summary_max_tokens:,}).", min=16)] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Seconds per summary request (default 120).", min=1)] = None,
    style: Annotated[Style | None, typer.Option("--style", help="structured (pi-style Markdown sections) or retain (<retain>/<summary> blocks); default from the layout.")] = None,
    summary_directive: Annotated[list[str] | None, typer.Option("--summary-directive", help="Extra instruction for the summary (repeatable).")] = None,
    retain_directive: Annotated[list[str] | None, typer.Option("--retain-directive", help="What <retain> must keep (repeatable).")] = None,
    instructions: Annotated[str | None, typer.Option("--instructions", help="Free-form focus for the summary.")] = None,
    pin: Annotated[list[str] | None, typer.Option("--pin", help="Instructions kept verbatim beside the summary, checked present afterwards: TEXT or @FILE (AGENTS.md, rules); repeatable.")] = None,
    tool_digest: Annotated[bool, typer.Option("--tool-digest", help="Archive kept tool results beyond --tool-call-cutoff and add a [Compaction tool digest] (the Go agent's).")] = False,
    tool_call_cutoff: Annotated[int | None, typer.Option("--tool-call-cutoff", "-n", help=f"Visible tool results kept with --tool-digest (default {D.tool_call_cutoff}).", min=0)] = None,
    fallback: Annotated[bool, typer.Option("--fallback", help="Use the heuristic summary when the model's is empty, fails or saves nothing.")] = False,
    max_false_claims: Annotated[int | None, typer.Option("--max-false-claims", min=0, help="Reject a model's summary that makes more than this many claims the transcript's records contradict (a failed step called done, a fixed error called open, a completed plan item or a countermanded action called next; listed in --json as disagreements); with --fallback the heuristic summary is used instead.")] = None,
    summary_budget: Annotated[int | None, typer.Option("--summary-budget", min=200, help=f"Tokens the summary should fit (default {D.summary_budget:,}, about a product's compaction summary): the heuristic fills its sections in order of value up to it; a model is asked for at most this much.")] = None,
    min_retention: Annotated[float | None, typer.Option("--min-retention", min=0.0, max=1.0, help="Reject a summary whose retention (what `ctxtool score` measures, 0-1) is below this; with --fallback the heuristic summary is tried instead.")] = None,
    events: Annotated[str | None, common.path_option("--events", help="Write compaction_start/compaction_end/compaction events (JSONL) to this file.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (cut, sizes, prompt size) without calling a model or writing.")] = False,
    agent_hint: Annotated[bool, typer.Option("--agent-hint", help="End each compacted transcript with one short system "
                                             "note naming the tools that read the cache and the transcripts (ctxtool mcp).")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Transcripts summarized in parallel (datasets).", min=1)] = 1,
    cache_dir: Annotated[str | None, common.path_option("--cache-dir", metavar="DIR", help="Summary cache (default: $CTXTOOL_CACHE_DIR, else the user cache directory).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not cache remote summaries.")] = False,
    max_in_flight: common.MaxInFlightOpt = None,
    engine: common.EngineOpt = None,
    address: common.AddressOpt = None,
    join: common.JoinOpt = False,
    messages_column: common.MessagesColumnOpt = None,
    tokenizer: common.TokenizerOpt = None,
    model: common.ModelOpt = None,
    context_window: common.WindowOpt = None,
    reserve_tokens: Annotated[int | None, typer.Option("--reserve-tokens", help=f"Tokens reserved for the response (default {D.reserve_tokens:,}).", min=0)] = None,
    policy: PolicyOpt = D.policy,
    on_error: common.OnErrorOpt = common.OnError.fail,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    show_summary: Annotated[bool, typer.Option("--show-summary", help="Print the summary of each compacted transcript (stderr when the transcript goes to stdout).")] = False,
) -> None:
    """Decide (the trigger; --force compacts regardless), cut, summarize the old part and
    rebuild the transcript in its own format (or --to). Kept messages are written byte for
    byte; the output is validated before it is written; the input is never modified.
    Exit 0 when compacted or nothing to do (the report says which)."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.cache, ctxtool.compaction.pins)
    from ..compaction import pins
    from ..compaction.run import compact_file

    common.json_needs_output(as_json or as_jsonl, dry_run, output, events)
    flags: dict[str, Any] = {
        "compaction.keep_recent_tokens": keep_recent_tokens,
        "compaction.retain_last_turns": retain_last_turns,
        "compaction.keep_last_messages": keep_last_messages,
        "compaction.reserve_tokens": reserve_tokens,
        "compaction.tool_call_cutoff": tool_call_cutoff,
        "compaction.layout": layout,
        "compaction.context_window": context_window,
        "summarizer.kind": summarizer,
        "summarizer.model": summary_model,
        "summarizer.base_url": base_url,
        "summarizer.command": command,
        "summarizer.context_window": summary_window,
        "summarizer.max_tokens": summary_max_tokens,
        "summarizer.timeout": timeout,
        "model": model,
        "cache_dir": cache_dir,
    }
    cfg = Config(flags)
    info, tok = configured_model(model, tokenizer, cfg)
    lay = str(cfg["compaction.layout"])
    if lay not in LAYOUTS:
        raise CtxtoolError(f"compaction.layout: {LAYOUTS.unknown(lay).message}", kind=Failure.USAGE)
    opts = CompactOptions.from_config(
        cfg,
        force=force,
        tokenizer=tok,
        context_window=context_window,
        policy=policy,
        style=style.value if style else None,
        summary_directives=tuple(summary_directive or ()),
        retain_directives=tuple(retain_directive or ()),
        instructions=instructions,
        pins=pins.load(pin or ()),
        tool_digest=tool_digest,
        fallback=fallback,
        min_retention=min_retention,
        max_false_claims=max_false_claims,
        **({"summary_budget": summary_budget} if summary_budget else {}),
    )
    progress, stop = _progress()
    from contextlib import ExitStack

    stack = ExitStack()  # closes the engine (a local Ray cluster)
    summ = None
    try:
        sh = stack.enter_context(common.sharding(engine, [path], None if dry_run else output, address, join))
        # the bound on requests is the engine's (Ray: an actor every worker of the cluster asks), else this process's
        summ = None if dry_run else summarizer_from_config(
            cfg, model=info.name if info else None, cache=not no_cache, max_in_flight=max_in_flight,
            engine=sh.engine if sh is not None else None)
        report = compact_file(
            path, output, fmt=fmt, to=to, options=opts, summarizer=summ, jobs=jobs, on_error=on_error.value,
            events=events, dry_run=dry_run, progress=progress, engine=sh, messages_column=messages_column,
            hint=agent_hint,
        )
    finally:
        stack.close()
        stop()
        if isinstance(summ, Closeable):
            summ.close()
    to_stderr = common.report_to_stderr(output, events, dry_run)
    if show_summary:
        stream = console.PrintableStream(sys.stderr if to_stderr else sys.stdout)
        for rec, s in zip(report.records, report.summaries, strict=True):
            if s:
                stream.write(f"--- summary of {rec.label} ---\n{s.rstrip()}\n")
    if as_json or as_jsonl:
        _emit_json(report, as_jsonl)
    else:
        _render(report, err_line if to_stderr else out_line)
    warn_skipped(report.skipped)
    errs = [r for r in report.records if r.status == "error"]
    if errs:
        err_line(f"ctxtool: {len(errs)} transcript(s) failed and were left unchanged; first: {errs[0].label}: {errs[0].error}")


_COMPACT_HEAD = ("path", "output", "format", "output_format", "summarizer", "dry_run", "jobs")


def _emit_json(report: Any, jsonl: bool) -> None:
    d = report.to_json()
    head = {k: d.pop(k) for k in _COMPACT_HEAD}
    records = d.pop("per_record")
    d["transcripts"] = d.pop("records")
    tail: dict[str, Any] = {"totals": d}
    if "skipped_records" in d:  # the unreadable records --on-error skip left out
        tail["skipped"] = d.pop("skipped_records")
    items = ({"transcript": r.pop("label"), **r} for r in records)
    emit("compact", head, items=items, tail=tail, jsonl=jsonl)


def _progress() -> tuple[Any, Any]:
    """A progress bar with ETA on stderr, only on a terminal and for more than one transcript."""
    update, stop = progress_bar("compacting", "compact", least=2, eta=True)
    if update is None:
        return None, stop

    def cb(n: int, total: int, rep: RecordReport) -> None:
        update(n, total)

    return cb, stop


def _render(report: CompactReport, write: Callable[[str], None]) -> None:
    """The report for people, a line at a time (``write``: :func:`out_line` or :func:`err_line`)."""
    recs = report.records
    for r in recs[:50] if len(recs) > 1 else recs:
        where = r.label if len(recs) > 1 else r.label.split("#")[0]
        if r.status == "compacted":
            write(
                f"{where}: compacted {r.tokens_before:,} → {r.tokens_after:,} {SINCE} (ratio {r.ratio:.2f}x): "
                f"{r.summarized_messages + r.incremental:,} of {r.summarized_messages + r.incremental + r.kept_messages:,}"
                " messages summarized, "  # a previous summary is summarized again (as score counts it)
                f"{r.kept_messages:,} kept; {r.messages_removed:,} removed from the file"
                + (f", first kept {r.first_kept_id}" if r.first_kept_id else "")
                + (" (incremental)" if r.incremental else "")
                + (" (fallback summary)" if r.fallback_used else "")
                + (f", retention {r.retention:.0%}" if r.retention is not None else "")
                + (f"; {len(r.disagreements)} claim(s) the records contradict (--json: disagreements)"
                   if r.disagreements else "")
            )
        elif r.status == "planned":
            cut = r.cut or {}
            write(
                f"{where}: would compact (trigger: {r.trigger}; context {r.context_tokens:,} tokens"
                + (f", limit {r.limit:,}" if r.limit else "")
                + f"): summarize {r.summarized_messages:,} messages ({r.tokens_before - (cut.get('tokens_kept') or 0):,} tokens), "
                f"keep {r.kept_messages:,}" + (f" from {r.first_kept_id}" if r.first_kept_id else "")
                + (" (split turn)" if r.split_turn else "")
                + f"; summary prompt ≈ {r.prompt_tokens:,} tokens"
            )
        elif r.status == "error":
            write(f"{where}: error: {r.error} (left unchanged)")
        elif r.status == "not_smaller":
            write(f"{where}: {r.reason}")
        else:
            write(f"{where}: nothing to do ({r.reason})")
    if len(recs) > 50:
        write(f"... and {len(recs) - 50:,} more (use --json for all)")
    if len(recs) > 1 or report.cache_hits or report.cache_misses:
        ratio = f", ratio {report.ratio:.2f}x" if report.ratio else ""
        ratio += f", mean retention {report.retention:.0%}" if report.retention is not None else ""
        write(
            f"{len(recs):,} transcript(s): {report.count('compacted'):,} compacted, "
            f"{report.count('not_needed') + report.count('nothing_to_cut') + report.count('not_smaller'):,} unchanged, "
            f"{report.count('error'):,} failed"
            f"{f', {len(report.skipped):,} unreadable skipped' if report.skipped else ''}"
            f"{', ' + str(report.count('planned')) + ' planned' if report.dry_run else ''}; "
            f"{report.tokens_before:,} → {report.tokens_after:,} tokens{ratio}; "
            f"{report.seconds:.2f}s; cache {report.cache_hits:,} hit(s), {report.cache_misses:,} miss(es)"
        )
    if report.output and report.output != "-" and not report.dry_run:
        facts = [f for f in (report.output_format or None,  # a directory of shards: what its run knows
                             f"{report.bytes_after:,} bytes" if report.bytes_after else None) if f]
        facts_in = f"; input {report.bytes_before:,} bytes" if report.bytes_before else ""
        write(f"wrote {report.output}" + (f" ({', '.join(facts)}{facts_in})" if facts else ""))


def register(app: typer.Typer) -> None:
    app.command("compact")(compact)
