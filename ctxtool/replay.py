"""Replay a transcript turn by turn as its agent lived it (seed 004 token tracker).

A *turn* is one assistant API call: a run of consecutive assistant messages (Claude
Code splits one response over several messages sharing a ``usage_key``; Codex puts
reasoning, text and calls in separate items and the usage on the last). For each turn:

* ``input``: the prompt the call saw. From recorded usage when there is one
  (``input + cache_creation + cache_read``), otherwise the context so far estimated
  from the agent-visible messages (seed 000's usage-aware estimate: the last recorded
  usage plus estimates of everything after it).
* ``output``: ``usage.output``, or the estimated size of the turn's own messages.
* ``context``: input + output, the running total the next call starts from, with its
  percentage of the window, the turn's growth, the average turn size (the growth of
  turns 2 onward: the first prompt is paid once) and the turns left before the hard
  limit (seed 004's ``📊 45K/1M (4.5%) ~450 turns left``).

Thresholds, named as ``ctxtool check`` names its policies: ``seed000`` (window − 16,384
reserve; without a window seed 000's 8,000-token ``max_tokens``), ``reserve`` (seeds
000/003: strictly above window − reserve), ``ratio`` (seed 001: 0.8 × window),
``seed004`` (70 % of the window), seed 002's character thresholds ``chars-warning`` /
``chars-critical`` (200,000 / 400,000 characters of agent-visible context) and seed
004's ``hard-limit`` (95 %), where the agent stops. A policy *fires* at each turn where
its metric goes from below its threshold to at-or-above it; recorded compactions
(compaction entries, compaction-summary messages such as Claude Code's, or a recorded
prompt a quarter smaller than the context before it) bring the context back down.

>>> from ctxtool import formats, replay               # doctest: +SKIP
>>> r = replay.replay(next(formats.read("session.jsonl")), context_window=200_000)
>>> r.policies["seed004"].first_turn, r.stopped_at
(26, None)
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CtxtoolError, ExitCode
from .model import KIND_COMPACTION_SUMMARY, Compaction, Message, Transcript
from .tokens import Tokenizer, count_messages, get_tokenizer

PLOT_SUFFIXES = (".png", ".svg", ".html", ".htm")
# a recorded prompt smaller than the previous context by more than this share counts as a
# compaction (small drops are normal: providers strip earlier thinking blocks)
DROP_RATIO = 0.25


# -- thresholds --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Threshold:
    name: str
    metric: str  # "tokens", "chars" or "messages"
    value: int
    label: str
    seed: str
    stop: bool = False  # the hard limit: the agent stops here
    strict: bool = False  # fires above the value (seed 003's ``>``), not at it

    @property
    def tokens(self) -> int:
        """Where it sits on a token axis (characters at 4 per token)."""
        return math.ceil(self.value / 4) if self.metric == "chars" else self.value

    def reached(self, value: int) -> bool:
        return value > self.value if self.strict else value >= self.value

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "value": self.value,
            "label": self.label,
            "seed": self.seed,
            "stop": self.stop,
            "strict": self.strict,
        }


def thresholds(
    window: int | None,
    *,
    reserve_tokens: int = 16384,
    max_tokens: int = 8000,
    max_messages: int = 50,
    ratio: float = 0.8,
    compact_threshold: float = 0.70,
    hard_limit: float = 0.95,
    warning_chars: int = 200_000,
    critical_chars: int = 400_000,
    enabled: bool = True,
) -> list[Threshold]:
    """Every trigger policy's threshold for a window (``None``: unknown window).

    Names follow ``ctxtool check`` (:mod:`ctxtool.triggers`): ``seed000``, ``reserve``,
    ``ratio``, ``seed004``; plus seed 004's ``hard-limit`` and seed 002's character
    thresholds ``chars-warning`` / ``chars-critical``.
    """
    out = []
    if enabled:
        if window and window > 0:
            lim = max(window - reserve_tokens, 0)
            out.append(Threshold("seed000", "tokens", lim, f"window − {reserve_tokens:,} reserve", "000"))
            out.append(Threshold("reserve", "tokens", lim, f"> window − {reserve_tokens:,}", "000/003", strict=True))
            out.append(Threshold("ratio", "tokens", int(window * ratio), f"{ratio:.0%} of window", "001"))
            out.append(Threshold("seed004", "tokens", int(window * compact_threshold), f"{compact_threshold:.0%} of window", "004"))
        elif max_tokens and max_tokens > 0:
            out.append(Threshold("seed000", "tokens", max_tokens, f"max_tokens {max_tokens:,} (no window)", "000"))
        elif max_messages and max_messages > 0:
            out.append(Threshold("seed000", "messages", max_messages, f"{max_messages} messages (no limit)", "000"))
    out.append(Threshold("chars-warning", "chars", warning_chars, f"{warning_chars:,} chars warning", "002"))
    out.append(Threshold("chars-critical", "chars", critical_chars, f"{critical_chars:,} chars critical", "002"))
    if window and window > 0:
        out.append(Threshold("hard-limit", "tokens", int(window * hard_limit), f"{hard_limit:.0%} hard limit", "004", stop=True))
    return out


def thresholds_from_config(window: int | None, cfg: Any = None) -> list[Threshold]:
    from .config import Config
    from .triggers import TriggerSettings

    c = cfg if cfg is not None else Config()
    s = TriggerSettings.from_config(c)
    return thresholds(
        window,
        reserve_tokens=s.reserve_tokens,
        max_tokens=s.max_tokens,
        max_messages=s.max_messages,
        ratio=s.threshold_ratio,
        compact_threshold=s.compact_threshold,
        hard_limit=s.hard_limit,
        warning_chars=int(c["context.warning_chars"]),
        critical_chars=int(c["context.critical_chars"]),
        enabled=s.enabled and s.auto_compact,
    )


def resolve_window(
    t: Transcript, context_window: int | None = None, model: Any = None, cfg: Any = None
) -> tuple[int | None, str]:
    """``--context-window``, ``--model`` (registry), the transcript's own record, config,
    then the registry entry of the model the transcript names."""
    if context_window:
        return int(context_window), "flag"
    if model is not None and model.context_window:
        return int(model.context_window), f"registry:{model.name}"
    cw = t.extra.get("context_window")
    if isinstance(cw, int) and cw > 0:
        return cw, "transcript"
    if cfg is not None:
        w, src = cfg.context_window()
        if w:
            return w, src
    from .registry import lookup

    name = t.extra.get("model") if isinstance(t.extra.get("model"), str) else None
    if not name:
        name = next((m.model for m in t.iter_messages() if m.role == "assistant" and m.model), None)
    info = lookup(name)
    if info and info.context_window:
        return info.context_window, f"registry:{info.name}"
    return None, "none"


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
    context_chars: int  # agent-visible characters after the turn (seed 002 metric)
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
        }


def group_turns(msgs: Sequence[Message]) -> list[list[int]]:
    """Message indices of each assistant API call, in order."""
    turns: list[list[int]] = []
    cur: list[int] | None = None
    keys: set[str] = set()
    usage_seen = False
    prev_role = None
    for i, m in enumerate(msgs):
        if m.role != "assistant":
            prev_role = m.role
            cur = None
            continue
        new = cur is None or prev_role != "assistant"
        if not new and m.usage_key and keys and m.usage_key not in keys:
            new = usage_seen  # a second keyed response right after the first
        if not new and m.usage is not None and usage_seen and (m.usage_key is None or m.usage_key not in keys):
            new = True
        if new:
            cur = []
            turns.append(cur)
            keys = set()
            usage_seen = False
        assert cur is not None
        cur.append(i)
        if m.usage_key:
            keys.add(m.usage_key)
        if m.usage is not None and m.usage.total > 0:
            usage_seen = True
        prev_role = "assistant"
    return turns


def replay(
    t: Transcript,
    *,
    context_window: int | None = None,
    window_source: str | None = None,
    tokenizer: Tokenizer | str | None = None,
    policies: Sequence[Threshold] | None = None,
    cfg: Any = None,
) -> ReplayReport:
    """Walk ``t`` turn by turn; see the module docstring."""
    tok = get_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, str) else tokenizer
    if context_window is None and window_source is None:
        context_window, window_source = resolve_window(t, cfg=cfg)
    window = context_window or None
    ths = list(policies) if policies is not None else thresholds_from_config(window, cfg)
    report = ReplayReport(t.label, t.format, window, window_source or ("flag" if window else "none"), tok.name)
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
    return report


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
    """Replay every transcript of ``path`` (or only the ``index``-th)."""
    from . import formats
    from .config import Config

    c = cfg if cfg is not None else Config()
    tok = get_tokenizer(tokenizer or "heuristic")
    out = []
    for n, t in enumerate(formats.read(path, fmt)):
        if index is not None and n != index:
            continue
        w, src = resolve_window(t, context_window, model, c)
        out.append(replay(t, context_window=w, window_source=src, tokenizer=tok, cfg=c))
    if index is not None and not out:
        raise CtxtoolError(f"no transcript #{index} in the file", path=str(path), code=ExitCode.NOT_FOUND)
    return out


# -- charts ------------------------------------------------------------------------------

THRESHOLD_COLORS = {
    "seed000": "#d97706",
    "reserve": "#d97706",
    "ratio": "#7c3aed",
    "seed004": "#2563eb",
    "chars-warning": "#65a30d",
    "chars-critical": "#0f766e",
    "hard-limit": "#dc2626",
}


def chart_top(r: ReplayReport) -> int:
    """The y-axis top: the peak or the highest token threshold, whichever is larger.

    Character thresholds (seed 002) sit on the token axis at 4 characters per token; one
    above this top is not drawn but listed (:func:`thresholds_above`)."""
    tok = [p.threshold.tokens for p in r.policies.values() if p.threshold.metric == "tokens"]
    top = max([r.peak_tokens] + tok) if tok or r.peak_tokens else max(
        [p.threshold.tokens for p in r.policies.values()], default=1
    )
    return max(top, 1)


def threshold_groups(r: ReplayReport) -> list[tuple[int, list[PolicyHit]]]:
    """Thresholds drawn on the chart, by their place on the token axis (``seed000`` and
    ``reserve`` share one)."""
    top = chart_top(r) * 1.05
    groups: dict[int, list[PolicyHit]] = {}
    for hit in r.policies.values():
        if hit.threshold.tokens <= top:
            groups.setdefault(hit.threshold.tokens, []).append(hit)
    return sorted(groups.items())


def thresholds_above(r: ReplayReport) -> list[PolicyHit]:
    """Thresholds too high for the chart's scale (character thresholds far above the window)."""
    top = chart_top(r) * 1.05
    return [h for h in r.policies.values() if h.threshold.tokens > top]


