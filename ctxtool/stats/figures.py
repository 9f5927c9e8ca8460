"""The figures ``stats`` reports: per role, per tool output, recorded usage, per transcript
and for a whole run (:class:`StatsReport`), with AgentCore.Context levels. How they are counted is
:mod:`ctxtool.stats.transcript`."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

from ..config import BY_KEY
from ..model import KIND_INJECTED, ROLES, Usage

if TYPE_CHECKING:
    from ..model import Transcript
    from ..tokens.models import ModelInfo

#: the rows of ``by_role``: the roles, with injected user-role lines apart
STATS_ROWS = (*ROLES[:2], KIND_INJECTED, *ROLES[2:])

# AgentCore.Context check_size defaults, in characters (the chars policy's settings: ctxtool.policies).
WARNING_CHARS = int(BY_KEY["context.warning_chars"].default)
CRITICAL_CHARS = int(BY_KEY["context.critical_chars"].default)
LEVELS = ("ok", "warning", "critical")
TOP_OUTPUTS = 10
T = TypeVar("T")
BATCH_MESSAGES = 1024


def new_counter() -> Counter[str]:
    """An empty Counter, as ``Counter()`` makes it without its ``__init__``'s update (two of
    them in each transcript's figures, one record's report making several)."""
    return Counter.__new__(Counter)


#: up to this many items a sort finds the largest sooner than heapq.nlargest (its heap wins beyond)
_SORT_UP_TO = 500


def largest(items: list[T], key: Callable[[T], Any]) -> list[T]:
    """The :data:`TOP_OUTPUTS` largest of ``items`` by ``key``, the earlier first among equals:
    ``heapq.nlargest``'s answer, which its documentation states as this sort, by the cheaper
    route for the count (a transcript or a record has tens of outputs: the sort is 2-4x quicker)."""
    if len(items) <= _SORT_UP_TO:
        return sorted(items, key=key, reverse=True)[:TOP_OUTPUTS]
    return heapq.nlargest(TOP_OUTPUTS, items, key=key)


def top_outputs(outputs: list[ToolOutput]) -> list[ToolOutput]:
    """The :data:`TOP_OUTPUTS` largest (tokens, then characters), the earlier first among equals."""
    return largest(outputs, output_size)


@dataclass(slots=True)
class RoleStats:
    messages: int = 0
    tokens: int = 0
    chars: int = 0

    def add(self, other: RoleStats) -> None:
        self.messages += other.messages
        self.tokens += other.tokens
        self.chars += other.chars

    def to_json(self) -> dict[str, int]:
        return {"messages": self.messages, "tokens": self.tokens, "chars": self.chars}


@dataclass(slots=True)
class ToolOutput:
    transcript: str
    message_id: str | None
    line: int | None
    tool: str | None
    tokens: int
    chars: int
    lines: int  # counted from ``text`` when first read (see counted)
    text: str | None = field(default=None, repr=False, compare=False)  # lines not counted yet (see counted)

    def counted(self) -> ToolOutput:
        """Itself with ``lines`` counted from ``text``, which it then lets go: an output may
        carry its text until it is known to be reported (most never are, on a large dataset).
        Reading ``lines`` counts them too: the value is the same whenever it is read."""
        if self.text is not None:
            _LINES.__set__(self, self.text.count("\n") + 1)
            self.text = None
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "transcript": self.transcript,
            "message_id": self.message_id,
            "line": self.line,
            "tool": self.tool,
            "tokens": self.tokens,
            "chars": self.chars,
            "lines": self.lines,
        }


# ``lines`` of an output made with its text is counted when first read (by anyone: equality,
# repr, to_json, pickling), not when the output is made: most outputs' lines are never asked
# for. The slot keeps the count; the property in its place counts first, and a count set
# (the dataclass's __init__ sets it before ``text``) lets go of any text not counted.
_LINES: Any = ToolOutput.__dict__["lines"]  # the slot's descriptor


def _set_lines(o: ToolOutput, n: int) -> None:
    o.text = None
    _LINES.__set__(o, n)


setattr(ToolOutput, "lines", property(lambda o: _LINES.__get__(o.counted()), _set_lines))  # noqa: B010

_new_object = object.__new__
_set_count = _LINES.__set__


def tool_output(transcript: str, message_id: str | None, line: int | None, tool: str | None, tokens: int, chars: int,
                text: str) -> ToolOutput:
    """``ToolOutput(transcript, message_id, line, tool, tokens, chars, 0, text)``, its lines
    not counted yet, made without the ``lines`` property's setter (the count is 0 until read):
    the same object, made once per output of every record a third sooner."""
    o = _new_object(ToolOutput)
    o.transcript, o.message_id, o.line, o.tool, o.tokens, o.chars = transcript, message_id, line, tool, tokens, chars
    _set_count(o, 0)
    o.text = text
    return o

#: an output's size, as the largest are ranked: (tokens, characters)
output_size = attrgetter("tokens", "chars")


@dataclass(slots=True)
class Figures:
    """Counts shared by one transcript and the totals."""

    messages: int = 0
    tokens: int = 0
    chars: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    tool_errors: int = 0
    thinking_blocks: int = 0
    thinking_tokens: int = 0
    thinking_chars: int = 0
    images: int = 0
    documents: int = 0  # document blocks (a PDF, a text file the user attached)
    #: tool outputs the agent saved to a file, the transcript holding a reference and a preview
    saved_outputs: int = 0
    system_prompt_chars: int = 0
    system_prompt_tokens: int = 0
    framing_tokens: int = 0
    # user-role lines the agent injected (skill text, command output, reminders, summaries) have
    # their own row: "user" counts only the user's words
    by_role: dict[str, RoleStats] = field(default_factory=lambda: {r: RoleStats() for r in STATS_ROWS})
    tool_calls_by_name: Counter[str] = field(default_factory=new_counter)
    usage: Usage = field(default_factory=Usage)  # the usage the transcript records, each call once
    #: records of types the format's reader does not know (kept verbatim): drift
    unknown_types: Counter[str] = field(default_factory=new_counter)

    def add_message(self, row: str, tokens: int, chars: int) -> None:
        """One message's tokens and characters to its ``by_role`` row (the totals apart)."""
        rs = self.by_role.get(row)
        if rs is None:
            rs = self.by_role[row] = RoleStats()
        rs.messages += 1
        rs.tokens += tokens
        rs.chars += chars

    def add(self, o: Figures) -> None:
        # field by field (no getattr loop): called once per transcript
        self.messages += o.messages
        self.tokens += o.tokens
        self.chars += o.chars
        self.tool_calls += o.tool_calls
        self.tool_results += o.tool_results
        self.tool_errors += o.tool_errors
        self.thinking_blocks += o.thinking_blocks
        self.thinking_tokens += o.thinking_tokens
        self.thinking_chars += o.thinking_chars
        self.images += o.images
        self.documents += o.documents
        self.saved_outputs += o.saved_outputs
        self.system_prompt_chars += o.system_prompt_chars
        self.system_prompt_tokens += o.system_prompt_tokens
        self.framing_tokens += o.framing_tokens
        by_role = self.by_role
        for r, s in o.by_role.items():
            if s.messages:
                mine = by_role.get(r)
                if mine is None:
                    mine = by_role[r] = RoleStats()
                mine.add(s)
        if o.tool_calls_by_name:
            self.tool_calls_by_name.update(o.tool_calls_by_name)
        if o.usage.calls:
            self.usage.add(o.usage)
        if o.unknown_types:
            self.unknown_types.update(o.unknown_types)

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "tokens": self.tokens,
            "chars": self.chars,
            "tool_calls": self.tool_calls,
            "tool_results": self.tool_results,
            "tool_errors": self.tool_errors,
            "thinking": {"blocks": self.thinking_blocks, "tokens": self.thinking_tokens, "chars": self.thinking_chars},
            "images": self.images,
            "documents": self.documents,
            "saved_outputs": self.saved_outputs,
            "system_prompt": {"chars": self.system_prompt_chars, "tokens": self.system_prompt_tokens},
            "framing_tokens": self.framing_tokens,
            "usage": {**self.usage.to_json(), "api_messages": self.usage.calls},
            "unknown_types": dict(self.unknown_types.most_common()),
        }


