"""Compaction: decide, cut, summarize the old part, rebuild the transcript (seeds 000, 001, 003, 004).

>>> from ctxtool import compact                                     # doctest: +SKIP
>>> report = compact.compact_file("session.jsonl", "out.jsonl", options=compact.CompactOptions(force=True))
>>> report.records[0].ratio

Layouts (``CompactOptions.layout``):

* ``summary`` (seeds 000/003, the default): system prompt + the summary + the messages kept
  verbatim after a cut found by seed 003's backward walk (``keep_recent_tokens``).
* ``retain`` (seed 001): ``<retain>`` + ``<summary>`` + the last N turns.
* ``initial`` (seed 004): the initial context (system prompt and first user message) + the
  summary + the last 10 messages.

Session formats (claude-code, pi, codex, ctxtool) record the compaction the way their tool
does (a :class:`~ctxtool.model.Compaction` entry the writer renders: a pi ``compaction``
entry, Claude Code's ``compact_boundary`` + summary line, a Codex ``compacted`` line, a
canonical ``compaction`` entry with ``first_kept_id``) and drop the summarized messages;
datasets get a user message ``[Previous conversation summary]`` in place of the summarized
messages and keep every other field. Kept messages are never touched, so their source lines
are written byte for byte. The output is re-read and validated before it replaces anything.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import summary_prompt as sp
from .errors import CtxtoolError, ExitCode
from .events import EventLog
from .history import CutPoint, cut_candidates, find_cut, is_tool_message
from .model import (
    KIND_COMPACTION_SUMMARY,
    KIND_TOOL_RESULT_ARCHIVED,
    KIND_TOOL_SUMMARY,
    Block,
    Compaction,
    Cont,
    Message,
    Metadata,
    Record,
    Transcript,
)
from .pairing import closed_groups
from .paths import refuse_overwrite
from .summarizers import ContextOverflowError
from .tokens import Tokenizer, count_messages, get_tokenizer

LAYOUTS = ("summary", "retain", "initial")
SESSION_FORMATS = ("claude-code", "pi", "codex", "ctxtool")
#: formats whose compaction entry is shown to the model as the summary text itself
RAW_SUMMARY_FORMATS = ("pi", "ctxtool")
#: bookkeeping records dropped with the summarized messages (kind prefixes); others are kept
DROPPED_RECORDS = ("progress", "file-history-snapshot", "system:", "queue-operation", "event_msg", "response_item")
SHAREGPT_ACK = "Understood. I have the summary of the earlier conversation and will continue from it."
PROMPT_MARGIN_TOKENS = 1024
DEFAULT_SUMMARY_WINDOW = 128_000
STATUSES = ("compacted", "not_needed", "nothing_to_cut", "planned", "error")


@dataclass(slots=True)
class CompactOptions:
    layout: str = "summary"
    keep_recent_tokens: int = 20_000
    keep_recent: int = 5  # seed 000 KeepRecent, when keep_recent_tokens is 0
    retain_last_turns: int = 1
    keep_last_messages: int = 10
    force: bool = False
    tokenizer: str = "heuristic"
    context_window: int | None = None
    reserve_tokens: int = 16_384
    max_tokens: int = 8_000  # seed 000 MaxTokens: the limit when no window is known
    max_messages: int = 50  # seed 000 MaxMessages: the last fallback
    policy: str = "seed000"  # the trigger policy (ctxtool.triggers.POLICIES)
    style: str | None = None  # structured | retain (default: retain for the retain layout)
    summary_directives: Sequence[str] = ()
    retain_directives: Sequence[str] = ()
    instructions: str | None = None
    tool_digest: bool = False
    tool_call_cutoff: int = 10
    fallback: bool = False
    tool_clip: int = sp.TOOL_RESULT_CLIP
    summary_max_tokens: int = 4096

    def summary_style(self) -> str:
        if self.style:
            return self.style
        return "retain" if self.layout == "retain" else "structured"

    def to_json(self) -> dict[str, Any]:
        return {
            "layout": self.layout,
            "keep_recent_tokens": self.keep_recent_tokens,
            "retain_last_turns": self.retain_last_turns,
            "keep_last_messages": self.keep_last_messages,
            "force": self.force,
            "tokenizer": self.tokenizer,
            "context_window": self.context_window,
            "reserve_tokens": self.reserve_tokens,
            "style": self.summary_style(),
            "tool_digest": self.tool_digest,
            "fallback": self.fallback,
        }


@dataclass(slots=True)
class RecordReport:
    """What happened to one transcript."""

    label: str
    index: int
    id: str | None
    status: str = "not_needed"
    reason: str = ""
    format: str = ""
    trigger: str = ""
    context_tokens: int = 0
    limit: int | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    messages_before: int = 0
    messages_after: int = 0
    messages_removed: int = 0
    summarized_messages: int = 0
    kept_messages: int = 0
    summary_tokens: int = 0
    prompt_tokens: int = 0
    summary_calls: int = 0
    chunks: int = 0
    incremental: bool = False
    fallback_used: bool = False
    first_kept_id: str | None = None
    split_turn: bool = False
    cut: dict[str, Any] | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def ratio(self) -> float | None:
        if self.status != "compacted" or not self.tokens_after:
            return None
        return self.tokens_before / self.tokens_after

    def to_json(self) -> dict[str, Any]:
        r = self.ratio
        return {
            "label": self.label,
            "index": self.index,
            "id": self.id,
            "status": self.status,
            "reason": self.reason,
            "format": self.format,
            "trigger": self.trigger,
            "context_tokens": self.context_tokens,
            "limit": self.limit,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "ratio": round(r, 3) if r is not None else None,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "messages_removed": self.messages_removed,
            "summarized_messages": self.summarized_messages,
            "kept_messages": self.kept_messages,
            "summary_tokens": self.summary_tokens,
            "prompt_tokens": self.prompt_tokens,
            "summary_calls": self.summary_calls,
            "chunks": self.chunks,
            "incremental": self.incremental,
            "fallback_used": self.fallback_used,
            "first_kept_id": self.first_kept_id,
            "split_turn": self.split_turn,
            "cut": self.cut,
            "error": self.error,
            "seconds": round(self.seconds, 4),
        }


@dataclass(slots=True)
class CompactReport:
    """The result of compacting one file (or several: ``compact_paths``)."""

    path: str
    output: str | None
    format: str = ""
    output_format: str = ""
    summarizer: str = "heuristic"
    dry_run: bool = False
    records: list[RecordReport] = field(default_factory=list)
    seconds: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    jobs: int = 1
    bytes_before: int | None = None
    bytes_after: int | None = None
    summaries: list[str | None] = field(default_factory=list)  # per record (None: unchanged)

    def count(self, status: str) -> int:
        return sum(1 for r in self.records if r.status == status)

    @property
    def tokens_before(self) -> int:
        return sum(r.tokens_before for r in self.records if r.status == "compacted")

    @property
    def tokens_after(self) -> int:
        return sum(r.tokens_after for r in self.records if r.status == "compacted")

    @property
    def ratio(self) -> float | None:
        return self.tokens_before / self.tokens_after if self.tokens_after else None

    @property
    def records_per_second(self) -> float | None:
        return len(self.records) / self.seconds if self.seconds > 0 else None

    def to_json(self) -> dict[str, Any]:
        r = self.ratio
        rps = self.records_per_second
        return {
            "path": self.path,
            "output": self.output,
            "format": self.format,
            "output_format": self.output_format,
            "summarizer": self.summarizer,
            "dry_run": self.dry_run,
            "records": len(self.records),
            "compacted": self.count("compacted"),
            "not_needed": self.count("not_needed") + self.count("nothing_to_cut"),
            "planned": self.count("planned"),
            "errors": self.count("error"),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "ratio": round(r, 3) if r is not None else None,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "seconds": round(self.seconds, 4),
            "records_per_second": round(rps, 2) if rps is not None else None,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "jobs": self.jobs,
            "per_record": [x.to_json() for x in self.records],
        }


# -- where the agent's context starts ------------------------------------------------------------------
@dataclass(slots=True)
class View:
    """The agent's context in a transcript that may already hold compactions."""

    messages: list[Message]  # every message of the transcript
    effective: list[Message]  # what the agent sees (system prompt + messages after the last compaction)
    previous_summary: str | None = None
    previous_tokens: int = 0  # tokens of a previous summary that is not a message (compaction entry)
    prev_read: list[str] = field(default_factory=list)
    prev_modified: list[str] = field(default_factory=list)


