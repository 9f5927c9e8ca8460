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


def _plain_chat(msgs: object) -> list[dict] | None:  # type: ignore[type-arg]
    """The messages as plain chat every peer reads: each content as its text (text parts
    joined; images and other parts left out), tool calls whose arguments are a JSON object,
    tool results with their call's id. None when a message cannot be put so (the record is
    left out)."""
    if not isinstance(msgs, list) or not msgs:
        return None
    out = []
    for m in msgs:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            return None
        c = m.get("content")
        if isinstance(c, list):
            c = "\n".join(p["text"] for p in c if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
        elif not isinstance(c, str):
            c = ""
        msg: dict = {"role": m["role"], "content": c}  # type: ignore[type-arg]
        calls = []
        for tc in m.get("tool_calls") or ():
            try:
                fn = tc["function"]
                if not isinstance(json.loads(fn["arguments"]), dict):
                    return None
            except (KeyError, TypeError, ValueError):
                return None
            calls.append({"id": tc.get("id"), "type": "function", "function": {"name": fn["name"], "arguments": fn["arguments"]}})
        if calls:
            msg["tool_calls"] = calls
        if m["role"] == "tool":
            if not isinstance(m.get("tool_call_id"), str):
                return None
            msg["tool_call_id"] = m["tool_call_id"]
        out.append(msg)
    return out


def from_corpus(path: Path, corpus: Path, target_bytes: int) -> Path | None:
    """A dataset shaped like real sessions: every transcript of the shared corpus converted
    to OpenAI chat records (``ctxtool.convert_file(..., to="openai")``), one per line, the
    list repeated (each copy with its own id) until the file reaches ``target_bytes``.
    None when the corpus is absent or gives no record (reused when already there)."""
    if path.exists() and path.stat().st_size >= target_bytes:
        return path
    if not corpus.is_dir():
        return None
    import tempfile

    import orjson

    from ctxtool import convert_file
    from ctxtool.errors import CtxtoolError

    pool: list[dict] = []  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as d:
        for k, src in enumerate(sorted(p for p in corpus.rglob("*") if p.suffix in (".jsonl", ".json", ".traj"))):
            out = Path(d) / f"{k}.jsonl"
            try:
                convert_file(str(src), str(out), "openai")
            except CtxtoolError:
                continue  # a file that is not a transcript (or not convertible): not in the dataset
            data = out.read_bytes()
            try:  # a JSON document (the source was one), else JSON Lines
                recs = orjson.loads(data)
                recs = recs if isinstance(recs, list) else [recs]
            except orjson.JSONDecodeError:
                recs = [orjson.loads(line) for line in data.splitlines() if line.strip()]
            for rec in recs:
                msgs = _plain_chat(rec.get("messages")) if isinstance(rec, dict) else None
                if msgs:
                    pool.append({"id": f"{src.stem}-{len(pool)}", "messages": msgs})
    if not pool:
        return None
    print(f"  {path.name}: {len(pool)} corpus sessions and records, repeated", flush=True)
    lines = [orjson.dumps(r) + b"\n" for r in pool]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    written = 0
    with tmp.open("wb") as f:
        i = 0
        while written < target_bytes:
            line = lines[i % len(lines)].replace(b'"id":"', f'"id":"c{i // len(lines)}-'.encode(), 1)
            f.write(line)
            written += len(line)
            i += 1
    tmp.replace(path)
    return path
