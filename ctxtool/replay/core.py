"""Replay a transcript turn by turn as its agent lived it (adk-code's token tracker): for each turn
(one assistant API call) the input the call saw (recorded, else the usage-aware estimate), its
output, the running context with its share of the window, growth and turns left, and where each
trigger policy of :mod:`ctxtool.policies` fires; recorded compactions bring the context down.
The figures and thresholds in detail: docs/architecture.md, "Commands, in more detail"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import policies
from ..config import Config
from ..errors import CtxtoolError, Failure
from ..model import KIND_COMPACTION_SUMMARY, Compaction, Message, Transcript, group_turns
from ..policies.base import Threshold
from ..policies.settings import PolicySettings
from ..tokens.context import ContextInfo, ContextSettings, resolve
from ..tokens.count import Tokenizer, count_messages, for_transcript, get_tokenizer

# a recorded prompt smaller than the previous context by more than this share counts as a
# compaction (small drops are normal: providers strip earlier thinking blocks)
DROP_RATIO = 0.25

UNITS = {"tokens": "tokens", "chars": "characters", "messages": "messages"}
CONTEXT_COLOR = "#1d4ed8"
CHARS_COLOR = "#65a30d"


def unit(metric: str) -> str:
    """A threshold's metric as its unit's name ("characters")."""
    return UNITS.get(metric, metric)


#: the colour of each trigger policy's line in the charts (terminal, SVG, PNG)
THRESHOLD_COLORS = {
    "effective-limit": "#d97706",
    "reserve": "#d97706",
    "ratio": "#7c3aed",
    "hard-stop": "#2563eb",
    "chars-warning": "#65a30d",
    "chars-critical": "#0f766e",
    "hard-limit": "#dc2626",
}


# -- thresholds --------------------------------------------------------------------------


def thresholds(window: int | None, cfg: Any = None, settings: PolicySettings | None = None) -> list[Threshold]:
    """Every registered trigger policy's thresholds for a window (``None``: unknown), with
    the settings given, else those of ``cfg`` (default: the config of the environment)."""
    if settings is None:
        settings = PolicySettings.from_config(cfg if cfg is not None else Config(), context_window=window)
    return policies.thresholds(window, settings)


# -- the report ----------------------------------------------------------------------------


@dataclass(slots=True)
class Turn:
    number: int
    message_index: int  # first message of the turn in the transcript's message list
    message_id: str | None
    line: int | None
    model: str | None
    input_tokens: int
    output_tokens: int
    context_tokens: int  # input + output: the running total
    context_chars: int  # agent-visible characters after the turn (AgentCore.Context's metric)
    growth: int  # turn size: new tokens this turn added to the context
    cumulative_tokens: int  # tokens processed so far (sum of input + output)
    percent: float | None
    average_turn: int
    turns_left: int | None
    source: str  # "usage" or "estimate"
    compacted_before: bool = False  # a recorded compaction (or a drop in usage) preceded it
    fired: list[str] = field(default_factory=list)  # policies crossed at this turn

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.number,
            "message_index": self.message_index,
            "message_id": self.message_id,
            "line": self.line,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "context_tokens": self.context_tokens,
            "context_chars": self.context_chars,
            "growth": self.growth,
            "cumulative_tokens": self.cumulative_tokens,
            "percent": self.percent,
            "average_turn": self.average_turn,
            "turns_left": self.turns_left,
            "source": self.source,
            "compacted_before": self.compacted_before,
            "fired": self.fired,
        }


@dataclass(slots=True)
class PolicyHit:
    threshold: Threshold
    turns: list[int] = field(default_factory=list)  # turns where it fired (upward crossings)

    @property
    def first_turn(self) -> int | None:
        return self.turns[0] if self.turns else None

    def to_json(self) -> dict[str, Any]:
        return {**self.threshold.to_json(), "first_turn": self.first_turn, "turns": self.turns}


@dataclass(slots=True)
class ReplayReport:
    transcript: str
    format: str
    window: int | None
    window_source: str
    tokenizer: str
    turns: list[Turn] = field(default_factory=list)
    policies: dict[str, PolicyHit] = field(default_factory=dict)
    compactions: list[int] = field(default_factory=list)  # turns preceded by a compaction
    context: ContextInfo | None = None  # the current context, as stats and check report it
    accuracy: Any = None  # ctxtool.calibration.accuracy.Accuracy: each estimate against the recorded input
    error: Any = None  # ctxtool.calibration.accuracy.ErrorBar of the current context's estimate
    could_flip: list[str] = field(default_factory=list)  # thresholds within that error

    @property
    def peak_tokens(self) -> int:
        return max((t.context_tokens for t in self.turns), default=0)

    @property
    def final(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    @property
    def stopped_at(self) -> int | None:
        """The turn at which the hard limit would have stopped the agent."""
        for p in self.policies.values():
            if p.threshold.stop:
                return p.first_turn
        return None

    def to_json(self) -> dict[str, Any]:
        f = self.final
        return {
            "transcript": self.transcript,
            "format": self.format,
            "context_window": self.window,
            "window_source": self.window_source,
            "model": self.context.model if self.context else None,
            "context": self.context.to_json() if self.context else None,
            "tokenizer": self.tokenizer,
            "turn_count": len(self.turns),
            "peak_tokens": self.peak_tokens,
            "final_tokens": f.context_tokens if f else 0,
            "final_percent": f.percent if f else None,
            "average_turn": f.average_turn if f else 0,
            "turns_left": f.turns_left if f else None,
            "stopped_at": self.stopped_at,
            "compactions": self.compactions,
            "policies": {k: v.to_json() for k, v in self.policies.items()},
            "turns": [t.to_json() for t in self.turns],
            "accuracy": self.accuracy.to_json() if self.accuracy is not None else None,
            "estimate_error": self.error.to_json() if self.error is not None else None,
            "could_flip": self.could_flip,
        }


def replay(
    t: Transcript,
    *,
    context_window: int | None = None,
    window_source: str | None = None,
    tokenizer: Tokenizer | str | None = None,
    policies: Sequence[Threshold] | None = None,
    cfg: Any = None,
    context: ContextSettings | None = None,
) -> ReplayReport:
    """Walk ``t`` turn by turn; see the module docstring. The window is ``context_window``
    when given (``window_source`` says whence), else the resolver's (``context``, else
    ``cfg``); the thresholds are ``policies``, else the registry's with ``cfg``'s settings."""
    tok = get_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, str) else tokenizer
    tok = for_transcript(tok, t)  # a calibrated estimate fitted to the transcript's own usage
    if context_window is not None or window_source is not None:
        context = ContextSettings(window=context_window or None)
    elif context is None:
        cfg = cfg if cfg is not None else Config()
        context = ContextSettings.from_config(cfg)
    info = resolve(t, settings=context, tokenizer=tok)
    window = info.window
    src = window_source if window_source is not None and window else info.window_source
    ths = list(policies) if policies is not None else thresholds(window, cfg)
    report = ReplayReport(t.label, t.format, window, src, tok.name, context=info)
    for th in ths:
        report.policies[th.name] = PolicyHit(th)

    msgs = t.messages
    counts = count_messages(msgs, tok)
    pos = {id(m): i for i, m in enumerate(msgs)}
    turn_of: dict[int, int] = {}
    groups = group_turns(msgs)
    for k, g in enumerate(groups):
        for i in g:
            turn_of[i] = k

    # the agent's context as (message index, tokens, chars); tokens anchored to usage
    ctx: list[tuple[int, int, int]] = []
    ctx_tokens = 0
    ctx_chars = 0
    prev_context = 0
    cumulative = 0
    sizes_sum = 0
    compacted = False
    prev_vals = {name: 0 for name in report.policies}
    cur_turn: Turn | None = None
    cur_group = -1
    turn_input = 0
    turn_est_out = 0

    def finish() -> None:
        nonlocal prev_context, cumulative, sizes_sum, ctx_tokens, compacted
        tt = cur_turn
        assert tt is not None
        g = groups[cur_group]
        usage = None
        for i in g:
            u = msgs[i].usage
            if u is not None and u.total > 0:
                usage = u
        if usage is not None:
            tt.input_tokens = usage.input + usage.cache_creation + usage.cache_read
            tt.output_tokens = usage.output
            tt.source = "usage"
        else:
            tt.input_tokens = turn_input
            tt.output_tokens = turn_est_out
        tt.context_tokens = tt.input_tokens + tt.output_tokens
        ctx_tokens = tt.context_tokens
        tt.context_chars = ctx_chars
        ctx_msgs = len(ctx)
        if tt.source == "usage" and tt.number > 1 and tt.input_tokens < prev_context * (1 - DROP_RATIO):
            compacted = True  # the recorded prompt shrank: compacted outside this file's entries
        if compacted:
            tt.compacted_before = True
            report.compactions.append(tt.number)
            compacted = False
        tt.growth = tt.context_tokens - prev_context if tt.context_tokens >= prev_context else tt.output_tokens
        # the first turn's prompt (system prompt, instructions, task) is paid once: the
        # average turn size counts it only while it is the only turn
        if tt.number > 1:
            sizes_sum += tt.growth
        tt.average_turn = round(sizes_sum / (tt.number - 1)) if tt.number > 1 else tt.growth
        cumulative += tt.context_tokens
        tt.cumulative_tokens = cumulative
        if window:
            tt.percent = round(100.0 * tt.context_tokens / window, 2)
            hard = next((p.threshold.value for p in report.policies.values() if p.threshold.stop), window)
            left = hard - tt.context_tokens
            tt.turns_left = max(left, 0) // tt.average_turn if tt.average_turn > 0 else None
        for name, hit in report.policies.items():
            th = hit.threshold
            val = {"tokens": tt.context_tokens, "chars": tt.context_chars}.get(th.metric, ctx_msgs)
            if th.reached(val) and not th.reached(prev_vals[name]):
                hit.turns.append(tt.number)
                tt.fired.append(name)
            prev_vals[name] = val
        prev_context = tt.context_tokens
        report.turns.append(tt)

    for e in t.entries:
        if isinstance(e, Compaction):
            if cur_turn is not None:
                finish()
                cur_turn = None
            keep_from = None
            if e.first_kept_id:
                for k, (mi, _, _) in enumerate(ctx):
                    if msgs[mi].id == e.first_kept_id:
                        keep_from = k
                        break
            kept = ctx[keep_from:] if keep_from is not None else []
            stoks = tok.count(e.summary) if e.summary else 0
            ctx = kept
            ctx_tokens = stoks + sum(x[1] for x in kept)
            ctx_chars = len(e.summary or "") + sum(x[2] for x in kept)
            compacted = True
            continue
        if not isinstance(e, Message):
            continue
        i = pos[id(e)]
        grp = turn_of.get(i)
        if cur_turn is not None and grp != cur_group:
            finish()
            cur_turn = None
        if grp is not None and cur_turn is None:
            cur_group = grp
            turn_input = ctx_tokens
            turn_est_out = 0
            cur_turn = Turn(
                number=grp + 1, message_index=i, message_id=e.id, line=e.lineno, model=e.model,
                input_tokens=0, output_tokens=0, context_tokens=0, context_chars=0, growth=0,
                cumulative_tokens=0, percent=None, average_turn=0, turns_left=None, source="estimate",
            )
        if not e.agent_visible:
            continue
        if e.metadata.kind == KIND_COMPACTION_SUMMARY and ctx:
            # a compaction written as a message (Claude Code's compact summary after its
            # boundary): the agent's context restarts from it
            ctx = []
            ctx_tokens = ctx_chars = 0
            compacted = True
        ch = e.chars()
        ctx.append((i, counts[i], ch))
        ctx_tokens += counts[i]
        ctx_chars += ch
        if cur_turn is not None:
            turn_est_out += counts[i]
    if cur_turn is not None:
        finish()
    _uncertainty(report, t, tok)
    return report


def _uncertainty(report: ReplayReport, t: Transcript, tok: Tokenizer) -> None:
    """The estimate's accuracy against the recorded input (when the transcript records it),
    the current context's error bar, and the thresholds that lie within it."""
    # lazy: start-up (loaded only when this runs: ..calibration.accuracy)
    from ..calibration.accuracy import accuracy, context_error

    info = report.context
    if any(m.usage is not None and m.usage.total > 0 for m in t.messages):
        report.accuracy = accuracy(t)
    if info is None:
        return
    report.error = bar = context_error(t, tok, info.tokens, info.tokens_source, info.model, report.accuracy,
                                       info.trailing_tokens)
    report.could_flip = [h.threshold.name for h in report.policies.values()
                         if h.threshold.metric == "tokens" and bar.straddles(h.threshold.value)]


