"""Tool-result archiving (the Go agent's ``maybeSummarizeToolResults``): while more than ``cutoff``
tool results are visible, the oldest becomes agent-invisible (kept, user-visible) and one summary
message describes what was archived (``heuristic`` digest, ``llm``, or ``off``). The same function
is compaction's tool digest (``--tool-digest``), only the prefix differs (:data:`DIGEST_PREFIX`).
What counts as a result, the limits and the placement: docs/architecture.md, "History"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import CtxtoolError, Failure
from ..io.events import EventLog
from ..io.outputs import refuse_log_clash
from ..model import (
    KIND_TOOL_RESULT_ARCHIVED,
    KIND_TOOL_SUMMARY,
    Block,
    Message,
    Metadata,
    Transcript,
)
from ..tokens.heuristic import estimate
from .pairing import pair

STRATEGIES = ("llm", "heuristic", "off")
HEURISTIC_MAX_CHARS = 800  # the Go agent: heuristic summary clipped to 800 runes (head+tail)
LLM_INPUT_MAX_CHARS = 12_000  # the Go agent: LLM input clipped to 12000 chars
LLM_OUTPUT_MAX_CHARS = 1_200  # the Go agent: LLM output clipped to 1200 runes
SUMMARY_PREFIX = "[Archived tool results]"
DIGEST_PREFIX = "[Compaction tool digest]"  # the Go agent: the digest appended after a compaction
LLM_PROMPT = (
    "Older tool results are being removed from an agent's context. Summarize them for the agent in a few "
    "short lines: which tools ran on what, the key facts, paths, numbers and errors it may still need. "
    "Do not invent anything.\n\n"
)

Summarize = Callable[[str], str]


@dataclass(slots=True)
class ArchivedItem:
    """One archived tool-result message."""

    index: int  # position in the transcript's message list
    message_id: str | None
    line: int | None
    call_ids: list[str]
    tools: list[str]
    chars: int
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ArchiveResult:
    """What ``archive`` did to one transcript."""

    transcript: str
    cutoff: int
    strategy: str  # requested
    strategy_used: str  # heuristic when llm fell back, off when nothing was needed
    visible_before: int  # visible tool results before
    visible_after: int
    archived: list[ArchivedItem] = field(default_factory=list)
    summary: str | None = None
    fallback: str | None = None  # why llm fell back to heuristic
    tokens_before: int = 0  # agent-visible tokens (heuristic) before and after
    tokens_after: int = 0

    @property
    def archived_count(self) -> int:
        return sum(len(a.call_ids) or 1 for a in self.archived)

    @property
    def changed(self) -> bool:
        return bool(self.archived)

    def to_json(self) -> dict[str, Any]:
        return {
            "transcript": self.transcript,
            "cutoff": self.cutoff,
            "strategy": self.strategy,
            "strategy_used": self.strategy_used,
            "visible_before": self.visible_before,
            "visible_after": self.visible_after,
            "archived_results": self.archived_count,
            "archived_messages": len(self.archived),
            "archived": [a.to_json() for a in self.archived],
            "summary": self.summary,
            "summary_chars": len(self.summary) if self.summary else 0,
            "fallback": self.fallback,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
        }


@dataclass(slots=True)
class ArchiveReport:
    """``archive_file``: one result per transcript."""

    path: str
    output: str | None
    results: list[ArchiveResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    written: int = 0  # transcripts in the output: ``results``' and, in a resumed run, those of the shards reused

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "output": self.output,
            "transcripts": len(self.results),
            "changed": sum(1 for r in self.results if r.changed),
            "archived_results": sum(r.archived_count for r in self.results),
            "tokens_before": sum(r.tokens_before for r in self.results),
            "tokens_after": sum(r.tokens_after for r in self.results),
            "results": [r.to_json() for r in self.results],
            "skipped": self.skipped,
        }


# -- helpers ---------------------------------------------------------------------------


def clip_head_tail(text: str, limit: int) -> str:
    """At most ``limit`` characters: head and tail with a marker naming what was cut."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit:,} chars clipped ...]\n"
    # the marker's own length depends on the count; two passes settle it
    for _ in range(2):
        keep = max(limit - len(marker), 0)
        cut = len(text) - keep
        marker = f"\n[... {cut:,} chars clipped ...]\n"
    keep = max(limit - len(marker), 0)
    if keep == 0:
        return text[:limit]
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def is_result_message(m: Message) -> bool:
    """A message that carries tool results and nothing a user wrote (images ride along)."""
    has = False
    for b in m.content:
        if b.type == "tool_result":
            has = True
        elif b.type != "image":
            return False
    return has


