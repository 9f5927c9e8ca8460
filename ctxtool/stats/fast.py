"""``stats`` without the transcript model: a dataset record's figures tallied from its parsed JSON
values (:class:`Tally`, per format class in :data:`TALLIES`) when they need nothing else; any
other record (usage, a model, timestamps, metadata, parts, positional pairs, a summary ...) is
read into the full model. ``window`` plans from the same tally. The figures are the same either
way: the tests compare both paths on every sample, corpus file and generated dataset."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from .. import formats
from ..errors import CtxtoolError
from ..formats.base import STRUCTURE_ERRORS, ErrorPolicy, Format
from ..formats.dataset import record_id
from ..history.pairing import Event
from ..io.jsonl import Source
from ..model import KIND_INJECTED, Line, Transcript, injected_text
from ..tokens.context import SUMMARY_PREFIX, ContextSettings
from ..tokens.count import FRAMING_PER_MESSAGE, FRAMING_PER_REPLY

_first = itemgetter(0)

#: where a read transcript carries its tally (a stand-in without messages: stats only reads)
TALLY_KEY = "stats_tally"


@dataclass(slots=True)
class Tally:
    """One record's figures before its tokens are counted: per message its ``by_role`` row
    and characters (and, for an exact tokenizer, its texts), plus what is counted once."""

    rows: list[str]
    chars: list[int]
    texts: list[list[str]] | None  # per message, in ctxtool.tokens.count.message_texts order (exact only)
    thinking: list[tuple[int, str]]  # (message, text) of each thinking block
    tool_calls: int
    tool_results: int
    calls_by_name: Counter[str]
    outputs: list[tuple[int, int, str, str | None, str | None, str | None]]  # chars, message, text, id, name, message id
    names: dict[str, str]  # call id -> tool name
    events: list[tuple[Event, ...]] | None  # per message, its calls and its result for pairing (``pairs`` only)


# Message keys whose figures the OpenAI tally knows; any other key (usage, model,
# timestamps, ctxtool metadata, function_call...) sends the record to the full model.
_OPENAI_KEYS = frozenset(("role", "content", "tool_calls", "tool_call_id", "name", "id", "reasoning_content"))
_OPENAI_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def tally_openai(items: list[Any], exact: bool, pairs: bool = False) -> Tally | None:
    """The tally of an OpenAI chat message list, or None when it needs the full model.
    ``exact``: with each message's texts; ``pairs``: with its pairing events."""
    rows: list[str] = []
    chars: list[int] = []
    texts: list[list[str]] | None = [] if exact else None
    thinking: list[tuple[int, str]] = []
    outputs: list[tuple[int, int, str, str | None, str | None, str | None]] = []
    names: dict[str, str] = {}
    events: list[tuple[Event, ...]] | None = [] if pairs else None
    calls_by_name: Counter[str] = Counter.__new__(Counter)  # empty, as stats.figures.new_counter makes it
    count_of = calls_by_name.get  # a name's count so far (Counter's own += asks its __missing__, in Python, per new name)
    n_calls = n_results = 0
    keys = _OPENAI_KEYS
    roles = _OPENAI_ROLES
    for i, o in enumerate(items):
        if type(o) is not dict or not keys.issuperset(o):
            return None
        role = roles.get(o.get("role"))  # type: ignore[arg-type]
        c = o.get("content")
        if role is None or not (c is None or type(c) is str) or ("content" not in o and "tool_calls" not in o):
            return None
        mid = o.get("id")
        if mid is not None and type(mid) is not str:
            return None
        mt: list[str] | None = [] if texts is not None else None
        if role == "tool":
            cid = o.get("tool_call_id")
            name = o.get("name")
            calls = o.get("tool_calls")
            if type(cid) is not str or not cid or not (name is None or type(name) is str) or not (calls is None or type(calls) is list):
                return None  # a result without its call's id is paired by position: the full model
            text = c or ""
            n = len(text)
            n_results += 1
            if events is not None:
                events.append(((False, cid, ()),))
            if n:
                outputs.append((n, i, text, cid, name, mid))
                if mt is not None:
                    mt.append(text)
            rows.append("tool")
        else:
            n = 0
            rc = o.get("reasoning_content")
            if rc and type(rc) is str:
                n += len(rc)
                thinking.append((i, rc))
                if mt is not None:
                    mt.append(rc)
            if c is not None:
                n += len(c)
                if mt is not None and c:
                    mt.append(c)
            calls = o.get("tool_calls")
            if calls:
                if type(calls) is not list:
                    return None
                evs: list[Event] = []
                for tc in calls:
                    if type(tc) is not dict:
                        return None
                    fn = tc.get("function") or {}
                    if type(fn) is not dict:
                        return None
                    cid, name, args = tc.get("id"), fn.get("name"), fn.get("arguments")
                    if (type(cid) is not str or not cid or not (name is None or type(name) is str)
                            or not (args is None or type(args) is str)):
                        return None  # a call without an id is paired by position: the full model
                    n += len(name or "") + len(args or "")
                    evs.append((True, cid, ()))
                    n_calls += 1
                    key = name or "?"
                    calls_by_name[key] = count_of(key, 0) + 1
                    if name:
                        names[cid] = name
                        if mt is not None:
                            mt.append(name)
                    if mt is not None and args:
                        mt.append(args)
                if events is not None:
                    events.append(tuple(evs))
            elif calls is not None and type(calls) is not list:
                return None
            elif events is not None:
                events.append(())
            if role == "user" and c:
                if c.startswith(SUMMARY_PREFIX):
                    return None  # a compaction boundary: the context view needs the model
                if not c.isspace() and injected_text(c) is not None:  # isspace: what strip() leaves nothing of, without a copy
                    role = KIND_INJECTED
            rows.append(role)
        chars.append(n)
        if mt is not None:
            texts.append(mt)  # type: ignore[union-attr]
    return Tally(rows, chars, texts, thinking, n_calls, n_results, calls_by_name, outputs, names, events)


