"""The cheaper forms records.process's per-record path uses give the answers of the forms they
replace: the largest outputs ranked by one sort (heapq.nlargest's answer), an empty Counter
made without its __init__, a lazy format's detection hints made once (and made again when its
hints change), a loaded format taken from sys.modules (importlib's answer)."""

from __future__ import annotations

import heapq
import importlib
from collections import Counter
from operator import itemgetter
from types import SimpleNamespace
from typing import Any

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


# -- detection's sniffs with their per-message test inlined: the answers of the forms they replace
def _old_looks_openai(msgs: list[Any]) -> int:
    from ctxtool.formats.openai import _is_message

    if not msgs or not all(_is_message(m) for m in msgs[:50]):
        return 0
    for m in msgs[:200]:
        if m.get("tool_calls") or m.get("role") == "tool" or m.get("tool_call_id"):
            return 90
        c = m.get("content")
        if isinstance(c, list):
            for part in c:
                if isinstance(part, dict) and part.get("type") in ("tool_use", "tool_result"):
                    return 0
    return 70


def _old_anthropic_score(msgs: Any, *, request: bool = False) -> int:
    from ctxtool.formats.anthropic import ANTHROPIC_BLOCKS, OPENAI_FIELDS, OPENAI_PARTS, ROLES, _is_message

    if not isinstance(msgs, list) or not msgs:
        return 0
    if not all(_is_message(m) for m in msgs[:50]):
        return 0
    anthropic = False
    for m in msgs[:200]:
        if not isinstance(m, dict):
            return 0
        if m.get("role") not in ROLES or any(k in m for k in OPENAI_FIELDS):
            return 0
        c = m.get("content")
        if isinstance(c, list):
            for p in c:
                if not isinstance(p, dict):
                    continue
                t = p.get("type")
                if t in OPENAI_PARTS or "value" in p:
                    return 0
                if t in ANTHROPIC_BLOCKS or (t == "image" and isinstance(p.get("source"), dict)):
                    anthropic = True
                elif "cache_control" in p or "citations" in p:
                    anthropic = True
    if anthropic:
        return 95
    return 80 if request else 50


def _old_responses_score(items: list[Any]) -> int:
    from ctxtool.formats.responses import _anthropic, is_item

    head = items[:200]
    if not any(isinstance(o, dict) and "type" in o for o in head):
        return 0
    if not all(is_item(o) for o in head) or any(_anthropic(o) for o in head):
        return 0
    return 93


_roles = st.one_of(st.sampled_from(["user", "assistant", "system", "developer", "tool", "function", "model", "x"]),
                   st.none(), st.integers(0, 2), st.lists(st.just("user"), max_size=1))
_parts = st.lists(st.one_of(
    st.dictionaries(st.sampled_from(["type", "text", "value", "source", "cache_control", "citations"]),
                    st.one_of(st.sampled_from(["text", "tool_use", "tool_result", "image", "image_url", "input_text",
                                               "thinking", "message"]), st.none(), st.dictionaries(st.just("a"), st.none())),
                    max_size=3),
    st.text(max_size=2), st.integers()), max_size=3)
_values = st.one_of(st.none(), st.text(max_size=3), _parts, _roles, st.sampled_from(["message", "function_call", "reasoning"]))
_message = st.one_of(
    st.fixed_dictionaries({"role": _roles}, optional={
        "content": st.one_of(st.none(), st.text(max_size=3), _parts), "tool_calls": st.one_of(st.none(), st.lists(st.just({}), max_size=1)),
        "tool_call_id": _values, "type": _values, "function_call": _values, "refusal": _values, "stop_reason": _values}),
    st.dictionaries(st.sampled_from(["role", "content", "type", "tool_calls"]), _values, max_size=3),
    st.integers(), st.text(max_size=2), st.none(),
)


