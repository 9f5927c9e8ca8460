"""The floor of the truncate row: the work no truncate can skip, as a whole process.

    python -m bench.floor_truncate FILE   ->  prints the outputs cut and their original bytes

One process per core, each over its share of the records (a plain chat dataset, one record
per line): parse every record (orjson), cut each tool output with ctxtool's own rule
(``toolout.truncate_text``, seed 004's limits) and, for each output cut, hash and compress
the original it keeps (``hashlib.sha256``, ``ctxtool.cache.content.compress``: what a ref
holds). Nothing else: no transcript model, no stash, no output written. ``stats`` over the
same file divided by this process's time is the best the truncate row could read.
"""

from __future__ import annotations

import hashlib
import os
import sys
from concurrent.futures import ProcessPoolExecutor


def _share(args: tuple[str, int, int]) -> tuple[int, int]:
    import orjson

    from ctxtool.cache.content import compress
    from ctxtool.toolout import PRESETS, truncate_text

    path, start, end = args
    limits = PRESETS["seed004"]
    cut = kept = 0
    with open(path, "rb") as fh:
        if start:
            fh.seek(start - 1)
            fh.readline()  # the line that crosses the start belongs to the share before
        while fh.tell() < end:
            line = fh.readline()
            if not line:
                break
            for m in orjson.loads(line).get("messages") or ():
                text = m.get("content") if m.get("role") == "tool" else None
                if isinstance(text, str) and truncate_text(text, limits).changed:
                    data = text.encode("utf-8", "surrogatepass")
                    hashlib.sha256(data).hexdigest()
                    compress(data)
                    cut += 1
                    kept += len(data)
    return cut, kept


def main(path: str) -> None:
    size, n = os.path.getsize(path), os.cpu_count() or 1
    with ProcessPoolExecutor(n) as ex:
        parts = list(ex.map(_share, [(path, size * k // n, size * (k + 1) // n) for k in range(n)]))
    print(sum(c for c, _ in parts), sum(b for _, b in parts))


if __name__ == "__main__":
    main(sys.argv[1])