def _openai(f: Format, rec: dict[str, Any], exact: bool, pairs: bool) -> Tally | None:
    key = f.messages_key(rec)  # type: ignore[attr-defined]
    if key is None:
        return None
    return tally_openai(rec[key], exact, pairs)


#: format class -> the tally of one record (None: read it in full)
TALLIES: dict[type, Callable[[Format, dict[str, Any], bool, bool], Tally | None]] = {}


def _register_builtin() -> None:
    # lazy: start-up (`ctxtool stats` would load ctxtool.formats.openai)
    from ..formats.openai import OpenAIFormat

    TALLIES.setdefault(OpenAIFormat, _openai)


def tally_for(f: Format) -> Callable[[Format, dict[str, Any], bool, bool], Tally | None] | None:
    if not TALLIES:
        _register_builtin()
    return TALLIES.get(type(f))


#: what a reader makes of a record its tally accepts: (format, source, the record's line,
#: its stand-in, the tally in ``extra[TALLY_KEY]``) -> the transcript, or None: read it in full
Make = Callable[[Format, Source, Line, Transcript], Transcript | None]


def read(src: Source, fmt: str | Format | None, policy: ErrorPolicy, exact: bool,
         make: Make | None = None, pairs: bool = False,
         full: Callable[[Line], object] | None = None) -> Iterator[Transcript] | None:
    """The transcripts of a JSON Lines dataset source, each record a tally accepts as a
    stand-in carrying it (``t.extra[TALLY_KEY]``; ``make``: what it returns instead), every
    other read in full by its format (``full`` called on its line first); None when ``src``
    is not a dataset of a format with a tally (the caller reads it in full)."""
    if src.layout != "jsonl":
        return None
    f = formats.get_format(fmt) if isinstance(fmt, str) else fmt
    if src.peek and f is not None:  # a format named: only its own detection is asked
        if not formats.fits(f, src) or not f.records_per_line(src):
            return None  # the full reader reads it, or says why it fails
    elif src.peek:  # a whole file (a byte range of one is a dataset already: the runner split it)
        try:
            detected = formats.detect(src)
        except CtxtoolError:
            return None  # the full reader says why
        if not detected.records_per_line(src):
            return None
        f = detected
    if f is None:
        return None
    tally = tally_for(f)
    if tally is None:
        return None
    return _read(src, f, tally, policy, exact, make, pairs, full)


