"""Deterministic generated datasets for the benchmarks (OpenAI chat records, JSONL)."""

from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = (
    "the agent reads file config parser error stack trace test passed failed build module import function "
    "return value string list dict token context window compaction summary tool output line column python "
    "typescript rust go handler request response cache index query schema migration deploy docker kubernetes"
).split()


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def _file_dump(rng: random.Random, lines: int) -> str:
    out = []
    for i in range(lines):
        indent = "    " * rng.randint(0, 3)
        out.append(f"{i + 1:>5}\t{indent}{_text(rng, rng.randint(2, 12))}")
    return "\n".join(out)


def record(rng: random.Random, i: int) -> dict:  # type: ignore[type-arg]
    msgs: list[dict] = [  # type: ignore[type-arg]
        {"role": "system", "content": "You are a coding agent. " + _text(rng, 150)},
        {"role": "user", "content": "Please fix: " + _text(rng, rng.randint(10, 60))},
    ]
    for turn in range(rng.randint(2, 7)):
        calls = []
        for k in range(rng.randint(1, 3)):
            cid = f"call_{i}_{turn}_{k}"
            tool = rng.choice(["read_file", "bash", "grep", "edit_file"])
            calls.append({"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps({"path": f"src/{_text(rng, 1)}.py", "q": _text(rng, 3)})}})
        msgs.append({"role": "assistant", "content": _text(rng, rng.randint(5, 40)), "tool_calls": calls})
        for c in calls:
            size = rng.choice([5, 20, 60, 200, 400])
            msgs.append({"role": "tool", "tool_call_id": c["id"], "content": _file_dump(rng, size)})
    msgs.append({"role": "assistant", "content": "Done. " + _text(rng, rng.randint(20, 80))})
    return {"id": f"rec-{i}", "messages": msgs, "reward": rng.random(), "split": "train"}


def generate(path: Path, target_bytes: int, seed: int = 7) -> Path:
    """Write records until the file reaches ``target_bytes`` (reused when already there)."""
    if path.exists() and path.stat().st_size >= target_bytes:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    pool = [json.dumps(record(rng, i)) + "\n" for i in range(400)]
    written = 0
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        i = 0
        while written < target_bytes:
            line = pool[i % len(pool)].replace('"rec-', f'"r{i}-', 1)
            f.write(line)
            written += len(line)
            i += 1
    tmp.replace(path)
    return path
