"""make_transform (seed 002) in an actual agent loop: archive, agent view, cut, window."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import ctxtool.agent.transform as tr
from ctxtool.agent.transform import make_transform
from ctxtool.errors import CtxtoolError
from ctxtool.history.archive import visible_results
from ctxtool.history.pairing import pair
from ctxtool.model import KIND_COMPACTION_SUMMARY, KIND_TOOL_SUMMARY, Block, Message, Usage


class FakeModel:
    """Answers with 1-2 tool calls for ``steps`` calls, then a final text; records what it saw."""

    def __init__(self, steps: int, seed: int = 0, usage: bool = False) -> None:
        self.steps = steps
        self.calls = 0
        self.seen: list[list[Message]] = []
        self.rng = random.Random(seed)
        self.usage = usage

    def __call__(self, context: Sequence[Message]) -> Message:
        self.seen.append(list(context))
        self.calls += 1
        if self.calls > self.steps:
            return Message("assistant", [Block("text", text="All done.")])
        n = self.rng.choice([1, 1, 2])
        blocks = [Block("text", text=f"step {self.calls}")] + [
            Block("tool_call", id=f"t{self.calls}_{k}", name=self.rng.choice(["read", "bash"]),
                  arguments={"command": f"cat file{self.calls}_{k}"})
            for k in range(n)
        ]
        m = Message("assistant", blocks)
        if self.usage:
            chars = sum(x.chars() for x in context)
            m.usage = Usage(input=chars // 4, output=20)
        return m


def run_tool(call: Block) -> str:
    return f"output of {call.arguments['command']}\n" + "line\n" * (50 + len(call.id or "") * 20)


def check_context(sent: list[Message]) -> None:
    """What an API would demand of a request: every call answered, every result called."""
    p = pair(sent)
    assert not p.orphans
    assert not p.unanswered()
    assert all(m.agent_visible for m in sent)


def agent_loop(transform: tr.ContextTransform, model: FakeModel) -> list[Message]:
    history = [
        Message("system", [Block("text", text="You are a coding agent.")]),
        Message("user", [Block("text", text="Fix the failing test.")]),
    ]
    while True:
        snapshot = [(id(m), m.metadata.to_json(), m.dirty, len(m.content)) for m in history]
        sent = transform(history)
        assert [(id(m), m.metadata.to_json(), m.dirty, len(m.content)) for m in history] == snapshot
        check_context(sent)
        reply = model(sent)
        history.append(reply)
        calls = reply.tool_calls()
        if not calls:
            return history
        for c in calls:
            history.append(Message("tool", [Block("tool_result", id=c.id, text=run_tool(c))]))


def test_loop_with_archiving() -> None:
    t = make_transform(tool_call_cutoff=4, max_messages=None, max_chars=None)
    model = FakeModel(steps=25)
    history = agent_loop(t, model)
    assert model.calls == 26
    assert sum(len(m.tool_results()) for m in history) > 25
    for sent in model.seen[6:]:
        assert visible_results(sent) <= 4
        assert sent[-1].metadata.kind == KIND_TOOL_SUMMARY
    assert t.last is not None and t.last.archived > 0 and t.last.stripped_calls > 0
    assert "archive" in t.last.actions
    # the full history keeps every message untouched
    assert all(m.agent_visible and not m.dirty for m in history)
    assert t.events.count("tool_summary") > 0


def test_loop_with_window_bounds() -> None:
    t = make_transform(max_messages=12, max_chars=6000, warn_on_truncation=False)
    model = FakeModel(steps=30, seed=3)
    agent_loop(t, model)
    for sent in model.seen:
        body = [m for m in sent if m.role != "system"]
        assert len(body) <= 12
        assert sent[0].role == "system"
        assert any(m.role == "user" and m.text() == "Fix the failing test." for m in sent)  # keep_first_user
    assert any(s.dropped for s in t.steps)
    assert t.events.count("truncated") == sum(1 for s in t.steps if s.dropped)


def test_loop_with_cut_and_summarizer() -> None:
    seen: list[int] = []

    def compact(msgs: Sequence[Message]) -> str:
        seen.append(len(msgs))
        return "The agent read many files."

    t = make_transform(context_window=4000, reserve_tokens=1000, keep_recent_tokens=800,
                       compact_summarize=compact, max_messages=None, max_chars=None)
    model = FakeModel(steps=30, seed=5, usage=True)
    agent_loop(t, model)
    assert seen, "the cut never happened"
    cut_steps = [s for s in t.steps if s.cut]
    assert cut_steps
    sent = model.seen[-1]
    summ = [m for m in sent if m.metadata.kind == KIND_COMPACTION_SUMMARY]
    assert len(summ) == 1 and summ[0].text().startswith(tr.COMPACTION_PREFIX)
    assert "The agent read many files." in summ[0].text()
    assert sent[0].role == "system"


def test_all_policies_together() -> None:
    t = make_transform(tool_call_cutoff=3, context_window=6000, reserve_tokens=1000, max_messages=20,
                       max_chars=20_000, strategy="bookends", warn_on_truncation=False)
    model = FakeModel(steps=40, seed=11)
    agent_loop(t, model)
    assert {a for s in t.steps for a in s.actions} >= {"archive"}
    assert all(s.messages_out <= s.messages_in + 2 for s in t.steps)


def test_agent_view_strips_calls_of_hidden_results() -> None:
    from ctxtool.model import Metadata

    msgs = [
        Message("user", [Block("text", text="go")]),
        Message("assistant", [Block("tool_call", id="a", name="x", arguments={}), Block("tool_call", id="b", name="y", arguments={})]),
        Message("tool", [Block("tool_result", id="a", text="A")], metadata=Metadata(agent_visible=False)),
        Message("tool", [Block("tool_result", id="b", text="B")]),
        Message("assistant", [Block("tool_call", id="c", name="z", arguments={})]),
        Message("tool", [Block("tool_result", id="c", text="C")], metadata=Metadata(agent_visible=False)),
    ]
    view, hidden, stripped = tr.agent_view(msgs)
    assert hidden == 2 and stripped == 2
    assert [m.role for m in view] == ["user", "assistant", "tool"]
    assert [b.id for b in view[1].content] == ["b"] and view[1] is not msgs[1]
    assert len(msgs[1].content) == 2
    check_context(view)


def test_bad_options() -> None:
    with pytest.raises(CtxtoolError):
        make_transform(tool_summary_strategy="magic")
    with pytest.raises(CtxtoolError):
        make_transform(strategy="random")
    with pytest.raises(CtxtoolError):
        make_transform(tool_call_cutoff=-1)


def test_the_documented_agent_loop_runs_and_does_what_the_docs_say() -> None:
    """docs/replay.md's agent loop, run as written, with a model that makes one ``pytest`` call
    a turn: the figures the page quotes are the ones it produces."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "replay.md").read_text(encoding="utf-8")
    code = next(b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "make_transform(" in b)
    calls: list[int] = []

    def call_model(context: Sequence[Message]) -> Message:
        check_context(list(context))
        calls.append(len(context))
        return Message("assistant", [Block("tool_call", id=f"c{len(calls)}", name="bash",
                                           arguments={"command": "pytest"})])

    ns: dict[str, Any] = {"call_model": call_model,
                          "run_tool": lambda c: "collected 3 items\n" + "tests/test_x.py ...\n" * 40 + "3 passed"}
    exec(compile(code, "docs/replay.md", "exec"), ns)  # noqa: S102
    d = ns["transform"].last.to_json()
    assert len(ns["history"]) == 26 and len(calls) == 12 and calls[-1] == 11
    assert (d["messages_in"], d["messages_out"], d["archived"], d["stripped_calls"], d["actions"]) == (
        24, 11, 7, 7, ["archive"])
    assert '"messages_in": 24, "messages_out": 11, "archived": 7, "stripped_calls": 7' in page


