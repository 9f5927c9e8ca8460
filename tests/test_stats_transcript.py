"""``transcript_stats`` folds a transcript in one pass: its figures must be what the model's own
definitions give when each is asked for separately (a message's characters, the heuristic
count of each message, the injected-text rule, the tools by name, the last recorded model)."""

from __future__ import annotations

import heapq
from collections import Counter
from operator import itemgetter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.formats.timestamps import entry_time, span
from ctxtool.model import (
    KIND_COMPACTION_SUMMARY,
    KIND_INJECTED,
    Block,
    Compaction,
    Cont,
    Line,
    Message,
    Metadata,
    Record,
    Transcript,
    Usage,
    is_injected,
)
from ctxtool.stats.figures import TOP_OUTPUTS, largest
from ctxtool.stats.transcript import transcript_stats
from ctxtool.tokens.context import ContextSettings, context_figures, is_summary, last_model, resolve
from ctxtool.tokens.count import context_tokens, count_messages, estimate_context, get_tokenizer

TEXTS = st.sampled_from(["", " ", "\n\t", "\u3000", "hi", "  <system-reminder>x", "<command-name>/x",
                         "[Previous conversation summary] s", "a\nb", "é" * 9])
NAMES = st.sampled_from([None, "", "bash", "read"])


@st.composite
def blocks(draw: Any) -> Block:
    kind = draw(st.sampled_from(["text", "thinking", "tool_call", "tool_result", "image", "other"]))
    if kind == "tool_call":
        args = draw(st.sampled_from([None, "", '{"a": 1}', {"cmd": "ls"}, {"x": ["é", 2]}]))
        return Block(kind, id=draw(st.sampled_from([None, "c1", "c2"])), name=draw(NAMES), arguments=args)
    if kind == "tool_result":
        return Block(kind, id=draw(st.sampled_from([None, "c1", "c2"])), text=draw(TEXTS) * draw(st.integers(0, 40)),
                     is_error=draw(st.booleans()))
    if kind == "image":
        return Block(kind, data=draw(st.sampled_from([None, {"type": "document"}, {"type": "base64"}])))
    return Block(kind, text=draw(TEXTS) * draw(st.integers(0, 3)))


@st.composite
def messages(draw: Any) -> Message:
    usage = draw(st.one_of(st.none(), st.builds(Usage, st.integers(0, 90), st.integers(0, 9))))
    return Message(
        draw(st.sampled_from(["system", "user", "assistant", "tool", "developer"])),
        draw(st.lists(blocks(), max_size=4)),
        metadata=Metadata(agent_visible=draw(st.sampled_from([None, False])),
                          kind=draw(st.sampled_from([None, KIND_INJECTED, "compaction_summary"]))),
        usage=usage,
        usage_key=draw(st.sampled_from([None, "k1", "k2"])) if usage else None,
        model=draw(st.sampled_from([None, "gpt-4o", "<synthetic>", "claude-sonnet-4-5"])),
        lines=[Line({}, None, 1)],
        extra=draw(st.sampled_from([{}, {"is_meta": True}])),
    )


@st.composite
def transcripts(draw: Any) -> Transcript:
    entries: list[Any] = draw(st.lists(st.one_of(messages(), messages(), messages(),
                                                 st.builds(Record, st.just(Line({}, None, 1)), st.just("x")),
                                                 st.builds(Compaction, st.just("summary"))), max_size=20))
    return Transcript("openai", entries, extra=draw(st.sampled_from([{}, {"model": "gpt-4o"}])))


@settings(max_examples=300, deadline=None)
@given(t=transcripts(), model=st.sampled_from([None, "gpt-4o"]), window=st.sampled_from([None, 0, 100_000]))
def test_one_pass_gives_each_definition(t: Transcript, model: str | None, window: int | None) -> None:
    tok = get_tokenizer("heuristic")
    context = ContextSettings(window=window, model=model) if model else None
    s = transcript_stats(t, None, tok, context=context, context_window=window)
    f, msgs = s.figures, t.messages
    counts = count_messages(msgs, tok)
    assert f.messages == len(msgs)
    assert f.tokens == sum(counts)
    assert f.chars == sum(m.chars() for m in msgs)
    rows: dict[str, list[int]] = {}
    for m, n in zip(msgs, counts, strict=True):
        r = rows.setdefault(KIND_INJECTED if is_injected(m) else m.role, [0, 0, 0])
        r[0], r[1], r[2] = r[0] + 1, r[1] + n, r[2] + m.chars()
    assert {k: [v.messages, v.tokens, v.chars] for k, v in f.by_role.items() if v.messages} == rows
    calls = [b for m in msgs for b in m.content if b.type == "tool_call"]
    assert f.tool_calls == len(calls)
    assert list(f.tool_calls_by_name.items()) == list(Counter(b.name or "?" for b in calls).items())
    system = [(n, m.chars()) for m, n in zip(msgs, counts, strict=True) if m.role == "system"]
    assert (f.system_prompt_tokens, f.system_prompt_chars) == (sum(n for n, _ in system), sum(c for _, c in system))
    assert s.model == last_model(t)


@given(st.text())
def test_whitespace_only_as_strip_says(s: str) -> None:
    """The injected-text rule skips a text of only whitespace (``isspace``): what ``strip``
    would leave nothing of."""
    assert bool(s.strip()) == bool(s and not s.isspace())