def _above_note(r: ReplayReport) -> str:
    hits = thresholds_above(r)
    return ("above the chart: " + "; ".join(f"{_k(h.threshold.tokens)} {_group_label([h])}" for h in hits)) if hits else ""


def _group_label(hits: list[PolicyHit]) -> str:
    names = ", ".join(
        h.threshold.name + (f" ({_k(h.threshold.value)} chars)" if h.threshold.metric == "chars" else "")
        for h in hits
    )
    first = min((h.first_turn for h in hits if h.first_turn), default=None)
    return names + (f" @ turn {first}" if first else "")


def render_svg(r: ReplayReport, width: int = 900, height: int = 420) -> str:
    """A self-contained SVG chart: context per turn, thresholds as dashed lines."""
    ml, mr, mt, mb = 70, 190, 36, 44
    pw, ph = width - ml - mr, height - mt - mb
    top = chart_top(r) * 1.05
    n = max(len(r.turns), 1)

    def x(turn: float) -> float:
        return ml + (pw * (turn - 1) / (n - 1) if n > 1 else pw / 2)

    def y(v: float) -> float:
        return mt + ph - ph * v / top

    e = html.escape
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{ml}" y="20" font-size="13" font-weight="bold">{e(_title(r))}</text>',
        f'<line x1="{ml}" y1="{mt + ph}" x2="{ml + pw}" y2="{mt + ph}" stroke="#333"/>',
        f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{mt + ph}" stroke="#333"/>',
    ]
    for k in range(6):
        v = top * k / 5
        parts.append(f'<line x1="{ml - 4}" y1="{y(v):.1f}" x2="{ml}" y2="{y(v):.1f}" stroke="#333"/>')
        parts.append(f'<text x="{ml - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{_k(v)}</text>')
        parts.append(f'<line x1="{ml}" y1="{y(v):.1f}" x2="{ml + pw}" y2="{y(v):.1f}" stroke="#eee"/>')
    step = max(1, math.ceil(n / 10))
    for turn in range(1, n + 1, step):
        parts.append(f'<text x="{x(turn):.1f}" y="{mt + ph + 16}" text-anchor="middle">{turn}</text>')
    parts.append(f'<text x="{ml + pw / 2}" y="{height - 8}" text-anchor="middle">turn</text>')
    parts.append(
        f'<text x="14" y="{mt + ph / 2}" text-anchor="middle" transform="rotate(-90 14 {mt + ph / 2})">context tokens</text>'
    )
    if r.turns:
        pts = " ".join(f"{x(tt.number):.1f},{y(tt.context_tokens):.1f}" for tt in r.turns)
        area = f"{x(1):.1f},{y(0):.1f} {pts} {x(r.turns[-1].number):.1f},{y(0):.1f}"
        parts.append(f'<polygon class="context-area" points="{area}" fill="#93c5fd" fill-opacity="0.35"/>')
        parts.append(f'<polyline class="context" points="{pts}" fill="none" stroke="#1d4ed8" stroke-width="2"/>')
    for c in r.compactions:
        parts.append(
            f'<line class="compaction" x1="{x(c):.1f}" y1="{mt}" x2="{x(c):.1f}" y2="{mt + ph}" stroke="#6b7280" '
            f'stroke-dasharray="2,3"/>'
        )
    for value, hits in threshold_groups(r):
        stop = any(h.threshold.stop for h in hits)
        col = THRESHOLD_COLORS.get(hits[0].threshold.name, "#555")
        yy = y(value)
        for h in hits:
            parts.append(
                f'<line class="threshold" data-policy="{e(h.threshold.name)}" data-value="{value}" x1="{ml}" '
                f'y1="{yy:.1f}" x2="{ml + pw}" y2="{yy:.1f}" stroke="{col}" stroke-width="{2 if stop else 1.2}" '
                f'stroke-dasharray="{"none" if stop else "6,4"}"/>'
            )
        parts.append(f'<text x="{ml + pw + 6}" y="{yy + 4:.1f}" fill="{col}">{_k(value)} {e(_group_label(hits))}</text>')
        for h in hits:
            if h.first_turn:
                ft = r.turns[h.first_turn - 1]
                parts.append(
                    f'<circle class="fired" data-policy="{e(h.threshold.name)}" cx="{x(ft.number):.1f}" '
                    f'cy="{y(ft.context_tokens):.1f}" r="{5 if stop else 3.5}" fill="{col}"/>'
                )
    for k, h in enumerate(thresholds_above(r)):
        parts.append(
            f'<text class="threshold-above" data-policy="{e(h.threshold.name)}" x="{ml + pw + 6}" '
            f'y="{mt + ph + 16 + 13 * k}" fill="#666">↑ {_k(h.threshold.tokens)} {e(_group_label([h]))}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(r: ReplayReport) -> str:
    """A self-contained HTML page: the SVG chart, the thresholds and the turn table."""
    e = html.escape
    rows = []
    for tt in r.turns:
        rows.append(
            "<tr>" + "".join(
                f"<td>{e(str(v))}</td>"
                for v in (
                    tt.number, tt.line or "", f"{tt.input_tokens:,}", f"{tt.output_tokens:,}",
                    f"{tt.context_tokens:,}", "" if tt.percent is None else f"{tt.percent:.1f}%",
                    f"{tt.average_turn:,}", "" if tt.turns_left is None else f"{tt.turns_left:,}",
                    tt.source, " ".join(tt.fired) + (" compacted" if tt.compacted_before else ""),
                )
            ) + "</tr>"
        )
    pol = "".join(
        f"<li><b>{e(n)}</b> ({e(h.threshold.label)}, seed {e(h.threshold.seed)}): "
        f"{'turn ' + str(h.first_turn) if h.first_turn else 'never reached'}</li>"
        for n, h in r.policies.items()
    )
    head = "".join(
        f"<th>{c}</th>" for c in ("turn", "line", "input", "output", "context", "window", "avg/turn", "turns left", "source", "events")
    )
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{e(_title(r))}</title>"
        "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ddd;padding:2px 6px;text-align:right}</style></head><body>\n"
        f"<h2>{e(_title(r))}</h2>\n{render_svg(r)}\n<ul>{pol}</ul>\n"
        f"<table><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(rows) + "\n</tbody></table>\n</body></html>\n"
    )


