"""One transcript: plan, summarize, rebuild, with the guardrails on the summary."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .. import summary_prompt as sp
from ..errors import CtxtoolError, ExitCode
from ..formats.base import Format
from ..model import Transcript
from ..summarizers import Summarizer
from ..summarizers.heuristic.ledger import read_set
from ..tokens import Tokenizer, count_messages, get_tokenizer
from .plan import Plan, plan
from .rebuild import Rebuilt, Summary, rebuild
from .report import RecordReport
from .settings import CompactOptions
from .summarize import open_calls, summarize

Event = tuple[str, dict[str, Any]]


@dataclass(slots=True)
class Outcome:
    transcript: Transcript
    report: RecordReport
    events: list[Event] = field(default_factory=list)
    summary: str | None = None


def _heuristic() -> Summarizer:
    from ..summarizers.heuristic import HeuristicSummarizer

    return HeuristicSummarizer()


def _prompt_options(opts: CompactOptions, p: Plan) -> sp.PromptOptions:
    return sp.PromptOptions(
        style=opts.summary_style(),
        summary_directives=tuple(opts.summary_directives),
        retain_directives=tuple(opts.retain_directives),
        instructions=opts.instructions,
        max_tokens=opts.summary_max_tokens,
        tool_clip=opts.tool_clip,
        split_turn=p.split_turn,
    )


def compact_transcript(
    t: Transcript,
    summarizer: Summarizer | None = None,
    options: CompactOptions | None = None,
    *,
    dry_run: bool = False,
    tok: Tokenizer | None = None,
    out_format: str | None = None,
) -> Outcome:
    """Compact one transcript. Returns the new transcript (``t`` itself when nothing was done),
    its report and the events to log. Raises :class:`CtxtoolError` on failure. ``out_format``
    is the format it will be written in (default: its own)."""
    from ..formats import get_format

    opts = options or CompactOptions()
    tok = tok or get_tokenizer(opts.tokenizer)
    t0 = time.perf_counter()
    rep = RecordReport(t.label, t.index, t.id, format=t.format)
    p = plan(t, opts, tok)
    eff = p.view.effective
    rep.trigger, rep.context_tokens, rep.limit = p.trigger, p.context_tokens, p.limit
    rep.messages_before = len(p.view.messages)
    rep.tokens_before = sum(c for m, c in zip(eff, p.counts, strict=True) if m.agent_visible) + p.view.previous_tokens
    rep.incremental = p.view.previous_summary is not None
    rep.cut = p.cutpoint.to_json() if p.cutpoint else None
    events: list[Event] = []
    if p.cut is None:
        rep.status = "not_needed" if not p.should else "nothing_to_cut"
        rep.reason = p.reason
        rep.tokens_after, rep.messages_after = rep.tokens_before, rep.messages_before
        rep.seconds = time.perf_counter() - t0
        return Outcome(t, rep, events)
    rep.summarized_messages, rep.kept_messages = len(p.summarize), len(p.keep)
    rep.read_set = [r.to_json() for r in read_set(p.summarize)]
    rep.first_kept_id = p.keep[0].id if p.keep else None
    rep.split_turn = p.split_turn
    popts = _prompt_options(opts, p)
    read_new, mod_new = sp.extract_files(p.summarize)
    files = (sp.merge_files(p.view.prev_read, read_new), sp.merge_files(p.view.prev_modified, mod_new))
    extra = {"open_calls": open_calls(p.summarize)}
    if dry_run:
        req = sp.build_request(sp.summary_input(p.summarize), p.view.previous_summary, popts,
                               read_files=files[0], modified_files=files[1], extra=extra)
        rep.prompt_tokens = (sp.prompt_chars(req) + 3) // 4
        rep.status = "planned"
        rep.reason = f"would summarize {len(p.summarize)} messages and keep {len(p.keep)}"
        rep.messages_removed = len(p.summarize)
        rep.seconds = time.perf_counter() - t0
        return Outcome(t, rep, events)
    events.append(("compaction_start", {"transcript": t.label, "trigger": p.trigger, "messages_before": rep.messages_before,
                                        "tokens_before": rep.tokens_before, "context_tokens": p.context_tokens}))
    target = get_format(out_format or t.format)
    try:
        built, summary = _summarize_and_rebuild(summarizer or _heuristic(), t, p, popts, extra, opts, tok, rep, files,
                                                target)
    except CtxtoolError as e:
        events.append(("compaction_end", {"transcript": t.label, "messages_before": rep.messages_before,
                                          "messages_after": rep.messages_before, "error": e.message}))
        raise
    rep.messages_after = len(built.transcript.messages)
    rep.messages_removed = built.removed
    rep.status = "compacted"
    rep.reason = f"summarized {len(p.summarize)} messages, kept {len(p.keep)}"
    rep.seconds = time.perf_counter() - t0
    events.append(("compaction_end", {"transcript": t.label, "messages_before": rep.messages_before,
                                      "messages_after": rep.messages_after, "tokens_before": rep.tokens_before,
                                      "tokens_after": rep.tokens_after}))
    events.append(("compaction", {"transcript": t.label, "tokens_before": rep.tokens_before, "tokens_after": rep.tokens_after,
                                  "messages_removed": rep.messages_removed, "first_kept_id": rep.first_kept_id,
                                  "summary_tokens": rep.summary_tokens, "layout": opts.layout}))
    shown = summary.body if summary.retain is None else sp.format_retain(summary.retain, summary.body)
    return Outcome(built.transcript, rep, events, shown)


def _summarize_and_rebuild(summarizer: Summarizer, t: Transcript, p: Plan, popts: sp.PromptOptions,
                           extra: dict[str, Any], opts: CompactOptions, tok: Tokenizer, rep: RecordReport,
                           files: tuple[list[str], list[str]], target: Format) -> tuple[Rebuilt, Summary]:
    """The model's summary and the rebuilt transcript. A summary that is empty, repeats
    itself (a model stuck in a loop), or leaves the transcript no smaller, is rejected; with
    ``fallback`` the heuristic summary is used instead (then clipped, if it alone would not
    make the transcript smaller)."""
    problem: str | None = None
    text: str | None = None
    style = popts.style
    files_read, files_mod = files
    try:
        out = summarize(summarizer, p.summarize, p.view.previous_summary, popts, extra)
        rep.summary_calls, rep.chunks, rep.prompt_tokens = out.calls, out.chunks, out.prompt_tokens
        text = out.text or ""
    except CtxtoolError as e:
        if not opts.fallback:
            raise
        problem = e.message
    attempts = 0
    while True:
        attempts += 1
        if text is not None:
            retain, body = sp.parse_retain(text) if style == "retain" else (None, text)
            if not sp.strip_prefix(body).strip():
                problem = "the summary model returned an empty summary"
            elif (why := sp.degenerate(sp.strip_prefix(body))) is not None:
                problem = why
            else:
                body = sp.with_file_lists(sp.strip_prefix(body), files_read, files_mod)
                summary = Summary(body, retain, style, files_read, files_mod)
                built = rebuild(t, p, summary, opts, target)
                rep.tokens_after = sum(count_messages(built.visible, tok))
                rep.summary_tokens = tok.count(body) + (tok.count(retain) if retain else 0)
                if rep.tokens_after < rep.tokens_before:
                    rep.fallback_used = attempts > 1
                    return built, summary
                problem = (f"the compacted transcript would not be smaller ({rep.tokens_after:,} ≥ "
                           f"{rep.tokens_before:,} tokens): keep fewer recent tokens")
        if not opts.fallback or attempts >= 3:
            hint = "; use --fallback to use the heuristic summary instead" if not opts.fallback else ""
            raise CtxtoolError(f"summary rejected: {problem}{hint}", code=ExitCode.REMOTE, path=t.path)
        text = summarize(_heuristic(), p.summarize, p.view.previous_summary, popts, extra).text
        if attempts == 2:  # the heuristic summary was too large as well: clip it and its file lists
            summarized = sum(c for m, c in zip(p.view.effective, p.counts, strict=True) if any(m is x for x in p.summarize))
            text = sp.clip(text, max(summarized * 2 - len(sp.SUMMARY_PREFIX) - 60, 40))
            files_read, files_mod = files_read[-10:], files_mod[-10:]
