"""The stats fast path (ctxtool.stats.fast) gives the figures of the full model, to the last
field: on every sample and corpus file, on generated datasets, serial and split across
processes, heuristic and exact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import all_transcript_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool.errors import CtxtoolError
from ctxtool.stats import transcript as stats
from ctxtool.stats.fast import TALLY_KEY, tally_openai
from ctxtool.stats.files import stats_files


def both(paths: list[str], **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    fast = stats_files(paths, fast=True, **kw).to_json()
    full = stats_files(paths, fast=False, **kw).to_json()
    return fast, full


@pytest.mark.parametrize("path", all_transcript_params())
def test_fast_equals_full_on_every_file(path: Path) -> None:
    fast, full = both([str(path)], on_error="skip", workers=1)
    assert fast == full


@pytest.mark.parametrize("path", [p for p in all_transcript_params() if p.values[0].suffix == ".jsonl"])
def test_fast_equals_full_exact(path: Path) -> None:
    if path.stat().st_size > 3_000_000:
        pytest.skip("exact counting of a large file: the heuristic test covers its structure")
    fast, full = both([str(path)], on_error="skip", workers=1, tokenizer="o200k_base")
    assert fast == full


# -- generated OpenAI datasets: records the tally takes and records it must leave alone -----

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40) | st.sampled_from(
    ["", " ", "<system-reminder>x", "[Previous conversation summary]\nold", "line\nline\n", "# AGENTS.md\nrules"]
)
ID = st.sampled_from(["c1", "c2", "c3", ""]) | st.none()


@st.composite
def message(draw: Any) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"]))
    m: dict[str, Any] = {"role": role}
    if draw(st.booleans()) or role != "assistant":
        m["content"] = draw(TEXT | st.none() | st.just([{"type": "text", "text": "part"}]))
    if role == "assistant" and draw(st.booleans()):
        m["tool_calls"] = [
            {"id": draw(ID), "type": "function",
             "function": {"name": draw(st.sampled_from(["bash", "read", ""]) | st.none()),
                          "arguments": draw(TEXT | st.just({"path": "a"}) | st.none())}}
            for _ in range(draw(st.integers(0, 3)))
        ]
        m.setdefault("content", None)
    if role == "tool":
        m["tool_call_id"] = draw(ID)
        if draw(st.booleans()):
            m["name"] = draw(st.sampled_from(["bash", "read"]))
    if role == "assistant" and draw(st.integers(0, 4)) == 0:
        m["reasoning_content"] = draw(TEXT | st.just(7))
    extra = draw(st.sampled_from([None, None, None, "id", "usage", "model", "timestamp", "weight", "ctxtool"]))
    if extra == "id":
        m["id"] = draw(st.sampled_from(["m1", "m2"]))
    elif extra == "usage":
        m["usage"] = {"prompt_tokens": draw(st.integers(0, 5000)), "completion_tokens": 10}
    elif extra == "model":
        m["model"] = draw(st.sampled_from(["gpt-4o", "claude-sonnet-4-5", "nope"]))
    elif extra == "timestamp":
        m["timestamp"] = "2025-01-02T03:04:05Z"
    elif extra == "weight":
        m["weight"] = 1
    elif extra == "ctxtool":
        m["ctxtool"] = {"agent_visible": False}
    return m


RECORD = st.fixed_dictionaries(
    {"messages": st.lists(message(), min_size=1, max_size=8)},
    optional={"id": st.sampled_from(["r", "", 3]), "system": st.just("sys"), "model": st.just("gpt-4o")},
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(RECORD, min_size=1, max_size=6), st.sampled_from(["heuristic", "o200k_base"]))
def test_fast_equals_full_on_generated_datasets(tmp_path: Path, records: list[dict[str, Any]], tokenizer: str) -> None:
    first = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    p = tmp_path / "gen.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in [first, *records]) + "\n")
    fast, full = both([str(p)], on_error="skip", workers=1, tokenizer=tokenizer)
    assert fast == full


def test_split_across_processes_equals_full(tmp_path: Path) -> None:
    rng_records = []
    for i in range(200):
        msgs: list[dict[str, Any]] = [{"role": "system", "content": "s" * (i % 7)}, {"role": "user", "content": f"task {i}"}]
        for k in range(i % 4):
            msgs.append({"role": "assistant", "content": None,
                         "tool_calls": [{"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]})
            msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": "out\n" * (i + k)})
        if i % 5 == 0:
            msgs[-1]["usage"] = {"prompt_tokens": 100, "completion_tokens": 5}  # a record the tally leaves to the model
        rng_records.append({"id": f"r{i}", "messages": msgs})
    p = tmp_path / "ds.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rng_records) + "\n\n")
    for tokenizer in ("heuristic", "o200k_base"):
        fast = stats_files([str(p)], workers=2, tokenizer=tokenizer).to_json()
        full = stats_files([str(p)], workers=1, fast=False, tokenizer=tokenizer).to_json()
        assert fast == full


def test_the_tally_takes_plain_records_and_leaves_the_rest() -> None:
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None,
             "tool_calls": [{"id": "a", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "a", "content": "ok"}]
    tl = tally_openai(plain, exact=True)
    assert tl is not None and tl.rows == ["user", "assistant", "tool"] and tl.chars == [2, 6, 2]
    assert tl.texts == [["hi"], ["bash", "{}"], ["ok"]]
    for odd in ({"usage": {"prompt_tokens": 1}}, {"model": "gpt-4o"}, {"timestamp": "2025-01-01T00:00:00Z"},
                {"content": [{"type": "text", "text": "x"}]}, {"ctxtool": {}}):
        assert tally_openai([{**plain[0], **odd}], exact=False) is None
    assert tally_openai([{"role": "tool", "content": "no call id"}], exact=False) is None
    assert TALLY_KEY == "stats_tally"


def test_threshold_levels_agree_with_the_policy() -> None:
    level = stats.threshold_levels(100, 200)
    for chars in (0, 99, 100, 101, 199, 200, 10**9):
        assert level(chars) == stats.threshold_level(chars, 100, 200)


def test_a_named_format_reads_what_detection_cannot(tmp_path: Path) -> None:
    # detection needs a message list; --format openai reads bare message lines all the same
    p = tmp_path / "odd.jsonl"
    p.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n')
    fast, full = both([str(p)], fmt="openai", workers=1)
    assert fast == full and fast["totals"]["messages"] == 2
    q = tmp_path / "none.jsonl"
    q.write_text('{"x": 1}\n')
    for fast_path in (True, False):
        with pytest.raises(CtxtoolError) as e:
            stats_files([str(q)], fast=fast_path, workers=1)
        assert "detect" in str(e.value)
