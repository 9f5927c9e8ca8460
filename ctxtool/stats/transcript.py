"""What is in a transcript: messages, characters and tokens by role, tool calls and
outputs, thinking, images, system prompt, recorded usage, context percentage and the
AgentCore.Context warning/critical thresholds: how they are counted (the figures themselves:
:mod:`ctxtool.stats.figures`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .. import formats
from ..formats.timestamps import iso, span
from ..history.pairing import tool_names
from ..model import (
    KIND_INJECTED,
    Message,
    Transcript,
    is_injected,
)
from ..tokens.context import ContextSettings, context_figures, last_model, view
from ..tokens.count import (
    FRAMING_PER_MESSAGE,
    FRAMING_PER_REPLY,
    Tokenizer,
)
from ..tokens.heuristic import IMAGE_CHARS, estimate
from ..tool_outputs.saved import SAVED_OPEN, saved_output
from .figures import CRITICAL_CHARS, WARNING_CHARS, Figures, ToolOutput, TranscriptStats, largest

if TYPE_CHECKING:
    pass


def threshold_level(chars: int, warning: int = WARNING_CHARS, critical: int = CRITICAL_CHARS) -> str:
    """AgentCore.Context check_size (the ``chars`` policy): ``critical`` at/above the critical
    threshold, then ``warning``."""
    # lazy: start-up (loaded only when this runs: ..policies, ..policies.base, ..policies.settings)
    from ..policies import POLICIES
    from ..policies.base import Measure
    from ..policies.settings import PolicySettings

    return POLICIES.get("chars").evaluate(Measure(0, chars), PolicySettings(warning_chars=warning, critical_chars=critical)).status


def threshold_levels(warning: int = WARNING_CHARS, critical: int = CRITICAL_CHARS) -> Callable[[int], str]:
    """:func:`threshold_level` with the ``chars`` policy's thresholds resolved once (the
    status of the last one reached, as ``Policy.evaluate``): for one call per transcript
    (the same function again for the same policy and thresholds)."""
    return _levels(_policies().get("chars"), warning, critical)


@functools.cache
def _policies() -> Any:
    """The policy registry, imported on first use (start-up: loaded only when this runs) and
    kept: :func:`threshold_levels` is asked once per task (one record's, with ``records.process``)."""
    from ..policies import POLICIES

    return POLICIES


@functools.lru_cache(maxsize=32)
def _levels(policy: Any, warning: int, critical: int) -> Callable[[int], str]:
    # lazy: start-up (loaded only when this runs: ..policies.settings)
    from ..policies.settings import PolicySettings

    lim = policy.limits(None, PolicySettings(warning_chars=warning, critical_chars=critical))

    def level(chars: int) -> str:
        status = lim.status
        for th in lim.thresholds:
            if th.reached(chars):
                status = th.status
        return status

    return level


_NO_SETTINGS = ContextSettings()  # no flag, no config (frozen: one for every call)


def transcript_stats(
    t: Transcript,
    counts: list[int] | None,
    tok: Tokenizer,
    *,
    context_window: int | None = None,
    warning_chars: int = WARNING_CHARS,
    critical_chars: int = CRITICAL_CHARS,
    rows: list[dict[str, Any]] | None = None,
    context: ContextSettings | None = None,
    accuracy: bool = False,
) -> TranscriptStats:
    """Fold one transcript's messages into figures. ``counts`` are the messages' exact token
    counts; ``None`` means the heuristic (computed here from the characters). ``accuracy``:
    measure each estimate against the usage the transcript records (it counts the text again
    with every tokenizer and fits the calibration: asked for, not by default)."""
    v = view(t)  # the current context (asked below), its messages those of t
    msgs = v.messages
    f = Figures()
    by_role = f.by_role
    outputs: list[tuple[int, int, Message, Any]] = []
    seen_usage: set[str] = set()
    heuristic = counts is None
    all_counts: list[int] = []
    all_chars: list[int] = []
    call_names: list[str] = []  # each call's tool, in order (counted by name at the end)
    callers: list[Message] = []  # the messages that call tools (where the outputs' tools are named)
    calling: Message | None = None
    tool_results = tool_errors = saved = thinking_blocks = thinking_chars = thinking_tokens = images_n = documents = 0
    add_count, add_chars = all_counts.append, all_chars.append
    for i, m in enumerate(msgs):
        chars = 0
        images = 0
        for b in m.content:
            bt = b.type
            if bt == "text":
                chars += len(b.text)
            elif bt == "tool_result":
                text = b.text
                n_out = len(text)
                chars += n_out
                tool_results += 1
                if b.is_error:
                    tool_errors += 1
                if n_out:
                    outputs.append((n_out, i, m, b))
                    if text.startswith(SAVED_OPEN) and saved_output(text) is not None:
                        saved += 1
            elif bt == "tool_call":
                chars += b.chars()
                call_names.append(b.name or "?")
                if calling is not m:
                    calling = m
                    callers.append(m)
            elif bt == "thinking":
                text = b.text
                chars += len(text)
                thinking_blocks += 1
                thinking_chars += len(text)
                if text:
                    thinking_tokens += tok.count(text)
            elif bt == "image":
                images += 1
                if isinstance(b.data, dict) and b.data.get("type") == "document":  # formats.images.is_document
                    documents += 1
                else:
                    images_n += 1
            else:
                chars += len(b.text)
        n = estimate(chars, images) if heuristic else counts[i]  # type: ignore[index]
        add_count(n)
        if images:
            chars += images * IMAGE_CHARS
        add_chars(chars)
        role = m.role
        row = KIND_INJECTED if role == "user" and is_injected(m) else role
        rs = by_role.get(row)
        if rs is None:  # a role beyond the usual rows: a row of its own
            f.add_message(row, n, chars)
        else:
            rs.messages += 1
            rs.tokens += n
            rs.chars += chars
        if m.usage is not None:
            key = m.usage_key or f"#{i}"
            if key not in seen_usage:
                seen_usage.add(key)
                f.usage.add(m.usage)
                f.usage.calls += 1
        if rows is not None:
            rows.append(
                {
                    "transcript": t.label,
                    "index": i,
                    "id": m.id,
                    "line": m.lineno,
                    "role": m.role,
                    "kind": m.metadata.kind,
                    "agent_visible": m.agent_visible,
                    "chars": chars,
                    "tokens": n,
                    "tool_calls": sum(1 for b in m.content if b.type == "tool_call"),
                    "tool_results": sum(1 for b in m.content if b.type == "tool_result"),
                    "tools": ",".join(b.name or "?" for b in m.content if b.type == "tool_call"),
                }
            )
    f.tokens = sum(all_counts)
    f.chars = sum(all_chars)
    f.tool_calls = len(call_names)
    if call_names:
        f.tool_calls_by_name.update(call_names)
    f.tool_results = tool_results
    f.tool_errors = tool_errors
    f.saved_outputs = saved
    f.thinking_blocks = thinking_blocks
    f.thinking_chars = thinking_chars
    f.thinking_tokens = thinking_tokens
    f.images = images_n
    f.documents = documents
    system = by_role["system"]  # a system message's row is always its role's
    f.system_prompt_chars = system.chars
    f.system_prompt_tokens = system.tokens
    f.messages = len(msgs)
    f.unknown_types = formats.unknown_records(t)
    f.framing_tokens = FRAMING_PER_MESSAGE * f.messages + (FRAMING_PER_REPLY if f.messages else 0)
    first, last = span(t)
    settings = ContextSettings.of(context or (ContextSettings(window=context_window) if context_window else _NO_SETTINGS))
    # tokens.context.resolve's figures (its ContextInfo and wording of the estimator left out: not reported here)
    ctx = context_figures(t, settings, tok, all_counts, all_chars, v)
    top: list[ToolOutput] = []
    if outputs:
        names = tool_names(callers)
        label = t.label
        for n_out, i, m, b in largest(outputs, itemgetter(0)):
            out_tokens = all_counts[i] if len(m.content) == 1 else (estimate(n_out) if heuristic else tok.count(b.text))
            top.append(ToolOutput(label, m.id, m.lineno, names.get(b.id or "", b.name), out_tokens, n_out, 0, b.text))
    return TranscriptStats.of(
        t, f, ctx.tokens, ctx.tokens_source, ctx.window, threshold_levels(warning_chars, critical_chars)(ctx.chars),
        top, model=_recorded_model(t, ctx.model, ctx.model_source),
        first_timestamp=iso(first),
        last_timestamp=iso(last),
        accuracy=_accuracy(t) if accuracy and f.usage.calls else None,
        rate_limits=rl if isinstance(rl := t.extra.get("rate_limits"), dict) else None,
    )


def _recorded_model(t: Transcript, model: str | None, model_source: str) -> str | None:
    """The last model ``t`` records (:func:`last_model`), as the context resolver found it (the
    model in effect and its source): the model in effect unless a flag named another (a
    recorded model comes before the config's)."""
    if model_source == "flag":
        return last_model(t)
    return model if model_source == "transcript" else None


def _accuracy(t: Transcript) -> Any:
    """Each tokenizer's error against the input tokens the transcript records."""
    # lazy: start-up (`ctxtool stats` would load ctxtool.calibration)
    from ..calibration.accuracy import accuracy

    return accuracy(t)
