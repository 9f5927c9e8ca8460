"""Charts of a replay: an SVG, an HTML page and a terminal chart of eighth blocks (no
dependency), and a PNG drawn by matplotlib (:mod:`ctxtool.replay.plot`, the ``charts`` extra). Each
threshold is drawn in its own unit: token thresholds on the token axis (left), character
thresholds (AgentCore.Context's) on a characters axis (right) beside the context's characters,
and a legend names each threshold with its value, unit, rule and axis. The terminal chart has
one axis (tokens): it lists the character thresholds under it, in characters."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import CtxtoolError, Failure
from .core import CHARS_COLOR, CONTEXT_COLOR, THRESHOLD_COLORS, PolicyHit, ReplayReport, title, unit

PLOT_SUFFIXES = (".png", ".svg", ".html", ".htm")


def chart_top(r: ReplayReport) -> int:
    """The token axis' top: the peak or the highest token threshold, whichever is larger
    (thresholds in other units have their own axis or are listed)."""
    tok = [p.threshold.value for p in r.policies.values() if p.threshold.metric == "tokens"]
    return max([r.peak_tokens, *tok, 1])


def chars_top(r: ReplayReport) -> int:
    """The characters axis' top: the context's peak characters or the highest character threshold."""
    return max([*(t.context_chars for t in r.turns), *(h.threshold.value for h in char_thresholds(r)), 1])


def char_thresholds(r: ReplayReport) -> list[PolicyHit]:
    """The thresholds counted in characters (AgentCore.Context's), by value: on the characters axis."""
    return sorted((h for h in r.policies.values() if h.threshold.metric == "chars"), key=lambda h: h.threshold.value)


def threshold_groups(r: ReplayReport) -> list[tuple[int, list[PolicyHit]]]:
    """The token thresholds, by their place on the token axis (``effective-limit`` and
    ``reserve`` share one)."""
    groups: dict[int, list[PolicyHit]] = {}
    for hit in r.policies.values():
        if hit.threshold.metric == "tokens":
            groups.setdefault(hit.threshold.value, []).append(hit)
    return sorted(groups.items())


def thresholds_above(r: ReplayReport) -> list[PolicyHit]:
    """Thresholds on no axis of the chart (a unit other than tokens and characters), listed in the legend."""
    return [h for h in r.policies.values() if h.threshold.metric not in ("tokens", "chars")]


def _group_label(hits: list[PolicyHit]) -> str:
    names = ", ".join(h.threshold.name for h in hits)
    first = min((h.first_turn for h in hits if h.first_turn), default=None)
    return names + (f" @ turn {first}" if first else "")


def legend_entry(h: PolicyHit, axis: str | None) -> str:
    """A threshold as the legend names it: value and unit, rule, origin, axis, when reached."""
    th = h.threshold
    where = f"; {axis} axis" if axis else "; not drawn"
    when = f"reached at turn {h.first_turn}" if h.first_turn else "never reached"
    stop = ", the agent stops" if th.stop else ""
    return f"{th.name}: {th.value:,} {unit(th.metric)} ({th.label}, {th.origin}{where}{stop}): {when}"


@dataclass(frozen=True)
class Frame:
    """The plot area the SVG and PNG charts share: margins, and the turn and token scales."""

    width: int
    height: int
    n: int  # turns (at least 1)
    top: float  # the token value at the top of the plot
    ml: int = 70
    mr: int = 70  # the characters axis' labels
    mt: int = 36
    mb: int = 44

    @classmethod
    def of(cls, r: ReplayReport, width: int, height: int) -> Frame:
        return cls(width, height, max(len(r.turns), 1), chart_top(r) * 1.05)

    @property
    def pw(self) -> int:
        return self.width - self.ml - self.mr

    @property
    def ph(self) -> int:
        return self.height - self.mt - self.mb

    def x(self, turn: float) -> float:
        return self.ml + (self.pw * (turn - 1) / (self.n - 1) if self.n > 1 else self.pw / 2)

    def y(self, v: float) -> float:
        return self.mt + self.ph - self.ph * v / self.top


def render_svg(r: ReplayReport, width: int = 900, height: int = 420) -> str:
    """A self-contained SVG chart: context tokens per turn on the left axis, token thresholds
    as dashed lines on it; the context's characters and the character thresholds on a
    characters axis at the right; a legend under the plot names each line with its unit."""
    chars = char_thresholds(r)
    legend = _legend(r, chars)
    f = Frame.of(r, width, height)
    ml, mt, pw, ph, top, n = f.ml, f.mt, f.pw, f.ph, f.top, f.n
    x, y = f.x, f.y
    ctop = chars_top(r) * 1.05

    def yc(v: float) -> float:
        return mt + ph - ph * v / ctop

    full = height + 16 * len(legend) + 8
    e = html.escape
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{full}" viewBox="0 0 {width} {full}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{full}" fill="white"/>',
        f'<text x="{ml}" y="20" font-size="13" font-weight="bold">{e(title(r))}</text>',
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
    parts.append(f'<text x="{ml + pw / 2}" y="{mt + ph + 34}" text-anchor="middle">turn</text>')
    parts.append(
        f'<text x="14" y="{mt + ph / 2}" text-anchor="middle" transform="rotate(-90 14 {mt + ph / 2})">context tokens</text>'
    )
    if chars:  # the characters axis, at the right
        xr = ml + pw
        parts.append(f'<line class="chars-axis" x1="{xr}" y1="{mt}" x2="{xr}" y2="{mt + ph}" stroke="{CHARS_COLOR}"/>')
        for k in range(6):
            v = ctop * k / 5
            parts.append(f'<line x1="{xr}" y1="{yc(v):.1f}" x2="{xr + 4}" y2="{yc(v):.1f}" stroke="{CHARS_COLOR}"/>')
            parts.append(f'<text x="{xr + 6}" y="{yc(v) + 4:.1f}" fill="{CHARS_COLOR}">{_k(v)}</text>')
        xm = width - 14
        parts.append(f'<text x="{xm}" y="{mt + ph / 2}" text-anchor="middle" fill="{CHARS_COLOR}" '
                     f'transform="rotate(90 {xm} {mt + ph / 2})">context characters</text>')
    if r.turns:
        pts = " ".join(f"{x(tt.number):.1f},{y(tt.context_tokens):.1f}" for tt in r.turns)
        area = f"{x(1):.1f},{y(0):.1f} {pts} {x(r.turns[-1].number):.1f},{y(0):.1f}"
        parts.append(f'<polygon class="context-area" points="{area}" fill="#93c5fd" fill-opacity="0.35"/>')
        parts.append(f'<polyline class="context" points="{pts}" fill="none" stroke="{CONTEXT_COLOR}" stroke-width="2"/>')
        if chars:
            cpts = " ".join(f"{x(tt.number):.1f},{yc(tt.context_chars):.1f}" for tt in r.turns)
            parts.append(f'<polyline class="context-chars" points="{cpts}" fill="none" stroke="{CHARS_COLOR}" '
                         'stroke-width="1.2" stroke-dasharray="1,2"/>')
    for c in r.compactions:
        parts.append(
            f'<line class="compaction" x1="{x(c):.1f}" y1="{mt}" x2="{x(c):.1f}" y2="{mt + ph}" stroke="#6b7280" '
            f'stroke-dasharray="2,3"/>'
        )
    drawn = [(value, hits, y, "tokens") for value, hits in threshold_groups(r)]
    drawn += [(h.threshold.value, [h], yc, "chars") for h in chars]
    for value, hits, yf, axis in drawn:
        stop = any(h.threshold.stop for h in hits)
        col = THRESHOLD_COLORS.get(hits[0].threshold.name, "#555")
        yy = yf(value)
        for h in hits:
            parts.append(
                f'<line class="threshold" data-policy="{e(h.threshold.name)}" data-value="{value}" x1="{ml}" '
                f'y1="{yy:.1f}" x2="{ml + pw}" y2="{yy:.1f}" stroke="{col}" stroke-width="{2 if stop else 1.2}" '
                f'stroke-dasharray="{"none" if stop else "6,4" if axis == "tokens" else "2,3"}" data-axis="{axis}"/>'
            )
        for h in hits:
            if h.first_turn:
                ft = r.turns[h.first_turn - 1]
                cy = yf(ft.context_chars if axis == "chars" else ft.context_tokens)
                parts.append(
                    f'<circle class="fired" data-policy="{e(h.threshold.name)}" cx="{x(ft.number):.1f}" '
                    f'cy="{cy:.1f}" r="{5 if stop else 3.5}" fill="{col}"/>'
                )
    for k, (colour, dash, text, policy) in enumerate(legend):  # the legend, under the plot
        ly = height + 4 + 16 * k
        cls = f' class="legend" data-policy="{e(policy)}"' if policy else ' class="legend"'
        parts.append(f'<line x1="{ml}" y1="{ly - 4}" x2="{ml + 24}" y2="{ly - 4}" stroke="{colour}" stroke-width="2" '
                     f'stroke-dasharray="{dash}"/>')
        parts.append(f'<text{cls} x="{ml + 30}" y="{ly}">{e(text)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _legend(r: ReplayReport, chars: list[PolicyHit]) -> list[tuple[str, str, str, str | None]]:
    """(colour, dash, text, policy) for each line of the SVG chart, each with its unit and axis."""
    out: list[tuple[str, str, str, str | None]] = [(CONTEXT_COLOR, "none", "context tokens per turn (left axis)", None)]
    if chars:
        out.append((CHARS_COLOR, "1,2", "context characters per turn, agent-visible (right axis)", None))
    if r.compactions:
        out.append(("#6b7280", "2,3", "a compaction the transcript records", None))
    for _, hits in threshold_groups(r):
        for h in hits:
            out.append((THRESHOLD_COLORS.get(h.threshold.name, "#555"), "none" if h.threshold.stop else "6,4",
                        legend_entry(h, "left"), h.threshold.name))
    for h in chars:
        out.append((THRESHOLD_COLORS.get(h.threshold.name, "#555"), "2,3", legend_entry(h, "right"), h.threshold.name))
    for h in thresholds_above(r):
        out.append(("#999", "1,4", legend_entry(h, None), h.threshold.name))
    return out


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
        f"<li><b>{e(n)}</b>: {h.threshold.value:,} {unit(h.threshold.metric)} ({e(h.threshold.label)}, "
        f"{e(h.threshold.origin)}): {'turn ' + str(h.first_turn) if h.first_turn else 'never reached'}</li>"
        for n, h in r.policies.items()
    )
    head = "".join(
        f"<th>{c}</th>" for c in ("turn", "line", "input", "output", "context", "window", "avg/turn", "turns left", "source", "events")
    )
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{e(title(r))}</title>"
        "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ddd;padding:2px 6px;text-align:right}</style></head><body>\n"
        f"<h2>{e(title(r))}</h2>\n{render_svg(r)}\n<ul>{pol}</ul>\n"
        f"<table><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(rows) + "\n</tbody></table>\n</body></html>\n"
    )