def visible_results(msgs: Sequence[Message]) -> int:
    """Tool results the agent still sees (in result-only messages)."""
    return sum(
        len(m.tool_results()) for m in msgs if m.agent_visible and is_result_message(m)
    )


def messages_to_archive(msgs: Sequence[Message], cutoff: int) -> list[int]:
    """Indices of the messages to archive, oldest first, to bring visible results to ``cutoff``."""
    if cutoff < 0:
        raise CtxtoolError(f"cutoff must be >= 0, got {cutoff}", kind=Failure.USAGE)
    cands = [(i, len(m.tool_results())) for i, m in enumerate(msgs) if m.agent_visible and is_result_message(m)]
    count = sum(n for _, n in cands)
    out = []
    for i, n in cands:
        if count <= cutoff:
            break
        out.append(i)
        count -= n
    return out


def _calls_by_result(msgs: Sequence[Message]) -> dict[int, dict[str, Block]]:
    out: dict[int, dict[str, Block]] = {}
    for _ci, cb, ri in pair(msgs).pairs:
        if ri is not None and cb.id:
            out.setdefault(ri, {})[cb.id] = cb
    return out


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _args_hint(call: Block | None) -> str:
    if call is None:
        return ""
    a = call.arguments
    if isinstance(a, dict):
        for k in ("command", "cmd", "file_path", "path", "pattern", "query", "url", "filename"):
            v = a.get(k)
            if isinstance(v, str | list) and v:
                return _short(v if isinstance(v, str) else " ".join(map(str, v)), 70)
    return _short(call.arguments_text(), 70)


def describe(msgs: Sequence[Message], indices: Sequence[int]) -> list[dict[str, Any]]:
    """One entry per archived result: tool, argument hint, size, error flag, first line, text."""
    calls = _calls_by_result(msgs)
    items = []
    for i in indices:
        for b in msgs[i].tool_results():
            call = calls.get(i, {}).get(b.id or "")
            name = (call.name if call else None) or b.name or "tool"
            first = next((ln.strip() for ln in b.text.splitlines() if ln.strip()), "")
            items.append(
                {
                    "tool": name,
                    "call_id": b.id,
                    "args": _args_hint(call),
                    "chars": len(b.text),
                    "lines": len(b.text.splitlines()),
                    "is_error": b.is_error,
                    "first_line": first,
                    "text": b.text,
                }
            )
    return items


def heuristic_summary(items: Sequence[dict[str, Any]], prefix: str = SUMMARY_PREFIX) -> str:
    """The Go agent's local fallback: a digest of the archived results, clipped to 800 chars."""
    n = len(items)
    head = (
        f"{prefix} {n} older tool result{'s' if n != 1 else ''} "
        f"{'were' if n != 1 else 'was'} archived to save context (full output kept in the transcript):"
    )
    lines = []
    for it in items:
        call = f"{it['tool']}({it['args']})" if it["args"] else it["tool"]
        status = "error" if it["is_error"] else f"{it['chars']:,} chars, {it['lines']:,} lines"
        first = f": {_short(it['first_line'], 100)}" if it["first_line"] else ""
        lines.append(f"- {call} -> {status}{first}")
    text = "\n".join([head, *lines])
    if len(text) <= HEURISTIC_MAX_CHARS:
        return text
    # head+tail by whole items: the oldest and the newest archived results, the middle counted
    budget = HEURISTIC_MAX_CHARS - len(head) - 1
    marker_w = len(f"- [... {len(lines):,} more archived results ...]") + 1
    front: list[str] = []
    back: list[str] = []
    used = marker_w
    lo, hi = 0, len(lines) - 1
    take_front = True
    while lo <= hi:
        cand = lines[lo] if take_front else lines[hi]
        if used + len(cand) + 1 > budget:
            break
        used += len(cand) + 1
        if take_front:
            front.append(cand)
            lo += 1
        else:
            back.append(cand)
            hi -= 1
        take_front = not take_front
    omitted = hi - lo + 1
    mid = [f"- [... {omitted:,} more archived results ...]"] if omitted > 0 else []
    return clip_head_tail("\n".join([head, *front, *mid, *reversed(back)]), HEURISTIC_MAX_CHARS)


