"""JSON and JSONL input/output: streaming reads with line numbers, atomic writes."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from ..errors import CtxtoolError
from ..model import Line
from . import jsontext
from .files import BOM, had_bom, input_size, open_input, open_raw

PEEK_LINES = 64
#: ... or fewer: once this many bytes are read ahead (at least PEEK_MIN_LINES lines), the
#: sample is large enough. A dataset of 100 KB records would otherwise parse 6 MB ahead, in
#: one process, before a split run's workers start (and parse it again).
PEEK_BYTES = 1 << 20
PEEK_MIN_LINES = 8


def loads(data: bytes | str, *, path: str = "-", line: int | None = None, exact: bool = True) -> Any:
    """Parse JSON, turning any failure into a one-line :class:`CtxtoolError`.

    With ``exact`` (the default) numbers stay exact (see :mod:`ctxtool.io.jsontext`): a
    document where orjson would change one (an integer beyond 64 bits, a float not written
    in orjson's form) is parsed with each number keeping its source text. Without it orjson
    reads what it can (JSON Lines are read so: each line keeps its bytes, and a writer that
    re-serializes a line asks for its exact value, see ``formats.base.exact_obj``).
    """
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    if not exact or not jsontext.needs_exact(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # NaN, deep nesting, bad input: the standard library says what is wrong
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as ue:
        raise CtxtoolError(f"invalid UTF-8 at byte {ue.start}", path=path, line=line) from ue
    if text[:1] == "\ufeff":
        text = text[1:]  # a byte order mark
    try:
        return jsontext.parse_exact(text)
    except json.JSONDecodeError as je:
        ln = line if line is not None else je.lineno
        raise CtxtoolError(f"invalid JSON: {je.msg} (column {je.colno})", path=path, line=ln) from None
    except RecursionError:
        raise CtxtoolError("invalid JSON: nested too deeply", path=path, line=line) from None
    except (ValueError, ArithmeticError) as e:
        raise CtxtoolError(f"invalid JSON: {e}", path=path, line=line) from None


def dumps(obj: Any, style: jsontext.Style = jsontext.COMPACT) -> bytes:
    """JSON bytes: compact and raw UTF-8 unless a ``style`` is given; numbers read from a
    source are written with their source text."""
    return jsontext.encode(obj, style)


def dumps_text(obj: Any) -> str:
    return dumps(obj).decode("utf-8")


def dumps_pretty(obj: Any) -> bytes:
    return jsontext.encode(obj, jsontext.COMPACT, indent=2)


@dataclass
class Source:
    """An opened input: either JSON Lines (streamed) or one JSON document (loaded).

    ``peek`` holds the first parsed lines (JSONL) for format detection; ``lines()``
    yields every parsed line, starting with those.
    """

    path: str
    layout: str  # "jsonl", "json", "zip" (an archive: ``doc`` holds its bytes) or "sqlite" (``doc``: its path)
    doc: Any = None
    peek: list[Line] = field(default_factory=list)
    _rest: Iterator[tuple[int, bytes]] | None = None
    _fh: IO[bytes] | None = None
    size: int | None = None
    first_index: int = 0  # record number of the first line (a range of a dataset file)
    style: jsontext.Style | None = None  # a JSON document's (indentation, escaping)
    at: int | None = None  # the number of the line lines() yielded last (for error messages)
    # what ctxtool.formats.detect picked from this peek (the list and its length, the format):
    # a source detected again (ctxtool.run.records.process, then its task's read) is not scored twice
    detected: tuple[list[Line], int, Any] | None = field(default=None, repr=False, compare=False)
    whole: bool = False  # JSON Lines: the peek holds every line of the input (it ended before PEEK_LINES)
    bom: bool = False  # the input began with a UTF-8 byte order mark (taken off: not in any line)
    _ends: list[bool] | None = field(default=None, repr=False, compare=False)  # whether the input ended with a newline
    _crlf: list[bool] | None = field(default=None, repr=False, compare=False)  # whether its first line ended "\r\n"

    @property
    def crlf(self) -> bool:
        """Whether the input's lines end with ``\\r\\n`` (as its first line does)."""
        return bool(self._crlf and self._crlf[0])

    @property
    def final_newline(self) -> bool | None:
        """Whether the input ended with a newline: None until it has been read to its end."""
        return self._ends[-1] if self._ends else None

    def plain_ending(self) -> bool:
        """Whether the input ends its bytes as ctxtool's writers end theirs: no byte order
        mark, ``\\n`` lines (as its first line is ended), and, for JSON Lines, a final newline
        (not known yet: not plain). Another is written back as it ends
        (:class:`ctxtool.io.outputs.LikeSource`) and is never cut into byte ranges for a run
        that writes it (:func:`ctxtool.formats.split_plan`)."""
        return not (self.bom or self.crlf or (self.layout == "jsonl" and self.final_newline is not True))

    def one_line_document(self) -> bool:
        """Whether this is JSON Lines of a single line holding an object: a JSON document written
        on one line (``jq -c``, ``json.dump`` without indent) reads the same. A format of whole
        documents (an ATIF trajectory, an Inspect log) takes such a file as its document
        (:meth:`as_document`); formats of records read it as one record, as before."""
        return (self.layout == "jsonl" and self.whole and len(self.peek) == 1 and isinstance(self.peek[0].obj, dict)
                and self.peek[0].raw is not None)

    def as_document(self) -> Any:
        """The JSON document: ``doc``; a one-line document (:meth:`one_line_document`) is made
        one first, parsed exactly, in its one-line style and ending, so that it is written
        back byte for byte."""
        if self.one_line_document():
            ln = self.peek[0]
            raw = ln.raw or b""
            self.close()
            ends = self._ends
            self.doc = loads(raw, path=self.path, line=ln.lineno)
            self.style = jsontext.Style.detect_document(raw, ends[-1] if ends else True)
            self.layout, self.peek, self._rest, self.detected = "json", [], None, None
        return self.doc

    def lines(self, policy: Any = None) -> Iterator[Line]:
        """The parsed lines. A line that is not JSON raises, or, given an error ``policy``
        (``formats.base.ErrorPolicy``), goes to it: with ``--on-error skip`` the reader
        carries on with the next line."""
        if self.layout != "jsonl":
            raise TypeError("lines() on a JSON document")
        peek, self.peek = self.peek, []
        for ln in peek:
            if ln.obj is UNREADABLE:
                try:
                    loads(ln.raw or b"", path=self.path, line=ln.lineno)  # raises: say why
                except CtxtoolError as e:
                    if policy is None:
                        raise
                    policy.handle(e)
                continue
            self.at = ln.lineno
            yield ln
        if self._rest is not None:
            for n, raw in self._rest:
                try:
                    obj = loads(raw, path=self.path, line=n, exact=False)
                except CtxtoolError as e:
                    if policy is None:
                        raise
                    policy.handle(e)
                    continue
                self.at = n
                yield Line(obj, raw, n)
        self.close()

    def close(self) -> None:
        if self._fh is not None and self._fh is not sys.stdin.buffer:
            self._fh.close()
        self._fh = None

    def sample(self) -> list[Any]:
        """Parsed values used for detection."""
        if self.layout != "jsonl":
            return [self.doc]
        return [ln.obj for ln in self.peek if ln.obj is not UNREADABLE]


CHUNK = 1 << 22


def _numbered(
    fh: IO[bytes], first_line: int = 1, end: int | None = None, ends: list[bool] | None = None,
    crlf: list[bool] | None = None,
) -> Iterator[tuple[int, bytes]]:
    """Non-blank lines with their 1-based numbers, without their ending ("\\n", "\\r\\n", or a
    "\\r" that ends the input), each copied once out of the reader's buffer (files are opened
    with a large one: long lines are common); a pipe's lines flow as they arrive. ``end``
    stops at that byte offset (a range of the file, see :func:`open_range`; ranges end on line
    boundaries); ``ends`` gets, at the end of the input, whether its last line that is not
    blank was ended by a newline (blank lines after it are not read);
    ``crlf``, once the first line is read, whether it ended with "\\r\\n"."""
    n = first_line - 1
    left = end - fh.tell() if end is not None else sys.maxsize
    line = last = b"\n"
    first = crlf is not None
    for line in fh:
        if left <= 0:
            break
        left -= len(line)
        n += 1
        s = line
        if s[-1:] == b"\n":
            s = s[:-2] if s[-2:-1] == b"\r" else s[:-1]
        elif s[-1:] == b"\r":
            s = s[:-1]
        if first:
            crlf.append(line[-2:] == b"\r\n")  # type: ignore[union-attr]
            first = False
        if s and (s[:1] not in b" \t\r" or s.strip()):
            last = line
            yield n, s
    if ends is not None:
        ends.append(last[-1:] == b"\n" or last is not line)  # a line after it: it ended


def open_source(path: str | Path, name: str | None = None) -> Source:
    """Open ``path`` (``-`` for stdin, a FIFO, ``/dev/fd/N``; gzip or zstd compressed) and decide
    between JSONL and a JSON document. ``name`` is what errors call it (default: ``path``)."""
    name = name or str(path)
    fh = open_input(path)
    owned = fh is not sys.stdin.buffer
    size = input_size(path)
    if isinstance(fh, io.BufferedReader) and fh.peek(16)[:16] == SQLITE_MAGIC:
        # a SQLite store (opencode.db): its format opens the file itself, read only
        if owned:
            fh.close()
        if size is None or path == "-":
            raise CtxtoolError("a SQLite store is read from a file, not a pipe", path=name)
        return Source(name, "sqlite", doc=str(path), size=size)
    try:
        return _open_source(fh, name, size, _after_last_line(fh, size))
    except BaseException:
        if owned:
            fh.close()
        raise


ZIP_MAGIC = b"PK\x03\x04"
SQLITE_MAGIC = b"SQLite format 3\x00"


def _after_last_line(fh: IO[bytes], size: int | None) -> bytes:
    """What follows the input's last line that is not blank: a newline (``b"\\n"``) or not
    (``b"}"``), where it can be read ahead (a regular file, not compressed; else ``b""``), so
    that a writer knows from the start whether the input ends with one
    (:class:`ctxtool.io.outputs.LikeSource`)."""
    raw = getattr(fh, "raw", None)
    if not size or not isinstance(raw, io.FileIO):
        return b""
    try:
        tail = os.pread(raw.fileno(), min(size, 4096), max(0, size - 4096))
    except OSError:  # a pipe
        return b""
    body = tail.rstrip(b" \t\r\n")
    if not body:
        return b""  # blank to the end of the tail: not known here
    return b"\n" if b"\n" in tail[len(body):] else body[-1:]


def _open_source(fh: IO[bytes], name: str, size: int | None, after: bytes = b"") -> Source:
    if isinstance(fh, io.BufferedReader) and fh.peek(4)[:4] == ZIP_MAGIC:
        data = fh.read()  # an archive (an Inspect .eval log): the format that reads it opens it
        if fh is not sys.stdin.buffer:
            fh.close()
        return Source(name, "zip", doc=data, size=size)
    ends: list[bool] = [after == b"\n"] if after else []  # whether the input ends with a newline (a document keeps that)
    crlf: list[bool] = []  # whether its first line ends with "\r\n"
    it = _numbered(fh, ends=ends, crlf=crlf)

    def made(src: Source) -> Source:  # what the input's bytes say besides its lines: how they end, a mark
        src._ends, src._crlf, src.bom = ends, crlf, had_bom(fh)
        return src

    first = next(it, None)
    if first is None:
        raise CtxtoolError("empty file: no JSON records", path=name, line=1)
    n, raw = first
    head = raw.lstrip()[:1]
    obj = _parse_line(raw)
    if obj is not UNREADABLE and head == b"{":
        return made(_jsonl(name, Line(obj, raw, n), it, fh, size))
    # A whole JSON document (array or pretty-printed object), or JSON Lines whose first
    # record is unreadable: detection looks past it, and lines() reports it.
    lines = list(it)
    if fh is not sys.stdin.buffer:
        fh.close()
    if obj is UNREADABLE and head != b"[" and _mostly_records(lines):
        return made(_jsonl(name, Line(UNREADABLE, raw, n), iter(lines), None, size))
    if head not in (b"{", b"["):
        raise CtxtoolError("not JSON or JSON Lines (expected '{' or '[')", path=name, line=n)
    # every line at its own number (blank lines kept), so that a parse error names the line
    chunks = [b"\n" * (n - 1), raw]
    last = n
    for m, r in lines:
        chunks.append(b"\n" * (m - last))
        chunks.append(r)
        last = m
    data = b"".join(chunks)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as ue:
        col = ue.start - data.rfind(b"\n", 0, ue.start)
        raise CtxtoolError(f"invalid UTF-8 (column {col})", path=name, line=data.count(b"\n", 0, ue.start) + 1) from ue
    style = jsontext.Style.detect_document(data, ends[-1] if ends else True)
    if head == b"{" and obj is UNREADABLE:
        try:
            doc = loads(data, path=name)
        except CtxtoolError:
            loads(raw, path=name, line=n)  # JSONL whose first line is broken: report that line
            raise
        return made(Source(name, "json", doc=doc, size=size, style=style))
    return made(Source(name, "json", doc=loads(data, path=name), size=size, style=style))


#: the parsed value of a line that is not JSON (lines() reports it, detection skips it)
UNREADABLE: Any = type("Unreadable", (), {"__repr__": lambda self: "<unreadable>"})()


def _parse_line(raw: bytes) -> Any:
    try:
        return loads(raw, exact=False)
    except CtxtoolError:
        return UNREADABLE


def _mostly_records(lines: list[tuple[int, bytes]]) -> bool:
    """Whether the lines after an unreadable first one are JSON Lines records (most of the
    first few are JSON objects), not the rest of a broken JSON document."""
    head = lines[:PEEK_LINES]
    good = sum(1 for _, r in head if r.lstrip()[:1] == b"{" and isinstance(_parse_line(r), dict))
    return bool(head) and good * 2 >= len(head)


def _jsonl(name: str, first: Line, it: Iterator[tuple[int, bytes]], fh: IO[bytes] | None, size: int | None) -> Source:
    """A JSON Lines source; the first lines are parsed ahead for detection (``peek``),
    unreadable ones included so that lines() reports them in their place."""
    src = Source(name, "jsonl", _rest=it, _fh=fh, size=size)
    src.peek.append(first)
    read = len(first.raw or b"")
    for k in range(1, PEEK_LINES):
        if read >= PEEK_BYTES and k >= PEEK_MIN_LINES:
            break
        nxt = next(it, None)
        if nxt is None:
            src.whole = True
            break
        read += len(nxt[1])
        src.peek.append(Line(_parse_line(nxt[1]), nxt[1], nxt[0]))
    return src


def split_ranges(path: str, parts: int, *, lines: bool = True) -> list[tuple[int, int, int]]:
    """Cut a JSONL file (or URL) into ``parts`` byte ranges on line boundaries: (start, end,
    first line). ``lines=False`` does not read the whole file to number them (first line 0:
    each range counts its own with :func:`count_newlines`, where it runs)."""
    size = input_size(path) or 0
    bounds = [0]
    with open_raw(path) as fh:
        for k in range(1, parts):
            fh.seek(max(size * k // parts, bounds[-1]))
            fh.readline()
            pos = fh.tell()
            if pos < size and pos > bounds[-1]:
                bounds.append(pos)
        bounds.append(size)
        firsts = [1]
        count = 1
        for a, b in zip(bounds, bounds[1:-1], strict=False):
            count += _newlines(fh, a, b) if lines else 0
            firsts.append(count if lines else 0)
    return [(bounds[i], bounds[i + 1], firsts[i]) for i in range(len(bounds) - 1)]


def count_newlines(path: str, start: int, end: int) -> int:
    """The newlines in bytes ``start``..``end`` of a file or URL (line numbers of later ranges)."""
    with open_raw(path) as fh:
        if end > start and isinstance(fh, io.BufferedReader):  # a local file: counted where it lies
            try:
                return _mapped_newlines(fh.fileno(), start, min(end, os.fstat(fh.fileno()).st_size))
            except (OSError, ValueError):  # not mappable (a FIFO, a file that shrank): read it
                pass
        return _newlines(fh, start, end)


MAP_WINDOW = 16 << 20  # mapped at a time: the pages counted leave the process's resident set


def _mapped_newlines(fd: int, start: int, end: int) -> int:
    """The newlines of a file's bytes ``start``..``end``, counted where they lie (mapped a
    window at a time, nothing copied out): agent transcripts' lines are long, and ``find``
    jumps from one to the next; a stretch of short lines is counted per megabyte."""
    import mmap

    n = 0
    pos = start
    while pos < end:
        base = pos - pos % mmap.ALLOCATIONGRANULARITY
        length = min(base + MAP_WINDOW, end) - base
        with mmap.mmap(fd, length, prot=mmap.PROT_READ, offset=base) as m:
            find = m.find
            a, stop_all = pos - base, length
            while a < stop_all:
                stop = min(a + (1 << 20), stop_all)
                p = find(b"\n", a, stop)
                hits = 0
                while p >= 0 and hits < 64:
                    hits += 1
                    p = find(b"\n", p + 1, stop)
                if p >= 0:  # short lines: the rest of this megabyte at once
                    hits += m[p:stop].count(b"\n")
                n += hits
                a = stop
        pos = base + length
    return n


def _newlines(fh: IO[bytes], start: int, end: int) -> int:
    fh.seek(start)
    n = 0
    remaining = end - start
    while remaining > 0:
        chunk = fh.read(min(CHUNK, remaining))
        if not chunk:
            break
        remaining -= len(chunk)
        n += chunk.count(b"\n")
    return n


def open_range(path: str, start: int, end: int, first_line: int) -> Source:
    """A JSONL source over one byte range of a file (for parallel readers)."""
    fh = open_raw(path)  # closed by Source.lines()
    fh.seek(start)
    if start == 0 and fh.read(3) != BOM:
        fh.seek(0)
    it = _numbered(fh, first_line, end)
    return Source(path, "jsonl", _rest=it, _fh=fh, size=end - start, first_index=first_line - 1)