def _answer(fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except Exception as e:  # noqa: BLE001 - the same exception is the same answer
        return type(e)


@given(st.lists(_message, max_size=60))
def test_sniffs_inlined_answer_as_before(msgs: list[Any]) -> None:
    from ctxtool.formats.anthropic import _score
    from ctxtool.formats.openai import _looks_openai
    from ctxtool.formats.responses import score

    assert _answer(_looks_openai, msgs) == _answer(_old_looks_openai, msgs)
    for request in (False, True):
        assert _answer(_score, msgs, request=request) == _answer(_old_anthropic_score, msgs, request=request)
    assert _answer(score, msgs) == _answer(_old_responses_score, msgs)


# -- detection's candidates, found once per (layout, top-level keys): the answer of asking every entry
def _old_scores(sample: list[Any], src: Any) -> list[tuple[int, str, Any]]:
    scores = []
    heads = formats._heads(sample, src.layout)
    for name, entry in formats.FORMATS.entries().items():
        if isinstance(entry, formats.Lazy) and not entry.may_sniff(src.layout, heads):
            continue
        fmt = formats.get_format(name)
        try:
            s = fmt.sniff(sample, src)
        except (KeyError, TypeError, AttributeError, IndexError):
            s = 0
        if s > 0:
            scores.append((s, name, fmt))
    scores.sort(key=lambda x: -x[0])
    return scores


_records = st.lists(st.one_of(
    st.fixed_dictionaries({"messages": st.lists(_message, max_size=4)}),
    st.fixed_dictionaries({"conversations": st.lists(st.fixed_dictionaries({"from": st.sampled_from(["human", "gpt"]),
                                                                             "value": st.text(max_size=2)}), max_size=2)}),
    st.fixed_dictionaries({"input": st.lists(_message, max_size=3)}),
    _message,
), min_size=1, max_size=3)


def _source(sample: list[Any], layout: str) -> Any:
    from ctxtool.io.jsonl import Source
    from ctxtool.model import Line

    if layout == "json":
        return Source("s.json", "json", doc=sample[0] if len(sample) == 1 else sample)
    src = Source("s.jsonl", "jsonl")
    src.peek.extend(Line(o, None, i) for i, o in enumerate(sample, 1))
    return src


@given(_records, st.sampled_from(["jsonl", "json"]))
def test_candidates_score_as_every_entry_asked(sample: list[Any], layout: str) -> None:
    src = _source(sample, layout)
    assert formats._scores(src.sample(), src) == _old_scores(src.sample(), src)
    assert formats._scores(src.sample(), src) == _old_scores(src.sample(), src)  # asked again: the kept candidates


def test_candidates_follow_the_registry_and_the_hints() -> None:
    from ctxtool.formats.openai import FORMAT as OPENAI

    rec = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    src = _source([rec], "jsonl")
    before = [n for _, n, _ in formats._scores(src.sample(), src)]
    assert "openai" in before and "openai-twin" not in before
    formats.register(formats.Lazy("ctxtool.formats.openai", ("jsonl",), ("nothing-here",)), "openai-twin")
    try:
        assert [n for _, n, _ in formats._scores(src.sample(), src)] == before  # its hints rule it out
        entry = formats.FORMATS.entry("openai-twin")
        assert isinstance(entry, formats.Lazy)
        entry.keys = ("messages",)  # a registered entry's hints changed in place
        got = formats._scores(src.sample(), src)
        assert ("openai-twin", OPENAI) in [(n, f) for _, n, f in got] and got == _old_scores(src.sample(), src)
    finally:
        formats.FORMATS.unregister("openai-twin")
    assert [n for _, n, _ in formats._scores(src.sample(), src)] == before


def test_stats_op_keeps_what_its_tasks_derive() -> None:
    """The settings a task derives from its StatsOp alone, kept on the op: the same options as
    made per task, not compared, shown or pickled, made again when the policy registry changes."""
    import pickle

    from ctxtool.formats.base import ErrorPolicy
    from ctxtool.run.operation import RunContext
    from ctxtool.stats import fast as stats_fast
    from ctxtool.stats.op import _DERIVED, StatsOp
    from ctxtool.stats.transcript import threshold_levels
    from ctxtool.tokens.count import HeuristicTokenizer

    for op in (StatsOp(), StatsOp(warning_chars=10, critical_chars=20, keep=3), StatsOp(per_message=True),
               StatsOp(tokenizer="o200k_base", accuracy=True)):
        for record in (False, True):
            task = op.start(RunContext("p", ErrorPolicy(), None, worker=True, record=record))
            assert task.opts == {  # type: ignore[attr-defined]
                "context": op.context, "warning_chars": op.warning_chars, "critical_chars": op.critical_chars,
                "per_message": op.per_message, "window": stats_fast.resolved_window(op.context), "keep": op.keep,
                "level": threshold_levels(op.warning_chars, op.critical_chars), "accuracy": op.accuracy,
                "count_lines": op.keep is None and not record}
            assert task.fast == (op.fast and not op.per_message and not op.accuracy)  # type: ignore[attr-defined]
            assert (type(task.tok) is HeuristicTokenizer) == (op.tokenizer == "heuristic")  # type: ignore[attr-defined]
        assert _DERIVED in op.__dict__ and _DERIVED not in repr(op) and op == StatsOp(**{
            k: getattr(op, k) for k in ("tokenizer", "warning_chars", "critical_chars", "per_message", "keep", "accuracy")})
        back = pickle.loads(pickle.dumps(op))
        assert back == op and _DERIVED not in back.__dict__
    op = StatsOp()
    first = op.derived()
    assert op.derived() is first
    from ctxtool.policies import POLICIES

    POLICIES.version += 1  # as a register call does
    try:
        assert op.derived() is not first and op.derived().opts == first.opts
    finally:
        POLICIES.version -= 1


def _old_heads(sample: list[Any], layout: str) -> frozenset[str]:
    heads: list[Any] = []
    if layout == "jsonl":
        heads = [o for o in sample if isinstance(o, dict)]
    elif layout == "json" and sample:
        doc = sample[0]
        if isinstance(doc, list):
            doc = doc[0] if doc else None
        heads = [doc] if isinstance(doc, dict) else []
    return frozenset(k for h in heads for k in h)


@given(st.lists(st.one_of(_message, st.just("UNREADABLE")), max_size=4), st.sampled_from(["jsonl", "json"]))
def test_heads_and_records_per_line_answer_as_before(objs: list[Any], layout: str) -> None:
    """_heads of one record (its keys at once) and records_per_line (the first readable line,
    without the sample's list) give the answers of the forms they replace."""
    from ctxtool.io.jsonl import UNREADABLE, Source
    from ctxtool.model import Line

    objs = [UNREADABLE if o == "UNREADABLE" else o for o in objs]
    src = Source("s", layout, doc=objs[0] if objs else None)
    src.peek.extend(Line(o, None, i) for i, o in enumerate(objs, 1))
    assert formats._heads(src.sample(), layout) == _old_heads(src.sample(), layout)
    for name in ("openai", "anthropic", "responses", "mini-swe-agent"):
        f = formats.get_format(name)
        sample = src.sample()
        old = _answer(lambda: src.layout == "jsonl" and bool(sample) and f.messages_key(sample[0]) is not None)  # type: ignore[attr-defined]  # noqa: B023
        assert _answer(f.records_per_line, src) == old
    for obj in objs:  # a record holding the messages
        src = Source("s", "jsonl")
        src.peek.append(Line({"messages": [obj]}, None, 1))
        sample = src.sample()
        for name in ("openai", "anthropic", "responses"):
            f = formats.get_format(name)
            old = _answer(lambda: f.messages_key(sample[0]) is not None)  # type: ignore[attr-defined]  # noqa: B023
            assert _answer(f.records_per_line, src) == old


@given(st.text(max_size=3), st.one_of(st.none(), st.text(max_size=2)), st.one_of(st.none(), st.integers(0, 9)),
       st.one_of(st.none(), st.text(max_size=2)), st.integers(0, 99), st.integers(0, 99), st.text(alphabet="a\n", max_size=6))
def test_tool_output_is_the_dataclass_made(transcript: str, mid: str | None, line: int | None, tool: str | None,
                                           tokens: int, chars: int, text: str) -> None:
    """stats.fast.finish's outputs, made without the lines property's setter: the dataclass's object."""
    from ctxtool.stats.figures import _LINES, tool_output

    got, want = tool_output(transcript, mid, line, tool, tokens, chars, text), ToolOutput(transcript, mid, line, tool, tokens, chars, 0, text)
    assert type(got) is ToolOutput and got.text == want.text == text and _LINES.__get__(got) == _LINES.__get__(want) == 0
    assert got == want and repr(got) == repr(want) and got.lines == want.lines == text.count("\n") + 1
    assert got.text is None and want.text is None


_call_name = st.one_of(st.none(), st.just(""), st.sampled_from(["read", "edit", "bash", "?"]))


@given(st.lists(st.lists(_call_name, min_size=1, max_size=4), max_size=6))
def test_tally_counts_calls_as_counters_own_increment(turns: list[list[str | None]]) -> None:
    """stats.fast's tally counts each tool call by name with dict.get (no Counter.__missing__):
    the Counter that ``counter[name or "?"] += 1`` makes, its keys in the same order."""
    from ctxtool.stats.fast import tally_openai

    msgs: list[Any] = []
    want: Counter[str] = Counter()
    for t, names in enumerate(turns):
        calls = [{"id": f"c{t}_{k}", "function": {"name": n, "arguments": "{}"}} for k, n in enumerate(names)]
        msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
        for n in names:
            want[n or "?"] += 1
    tl = tally_openai(msgs, False)
    assert tl is not None
    assert type(tl.calls_by_name) is Counter and tl.calls_by_name == want
    assert list(tl.calls_by_name.items()) == list(want.items()) and tl.calls_by_name.most_common() == want.most_common()


_record_text = st.one_of(
    st.sampled_from([
        b'{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}',
        b'{"id": 7, "messages": [{"role": "user", "content": "a\\nb"}, {"role": "assistant", "content": null,'
        b' "tool_calls": [{"id": "c1", "function": {"name": "read", "arguments": "{}"}}]},'
        b' {"role": "tool", "tool_call_id": "c1", "content": "x\\ny\\nz"}]}',
        b'{"messages": [{"role": "user", "content": "u", "usage": {"input_tokens": 3}}]}',  # the full model
        b'{"messages": [1, 2', b"{oops", b"", b"[]", b'{"messages": []}', b'"text"', b"{} {}", b"NaN",
    ]),
    st.binary(max_size=12),
)


@given(_record_text, st.sampled_from([b"", b"\n", b"\r\n", b"\r", b"\n\n"]), st.sampled_from(["fail", "skip"]))
def test_read_only_record_parsed_with_its_line_ending(text: bytes, ending: bytes, on_error: str) -> None:
    """records.process parses the bytes of a record for an operation that only reads with
    their line ending (no copy without it): the result, or the error, of the same bytes
    without it (what it parsed before)."""
    from ctxtool.errors import CtxtoolError
    from ctxtool.history.validate import ValidateOp
    from ctxtool.run import records
    from ctxtool.stats.op import StatsOp

    for op in (StatsOp(), StatsOp(fast=False), ValidateOp()):
        outcomes = []
        for given_bytes in (text.rstrip(b"\r\n"), text + ending):
            try:
                r = records.process(op, given_bytes, path="d.jsonl", line=5, on_error=on_error)
                outcomes.append(("ok", r.data, r.format, r.changed, r.skipped, r.events, _report(r.report)))
            except CtxtoolError as e:
                outcomes.append(("error", str(e), e.path, e.line, e.kind))
            except Exception as e:  # noqa: BLE001  # any other failure: the same on both
                outcomes.append(("raised", type(e), str(e)))
        assert outcomes[0] == outcomes[1], op


def _report(rep: Any) -> Any:
    """A report as compared: its JSON where it has one (every line count made), else itself."""
    from ctxtool.stats.op import StatsPart

    if isinstance(rep, StatsPart):
        kept = rep.kept()
        return (rep == rep, [t.to_json() for t in kept], [o.to_json() for o in rep.largest], rep.totals.to_json(),
                rep.overview, rep.skipped)
    return rep


_stats_record = st.one_of(
    st.builds(lambda names, tool: (
        b'{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a",'
        b' "tool_calls": [' + b", ".join(b'{"id": "c%d", "function": {"name": "%s", "arguments": "{}"}}' % (k, n.encode())
                                         for k, n in enumerate(names)) + b"]}"
        + b"".join(b', {"role": "tool", "tool_call_id": "c%d", "content": "%s"}' % (k, tool.encode()) for k in range(len(names)))
        + b"]}"), st.lists(st.sampled_from(["read", "edit", "bash"]), min_size=1, max_size=3),
        st.sampled_from(["x", "a\\nb", "1\\n2\\n3\\n"])),
    st.sampled_from([
        b'{"messages": [{"role": "user", "content": "u", "usage": {"input_tokens": 3}}]}',  # the full model
        b'{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}', b"{oops",
    ]),
)


@given(st.lists(_stats_record, min_size=1, max_size=4), st.sampled_from([None, 0, 1, 3]), st.booleans(), st.booleans())
def test_record_totals_made_when_read_are_the_eager_ones(recs: list[bytes], keep: int | None, per_message: bool,
                                                       parsed: bool) -> None:
    """One record's stats part makes its totals and overview when they are first read: the
    reports, their pickles and what they merge into are those of a part that made them at once."""
    import pickle
    from unittest import mock

    from ctxtool.io import jsonl as jsonio
    from ctxtool.run import records
    from ctxtool.run.operation import merge_reports
    from ctxtool.stats.figures import Figures
    from ctxtool.stats.op import StatsOp, StatsPart

    op = StatsOp(keep=keep, per_message=per_message)

    def run() -> list[Any]:
        out = []
        for n, r in enumerate(recs, 1):
            given_rec: Any = r
            if parsed:
                try:
                    given_rec = jsonio.loads(r)
                except Exception:  # noqa: BLE001  # not JSON: given as bytes
                    given_rec = r
            out.append(records.process(op, given_rec, path="d.jsonl", line=n, on_error="skip").report)
        return out

    lazy, lazy_unread = run(), run()
    with mock.patch.object(StatsPart, "summed_when_read",
                           classmethod(lambda cls, rows, keep=None, sink=None: cls(Figures(), [], [], [], rows, keep=keep,
                                                                                   sink=sink))):
        eager, eager_merged = run(), run()
    for a, b in zip(lazy, eager, strict=True):
        assert pickle.dumps(a) == pickle.dumps(b)  # totals made first here
        assert a == b and a.totals.to_json() == b.totals.to_json() and list(a.totals.by_role) == list(b.totals.by_role)
    m, e = merge_reports(lazy_unread), merge_reports(eager_merged)  # merged before any totals were read
    assert m == e and pickle.dumps(m) == pickle.dumps(e)
    assert m.totals.to_json() == e.totals.to_json() and list(m.totals.tool_calls_by_name.items()) == list(
        e.totals.tool_calls_by_name.items())
    assert [t.to_json() for t in m.kept()] == [t.to_json() for t in e.kept()]


_counts = st.dictionaries(st.sampled_from(["read", "edit", "bash", "?"]), st.integers(0, 3), max_size=3)
_figures = st.builds(
    lambda ints, rows, calls, usage, unknown: _make_figures(ints, rows, calls, usage, unknown),
    st.lists(st.integers(0, 9), min_size=15, max_size=15),
    st.lists(st.tuples(st.sampled_from(["system", "user", "injected", "assistant", "tool", "other", "more"]),
                       st.integers(0, 2), st.integers(0, 9), st.integers(0, 9)), max_size=6),
    _counts, st.tuples(*[st.integers(0, 4)] * 5), _counts,
)


def _make_figures(ints: list[int], rows: list[tuple[str, int, int, int]], calls: dict[str, int], usage: tuple[int, ...],
                  unknown: dict[str, int]) -> Any:
    from ctxtool.model import Usage
    from ctxtool.stats.figures import Figures, RoleStats
    from ctxtool.stats.op import _FIGURE_FIELDS

    f = Figures(tool_calls_by_name=Counter(calls), usage=Usage(*usage), unknown_types=Counter(unknown))
    for k, v in zip(_FIGURE_FIELDS, ints, strict=True):
        setattr(f, k, v)
    for r, m, t, c in rows:
        f.by_role[r] = RoleStats(m, t, c)
    return f


@given(_figures, _figures)
def test_adding_figures_adds_what_their_sum_adds(base: Any, x: Any) -> None:
    """StatsPart.merge adds a one-record part's pending figures as they are: what adding
    Figures() plus them (its totals, made) would add, rows and names in the same order."""
    import copy

    from ctxtool.stats.figures import Figures

    made = Figures()
    made.add(x)
    a, b = copy.deepcopy(base), copy.deepcopy(base)
    a.add(made)
    b.add(x)
    assert a == b and a.to_json() == b.to_json()
    assert list(a.by_role) == list(b.by_role) and list(a.tool_calls_by_name.items()) == list(b.tool_calls_by_name.items())
    assert list(a.unknown_types.items()) == list(b.unknown_types.items())


_stamp = st.one_of(st.none(), st.just(""), st.sampled_from(["2025-01-01T00:00:00Z", "2025-06-01T00:00:00Z", "2024-12-31"]))
_seen = st.builds(
    lambda level, model, first, last, path, unknown: SimpleNamespace(
        level=level, model=model, first_timestamp=first, last_timestamp=last, path=path,
        figures=SimpleNamespace(unknown_types=Counter(unknown))),
    st.sampled_from(["ok", "warning", "critical"]), st.one_of(st.none(), st.just(""), st.sampled_from(["m1", "m2"])),
    _stamp, _stamp, st.sampled_from(["a.jsonl", "b.jsonl"]), _counts)


@given(st.lists(_seen, max_size=4), _seen)
def test_counting_a_transcript_counts_what_merging_its_overview_counts(before: list[Any], t: Any) -> None:
    """StatsPart.merge counts a one-record part's pending transcript itself: what merging
    Overview() with it counted (that part's overview, made) would count, in the same order."""
    from ctxtool.stats.figures import Overview

    a, b = Overview(), Overview()
    for x in before:
        a.add(x)
        b.add(x)
    one = Overview()
    one.add(t)
    a.merge(one)
    b.add(t)
    assert a == b and list(a.levels.items()) == list(b.levels.items()) and list(a.models) == list(b.models)
    assert [(p, list(c.items())) for p, c in a.drift.items()] == [(p, list(c.items())) for p, c in b.drift.items()]


# -- the window's plan: its shorter forms against the forms they replace --------------------


def _reach_by_match(evs: Any) -> list[int]:
    """group_starts' reach as it was made: from every pair match() finds."""
    from collections import defaultdict

    from ctxtool.history.pairing import match

    reach = list(range(len(evs)))
    p = match(evs)
    for ci, _, ri in p.pairs:
        if ri is not None and ri > reach[ci]:
            reach[ci] = ri
    if p.duplicate_results:
        answered: dict[str, list[int]] = defaultdict(list)
        for ci, cj, ri in p.pairs:
            if ri is not None:
                answered[evs[ci][cj][1] or ""].append(ci)
        for i, j in p.duplicate_results:
            before = [ci for ci in answered.get(evs[i][j][1] or "", ()) if ci < i]
            if before:
                reach[before[-1]] = max(reach[before[-1]], i)
    return reach


def _group_starts_before(evs: Any) -> list[int]:
    reach = _reach_by_match(evs)
    starts, start, furthest = [0] * len(evs), 0, -1
    for i in range(len(evs)):
        if i > furthest:
            start = i
        starts[i] = start
        furthest = max(furthest, reach[i])
    return starts


def _plan_rows_before(v: Any, strategy: str, max_messages: int, max_chars: int, keep_first_user: bool) -> Any:
    """plan_rows as it was written before its units carried their characters (session 47)."""
    roles, chars = v.roles, v.chars
    n = len(roles)
    if sum(chars) <= max_chars and n - roles.count("system") <= max_messages:
        return [True] * n, False, False
    keep = [r == "system" for r in roles]
    evs = v.events
    starts = _group_starts_before(evs)
    grouped: list[list[int]] = []
    cur_start = -1
    for i, role in enumerate(roles):
        if starts[i] != cur_start:
            cur_start = starts[i]
            grouped.append([])
        if role != "system":
            grouped[-1].append(i)
    units = [u for u in grouped if u]
    used = [0, 0]
    chosen: set[int] = set()

    def take(k: int) -> None:
        chosen.add(k)
        used[0] += len(units[k])
        used[1] += sum([chars[i] for i in units[k]])

    first_user_unit = None
    if keep_first_user:
        for k, u in enumerate(units):
            if any(roles[i] == "user" and all(e[0] for e in evs[i]) for i in u):
                first_user_unit = k
                break
    if first_user_unit is not None:
        take(first_user_unit)
    last = len(units) - 1
    if strategy == "bookends":
        for k in range(len(units)):
            if k in chosen:
                continue
            u = units[k]
            if k == last or used[0] + len(u) > max_messages // 2 or used[1] + sum([chars[i] for i in u]) > max_chars // 2:
                break
            take(k)
    for k in range(last, -1, -1):
        if k in chosen:
            continue
        u = units[k]
        if k != last and (used[0] + len(u) > max_messages or used[1] + sum([chars[i] for i in u]) > max_chars):
            break
        take(k)
    for k in chosen:
        for i in units[k]:
            keep[i] = True
    natural = set()
    k = last
    while k in chosen:
        natural.add(k)
        k -= 1
    if strategy == "bookends":
        k = 0
        while k in chosen:
            natural.add(k)
            k += 1
    return keep, first_user_unit is not None and first_user_unit not in natural, used[0] > max_messages or used[1] > max_chars


_ids = st.one_of(st.none(), st.sampled_from(["", "a", "b", "c"]))
_event = st.tuples(st.booleans(), _ids, st.one_of(st.just(()), st.lists(st.sampled_from(["a", "b", "c"]), max_size=2).map(tuple)))


@st.composite
def _events(draw: Any) -> list[Any]:
    """Each message's pairing events: mostly what a tally gives (calls, then a result for an
    open call by its id alone), sometimes anything else (an orphan, a duplicate, a call
    without an id, a result answering other calls too)."""
    out: list[Any] = []
    open_ids: list[str] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["none", "none", "calls", "calls", "result", "result", "result", "any"]))
        if kind == "calls":
            ids = draw(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=3))
            open_ids.extend(ids)
            out.append(tuple((True, i, ()) for i in ids))
        elif kind == "result" and open_ids:
            out.append(((False, open_ids.pop(draw(st.integers(0, len(open_ids) - 1))), ()),))
        elif kind == "any":
            out.append(tuple(draw(st.lists(_event, max_size=3))))
        else:
            out.append(())
    return out


