"""Seed 004 history normalization: ctxtool.history.repair."""

from __future__ import annotations

from ctxtool.history.repair import ABORTED_TEXT, repair
from ctxtool.history.validate import check_messages
from ctxtool.model import Block, Message, Transcript


def U(t="u", id=None):
    return Message("user", [Block("text", text=t)], id=id)


def A(t="a", calls=(), id=None):
    blocks = [Block("text", text=t)] if t else []
    return Message("assistant", blocks + [Block("tool_call", id=c, name="f") for c in calls], id=id)


def R(c, id=None, text="r"):
    return Message("tool", [Block("tool_result", id=c, text=text)], id=id)


def run(msgs, **kw):
    t = Transcript("openai", entries=list(msgs))
    r = repair(t, **kw)
    assert check_messages(t.messages) == []
    return t, r


def kinds(r):
    return [c.kind for c in r.changes]


def test_clean_transcript_untouched():
    msgs = [U(), A(calls=("a",)), R("a"), A("done")]
    t, r = run(msgs)
    assert not r.changed and t.messages == msgs and not any(m.dirty for m in msgs)


def test_aborted_result_added_after_existing_results():
    msgs = [U(), A(calls=("a", "b", "c")), R("a"), A("done")]
    t, r = run(msgs)
    assert kinds(r) == ["aborted_result_added", "aborted_result_added"]
    ms = t.messages
    assert [m.tool_results()[0].id for m in ms[2:5]] == ["a", "b", "c"]
    added = ms[3].tool_results()[0]
    assert added.text == ABORTED_TEXT and added.is_error and ms[3].dirty
    assert ms[5] is msgs[3]


def test_orphan_and_duplicate_results_dropped():
    msgs = [U(), A(calls=("a",)), R("a"), R("a", text="again"), R("ghost"), A("done")]
    t, r = run(msgs)
    assert sorted(kinds(r)) == sorted(["orphan_result_dropped", "duplicate_result_dropped",
                                       "empty_message_dropped", "empty_message_dropped"])
    assert len(t.messages) == 4


def test_trailing_calls_stripped_or_answered():
    msgs = [U(), A("let me look", calls=("a",))]
    t, r = run(msgs)
    assert kinds(r) == ["trailing_call_stripped"]
    assert t.messages[-1].content == [Block("text", text="let me look")]
    t, r = run([U(), A("", calls=("a",))])
    assert kinds(r) == ["trailing_call_stripped", "empty_message_dropped"] and len(t.messages) == 1
    t, r = run([U(), A("look", calls=("a",))], strip_trailing=False)
    assert kinds(r) == ["aborted_result_added"] and len(t.messages) == 3


def test_trailing_stripping_repeats():
    msgs = [U(), A("", calls=("a",)), A("", calls=("b",))]
    t, r = run(msgs)
    assert len(t.messages) == 1


def test_duplicate_message_ids():
    a = U("same", id="m1")
    b = U("same", id="m1")
    c = U("different", id="m1")
    t, r = run([a, b, c, A(id="m1-2")])
    assert kinds(r) == ["duplicate_message_dropped", "duplicate_id_renamed"]
    assert [m.id for m in t.messages] == ["m1", "m1-3", "m1-2"]


def test_duplicate_call_id_while_open():
    msgs = [U(), A(calls=("a", "a")), R("a"), R("a")]
    t, r = run(msgs)
    assert "duplicate_call_dropped" in kinds(r)


def test_records_and_continuations_stay_in_place():
    from ctxtool.model import Line, Record

    rec = Record(Line({"type": "progress"}), "progress")
    call = A(calls=("a",))
    t = Transcript("openai", entries=[U(), call, rec, U("next")])
    repair(t)
    assert t.entries[2] is rec
    assert t.entries[3].tool_results()[0].id == "a"
