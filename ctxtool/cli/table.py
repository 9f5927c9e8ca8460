"""Tables and lines for people, on stdout: what rich prints, written without rich when rich would
print it plainly (into a pipe or a file). :meth:`Table.plain` lays a table out as rich would, or
declines (a character of unknown width, a column narrower than its padding); :class:`Out` prints
through it when it can, through rich otherwise (a terminal, rich's own renderables).
``tests/test_cli_table.py`` holds the two to the same bytes. Why: docs/architecture.md, "Commands"."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..text import lazyre
from .console import PLAIN, console_class, printable

#: rich.box styles by name; the characters of each: top, head, head row, mid, row, foot row,
#: foot, bottom (rich's eight lines of four: left, horizontal or space, divider, right)
BOXES = {
    "HEAVY_HEAD": ("┏━┳┓", "┃ ┃┃", "┡━╇┩", "│ ││", "├─┼┤", "├─┼┤", "│ ││", "└─┴┘"),
    "SIMPLE_HEAD": ("    ", "    ", " ── ", "    ", "    ", "    ", "    ", "    "),
}
HEAVY_HEAD, SIMPLE_HEAD = "HEAVY_HEAD", "SIMPLE_HEAD"

#: a character outside these takes a width this module does not know (wide, combining, a
#: tab): rich lays such text out. rich's own single-cell ranges, and the symbols ctxtool
#: prints with :func:`printable`'s control pictures; a test checks each against rich.
ONE_CELL = ((0x20, 0x7E), (0xA0, 0xAC), (0xAE, 0x2FF), (0x370, 0x482), (0x2026, 0x2026), (0x2192, 0x2192),
            (0x2212, 0x2212), (0x2248, 0x2248), (0x2264, 0x2265), (0x2400, 0x2421), (0x2500, 0x25FC),
            (0x2800, 0x28FF), (0xFFFD, 0xFFFD))
#: the symbols of two cells ctxtool prints itself (replay's 📊): a line holding one is written
#: here when it fits the width; a test checks each against rich
TWO_CELL = frozenset({0x1F4CA})


def one_cell(ch: str) -> bool:
    """Whether rich gives ``ch`` one cell (as far as this module knows)."""
    o = ord(ch)
    return any(a <= o <= b for a, b in ONE_CELL)


def _width(text: str) -> int | None:
    """The cells ``text`` (one line) takes, or None when a character is not one cell."""
    if text.isascii():
        return len(text) if text.isprintable() else None
    return len(text) if all(ch.isascii() and ch.isprintable() or one_cell(ch) for ch in text) else None


class Column:
    __slots__ = ("footer", "header", "justify", "min_width", "no_wrap", "overflow")

    def __init__(self, header: str, justify: str, footer: str, overflow: str, no_wrap: bool,
                 min_width: int | None) -> None:
        self.header, self.justify, self.footer = header, justify, footer
        self.overflow, self.no_wrap, self.min_width = overflow, no_wrap, min_width


class Table:
    """A table as ``rich.table.Table`` takes it (the arguments ctxtool uses), kept as text."""

    def __init__(self, title: str | None = None, *, title_justify: str = "center", caption: str | None = None,
                 box: str = HEAVY_HEAD, pad_edge: bool = True, min_width: int | None = None,
                 show_footer: bool = False) -> None:
        self.title, self.title_justify, self.caption, self.box = title, title_justify, caption, box
        self.pad_edge, self.min_width, self.show_footer = pad_edge, min_width, show_footer
        self.columns: list[Column] = []
        self.rows: list[tuple[list[str], str | None]] = []

    def add_column(self, header: str = "", *, justify: str = "left", footer: str = "", overflow: str = "ellipsis",
                   no_wrap: bool = False, min_width: int | None = None) -> None:
        self.columns.append(Column(header, justify, footer, overflow, no_wrap, min_width))

    def add_row(self, *cells: str | None, style: str | None = None) -> None:
        self.rows.append(([c or "" for c in cells] + [""] * (len(self.columns) - len(cells)), style))

    def natural_width(self) -> int:
        """The cells the table takes when nothing is narrowed (the widest line of each cell)."""
        n = len(self.columns)
        width = n + 1  # the edges and the dividers
        for i, c in enumerate(self.columns):
            texts = [c.header, c.footer if self.show_footer else ""] + [cells[i] for cells, _ in self.rows]
            pad = (0 if not self.pad_edge and i == 0 else 1) + (0 if not self.pad_edge and i == n - 1 else 1)
            width += max(max(len(ln) for ln in (t.splitlines() or [""])) for t in texts) + pad
        return width

    def fit(self, width: int, drop: tuple[str, ...] = ()) -> list[str]:
        """A table for a screen ``width`` cells wide: while it is wider, the columns named in
        ``drop`` are left out in that order (the caption says which); if it is still wider,
        numbers (right-justified columns) keep their cells whole and the first column, the
        row's key, folds onto more lines rather than being cut. Returns the headers left out."""
        dropped: list[str] = []
        for name in drop:
            if self.natural_width() <= width:
                break
            i = next((k for k, c in enumerate(self.columns) if c.header == name), None)
            if i is None:
                continue
            del self.columns[i]
            for cells, _ in self.rows:
                del cells[i]
            dropped.append(name)
        if self.natural_width() > width:
            for c in self.columns:
                if c.justify == "right":
                    c.no_wrap = True
            if self.columns and self.columns[0].justify == "left":
                self.columns[0].overflow = "fold"
        if dropped:
            note = f"narrow screen: no {', '.join(dropped)} (--json has them)"
            self.caption = f"{self.caption} · {note}" if self.caption else note
        return dropped

    def to_rich(self) -> Any:
        """The same table as a ``rich.table.Table``."""
        from rich import box
        from rich.table import Table as RichTable

        t = RichTable(title=self.title, title_justify=self.title_justify, caption=self.caption,  # type: ignore[arg-type]
                      box=getattr(box, self.box), pad_edge=self.pad_edge, min_width=self.min_width,
                      show_footer=self.show_footer)
        for c in self.columns:
            t.add_column(c.header, justify=c.justify, footer=c.footer, overflow=c.overflow,  # type: ignore[arg-type]
                         no_wrap=c.no_wrap, min_width=c.min_width)
        for cells, style in self.rows:
            t.add_row(*cells, style=style)
        return t

    def plain(self, width: int) -> str | None:
        """The text rich prints for this table on a console ``width`` cells wide without
        colour (lines ending in newlines), or None when rich must lay it out."""
        ncol = len(self.columns)
        if not ncol:
            return None
        grid = [[printable(c.header) for c in self.columns]]
        grid += [[printable(c) for c in cells] for cells, _ in self.rows]
        if self.show_footer:
            grid.append([printable(c.footer) for c in self.columns])
        sizes: list[list[int]] = []
        for line in grid:
            row = [_cell_width(cell) for cell in line]  # None: a tab, a wide character...
            if None in row:
                return None
            sizes.append(row)  # type: ignore[arg-type]
        extra = 2 + ncol - 1  # the edges and the dividers
        room = width - extra
        pads = [(0 if not self.pad_edge and i == 0 else 1, 0 if not self.pad_edge and i == ncol - 1 else 1)
                for i in range(ncol)]
        laid = _layout([max(row[i] for row in sizes) for i in range(ncol)], pads, self.columns, room)
        if laid is None:
            return None
        widths, narrowed = laid
        total = sum(widths)
        # rich widens a table to its min_width from the width it laid out: a narrowed table
        # was laid out as wide as the room, and is not widened
        if not narrowed and self.min_width is not None and total < self.min_width - extra:
            widths = [w + p for w, p in zip(widths, _distribute(min(self.min_width - extra, room) - total, widths), strict=True)]
            total = sum(widths)
        table_width = total + extra
        title = _note(printable(self.title or ""), table_width, self.title_justify)
        caption = _note(printable(self.caption or ""), table_width, "center")
        body = self._body(grid, widths, pads)
        if title is None or caption is None or body is None:
            return None
        return "\n".join([*title, *body, *caption]) + "\n"

    def _body(self, grid: list[list[str]], widths: list[int], pads: list[tuple[int, int]]) -> list[str] | None:
        top, head, head_row, mid, _row, foot_row, foot, bottom = BOXES[self.box]
        out = [top[0] + top[2].join(top[1] * w for w in widths) + top[3]]
        last = len(grid) - 1
        for k, line in enumerate(grid):
            if k == last and self.show_footer:
                out.append(foot_row[0] + foot_row[2].join(foot_row[1] * w for w in widths) + foot_row[3])
            edge = head if k == 0 else foot if k == last else mid
            cells = []
            for cell, w, (left, right), col in zip(line, widths, pads, self.columns, strict=True):
                lines = _cell_lines(cell, w - left - right, col)
                if lines is None:
                    return None
                cells.append([" " * left + ln + " " * right for ln in lines])
            height = max(len(c) for c in cells)
            for c, w in zip(cells, widths, strict=True):  # a header at the bottom of its row, others at the top
                blank = [" " * w] * (height - len(c))
                c[:] = blank + c if k == 0 else c + blank
            out += [edge[0] + edge[2].join(c[i] for c in cells) + edge[3] for i in range(height)]
            if k == 0:
                out.append(head_row[0] + head_row[2].join(head_row[1] * w for w in widths) + head_row[3])
        out.append(bottom[0] + bottom[2].join(bottom[1] * w for w in widths) + bottom[3])
        return out


