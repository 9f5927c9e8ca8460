"""One transcript: plan, summarize, rebuild, with the guardrails on the summary."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CtxtoolError, Failure
from ..formats.base import Format
from ..model import Transcript
from ..summarizers import Summarizer
from ..summarizers import prompt as sp
from ..summarizers.heuristic.ledger import read_set
from ..tokens.count import Tokenizer, count_messages, get_tokenizer
from ..tokens.heuristic import estimate
from .plan import Plan, plan_compaction
from .rebuild import Rebuilt, Summary, rebuild
from .report import RecordReport
from .settings import CompactOptions

if TYPE_CHECKING:
    from ..summarizers.heuristic import Facts
from ..formats import get_format
from ..summarizers.heuristic import HeuristicSummarizer
from ..summarizers.heuristic import facts as read_facts
from ..text.prose import one_line
from .summarize import open_calls, summarize

Event = tuple[str, dict[str, Any]]


@dataclass(slots=True)
class Outcome:
    transcript: Transcript
    report: RecordReport
    events: list[Event] = field(default_factory=list)
    summary: str | None = None


def _heuristic() -> Summarizer:
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
        budget=opts.summary_budget,
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
    opts = options or CompactOptions()
    tok = tok or get_tokenizer(opts.tokenizer)
    t0 = time.perf_counter()
    rep = RecordReport(t.label, t.index, t.id, format=t.format)
    p = plan_compaction(t, opts, tok)
    eff = p.view.effective
    rep.trigger, rep.context_tokens, rep.limit = p.trigger, p.context_tokens, p.limit
    rep.context_window, rep.window_source = p.window, p.window_source
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
    cwd = session_cwd(t)
    files = (_relative(sp.merge_files(p.view.prev_read, read_new), cwd),
             _relative(sp.merge_files(p.view.prev_modified, mod_new), cwd))
    pending = open_calls(p.summarize)
    extra = {"open_calls": pending, "summary_budget": opts.summary_budget, "cwd": cwd}
    summarizer = summarizer or _heuristic()
    facts = None
    if summarizer.name != "heuristic":  # a model: handed the facts, its summary checked against them

        facts = read_facts(p.summarize, p.view.previous_summary, open_calls=pending, cwd=cwd)
        popts.facts = facts.brief()
    if dry_run:
        req = sp.build_request(sp.summary_input(p.summarize), p.view.previous_summary, popts,
                               read_files=files[0], modified_files=files[1], extra=extra)
        rep.prompt_tokens = estimate(sp.prompt_chars(req))
        rep.status = "planned"
        rep.reason = f"would summarize {len(p.summarize)} messages and keep {len(p.keep)}"
        rep.messages_removed = len(p.summarize)
        rep.seconds = time.perf_counter() - t0
        return Outcome(t, rep, events)
    events.append(("compaction_start", {"transcript": t.label, "trigger": p.trigger, "messages_before": rep.messages_before,
                                        "tokens_before": rep.tokens_before, "context_tokens": p.context_tokens}))
    target = get_format(out_format or t.format)
    try:
        built, summary = _summarize_and_rebuild(summarizer, t, p, popts, extra, opts, tok, rep, files, target, facts)
    except NotSmaller as e:  # compaction would not help this record: left unchanged, not a failure
        rep.status, rep.reason = "not_smaller", e.reason
        rep.tokens_after, rep.messages_after = rep.tokens_before, rep.messages_before
        rep.seconds = time.perf_counter() - t0
        events.append(("compaction_end", {"transcript": t.label, "messages_before": rep.messages_before,
                                          "messages_after": rep.messages_before, "unchanged": e.reason}))
        return Outcome(t, rep, events)
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
                           files: tuple[list[str], list[str]], target: Format,
                           facts: Facts | None = None) -> tuple[Rebuilt, Summary]:
    """The model's summary and the rebuilt transcript. A summary is rejected when the rules of
    :mod:`ctxtool.score.quality` reject it (empty, an echo of the template or the input, a
    loop), when it leaves the transcript no smaller, when its retention
    (:func:`ctxtool.score.score`) is below ``min_retention``, or when a model's summary makes more
    than ``max_false_claims`` claims the transcript's records contradict (``facts``); with
    ``fallback`` the heuristic summary is used instead (then clipped, if it alone would not make
    the transcript smaller)."""
    problem: str | None = None
    text: str | None = None
    try:
        out = summarize(summarizer, p.summarize, p.view.previous_summary, popts, extra)
        rep.summary_calls, rep.chunks, rep.prompt_tokens = out.calls, out.chunks, out.prompt_tokens
        text = out.text or ""
    except CtxtoolError as e:
        if not opts.fallback:
            raise
        problem = e.message
    attempts = 0
    heuristic = summarizer.name == "heuristic"
    while True:
        attempts += 1
        if text is not None:
            got = _accept(text, t, p, popts, opts, tok, rep, files if attempts < 3 else
                          (files[0][-10:], files[1][-10:]), target, None if heuristic else facts)
            if not isinstance(got, str):
                rep.fallback_used = attempts > 1
                return got
            problem = got
        if not opts.fallback or attempts >= 3:
            if (problem or "").startswith(NOT_SMALLER):
                raise NotSmaller(_not_smaller(problem or "", p, opts, rep))
            raise CtxtoolError(_rejected(problem or "", t, p, opts, rep, heuristic=heuristic or attempts > 1),
                               kind=Failure.REMOTE, path=t.path)
        heuristic = True
        text = summarize(_heuristic(), p.summarize, p.view.previous_summary, popts, extra).text
        if attempts == 2:  # the heuristic summary was too large as well: clip it and its file lists
            text = sp.clip(text, max(_summarized_tokens(p) * 2 - len(sp.SUMMARY_PREFIX) - 60, 40))


NOT_SMALLER = "the compacted transcript would not be smaller"


def _relative(paths: list[str], cwd: str | None) -> list[str]:
    """File list paths relative to the session's directory, each once."""
    if not cwd:
        return paths
    pre = cwd.rstrip("/") + "/"
    return list(dict.fromkeys(x[len(pre):] if x.startswith(pre) else x for x in paths))


