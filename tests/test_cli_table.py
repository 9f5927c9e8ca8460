"""ctxtool.cli.table against rich: whatever Table.plain and Out print without rich is the
text rich prints for the same table or line on a console without colour (rich is the
oracle), and the commands that print tables into a pipe do not import rich."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from ctxtool.cli import table as tb
from ctxtool.cli.console import PLAIN, console_class

ROOT = Path(__file__).resolve().parent.parent

#: mostly characters of one cell; sometimes some rich lays out itself (wide, combining, tab,
#: newline, controls)
NARROW = st.text(alphabet=st.sampled_from(list("ab cXYZ09,.-_#%()") + ["·", "…", "≥", "→", "é", "ж", "─"]),
                 max_size=12)
ODD = st.text(alphabet=st.sampled_from(list("ab c") + ["\u6f22", "\u0301", "\t", "\n", "\x1b", "\u200b"]),
              max_size=8)
TEXT = st.one_of(NARROW, NARROW, NARROW, NARROW, ODD)
#: long cells that make a table wider than the console: one word (rich cuts it), or words
#: (rich wraps them)
LONG = st.one_of(st.text(alphabet=st.sampled_from(list("abxyz09-_./#…")), min_size=10, max_size=90),
                 st.text(alphabet=st.sampled_from(list("abxyz ")), min_size=10, max_size=90))


def rich_text(obj, width: int) -> str:
    buf = io.StringIO()
    con = console_class()(file=buf, width=width, soft_wrap=False, **PLAIN)
    con.print(obj.to_rich() if isinstance(obj, tb.Table) else obj, highlight=False)
    return buf.getvalue()


@st.composite
def tables(draw):
    text = draw(st.sampled_from([NARROW, NARROW, NARROW, TEXT]))  # most tables all of one-cell characters
    if draw(st.integers(0, 2)) == 0:  # some with cells wider than the console leaves them
        text = st.one_of(text, LONG)
    t = tb.Table(
        title=draw(st.one_of(st.none(), text, st.text(alphabet="abc ", min_size=20, max_size=60))),
        title_justify=draw(st.sampled_from(["left", "center", "right"])),
        caption=draw(st.one_of(st.none(), text)),
        box=draw(st.sampled_from([tb.HEAVY_HEAD, tb.SIMPLE_HEAD])),
        pad_edge=draw(st.booleans()),
        min_width=draw(st.one_of(st.none(), st.integers(1, 70))),
        show_footer=draw(st.booleans()),
    )
    ncol = draw(st.integers(1, 6))
    for _ in range(ncol):
        t.add_column(draw(text), justify=draw(st.sampled_from(["left", "right", "center"])), footer=draw(text),
                     overflow=draw(st.sampled_from(["ellipsis", "ellipsis", "fold", "crop"])), no_wrap=draw(st.booleans()),
                     min_width=draw(st.one_of(st.none(), st.integers(0, 20))))
    for _ in range(draw(st.integers(0, 5))):
        t.add_row(*draw(st.lists(st.one_of(text, st.none()), min_size=ncol, max_size=ncol)),
                  style=draw(st.sampled_from([None, "bold"])))
    return t


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=tables(), width=st.integers(12, 140))
def test_a_plain_table_is_what_rich_prints(t, width):
    text = t.plain(width)
    if text is not None:
        assert text == rich_text(t, width)


WORD = st.text(alphabet=st.sampled_from(list("abxyz09-_./#:…")), min_size=1, max_size=90)


@st.composite
def wide_tables(draw):
    """Tables wider than the console leaves them, of one-cell text: long words in some cells
    (rich narrows the columns and cuts the words), sometimes words with spaces (rich wraps)."""
    t = tb.Table(title=draw(st.one_of(st.none(), NARROW)), title_justify=draw(st.sampled_from(["left", "center"])),
                 box=draw(st.sampled_from([tb.HEAVY_HEAD, tb.SIMPLE_HEAD])), pad_edge=draw(st.booleans()),
                 min_width=draw(st.one_of(st.none(), st.integers(1, 160))), show_footer=draw(st.booleans()))
    ncol = draw(st.integers(1, 6))
    cell = st.one_of(NARROW, WORD, WORD, WORD, st.text(alphabet="ab ", max_size=40))
    for _ in range(ncol):
        t.add_column(draw(st.one_of(WORD.filter(lambda w: len(w) < 12), NARROW)), justify=draw(st.sampled_from(["left", "right", "center"])),
                     footer=draw(WORD.filter(lambda w: len(w) < 12)),
                     overflow=draw(st.sampled_from(["ellipsis", "ellipsis", "ellipsis", "crop", "fold"])),
                     no_wrap=draw(st.booleans()), min_width=draw(st.one_of(st.none(), st.none(), st.integers(0, 12))))
    for _ in range(draw(st.integers(0, 6))):
        t.add_row(*draw(st.lists(cell, min_size=ncol, max_size=ncol)))
    return t


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=wide_tables(), width=st.one_of(st.integers(8, 140), st.integers(40, 100)))
def test_a_narrowed_plain_table_is_what_rich_prints(t, width):
    """rich narrows the columns of a table wider than the console (the widest that may wrap
    first) and cuts what no longer fits with the column's overflow: Table.plain does the same,
    or leaves the table to rich."""
    text = t.plain(width)
    if text is not None:
        assert text == rich_text(t, width)


@pytest.mark.parametrize("justify", ["left", "right", "center"])
@pytest.mark.parametrize("overflow", ["crop", "ellipsis"])
@pytest.mark.parametrize("width", range(5, 24))
def test_a_cut_no_wrap_cell_keeps_what_rich_keeps(justify, overflow, width):
    """A no-wrap column narrowed below its text: cut at the column's width even where the cut
    leaves a space at the end (rich does not strip it again)."""
    t = tb.Table(pad_edge=False)
    t.add_column("a", justify=justify, no_wrap=True, overflow=overflow)
    t.add_row("ab cd ef gh ij kl  ")
    text = t.plain(width)
    assert text is not None
    assert text == rich_text(t, width)


def test_long_labels_are_cut_as_rich_cuts_them():
    """A table of long transcript labels (window's, check's) is plain into a pipe: the label
    column gives way and each label ends in …, as rich prints it."""
    t = tb.Table(title="window sliding", title_justify="left", box=tb.SIMPLE_HEAD, pad_edge=False)
    for col in ("transcript", "msgs", "kept", "note"):
        t.add_column(col, justify="left" if col in ("transcript", "note") else "right", no_wrap=col != "transcript",
                     min_width=None if col == "transcript" else len(col), overflow="ellipsis")
    for i in range(3):
        t.add_row(f"/home/user/.claude/projects/-home-user-some-long-project-name/{i}0d1e2f3a-4b5c-6d7e-8f90.jsonl",
                  "992", "2", "first user kept, over limit")
    text = t.plain(80)
    assert text is not None and text == rich_text(t, 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert text.count("…") == 3


@settings(max_examples=300, deadline=None)
@given(line=TEXT, width=st.integers(1, 30))
def test_a_plain_line_is_what_rich_prints(line, width):
    text = tb._line(line, width)
    if text is not None:
        assert text == rich_text(line, width)


#: lines to wrap: words of every length (some longer than the width), runs of spaces, leading
#: and trailing spaces, newlines
PROSE = st.lists(st.one_of(st.text(alphabet="abxyz09,.·…", min_size=1, max_size=30), st.sampled_from([" ", "  ", "\n", " \n "])),
                 max_size=30).map("".join)


@settings(max_examples=1000, deadline=None)
@given(line=PROSE, width=st.integers(1, 40))
def test_a_wrapped_plain_line_is_what_rich_prints(line, width):
    """A line wider than the console: wrapped as rich wraps it (words moved to the next line,
    a word longer than a line folded, trailing spaces kept up to the width)."""
    text = tb._line(line, width)
    assert text is not None
    assert text == rich_text(line, width)


def test_a_long_report_line_is_wrapped_without_rich():
    """stats' usage line on a real session is wider than 120 columns: wrapped as rich wraps
    it, by this module."""
    line = ("recorded usage (217 API messages): input 242 · output 49,467 · cache write 237,121 · "
            "cache read 16,553,628 · total 16,840,458")
    text = tb._line(line, 120)
    assert text == rich_text(line, 120)
    assert text.endswith("· total \n16,840,458\n")


def test_tables_of_figures_take_the_plain_path():
    t = tb.Table(title="283 transcripts · heuristic", title_justify="left", min_width=24)
    for c in ("role", "messages", "share"):
        t.add_column(c, justify="left" if c == "role" else "right")
    t.add_row("assistant", "5,923", "36.2%")
    t.add_row("total", "12,671", "100%", style="bold")
    t.caption = "20 of 283"
    text = t.plain(120)
    assert text is not None and text == rich_text(t, 120)
    assert "│ assistant │    5,923 │ 36.2% │" in text
    t.caption = "20 with the most context tokens of 283 (--json lists all)"  # wider than the table: rich wraps it
    text = t.plain(120)
    assert text is not None and text == rich_text(t, 120)
    assert text.endswith("20 with the most context tokens \n   of 283 (--json lists all)    \n")


def test_the_two_cell_symbols_are_two_cells_to_rich():
    assert tb.TWO_CELL
    assert all(cell_len(chr(c)) == 2 for c in tb.TWO_CELL)


@pytest.mark.parametrize("width", [20, 30, 31, 32, 60])
def test_a_line_with_a_two_cell_symbol(width):
    """replay's summary line starts with 📊 (two cells): written here when it fits, left to
    rich (which wraps it) when it does not."""
    line = "📊 63.1k/200k (31.5%) ~120 turns left · Turn 9"
    text = tb._line(line, width)
    assert (text is None) == (cell_len(line) > width)
    if text is not None:
        assert text == rich_text(line, width)


@pytest.mark.parametrize("width", [10, 39, 40, 41, 80])
def test_a_styled_line_is_what_rich_prints(monkeypatch, width):
    """A chart row, styled on a terminal: into a pipe, what rich prints for its Text (wrapped
    at the width like a string), written without rich."""
    from rich.text import Text

    line = "  63.1k │▁▂▃▅▇█████ ─── 160k compact"[:40].ljust(40, "█")
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stdout", buf)
    out = tb.Out()
    out.plain, out.width = True, width
    out.print_styled(line, "yellow")
    assert out._rich is None  # rich was not needed
    rich = rich_text(Text(line, style="yellow", no_wrap=True, overflow="ellipsis"), width)
    assert buf.getvalue() == "\n".join(ln.rstrip(" ") for ln in rich.split("\n"))  # into a pipe: no padding at line ends


def test_every_character_taken_as_one_cell_is_one_cell_to_rich():
    chars = [chr(c) for c in range(0x20, 0x30000) if tb._width(chr(c)) == 1]
    assert len(chars) > 1000
    wrong = [c for c in chars if cell_len(c) != 1]
    assert wrong == []


@pytest.mark.parametrize("env", [{}, {"FORCE_COLOR": "1"}, {"FORCE_COLOR": ""}, {"TTY_COMPATIBLE": "1"},
                                 {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "x"}])
@pytest.mark.parametrize("tty", [False, True])
def test_the_terminal_rule_is_rich_s(monkeypatch, env, tty):
    for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    s = Stream()
    assert tb.is_terminal(s) == Console(file=s).is_terminal


S = ROOT / "samples"
#: every command that prints a table on stdout, over samples that fill it
TABLE_COMMANDS = {
    "stats": ["stats", str(S / "claude_code_session.jsonl")],
    "stats-dataset": ["stats", str(S / "openai_dataset.jsonl")],
    "check": ["check", "--context-window", "200000", str(S / "claude_code_session.jsonl"), str(S / "pi_session.jsonl")],
    "check-one": ["check", "--context-window", "200000", str(S / "claude_code_session.jsonl")],
    "cut": ["cut", "--keep-recent-tokens", "2000", str(S / "claude_code_session.jsonl"), str(S / "codex_rollout.jsonl")],
    "window": ["window", "--max-messages", "6", "--dry-run", str(S / "openai_dataset.jsonl")],
    "usage": ["usage", str(S / "claude_code_session.jsonl"), str(S / "codex_rollout.jsonl")],
    "compactions": ["compactions", str(S / "pi_session.jsonl"), str(S / "claude_code_session.jsonl")],
    "replay": ["replay", "--context-window", "200000", str(S / "claude_code_session.jsonl")],
    "replay-many": ["replay", "--context-window", "200000", str(S / "openai_dataset.jsonl")],
    "config": ["config"],
    "models": ["models"],
}

PROBE = ("import sys, ctxtool.cli as c\n"
         "import ctxtool.cli.table as tb\n"
         "if sys.argv[1] == 'rich': tb.Out.plain_text = False\n"
         "rc = c.main(sys.argv[2:])\n"
         "sys.stderr.write('\\nRICH ' + repr(sorted(m for m in sys.modules if m.split('.')[0] == 'rich')))\n"
         "raise SystemExit(rc)\n")


@pytest.mark.parametrize("name", sorted(TABLE_COMMANDS))
def test_a_command_into_a_pipe_prints_what_rich_prints(tmp_path, name):
    """Each command's report into a pipe, written by this module where it can, is the text
    rich prints (the same command with every table and line through rich)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS")
           and not k.startswith("CTXTOOL_")}
    runs = {}
    for how in ("plain", "rich"):
        p = subprocess.run([sys.executable, "-c", PROBE, how, *TABLE_COMMANDS[name]], capture_output=True, text=True,
                           env=env, cwd=tmp_path, check=False)
        assert p.returncode == 0, p.stderr
        runs[how] = p
    assert runs["plain"].stdout == runs["rich"].stdout
    assert runs["plain"].stdout.strip()
    assert not [ln for ln in runs["plain"].stdout.splitlines() if ln.endswith((" ", "\t"))]  # no padding at line ends
    assert runs["plain"].stderr.endswith("RICH []")  # every report laid out here, replay's chart too
    if name.startswith("stats"):
        assert "┏" in runs["plain"].stdout


