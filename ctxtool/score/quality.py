"""The one rule set that rejects a summary, applied to every summarizer's output before it replaces
anything (``ctxtool.compaction.core``): empty, an echo of the prompt or of its section template
(``ctxtool.summarizers.prompt``), an echo of its input, or a summary that repeats itself (a short
cycle of lines, or one line shape over and over with none of the requested sections)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from ..summarizers import prompt as sp
from ..text import lazyre
from .text import Haystack, words

DEGENERATE_MIN_LINES = 12
DEGENERATE_SHARE = 0.6
CYCLE_MAX_PERIOD = 4
CYCLE_MIN_LINES = 6
CYCLE_SHARE = 0.5
TEMPLATE_MIN_LINES = 3  # template lines (placeholders, instructions) that make a summary suspect
TEMPLATE_MIN_WORDS = 5  # words of its own a suspect summary must have
TEMPLATE_SHARE = 0.6  # or: this share of its lines is template
ECHO_SHARE = 0.8
ECHO_SECTIONED_SHARE = 0.95  # a summary in sections may quote its input (requests verbatim), not only copy it
ECHO_MIN_WORDS = 5
_DIGITS = lazyre.compile(r"\d+")
_BULLET = lazyre.compile(r"^(?:[-*+]\s*|\d+[.)]\s*)?(?:\[[ xX]?\]\s*)?")
_PLACEHOLDER = lazyre.compile(r"^(?:\*\*)?\[[^\]]*\](?:\*\*)?(?::\s*\[[^\]]*\])?$")

Source = str | Callable[[], str]


def reject(summary: str, source: Source = "") -> str | None:
    """Why ``summary`` is no summary (one line for the user), or None when it is acceptable.
    ``source`` is the summarized input as the model read it (or a function returning it,
    called only when needed)."""
    text = sp.strip_prefix(summary or "")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "the summarizer returned an empty summary"
    return cycle(lines) or degenerate(text) or prompt_echo(lines) or template_echo(lines) or input_echo(lines, source)


@cache
def _template_lines() -> frozenset[str]:
    texts = (sp.STRUCTURED_FORMAT, sp.STRUCTURED_PROMPT, sp.UPDATE_PROMPT, sp.SYSTEM_PROMPT, sp.SPLIT_TURN_NOTE,
             sp.RETAIN_SUMMARY_PROMPT, sp.RETAIN_PROMPT)
    lines = {" ".join(ws) for t in texts for ln in t.splitlines() if (ws := words(ln))}
    return frozenset(lines | {k for t in texts for k in _sentence_keys(t)})


@cache
def _instruction_lines() -> frozenset[str]:
    """The prompts' instruction sentences (not the section template the summary should fill)."""
    texts = (sp.STRUCTURED_PROMPT.replace(sp.STRUCTURED_FORMAT, ""), sp.UPDATE_PROMPT.replace(sp.STRUCTURED_FORMAT, ""),
             sp.SYSTEM_PROMPT, sp.SPLIT_TURN_NOTE, sp.RETAIN_SUMMARY_PROMPT, sp.RETAIN_PROMPT)
    return frozenset(k for t in texts for k in _sentence_keys(t) if len(k.split()) >= 4)


def _sentence_keys(text: str) -> list[str]:
    """The words of each sentence (or line part ending in a colon) of ``text``."""
    return [" ".join(ws) for ln in text.splitlines() for s in re.split(r"(?<=[.:])\s+", ln) if (ws := words(s))]


def prompt_echo(lines: list[str]) -> str | None:
    """The summary repeats the request itself: its <conversation> tags or two of its instructions."""
    if any(ln in ("<conversation>", "</conversation>") for ln in lines):
        return "the summary echoes the prompt (it holds the <conversation> it was given)"
    inst = _instruction_lines()
    found = sum(1 for k in _sentence_keys("\n".join(lines)) if k in inst)
    if found >= 2:
        return f"the summary echoes the prompt ({found} of its instructions repeated)"
    return None


def template_echo(lines: list[str]) -> str | None:
    """The summary is the prompt's template: its placeholders and instructions (three lines or
    more) with almost no content of its own, or more template lines than content lines."""
    tmpl = _template_lines()
    echoed = content = content_words = 0
    for ln in lines:
        if ln.startswith("#") or ln.lower().strip("<>/ ") in ("summary", "retain"):
            continue
        body = _BULLET.sub("", ln).strip()
        if not body:
            continue
        if _PLACEHOLDER.match(body) or " ".join(words(body)) in tmpl:
            echoed += 1
        else:
            content += 1
            content_words += len(words(body))
    if echoed >= TEMPLATE_MIN_LINES and (content_words < TEMPLATE_MIN_WORDS or echoed >= TEMPLATE_SHARE * (echoed + content)):
        return (f"the summary echoes the prompt's section template ({echoed} template line(s), "
                f"{content_words} word(s) of its own)")
    return None


def cycle(lines: list[str]) -> str | None:
    """A run of lines repeating with a short period (one to four lines) covering half the summary."""
    if len(lines) < CYCLE_MIN_LINES:
        return None
    norm = [" ".join(ln.lower().split()) for ln in lines]
    for p in range(1, CYCLE_MAX_PERIOD + 1):
        run = best = 0
        for i in range(len(norm) - p):
            run = run + 1 if norm[i] == norm[i + p] else 0
            best = max(best, run)
        covered = best + p
        if best >= 2 * p and covered >= max(CYCLE_MIN_LINES, CYCLE_SHARE * len(norm)):
            what = "one line" if p == 1 else f"a cycle of {p} lines"
            return f"the summary repeats {what} over {covered} of its {len(norm)} lines"
    return None


def degenerate(summary: str) -> str | None:
    """A small model stuck in a loop writes one line shape over and over (numbers aside) and
    none of the sections it was asked for; a summary with headings or ``<summary>`` tags is
    never judged here, however list-like it is."""
    lines = [ln.strip() for ln in summary.splitlines() if ln.strip()]
    if len(lines) < DEGENERATE_MIN_LINES or "<summary>" in summary:
        return None
    if any(ln.startswith("#") for ln in lines):
        return None
    shapes: dict[str, int] = {}
    for ln in lines:
        k = _DIGITS.sub("#", ln)
        shapes[k] = shapes.get(k, 0) + 1
    top = max(shapes.values())
    if top >= DEGENERATE_SHARE * len(lines):
        return f"the summary repeats one line {top} times in {len(lines)} and has none of the requested sections"
    return None


def input_echo(lines: list[str], source: Source) -> str | None:
    """The summary is the input copied back: most of its lines are passages of the input
    (headings aside); in a summary with sections, nearly all of them (section titles do not
    make a copy a summary)."""
    share = ECHO_SECTIONED_SHARE if sum(1 for ln in lines if ln.startswith("## ")) >= 2 else ECHO_SHARE
    long = [ln for ln in lines if not ln.startswith("#") and len(words(ln)) >= ECHO_MIN_WORDS]
    if len(long) < 3:
        return None
    src = source() if callable(source) else source
    if not src:
        return None
    hay = Haystack.of([src])
    copied = sum(1 for ln in long if hay.has_words(_BULLET.sub("", ln)))
    if copied >= share * len(long):
        return f"the summary echoes its input ({copied} of its {len(long)} lines are copied from the conversation)"
    return None