def _summary_of_compaction(c: Compaction) -> str:
    text = c.summary or ""
    hist = c.details.get("replacement_history")
    if isinstance(hist, list) and len(text.strip()) < 200:  # Codex: the summary lives in the history
        parts = []
        for item in hist:
            if isinstance(item, dict) and item.get("type") == "message":
                for p in item.get("content") or []:
                    if isinstance(p, dict) and isinstance(p.get("text"), str):
                        parts.append(f"[{item.get('role', '?')}]: {p['text']}")
        if parts:
            text = (text + "\n\n" if text.strip() else "") + "\n".join(parts)
    return text


def context_view(t: Transcript, tok: Tokenizer) -> View:
    msgs = t.messages
    marker: Any = None
    for e in reversed(t.entries):
        if isinstance(e, Compaction) or (isinstance(e, Message) and e.metadata.kind == KIND_COMPACTION_SUMMARY):
            marker = e
            break
    if marker is None:
        return View(msgs, list(msgs))
    pos = {id(m): i for i, m in enumerate(msgs)}
    prev_tokens = 0
    if isinstance(marker, Message):
        i = pos[id(marker)]
        # a retain message and a summary message written together are one summary
        j = i
        while j > 0 and msgs[j - 1].metadata.kind == KIND_COMPACTION_SUMMARY and msgs[j - 1].role == "user":
            j -= 1
        prev = "\n\n".join(sp.strip_prefix(m.text()) for m in msgs[j : i + 1] if m.role == "user")
        prev_tokens = sum(count_messages(msgs[j : i + 1], tok))
        start = i + 1
    else:
        prev = _summary_of_compaction(marker)
        prev_tokens = tok.count(sp.SUMMARY_PREFIX + "\n\n" + prev)
        target = None
        for c, e in t.extra.get("pi_refs") or ():
            if c is marker:
                target = e
        if target is None and marker.first_kept_id is not None:
            target = next((m for m in msgs if m.id == marker.first_kept_id), None)
        if isinstance(target, Message) and id(target) in pos:
            start = pos[id(target)]
        else:  # the messages after the compaction entry
            after = t.entries[t.entries.index(marker) + 1 :]
            first = next((e for e in after if isinstance(e, Message)), None)
            start = pos[id(first)] if first is not None else len(msgs)
    eff = [m for m in msgs[:start] if m.role == "system"]
    eff += [m for m in msgs[start:] if m.metadata.kind != KIND_COMPACTION_SUMMARY]
    r, w = sp.parse_file_lists(prev)
    return View(msgs, eff, sp.strip_file_lists(prev) or None, prev_tokens, r, w)