def _layout(longest: list[int], pads: list[tuple[int, int]], columns: list[Column],
            room: int) -> tuple[list[int], bool] | None:
    """The width of each column, padding included, as ``rich.table.Table`` sets them (no
    expand, no fixed widths), and whether they were narrowed: each as wide as its widest
    cell, within the room; when they do not fit, the widest columns that may wrap give way
    first, then every column evenly, and each is measured again at its new width. None when
    rich would measure otherwise (a column narrower than its padding, a table still wider
    than the room)."""
    if room < 1:
        return None
    floors = [0 if c.min_width is None else c.min_width + left + right for c, (left, right) in zip(columns, pads, strict=True)]
    widths = [max(min(n + left + right, room), f) or 1 for n, (left, right), f in zip(longest, pads, floors, strict=True)]
    if sum(widths) <= room:
        return widths, False
    widths = _collapse(widths, [not c.no_wrap for c in columns], room)
    if sum(widths) > room:
        widths = _ratio_reduce(sum(widths) - room, [1] * len(widths), widths, widths)
    out = []
    for w, n, (left, right), f in zip(widths, longest, pads, floors, strict=True):
        if w - left - right < 1:
            return None
        out.append(max(min(n + left + right, w), f))
    return (out, True) if sum(out) <= room else None


