"""Replay a transcript turn by turn as its agent lived it (adk-code's token tracker):
:mod:`.core` walks the turns, :mod:`.charts` draws them."""

from __future__ import annotations

from ..policies import Threshold
from .charts import (
    BLOCKS,
    PLOT_SUFFIXES,
    THRESHOLD_COLORS,
    chart_top,
    render_html,
    render_svg,
    terminal_chart,
    threshold_groups,
    thresholds_above,
    title,
    write_plot,
)
from .core import DROP_RATIO, PolicyHit, ReplayReport, Turn, group_turns, replay, replay_file, thresholds

__all__ = [
    "BLOCKS", "DROP_RATIO", "PLOT_SUFFIXES", "THRESHOLD_COLORS", "PolicyHit", "ReplayReport", "Threshold", "Turn",
    "chart_top", "group_turns", "render_html", "render_svg", "replay", "replay_file", "terminal_chart",
    "threshold_groups", "thresholds", "thresholds_above", "title", "write_plot",
]