# -- the shortcuts of the pieces transcript_stats asks (timestamps, the context view, usage) --------

LINE_OBJS = st.sampled_from([
    {}, "x", [1], {"role": "user"}, {"timestamp": "2026-01-02T03:04:05Z"}, {"timestamp": "2026-01-02T03:04:05.5+02:00"},
    {"timestamp": "2026-01-01T00:00:00"}, {"timestamp": "bad", "created_at": 1.7e9}, {"created_at": 1.7e12},
    {"time": 1_700_000_000}, {"time": True}, {"timestamp": 10**30}, {"timestamp": ""}, {"timestamp": None},
    {"message": {"timestamp": "2026-03-01T00:00:00Z"}}, {"message": {"timestamp": 1.7e12}}, {"message": "x"},
])


@st.composite
def timed_entries(draw: Any) -> list[Any]:
    out: list[Any] = []
    for kind in draw(st.lists(st.sampled_from(["message", "record", "compaction", "cont"]), max_size=12)):
        lines = [Line(o, None, 1) for o in draw(st.lists(LINE_OBJS, max_size=2))]
        if kind == "record":
            out.append(Record(Line(draw(LINE_OBJS), None, 1), "x"))
        elif kind == "compaction":
            out.append(Compaction("s", lines=lines))
        elif kind == "cont" and out and isinstance(out[-1], Message):
            out.append(Cont(out[-1], 1))
        else:
            out.append(Message("user", [], lines=lines))
    return out


@given(timed_entries())
def test_span_is_the_earliest_and_latest_entry_time(entries: list[Any]) -> None:
    """span reads each entry's first line in place and passes over dicts with none of the keys:
    the answer of entry_time asked of every entry."""
    times = [d for d in map(entry_time, entries) if d is not None]
    expected = (min(times), max(times)) if times else (None, None)
    assert span(entries) == expected
    assert span(Transcript("pi", entries)) == expected


@settings(max_examples=300)
@given(messages())
def test_a_summary_is_marked_or_a_user_message(m: Message) -> None:
    """view asks is_summary only of a user message or one with a marked kind or hints."""
    if is_summary(m):
        assert m.role == "user" or m.extra or m.metadata.kind == KIND_COMPACTION_SUMMARY


@given(st.builds(Usage, st.integers(0, 9), st.integers(0, 9), st.integers(0, 9), st.integers(0, 9)))
def test_a_usage_is_always_true(u: Usage) -> None:
    """context_tokens and resolve find a message with usage by truth (``any(map(USAGE, ...))``)."""
    assert bool(u)


@settings(max_examples=200, deadline=None)
@given(transcripts(), st.integers(0, 5))
def test_context_tokens_are_estimate_contexts_figures(t: Transcript, trust_from: int) -> None:
    msgs = t.messages
    tok = get_tokenizer("heuristic")
    counts = count_messages(msgs, tok)
    e = estimate_context(msgs, tok, counts, trust_from=trust_from)
    assert context_tokens(msgs, tok, counts, None, trust_from) == (e.tokens, e.usage_tokens, e.trailing_tokens, e.source)


@settings(max_examples=200, deadline=None)
@given(transcripts(), st.sampled_from([None, 100_000]))
def test_context_figures_are_resolves(t: Transcript, window: int | None) -> None:
    """transcript_stats asks context_figures (no ContextInfo, no wording): resolve's figures."""
    tok = get_tokenizer("heuristic")
    cs = ContextSettings(window=window)
    counts = count_messages(t.messages, tok)
    chars = [m.chars() for m in t.messages]
    for given_counts, given_chars in ((None, None), (counts, chars)):
        ci = resolve(t, settings=cs, tokenizer=tok, counts=given_counts, chars=given_chars)
        w, ws, m, ms, tokens, source, usage, trailing, v, n_chars, _ = context_figures(t, cs, tok, given_counts, given_chars)
        assert (w, ws, m, ms, tokens, source, usage, trailing, len(v.indices), n_chars, v.boundary) == (
            ci.window, ci.window_source, ci.model, ci.model_source, ci.tokens, ci.tokens_source, ci.usage_tokens,
            ci.trailing_tokens, ci.messages, ci.chars, ci.boundary)


@settings(max_examples=200, deadline=None)
@given(transcripts())
def test_last_model_given_the_messages(t: Transcript) -> None:
    """last_model over the transcript's messages (skipped when none names a model) answers as over its entries."""
    assert last_model(t, t.messages) == last_model(t)


@given(st.lists(st.integers(1, 9), max_size=700), st.sampled_from([1, 20, 600]))
def test_largest_outputs_are_nlargests(sizes: list[int], repeat: int) -> None:
    """The largest outputs (stats.figures.largest) are picked by a sort up to _SORT_UP_TO and by
    heapq.nlargest beyond: the same answer (ties: the earlier first)."""
    outputs: list[Any] = [(n, i, None, None) for i, n in enumerate(sizes * (repeat if len(sizes) < 50 else 1))]
    assert largest(outputs, itemgetter(0)) == heapq.nlargest(TOP_OUTPUTS, outputs, key=itemgetter(0))