# -- planning -----------------------------------------------------------------------------------------
@dataclass(slots=True)
class Plan:
    view: View
    counts: list[int]
    should: bool
    trigger: str
    context_tokens: int
    limit: int | None
    window: int | None
    cut: int | None = None  # index into view.effective
    cutpoint: CutPoint | None = None
    initial: Message | None = None  # seed 004: the first user message, kept
    summarize: list[Message] = field(default_factory=list)
    keep: list[Message] = field(default_factory=list)
    reason: str = ""

    @property
    def split_turn(self) -> bool:
        return bool(self.cutpoint and self.cutpoint.split_turn)


def resolve_window(t: Transcript, opts: CompactOptions) -> int | None:
    if opts.context_window:
        return opts.context_window
    cw = t.extra.get("context_window")
    if isinstance(cw, int) and cw > 0:
        return cw
    from .registry import lookup

    for m in reversed(t.messages):
        if m.role == "assistant" and m.model:
            info = lookup(m.model)
            if info and info.context_window:
                return int(info.context_window)
            break
    return None


def decide(eff: list[Message], window: int | None, opts: CompactOptions, tok: Tokenizer) -> tuple[bool, str, int, int | None]:
    """The history issue's trigger (``triggers``, policy ``opts.policy``; seed 000 by default:
    context ≥ window − reserve, else ≥ MaxTokens without a window); ``force`` skips it."""
    from . import triggers

    settings = triggers.TriggerSettings(
        context_window=window, reserve_tokens=opts.reserve_tokens, max_tokens=opts.max_tokens,
        max_messages=opts.max_messages,
    )
    res = triggers.check_messages(eff, settings, policy=opts.policy, tokenizer=tok)
    v = res.verdict
    used = res.context.tokens
    if opts.force:
        return True, "force", used, v.limit if v.unit == "tokens" else None
    if v.status == triggers.ERROR:
        raise CtxtoolError(v.reason, code=ExitCode.USAGE)
    why = f"{v.policy}: {v.rule}" + (f" ({v.used:,} vs {v.limit:,})" if v.limit is not None else "")
    return v.compact, why if v.compact else (v.reason or f"{v.policy}: below the limit"), used, v.limit if v.unit == "tokens" else None


def _real_user(m: Message) -> bool:
    return m.role == "user" and not is_tool_message(m) and m.metadata.kind not in (KIND_COMPACTION_SUMMARY, KIND_TOOL_SUMMARY)


def _problem_keys(msgs: list[Message]) -> set[tuple[str, str | None, str]]:
    from .validate import check_messages

    return {(p.code, p.message_id, p.message.split(" (in ")[0]) for p in check_messages(msgs)}


