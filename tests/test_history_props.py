"""Properties of cut, window and repair over generated transcripts (parallel tool calls,
missing results, huge single turns, system prompts, images): no orphan call or result,
kept messages byte-identical to the input, the cut never on a tool result."""

from __future__ import annotations

import os
from collections import Counter

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from strategies import canonical_transcript, jsonl_bytes, message_lines, openai_transcript, transcripts

from ctxtool.history.cut import cut_candidates, cut_transcript, is_tool_message
from ctxtool.history.pairing import valid_cut
from ctxtool.history.repair import repair
from ctxtool.history.validate import check_messages
from ctxtool.history.window import window
from ctxtool.tokens.count import count_messages, get_tokenizer

# more examples for a thorough run: CTXTOOL_HYPOTHESIS_EXAMPLES=1000 pytest tests/test_history_props.py
SETTINGS = settings(
    max_examples=int(os.environ.get("CTXTOOL_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def problem_counts(msgs) -> Counter:
    return Counter(p.code for p in check_messages(list(msgs)))


def reread(t):
    from strategies import _read_bytes

    return _read_bytes(jsonl_bytes(t), t.format)


def assert_kept_verbatim(before_lines, before_msgs, t, kept_ids):
    """The output is exactly the input lines of the kept messages, in order."""
    expected = [ln for ln, m in zip(before_lines, before_msgs, strict=True) if id(m) in kept_ids]
    assert jsonl_bytes(t).splitlines() == expected


# -- cut --------------------------------------------------------------------------------


@SETTINGS
@given(transcripts(), st.integers(1, 40_000), st.one_of(st.none(), st.integers(2_000, 200_000)))
def test_cut_properties(msgs, budget, limit):
    t = openai_transcript(msgs)
    ms = t.messages
    lines = message_lines(t)
    before = problem_counts(ms)
    rep = cut_transcript(t, keep_recent_tokens=budget, effective_limit=limit, apply=True)
    cp = rep.cut
    eff = min(budget, limit // 2) if limit else budget
    assert cp.keep_budget == eff
    counts = count_messages(ms, get_tokenizer())
    weights = [0 if m.role == "system" else c for m, c in zip(ms, counts, strict=True)]
    ok = cut_candidates(ms)
    if sum(weights) <= eff:
        assert cp.cut_index is None
    event("no cut" if cp.cut_index is None else ("split turn" if cp.split_turn else "cut at a user message"))
    if cp.cut_index is None:
        assert rep.messages_dropped == 0
    else:
        i = cp.cut_index
        m = ms[i]
        # never on a tool result, never inside a tool pair
        assert m.role in ("user", "assistant") and not is_tool_message(m)
        assert valid_cut(ms, i)
        assert cp.split_turn == (m.role == "assistant")
        suffix = sum(weights[i:])
        assert cp.tokens_kept == suffix
        # whole turns kept while they fit: no earlier user cut would fit the budget too
        for j in range(1, i):
            if ok[j] and ms[j].role == "user":
                assert sum(weights[j:]) >= eff
        if cp.split_turn:  # even the newest turn did not fit
            assert all(sum(weights[j:]) >= eff for j in range(1, len(ms)) if ok[j] and ms[j].role == "user")
    # no orphan introduced; kept messages byte-identical
    after = problem_counts(t.messages)
    assert after["orphan_result"] <= before["orphan_result"]
    assert after["unanswered_call"] <= before["unanswered_call"]
    kept = {id(m) for k, m in enumerate(ms) if cp.cut_index is None or k >= cp.cut_index or m.role == "system"}
    assert_kept_verbatim(lines, ms, t, kept)


@SETTINGS
@given(transcripts(clean=True), st.integers(1, 30_000))
def test_cut_of_a_clean_transcript_stays_clean(msgs, budget):
    t = openai_transcript(msgs)
    cut_transcript(t, keep_recent_tokens=budget, apply=True)
    assert check_messages(reread(t).messages) == []


@SETTINGS
@given(transcripts(clean=True), st.integers(1, 12))
def test_cut_by_message_count(msgs, keep):
    t = openai_transcript(msgs)
    ms = t.messages
    cp = cut_transcript(t, keep_recent_tokens=None, keep_recent=keep).cut
    if cp.cut_index is not None:
        assert len(ms) - cp.cut_index >= keep
        assert not is_tool_message(ms[cp.cut_index])
        assert valid_cut(ms, cp.cut_index)


# -- window -----------------------------------------------------------------------------


@SETTINGS
@given(
    transcripts(),
    st.sampled_from(["sliding", "bookends"]),
    st.integers(1, 30),
    st.integers(1, 200_000),
    st.booleans(),
)
def test_window_properties(msgs, strategy, max_messages, max_chars, keep_first_user):
    t = openai_transcript(msgs)
    ms = t.messages
    lines = message_lines(t)
    before = problem_counts(ms)
    r = window(t, strategy=strategy, max_messages=max_messages, max_chars=max_chars, keep_first_user=keep_first_user)
    kept = t.messages
    kept_ids = {id(m) for m in kept}
    event("dropped" if r.dropped else "nothing dropped")
    assert r.dropped == len(ms) - len(kept)
    assert all(id(m) in kept_ids for m in ms if m.role == "system")
    assert ms[-1] is kept[-1] or ms[-1].role == "system"
    non_system = [m for m in kept if m.role != "system"]
    if not r.over_limit:
        assert len(non_system) <= max_messages and sum(m.chars() for m in non_system) <= max_chars
    if keep_first_user:
        firsts = [m for m in ms if m.role == "user" and not m.tool_results()]
        if firsts:
            assert id(firsts[0]) in kept_ids
    after = problem_counts(kept)
    assert after["orphan_result"] <= before["orphan_result"]
    assert after["unanswered_call"] <= before["unanswered_call"]
    assert after["duplicate_result"] <= before["duplicate_result"]
    assert_kept_verbatim(lines, ms, t, kept_ids)


@SETTINGS
@given(transcripts(clean=True), st.integers(1, 20), st.integers(1, 100_000))
def test_window_of_a_clean_transcript_stays_clean(msgs, max_messages, max_chars):
    t = openai_transcript(msgs)
    window(t, max_messages=max_messages, max_chars=max_chars)
    assert check_messages(reread(t).messages) == []


# -- repair -----------------------------------------------------------------------------


@SETTINGS
@given(transcripts(), st.booleans())
def test_repair_then_validate_is_clean(msgs, strip):
    t = openai_transcript(msgs)
    ms = t.messages
    lines = message_lines(t)
    was_clean = not problem_counts(ms)
    r = repair(t, strip_trailing=strip)
    for k in r.counts():
        event(k)
    assert check_messages(t.messages) == []
    back = reread(t)
    assert check_messages(back.messages) == []
    # untouched messages are copied byte for byte, in order
    untouched = [ln for ln, m in zip(lines, ms, strict=True) if not m.dirty and any(m is k for k in t.messages)]
    out = jsonl_bytes(t).splitlines()
    it = iter(out)
    assert all(any(ln == o for o in it) for ln in untouched)
    if was_clean:
        assert not r.changed
        assert out == lines
    # idempotent
    assert not repair(back).changed


@SETTINGS
@given(transcripts())
def test_repair_with_ids_and_duplicates(msgs):
    if len(msgs) > 2:  # duplicate some ids: an exact copy and a clash
        msgs.append(Message_copy(msgs[1]))
        msgs[-2].id = msgs[0].id if msgs[-2].role != "system" else msgs[-2].id
    t = canonical_transcript(msgs)
    repair(t)
    assert check_messages(t.messages) == []


def Message_copy(m):
    from ctxtool.model import Block, Message

    return Message(m.role, [Block.from_json(b.to_json()) for b in m.content], id=m.id)


@SETTINGS
@given(transcripts(), st.integers(1, 20), st.integers(1, 20_000))
def test_operations_compose(msgs, max_messages, budget):
    t = openai_transcript(msgs)
    repair(t)
    window(t, max_messages=max_messages)
    cut_transcript(t, keep_recent_tokens=budget, apply=True)
    assert check_messages(reread(t).messages) == []
