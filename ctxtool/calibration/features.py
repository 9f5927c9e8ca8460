"""Content kinds and the turns that record usage: what a calibration is fitted to."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import KIND_COMPACTION_SUMMARY, Block, Compaction, Message, Transcript, Usage, group_turns

#: content kinds with a tokens-per-character rate of their own
KINDS = ("prose", "code", "json", "thinking")
#: the columns of the fit: the constant overhead, each kind's characters, the images
FEATURES = ("overhead", *KINDS, "image", "message")

# characters that are rare in prose and common in code, shell output and diffs
_CODE_CHARS = frozenset("{}[]()<>=;:_/\\|&*#$@`'\"+-%^~")
_SAMPLE = 4000  # characters of a text looked at to tell its kind


# a publisher's redaction marker that keeps the length of what it replaced, as in
# "[REDACTED_TEXT len=806 sha=d10ca27b]" (a Codex rollout published with every text blanked)
_PLACEHOLDER = re.compile(r"\[REDACTED_[A-Z_]+ len=(\d+) sha=[0-9a-f]+\]")
_MARK = "[REDACTED"


def placeholder_chars(text: str) -> int | None:
    """The characters ``text`` held before a publisher replaced parts of it with redaction
    markers that keep the length they replaced (``[REDACTED_TEXT len=806 sha=…]``); ``None``
    when it holds no such marker. The content kind of what was replaced is unknown: a
    calibration counts it as prose."""
    if _MARK not in text:
        return None
    marks = list(_PLACEHOLDER.finditer(text))
    if not marks:
        return None
    return len(text) - sum(m.end() - m.start() for m in marks) + sum(int(m.group(1)) for m in marks)


def redacted_share(t: Transcript) -> float:
    """The share of ``t``'s texts that are redaction markers (``[REDACTED…``): where most are,
    the characters in the file are not what the model saw, and an estimate from them applies
    only as far as the markers keep the replaced length (:func:`placeholder_chars`)."""
    n = red = 0
    for m in t.messages:
        for b in m.content:
            x = b.text if b.type != "tool_call" else b.arguments_text()
            if x:
                n += 1
                red += x.startswith(_MARK)
    return red / n if n else 0.0


def recorded_input(u: Usage) -> int:
    """The input tokens the provider counted for one call, cached ones included."""
    return u.input + u.cache_creation + u.cache_read


def text_kind(text: str) -> str:
    """``json`` for a text that is a JSON document, ``code`` for one dense in the symbols of
    code, shell output and diffs, else ``prose`` (judged on its first few thousand characters)."""
    s = text[:_SAMPLE]
    head = s.lstrip()[:1]
    if head in ("{", "[") and s.rstrip()[-1:] in ("}", "]") or head in ("{", "[") and len(text) > _SAMPLE:
        return "json"
    if not s:
        return "prose"
    sym = sum(1 for c in s if c in _CODE_CHARS)
    indented = s.count("\n ") + s.count("\n\t")
    lines = s.count("\n") + 1
    return "code" if sym > 0.06 * len(s) or (lines > 4 and indented > 0.4 * lines) else "prose"


def block_features(b: Block, out: list[float]) -> None:
    """Add one block's characters (or image) to a feature row (:data:`FEATURES` order)."""
    t = b.type
    if t == "image":
        out[5] += 1
        return
    if t == "tool_call":
        args = b.arguments_text()
        hidden = placeholder_chars(args)
        if hidden is None:
            out[3] += len(b.name or "") + len(args)
        else:
            out[1] += len(b.name or "") + hidden
        return
    text = b.text
    if not text:
        return
    hidden = placeholder_chars(text)
    if hidden is not None:
        out[1] += hidden
        return
    if t == "thinking":
        out[4] += len(text)
        return
    out[1 + KINDS.index(text_kind(text))] += len(text)


def message_features(m: Message) -> list[float]:
    row = [0.0] * len(FEATURES)
    for b in m.content:
        block_features(b, row)
    row[6] = 1.0  # its framing: role markers, ids, a tool call's wrapper
    return row


def _text_features(text: str) -> list[float]:
    row = [0.0] * len(FEATURES)
    if text:
        hidden = placeholder_chars(text)
        if hidden is None:
            row[1 + KINDS.index(text_kind(text))] += len(text)
        else:
            row[1] += hidden
    return row


# -- the turns that record usage -------------------------------------------------------------


@dataclass(slots=True)
class TurnSample:
    """One API call that records usage: its turn number, the recorded input tokens, the
    messages of the context it saw (indices into the transcript's messages) and the text of
    a compaction summary that context starts from."""

    turn: int
    recorded: int
    context: list[int]
    summary: str = ""
    segment: int = 0  # counts the compactions before it: each starts what the context holds anew


def turn_samples(t: Transcript) -> list[TurnSample]:
    """The turns of ``t`` that record input tokens, each with the context its call saw: the
    agent-visible messages before it, restarted at a compaction entry (its summary and the
    messages it keeps) or at a compaction-summary message."""
    # lazy: start-up (loaded only when this runs: ..tokens.context)
    from ..tokens.context import read_compaction

    msgs = t.messages
    groups = group_turns(msgs)
    start_of = {g[0]: k for k, g in enumerate(groups)}
    member = {i for g in groups for i in g}
    pos = {id(m): i for i, m in enumerate(msgs)}
    ctx: list[int] = []
    summary = ""
    out: list[TurnSample] = []
    for e in t.entries:
        if isinstance(e, Compaction):
            summary, target = read_compaction(t, e, msgs)
            at = next((k for k, i in enumerate(ctx) if msgs[i] is target), None) if target is not None else None
            ctx = ctx[at:] if at is not None else []
            continue
        if not isinstance(e, Message):
            continue
        i = pos[id(e)]
        k = start_of.get(i)
        if k is not None:
            recorded = 0
            for j in groups[k]:
                u = msgs[j].usage
                if u is not None and u.total > 0:
                    recorded = recorded_input(u)
            if recorded > 0:
                out.append(TurnSample(k + 1, recorded, list(ctx), summary))
        if not e.agent_visible:
            continue
        if e.metadata.kind == KIND_COMPACTION_SUMMARY and (ctx or summary) and i not in member:
            ctx, summary = [], ""
        ctx.append(i)
    for k in range(1, len(out)):
        out[k].segment = out[k - 1].segment + (0 if continues(out[k - 1], out[k]) else 1)
    return out


def continues(prev: TurnSample, cur: TurnSample) -> bool:
    """Whether ``cur``'s context is ``prev``'s plus what came since (no compaction between)."""
    return cur.summary == prev.summary and set(prev.context).issubset(cur.context)



def context_rows(t: Transcript, samples: Sequence[TurnSample]) -> list[list[float]]:
    """The feature row of each sample's context."""
    per_msg = [message_features(m) for m in t.messages]
    rows = []
    for s in samples:
        row = _text_features(s.summary)
        row[0] = 1.0
        for i in s.context:
            for j, v in enumerate(per_msg[i]):
                if v:
                    row[j] += v
        rows.append(row)
    return rows