def plan(t: Transcript, opts: CompactOptions, tok: Tokenizer | None = None) -> Plan:
    """Decide and cut, without summarizing."""
    tok = tok or get_tokenizer(opts.tokenizer)
    view = context_view(t, tok)
    eff = view.effective
    counts = count_messages(eff, tok)
    window = resolve_window(t, opts)
    should, trigger, ctx_tokens, limit = decide(eff, window, opts, tok)
    p = Plan(view, counts, should, trigger, ctx_tokens, limit, window)
    if not should:
        p.reason = trigger
        return p
    n = len(eff)
    ok = cut_candidates(eff)
    first_conv = next((i for i, m in enumerate(eff) if m.role != "system"), n)
    cut: int | None = None
    if opts.layout == "summary":
        lim = limit if window else None
        p.cutpoint = find_cut(
            eff, keep_recent_tokens=opts.keep_recent_tokens, keep_recent=opts.keep_recent,
            effective_limit=lim, tokenizer=tok, counts=counts,
        )
        cut = p.cutpoint.cut_index
    elif opts.layout == "retain":
        users = [i for i in range(n) if ok[i] and _real_user(eff[i])]
        turns = max(opts.retain_last_turns, 0)
        if turns == 0:
            cut = n
        elif len(users) >= turns:
            cut = users[-turns]
    elif opts.layout == "initial":
        f = next((i for i in range(n) if _real_user(eff[i])), None)
        if f is not None and closed_groups(eff)[f + 1 : f + 2] in ([f + 1], []):
            p.initial = eff[f]
            target = n - max(opts.keep_last_messages, 0)
            for i in range(min(target, n - 1), f + 1, -1):
                if ok[i]:
                    cut = i
                    break
            if opts.keep_last_messages == 0:
                cut = n
        else:  # no separable initial request: the summary layout with a message budget
            p.cutpoint = find_cut(eff, keep_recent_tokens=None, keep_recent=opts.keep_last_messages, tokenizer=tok, counts=counts)
            cut = p.cutpoint.cut_index
    else:
        raise CtxtoolError(f"unknown layout {opts.layout!r}; choose one of: {', '.join(LAYOUTS)}", code=ExitCode.USAGE)
    if cut is None or cut <= first_conv:
        p.reason = "nothing to cut: the recent part already fits the kept budget"
        return p
    # the cut must leave no orphan: move it back to an earlier candidate if it would
    baseline = _problem_keys(eff)
    while cut is not None and cut > first_conv:
        kept = [m for m in eff[:cut] if m.role == "system"] + ([p.initial] if p.initial else []) + eff[cut:]
        if _problem_keys(kept) <= baseline:
            break
        cut = next((i for i in range(cut - 1, first_conv, -1) if ok[i]), None)
    if cut is None or cut <= first_conv:
        p.reason = "no cut point leaves the tool calls paired"
        return p
    p.cut = cut
    p.summarize = [m for m in eff[:cut] if m.role != "system" and m is not p.initial]
    p.keep = eff[cut:]
    if not [m for m in p.summarize if m.agent_visible]:
        p.cut = None
        p.reason = "nothing to summarize"
    return p


# -- summarizing --------------------------------------------------------------------------------------
def _open_calls(msgs: Sequence[Message]) -> list[str]:
    """Tool calls of a trailing assistant message (unanswered when the history was cut)."""
    for m in reversed(msgs):
        if m.role == "assistant" and m.agent_visible:
            return [f"{b.name}({sp.clip(b.arguments_text(), 200)})" for b in m.tool_calls()]
        if m.agent_visible and m.role != "system":
            return []
    return []


@dataclass(slots=True)
class SummaryOutcome:
    text: str
    calls: int
    chunks: int
    prompt_tokens: int


def summarize(
    summarizer: Any,
    msgs: Sequence[Message],
    previous_summary: str | None,
    popts: sp.PromptOptions,
    extra: dict[str, Any] | None = None,
) -> SummaryOutcome:
    """One request when the prompt fits the summary model's window; otherwise (or when the
    model reports a context overflow) summarize in chunks, each merged into the running summary."""
    inp = sp.summary_input(msgs)
    req = sp.build_request(inp, previous_summary, popts, extra=extra)
    window = int(getattr(summarizer, "context_window", 0) or DEFAULT_SUMMARY_WINDOW)
    budget_chars = max((window - popts.max_tokens - PROMPT_MARGIN_TOKENS) * 4, 4000)
    chars = sp.prompt_chars(req)
    prompt_tokens = (chars + 3) // 4
    if chars <= budget_chars:
        try:
            return SummaryOutcome(summarizer.summarize(req), 1, 1, prompt_tokens)
        except ContextOverflowError:
            budget_chars = chars // 2
    return _summarize_chunks(summarizer, inp, previous_summary, popts, extra, budget_chars, prompt_tokens)


