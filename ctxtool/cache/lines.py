"""A ref's content as numbered lines, streamed from its pieces (:func:`ctxtool.cache.content.iter_ref`)
in flat memory. Lines are what ``text.split("\\n")`` gives less the empty one after a final
newline (``"a\\nb\\n"`` is two lines, ``""`` none); a line longer than ``keep`` bytes is held to
its first ``keep`` bytes, its full length still told."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(slots=True)
class Line:
    n: int  # 1-based
    data: bytes  # the line without its newline, at most ``keep`` bytes of it
    length: int  # its full length in bytes

    @property
    def cut(self) -> bool:
        return self.length > len(self.data)


class Lines:
    """The lines of a stream of byte pieces, read once from the front.

    :meth:`read` yields lines from a number on (the ones before it are counted, never
    built); :meth:`finish` counts the rest and returns how many lines there are in all.
    """

    def __init__(self, pieces: Iterable[bytes], *, keep: int | None = None) -> None:
        self._pieces = iter(pieces)
        self._keep = keep
        self.n = 1  # the number of the line being read
        self._buf: list[bytes] = []  # what is kept of that line so far
        self._kept = 0
        self._length = 0  # its length so far
        self._piece = b""  # the piece being read, from ``_pos`` on
        self._pos = 0
        self._done = False

    def _take(self, end: int) -> None:
        part = self._piece[self._pos:end] if self._keep is None else self._piece[self._pos:min(end, self._pos + self._keep - self._kept)]
        self._length += end - self._pos
        if part:
            self._buf.append(part)
            self._kept += len(part)
        self._pos = end

    def _end_line(self) -> Line:
        line = Line(self.n, b"".join(self._buf), self._length)
        self.n += 1
        self._buf = []
        self._kept = self._length = 0
        return line

    def _more(self) -> bool:
        """Is there something left to read (the next piece taken when the current one is read)?"""
        if self._pos < len(self._piece):
            return True
        for piece in self._pieces:
            if piece:
                self._piece, self._pos = piece, 0
                return True
        self._piece, self._pos = b"", 0
        return False

    def _count(self, upto: int | None) -> None:
        """Count lines, without building them, up to line ``upto`` (``None``: to the end)."""
        while (upto is None or self.n < upto) and self._more():
            piece, pos = self._piece, self._pos
            k = piece.count(b"\n", pos)
            if upto is None or self.n + k < upto:
                self.n += k
                self._length = len(piece) - piece.rfind(b"\n") - 1 if k else self._length + len(piece) - pos
                self._buf = []
                self._kept = 0
                self._pos = len(piece)
                continue
            for _ in range(upto - self.n):
                pos = piece.index(b"\n", pos) + 1
            self.n = upto
            self._buf = []
            self._kept = self._length = 0
            self._pos = pos

    def read(self, start: int = 1) -> Iterator[Line]:
        """Lines ``start`` (1-based, at or after where the reading is) onwards, as they come;
        the reading may stop between any two lines and go on with :meth:`read` or :meth:`finish`."""
        self._count(start)
        if self.n < start:  # fewer lines than that: left for finish() to count
            return
        while self._more():
            nl = self._piece.find(b"\n", self._pos)
            if nl < 0:
                self._take(len(self._piece))
                continue
            self._take(nl)
            self._pos = nl + 1
            yield self._end_line()
        if not self._done:
            self._done = True
            if self._length:
                yield self._end_line()

    def finish(self) -> int:
        """Read to the end, counting; the number of lines in all."""
        if not self._done:
            self._count(None)
            self._done = True
            if self._length:
                self.n += 1
                self._length = 0
        return self.n - 1


    def batches(self, max_line: int | None = None) -> Iterator[Batch]:
        """Every line from where the reading is, in batches of about a piece, each one
        string (:class:`Batch`): for a search through every line, decoded a piece at a time
        and split only where it is needed."""
        while self._more():
            piece = self._piece
            first = piece.find(b"\n", self._pos)
            if first < 0:
                self._take(len(piece))
                continue
            self._take(first)
            self._pos = first + 1
            head = self._end_line()
            text = text_of(head, max_line)[0]
            last = piece.rfind(b"\n", self._pos)
            count = 1
            if last >= self._pos:
                block = piece[self._pos:last]
                try:
                    more = block.decode("utf-8", "surrogatepass")
                except UnicodeDecodeError as e:
                    raise NotText(self.n + block.count(b"\n", 0, e.start)) from None
                text = f"{text}\n{more}"
                k = block.count(b"\n") + 1
                self.n += k
                count += k
                self._pos = last + 1
            yield Batch(head.n, text, count, max_line)
        if not self._done:
            self._done = True
            if self._length:
                last_line = self._end_line()
                yield Batch(last_line.n, text_of(last_line, max_line)[0], 1, max_line)


class Batch:
    """Lines ``n0`` to ``n0 + count - 1`` as one string, joined by newlines (``text``); each
    line cut at ``max_line`` characters where it is taken out (:meth:`line`, :attr:`lines`)."""

    __slots__ = ("_lines", "count", "max_line", "n0", "text")

    def __init__(self, n0: int, text: str, count: int, max_line: int | None) -> None:
        self.n0, self.text, self.count, self.max_line = n0, text, count, max_line
        self._lines: list[str] | None = None

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            lines = self.text.split("\n")
            m = self.max_line
            if m is not None and max(map(len, lines)) > m:
                lines = [t[:m] for t in lines]
            self._lines = lines
        return self._lines

    def last(self, k: int) -> list[str]:
        """The last ``k`` lines (without splitting the others)."""
        if k <= 0:
            return []
        if self._lines is not None:
            return self._lines[-k:]
        tail = self.text.rsplit("\n", k)[-k:]
        m = self.max_line
        return tail if m is None else [t[:m] for t in tail]

    def cut(self, line: str) -> str:
        return line if self.max_line is None else line[: self.max_line]


class NotText(ValueError):
    """A line that is not UTF-8."""

    def __init__(self, line: int) -> None:
        super().__init__(f"line {line} is not UTF-8 text")
        self.line = line


def text_of(ln: Line, max_line: int | None) -> tuple[str, bool]:
    """A line's text as ``read_text`` decodes a whole ref (lone surrogates kept), cut at
    ``max_line`` characters, and whether it was cut; :class:`NotText` when it is not UTF-8."""
    data = ln.data
    for _ in range(4):  # cut inside a character (``keep``): its first bytes dropped
        try:
            text = data.decode("utf-8", "surrogatepass")
            break
        except UnicodeDecodeError as e:
            if not ln.cut or e.start < len(data) - 3:
                raise NotText(ln.n) from None
            data = data[: e.start]
    else:
        raise NotText(ln.n)
    if max_line is not None and (ln.cut or len(text) > max_line):
        return text[:max_line], True
    return text, False
