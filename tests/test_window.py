"""Seed 002 truncate: ctxtool.history.window."""

from __future__ import annotations

import pytest

from ctxtool.errors import CtxtoolError
from ctxtool.history.validate import check_messages
from ctxtool.history.window import plan_window, window, window_messages
from ctxtool.model import Block, Message, Transcript


def U(t="u", n=0):
    return Message("user", [Block("text", text=t + "x" * n)])


def A(t="a", n=0, calls=()):
    return Message("assistant", [Block("text", text=t + "x" * n)] + [Block("tool_call", id=c, name="f") for c in calls])


def R(c, n=0):
    return Message("tool", [Block("tool_result", id=c, text="r" + "x" * n)])


def S():
    return Message("system", [Block("text", text="sys" * 1000)])


def convo(turns=10):
    msgs = [S()]
    for i in range(turns):
        msgs += [U(f"u{i}"), A(f"a{i}", calls=(f"c{i}",)), R(f"c{i}"), A(f"done{i}")]
    return msgs


def test_within_limits_nothing_dropped():
    msgs = convo(3)
    kept, dropped = window_messages(msgs, max_messages=100)
    assert dropped == 0 and kept == msgs


def test_sliding_keeps_newest_first_user_and_system():
    msgs = convo(10)
    kept, dropped = window_messages(msgs, max_messages=9)
    assert kept[0] is msgs[0]  # system prompt
    assert kept[1] is msgs[1]  # first user
    assert kept[-1] is msgs[-1]
    non_system = [m for m in kept if m.role != "system"]
    assert len(non_system) <= 9
    assert check_messages(kept) == []
    assert dropped == len(msgs) - len(kept)
    # without keep_first_user the window is a pure suffix
    kept2, _ = window_messages(msgs, max_messages=9, keep_first_user=False)
    assert kept2[1:] == msgs[len(msgs) - len(kept2) + 1:]


def test_pairs_kept_or_dropped_together():
    msgs = [U(), A(calls=("a", "b")), R("a"), R("b"), A("end")]
    for limit in range(1, 6):
        kept, _ = window_messages(msgs, max_messages=limit, keep_first_user=False)
        assert check_messages(kept) == []


def test_max_chars():
    msgs = [U(n=100), A(n=100), U(n=100), A(n=100), U(n=10), A(n=10)]
    kept, dropped = window_messages(msgs, max_chars=250, keep_first_user=False)
    assert sum(m.chars() for m in kept) <= 250
    assert kept == msgs[2:] or kept == msgs[4:]


def test_newest_unit_over_limit_is_kept_and_flagged():
    msgs = [U(), A(), U(n=1000)]
    keep, kept_first, over = plan_window(msgs, max_chars=100, keep_first_user=False)
    assert keep == [False, False, True] and over


def test_bookends_keeps_head_and_tail():
    msgs = [U(f"u{i}") if i % 2 == 0 else A(f"a{i}") for i in range(20)]
    kept, dropped = window_messages(msgs, strategy="bookends", max_messages=6)
    assert kept[:3] == msgs[:3] and kept[3:] == msgs[-3:]
    assert dropped == 14


def test_window_on_transcript_reports_counts():
    msgs = convo(10)
    t = Transcript("openai", entries=list(msgs))
    r = window(t, max_messages=9)
    assert r.dropped == len(msgs) - len(t.messages)
    assert r.messages_before == 40 and r.messages_after == r.messages_before - r.dropped
    assert r.dropped_tool_calls == r.dropped_tool_results > 0
    assert r.kept_first_user
    assert not any(m.dirty for m in t.messages)
    assert r.to_json()["strategy"] == "sliding"


def test_bad_strategy():
    with pytest.raises(CtxtoolError):
        window_messages([U()], strategy="random")
    assert window_messages([U()] * 3, strategy="keep_bookends", max_messages=2)[1] == 1


def test_window_defaults_are_the_settings_table_s():
    """Seed 002's window defaults live once, in the settings table (``window.*``): every
    function and the file operation take theirs from it."""
    import dataclasses
    import inspect

    from ctxtool.config import BY_KEY
    from ctxtool.history import window as w

    want = {k: BY_KEY[f"window.{k}"].default for k in ("strategy", "max_messages", "max_chars", "keep_first_user")}
    for fn in (w.plan_window, w.plan_rows, w.window_messages, w.window, w.windowed, w.window_file):
        params = inspect.signature(fn).parameters
        assert {k: params[k].default for k in want} == want, fn.__name__
    fields = {f.name: f.default for f in dataclasses.fields(w.WindowOp)}
    assert {k: fields[k] for k in want} == want