def _summarize_chunks(
    summarizer: Any,
    inp: list[Message],
    previous_summary: str | None,
    popts: sp.PromptOptions,
    extra: dict[str, Any] | None,
    budget_chars: int,
    prompt_tokens: int,
    depth: int = 0,
) -> SummaryOutcome:
    overhead = 6000 + len(previous_summary or "") + popts.max_tokens * 4
    per_chunk = max(budget_chars - overhead, 2000)
    chunks: list[list[Message]] = []
    cur: list[Message] = []
    size = 0
    for m in inp:
        s = len(sp.serialize_message(m, popts.tool_clip)) + 2
        if cur and size + s > per_chunk:
            chunks.append(cur)
            cur, size = [], 0
        cur.append(m)
        size += s
    if cur:
        chunks.append(cur)
    running = previous_summary
    calls = 0
    for i, ch in enumerate(chunks):
        last = i == len(chunks) - 1
        req = sp.build_request(ch, running, popts, extra=extra if last else {k: v for k, v in (extra or {}).items() if k != "open_calls"})
        try:
            running = summarizer.summarize(req)
            calls += 1
        except ContextOverflowError:
            if depth >= 3 or len(ch) < 2 and sp.prompt_chars(req) < 8000:
                raise
            sub = _summarize_chunks(summarizer, ch, running, popts, extra, sp.prompt_chars(req) // 2, 0, depth + 1)
            running = sub.text
            calls += sub.calls
    return SummaryOutcome(running or "", calls, len(chunks), prompt_tokens)


# -- rebuilding ---------------------------------------------------------------------------------------
def _summary_message(text: str, kind: str = KIND_COMPACTION_SUMMARY, role: str = "user") -> Message:
    return Message(role, [Block("text", text=text)], metadata=Metadata(kind=kind), dirty=True)


def _summary_messages(t: Transcript, body: str, retain: str | None, style: str) -> list[Message]:
    """Dataset layout: the summary as user message(s) (seed 001: retain first)."""
    out = []
    if style == "retain":
        if retain and retain.strip():
            out.append(_summary_message(f"{sp.SUMMARY_PREFIX}\n\n<retain>\n{retain.strip()}\n</retain>"))
            out.append(_summary_message(f"<summary>\n{body.strip()}\n</summary>"))
        else:
            out.append(_summary_message(f"{sp.SUMMARY_PREFIX}\n\n<summary>\n{body.strip()}\n</summary>"))
    else:
        out.append(_summary_message(f"{sp.SUMMARY_PREFIX}\n\n{body.strip()}"))
    return out


def _compaction_text(fmt: str, body: str, retain: str | None, style: str) -> str:
    text = sp.format_retain(retain or "", body) if style == "retain" else body.strip()
    return text if fmt in RAW_SUMMARY_FORMATS else f"{sp.SUMMARY_PREFIX}\n\n{text}"


def tool_digest(keep: Sequence[Message], cutoff: int) -> tuple[list[Message], Message | None]:
    """Seed 000's recent-window digest: the oldest visible tool results beyond ``cutoff``
    (as archived copies) and one digest message."""
    results = [m for m in keep if m.agent_visible and m.tool_results()]
    excess = len(results) - cutoff
    if cutoff < 0 or excess <= 0:
        return [], None
    archived = results[:excess]
    lines = []
    for m in archived:
        for b in m.tool_results():
            err = " (error)" if b.is_error else ""
            lines.append(f"- {b.name or b.id or 'tool'}{err}: {sp.clip(' '.join(b.text.split()), 200)}")
    digest = Message(
        "user",
        [Block("text", text=f"{sp.TOOL_DIGEST_PREFIX}\n" + "\n".join(lines))],
        metadata=Metadata(agent_visible=True, user_visible=False, kind=KIND_TOOL_SUMMARY),
        dirty=True,
    )
    return archived, digest


def _archived_copy(m: Message) -> Message:
    meta = Metadata(False, m.metadata.user_visible, KIND_TOOL_RESULT_ARCHIVED, m.metadata.output_ref, dict(m.metadata.extra))
    return Message(m.role, m.content, m.id, meta, m.usage, m.usage_key, m.model, m.lines, True, dict(m.extra))


def rebuild(t: Transcript, p: Plan, body: str, retain: str | None, style: str, files: tuple[list[str], list[str]],
            opts: CompactOptions, out_format: str | None = None) -> tuple[Transcript, list[Message], int]:
    """A new transcript (the input is not changed), the messages the agent now sees and the
    number of messages removed. ``out_format`` (default: the transcript's) decides how the
    summary is recorded: a compaction entry for session formats, a message for datasets."""
    fmt = out_format or t.format
    msgs = p.view.messages
    first_kept = p.keep[0] if p.keep else None
    kept_ids = {id(m) for m in p.keep}
    keep_before = {id(m) for m in msgs if m.role == "system"}
    if p.initial is not None:
        keep_before.add(id(p.initial))
    # messages before the first kept one go (the summarized part and anything an earlier
    # compaction already summarized), as do earlier summaries
    doomed: set[int] = set()
    for m in msgs:
        if m is first_kept:
            break
        if id(m) not in keep_before:
            doomed.add(id(m))
    for m in msgs:
        if m.metadata.kind == KIND_COMPACTION_SUMMARY and id(m) not in kept_ids:
            doomed.add(id(m))
    session = fmt in SESSION_FORMATS
    archived: dict[int, Message] = {}
    digest = None
    if opts.tool_digest:
        arch, digest = tool_digest(p.keep, opts.tool_call_cutoff)
        archived = {id(m): _archived_copy(m) for m in arch}
    new_entries: list[Any] = []
    inserted = False
    first_doomed_seen = False
    new_msgs: list[Message] = []
    comp: Compaction | None = None
    for e in t.entries:
        if isinstance(e, Message) and e is first_kept and not inserted:
            if session:
                comp = Compaction(
                    summary=_compaction_text(fmt, body, retain, style),
                    first_kept_id=e.id,
                    tokens_before=p.context_tokens,
                    details={"trigger": "manual" if opts.force else "auto"},
                )
                if fmt == "pi":
                    comp.details["details"] = {"readFiles": files[0], "modifiedFiles": files[1]}
                comp.dirty = True
                new_entries.append(comp)
                new_msgs.append(_summary_message(comp.summary))
            else:
                sm = _summary_messages(t, body, retain, style)
                new_entries.extend(sm)
                new_msgs.extend(sm)
                if fmt == "sharegpt" and first_kept.role != "assistant":
                    ack = _summary_message(SHAREGPT_ACK, role="assistant")
                    new_entries.append(ack)
                    new_msgs.append(ack)
            inserted = True
        if isinstance(e, Message):
            if id(e) in doomed:
                first_doomed_seen = True
                continue
            e2 = archived.get(id(e), e)
            new_entries.append(e2)
            new_msgs.append(e2)
        elif isinstance(e, Cont):
            if id(e.message) in doomed or id(e.message) in archived:
                continue
            new_entries.append(e)
        elif isinstance(e, Compaction):
            continue  # merged into the new summary
        elif isinstance(e, Record):
            if first_doomed_seen and not inserted and e.kind.startswith(DROPPED_RECORDS):
                continue
            new_entries.append(e)
        else:  # pragma: no cover
            new_entries.append(e)
    if not inserted:  # retain with 0 turns: nothing kept, the summary goes last
        raise CtxtoolError("nothing would be kept after the summary", code=ExitCode.USAGE)
    if digest is not None:
        new_entries.append(digest)
        new_msgs.append(digest)
    extra = dict(t.extra)
    if "pi_refs" in extra:
        extra["pi_refs"] = [(c, e) for c, e in extra["pi_refs"] if any(c is x for x in new_entries)]
        if comp is not None and first_kept is not None:
            extra["pi_refs"].append((comp, first_kept))
    out = Transcript(
        format=t.format, entries=new_entries, path=t.path, index=t.index, id=t.id, record=t.record,
        messages_key=t.messages_key, lineno=t.lineno, extra=extra,
    )
    visible = [m for m in new_msgs if m.agent_visible]
    return out, visible, len(doomed)


# -- one transcript -----------------------------------------------------------------------------------
@dataclass(slots=True)
class Outcome:
    transcript: Transcript
    report: RecordReport
    events: list[tuple[str, dict[str, Any]]]
    summary: str | None = None


def compact_transcript(
    t: Transcript,
    summarizer: Any = None,
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
    if opts.layout not in LAYOUTS:
        raise CtxtoolError(f"unknown layout {opts.layout!r}; choose one of: {', '.join(LAYOUTS)}", code=ExitCode.USAGE)
    tok = tok or get_tokenizer(opts.tokenizer)
    t0 = time.perf_counter()
    rep = RecordReport(t.label, t.index, t.id, format=t.format)
    p = plan(t, opts, tok)
    eff = p.view.effective
    rep.trigger = p.trigger
    rep.context_tokens = p.context_tokens
    rep.limit = p.limit
    rep.messages_before = len(p.view.messages)
    rep.tokens_before = sum(c for m, c in zip(eff, p.counts, strict=True) if m.agent_visible) + p.view.previous_tokens
    rep.incremental = p.view.previous_summary is not None
    rep.cut = p.cutpoint.to_json() if p.cutpoint else None
    events: list[tuple[str, dict[str, Any]]] = []
    if p.cut is None:
        rep.status = "not_needed" if not p.should else "nothing_to_cut"
        rep.reason = p.reason
        rep.tokens_after = rep.tokens_before
        rep.messages_after = rep.messages_before
        rep.seconds = time.perf_counter() - t0
        return Outcome(t, rep, events)
    rep.summarized_messages = len(p.summarize)
    rep.kept_messages = len(p.keep)
    rep.first_kept_id = p.keep[0].id if p.keep else None
    rep.split_turn = p.split_turn
    style = opts.summary_style()
    popts = sp.PromptOptions(
        style=style,
        summary_directives=tuple(opts.summary_directives),
        retain_directives=tuple(opts.retain_directives),
        instructions=opts.instructions,
        max_tokens=opts.summary_max_tokens,
        tool_clip=opts.tool_clip,
        split_turn=p.split_turn,
    )
    read_new, mod_new = sp.extract_files(p.summarize)
    files_read = sp.merge_files(p.view.prev_read, read_new)
    files_mod = sp.merge_files(p.view.prev_modified, mod_new)
    extra = {"open_calls": _open_calls(p.summarize)}
    if dry_run:
        inp = sp.summary_input(p.summarize)
        req = sp.build_request(inp, p.view.previous_summary, popts, read_files=files_read, modified_files=files_mod, extra=extra)
        rep.prompt_tokens = (sp.prompt_chars(req) + 3) // 4
        rep.status = "planned"
        rep.reason = f"would summarize {len(p.summarize)} messages and keep {len(p.keep)}"
        rep.messages_removed = len(p.summarize)
        rep.seconds = time.perf_counter() - t0
        return Outcome(t, rep, events)

    events.append(("compaction_start", {"transcript": t.label, "trigger": p.trigger, "messages_before": rep.messages_before,
                                        "tokens_before": rep.tokens_before, "context_tokens": p.context_tokens}))
    try:
        if summarizer is None:
            from .summarizers.heuristic import HeuristicSummarizer

            summarizer = HeuristicSummarizer()
        new_t, visible, removed, body, retain = _summarize_and_rebuild(
            summarizer, t, p, popts, extra, opts, tok, rep, style, files_read, files_mod, out_format
        )
    except CtxtoolError as e:
        events.append(("compaction_end", {"transcript": t.label, "messages_before": rep.messages_before,
                                          "messages_after": rep.messages_before, "error": e.message}))
        raise
    new_msgs = new_t.messages
    rep.messages_after = len(new_msgs)
    rep.messages_removed = removed
    rep.status = "compacted"
    rep.reason = f"summarized {len(p.summarize)} messages, kept {len(p.keep)}"
    rep.seconds = time.perf_counter() - t0
    events.append(("compaction_end", {"transcript": t.label, "messages_before": rep.messages_before,
                                      "messages_after": rep.messages_after, "tokens_before": rep.tokens_before,
                                      "tokens_after": rep.tokens_after}))
    events.append(("compaction", {"transcript": t.label, "tokens_before": rep.tokens_before, "tokens_after": rep.tokens_after,
                                  "messages_removed": rep.messages_removed, "first_kept_id": rep.first_kept_id,
                                  "summary_tokens": rep.summary_tokens, "layout": opts.layout}))
    return Outcome(new_t, rep, events, body if retain is None else sp.format_retain(retain, body))


def _summarize_and_rebuild(summarizer: Any, t: Transcript, p: Plan, popts: sp.PromptOptions, extra: dict[str, Any],
                           opts: CompactOptions, tok: Tokenizer, rep: RecordReport, style: str,
                           files_read: list[str], files_mod: list[str],
                           out_format: str | None = None) -> tuple[Transcript, list[Message], int, str, str | None]:
    """The model's summary and the rebuilt transcript. A summary that is empty, repeats
    itself (a model stuck in a loop), or leaves the transcript no smaller, is rejected; with ``fallback`` the heuristic summary is used instead
    (then clipped, if it alone would not make the transcript smaller)."""
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
                new_t, visible, removed = rebuild(t, p, body, retain, style, (files_read, files_mod), opts, out_format)
                rep.tokens_after = sum(count_messages(visible, tok))
                rep.summary_tokens = tok.count(body) + (tok.count(retain) if retain else 0)
                if rep.tokens_after < rep.tokens_before:
                    rep.fallback_used = attempts > 1
                    return new_t, visible, removed, body, retain
                problem = (f"the compacted transcript would not be smaller ({rep.tokens_after:,} ≥ "
                           f"{rep.tokens_before:,} tokens): keep fewer recent tokens")
        if not opts.fallback or attempts >= 3:
            hint = "; use --fallback to use the heuristic summary instead" if not opts.fallback else ""
            raise CtxtoolError(f"summary rejected: {problem}{hint}", code=ExitCode.REMOTE, path=t.path)
        from .summarizers.heuristic import HeuristicSummarizer

        text = summarize(HeuristicSummarizer(), p.summarize, p.view.previous_summary, popts, extra).text
        if attempts == 2:  # the heuristic summary was too large as well: clip it and its file lists
            summarized = sum(c for m, c in zip(p.view.effective, p.counts, strict=True) if any(m is x for x in p.summarize))
            text = sp.clip(text, max(summarized * 2 - len(sp.SUMMARY_PREFIX) - 60, 40))
            files_read, files_mod = files_read[-10:], files_mod[-10:]


# -- files ----------------------------------------------------------------------------------------------
def _cache_counts(summarizer: Any) -> tuple[int, int]:
    for obj in (summarizer, getattr(summarizer, "stats", None)):
        if obj is None:
            continue
        h = getattr(obj, "hits", None)
        m = getattr(obj, "misses", None)
        if isinstance(h, int) and isinstance(m, int):
            return h, m
    return 0, 0


def compact_file(
    path: str | Path,
    output: str | Path | None = None,
    *,
    fmt: str | None = None,
    to: str | None = None,
    options: CompactOptions | None = None,
    summarizer: Any = None,
    jobs: int = 1,
    on_error: str = "fail",
    events: str | Path | EventLog | None = None,
    dry_run: bool = False,
    progress: Callable[[int, int, RecordReport], None] | None = None,
    validate_output: bool = True,
) -> CompactReport:
    """Compact every transcript of ``path`` and write them to ``output`` (``None``/``-``:
    stdout; not written on ``dry_run``). The input is never modified; the output is written
    atomically after it was re-read and validated, or not at all."""
    from . import formats
    from .formats.base import ErrorPolicy

    opts = options or CompactOptions()
    src = str(path)
    out = None if output is None else str(output)
    refuse_overwrite(src, out)
    if summarizer is None:
        from .summarizers.heuristic import HeuristicSummarizer

        summarizer = HeuristicSummarizer()
    t0 = time.perf_counter()
    policy = ErrorPolicy(on_error)
    ts = list(formats.read(src, fmt, policy))
    if not ts:
        raise CtxtoolError("no transcripts in the input", path=src)
    in_format = ts[0].format
    target = formats.get_format(to) if to else formats.get_format(in_format)
    report = CompactReport(src, out, in_format, target.name, getattr(summarizer, "name", type(summarizer).__name__),
                           dry_run, jobs=max(1, jobs))
    if src != "-":
        report.bytes_before = os.path.getsize(src)
    h0, m0 = _cache_counts(summarizer)
    tok = get_tokenizer(opts.tokenizer)
    results: list[Outcome | None] = [None] * len(ts)
    errors: list[tuple[int, CtxtoolError]] = []
    done = [0]
    lock = threading.Lock()

    def work(i: int) -> None:
        t = ts[i]
        try:
            o = compact_transcript(t, summarizer, opts, dry_run=dry_run, tok=tok, out_format=target.name)
        except CtxtoolError as e:
            if e.path is None:
                e.path = t.path
            if e.line is None:
                e.line = t.lineno if t.record is not None else None
            rep = RecordReport(t.label, t.index, t.id, status="error", format=t.format, error=e.message,
                               messages_before=len(t.messages), messages_after=len(t.messages))
            o = Outcome(t, rep, [("compaction_end", {"transcript": t.label, "error": e.message})])
            with lock:
                errors.append((i, e))
        results[i] = o
        with lock:
            done[0] += 1
            n = done[0]
        if progress is not None:
            progress(n, len(ts), o.report)

    try:
        if jobs <= 1 or len(ts) == 1:
            for i in range(len(ts)):
                work(i)
                if errors and on_error != "skip":
                    break
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                futs = [pool.submit(work, i) for i in range(len(ts))]
                for f in futs:
                    f.result()
                    if errors and on_error != "skip":
                        for g in futs:
                            g.cancel()
                        break
    finally:
        log = events if isinstance(events, EventLog) else (EventLog(events) if events is not None else None)
        if log is not None:
            for o in results:
                if o is not None:
                    for kind, fields in o.events:
                        log.emit(kind, **fields)
            if not isinstance(events, EventLog):
                log.flush()
    if errors and on_error != "skip":
        errors.sort(key=lambda x: x[0])
        raise errors[0][1]
    final = [o for o in results if o is not None]
    report.records = [o.report for o in final]
    report.summaries = [o.summary for o in final]
    h1, m1 = _cache_counts(summarizer)
    report.cache_hits, report.cache_misses = h1 - h0, m1 - m0
    if not dry_run:
        new_ts = [o.transcript for o in final]
        report.bytes_after = write_validated(new_ts, ts, out, target, validate_output)
    report.seconds = time.perf_counter() - t0
    return report


def write_validated(new_ts: list[Transcript], old_ts: list[Transcript], output: str | None, target: Any,
                    validate_output: bool = True) -> int:
    """Render to a temporary file, re-read and validate it (schema for canonical files,
    structure for all: no new orphans or unanswered calls), then move it into place."""
    from . import formats
    from .jsonio import atomic_output

    size = 0

    def check(tmp: str) -> None:
        nonlocal size
        if validate_output:
            _validate_written(tmp, target, new_ts, old_ts)
        size = os.path.getsize(tmp)

    with atomic_output(output, check) as fh:
        formats.write(new_ts, fh, target)
    return size


def _validate_written(tmp: str, target: Any, new_ts: list[Transcript], old_ts: list[Transcript]) -> None:
    from . import formats
    from .formats.base import ErrorPolicy
    from .validate import check_messages, validate_canonical_file

    if target.name == "ctxtool":
        probs = validate_canonical_file(tmp)
        if probs:
            raise CtxtoolError(f"compacted output fails the schema: {probs[0].message}", code=ExitCode.ERROR)
    policy = ErrorPolicy("skip")
    back = list(formats.read(tmp, target, policy))
    if policy.skipped:
        raise CtxtoolError(f"compacted output does not read back: {policy.skipped[0].message}", code=ExitCode.ERROR)
    if len(back) != len(new_ts):
        raise CtxtoolError(f"compacted output reads back as {len(back)} transcripts, expected {len(new_ts)}", code=ExitCode.ERROR)
    for b, old in zip(back, old_ts, strict=True):
        before = {(p.code, p.message.split(" (in ")[0]) for p in check_messages(old.messages)}
        for p in check_messages(b.messages, b.path, b.label):
            if (p.code, p.message.split(" (in ")[0]) not in before:
                raise CtxtoolError(
                    f"compacted output would be invalid: {p.code}: {p.message} (transcript {old.label}); nothing written",
                    code=ExitCode.ERROR,
                )


def compact_paths(
    paths: Sequence[str | Path],
    output_dir: str | Path,
    **kwargs: Any,
) -> list[CompactReport]:
    """Compact several files into ``output_dir`` (same file names)."""
    from . import formats

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    reports = []
    for p in formats.iter_paths(paths):
        reports.append(compact_file(p, out / Path(p).name, **kwargs))
    return reports
