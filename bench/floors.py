"""Floors of `make bench` rows: the work no implementation can skip, as a whole process.

    python -m bench.floors truncate FILE          ->  the outputs cut and their originals kept
    python -m bench.floors truncate_write FILE [OUTDIR]  ->  the same, and the records written
    python -m bench.floors tokens FILE            ->  the o200k_base tokens of every text

One process per core, each over its share of the records (a plain chat dataset, one record
per line), parsed with orjson.

The two truncate floors share no code with ctxtool (issue 37): the standard library, orjson
and zstandard only, so they measure the work any tool must do, not ctxtool's way of doing it.
Their cut is a plain one of the ``head-tail`` preset's limits (the first and the last 128
lines, at most 10 KiB; on bytes, at line ends): the same outputs are cut as truncate cuts on
these sets, to about the same size, not to the same text.

``truncate``: parse each record; for each tool output count its lines and bytes and, over
the limits, cut it and keep its original recoverable: its sha256 and, the first time that
content is seen by the process (a content-addressed store keeps a content once), the
original compressed (zstd level 1, truncate's level). Nothing written: ``stats`` over the
same file divided by this process's time is the best the truncate row could read.

``truncate_write``: ``truncate``, and what must be written for its outputs: each record with
an output cut written again in its source's separators and escaping (read from its first
key; the standard library's ``json.dumps``, or orjson for a compact raw UTF-8 source) with
the cut text and a notice naming the ref in place of each output, a record with none cut
copied as read; the compressed originals appended to a pack, and for each output cut a line
of an index (the record's line, the message's place, the ref, the original's size and lines:
what puts it back). One output part, one pack and one index per process share, in OUTDIR
(left there, for the caller to remove after the timing), else in a temporary directory of
/dev/shm where it exists: no fsync, no join of the parts into one
file, no per-message stash of the source bytes, no report (fewer writes than truncate's,
so still a floor).

``tokens``: count every text ctxtool counts (bench/peers.py ``openai_texts``) with the exact
counter ``stats --tokenizer o200k_base`` uses (:func:`ctxtool.tokens.backends.exact_counter`,
loaded once per process): no transcript model, no report. A peer's loop time divided by this
process's time is the best an exact count could read against it.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

#: the ``head-tail`` preset's limits (adk-code's), restated: the first and last lines kept, bytes at most
HEAD_LINES = TAIL_LINES = 128
MAX_BYTES = 10 * 1024
ROOM = (MAX_BYTES - 64) // 2  # bytes kept at each end (64: room for the omission marker)
ZSTD_LEVEL = 1

_SEEN: set[str] = set()  # the contents this process has kept (by sha256)
_ZSTD: Any = None


def _lines(path: str, start: int, end: int) -> Iterator[bytes]:
    """The lines that start in [start, end) (the one that crosses ``start`` belongs to the share before)."""
    with open(path, "rb", 1 << 20) as fh:
        pos = start
        if start:
            fh.seek(start - 1)
            pos += len(fh.readline()) - 1
        while pos < end:  # counted, not asked of the file (a tell() a line is a system call a line)
            line = fh.readline()
            if not line:
                break
            pos += len(line)
            yield line


def _head(data: bytes, room: int) -> bytes:
    """At most ``HEAD_LINES`` lines and ``room`` bytes of the start, ending at a line's end."""
    head = data[:room]
    if head.count(b"\n") > HEAD_LINES:
        return b"\n".join(head.split(b"\n", HEAD_LINES)[:HEAD_LINES]) + b"\n"
    j = head.rfind(b"\n")
    if j >= 0:
        return head[: j + 1]
    while head and (head[-1] & 0xC0) == 0x80:  # no line end: at a character's end
        head = head[:-1]
    return head[:-1] if head and head[-1] >= 0xC0 else head


def _tail(data: bytes, room: int) -> bytes:
    """At most ``TAIL_LINES`` lines and ``room`` bytes of the end, starting at a line's start."""
    tail = data[-room:] if room else b""
    if tail.count(b"\n") > TAIL_LINES:
        return b"\n".join(tail.rsplit(b"\n", TAIL_LINES)[-TAIL_LINES:])
    j = tail.find(b"\n")
    if j >= 0:
        return tail[j + 1 :]
    k = 0
    while k < len(tail) and (tail[k] & 0xC0) == 0x80:
        k += 1
    return tail[k:]