@dataclass(slots=True)
class TranscriptStats:
    path: str
    index: int
    id: str | None
    format: str
    figures: Figures
    context_tokens: int
    context_source: str
    context_window: int | None
    level: str
    largest: list[ToolOutput]
    label: str = ""  # path#id for a dataset record, else the path
    model: str | None = None  # the model the transcript records (the context resolver's)
    first_timestamp: str | None = None  # the earliest and latest times its lines record
    last_timestamp: str | None = None
    accuracy: Any = None  # ctxtool.calibration.accuracy.Accuracy: where the transcript records usage
    rate_limits: dict[str, Any] | None = None  # the last the agent recorded (Codex token_count.rate_limits)

    @classmethod
    def of(cls, t: Transcript, figures: Figures, context_tokens: int, context_source: str, context_window: int | None,
           level: str, largest: list[ToolOutput], **more: Any) -> TranscriptStats:
        """The stats of ``t``: where it is read from, its figures and its context."""
        return cls(t.path, t.index, t.id, t.format, figures, context_tokens, context_source, context_window, level, largest,
                   label=t.label, **more)

    @property
    def context_percent(self) -> float | None:
        if not self.context_window:
            return None
        return round(100.0 * self.context_tokens / self.context_window, 2)

    def to_json(self) -> dict[str, Any]:
        d = {"transcript": self.label or self.path, "path": self.path, "index": self.index, "id": self.id, "format": self.format,
             "model": self.model, "first_timestamp": self.first_timestamp, "last_timestamp": self.last_timestamp}
        d.update(self.figures.to_json())
        d["by_role"] = {r: s.to_json() for r, s in self.figures.by_role.items()}
        d["tool_calls_by_name"] = dict(self.figures.tool_calls_by_name.most_common())
        d["context"] = {
            "tokens": self.context_tokens,
            "source": self.context_source,
            "window": self.context_window,
            "percent": self.context_percent,
        }
        d["threshold"] = self.level
        d["largest_tool_outputs"] = [o.to_json() for o in self.largest]
        d["accuracy"] = self.accuracy.to_json() if self.accuracy is not None else None
        if self.rate_limits is not None:
            d["rate_limits"] = self.rate_limits
        return d