def llm_prompt(items: Sequence[dict[str, Any]]) -> str:
    parts = []
    for it in items:
        call = f"{it['tool']}({it['args']})" if it["args"] else it["tool"]
        parts.append(f"## {call}{' [error]' if it['is_error'] else ''}\n{it['text']}")
    body = "\n\n".join(parts)
    return LLM_PROMPT + body[: max(LLM_INPUT_MAX_CHARS - len(LLM_PROMPT), 0)]


def build_summary(
    items: Sequence[dict[str, Any]], strategy: str, summarize: Summarize | None, prefix: str = SUMMARY_PREFIX
) -> tuple[str, str, str | None]:
    """(summary text, strategy used, fallback reason)."""
    why: str | None = None
    if strategy == "llm":
        try:
            out = (summarize(llm_prompt(items)) or "").strip() if summarize is not None else ""
            why = None if out else ("no summarizer configured" if summarize is None else "summarizer returned nothing")
        except Exception as e:  # noqa: BLE001 - the Go agent falls back to the local summary
            out, why = "", f"summarizer failed: {e}"
        if out:
            out = out if out.startswith(prefix) else f"{prefix}\n{out}"
            return clip_head_tail(out, LLM_OUTPUT_MAX_CHARS), "llm", None
    return heuristic_summary(items, prefix), "heuristic", why


def summary_message(text: str) -> Message:
    """The new agent-only summary message (the Go agent)."""
    return Message(
        "user",
        [Block("text", text=text)],
        metadata=Metadata(agent_visible=True, user_visible=False, kind=KIND_TOOL_SUMMARY),
        dirty=True,
    )


def archived_metadata(m: Message) -> Metadata:
    md = m.metadata
    return Metadata(
        agent_visible=False,
        user_visible=md.user_visible,
        kind=KIND_TOOL_RESULT_ARCHIVED,
        output_ref=md.output_ref,
        extra=dict(md.extra),
    )


def _visible_tokens(msgs: Sequence[Message]) -> int:
    return sum(estimate(m.chars()) for m in msgs if m.agent_visible)


def _check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise CtxtoolError(
            f"unknown tool summary strategy {strategy!r}; choose one of: {', '.join(STRATEGIES)}",
            kind=Failure.USAGE,
        )


# -- the operation ---------------------------------------------------------------------


def archive_messages(
    msgs: Sequence[Message],
    *,
    cutoff: int = 10,
    strategy: str = "heuristic",
    summarize: Summarize | None = None,
    label: str = "-",
    events: EventLog | None = None,
    in_place: bool = False,
    prefix: str = SUMMARY_PREFIX,
) -> tuple[list[Message], ArchiveResult]:
    """Archive over a message list; returns (new list, result).

    With ``in_place`` the archived messages themselves are changed (and touched);
    otherwise they are replaced by changed copies and the input is left alone. The
    summary message (its text starts with ``prefix``), when there is one, is the last
    element of the new list.
    """
    _check_strategy(strategy)
    before = visible_results(msgs)
    res = ArchiveResult(label, cutoff, strategy, "off", before, before, tokens_before=_visible_tokens(msgs))
    res.tokens_after = res.tokens_before
    out = list(msgs)
    if strategy == "off":
        return out, res
    idx = messages_to_archive(msgs, cutoff)
    if not idx:
        return out, res
    items = describe(msgs, idx)
    text, used, fallback = build_summary(items, strategy, summarize, prefix)
    res.strategy_used = used
    res.fallback = fallback
    by_msg: dict[int, list[dict[str, Any]]] = {}
    calls = _calls_by_result(msgs)
    for i in idx:
        m = msgs[i]
        rs = m.tool_results()
        names = []
        for b in rs:
            c = calls.get(i, {}).get(b.id or "")
            names.append((c.name if c else None) or b.name or "tool")
        item = ArchivedItem(i, m.id, m.lineno, [b.id or "" for b in rs], names, m.chars(), estimate(m.chars()))
        res.archived.append(item)
        by_msg[i] = []
        if in_place:
            m.metadata = archived_metadata(m)
            m.touch()
        else:
            out[i] = replace(m, content=list(m.content), metadata=archived_metadata(m), dirty=True, extra=dict(m.extra))
        if events is not None:
            events.emit("tool_result_archived", transcript=label, message_id=m.id, line=m.lineno,
                        call_ids=item.call_ids, tools=item.tools, chars=item.chars)
    summ = summary_message(text)
    out.append(summ)
    res.summary = text
    res.visible_after = visible_results(out)
    res.tokens_after = _visible_tokens(out)
    if events is not None:
        events.emit("tool_summary", transcript=label, archived=res.archived_count, strategy=used, fallback=fallback,
                    chars=len(text), tokens_before=res.tokens_before, tokens_after=res.tokens_after)
    return out, res


