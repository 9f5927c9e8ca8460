"""Token counts of plain text (like ttok): what ``stats`` does with input that is not JSON
or JSON Lines at all. A JSON transcript with errors is not plain text: it stays an error.
"""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CtxtoolError
from ..text import lazyre
from .count import Tokenizer, get_tokenizer

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


def _head(path: str) -> tuple[bytes, bool] | None:
    """The first bytes of ``path`` without consuming them, and whether its name says it is a
    transcript (``.jsonl``, ``.json``...). Stdin is peeked at; a FIFO or ``/dev/fd/N``
    (``<(...)``) is opened, peeked at and handed to the next :func:`ctxtool.io.files.open_input`
    of the same path, so that what was looked at is read again."""
    # lazy: start-up (loaded only when this runs: ..io.files)
    from ..io.files import hand_over, input_size, open_input

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
        return (None if head.startswith(_MAGIC) else (head, False))
    # lazy: start-up (loaded only when this runs: ..formats.walk, ..io)
    from ..formats.walk import TRANSCRIPT_SUFFIXES
    from ..io import urls

    p = Path(path)
    stem = p.with_suffix("") if p.suffix.lower() in (".gz", ".zst") else p
    named = stem.suffix.lower() in TRANSCRIPT_SUFFIXES
    if urls.is_url(path) or not os.path.exists(path) or os.path.isdir(path):
        return None
    if input_size(path) is None:  # a FIFO, <(...), a device: read once, so handed over
        fh = open_input(path)
        head = fh.peek(SNIFF_BYTES)[:SNIFF_BYTES] if isinstance(fh, io.BufferedReader) else b""
        hand_over(path, fh)
        return head, named
    with open_input(path) as fh:
        return fh.read(SNIFF_BYTES), named


#: how a JSON value starts after the brackets that open it: a TOML or INI section
#: (``[project]``, ``[[bin]]``) is not JSON
_JSON_START = lazyre.compile(rb"[\[\s]*(?:[\]{\"0-9-]|(?:true|false|null)\b)")


def is_binary(data: bytes, complete: bool = True) -> str | None:
    """Why ``data`` is not text (a NUL byte, invalid UTF-8), or None. A head cut off inside a
    character (``complete`` false) is not held against it."""
    nul = data.find(b"\x00")
    if nul >= 0:
        return f"binary input, not text (a NUL byte at offset {nul:,})"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        if complete or e.start < len(data) - 3:
            return f"binary input, not UTF-8 text (an invalid byte at offset {e.start:,})"
    return None


def is_plain_text(path: str | Path) -> bool:
    """Whether ``path`` is to be counted as text, as ttok counts anything: it is not a
    transcript. Text is anything not JSON (its first non-blank character is not ``{`` or
    ``[``, or the bracket opens a TOML or INI section), empty input, binary input (which
    :func:`count_text` refuses, naming the file), and a whole JSON document or JSON Lines
    that no transcript format recognizes. A JSON Lines file with a broken first line, or
    broken JSON, is a transcript with an error; so is any file named ``.jsonl``. Stdin is
    peeked at, a FIFO handed over; a regular file is looked at."""
    # lazy: start-up (loaded only when this runs: ..io, ..io.jsonl)
    from ..io.jsonl import ZIP_MAGIC, _mostly_records
    from ..io.parquet_paths import is_parquet

    if is_parquet(str(path)):  # a Parquet dataset: transcripts (ctxtool.io.parquet)
        return False
    got = _head(str(path))
    if got is None:
        return False
    head, named = got
    if head.startswith((ZIP_MAGIC, b"SQLite format 3\x00")):  # an Inspect .eval log, an opencode.db store
        return False
    complete = len(head) < SNIFF_BYTES
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    body = head.lstrip()
    if not body:
        return not named
    if body[:1] not in (b"{", b"["):
        if named:
            return False
        if is_binary(head, complete):
            return True
        rest = [(n, r) for n, r in enumerate(body.split(b"\n")[1:], 2) if r.strip()]
        return not _mostly_records(rest)
    if not _JSON_START.match(body, 1 if body[:1] == b"[" else 0) and body[:1] == b"[":
        return not named
    if named and str(path).lower().endswith((".jsonl", ".jsonl.gz", ".jsonl.zst", ".ndjson")):
        return False
    return _not_a_transcript(body if complete else body[: body.rfind(b"\n") + 1], str(path))


def _not_a_transcript(data: bytes, name: str) -> bool:
    """Whether ``data`` (whole JSON lines or a whole document) reads as JSON that no transcript
    format recognizes (``package.json``, a config); broken JSON is not decided here (False)."""
    if not data.strip():
        return False
    # lazy: start-up (loaded only when this runs: .., ..io.jsonl)
    from .. import formats
    from ..io.jsonl import _open_source

    try:
        src = _open_source(io.BufferedReader(io.BytesIO(data)), name, len(data))
        return src.layout != "zip" and not formats._scores(src.sample(), src)
    except CtxtoolError:
        return False


def count_text(path: str | Path, tokenizer: Tokenizer | str | None = None) -> TextCount:
    """The tokens of a plain text file (``-``: stdin; empty: 0), decoded as UTF-8. Binary
    input (a NUL byte, invalid UTF-8) is an error naming the file."""
    # lazy: start-up (loaded only when this runs: ..io.files)
    from ..io.files import open_input

    tok = get_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, str) else tokenizer
    with open_input(path) as fh:
        data = fh.read()
    why = is_binary(data)
    if why:
        raise CtxtoolError(why, path=str(path))
    text = data.decode("utf-8")
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return TextCount(str(path), tok.count(text) if text else 0, len(text), lines, tok.name)
