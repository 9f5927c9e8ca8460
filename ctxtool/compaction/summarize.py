"""Summarization over the typed :class:`~ctxtool.summarizers.Summarizer` protocol: one request when
the prompt fits the model's window, else (or on a reported overflow) in chunks, each merged into
the running summary (pi-style's incremental update). The input is the summary input of
:mod:`ctxtool.summarizers.prompt`; a trailing assistant's stripped calls are named to the model
as calls still open."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..model import Message
from ..summarizers import ContextOverflowError, Summarizer
from ..summarizers import prompt as sp
from ..tokens.context import CALLED_MODEL_WINDOW
from ..tokens.heuristic import CHARS_PER_TOKEN, estimate

PROMPT_MARGIN_TOKENS = 1024


@dataclass(slots=True)
class SummaryOutcome:
    text: str
    calls: int
    chunks: int
    prompt_tokens: int


def open_calls(msgs: Sequence[Message]) -> list[str]:
    """Tool calls of a trailing assistant message (:func:`ctxtool.summarizers.prompt.trailing_calls`):
    the summary input drops them, the prompt names them."""
    return [f"{b.name}({sp.clip(b.arguments_text(), 200)})" for b in sp.trailing_calls(sp.visible_input(msgs))]


def summarize(
    summarizer: Summarizer,
    msgs: Sequence[Message],
    previous_summary: str | None,
    popts: sp.PromptOptions,
    extra: dict[str, Any] | None = None,
) -> SummaryOutcome:
    """The summary of ``msgs`` (merged into ``previous_summary``), in as many calls as the window needs."""
    inp = sp.summary_input(msgs)
    req = sp.build_request(inp, previous_summary, popts, extra=extra)
    window = summarizer.context_window or CALLED_MODEL_WINDOW
    budget_chars = max((window - popts.max_tokens - PROMPT_MARGIN_TOKENS) * CHARS_PER_TOKEN, 4000)
    chars = sp.prompt_chars(req)
    prompt_tokens = estimate(chars)
    if chars <= budget_chars:
        try:
            return SummaryOutcome(summarizer.summarize(req), 1, 1, prompt_tokens)
        except ContextOverflowError:
            budget_chars = chars // 2
    return _summarize_chunks(summarizer, inp, previous_summary, popts, extra, budget_chars, prompt_tokens)


def _chunks(inp: list[Message], per_chunk: int, tool_clip: int) -> list[list[Message]]:
    chunks: list[list[Message]] = []
    cur: list[Message] = []
    size = 0
    for m in inp:
        s = len(sp.serialize_message(m, tool_clip)) + 2
        if cur and size + s > per_chunk:
            chunks.append(cur)
            cur, size = [], 0
        cur.append(m)
        size += s
    if cur:
        chunks.append(cur)
    return chunks


def _summarize_chunks(
    summarizer: Summarizer,
    inp: list[Message],
    previous_summary: str | None,
    popts: sp.PromptOptions,
    extra: dict[str, Any] | None,
    budget_chars: int,
    prompt_tokens: int,
    depth: int = 0,
) -> SummaryOutcome:
    overhead = 6000 + len(previous_summary or "") + popts.max_tokens * CHARS_PER_TOKEN
    chunks = _chunks(inp, max(budget_chars - overhead, 2000), popts.tool_clip)
    running = previous_summary
    calls = 0
    early = {k: v for k, v in (extra or {}).items() if k != "open_calls"}  # open calls belong to the last chunk
    for i, ch in enumerate(chunks):
        req = sp.build_request(ch, running, popts, extra=extra if i == len(chunks) - 1 else early)
        try:
            running = summarizer.summarize(req)
            calls += 1
        except ContextOverflowError:
            if depth >= 3 or len(ch) < 2 and sp.prompt_chars(req) < 8000:
                raise
            sub = _summarize_chunks(summarizer, ch, running, popts, extra, sp.prompt_chars(req) // 2, 0, depth + 1)
            running = sub.text
            calls += sub.calls
    return SummaryOutcome(running or "", calls, len(chunks), prompt_tokens)