def replay_file(
    path: str | Path,
    *,
    fmt: str | None = None,
    context_window: int | None = None,
    model: Any = None,
    tokenizer: str | None = None,
    cfg: Any = None,
    index: int | None = None,
) -> list[ReplayReport]:
    """Replay every transcript of ``path`` (or only the ``index``-th); ``model`` is a
    registry name (or entry) given as ``--model``."""
    from itertools import count

    # lazy: start-up (loaded only when this runs: ..run.operation, ..run.runner)
    from ..run.operation import MapOp
    from ..run.runner import run_file

    c = cfg if cfg is not None else Config()
    name = getattr(model, "name", model)
    cs = ContextSettings.from_config(c, window=context_window, model=name)
    tok = get_tokenizer(tokenizer or "heuristic")
    position = count()

    def one(t: Transcript) -> ReplayReport | None:
        n = next(position)
        return replay(t, tokenizer=tok, cfg=c, context=cs) if index is None or n == index else None

    run = run_file(MapOp(one, "replay"), str(path), fmt=fmt, jobs=1)
    out = [r for r in run.report.items if r is not None]
    if index is not None and not out:
        raise CtxtoolError(f"no transcript #{index} in the file", path=str(path), kind=Failure.NOT_FOUND)
    return out


def title(r: ReplayReport) -> str:
    """The chart's title: the transcript, its turns, its peak and its window."""
    w = f"window {r.window:,} ({r.window_source})" if r.window else "window unknown"
    return f"{Path(r.transcript.split('#')[0]).name}: {len(r.turns)} turns, peak {r.peak_tokens:,} tokens, {w}"
