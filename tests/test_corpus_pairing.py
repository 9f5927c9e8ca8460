"""Issue 12's "done means", on every sample, real file and corpus file of a format whose calls
carry ids: the calls ctxtool answers are the ones an independent count of the raw JSON
answers; no operation leaves an orphan, an unanswered call it did not find, or (Claude Code,
pi) a parent link to a line that is not there; truncate then restore gives the input back.

The counts are written here from each format's public shape, without ctxtool's readers.
Formats whose calls pair by position (ShareGPT, Cline tags, SWE-agent thought/action,
mini-swe-agent) or that have their own counts (Inspect, ATIF, OpenHands, SWE-agent) are
checked in their own test files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import all_transcript_params, expected_format
from test_format_gemini import gemini_load
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.history.pairing import pair
from ctxtool.tool_outputs import files as tools_ops
from ctxtool.tool_outputs.algorithms import Limits

runner = CliRunner()
TIGHT = Limits(max_lines=10, max_bytes=1000, max_chars=1500, spill_threshold=40_000, max_line_length=200)


def _values(p: Path) -> list[Any]:
    raw = p.read_bytes()
    try:
        doc = json.loads(raw)
        return doc if isinstance(doc, list) else [doc]
    except ValueError:
        return [json.loads(x) for x in raw.splitlines() if x.strip()]


def _openai(msgs: Any, calls: list[str], results: list[str]) -> None:
    for m in msgs if isinstance(msgs, list) else []:
        if not isinstance(m, dict):
            continue
        calls += [tc["id"] for tc in m.get("tool_calls") or [] if isinstance(tc, dict) and tc.get("id")]
        if m.get("role") == "tool" and m.get("tool_call_id"):
            results.append(m["tool_call_id"])


def _anthropic(msgs: Any, calls: list[str], results: list[str]) -> None:
    for m in msgs if isinstance(msgs, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        for b in content if isinstance(content, list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_use":
                calls.append(b["id"])
            elif isinstance(b, dict) and b.get("type") == "tool_result":
                results.append(b["tool_use_id"])


def raw_calls_and_results(p: Path, fmt: str) -> tuple[list[str], list[str]] | None:
    """Call ids and result ids in file order, from the raw JSON (None: not counted here)."""
    vals = _values(p)
    calls: list[str] = []
    results: list[str] = []
    if fmt == "claude-code":
        for o in vals:
            if o.get("type") in ("user", "assistant") and isinstance(o.get("message"), dict):
                _anthropic([o["message"]], calls, results)
    elif fmt == "codex":
        for o in vals:
            pl = o.get("payload") if o.get("type") == "response_item" else None
            if isinstance(pl, dict) and pl.get("type") in ("function_call", "custom_tool_call", "local_shell_call"):
                calls.append(pl.get("call_id") or pl.get("id"))
            elif isinstance(pl, dict) and pl.get("type") in ("function_call_output", "custom_tool_call_output"):
                results.append(pl["call_id"])
    elif fmt == "pi":
        for o in vals:
            m = o.get("message") if o.get("type") == "message" else None
            if not isinstance(m, dict):
                continue
            if m.get("role") == "assistant":
                calls += [b["id"] for b in m.get("content") or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
            elif m.get("role") == "toolResult":
                results.append(m["toolCallId"])
    elif fmt == "responses":
        for o in vals:
            items = o.get("input") if isinstance(o.get("input"), list) else [o]
            for it in items:
                if it.get("type") == "function_call":
                    calls.append(it["call_id"])
                elif it.get("type") == "function_call_output":
                    results.append(it["call_id"])
    elif fmt == "gemini":
        for o in vals:
            for m in o["messages"]:
                for tc in m.get("toolCalls") or []:
                    calls.append(tc["id"])
                    if "result" in tc:
                        results.append(tc["id"])
    elif fmt == "gemini-jsonl":
        for m in gemini_load(p.read_bytes()):
            for tc in m.get("toolCalls") or []:
                calls.append(tc["id"])
                if "result" in tc:
                    results.append(tc["id"])
    elif fmt in ("openai", "anthropic"):
        count = _openai if fmt == "openai" else _anthropic
        for o in vals:
            if isinstance(o, dict) and "role" in o:
                count([o], calls, results)
                continue
            for key in ("messages", "traj", "conversations", "history", "trajectory", "chat", "dialog"):
                if isinstance(o, dict) and isinstance(o.get(key), list):
                    count(o[key], calls, results)
                    break
    else:
        return None
    if fmt == "openai" and not calls and not results:
        return None  # calls without ids (function_call / observation turns): paired by position
    return calls, results


def raw_answered(calls: list[str], results: list[str]) -> int:
    """Calls a result answers (each result answers one open call with its id; in every
    format counted here a call comes before its result)."""
    pending = list(calls)
    n = 0
    for r in results:
        if r in pending:
            pending.remove(r)
            n += 1
    return n


COUNTED = [p for p in all_transcript_params() if raw_calls_and_results(p.values[0], expected_format(p.values[0])) is not None]


@pytest.mark.parametrize("path", COUNTED)
def test_pairs_equal_an_independent_count(path: Path) -> None:
    fmt = expected_format(path)
    got = raw_calls_and_results(path, fmt)
    assert got is not None
    calls, results = got
    ts = list(formats.read(path))
    answered = sum(1 for t in ts for _, _, ri in pair(t.messages).pairs if ri is not None)
    assert answered == raw_answered(calls, results)
    ids = {b.id for t in ts for _, b, ri in pair(t.messages).pairs if ri is not None}
    assert ids == set(calls) & set(results)


def _parents_ok(p: Path, fmt: str) -> bool:
    """Every parent link names a line of the file (Claude Code ``parentUuid``, pi ``parentId``)."""
    vals = _values(p)
    key, own = ("parentUuid", "uuid") if fmt == "claude-code" else ("parentId", "id")
    have = {o.get(own) for o in vals if isinstance(o, dict)}
    return all(o.get(key) is None or o[key] in have for o in vals if isinstance(o, dict) and key in o)


OPERATIONS = [
    ["window", "--max-messages", "8"],
    ["window", "--max-messages", "8", "-s", "bookends"],
    ["cut", "--keep-recent", "4"],
    ["compact", "--force"],
    ["archive", "-n", "2"],
    ["repair"],
    ["truncate", "--max-lines", "5"],
    ["trim", "--budget", "800"],
]


@pytest.mark.parametrize("path", all_transcript_params())
def test_no_operation_breaks_pairs_or_parent_links(path: Path, tmp_path: Path) -> None:
    fmt = expected_format(path)
    ts = list(formats.read(path))
    before = sum(len(pair(t.messages).orphans) + len(pair(t.messages).unanswered()) for t in ts)
    links = fmt in ("claude-code", "pi") and _parents_ok(path, fmt)
    for op in OPERATIONS:
        out = tmp_path / (op[0] + path.suffix)
        extra = ["--cache-dir", str(tmp_path / "c")] if op[0] in ("truncate", "trim") else []
        r = runner.invoke(app, [*op, str(path), "-o", str(out), *extra])
        assert r.exit_code == 0, (op, r.output)
        got = list(formats.read(out))
        after = sum(len(pair(t.messages).orphans) + len(pair(t.messages).unanswered()) for t in got)
        assert after <= before, (op, after, before)
        if links:
            assert _parents_ok(out, fmt), op


#: spotter_ae4a77f8_main.jsonl holds a progress line between two continuation lines of one
#: message, re-linked while the message is cut: restore finds it by its source form
@pytest.mark.parametrize("path", all_transcript_params())
def test_truncate_then_restore_gives_the_input_back(path: Path, tmp_path: Path) -> None:
    short, back = tmp_path / ("short" + path.suffix), tmp_path / ("back" + path.suffix)
    tools_ops.truncate_file(str(path), str(short), limits=TIGHT, include="all", cache=tmp_path / "c")
    tools_ops.restore_file(str(short), str(back), cache=tmp_path / "c")
    assert _values(back) == _values(path)