@given(_events())
def test_group_starts_is_matchs_answer(evs: list[Any]) -> None:
    """group_starts' reach read without match() where each result has one call (_plain_reach)
    gives the groups of every pair match() finds."""
    from ctxtool.history.pairing import _plain_reach, group_starts

    assert group_starts(evs) == _group_starts_before(evs)
    plain = _plain_reach(evs)
    assert plain is None or plain == _reach_by_match(evs)


@given(_events().flatmap(lambda evs: st.tuples(st.just(evs), st.lists(st.sampled_from(["system", "user", "assistant", "tool"]),
                                                                         min_size=len(evs), max_size=len(evs)),
                                             st.lists(st.integers(0, 40), min_size=len(evs), max_size=len(evs)))),
       st.sampled_from(["sliding", "bookends"]), st.integers(1, 8), st.integers(1, 120), st.booleans())
def test_plan_rows_answers_as_before(rows: Any, strategy: str, max_messages: int, max_chars: int, keep_first_user: bool) -> None:
    from ctxtool.history.window import WindowRows, plan_rows

    evs, roles, chars = rows
    v = WindowRows(roles, [0 if r == "system" else c for r, c in zip(roles, chars, strict=True)], evs)
    got = plan_rows(v, strategy=strategy, max_messages=max_messages, max_chars=max_chars, keep_first_user=keep_first_user)
    assert got == _plan_rows_before(v, strategy, max_messages, max_chars, keep_first_user)


