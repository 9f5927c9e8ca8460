"""The peers of `make bench`: what a user would pick instead of ctxtool, timed on the same file.

Run by bench/run.py in the bench-only environment (.venv-bench, from
bench/requirements-peers.lock), never in the test environment: it imports no ctxtool.
Offline: litellm reads its bundled cost map (LITELLM_LOCAL_MODEL_COST_MAP=True) and tiktoken
its BPE files from TIKTOKEN_CACHE_DIR (ctxtool's verified copies, set by bench/run.py).

    python bench/peers.py NAME FILE REPEAT   ->  {"name": ..., "times": [loop seconds, ...], "result": ...}
    python bench/peers.py NAME FILE whole    ->  the loop once, cold: timed from outside as a whole process

Each time is the loop alone (the file parsed record by record inside it; imports and
warm-up outside), as the peer's user would run it. The LangChain and litellm loops are those
of the standalone scripts bench/peer_*.py (imported from them: this file runs from bench/),
which `make bench` also times as whole processes. ``whole``: the process runs the loop
once after its imports (and, for ``tiktoken_loop``, loading the encoding), as a user's
script would; bench/run.py times it from outside, start-up included.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def records(path: str) -> Any:
    import orjson

    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                yield orjson.loads(line)


def orjson_loop(path: str) -> int:
    """Parse each line, sum the content lengths: the parse limit."""
    import orjson

    total = 0
    with open(path, "rb") as f:
        for line in f:
            rec = orjson.loads(line)
            for m in rec["messages"]:
                c = m.get("content")
                if isinstance(c, str):
                    total += len(c)
    return total


def openai_texts(rec: dict[str, Any]) -> list[str]:
    """The texts of an OpenAI chat record that occupy context, as ctxtool counts them:
    content, reasoning, each call's name and arguments."""
    out: list[str] = []
    for m in rec["messages"]:
        for key in ("reasoning_content", "content"):
            c = m.get(key)
            if isinstance(c, str) and c:
                out.append(c)
        for tc in m.get("tool_calls") or ():
            fn = tc.get("function") or {}
            out.extend(x for x in (fn.get("name"), fn.get("arguments")) if isinstance(x, str) and x)
    return out


_ENC: Any = None


def tiktoken_loop(path: str) -> int:
    """One tiktoken thread (o200k_base) over every text of every record: the exact baseline."""
    global _ENC
    if _ENC is None:
        import tiktoken

        _ENC = tiktoken.get_encoding("o200k_base")
    enc = _ENC
    return sum(len(enc.encode_ordinary(x)) for rec in records(path) for x in openai_texts(rec))


def lc_count(path: str) -> int:
    """LangChain's count_tokens_approximately over each record's messages (bench/peer_lc_count.py)."""
    from peer_lc_count import count

    return count(path)


def lc_trim(path: str) -> int:
    """LangChain's trim_messages: the last 8,000 tokens (approximate counter) of each record,
    nothing written (bench/peer_lc_trim.py)."""
    from peer_lc_trim import trim

    return trim(path)


def litellm_count(path: str) -> int:
    """litellm's token_counter (exact, gpt-4o: o200k_base) over each record's messages
    (bench/peer_litellm_count.py)."""
    from peer_litellm_count import count

    return count(path)


PEERS: dict[str, Callable[[str], int]] = {
    "orjson_loop": orjson_loop,
    "tiktoken_loop": tiktoken_loop,
    "lc_count": lc_count,
    "lc_trim": lc_trim,
    "litellm_count": litellm_count,
}


def main() -> int:
    name, path = sys.argv[1], sys.argv[2]
    fn = PEERS[name]
    if sys.argv[3] == "whole":
        print(json.dumps({"name": name, "result": fn(path)}))
        return 0
    repeat = int(sys.argv[3])
    fn(path)  # warm: imports, page cache, lazy tables
    times = []
    result = 0
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn(path)
        times.append(time.perf_counter() - t)
    print(json.dumps({"name": name, "times": times, "result": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