def session_cwd(t: Transcript) -> str | None:
    """The working directory the session recorded (Claude Code, Codex, pi, opencode), if any."""
    sess = t.extra.get("session") if isinstance(t.extra, dict) else None
    cwd = sess.get("cwd") if isinstance(sess, dict) else None
    if not cwd and isinstance(t.extra, dict):
        cwd = t.extra.get("cwd")
    return cwd if isinstance(cwd, str) and cwd.startswith("/") else None


class NotSmaller(Exception):
    """Compaction would not make this transcript smaller: it is left unchanged (``reason``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _not_smaller(problem: str, p: Plan, opts: CompactOptions, rep: RecordReport) -> str:
    """Why a record is left unchanged, and what would compact it."""
    return (f"left unchanged: {problem}: the {len(p.summarize):,} summarized message(s) hold "
            f"{_summarized_tokens(p):,} tokens, no more than their summary ({rep.summary_tokens:,}); "
            f"a smaller --keep-recent-tokens (now {opts.keep_recent_tokens:,}) summarizes more")


def _summarized_tokens(p: Plan) -> int:
    return sum(c for m, c in zip(p.view.effective, p.counts, strict=True) if any(m is x for x in p.summarize))


def _accept(text: str, t: Transcript, p: Plan, popts: sp.PromptOptions, opts: CompactOptions, tok: Tokenizer,
            rep: RecordReport, files: tuple[list[str], list[str]], target: Format,
            facts: Facts | None = None) -> tuple[Rebuilt, Summary] | str:
    """The rebuilt transcript with this summary, or why the summary is rejected."""
    # lazy: start-up (loaded only when this runs: ..score, ..score.core)
    from ..score import quality
    from ..score.core import score

    retain, body = sp.parse_retain(text) if popts.style == "retain" else (None, text)
    body = sp.strip_prefix(body)
    why = quality.reject(body, lambda: sp.serialize(sp.summary_input(p.summarize), popts.tool_clip))
    if why is not None:
        return why
    if facts is not None:
        rep.disagreements = [d.to_json() for d in facts.check(body)]
    if facts is not None and opts.max_false_claims is not None and len(rep.disagreements) > opts.max_false_claims:
        shown = "; ".join(f"{d['kind']}: {one_line(d['line'], 80)} ({one_line(d['fact'], 80)})"
                          for d in rep.disagreements[:2])
        return (f"it makes {len(rep.disagreements)} claim(s) the transcript's records contradict, more than "
                f"--max-false-claims {opts.max_false_claims} ({shown})")
    body = sp.with_file_lists(body, *files)
    summary = Summary(body, retain, popts.style, *files)
    built = rebuild(t, p, summary, opts, target)
    rep.tokens_after = sum(count_messages(built.visible, tok))
    rep.summary_tokens = tok.count(body) + (tok.count(retain) if retain else 0)
    if rep.tokens_after >= rep.tokens_before:
        return f"{NOT_SMALLER} ({rep.tokens_after:,} ≥ {rep.tokens_before:,} tokens)"
    sc = score(t, built.transcript, tok=tok, with_controls=False)
    rep.retention = None if sc.retention is None else round(sc.retention, 4)
    # nothing probed: no retention to hold against --min-retention (the report says null)
    if opts.min_retention is not None and sc.retention is not None and sc.retention < opts.min_retention:
        lost = "; ".join(f"{x.kind}: {one_line(x.text, 80)}" for x in sc.lost[:3])
        return (f"its retention {sc.retention:.1%} is below --min-retention {opts.min_retention:.1%}"
                + (f" (lost {len(sc.lost)} probe(s): {lost}{' ...' if len(sc.lost) > 3 else ''})" if lost else ""))
    return built, summary


def _rejected(problem: str, t: Transcript, p: Plan, opts: CompactOptions, rep: RecordReport, *, heuristic: bool) -> str:
    """The one-line refusal: what happened, and what would help."""
    who = f"record {t.id or t.index}: " if t.record is not None else ""
    msg = f"{who}summary rejected: {problem}"
    if not heuristic:
        return msg + "; use --fallback to use the heuristic summary instead"
    if opts.min_retention is not None and "--min-retention" in problem:
        return (f"{msg}; the heuristic summary is in use: keep more verbatim (a larger --keep-recent-tokens), "
                "lower --min-retention, or leave such records unchanged with --on-error skip")
    return msg