# -- a named format's own detection (formats._fits): one registry lookup, the entry found loaded
def _old_fits(f: Any, sample: list[Any], src: Any) -> bool:
    memo = src.detected
    if memo is not None and memo[0] is src.peek and memo[1] == len(src.peek) and memo[2] is f:
        return True
    entry = formats.FORMATS.entry(f.name) if f.name in formats.FORMATS else None
    if entry is None or (isinstance(entry, formats.Lazy) and not entry.may_sniff(src.layout, formats._heads(sample, src.layout))):
        return False
    if formats.get_format(f.name) is not f:
        return False
    try:
        return f.sniff(sample, src) > 0
    except (KeyError, TypeError, AttributeError, IndexError):
        return False


@given(_records, st.sampled_from(["jsonl", "json"]))
def test_fits_answers_as_before(sample: list[Any], layout: str) -> None:
    """formats._fits finds a format's entry once (Registry.find) and loads that entry: the answer
    of asking ``name in FORMATS``, ``FORMATS.entry`` and ``get_format`` in turn, for every built-in
    format, a twin instance the registry does not hold, a format registered under its own name as
    an instance (not lazy), one under a former name, and one whose module attribute is another format."""
    from ctxtool.formats.openai import OpenAIFormat

    src = _source(sample, layout)
    for name in formats.format_names():
        f = formats.get_format(name)
        assert formats._fits(f, src.sample(), src) == _old_fits(f, src.sample(), src), name

    class Twin(OpenAIFormat):
        name = "openai-twin"

    twin, other = OpenAIFormat(), Twin()
    assert formats._fits(twin, src.sample(), src) == _old_fits(twin, src.sample(), src) is False  # not the registered one
    assert formats._fits(other, src.sample(), src) == _old_fits(other, src.sample(), src) is False  # not registered
    formats.register(other)
    formats.FORMATS.aliases["openai-former"] = "openai-twin"
    try:
        assert formats._fits(other, src.sample(), src) == _old_fits(other, src.sample(), src)
        renamed = Twin()
        renamed.name = "openai-former"  # a former name: the registered entry, which is another instance
        assert formats._fits(renamed, src.sample(), src) == _old_fits(renamed, src.sample(), src) is False
    finally:
        formats.FORMATS.unregister("openai-twin")
        del formats.FORMATS.aliases["openai-former"]


def test_registry_find_is_entry_when_registered() -> None:
    from ctxtool.registry import Registry

    reg: Registry[Any] = Registry("thing", fold=str.lower)
    reg.register("A value", "alpha", aliases=("first",))
    for name in ("alpha", "ALPHA", "first", "beta", ""):
        assert reg.find(name) == (reg.entry(name) if name in reg else None)
    assert reg.find(3) is None and (3 in reg) is False  # type: ignore[arg-type]


@given(st.text(alphabet=st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2028", "\u3000",
                                         "\u200b", "\ufeff", "a", "<"]), min_size=1, max_size=6))
def test_isspace_is_what_strip_leaves_nothing_of(text: str) -> None:
    """stats.fast's tally asks isspace() where it asked strip() (a copy of the text): the same
    answer for every text it asks (a user message's content, not empty)."""
    assert (not text.isspace()) == bool(text.strip())
