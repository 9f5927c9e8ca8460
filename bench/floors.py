"""Floors of `make bench` rows: the work no implementation can skip, as a whole process.

    python -m bench.floors truncate FILE   ->  the outputs cut and their original bytes
    python -m bench.floors tokens FILE     ->  the o200k_base tokens of every text

One process per core, each over its share of the records (a plain chat dataset, one record
per line), parsed with orjson.

``truncate``: cut each tool output with ctxtool's own rule (``toolout.truncate_text``, seed
004's limits) and, for each output cut, hash and compress the original it keeps
(``hashlib.sha256``, ``ctxtool.cache.content.compress``: what a ref holds). No transcript
model, no stash, no output written: ``stats`` over the same file divided by this process's
time is the best the truncate row could read.

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


_COUNT: Any = None  # loaded once, before the workers are forked (they share it)


def _tokens(args: tuple[str, int, int]) -> tuple[int, int]:
    import orjson

    from bench.peers import openai_texts

    count = _COUNT
    total = 0
    for line in _lines(*args):
        total += sum(count(x) for x in openai_texts(orjson.loads(line)))
    return total, 0


FLOORS = {"truncate": _truncate, "tokens": _tokens}


def main(name: str, path: str) -> None:
    global _COUNT
    if name == "tokens":
        from ctxtool.tokens.backends import exact_counter

        _COUNT = exact_counter("o200k_base").count
    size, n = os.path.getsize(path), os.cpu_count() or 1
    k = n * 4  # shares of the file: several per process, so none waits on the last one
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork")) as ex:
        parts = list(ex.map(FLOORS[name], [(path, size * i // k, size * (i + 1) // k) for i in range(k)]))
    print(sum(a for a, _ in parts), sum(b for _, b in parts))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