@pytest.mark.parametrize("cmd", [["window", "--max-messages", "3", "--dry-run", "openai_dataset.jsonl"],
                                 ["check", "--context-window", "200000", "claude_code_session.jsonl", "pi_session.jsonl"],
                                 ["cut", "--keep-recent-tokens", "2000", "claude_code_session.jsonl"],
                                 ["stats", "openai_dataset.jsonl"]])
def test_long_paths_into_a_pipe_print_what_rich_prints(tmp_path, cmd):
    """Transcripts under a long directory (as a user's sessions are): what is written without
    rich is what rich prints, no line wider than the pipe's width, and window's table loads
    no rich."""
    deep = tmp_path / ("projects-" + "-".join(["home-user-work-some-long-project-name"] * 3))
    deep.mkdir()
    args = []
    for a in cmd:
        if a.endswith(".jsonl"):
            (deep / a).write_bytes((S / a).read_bytes())
            a = str(deep / a)
        args.append(a)
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS")
           and not k.startswith("CTXTOOL_")}
    runs = {how: subprocess.run([sys.executable, "-c", PROBE, how, *args], capture_output=True, text=True, env=env,
                                cwd=tmp_path, check=False) for how in ("plain", "rich")}
    assert runs["plain"].returncode == 0, runs["plain"].stderr
    assert runs["plain"].stdout == runs["rich"].stdout
    assert all(len(line) <= 120 for line in runs["plain"].stdout.splitlines())
    if cmd[0] in ("window", "stats"):
        assert runs["plain"].stderr.endswith("RICH []")


