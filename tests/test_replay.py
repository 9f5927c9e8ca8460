"""replay: turns, usage vs estimates, thresholds, compactions, charts (PNG checked as an image)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import SAMPLES, all_transcript_params

from ctxtool import formats
from ctxtool.errors import CtxtoolError
from ctxtool.model import Block, Compaction, Message, Metadata, Transcript, Usage, group_turns
from ctxtool.replay.charts import render_svg, terminal_chart, thresholds_above, write_plot
from ctxtool.replay.core import ReplayReport, replay, replay_file, title
from ctxtool.tokens import models as registry


def _conv(n_turns: int, chars_per_result: int = 4000, usage: bool = False) -> Transcript:
    """user, then n assistant calls each followed by a tool result of ``chars_per_result`` chars."""
    msgs = [Message("system", [Block("text", text="s" * 400)]), Message("user", [Block("text", text="u" * 400)])]
    ctx = 200
    for k in range(n_turns):
        a = Message("assistant", [Block("tool_call", id=f"c{k}", name="read", arguments={"p": k})])
        if usage:
            a.usage = Usage(input=10, cache_read=ctx - 10, output=50)
            a.usage_key = f"u{k}"
            ctx += 50 + chars_per_result // 4
        msgs.append(a)
        msgs.append(Message("tool", [Block("tool_result", id=f"c{k}", text="r" * chars_per_result)]))
    msgs.append(Message("assistant", [Block("text", text="done")]))
    return Transcript("ctxtool", entries=list(msgs), path="conv.jsonl")


def test_turns_are_api_calls_claude_code() -> None:
    t = next(formats.read(SAMPLES / "claude_code_session.jsonl"))
    r = replay(t)
    api = [m for m in t.messages if m.role == "assistant"]
    assert len(r.turns) == len({m.usage_key for m in api})
    first = api[0].usage
    assert first is not None
    assert r.turns[0].input_tokens == first.input + first.cache_creation + first.cache_read
    assert r.turns[0].output_tokens == first.output
    assert all(tt.source == "usage" for tt in r.turns)
    assert registry.lookup("claude-opus-4-6").context_window == 1_000_000  # litellm's; Claude Code's without [1m]:
    assert r.window == 200_000 and r.window_source == "claude-code:no [1m] suffix"
    # running totals and percentages
    for tt in r.turns:
        assert tt.context_tokens == tt.input_tokens + tt.output_tokens
        assert tt.percent == round(100 * tt.context_tokens / r.window, 2)
    assert r.turns[-1].turns_left is not None and r.turns[-1].turns_left > 0


def test_codex_groups_reasoning_with_its_call() -> None:
    t = next(formats.read(SAMPLES / "codex_rollout.jsonl"))
    r = replay(t)
    assert len(r.turns) == sum(1 for m in t.messages if m.usage is not None)
    assert r.window == t.extra["context_window"] and r.window_source == "transcript"


def test_group_turns_rules() -> None:
    A = lambda key=None, u=False: Message("assistant", [Block("text", text="a")], usage_key=key,  # noqa: E731
                                          usage=Usage(1, 1) if u else None)
    U = Message("user", [Block("text", text="u")])
    msgs = [U, A("k1", True), A("k1", True), A("k2", True), U, A(), A(None, True), A(None, True)]
    assert group_turns(msgs) == [[1, 2], [3], [5, 6], [7]]


def test_estimates_without_usage() -> None:
    t = _conv(10, 4000)
    r = replay(t, context_window=None, window_source="none")
    assert len(r.turns) == 11 and all(tt.source == "estimate" for tt in r.turns)
    # the prompt of turn k+1 holds turn k's output and the tool result after it
    assert r.turns[1].input_tokens == r.turns[0].context_tokens + 1000
    assert r.turns[-1].context_chars == sum(m.chars() for m in t.messages)
    assert r.window is None and r.turns[0].percent is None and r.turns[0].turns_left is None
    # without a window seed 000 falls back to max_tokens 8000
    assert r.policies["effective-limit"].threshold.value == 8000
    assert r.policies["effective-limit"].first_turn == next(tt.number for tt in r.turns if tt.context_tokens >= 8000)


def test_thresholds_fire_in_order_and_hard_limit_stops() -> None:
    t = _conv(60, 4000)
    r = replay(t, context_window=50_000, window_source="flag")
    names = {n: h.first_turn for n, h in r.policies.items()}
    assert names["hard-stop"] is not None and names["ratio"] is not None
    assert names["hard-stop"] <= names["ratio"] <= names["hard-limit"]
    assert r.stopped_at == names["hard-limit"]
    hit = r.turns[r.stopped_at - 1]
    assert hit.context_tokens >= 0.95 * 50_000 > r.turns[r.stopped_at - 2].context_tokens
    assert "hard-limit" in hit.fired
    # reserve is strict (>), seed000 is >=; both at window - 16384
    assert r.policies["reserve"].threshold.value == r.policies["effective-limit"].threshold.value == 50_000 - 16384
    # chars thresholds use agent-visible characters
    cw = r.policies["chars-warning"]
    assert r.turns[cw.first_turn - 1].context_chars >= 200_000 > r.turns[cw.first_turn - 2].context_chars


def test_usage_based_and_config_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxtool.config import Config

    monkeypatch.setenv("CTXTOOL_COMPACTION_COMPACT_THRESHOLD", "0.5")
    t = _conv(30, 2000, usage=True)
    r = replay(t, context_window=20_000, window_source="flag", cfg=Config())
    assert r.policies["hard-stop"].threshold.value == 10_000
    assert all(tt.source == "usage" for tt in r.turns[:-1])
    assert r.turns[-1].source == "estimate"


def test_compaction_entry_resets_context() -> None:
    t = _conv(12, 8000)
    keep = t.messages[-5]
    keep.id = "keep-me"
    pos = t.entries.index(t.messages[-1])
    t.entries.insert(pos, Compaction("summary " * 50, first_kept_id="keep-me"))
    r = replay(t, context_window=100_000, window_source="flag")
    assert r.compactions == [len(r.turns)]
    last = r.turns[-1]
    assert last.compacted_before
    assert last.input_tokens < r.turns[-2].context_tokens / 2


def test_compaction_summary_message_resets_context() -> None:
    t = _conv(8, 8000)
    t.entries.insert(
        len(t.entries) - 1,
        Message("user", [Block("text", text="summary")], metadata=Metadata(kind="compaction_summary")),
    )
    r = replay(t, context_window=100_000, window_source="flag")
    assert r.turns[-1].compacted_before and r.turns[-1].input_tokens < 100


def test_pi_corpus_like_drop_detected() -> None:
    t = _conv(10, 4000, usage=True)
    t.messages[-3].usage = Usage(input=100, output=10)  # the prompt shrank: compacted elsewhere
    r = replay(t, context_window=100_000, window_source="flag")
    assert r.compactions and r.turns[r.compactions[0] - 1].compacted_before


def test_report_json_shape() -> None:
    r = replay(_conv(5), context_window=10_000, window_source="flag")
    j = r.to_json()
    assert j["turn_count"] == 6 and len(j["turns"]) == 6
    assert set(j["policies"]) == {"effective-limit", "reserve", "ratio", "hard-stop", "chars-warning", "chars-critical", "hard-limit"}
    assert {"turn", "input_tokens", "output_tokens", "context_tokens", "percent", "average_turn", "turns_left",
            "fired"} <= set(j["turns"][0])


# -- charts ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report() -> ReplayReport:
    return replay(_conv(60, 4000), context_window=50_000, window_source="flag")


def test_png_chart_is_an_image(report: ReplayReport, tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    from PIL import Image

    out = tmp_path / "chart.png"
    assert write_plot(report, out) == "png"
    with Image.open(out) as im:
        assert im.format == "PNG"
        w, h = im.size
        assert w >= 800 and h >= 400
        px = im.convert("RGB")
        colors = px.getcolors(maxcolors=1_000_000) or []
    nonwhite = sum(c for c, rgb in colors if rgb != (255, 255, 255))
    assert nonwhite > 0.03 * w * h  # a drawn chart, not a blank canvas
    # the hard limit line (#dc2626) and the context line (#1d4ed8) are there
    rgbs = {rgb for _, rgb in colors}
    assert (0xDC, 0x26, 0x26) in rgbs
    assert (0x1D, 0x4E, 0xD8) in rgbs


def test_svg_chart(report: ReplayReport, tmp_path: Path) -> None:
    out = tmp_path / "chart.svg"
    assert write_plot(report, out) == "svg"
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert "hard-limit" in text and "hard-stop" in text


def test_html_chart_is_self_contained(report: ReplayReport, tmp_path: Path) -> None:
    out = tmp_path / "chart.html"
    assert write_plot(report, out) == "html"
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert thresholds_above(report) == []  # every threshold has an axis in its own unit
    for name, hit in report.policies.items():
        axis = "chars" if hit.threshold.metric == "chars" else "tokens"
        assert f'class="threshold" data-policy="{name}"' in text
        assert f'data-axis="{axis}"' in text
        # the legend names it with its value and unit
        unit = "characters" if axis == "chars" else "tokens"
        assert f'class="legend" data-policy="{name}"' in text
        assert f"{name}: {hit.threshold.value:,} {unit}" in text
    assert "context characters" in text and 'class="context-chars"' in text
    assert 'class="context"' in text and 'class="fired" data-policy="hard-limit"' in text
    # one table row per turn
    assert text.count("<tr><td>") == len(report.turns)


def test_svg_threshold_positions(report: ReplayReport) -> None:
    import re

    svg = render_svg(report)
    found = re.finditer(r'data-policy="([^"]+)" data-value="\d+" x1="[\d.]+" y1="([\d.]+)".*?data-axis="(\w+)"', svg)
    lines = {m.group(1): (float(m.group(2)), m.group(3)) for m in found}
    assert set(lines) == set(report.policies)
    # each threshold on the axis of its unit; on each axis, higher thresholds sit higher (smaller y)
    for axis in ("tokens", "chars"):
        on = [n for n, (_, a) in lines.items() if a == axis]
        assert on and all((report.policies[n].threshold.metric == "chars") == (axis == "chars") for n in on)
        by_value = sorted(on, key=lambda n: report.policies[n].threshold.value)
        assert [lines[n][0] for n in by_value] == sorted((lines[n][0] for n in by_value), reverse=True)
    assert lines["hard-limit"][0] < lines["ratio"][0] < lines["hard-stop"][0]


def test_png_chart_names_everything(report: ReplayReport) -> None:
    """matplotlib's figure: a title, both axes labelled, a legend naming each threshold with its
    value and unit, character thresholds on the characters axis (never the token axis), and
    no two labels overlapping."""
    pytest.importorskip("matplotlib")
    from ctxtool.replay.plot import figure

    fig = figure(report)
    ax, ax2 = fig.axes
    assert ax.get_title(loc="left") == title(report)
    assert ax.get_xlabel().startswith("turn") and ax.get_ylabel() == "context tokens"
    assert ax2.get_ylabel() == "context characters"
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    for name, hit in report.policies.items():
        th = hit.threshold
        unit = "characters" if th.metric == "chars" else "tokens"
        assert any(t.startswith(f"{name}: {th.value:,} {unit}") for t in texts), (name, texts)
    # a character threshold is a line on the right axis at its value in characters, none on the token axis
    tok_lines = {round(ln.get_ydata()[0]) for ln in ax.get_lines() if len(set(ln.get_ydata())) == 1 and len(ln.get_ydata()) == 2}
    chr_lines = {round(ln.get_ydata()[0]) for ln in ax2.get_lines() if len(set(ln.get_ydata())) == 1 and len(ln.get_ydata()) == 2}
    chars = {h.threshold.value for h in report.policies.values() if h.threshold.metric == "chars"}
    assert chars and chars <= chr_lines
    assert not ({h.threshold.tokens for h in report.policies.values() if h.threshold.metric == "chars"} & tok_lines)
    # nothing overlaps: the legend's entries, the title and the axis labels; the legend is off the plot
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    boxes = [t.get_window_extent(r) for t in legend.get_texts()]
    boxes += [ax.title._left_title.get_window_extent(r) if hasattr(ax.title, "_left_title") else ax.title.get_window_extent(r)]
    boxes += [ax.xaxis.label.get_window_extent(r), ax.yaxis.label.get_window_extent(r), ax2.yaxis.label.get_window_extent(r)]
    boxes += [legend.get_window_extent(r)]
    for i, b in enumerate(boxes[:-1]):
        for c in boxes[i + 1 : -1]:
            assert not b.overlaps(c), (b, c)
    assert not legend.get_window_extent(r).overlaps(ax.get_window_extent(r))


def test_png_without_matplotlib_says_which_extra(report: ReplayReport, tmp_path: Path) -> None:
    """Without matplotlib (a process where it cannot be imported) a PNG is a usage error naming
    the extra to install; SVG and HTML are written as before."""
    import pickle
    import subprocess

    blob = tmp_path / "r.pickle"
    blob.write_bytes(pickle.dumps(report))
    child = (
        "import sys, pickle; sys.modules['matplotlib'] = None\n"
        "from ctxtool.replay.charts import write_plot\n"
        "from ctxtool.errors import CtxtoolError\n"
        f"r = pickle.load(open({str(blob)!r}, 'rb'))\n"
        f"print(write_plot(r, {str(tmp_path / 'x.svg')!r}), write_plot(r, {str(tmp_path / 'x.html')!r}))\n"
        "try:\n"
        f"    write_plot(r, {str(tmp_path / 'x.png')!r})\n"
        "except CtxtoolError as e:\n"
        "    print(e.kind.value, e)\n"
    )
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first == "svg html"
    assert second.startswith("dependency ") and "'charts' extra" in second and ".[charts]" in second
    assert not (tmp_path / "x.png").exists()
    # through the CLI: exit 10 (a missing package), one line, no traceback
    src = tmp_path / "s.jsonl"
    src.write_bytes((Path(__file__).parent.parent / "samples" / "claude_code_session.jsonl").read_bytes())
    code = ("import sys; sys.modules['matplotlib'] = None; sys.argv = ['ctxtool', 'replay', sys.argv[1], '--plot', "
            "sys.argv[2]]; from ctxtool.cli import entry; entry()")
    r = subprocess.run([sys.executable, "-c", code, str(src), str(tmp_path / "y.png")], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 10 and "charts" in r.stderr and "Traceback" not in r.stderr  # ExitCode.DEPENDENCY


def test_bad_plot_suffix(report: ReplayReport, tmp_path: Path) -> None:
    with pytest.raises(CtxtoolError, match="unsupported"):
        write_plot(report, tmp_path / "x.gif")


def test_terminal_chart(report: ReplayReport) -> None:
    rows = terminal_chart(report, width=100, height=12)
    assert len(rows) == 15
    # one axis (tokens): the character thresholds listed under it in characters, never drawn on it
    assert rows[-1][0].strip().startswith("characters (not on this token axis): peak ")
    assert "200k chars chars-warning" in rows[-1][0] and "400k chars chars-critical" in rows[-1][0]
    assert not any(pol and pol.startswith("chars") for _, pol in rows)
    assert any("tokens hard-limit" in r for r, _ in rows)
    text = "\n".join(r for r, _ in rows)
    assert "hard-limit" in text and "effective-limit" in text and "█" in text
    assert any(pol == "hard-limit" for _, pol in rows)
    assert all(len(r) <= 100 for r, _ in rows[:-1])
    # many turns are bucketed into the available columns
    big = replay(_conv(400, 100), context_window=50_000, window_source="flag")
    rows = terminal_chart(big, width=80, height=8)
    assert any("turns per column" in r for r, _ in rows)


# -- every sample and corpus file ---------------------------------------------------------------


@pytest.mark.parametrize("path", all_transcript_params())
def test_replay_every_file(path: Path) -> None:
    reports = replay_file(path)
    assert reports
    for r in reports:
        for a, b in zip(r.turns, r.turns[1:], strict=False):
            assert b.number == a.number + 1
            assert b.cumulative_tokens >= a.cumulative_tokens
        for tt in r.turns:
            assert tt.input_tokens >= 0 and tt.output_tokens >= 0
            assert tt.context_tokens == tt.input_tokens + tt.output_tokens
        assert r.to_json()["turn_count"] == len(r.turns)
    assert render_svg(reports[0]).startswith("<svg")
