"""Planning: the agent's context, the trigger, and the cut (no model is called)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..history.cut import CutPoint, cut_candidates
from ..model import Message, Transcript
from ..tokens.count import Tokenizer, count_messages, get_tokenizer
from .layouts import LAYOUTS, CutContext
from .settings import CompactOptions
from .trigger import decide, window_info
from .view import AgentContext, context_view


@dataclass(slots=True)
class Plan:
    view: AgentContext
    counts: list[int]
    should: bool
    trigger: str
    context_tokens: int
    limit: int | None
    window: int | None
    window_source: str = "none"  # where the window came from (ctxtool.tokens.context.WindowInfo.source)
    cut: int | None = None  # index into view.effective
    cutpoint: CutPoint | None = None
    initial: Message | None = None  # adk-code: the first user message, kept
    summarize: list[Message] = field(default_factory=list)
    keep: list[Message] = field(default_factory=list)
    reason: str = ""

    @property
    def split_turn(self) -> bool:
        return bool(self.cutpoint and self.cutpoint.split_turn)


def problem_keys(msgs: list[Message]) -> set[tuple[str, str | None, str]]:
    """The structural problems of a message list (orphans, unanswered calls), comparable."""
    # lazy: start-up (loaded only when this runs: ..history.validate)
    from ..history.validate import check_messages

    return {(p.code, p.message_id, p.message.split(" (in ")[0]) for p in check_messages(msgs)}


def plan_compaction(t: Transcript, opts: CompactOptions, tok: Tokenizer | None = None) -> Plan:
    """Decide and cut, without summarizing."""
    tok = tok or get_tokenizer(opts.tokenizer)
    layout = LAYOUTS.get(opts.layout)
    view = context_view(t, tok)
    eff = view.effective
    counts = count_messages(eff, tok)
    w = window_info(t, opts)
    window = int(w.window or 0) or None
    d = decide(t, window, opts, tok)
    p = Plan(view, counts, d.should, d.why, d.context_tokens, d.limit, window, w.source if window else "none")
    if not d.should:
        p.reason = d.why
        return p
    ok = cut_candidates(eff)
    first_conv = next((i for i, m in enumerate(eff) if m.role != "system"), len(eff))
    c = layout.cut(CutContext(eff, counts, ok, d.limit if window else None, opts, tok))
    cut, p.cutpoint, p.initial = c.index, c.cutpoint, c.initial
    if cut is None or cut <= first_conv:
        p.reason = "nothing to cut: the recent part already fits the kept budget"
        return p
    # the cut must leave no orphan the input did not have: move it back to an earlier candidate if it would
    baseline = problem_keys(eff)
    while cut is not None and cut > first_conv:
        kept = [m for m in eff[:cut] if m.role == "system"] + ([p.initial] if p.initial else []) + eff[cut:]
        if problem_keys(kept) <= baseline:
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