def _collapse(widths: list[int], wrapable: list[bool], room: int) -> list[int]:
    """rich's ``Table._collapse_widths``: the widest columns that may wrap narrowed, step by
    step down to the next widest, until the table fits or none is left to narrow."""
    total = sum(widths)
    excess = total - room
    if any(wrapable):
        while total and excess > 0:
            top = max(w for w, ok in zip(widths, wrapable, strict=True) if ok)
            second = max(w if ok and w != top else 0 for w, ok in zip(widths, wrapable, strict=True))
            ratios = [1 if w == top and ok else 0 for w, ok in zip(widths, wrapable, strict=True)]
            if not any(ratios) or not top - second:
                break
            widths = _ratio_reduce(excess, ratios, [min(excess, top - second)] * len(widths), widths)
            total = sum(widths)
            excess = total - room
    return widths


def _ratio_reduce(total: int, ratios: list[int], maximums: list[int], values: list[int]) -> list[int]:
    """rich's ``ratio_reduce``: ``total`` taken from ``values`` by ``ratios``, at most
    ``maximums`` from each."""
    ratios = [r if m else 0 for r, m in zip(ratios, maximums, strict=True)]
    weight = sum(ratios)
    if not weight:
        return values[:]
    left, out = total, []
    for r, m, v in zip(ratios, maximums, values, strict=True):
        if r and weight > 0:
            part = min(m, round(r * left / weight))
            out.append(v - part)
            left -= part
            weight -= r
        else:
            out.append(v)
    return out


def _cell_width(text: str) -> int | None:
    """The cells the widest line of a table cell takes, or None (see :func:`_width`)."""
    best = 0
    for line in text.split("\n"):
        w = _width(line)
        if w is None:
            return None
        best = max(best, w)
    return best


