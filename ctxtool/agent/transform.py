"""ctxtool's policies as a per-turn transform for a Python agent loop (AgentCore.Context's
``transform_context``, :func:`make_transform`): archive, agent view, cut and window, in that
order, over a copy of the history. docs/replay.md has an agent loop that uses it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import policies
from ..config import BY_KEY
from ..errors import CtxtoolError, Failure
from ..history.archive import STRATEGIES as ARCHIVE_STRATEGIES
from ..history.archive import Summarize, archive_messages
from ..history.pairing import pair
from ..io.events import EventLog
from ..model import KIND_COMPACTION_SUMMARY, Block, Message, Metadata
from ..policies.base import CRITICAL, WARNING, Measure
from ..policies.settings import PolicySettings
from ..tokens.context import SUMMARY_PREFIX, ContextSettings, resolve
from ..tokens.count import Tokenizer, count_messages, get_tokenizer

log = logging.getLogger("ctxtool.agent.transform")

COMPACTION_PREFIX = SUMMARY_PREFIX


def _default(key: str) -> Any:
    return BY_KEY[key].default
CompactSummarize = Callable[[Sequence[Message]], str]


@dataclass(slots=True)
class TransformStep:
    """What one call of the transform did."""

    call: int
    messages_in: int
    messages_out: int
    tokens_in: int  # usage-aware estimate of the agent-visible input
    tokens_out: int  # heuristic estimate of what is sent
    archived: int = 0  # tool results archived
    hidden: int = 0  # messages left out of the agent view
    stripped_calls: int = 0  # tool calls left out because their results were archived
    cut: int = 0  # messages replaced by the compaction summary
    dropped: int = 0  # messages dropped by the window
    actions: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "messages_in": self.messages_in,
            "messages_out": self.messages_out,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "archived": self.archived,
            "hidden": self.hidden,
            "stripped_calls": self.stripped_calls,
            "cut": self.cut,
            "dropped": self.dropped,
            "actions": self.actions,
        }


class ContextTransform:
    """A callable ``list[Message] -> list[Message]``; ``last`` and ``steps`` say what it did."""

    def __init__(
        self,
        *,
        tool_call_cutoff: int | None = None,
        tool_summary_strategy: str = "heuristic",
        summarize: Summarize | None = None,
        agent_view: bool = True,
        context_window: int | None = None,
        reserve_tokens: int | None = None,
        keep_recent_tokens: int = _default("compaction.keep_recent_tokens"),
        compact_summarize: CompactSummarize | None = None,
        max_messages: int | None = _default("window.max_messages"),
        max_chars: int | None = _default("window.max_chars"),
        strategy: str = _default("window.strategy"),
        keep_first_user: bool = _default("window.keep_first_user"),
        policy: str = policies.DEFAULT,
        settings: PolicySettings | None = None,
        tokenizer: Tokenizer | str | None = None,
        events: EventLog | None = None,
        warn_on_truncation: bool = True,
    ) -> None:
        if tool_summary_strategy not in ARCHIVE_STRATEGIES:
            raise CtxtoolError(
                f"unknown tool summary strategy {tool_summary_strategy!r}; choose one of: {', '.join(ARCHIVE_STRATEGIES)}",
                kind=Failure.USAGE,
            )
        if tool_call_cutoff is not None and tool_call_cutoff < 0:
            raise CtxtoolError("tool_call_cutoff must be >= 0", kind=Failure.USAGE)
        if max_messages is not None or max_chars is not None:
            # lazy: start-up (loaded only when this runs: ..history.window)
            from ..history.window import normalize_strategy

            strategy = normalize_strategy(strategy)
        self.tool_call_cutoff = tool_call_cutoff
        self.tool_summary_strategy = tool_summary_strategy
        self.summarize = summarize
        self.agent_view = agent_view
        self.context_window = context_window
        s = settings or PolicySettings()
        if reserve_tokens is not None:
            s = PolicySettings(values={**{k: s[k] for k in policies.all_keys()}, "compaction.reserve_tokens": reserve_tokens})
        self.policy = policies.POLICIES.get(policy)
        self.settings = s.with_window(context_window, "flag")
        self.reserve_tokens = self.settings.reserve_tokens
        self.keep_recent_tokens = keep_recent_tokens
        self.compact_summarize = compact_summarize
        self.max_messages = max_messages
        self.max_chars = max_chars
        self.strategy = strategy
        self.keep_first_user = keep_first_user
        self.tokenizer = get_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, str) else tokenizer
        self.events = events if events is not None else EventLog()
        self.warn_on_truncation = warn_on_truncation
        self.steps: list[TransformStep] = []

    @property
    def last(self) -> TransformStep | None:
        return self.steps[-1] if self.steps else None

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        tok = self.tokenizer
        msgs = list(messages)
        ctx = resolve(msgs, settings=ContextSettings(), tokenizer=tok) if msgs else None
        est = ctx.tokens if ctx is not None else 0
        step = TransformStep(len(self.steps) + 1, len(msgs), 0, est, 0)
        self._check_size(msgs, ctx.chars if ctx is not None else 0)
        # 1. archive
        if self.tool_call_cutoff is not None and self.tool_summary_strategy != "off":
            msgs, res = archive_messages(
                msgs,
                cutoff=self.tool_call_cutoff,
                strategy=self.tool_summary_strategy,
                summarize=self.summarize,
                label="transform",
                events=self.events,
            )
            if res.changed:
                step.archived = res.archived_count
                step.actions.append("archive")
        # 2. agent view
        if self.agent_view:
            msgs, hidden, stripped = agent_view(msgs)
            step.hidden, step.stripped_calls = hidden, stripped
        # 3. cut
        if self.context_window:
            msgs, cut = self._cut(msgs)
            if cut:
                step.cut = cut
                step.actions.append("cut")
        # 4. window
        if self.max_messages is not None or self.max_chars is not None:
            # lazy: start-up (loaded only when this runs: ..history.window)
            from ..history.window import window_messages

            msgs, dropped = window_messages(
                msgs,
                strategy=self.strategy,
                max_messages=self.max_messages or 10**12,
                max_chars=self.max_chars or 10**15,
                keep_first_user=self.keep_first_user,
            )
            if dropped:
                step.dropped = dropped
                step.actions.append("window")
                self.events.emit(
                    "truncated", dropped_count=dropped, remaining_count=len(msgs), strategy=self.strategy
                )
                if self.warn_on_truncation:
                    log.warning("context window: dropped %d messages, %d remain", dropped, len(msgs))
        step.messages_out = len(msgs)
        step.tokens_out = sum(count_messages(msgs, tok))
        self.steps.append(step)
        return msgs

    def _check_size(self, msgs: list[Message], chars: int) -> None:
        """AgentCore.Context's per-iteration ``estimate_size`` + ``check_size``: a ``size`` event every
        call, and a ``warning`` event (level ``warning`` or ``critical``) once the agent-visible
        characters reach a threshold of the ``chars`` policy (``context.warning_chars`` /
        ``context.critical_chars``)."""
        self.events.emit(
            "size", char_count=chars, message_count=len(msgs),
            has_system_prompt=any(m.role == "system" for m in msgs),
        )
        v = policies.POLICIES.get("chars").evaluate(Measure(0, chars), self.settings)
        if v.status in (WARNING, CRITICAL):
            threshold = self.settings.critical_chars if v.status == CRITICAL else self.settings.warning_chars
            self.events.emit("warning", char_count=chars, threshold=threshold, level=v.status)

    def _cut(self, msgs: list[Message]) -> tuple[list[Message], int]:
        # lazy: start-up (loaded only when this runs: ..history.cut)
        from ..history.cut import find_cut

        assert self.context_window
        est = resolve(msgs, settings=ContextSettings(window=self.context_window), tokenizer=self.tokenizer)
        if not self.policy.evaluate(Measure.of(est), self.settings).compact:
            return msgs, 0
        limit, _ = self.settings.effective_limit()  # the window is known: window - reserve
        cp = find_cut(msgs, keep_recent_tokens=self.keep_recent_tokens, effective_limit=limit, tokenizer=self.tokenizer)
        if not cp.cut_index:
            return msgs, 0
        old = msgs[: cp.cut_index]
        system = [m for m in old if m.role == "system"]
        rest = [m for m in old if m.role != "system"]
        if self.compact_summarize is not None:
            text = self.compact_summarize(rest).strip()
            if not text.startswith(COMPACTION_PREFIX):
                text = f"{COMPACTION_PREFIX}\n{text}"
        else:
            text = (
                f"{COMPACTION_PREFIX}\n{len(rest)} earlier messages (~{cp.tokens_summarized:,} tokens) were "
                "removed to fit the context window."
            )
        summary = Message(
            "user",
            [Block("text", text=text)],
            metadata=Metadata(agent_visible=True, user_visible=False, kind=KIND_COMPACTION_SUMMARY),
        )
        self.events.emit(
            "compaction", messages_before=len(msgs), cut_index=cp.cut_index, tokens_before=est.tokens,
            tokens_summarized=cp.tokens_summarized,
        )
        return system + [summary] + msgs[cp.cut_index :], len(rest)


def agent_view(msgs: Sequence[Message]) -> tuple[list[Message], int, int]:
    """The messages a model call sees: agent-visible ones, without the calls whose results are
    hidden. Returns (messages, hidden count, stripped call count); changed messages are copies."""
    p = pair(msgs)
    hidden_calls: dict[int, set[int]] = {}
    for ci, cb, ri in p.pairs:
        if ri is not None and not msgs[ri].agent_visible and msgs[ci].agent_visible:
            hidden_calls.setdefault(ci, set()).add(id(cb))
    out: list[Message] = []
    hidden = 0
    stripped = 0
    for i, m in enumerate(msgs):
        if not m.agent_visible:
            hidden += 1
            continue
        drop = hidden_calls.get(i)
        if drop:
            content = [b for b in m.content if id(b) not in drop]
            stripped += len(m.content) - len(content)
            if not content:
                continue
            c = Message(m.role, content, id=m.id, metadata=m.metadata, usage=m.usage, usage_key=m.usage_key,
                        model=m.model, lines=m.lines, extra=dict(m.extra))
            c.touch()
            out.append(c)
        else:
            out.append(m)
    return out, hidden, stripped


def make_transform(**opts: Any) -> ContextTransform:
    """AgentCore.Context's ``make_transform``: see :class:`ContextTransform` for the options."""
    return ContextTransform(**opts)