def test_size_and_warning_events_seed002() -> None:
    """Seed 002 telemetry: ``size`` on every call (estimate_size), ``warning`` with level
    ``warning``/``critical`` once check_size's character thresholds are reached."""
    from ctxtool.policies.settings import PolicySettings

    t = make_transform(max_messages=None, max_chars=None,
                       settings=PolicySettings(warning_chars=3000, critical_chars=9000))
    model = FakeModel(steps=30, seed=3)
    agent_loop(t, model)
    sizes = [e for e in t.events.events if e["event"] == "size"]
    assert len(sizes) == model.calls == len(t.steps)
    assert all(e["has_system_prompt"] is True for e in sizes)
    assert [e["message_count"] for e in sizes] == [s.messages_in for s in t.steps]
    assert sizes == sorted(sizes, key=lambda e: e["char_count"])  # the history only grows
    warnings = [e for e in t.events.events if e["event"] == "warning"]
    expected = [e["char_count"] for e in sizes if e["char_count"] >= 3000]
    assert [w["char_count"] for w in warnings] == expected and expected
    for w in warnings:
        critical = w["char_count"] >= 9000
        assert w["level"] == ("critical" if critical else "warning")
        assert w["threshold"] == (9000 if critical else 3000)
    assert {w["level"] for w in warnings} == {"warning", "critical"}
    # defaults (200,000 / 400,000 chars): a small session only reports its size
    t2 = make_transform()
    agent_loop(t2, FakeModel(steps=3))
    assert t2.events.count("size") == len(t2.steps) and t2.events.count("warning") == 0