def _title(r: ReplayReport) -> str:
    w = f"window {r.window:,} ({r.window_source})" if r.window else "window unknown"
    return f"{Path(r.transcript.split('#')[0]).name}: {len(r.turns)} turns, peak {r.peak_tokens:,} tokens, {w}"


def _k(v: float) -> str:
    if v >= 1_000_000:
        return f"{v / 1_000_000:.1f}M"
    if v >= 1000:
        return f"{v / 1000:.0f}k"
    return f"{v:.0f}"


def write_plot(r: ReplayReport, path: str | Path) -> str:
    """Write the chart as PNG/SVG (matplotlib) or HTML (inline SVG, no dependency); returns the kind."""
    from .jsonio import atomic_output

    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise CtxtoolError(
            f"--plot: unsupported file type {suffix or '(none)'!r}; use .png, .svg or .html", code=ExitCode.USAGE
        )
    if suffix in (".html", ".htm"):
        with atomic_output(path) as out:
            out.write(render_html(r).encode("utf-8"))
        return "html"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise CtxtoolError(
            f"--plot {suffix} needs matplotlib, which is not installed; install it or write .html instead",
            code=ExitCode.USAGE,
        ) from err
    fig, ax = plt.subplots(figsize=(12, 5), dpi=100)
    try:
        xs = [tt.number for tt in r.turns]
        ys = [tt.context_tokens for tt in r.turns]
        ax.fill_between(xs, ys, color="#93c5fd", alpha=0.35, step=None)
        ax.plot(xs, ys, color="#1d4ed8", linewidth=2, label="context tokens", marker="." if len(xs) < 60 else None)
        for value, hits in threshold_groups(r):
            stop = any(h.threshold.stop for h in hits)
            col = THRESHOLD_COLORS.get(hits[0].threshold.name, "#555")
            ax.axhline(value, color=col, linestyle="-" if stop else "--", linewidth=2 if stop else 1.2,
                       label=f"{_k(value)}: {_group_label(hits)}")
            for h in hits:
                if h.first_turn:
                    ft = r.turns[h.first_turn - 1]
                    ax.plot([ft.number], [ft.context_tokens], "o", color=col, markersize=7 if stop else 5)
        for c in r.compactions:
            ax.axvline(c, color="#6b7280", linestyle=":", linewidth=1)
        note = _above_note(r)
        if note:
            ax.text(1.01, 0.0, note.replace("; ", "\n"), transform=ax.transAxes, fontsize=7, color="#666",
                    va="bottom", ha="left")
        ax.set_ylim(0, chart_top(r) * 1.05)
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _k(v)))
        if xs:
            ax.set_xlim(0.5, max(xs) + 0.5)
        ax.set_xlabel("turn")
        ax.set_ylabel("context tokens")
        ax.set_title(_title(r), fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        fig.tight_layout()
        with atomic_output(path) as out:
            fig.savefig(out, format=suffix[1:])
    finally:
        plt.close(fig)
    return suffix[1:]


# -- terminal chart ------------------------------------------------------------------------

BLOCKS = " ▁▂▃▄▅▆▇█"


def terminal_chart(r: ReplayReport, width: int = 80, height: int = 12) -> list[tuple[str, str | None]]:
    """The context chart as text rows: ``(text, policy)`` where ``policy`` names the threshold
    drawn on that row (for colouring) or is ``None``.

    One column per turn (the maximum of each bucket of turns when they do not fit
    ``width``); bars use eighth blocks; thresholds are rules of ``─`` with their names on
    the right; the y axis shares its scale with the image chart (thresholds included).
    """
    label_w = 8
    height = max(height, 3)
    top = chart_top(r) * 1.05
    rows_th: dict[int, list[list[PolicyHit]]] = {}
    for value, hits in threshold_groups(r):
        row = min(height - 1, int(value / top * height))
        rows_th.setdefault(row, []).append(hits)
    labels = {
        row: "; ".join(f"{_k(g[0].threshold.tokens)} {_group_label(g)}" for g in groups)
        for row, groups in rows_th.items()
    }
    right_w = min(max((len(x) for x in labels.values()), default=0), 48) + 2
    cols = max(min(width - label_w - right_w - 1, len(r.turns)), 1)
    vals = [tt.context_tokens for tt in r.turns]
    buckets: list[int] = []
    if vals:
        per = len(vals) / cols
        for c in range(cols):
            a = int(c * per)
            b = max(int((c + 1) * per), a + 1)
            buckets.append(max(vals[a:b]))
    out: list[tuple[str, str | None]] = []
    for row in range(height - 1, -1, -1):
        lo = top * row / height
        hi = top * (row + 1) / height
        cells = []
        for v in buckets:
            if v >= hi:
                cells.append("█")
            elif v <= lo:
                cells.append(" ")
            else:
                cells.append(BLOCKS[max(1, min(8, round(8 * (v - lo) / (hi - lo))))])
        line = "".join(cells)
        groups = rows_th.get(row)
        if groups:
            line = "".join("─" if ch == " " else ch for ch in line)
            lab = labels[row]
            line += "  " + (lab if len(lab) <= right_w - 2 else lab[: right_w - 3] + "…")
        tick = row % 3 == 2 or row == height - 1
        label = (_k(hi).rjust(label_w - 2) + " ┤") if tick else " " * (label_w - 1) + "│"
        out.append((label + line, groups[0][0].threshold.name if groups else None))
    out.append((" " * (label_w - 1) + "└" + "─" * len(buckets), None))
    last = r.turns[-1].number if r.turns else 0
    scale = f"turn 1 … {last}" + (f" ({len(vals) / len(buckets):.1f} turns per column)" if len(buckets) < len(vals) else "")
    out.append((" " * label_w + scale, None))
    note = _above_note(r)
    if note:
        out.append((" " * label_w + note, None))
    return out