def _cut(text: str) -> tuple[str, bytes, int] | None:
    """``text`` cut to the limits (the kept text, the original's bytes, its lines), or None: within them."""
    lines = text.count("\n") + (not text.endswith("\n")) if text else 0
    if lines <= HEAD_LINES + TAIL_LINES and (len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))) <= MAX_BYTES:
        return None
    data = text.encode("utf-8", "surrogatepass")
    room = ROOM if len(data) > MAX_BYTES else len(data)
    head, tail = _head(data, room), _tail(data, room)
    kept = head.count(b"\n") + tail.count(b"\n")
    mid = f"[... omitted {lines - kept:,} of {lines:,} lines ...]\n".encode()
    return (head + mid + tail).decode("utf-8", "surrogatepass"), data, lines


def _keep(data: bytes) -> tuple[str, bytes]:
    """The original's ref (sha256) and, the first time this process sees it, its compressed bytes."""
    global _ZSTD
    ref = hashlib.sha256(data).hexdigest()
    if ref in _SEEN:
        return ref, b""
    _SEEN.add(ref)
    if _ZSTD is None:
        import zstandard

        _ZSTD = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return ref, _ZSTD.compress(data)


def _truncate(args: tuple[str, int, int]) -> tuple[int, int]:
    import orjson

    path, start, end = args
    cut_n = kept = 0
    for line in _lines(path, start, end):
        for m in orjson.loads(line).get("messages") or ():
            text = m.get("content") if m.get("role") == "tool" else None
            if isinstance(text, str) and (c := _cut(text)) is not None:
                kept += len(_keep(c[1])[1])
                cut_n += 1
    return cut_n, kept


def _style(raw: bytes) -> tuple[tuple[str, str], bool]:
    """The separators (read after the record's first key) and whether non-ASCII is escaped."""
    i = raw.find(b'":')
    key_sep = ": " if i >= 0 and raw[i + 2 : i + 3] == b" " else ":"
    return ((", " if key_sep == ": " else ","), key_sep), key_sep == ": " and raw.isascii()


def _truncate_write(args: tuple[str, int, int, str]) -> tuple[int, int]:
    import orjson

    path, start, end, out_dir = args
    cut_n = written = 0
    base = os.path.join(out_dir, str(start))
    with open(base + ".part", "wb") as out, open(base + ".pack", "wb") as pack, open(base + ".index", "wb") as index:
        for lineno, line in enumerate(_lines(path, start, end)):
            raw = line.rstrip(b"\n")
            rec = orjson.loads(raw)
            changed = False
            for k, m in enumerate(rec.get("messages") or ()):
                text = m.get("content") if m.get("role") == "tool" else None
                if not isinstance(text, str) or (c := _cut(text)) is None:
                    continue
                kept, data, lines = c
                ref, blob = _keep(data)
                if blob:
                    pack.write(blob)
                index.write(b"%d %d %s %d %d\n" % (lineno, k, ref.encode(), len(data), lines))
                m["content"] = (kept + f"\n[output cut: {lines:,} lines, {len(data):,} bytes; kept "
                                f"{len(kept.encode('utf-8', 'surrogatepass')):,} bytes. Full output: ref={ref}]")
                changed = True
                cut_n += 1
            if changed:
                seps, ascii_ = _style(raw)
                if seps == (",", ":") and not ascii_:
                    raw = orjson.dumps(rec)
                else:
                    raw = json.dumps(rec, separators=seps, ensure_ascii=ascii_).encode("utf-8", "surrogatepass")
            out.write(raw)
            out.write(b"\n")
            written += len(raw) + 1
    return cut_n, written


_COUNT: Any = None  # loaded once, before the workers are forked (they share it)


def _tokens(args: tuple[str, int, int]) -> tuple[int, int]:
    import orjson

    from bench.peers import openai_texts

    count = _COUNT
    total = 0
    for line in _lines(*args):
        total += sum(count(x) for x in openai_texts(orjson.loads(line)))
    return total, 0


FLOORS: dict[str, Any] = {"truncate": _truncate, "truncate_write": _truncate_write, "tokens": _tokens}


def main(name: str, path: str, out: str | None = None) -> None:
    """``out``: where ``truncate_write`` writes (left there: the caller removes it untimed); else a
    temporary directory of /dev/shm removed at the end."""
    global _COUNT
    if name == "tokens":
        from ctxtool.tokens.backends import exact_counter

        _COUNT = exact_counter("o200k_base").count
    size, n = os.path.getsize(path), os.cpu_count() or 1
    k = n * 4  # shares of the file: several per process, so none waits on the last one
    shares: list[tuple[Any, ...]] = [(path, size * i // k, size * (i + 1) // k) for i in range(k)]
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None) as tmp:
        if name == "truncate_write":
            shares = [(*s, out or tmp) for s in shares]
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork")) as ex:
            parts = list(ex.map(FLOORS[name], shares))
    print(sum(a for a, _ in parts), sum(b for _, b in parts))


if __name__ == "__main__":
    main(*sys.argv[1:4])