def archive(
    t: Transcript,
    *,
    cutoff: int = 10,
    strategy: str = "heuristic",
    summarize: Summarize | None = None,
    events: EventLog | None = None,
) -> ArchiveResult:
    """Archive the oldest tool results of ``t`` in place until at most ``cutoff`` stay visible.

    Archived messages are touched (re-rendered by the writer); the summary message is
    appended after the transcript's last entry. Every other message is left as read.
    """
    msgs = t.messages
    new, res = archive_messages(
        msgs, cutoff=cutoff, strategy=strategy, summarize=summarize, label=t.label, events=events, in_place=True
    )
    if res.changed:
        t.entries.append(new[-1])
    return res


def summarize_with(summarizer: Any) -> Summarize | None:
    """``summarize(prompt)`` for the ``llm`` strategy from a summary model
    (:class:`ctxtool.summarizers.Summarizer`): a short, factual summary of archived tool
    output. None for the heuristic one (the archive's own digest is the heuristic summary)."""
    if summarizer is None or getattr(summarizer, "name", None) == "heuristic":
        return None
    return _ModelSummary(summarizer)


@dataclass(frozen=True, slots=True)
class _ModelSummary:
    """``summarize(prompt)`` through a summary model; ``key``: the model's settings (its repr,
    stable across runs and without its API key), so that a sharded re-run resumes."""

    summarizer: Any

    @property
    def key(self) -> str:
        return repr(self.summarizer)

    def __call__(self, prompt: str) -> str:
        # lazy: start-up (`ctxtool archive` would load ctxtool.summarizers)
        from ..summarizers import SummaryRequest

        req = SummaryRequest(
            system="You summarize archived tool output for a coding agent. Be brief and factual.",
            prompt=prompt,
            max_tokens=400,
            style="tool_summary",
        )
        return str(self.summarizer.summarize(req))


def archive_file(
    path: str | Path,
    output: str | Path | None,
    *,
    cutoff: int = 10,
    strategy: str = "heuristic",
    summarize: Summarize | None = None,
    fmt: str | None = None,
    to: str | None = None,
    on_error: str = "fail",
    events: EventLog | None = None,
    dry_run: bool = False,
    engine: Any = None,
) -> ArchiveReport:
    """Read every transcript of ``path``, archive each, write them to ``output`` (atomically;
    ``dry_run``: nothing is written, the report says what would be archived). ``engine``: run
    as shards (:class:`ctxtool.run.engines.Sharding`, e.g. a directory into a directory)."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base)
    from ..run.operation import MapOp
    from ..run.runner import run_file

    _check_strategy(strategy)

    def one(t: Transcript) -> ArchiveResult:
        return archive(t, cutoff=cutoff, strategy=strategy, summarize=summarize, events=events)

    target = None if dry_run else ("-" if output is None else str(output))
    refuse_log_clash(str(path), target, events.path if events is not None else None)
    # a re-run reuses finished shards when the summaries come from a described model (or none)
    model = None if summarize is None else getattr(summarize, "key", None)
    key = f"cutoff={cutoff} strategy={strategy} model={model}" if summarize is None or model is not None else None
    run = run_file(MapOp(one, "archive", key=key), str(path), target, fmt=fmt, to=to, on_error=on_error, jobs=1,
                   engine=engine)
    report = ArchiveReport(str(path), None if output is None or dry_run else str(output))
    report.results, report.skipped, report.written = run.report.items, run.skipped, run.transcripts
    return report
