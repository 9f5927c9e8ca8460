"""Token counts of plain text (like ttok): what ``stats`` does with input that is not JSON
or JSON Lines at all. A JSON transcript with errors is not plain text: it stays an error.
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .tokens import Tokenizer, get_tokenizer

SNIFF_BYTES = 64 * 1024
_MAGIC = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd")  # gzip, zstd: decompressed by the normal reader


@dataclass(frozen=True, slots=True)
class TextCount:
    path: str
    tokens: int
    chars: int
    lines: int
    tokenizer: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "tokens": self.tokens, "chars": self.chars, "lines": self.lines,
                "tokenizer": self.tokenizer}


def _head(path: str) -> bytes | None:
    """The first bytes of ``path`` without consuming them (stdin: what can be peeked)."""
    if path == "-":
        buf: Any = getattr(sys.stdin, "buffer", None)
        if buf is None:
            return None
        if isinstance(buf, io.BufferedReader):
            head: bytes = buf.peek(SNIFF_BYTES)[:SNIFF_BYTES]
        elif hasattr(buf, "seekable") and buf.seekable():
            pos = buf.tell()
            head = buf.read(SNIFF_BYTES)
            buf.seek(pos)
        else:
            return None
        return None if head.startswith(_MAGIC) else head
    from .fileio import input_size, open_input
    from .formats import TRANSCRIPT_SUFFIXES

    p = Path(path)
    stem = p.with_suffix("") if p.suffix.lower() in (".gz", ".zst") else p
    if input_size(path) is None or stem.suffix.lower() in TRANSCRIPT_SUFFIXES:
        return None  # a FIFO cannot be read twice; a file named as a transcript is one (with errors)
    with open_input(path) as fh:
        return fh.read(SNIFF_BYTES)


def is_plain_text(path: str | Path) -> bool:
    """Whether ``path`` is not JSON or JSON Lines at all: its first non-blank character is not
    ``{`` or ``[`` and the lines after the first are not JSON records (a JSON Lines file with a
    broken first line is a transcript with an error). Stdin is peeked at; a file is looked at
    when it is a regular file not named as a transcript (``.jsonl``, ``.json`` ...)."""
    from .jsonio import _mostly_records

    head = _head(str(path))
    if head is None:
        return False
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    body = head.lstrip()
    if not body or body[:1] in (b"{", b"[") or head.startswith((b"PK\x03\x04", b"SQLite format 3\x00")):
        return False  # a zip (an Inspect .eval), a SQLite store (opencode.db)
    rest = [(n, r) for n, r in enumerate(body.split(b"\n")[1:], 2) if r.strip()]
    return not _mostly_records(rest)


def count_text(path: str | Path, tokenizer: Tokenizer | str | None = None) -> TextCount:
    """The tokens of a plain text file (``-``: stdin), decoded as UTF-8 (invalid bytes replaced)."""
    from .fileio import open_input

    tok = get_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, str) else tokenizer
    with open_input(path) as fh:
        text = fh.read().decode("utf-8", errors="replace")
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return TextCount(str(path), tok.count(text) if text else 0, len(text), lines, tok.name)