def test_long_record_ids_are_cut_without_rich(tmp_path):
    """A dataset whose records have long ids: window's label column gives way (each label
    ends in …), written without rich, as rich prints it."""
    import json

    recs = [{"id": f"session-{k}-" + "0123456789abcdef" * 6,
             "messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(8)]}
            for k in range(3)]
    data = tmp_path / "long_ids.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS")
           and not k.startswith("CTXTOOL_")}
    args = ["window", "--max-messages", "3", "--dry-run", str(data)]
    runs = {how: subprocess.run([sys.executable, "-c", PROBE, how, *args], capture_output=True, text=True, env=env,
                                cwd=tmp_path, check=False) for how in ("plain", "rich")}
    assert runs["plain"].returncode == 0, runs["plain"].stderr
    assert runs["plain"].stdout == runs["rich"].stdout
    assert runs["plain"].stdout.count("…") == 3
    assert runs["plain"].stderr.endswith("RICH []")


@pytest.mark.parametrize("ncol", [1, 2])
@pytest.mark.parametrize("extra", [-1, 0, 1])
@pytest.mark.parametrize("overflow", ["ellipsis", "fold"])
def test_a_table_just_wider_than_the_console(ncol, extra, overflow):
    """At the edge: a table that fits exactly is one line a row; one a cell wider is narrowed
    as rich narrows it, the word cut (…) or folded onto a second line."""
    t = tb.Table()
    for _ in range(ncol):
        t.add_column("h", justify="right", overflow=overflow)
    width = 40
    cell = "x" * (width - 4 * ncol + extra)  # the edges, the dividers, the padding and the other cells: 4 a column
    t.add_row(*[cell] + ["y"] * (ncol - 1))
    text = t.plain(width)
    assert text is not None
    assert text == rich_text(t, width)
    assert ("…" in text) == (extra > 0 and overflow == "ellipsis")
    assert len(text.splitlines()) == 5 + (extra > 0 and overflow == "fold")


@pytest.mark.parametrize(("env", "plain"), [({}, True), ({"FORCE_COLOR": "1"}, False), ({"COLUMNS": "200"}, True)])
def test_into_a_pipe_the_width_is_wide_enough_whoever_prints(monkeypatch, env, plain):
    """Into a pipe the width is max($COLUMNS, 120), whether this module or rich prints (as
    FORCE_COLOR asks of rich)."""
    for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stdout", buf)
    out = tb.Out()
    assert out.plain is plain
    assert out.width == max(int(env.get("COLUMNS", 0)), 120)
    t = tb.Table(title="t", title_justify="left")
    t.add_column("x" * 130)
    out.print(t)
    assert buf.getvalue().splitlines()[1].startswith("┏━")
    assert len(buf.getvalue().splitlines()[1]) == (134 if out.width >= 134 else out.width)