def _cell_lines(text: str, width: int, col: Column) -> list[str] | None:
    """A cell's lines in ``width`` cells as rich renders them (``Text.wrap``): each line of
    it wrapped at the width (unless the column does not wrap), then justified, and what is
    still wider cut by the column's overflow. None where rich would do otherwise."""
    if width < 1:
        return None
    out = []
    for line in text.split("\n"):
        pieces = [line] if col.no_wrap or len(line) <= width else _wrap(line, width, fold=col.overflow == "fold")
        for piece in pieces:
            fit = _fit(piece, width, col.justify, col.overflow)
            if fit is None:
                return None
            out.append(fit)
    return out


def _note(text: str, width: int, how: str) -> list[str] | None:
    """A table's title or caption: its lines as rich renders them at the table's width
    (wrapped, justified; none for no text)."""
    if not text:
        return []
    if _cell_width(text) is None:
        return None
    return _cell_lines(text, width, Column("", how, "", "fold", False, None))


def _fit(text: str, width: int, how: str, overflow: str) -> str | None:
    """One line in ``width`` cells as rich justifies it (right and centre drop trailing
    spaces first), cut when still wider: ``…`` at the end for ellipsis, else cropped (a
    cropped text keeps a space the cut leaves at its end). None for an overflow rich
    handles otherwise."""
    if how in ("right", "center"):
        text = text.rstrip()
    if len(text) > width:
        if overflow == "ellipsis":
            text = text[: width - 1] + "…"
        elif overflow in ("crop", "fold"):
            text = text[:width]
        else:
            return None
    return _pad(text, width, how)


