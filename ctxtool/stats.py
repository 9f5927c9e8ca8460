"""What is in a transcript: messages, characters and tokens by role, tool calls and
outputs, thinking, images, system prompt, recorded usage, context percentage and the
seed 002 warning/critical thresholds.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import formats
from .config import BY_KEY
from .context import ContextSettings, last_model, resolve
from .errors import CtxtoolError
from .formats.base import ErrorPolicy
from .model import IMAGE_CHARS, IMAGE_TOKENS, KIND_INJECTED, ROLES, Message, Transcript, is_injected
from .pairing import tool_names
from .registry import ModelInfo
from .timestamps import iso, span
from .tokens import (
    FRAMING_PER_MESSAGE,
    FRAMING_PER_REPLY,
    Tokenizer,
    get_tokenizer,
)

if TYPE_CHECKING:
    from .stats_op import Overview

#: the rows of ``by_role``: the roles, with injected user-role lines apart
STATS_ROWS = (*ROLES[:2], KIND_INJECTED, *ROLES[2:])

# Seed 002 check_size defaults, in characters (the chars policy's settings: ctxtool.policies).
WARNING_CHARS = int(BY_KEY["context.warning_chars"].default)
CRITICAL_CHARS = int(BY_KEY["context.critical_chars"].default)
LEVELS = ("ok", "warning", "critical")
TOP_OUTPUTS = 10
BATCH_MESSAGES = 1024


@dataclass(slots=True)
class RoleStats:
    messages: int = 0
    tokens: int = 0
    chars: int = 0

    def add(self, other: RoleStats) -> None:
        self.messages += other.messages
        self.tokens += other.tokens
        self.chars += other.chars

    def to_json(self) -> dict[str, int]:
        return {"messages": self.messages, "tokens": self.tokens, "chars": self.chars}


@dataclass(slots=True)
class ToolOutput:
    transcript: str
    message_id: str | None
    line: int | None
    tool: str | None
    tokens: int
    chars: int
    lines: int
    text: str | None = field(default=None, repr=False, compare=False)  # lines not counted yet (see counted)

    def counted(self) -> ToolOutput:
        """Itself with ``lines`` counted from ``text``, which it then lets go: an output may
        carry its text until it is known to be reported (most never are, on a large dataset)."""
        if self.text is not None:
            self.lines, self.text = self.text.count("\n") + 1, None
        return self

    def to_json(self) -> dict[str, Any]:
        self.counted()
        return {
            "transcript": self.transcript,
            "message_id": self.message_id,
            "line": self.line,
            "tool": self.tool,
            "tokens": self.tokens,
            "chars": self.chars,
            "lines": self.lines,
        }


@dataclass(slots=True)
class UsageTotals:
    input: int = 0
    output: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    api_messages: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_creation + self.cache_read

    def add(self, o: UsageTotals) -> None:
        self.input += o.input
        self.output += o.output
        self.cache_creation += o.cache_creation
        self.cache_read += o.cache_read
        self.api_messages += o.api_messages

    def to_json(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_creation": self.cache_creation,
            "cache_read": self.cache_read,
            "total": self.total,
            "api_messages": self.api_messages,
        }


@dataclass(slots=True)
class Figures:
    """Counts shared by one transcript and the totals."""

    messages: int = 0
    tokens: int = 0
    chars: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    tool_errors: int = 0
    thinking_blocks: int = 0
    thinking_tokens: int = 0
    thinking_chars: int = 0
    images: int = 0
    system_prompt_chars: int = 0
    system_prompt_tokens: int = 0
    framing_tokens: int = 0
    # user-role lines the agent injected (skill text, command output, reminders, summaries) have
    # their own row: "user" counts only the user's words
    by_role: dict[str, RoleStats] = field(default_factory=lambda: {r: RoleStats() for r in STATS_ROWS})
    tool_calls_by_name: Counter[str] = field(default_factory=Counter)
    usage: UsageTotals = field(default_factory=UsageTotals)

    def add(self, o: Figures) -> None:
        # field by field (no getattr loop): called once per transcript
        self.messages += o.messages
        self.tokens += o.tokens
        self.chars += o.chars
        self.tool_calls += o.tool_calls
        self.tool_results += o.tool_results
        self.tool_errors += o.tool_errors
        self.thinking_blocks += o.thinking_blocks
        self.thinking_tokens += o.thinking_tokens
        self.thinking_chars += o.thinking_chars
        self.images += o.images
        self.system_prompt_chars += o.system_prompt_chars
        self.system_prompt_tokens += o.system_prompt_tokens
        self.framing_tokens += o.framing_tokens
        by_role = self.by_role
        for r, s in o.by_role.items():
            if s.messages:
                mine = by_role.get(r)
                if mine is None:
                    mine = by_role[r] = RoleStats()
                mine.add(s)
        if o.tool_calls_by_name:
            self.tool_calls_by_name.update(o.tool_calls_by_name)
        if o.usage.api_messages:
            self.usage.add(o.usage)

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "tokens": self.tokens,
            "chars": self.chars,
            "tool_calls": self.tool_calls,
            "tool_results": self.tool_results,
            "tool_errors": self.tool_errors,
            "thinking": {"blocks": self.thinking_blocks, "tokens": self.thinking_tokens, "chars": self.thinking_chars},
            "images": self.images,
            "system_prompt": {"chars": self.system_prompt_chars, "tokens": self.system_prompt_tokens},
            "framing_tokens": self.framing_tokens,
            "usage": self.usage.to_json(),
        }


@dataclass(slots=True)
class TranscriptStats:
    path: str
    index: int
    id: str | None
    format: str
    figures: Figures
    context_tokens: int
    context_source: str
    context_window: int | None
    level: str
    largest: list[ToolOutput]
    label: str = ""  # path#id for a dataset record, else the path
    model: str | None = None  # the model the transcript records (the context resolver's)
    first_timestamp: str | None = None  # the earliest and latest times its lines record
    last_timestamp: str | None = None

    @property
    def context_percent(self) -> float | None:
        if not self.context_window:
            return None
        return round(100.0 * self.context_tokens / self.context_window, 2)

    def to_json(self) -> dict[str, Any]:
        d = {"transcript": self.label or self.path, "path": self.path, "index": self.index, "id": self.id, "format": self.format,
             "model": self.model, "first_timestamp": self.first_timestamp, "last_timestamp": self.last_timestamp}
        d.update(self.figures.to_json())
        d["by_role"] = {r: s.to_json() for r, s in self.figures.by_role.items()}
        d["tool_calls_by_name"] = dict(self.figures.tool_calls_by_name.most_common())
        d["context"] = {
            "tokens": self.context_tokens,
            "source": self.context_source,
            "window": self.context_window,
            "percent": self.context_percent,
        }
        d["threshold"] = self.level
        d["largest_tool_outputs"] = [o.to_json() for o in self.largest]
        return d


@dataclass(slots=True)
class StatsReport:
    """``transcripts``: every transcript's figures, in input order; with ``kept`` set, only
    the ``kept`` with the most context tokens (most first) when there are more, and
    ``overview`` counts them all."""

    tokenizer: str
    model: ModelInfo | None
    context_window: int | None
    warning_chars: int
    critical_chars: int
    totals: Figures
    transcripts: list[TranscriptStats]
    largest: list[ToolOutput]
    skipped: list[str]
    rows: list[dict[str, Any]] | None = None
    overview: Overview | None = None  # None: counted from ``transcripts``
    kept: int | None = None

    def __post_init__(self) -> None:
        if self.overview is None:
            from .stats_op import Overview

            self.overview = Overview()
            for t in self.transcripts:
                self.overview.add(t)

    @property
    def count(self) -> int:
        """How many transcripts the figures cover (``transcripts`` may keep fewer)."""
        assert self.overview is not None
        return self.overview.count

    @property
    def level(self) -> str:
        assert self.overview is not None
        return max((lv for lv in LEVELS if self.overview.levels[lv]), key=LEVELS.index, default=LEVELS[0])

    def to_json(self, *, transcripts: bool = True) -> dict[str, Any]:
        """The report as JSON; ``transcripts=False`` leaves out the per-transcript list
        (the CLI streams it instead of building it in memory)."""
        ov = self.overview
        assert ov is not None
        totals = self.totals.to_json()
        totals["transcripts"] = ov.count
        d = {
            "tokenizer": self.tokenizer,
            "model": self.model.to_json() if self.model else None,
            "context_window": self.context_window,
            "totals": totals,
            "by_role": {r: s.to_json() for r, s in self.totals.by_role.items()},
            "tool_calls_by_name": dict(self.totals.tool_calls_by_name.most_common()),
            "largest_tool_outputs": [o.to_json() for o in self.largest],
            "thresholds": {
                "warning_chars": self.warning_chars,
                "critical_chars": self.critical_chars,
                "level": self.level,
                "counts": {lv: ov.levels[lv] for lv in LEVELS},
            },
            "skipped": len(self.skipped),
            "skipped_errors": self.skipped[:20],
            "models": sorted(ov.models),
            "first_timestamp": ov.first_timestamp,
            "last_timestamp": ov.last_timestamp,
        }
        if transcripts:
            d["transcripts"] = [t.to_json() for t in self.transcripts]
        return d


def threshold_level(chars: int, warning: int = WARNING_CHARS, critical: int = CRITICAL_CHARS) -> str:
    """Seed 002 check_size (the ``chars`` policy): ``critical`` at/above the critical
    threshold, then ``warning``."""
    from .policies import Measure, PolicySettings, get

    return get("chars").evaluate(Measure(0, chars), PolicySettings(warning_chars=warning, critical_chars=critical)).status


def threshold_levels(warning: int = WARNING_CHARS, critical: int = CRITICAL_CHARS) -> Callable[[int], str]:
    """:func:`threshold_level` with the ``chars`` policy's thresholds resolved once (the
    status of the last one reached, as ``Policy.evaluate``): for one call per transcript."""
    from .policies import PolicySettings, get

    lim = get("chars").limits(None, PolicySettings(warning_chars=warning, critical_chars=critical))

    def level(chars: int) -> str:
        status = lim.status
        for th in lim.thresholds:
            if th.reached(chars):
                status = th.status
        return status

    return level


def transcript_stats(
    t: Transcript,
    counts: list[int] | None,
    tok: Tokenizer,
    *,
    context_window: int | None = None,
    warning_chars: int = WARNING_CHARS,
    critical_chars: int = CRITICAL_CHARS,
    rows: list[dict[str, Any]] | None = None,
    context: ContextSettings | None = None,
) -> TranscriptStats:
    """Fold one transcript's messages into figures. ``counts`` are the messages' exact token
    counts; ``None`` means the heuristic (computed here from the characters)."""
    msgs = t.messages
    f = Figures()
    outputs: list[tuple[int, int, Message, Any]] = []
    seen_usage: set[str] = set()
    heuristic = counts is None
    all_counts: list[int] = []
    all_chars: list[int] = []
    by_role = f.by_role
    calls_by_name = f.tool_calls_by_name
    for i, m in enumerate(msgs):
        chars = 0
        images = 0
        for b in m.content:
            bt = b.type
            if bt == "text":
                chars += len(b.text)
            elif bt == "tool_result":
                n_out = len(b.text)
                chars += n_out
                f.tool_results += 1
                if b.is_error:
                    f.tool_errors += 1
                if n_out:
                    outputs.append((n_out, i, m, b))
            elif bt == "tool_call":
                chars += b.chars()
                f.tool_calls += 1
                calls_by_name[b.name or "?"] += 1
            elif bt == "thinking":
                chars += len(b.text)
                f.thinking_blocks += 1
                f.thinking_chars += len(b.text)
                if b.text:
                    f.thinking_tokens += tok.count(b.text)
            elif bt == "image":
                images += 1
                f.images += 1
            else:
                chars += len(b.text)
        n = math.ceil(chars / 4) + images * IMAGE_TOKENS if heuristic else counts[i]  # type: ignore[index]
        all_counts.append(n)
        chars += images * IMAGE_CHARS
        all_chars.append(chars)
        f.tokens += n
        f.chars += chars
        row = KIND_INJECTED if is_injected(m) else m.role
        rs = by_role.get(row)
        if rs is None:
            rs = by_role[row] = RoleStats()
        rs.messages += 1
        rs.tokens += n
        rs.chars += chars
        if m.role == "system":
            f.system_prompt_chars += chars
            f.system_prompt_tokens += n
        if m.usage is not None:
            key = m.usage_key or f"#{i}"
            if key not in seen_usage:
                seen_usage.add(key)
                f.usage.input += m.usage.input
                f.usage.output += m.usage.output
                f.usage.cache_creation += m.usage.cache_creation
                f.usage.cache_read += m.usage.cache_read
                f.usage.api_messages += 1
        if rows is not None:
            rows.append(
                {
                    "transcript": t.label,
                    "index": i,
                    "id": m.id,
                    "line": m.lineno,
                    "role": m.role,
                    "kind": m.metadata.kind,
                    "agent_visible": m.agent_visible,
                    "chars": chars,
                    "tokens": n,
                    "tool_calls": sum(1 for b in m.content if b.type == "tool_call"),
                    "tool_results": sum(1 for b in m.content if b.type == "tool_result"),
                    "tools": ",".join(b.name or "?" for b in m.content if b.type == "tool_call"),
                }
            )
    f.messages = len(msgs)
    f.framing_tokens = FRAMING_PER_MESSAGE * f.messages + (FRAMING_PER_REPLY if f.messages else 0)
    first, last = span(t)
    ctx = resolve(t, settings=context or ContextSettings(window=context_window), tokenizer=tok, counts=all_counts,
                  chars=all_chars)
    largest: list[ToolOutput] = []
    if outputs:
        names = tool_names(msgs)
        label = t.label
        for n_out, i, m, b in heapq.nlargest(TOP_OUTPUTS, outputs, key=lambda o: o[0]):
            out_tokens = all_counts[i] if len(m.content) == 1 else (math.ceil(n_out / 4) if heuristic else tok.count(b.text))
            largest.append(
                ToolOutput(label, m.id, m.lineno, names.get(b.id or "", b.name), out_tokens, n_out, b.text.count("\n") + 1)
            )
    return TranscriptStats(
        path=t.path,
        index=t.index,
        id=t.id,
        format=t.format,
        figures=f,
        context_tokens=ctx.tokens,
        context_source=ctx.tokens_source,
        context_window=ctx.window,
        level=threshold_level(ctx.chars, warning_chars, critical_chars),
        largest=largest,
        label=t.label,
        model=last_model(t),
        first_timestamp=iso(first),
        last_timestamp=iso(last),
    )


def stats(
    paths: Iterable[str],
    *,
    tokenizer: str | None = None,
    model: ModelInfo | None = None,
    context_window: int | None = None,
    fmt: str | None = None,
    on_error: str = "fail",
    warning_chars: int | None = None,
    critical_chars: int | None = None,
    per_message: bool = False,
    progress: Callable[[Transcript], None] | None = None,
    workers: int | None = None,
    settings: Any = None,
    fast: bool = True,
    engine: Any = None,
    keep: int | None = None,
) -> StatsReport:
    """Statistics over every transcript of ``paths`` (files, directories or ``-``).

    Large dataset files (one record per line) are read by ``workers`` processes (default:
    one per core from 8 MB; see :func:`ctxtool.runner.run_file`); otherwise exact tokenizers
    use every core through tiktoken's threads.
    The window of each transcript and its context tokens come from :func:`ctxtool.context.resolve`
    (``context_window``/``model`` as the flags, then ``settings``, a ``Config``: default the
    environment's); the seed 002 thresholds default to ``context.warning_chars`` /
    ``context.critical_chars``. ``fast``: dataset records are tallied from their parsed
    values where that gives the same figures (:mod:`ctxtool.stats_fast`); False reads every
    transcript into the full model. ``engine``: each file run as shards
    (:class:`ctxtool.engines.Sharding`). ``keep``: hold only the ``keep`` transcripts with
    the most context tokens (memory flat however many there are; the totals, levels, models
    and timestamps still count every one); None: all, in input order.
    """
    from .config import Config
    from .runner import run_file
    from .stats_op import StatsOp, StatsPart

    tok = get_tokenizer(tokenizer or "heuristic")
    cfg = settings if settings is not None else Config()
    cs = ContextSettings.from_config(cfg, window=context_window, model=model.name if model else None)
    window = cs.resolve(None).window if (context_window or model) else None
    warning_chars = int(cfg["context.warning_chars"]) if warning_chars is None else warning_chars
    critical_chars = int(cfg["context.critical_chars"]) if critical_chars is None else critical_chars
    op = StatsOp(tok.name, cs, warning_chars, critical_chars, per_message, fast, keep)
    policy = ErrorPolicy(on_error)
    total = StatsPart(Figures(), [], [], [], [] if per_message else None, keep=keep)
    for p in formats.iter_paths(paths):
        try:
            run = run_file(op, p, fmt=fmt, on_error=on_error, jobs=workers, progress=progress, engine=engine)
        except CtxtoolError as e:
            policy.handle(e)
            continue
        total.merge(run.report)
        total.skipped.extend(run.skipped)
    total.skipped.extend(str(e) for e in policy.skipped)
    return StatsReport(
        tokenizer=tok.name,
        model=model,
        context_window=window,
        warning_chars=warning_chars,
        critical_chars=critical_chars,
        totals=total.totals,
        transcripts=total.kept(),
        largest=total.largest,
        skipped=total.skipped,
        rows=total.rows,
        overview=total.overview,
        kept=keep,
    )
