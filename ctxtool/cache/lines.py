"""A ref's content as numbered lines, streamed from its pieces (:func:`ctxtool.cache.content.iter_ref`):
an output of any size is read in flat memory, a page of it or every line of it.

Lines are what ``text.split("\\n")`` gives (a ``\\r`` stays on its line), less the empty one
after a final newline: ``"a\\nb\\n"`` is two lines, ``""`` none. A line longer than ``keep``
bytes is held to its first ``keep`` bytes (its full length is still told), so that one
gigabyte-long line is never held whole either.
"""

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


def decode(data: bytes) -> str:
    """A line's text as ``read_text`` decodes a whole ref (lone surrogates kept)."""
    return data.decode("utf-8", "surrogatepass")