def _read(src: Source, f: Format, tally: Callable[[Format, dict[str, Any], bool, bool], Tally | None], policy: ErrorPolicy,
          exact: bool, make: Make | None, pairs: bool, full: Callable[[Line], object] | None) -> Iterator[Transcript]:
    name = f.name
    path = src.path
    for ln in src.lines(policy):
        obj = ln.obj
        tl = None
        if type(obj) is dict:
            try:
                tl = tally(f, obj, exact, pairs)
            except STRUCTURE_ERRORS:
                tl = None
        if tl is not None:
            i = ln.lineno - 1 if ln.lineno else 0
            t = Transcript(name, path=path, index=i, id=record_id(obj, i), record=obj, lineno=ln.lineno)
            t.extra[TALLY_KEY] = tl
            made = t if make is None else make(f, src, ln, t)
            if made is not None:
                yield made
                continue
        if full is not None:
            full(ln)
        yield from f.read_records(Source(path, "jsonl", peek=[ln]), policy)


def finish(t: Transcript, tl: Tally, counts: list[int], thinking_tokens: int, opts: dict[str, Any],
           window: Any) -> Any:
    """The :class:`ctxtool.stats.figures.TranscriptStats` of a tallied record, given each message's
    tokens (``counts``) and its thinking blocks' tokens; ``window`` is the resolved window
    (a record without a model: the same for every one)."""
    fig = _figures()
    RoleStats, tool_output = fig.RoleStats, fig.tool_output
    f = fig.Figures(tool_calls_by_name=tl.calls_by_name)
    chars = tl.chars
    by_role = f.by_role
    for row, n, c in zip(tl.rows, counts, chars, strict=True):  # Figures.add_message, inlined
        rs = by_role.get(row)
        if rs is None:
            rs = by_role[row] = RoleStats()
        rs.messages += 1
        rs.tokens += n
        rs.chars += c
    tokens = sum(counts)
    total_chars = sum(chars)
    sysr = f.by_role.get("system")
    f.messages = len(chars)
    f.tokens = tokens
    f.chars = total_chars
    f.tool_calls = tl.tool_calls
    f.tool_results = tl.tool_results
    f.thinking_blocks = len(tl.thinking)
    f.thinking_chars = sum(len(x) for _, x in tl.thinking) if tl.thinking else 0
    f.thinking_tokens = thinking_tokens
    if sysr is not None:
        f.system_prompt_chars = sysr.chars
        f.system_prompt_tokens = sysr.tokens
    f.framing_tokens = FRAMING_PER_MESSAGE * f.messages + (FRAMING_PER_REPLY if f.messages else 0)
    largest: list[Any] = []  # ToolOutput
    if tl.outputs:
        label = t.label
        names = tl.names
        lineno = t.lineno
        for n_out, i, text, cid, name, mid in fig.largest(tl.outputs, _first):
            largest.append(tool_output(label, mid, lineno, names.get(cid or "", name), counts[i], n_out, text))
    # no usage, no boundary, every message visible: the context is the sum of the estimates
    return fig.TranscriptStats.of(t, f, tokens, "estimate", window.window, opts["level"](total_chars), largest)


@functools.cache
def _figures() -> Any:
    """:mod:`ctxtool.stats.figures`, imported on first use (start-up: `ctxtool window` would
    load it) and kept: :func:`finish` runs once per record."""
    from . import figures

    return figures


def resolved_window(context: ContextSettings | None) -> Any:
    """The window of a record that names no model (every tallied record)."""
    return context.resolve(None) if context is not None else _no_settings_window()


@functools.cache
def _no_settings_window() -> Any:
    """No flag, no config: the same (frozen) answer for every task."""
    return ContextSettings().resolve(None)
