"""The cheaper forms records.process's per-record path uses give the answers of the forms they
replace: the largest outputs ranked by one sort (heapq.nlargest's answer), an empty Counter
made without its __init__, a lazy format's detection hints made once (and made again when its
hints change), a loaded format taken from sys.modules (importlib's answer)."""

from __future__ import annotations

import heapq
import importlib
from collections import Counter
from operator import itemgetter

from hypothesis import given
from hypothesis import strategies as st

from ctxtool import formats
from ctxtool.stats.figures import TOP_OUTPUTS, ToolOutput, new_counter, output_size, top_outputs

sizes = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=3 * TOP_OUTPUTS)


@given(sizes)
def test_top_outputs_is_nlargest(pairs: list[tuple[int, int]]) -> None:
    outs = [ToolOutput("t", str(i), i, None, tok, ch, 0, "x") for i, (tok, ch) in enumerate(pairs)]
    got = top_outputs(outs)
    want = heapq.nlargest(TOP_OUTPUTS, outs, key=lambda o: (o.tokens, o.chars))
    assert [id(o) for o in got] == [id(o) for o in want]  # the same outputs, the earlier first among equals
    assert all(output_size(o) == (o.tokens, o.chars) for o in outs)


@given(st.lists(st.integers(0, 6), max_size=3 * TOP_OUTPUTS))
def test_sorted_first_is_nlargest(ns: list[int]) -> None:
    """A tally's outputs (chars first) ranked as stats.fast.finish ranks them."""
    rows = [(n, i) for i, n in enumerate(ns)]
    assert sorted(rows, key=itemgetter(0), reverse=True)[:TOP_OUTPUTS] == heapq.nlargest(TOP_OUTPUTS, rows, key=itemgetter(0))


def test_new_counter_is_an_empty_counter() -> None:
    c = new_counter()
    assert type(c) is Counter and c == Counter() and repr(c) == repr(Counter())
    c.update(["a", "a"])
    assert c == Counter(a=2) and new_counter() == Counter()


@given(st.sets(st.sampled_from(["role", "type", "messages", "payload", "eval", "history", "x", "conversations", "input"])))
def test_lazy_hints_answer_as_their_rule(present: set[str]) -> None:
    from ctxtool.formats.dataset import MESSAGE_KEYS

    heads = frozenset(present)
    for entry in formats.FORMATS.entries().values():
        if not isinstance(entry, formats.Lazy):
            continue
        for layout in ("jsonl", "json", "zip"):
            keys = entry.keys + (MESSAGE_KEYS if entry.records else ())
            rule = layout in entry.layouts and (not keys or any(k in heads for k in keys))
            assert entry.may_sniff(layout, heads) == rule, (entry.target, layout, heads)


def test_lazy_hints_follow_a_changed_entry() -> None:
    entry = formats.Lazy("ctxtool.formats.openai", ("jsonl",), ("role",))
    assert entry.may_sniff("jsonl", frozenset({"role"})) and not entry.may_sniff("jsonl", frozenset({"type"}))
    entry.keys = ("type",)
    assert entry.may_sniff("jsonl", frozenset({"type"})) and not entry.may_sniff("jsonl", frozenset({"role"}))
    entry.records = True
    assert entry.may_sniff("jsonl", frozenset({"messages"}))


def test_lazy_load_is_importlibs_answer() -> None:
    for name, entry in formats.FORMATS.entries().items():
        if isinstance(entry, formats.Lazy):
            module, _, attribute = entry.target.partition(":")
            assert entry.load() is getattr(importlib.import_module(module), attribute), name
            assert formats.get_format(name) is entry.load()


@given(st.lists(st.one_of(st.integers(-5, 10**6), st.integers(-(2**70), 2**70)), max_size=40))
def test_estimates_is_estimate_of_each(chars: list[int]) -> None:
    """A tally's heuristic tokens in one pass (stats' fold) are estimate() of each count."""
    from ctxtool.tokens.heuristic import estimate, estimates

    assert estimates(chars) == [estimate(c) for c in chars]