@dataclass(slots=True)
class Overview:
    """What a report says of all its transcripts, counted as they come (so that it holds
    when only some transcripts are kept): how many, how many at each AgentCore.Context level, the
    models they record, their earliest and latest timestamps."""

    count: int = 0
    levels: Counter[str] = field(default_factory=new_counter)
    models: set[str] = field(default_factory=set)
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    #: per file, the records of types its format's reader does not know (drift, warned about)
    drift: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, t: TranscriptStats) -> None:
        self.count += 1
        self.levels[t.level] += 1
        if t.model:
            self.models.add(t.model)
        self._times(t.first_timestamp, t.last_timestamp)
        if t.figures.unknown_types:
            self.drift.setdefault(t.path, Counter()).update(t.figures.unknown_types)

    def merge(self, o: Overview) -> None:
        self.count += o.count
        self.levels.update(o.levels)
        self.models |= o.models
        self._times(o.first_timestamp, o.last_timestamp)
        for path, c in o.drift.items():
            self.drift.setdefault(path, Counter()).update(c)

    def _times(self, first: str | None, last: str | None) -> None:
        if first and (self.first_timestamp is None or first < self.first_timestamp):
            self.first_timestamp = first
        if last and (self.last_timestamp is None or last > self.last_timestamp):
            self.last_timestamp = last


def most_context(transcripts: list[TranscriptStats], k: int) -> list[TranscriptStats]:
    """The ``k`` transcripts with the most context tokens, the earlier first among equals
    (applied again to its result plus later transcripts, it gives the same as on them all)."""
    return sorted(transcripts, key=lambda x: -x.context_tokens)[:k]


@dataclass(slots=True)
class StatsReport:
    """``transcripts``: every transcript's figures, in input order; with ``kept`` set, only
    the ``kept`` with the most context tokens (most first) when there are more, and
    ``overview`` counts them all."""

    tokenizer: str
    model: ModelInfo | None
    context_window: int | None
    warning_chars: int
    critical_chars: int
    totals: Figures
    transcripts: list[TranscriptStats]
    largest: list[ToolOutput]
    skipped: list[str]
    rows: list[dict[str, Any]] | None = None
    overview: Overview | None = None  # None: counted from ``transcripts``
    kept: int | None = None

    def __post_init__(self) -> None:
        if self.overview is None:
            self.overview = Overview()
            for t in self.transcripts:
                self.overview.add(t)

    @property
    def count(self) -> int:
        """How many transcripts the figures cover (``transcripts`` may keep fewer)."""
        assert self.overview is not None
        return self.overview.count

    @property
    def level(self) -> str:
        assert self.overview is not None
        return max((lv for lv in LEVELS if self.overview.levels[lv]), key=LEVELS.index, default=LEVELS[0])

    def to_json(self, *, transcripts: bool = True) -> dict[str, Any]:
        """The report as JSON; ``transcripts=False`` leaves out the per-transcript list
        (the CLI streams it instead of building it in memory)."""
        ov = self.overview
        assert ov is not None
        totals = self.totals.to_json()
        totals["transcripts"] = ov.count
        d = {
            "tokenizer": self.tokenizer,
            "model": self.model.to_json() if self.model else None,
            "context_window": self.context_window,
            "totals": totals,
            "by_role": {r: s.to_json() for r, s in self.totals.by_role.items()},
            "tool_calls_by_name": dict(self.totals.tool_calls_by_name.most_common()),
            "largest_tool_outputs": [o.to_json() for o in self.largest],
            "thresholds": {
                "warning_chars": self.warning_chars,
                "critical_chars": self.critical_chars,
                "level": self.level,
                "counts": {lv: ov.levels[lv] for lv in LEVELS},
            },
            "skipped": len(self.skipped),
            "skipped_errors": self.skipped[:20],
            "models": sorted(ov.models),
            "first_timestamp": ov.first_timestamp,
            "last_timestamp": ov.last_timestamp,
        }
        if transcripts:
            d["transcripts"] = [t.to_json() for t in self.transcripts]
        return d
