"""Cut points (seed 003 with seed 000's rules): ctxtool.history.cut."""

from __future__ import annotations

import pytest

from ctxtool.history.cut import apply_cut, cut_candidates, cut_transcript, find_cut
from ctxtool.history.pairing import valid_cut
from ctxtool.history.validate import check_messages
from ctxtool.model import Block, Message, Transcript


def U(text: str = "u", n: int = 0) -> Message:
    return Message("user", [Block("text", text=text + "x" * n)])


def A(text: str = "a", n: int = 0, calls: tuple[str, ...] = (), key: str | None = None) -> Message:
    blocks = [Block("text", text=text + "x" * n)] if text or n else []
    blocks += [Block("tool_call", id=c, name="bash", arguments="{}") for c in calls]
    return Message("assistant", blocks, usage_key=key)


def R(cid: str, n: int = 0) -> Message:
    return Message("tool", [Block("tool_result", id=cid, text="r" + "x" * n)])


def S(text: str = "system") -> Message:
    return Message("system", [Block("text", text=text)])


def test_nothing_to_cut_when_under_budget():
    msgs = [U(n=40), A(n=40), U(n=40), A(n=40)]
    cp = find_cut(msgs, keep_recent_tokens=1000)
    assert cp.cut_index is None
    assert cp.messages_kept == 4 and cp.tokens_kept == cp.tokens_before


def test_cut_on_user_boundary_keeps_at_most_budget():
    # four turns of 101 tokens each
    msgs = []
    for _ in range(4):
        msgs += [U(n=200), A(n=196)]
    cp = find_cut(msgs, keep_recent_tokens=250)
    assert cp.cut_index == 4  # the last two turns fit in 250 tokens, three would not
    assert msgs[cp.cut_index].role == "user"
    assert not cp.split_turn
    assert cp.tokens_kept == 202
    assert cp.messages_summarized == 4 and cp.messages_kept == 4


def test_never_cut_on_tool_result_or_inside_a_pair():
    msgs = [U(n=400), A(calls=("c1",)), R("c1", n=400), A(calls=("c2", "c3")), R("c2", n=400), R("c3", n=400), A(n=40)]
    ok = cut_candidates(msgs)
    assert ok == [False, True, False, True, False, False, True]
    for budget in range(1, 800, 7):
        cp = find_cut(msgs, keep_recent_tokens=budget)
        if cp.cut_index is not None:
            assert msgs[cp.cut_index].role in ("user", "assistant")
            assert valid_cut(msgs, cp.cut_index)


def test_huge_newest_turn_splits_at_an_assistant_message():
    msgs = [U(n=100), A(n=100), U(n=40), A(calls=("c1",)), R("c1", n=4000), A(calls=("c2",)), R("c2", n=4000), A(n=40)]
    cp = find_cut(msgs, keep_recent_tokens=1200)
    assert cp.split_turn
    assert msgs[cp.cut_index].role == "assistant"
    assert cp.cut_index == 5
    assert cp.turn_start_index == 2
    kept = msgs[cp.cut_index:]
    assert check_messages(kept) == []


def test_keep_recent_message_count_when_no_budget():
    msgs = [U(), A(), U(), A(calls=("c1",)), R("c1"), A(), U(), A()]
    cp = find_cut(msgs, keep_recent_tokens=None, keep_recent=3)
    # target index 5 is an assistant message after a result: a valid cut (split turn)
    assert cp.cut_index == 5 and cp.keep_recent == 3 and cp.keep_budget is None
    cp = find_cut(msgs, keep_recent_tokens=0, keep_recent=4)
    # target 4 is a tool result: the nearest valid cut before it is 3
    assert cp.cut_index == 3
    assert find_cut(msgs, keep_recent_tokens=None, keep_recent=8).cut_index is None


def test_budget_clamped_to_half_the_effective_limit():
    msgs = []
    for _ in range(10):
        msgs += [U(n=396), A(n=396)]
    cp = find_cut(msgs, keep_recent_tokens=20000, effective_limit=1000)
    assert cp.keep_budget == 500
    assert cp.tokens_kept <= 500 and cp.cut_index is not None


def test_an_effective_limit_of_zero_is_a_limit():
    # window <= reserve: the limit is 0 (policies.base.window_limit), so the budget clamps to 0 and
    # the newest message alone is kept; None is what means "no limit"
    msgs = []
    for _ in range(10):
        msgs += [U(n=396), A(n=396)]
    cp = find_cut(msgs, keep_recent_tokens=20000, effective_limit=0)
    assert cp.keep_budget == 0 and cp.keep_recent is None and cp.cut_index == len(msgs) - 1
    assert find_cut(msgs, keep_recent_tokens=20000, effective_limit=None).keep_budget == 20000


def test_system_and_invisible_messages_weigh_nothing():
    hidden = U(n=40000)
    hidden.metadata.agent_visible = False
    msgs = [S("s" * 40000), U(n=40), hidden, A(n=40)]
    assert find_cut(msgs, keep_recent_tokens=100).cut_index is None


def test_no_cut_between_parts_of_one_response():
    msgs = [U(n=400), A(n=400, key="k1"), A(n=400, key="k1"), U(n=10), A(n=4000, key="k2")]
    ok = cut_candidates(msgs)
    assert ok[1] and not ok[2]


def test_cut_transcript_and_apply_keep_system_and_untouched_messages():
    sys_msg = S()
    msgs = [sys_msg, U(n=400), A(n=400), U(n=400), A(calls=("c1",)), R("c1"), A(n=10)]
    t = Transcript("openai", entries=list(msgs))
    rep = cut_transcript(t, keep_recent_tokens=120, apply=True)
    assert rep.cut.cut_index == 3
    assert rep.messages_dropped == 2
    assert t.messages == [sys_msg, *msgs[3:]]
    assert not any(m.dirty for m in t.messages)
    d = rep.to_json()
    assert d["cut_index"] == 3 and d["tokens_after"] == rep.cut.tokens_kept and d["messages_dropped"] == 2


def test_apply_cut_none_is_a_no_op():
    t = Transcript("openai", entries=[U(), A()])
    assert apply_cut(t, None) == 0 and len(t.messages) == 2


@pytest.mark.parametrize("budget", [1, 50, 200, 10_000])
def test_report_figures_add_up(budget):
    msgs = [U(n=300), A(calls=("a", "b")), R("a", n=900), R("b", n=30), A(n=500), U(n=20), A(n=900)]
    cp = find_cut(msgs, keep_recent_tokens=budget)
    assert cp.tokens_kept + cp.tokens_summarized == cp.tokens_before
    assert cp.messages_kept + cp.messages_summarized == len(msgs)