def _k(v: float) -> str:
    if v >= 1_000_000:
        return f"{v / 1_000_000:.1f}M"
    if v >= 1000:
        return f"{v / 1000:.0f}k"
    return f"{v:.0f}"


def render_png(r: ReplayReport) -> bytes:
    """The chart as a PNG, drawn by matplotlib (:mod:`ctxtool.replay.plot`, the ``charts``
    extra; without it a usage error says how to install it)."""
    # lazy: start-up (`ctxtool replay` would load ctxtool.replay.plot)
    from .plot import render_png as png

    return png(r)


def write_plot(r: ReplayReport, path: str | Path) -> str:
    """Write the chart as PNG (matplotlib, the ``charts`` extra), SVG or HTML (inline SVG, no
    dependency); returns the kind."""
    # lazy: start-up (loaded only when this runs: ..io.outputs)
    from ..io.outputs import atomic_output

    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise CtxtoolError(
            f"--plot: unsupported file type {suffix or '(none)'!r}; use .png, .svg or .html", kind=Failure.USAGE
        )
    if suffix in (".html", ".htm"):
        data, kind = render_html(r).encode("utf-8"), "html"
    elif suffix == ".svg":
        data, kind = ('<?xml version="1.0" encoding="UTF-8"?>\n' + render_svg(r) + "\n").encode("utf-8"), "svg"
    else:
        data, kind = render_png(r), "png"
    with atomic_output(path) as out:
        out.write(data)
    return kind


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
        row: "; ".join(f"{_k(g[0].threshold.value)} tokens {_group_label(g)}" for g in groups)
        for row, groups in rows_th.items()
    }
    right_w = min(max((len(x) for x in labels.values()), default=0), 60) + 2
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
    chars = char_thresholds(r)
    if chars:  # one axis here (tokens): the character thresholds in their own unit, beside the context's peak
        peak = max((t.context_chars for t in r.turns), default=0)
        listed = "; ".join(f"{_k(h.threshold.value)} chars {_group_label([h])}" for h in chars)
        out.append((" " * label_w + f"characters (not on this token axis): peak {_k(peak)} chars; {listed}", None))
    for h in thresholds_above(r):
        out.append((" " * label_w + legend_entry(h, None), None))
    return out
