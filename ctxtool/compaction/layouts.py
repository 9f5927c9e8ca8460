"""Layouts: where to cut and what stays around the summary, as registered classes. A layout names
the summary style it asks for and finds the cut in the agent's context; adding one is a
:class:`Layout` subclass with a ``cut(ctx) -> Cut`` and one :func:`register_layout` line
(``tests/test_compact_registries.py`` shows one). ``--layout`` offers every registered layout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ..history.cut import CutPoint, find_cut, is_tool_message
from ..history.pairing import closed_groups
from ..model import KIND_COMPACTION_SUMMARY, KIND_TOOL_SUMMARY, Message, is_injected
from ..registry import Registry
from ..tokens.count import Tokenizer

if TYPE_CHECKING:  # a type only: settings reads the layouts
    from .settings import CompactOptions


@dataclass(frozen=True, slots=True)
class CutContext:
    """What a layout sees: the agent's context, its token counts and the legal cut points."""

    messages: Sequence[Message]
    counts: Sequence[int]
    ok: Sequence[bool]  # may the history be cut right before this message (closed tool groups)
    limit: int | None  # the trigger's token limit, when a window is known
    opts: CompactOptions
    tok: Tokenizer


@dataclass(frozen=True, slots=True)
class Cut:
    index: int | None  # the first message kept verbatim (None: nothing to cut)
    cutpoint: CutPoint | None = None  # the backward walk's details, when one was made
    initial: Message | None = None  # a message kept before the summary (adk-code's first request)


class Layout:
    """Where the cut goes and what stays around the summary."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    style: ClassVar[str] = "structured"  # the summary style it asks for: structured | retain

    def cut(self, ctx: CutContext) -> Cut:
        raise NotImplementedError


LAYOUTS: Registry[Layout] = Registry("layout")
#: a class decorator: register a layout class under its ``name``
register_layout = LAYOUTS.register_instance_of


def real_user(m: Message) -> bool:
    """A message a user wrote (not tool results, not a summary, not injected by the agent)."""
    return (m.role == "user" and not is_tool_message(m) and m.metadata.kind not in (KIND_COMPACTION_SUMMARY, KIND_TOOL_SUMMARY)
            and not is_injected(m))


@register_layout
class SummaryLayout(Layout):
    name = "summary"
    help = "system + [Previous conversation summary] + kept messages (pi, Go agent)"

    def cut(self, ctx: CutContext) -> Cut:
        cp = find_cut(ctx.messages, keep_recent_tokens=ctx.opts.keep_recent_tokens, keep_recent=ctx.opts.keep_recent,
                      effective_limit=ctx.limit, tokenizer=ctx.tok, counts=ctx.counts)
        return Cut(cp.cut_index, cp)


@register_layout
class RetainLayout(Layout):
    name = "retain"
    help = "<retain> + <summary> + last N turns (tool-output cache spec)"
    style = "retain"

    def cut(self, ctx: CutContext) -> Cut:
        eff = ctx.messages
        users = [i for i in range(len(eff)) if ctx.ok[i] and real_user(eff[i])]
        turns = max(ctx.opts.retain_last_turns, 0)
        if turns == 0:
            return Cut(len(eff))
        return Cut(users[-turns] if len(users) >= turns else None)


@register_layout
class InitialLayout(Layout):
    name = "initial"
    help = "first request + summary + last 10 messages (adk-code)"

    def cut(self, ctx: CutContext) -> Cut:
        eff, n, keep = ctx.messages, len(ctx.messages), max(ctx.opts.keep_last_messages, 0)
        f = next((i for i in range(n) if real_user(eff[i])), None)
        if f is None or closed_groups(eff)[f + 1 : f + 2] not in ([f + 1], []):
            # no separable initial request: the summary layout with a message budget
            cp = find_cut(eff, keep_recent_tokens=None, keep_recent=keep, tokenizer=ctx.tok, counts=ctx.counts)
            return Cut(cp.cut_index, cp)
        if keep == 0:
            return Cut(n, initial=eff[f])
        target = n - keep
        cut = next((i for i in range(min(target, n - 1), f + 1, -1) if ctx.ok[i]), None)
        return Cut(cut, initial=eff[f])
