"""The PNG chart of a replay, drawn by matplotlib (the ``charts`` extra, imported here only):
context tokens and their thresholds on the left axis, agent-visible characters and theirs on a
right axis of their own, thresholds named in the legend, recorded compactions as dotted lines."""

from __future__ import annotations

import io
from typing import Any

from ..errors import CtxtoolError, Failure
from .core import CHARS_COLOR, CONTEXT_COLOR, THRESHOLD_COLORS, ReplayReport, title
from .core import unit as _unit

#: the extra that installs matplotlib, as the error names it
EXTRA = "charts"
OTHER_COLORS = ("#d97706", "#7c3aed", "#2563eb", "#0f766e", "#db2777", "#0891b2")


def _matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError as e:
        raise CtxtoolError(
            f"--plot .png needs matplotlib, which the {EXTRA!r} extra installs: from a checkout, "
            f"`make run` or `.venv/bin/pip install -e '.[{EXTRA}]'`; elsewhere `pip install matplotlib`. "
            "Without it, use .svg or .html", kind=Failure.DEPENDENCY) from e
    return matplotlib, Figure


def _color(name: str, stop: bool, k: int) -> str:
    if stop:
        return "#dc2626"
    return THRESHOLD_COLORS.get(name) or OTHER_COLORS[k % len(OTHER_COLORS)]


def figure(r: ReplayReport, width: float = 10.0, height: float = 6.0) -> Any:
    """The chart as a :class:`matplotlib.figure.Figure` (no pyplot, no global state)."""
    _, Figure = _matplotlib()
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    turns = [t.number for t in r.turns]
    ax.set_title(title(r), fontsize=11, loc="left")
    ax.set_xlabel("turn (assistant reply)")
    ax.set_ylabel("context tokens")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    thousands = FuncFormatter(lambda v, _pos: f"{v:,.0f}")
    ax.yaxis.set_major_formatter(thousands)
    ax.grid(True, color="#e5e7eb", linewidth=0.8)
    handles: list[Any] = []
    if r.turns:
        tokens = [t.context_tokens for t in r.turns]
        ax.fill_between(turns, tokens, color="#93c5fd", alpha=0.35, linewidth=0)
        (line,) = ax.plot(turns, tokens, color=CONTEXT_COLOR, linewidth=2, label="context tokens (left axis)")
        handles.append(line)
    tok_top = max([r.peak_tokens] + [h.threshold.value for h in r.policies.values() if h.threshold.metric == "tokens"])
    ax.set_ylim(0, max(tok_top, 1) * 1.08)
    ax.set_xlim(min(turns, default=1), max(max(turns, default=1), 2))
    for k, c in enumerate(r.compactions):
        v = ax.axvline(c, color="#6b7280", linestyle=":", linewidth=1.2,
                       label="recorded compaction" if k == 0 else "_nolegend_")
        if k == 0:
            handles.append(v)
    chars = [h for h in r.policies.values() if h.threshold.metric == "chars"]
    ax2 = None
    if chars:
        ax2 = ax.twinx()
        ax2.set_ylabel("context characters")
        ax2.yaxis.set_major_formatter(thousands)
        if r.turns:
            (cl,) = ax2.plot(turns, [t.context_chars for t in r.turns], color=CHARS_COLOR, linewidth=1,
                             alpha=0.8, label="context characters (right axis)")
            handles.append(cl)
        top = max([t.context_chars for t in r.turns] + [h.threshold.value for h in chars])
        ax2.set_ylim(0, max(top, 1) * 1.08)
    for k, (name, hit) in enumerate(r.policies.items()):
        th = hit.threshold
        on = ax2 if th.metric == "chars" else ax
        if on is None or th.metric not in ("tokens", "chars"):
            continue
        col = _color(name, th.stop, k)
        where = "right axis" if th.metric == "chars" else "left axis"
        first = f", reached at turn {hit.first_turn}" if hit.first_turn else ", not reached"
        style = "-" if th.stop else "-." if th.metric == "chars" else "--"
        h = on.axhline(th.value, color=col, linewidth=2 if th.stop else 1.3, linestyle=style,
                       label=f"{name}: {th.value:,} {_unit(th.metric)} ({th.label}; {where}){first}")
        handles.append(h)
        if hit.first_turn and r.turns:
            t = r.turns[hit.first_turn - 1]
            y = t.context_chars if th.metric == "chars" else t.context_tokens
            on.plot([t.number], [y], "o", color=col, markersize=6 if th.stop else 4.5)
    fig.legend(handles=handles, loc="outside lower center", ncol=1 if len(handles) > 6 else 2, fontsize=8,
               frameon=False)
    return fig


def render_png(r: ReplayReport) -> bytes:
    """The chart as PNG bytes."""
    fig = figure(r)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", facecolor="white")
    return buf.getvalue()