def _pad(text: str, width: int, how: str) -> str:
    """``text`` padded to ``width`` cells: on the left (right), both sides (center, the
    odd space on the right), or the right."""
    pad = width - len(text)
    if how == "right":
        return " " * pad + text
    if how == "center":
        return " " * (pad // 2) + text + " " * (pad - pad // 2)
    return text + " " * pad


def _distribute(total: int, ratios: list[int]) -> list[int]:
    """rich's ``ratio_distribute`` without minimums: ``total`` split by ``ratios``, rounded up."""
    left, weight, parts = total, sum(ratios), []
    for r in ratios:
        part = -(-r * left // weight) if weight > 0 else left
        parts.append(part)
        weight -= r
        left -= part
    return parts


def is_terminal(stream: Any) -> bool:
    """rich's rule for a console on ``stream`` being a terminal (colours, styles, the
    terminal's width): TTY_COMPATIBLE, then FORCE_COLOR, then ``isatty``."""
    tty = os.environ.get("TTY_COMPATIBLE", "")
    if tty in ("0", "1"):
        return tty == "1"
    force = os.environ.get("FORCE_COLOR")
    if force is not None:
        return force != ""
    return _isatty(stream)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Out:
    """stdout for people: tables and lines, plain when rich would print them plainly (not
    a terminal, a UTF-8 stream, not Windows), through rich otherwise (colours with
    FORCE_COLOR). ``width``: the terminal's, or ``max($COLUMNS, 120)`` into a pipe or a file
    (settable)."""

    #: False: every table and line through rich (the test suite compares the two paths)
    plain_text = True

    def __init__(self) -> None:
        self.is_terminal = is_terminal(sys.stdout)
        encoding = (getattr(sys.stdout, "encoding", "utf-8") or "utf-8").lower()
        self.plain = self.plain_text and not self.is_terminal and encoding.startswith("utf") and sys.platform != "win32"
        self._width: int | None = None
        if not _isatty(sys.stdout):  # a pipe or a file (FORCE_COLOR too): wide enough, as before rich saw it
            try:
                self._width = max(int(os.environ.get("COLUMNS") or 0), 120)
            except ValueError:
                self._width = 120
        self._rich: Any = None

    @property
    def rich(self) -> Any:
        """The rich console behind this one (rich imported on first use)."""
        if self._rich is None:
            self._rich = console_class()(soft_wrap=False, width=self._width, **PLAIN)
        return self._rich

    @property
    def width(self) -> int:
        return self._width if self._width is not None else int(self.rich.width)

    @width.setter
    def width(self, value: int) -> None:
        self._width = value
        if self._rich is not None:
            self._rich.width = value

    def print(self, obj: Any, *, highlight: bool = False) -> None:
        """``obj`` (a :class:`Table`, a string, a rich renderable) and a newline. ``highlight``
        is taken as rich's ``print`` takes it; nothing is highlighted (data, see ``PLAIN``)."""
        if self.plain:
            text = obj.plain(self.width) if isinstance(obj, Table) else _line(obj, self.width) if isinstance(obj, str) else None
            if text is not None:
                self._write(text)
                return
        self._rich_print(obj.to_rich() if isinstance(obj, Table) else obj)

    def _write(self, text: str) -> None:
        """Into a pipe or a file, lines end without the spaces that pad them on a terminal."""
        sys.stdout.write(text if self.is_terminal else _TRAILING_SPACES.sub("", text))

    def _rich_print(self, obj: Any) -> None:
        if self.is_terminal:
            self.rich.print(obj, highlight=False)
            return
        with self.rich.capture() as cap:
            self.rich.print(obj, highlight=False)
        self._write(cap.get())

    def print_styled(self, line: str, style: str = "") -> None:
        """A line in ``style`` on a terminal (a row of replay's chart). Into a pipe rich prints
        it as it prints a string (wrapped at the width: rich joins the texts it prints into a
        new one, which does not keep a text's own no-wrap), and so does this."""
        if self.plain and printable(line) == line and (text := _line(line, self.width)) is not None:
            self._write(text)
            return
        from rich.text import Text

        self._rich_print(Text(line, style=style, no_wrap=True, overflow="ellipsis"))


def _line(text: str, width: int) -> str | None:
    """``text`` as rich prints it (a newline after it): each of its lines wrapped at the
    width as rich wraps it (:func:`_wrap`); None for a character whose width is not known
    here."""
    if width < 1:
        return None
    out = []
    for ln in printable(text).split("\n"):
        if _width(ln) is None:  # a symbol of two cells: the line as it is when it fits
            cells = _symbols_width(ln)
            if cells is None or cells > width:
                return None
            out.append(ln)
            continue
        out += [piece[:width] for piece in _wrap(ln, width)] if len(ln) > width else [ln]
    return "\n".join(out) + "\n"


def _symbols_width(text: str) -> int | None:
    """The cells a line of one-cell characters and :data:`TWO_CELL` symbols takes, or None."""
    cells = 0
    for ch in text:
        if ord(ch) in TWO_CELL:
            cells += 2
        elif _width(ch) is not None:
            cells += 1
        else:
            return None
    return cells


_WORD = lazyre.compile(r"\s*\S+\s*")
_TRAILING_SPACE = lazyre.compile(r"\s+$")
_TRAILING_SPACES = lazyre.compile(r"[ \t]+$", 8)  # re.MULTILINE, without importing re


def _wrap(line: str, width: int, fold: bool = True) -> list[str]:
    """rich's word wrap of one line of one-cell characters (``rich._wrap.divide_line``): a
    line breaks before the word that does not fit (a word keeps the spaces after it); a word
    wider than a line is cut into lines of the width (``fold``), else put on a line of its
    own (the caller cuts it); a line keeps its trailing spaces up to the width."""
    breaks: list[int] = []
    offset = 0
    for m in _WORD.finditer(line):
        start, word = m.start(), m.group()
        size = len(word.rstrip())
        if width - offset >= size:
            offset += len(word)
        elif size > width:  # folded: the word in pieces of the width; else whole on a line
            pieces = [word[k : k + width] for k in range(0, len(word), width)] if fold else [word]
            for piece in pieces:
                if start:
                    breaks.append(start)
                start += len(piece)
            offset = len(pieces[-1])
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    out = []
    for a, b in zip([0, *breaks], [*breaks, len(line)], strict=True):
        piece = line[a:b]
        if len(piece) > width and (ws := _TRAILING_SPACE.search(piece)) is not None:
            piece = piece[: len(piece) - min(len(ws.group()), len(piece) - width)]
        out.append(piece)
    return out
