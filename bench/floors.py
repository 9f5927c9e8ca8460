"""Floors of `make bench` rows: the work no implementation can skip, as a whole process.

    python -m bench.floors truncate FILE          ->  the outputs cut and their original bytes
    python -m bench.floors truncate_write FILE    ->  the same, and the bytes written
    python -m bench.floors tokens FILE            ->  the o200k_base tokens of every text

One process per core, each over its share of the records (a plain chat dataset, one record
per line), parsed with orjson.

``truncate``: cut each tool output with ctxtool's own rule (``toolout.truncate_text``, seed
004's limits) and, for each output cut, hash and compress the original it keeps
(``hashlib.sha256``, ``ctxtool.cache.content.compress``: what a ref holds). No transcript
model, no stash, no output written: ``stats`` over the same file divided by this process's
time is the best the truncate row could read.

``truncate_write``: ``truncate`` and the writes truncate must do (issue 37), still without a
transcript model: each record with an output cut written again in its source's style
(:func:`ctxtool.io.jsontext.encode`, the style read from its bytes: the encoder truncate's
writer uses), the cut outputs in it with their notice, a record with none cut copied as read;
each original compressed into one pack per process (what the cache holds), each changed
record's messages with their cut texts left out hashed and compressed (what a stash holds for
restore: its source), one output part and one pack file per process, under a temporary
directory of /dev/shm where it exists (no fsync, no join of the parts: fewer writes than
truncate's, so still a floor).

``tokens``: count every text ctxtool counts (bench/peers.py ``openai_texts``) with the exact
counter ``stats --tokenizer o200k_base`` uses (:func:`ctxtool.tokens.backends.exact_counter`,
loaded once per process): no transcript model, no report. A peer's loop time divided by this
process's time is the best an exact count could read against it.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any


def _lines(path: str, start: int, end: int) -> Iterator[bytes]:
    """The lines that start in [start, end) (the one that crosses ``start`` belongs to the share before)."""
    with open(path, "rb") as fh:
        if start:
            fh.seek(start - 1)
            fh.readline()
        while fh.tell() < end:
            line = fh.readline()
            if not line:
                break
            yield line


def _truncate(args: tuple[str, int, int]) -> tuple[int, int]:
    import orjson

    from ctxtool.cache.content import compress
    from ctxtool.tool_outputs.algorithms import PRESETS, truncate_text

    path, start, end = args
    limits = PRESETS.get("head-tail")
    cut = kept = 0
    for line in _lines(path, start, end):
        for m in orjson.loads(line).get("messages") or ():
            text = m.get("content") if m.get("role") == "tool" else None
            if isinstance(text, str) and truncate_text(text, limits).changed:
                data = text.encode("utf-8", "surrogatepass")
                hashlib.sha256(data).hexdigest()
                compress(data)
                cut += 1
                kept += len(data)
    return cut, kept


def _truncate_write(args: tuple[str, int, int, str]) -> tuple[int, int]:
    import orjson

    from ctxtool.cache.content import compress
    from ctxtool.io import jsontext
    from ctxtool.tool_outputs.algorithms import PRESETS, truncate_text, truncation_notice, with_notice

    path, start, end, out_dir = args
    limits = PRESETS.get("head-tail")
    cut_n = written = 0
    pack = bytearray()
    with open(os.path.join(out_dir, f"{start}.part"), "wb") as out:
        for line in _lines(path, start, end):
            raw = line.rstrip(b"\n")
            rec = orjson.loads(raw)
            stash = []
            for m in rec.get("messages") or ():
                text = m.get("content") if m.get("role") == "tool" else None
                if not isinstance(text, str):
                    continue
                cut = truncate_text(text, limits)
                if not cut.changed:
                    continue
                data = text.encode("utf-8", "surrogatepass")
                ref = hashlib.sha256(data).hexdigest()
                pack += compress(data)
                m["content"] = with_notice(cut.text, truncation_notice(cut, ref, len(text) // 4))
                stash.append({k: v for k, v in m.items() if k != "content"})
                cut_n += 1
            if stash:
                blob = orjson.dumps(stash)
                hashlib.sha256(blob).hexdigest()
                pack += compress(blob)
                raw = jsontext.encode(rec, jsontext.Style.detect(raw))
            out.write(raw)
            out.write(b"\n")
            written += len(raw) + 1
    with open(os.path.join(out_dir, f"{start}.pack"), "wb") as fh:
        fh.write(pack)
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


def main(name: str, path: str) -> None:
    global _COUNT
    if name == "tokens":
        from ctxtool.tokens.backends import exact_counter

        _COUNT = exact_counter("o200k_base").count
    size, n = os.path.getsize(path), os.cpu_count() or 1
    k = n * 4  # shares of the file: several per process, so none waits on the last one
    shares: list[tuple[Any, ...]] = [(path, size * i // k, size * (i + 1) // k) for i in range(k)]
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None) as out_dir:
        if name == "truncate_write":
            shares = [(*s, out_dir) for s in shares]
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork")) as ex:
            parts = list(ex.map(FLOORS[name], shares))
    print(sum(a for a, _ in parts), sum(b for _, b in parts))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
