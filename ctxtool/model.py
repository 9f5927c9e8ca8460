"""The transcript model: a :class:`Transcript` is a list of entries in source order,
:class:`Message` (what the model saw or produced, of :class:`Block`), :class:`Record`
(bookkeeping lines kept verbatim), :class:`Cont` (a continuation line of a message split over
several lines) and :class:`Compaction`. Every message remembers its source lines; a writer emits
them verbatim unless the message changed (``dirty``), so a file written back in its own format
loses nothing."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .io import jsontext
from .tokens.heuristic import IMAGE_CHARS

ROLES = ("system", "user", "assistant", "tool")
BLOCK_TYPES = ("text", "thinking", "tool_call", "tool_result", "image")

# Message kinds used by context management (the Go agent).
KIND_TOOL_RESULT = "tool_result"
KIND_TOOL_RESULT_ARCHIVED = "tool_result_archived"
KIND_TOOL_SUMMARY = "tool_summary"
KIND_COMPACTION_SUMMARY = "compaction_summary"
HINT_SUMMARY = "compaction_summary"  # Message.extra: a reader marks a compaction summary its format records
KIND_INJECTED = "injected"  # a user-role message the agent wrote (skill text, command output, reminders)



@dataclass(slots=True)
class Line:
    """One source record: the parsed value, its original bytes (JSONL only) and line number.

    ``exact``: ``obj`` holds every number as its source text has it (JSON Lines are read
    fast, and made exact when a writer needs them: ``formats.base.exact_obj``)."""

    obj: Any
    raw: bytes | None = None
    lineno: int | None = None
    exact: bool = False


def _opt_str(v: object) -> bool:
    return v is None or isinstance(v, str)


@dataclass(slots=True)
class Block:
    """A content block.

    ``type`` is one of text, thinking, tool_call, tool_result, image.
    text/thinking use ``text``; tool_call uses ``id``, ``name``, ``arguments``;
    tool_result uses ``id`` (the call id), ``text`` (its content) and ``is_error``;
    image keeps its source in ``data``. ``extra`` keeps source fields with no place here.
    """

    type: str
    text: str = ""
    id: str | None = None
    name: str | None = None
    arguments: Any = None
    is_error: bool = False
    data: Any = None
    extra: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # a reader handed a list or an object where the model keeps text: the source's shape
        # is wrong (the reader turns this into an input error naming the line)
        if not isinstance(self.text, str) or not _opt_str(self.id) or not _opt_str(self.name):
            raise TypeError(f"{self.type} block: text, id and name must be strings")

    def arguments_text(self) -> str:
        a = self.arguments
        if a is None:
            return ""
        if isinstance(a, str):
            return a
        return jsontext.encode(a, jsontext.COMPACT).decode("utf-8")

    def chars(self) -> int:
        """Characters this block contributes to the context (images: a fixed estimate)."""
        t = self.type
        if t == "text" or t == "thinking" or t == "tool_result":
            return len(self.text)
        if t == "tool_call":
            a = self.arguments
            return len(self.name or "") + (len(a) if isinstance(a, str) else len(self.arguments_text()))
        if t == "image":
            return IMAGE_CHARS
        return len(self.text)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.type}
        if self.type in ("text", "thinking"):
            d["text"] = self.text
        elif self.type == "tool_call":
            d["id"] = self.id
            d["name"] = self.name
            d["arguments"] = self.arguments
        elif self.type == "tool_result":
            d["call_id"] = self.id
            d["content"] = self.text
            if self.is_error:
                d["is_error"] = True
            if self.name:
                d["name"] = self.name
        elif self.type == "image":
            d["source"] = self.data
        else:
            d["text"] = self.text
        if self.extra:
            d["extra"] = self.extra
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Block:
        t = d["type"]
        extra = d.get("extra")
        if t in ("text", "thinking"):
            return cls(t, text=d.get("text", ""), extra=extra)
        if t == "tool_call":
            return cls(t, id=d.get("id"), name=d.get("name"), arguments=d.get("arguments"), extra=extra)
        if t == "tool_result":
            return cls(
                t,
                id=d.get("call_id"),
                text=d.get("content", ""),
                is_error=bool(d.get("is_error", False)),
                name=d.get("name"),
                extra=extra,
            )
        if t == "image":
            return cls(t, data=d.get("source"), extra=extra)
        return cls(t, text=d.get("text", ""), extra=extra)


@dataclass(slots=True)
class Usage:
    """Token usage: one API call's as the provider reports it (the tool-output cache spec), or a tally of
    many (``stats``, ``usage``: :meth:`add`, ``calls`` counting the calls added)."""

    input: int = 0
    output: int = 0
    cache_creation: int = 0  # prompt-cache writes
    cache_read: int = 0
    calls: int = 0  # API calls tallied (a tally's count; 0 for one call as recorded)

    @property
    def total(self) -> int:
        return self.input + self.cache_creation + self.cache_read + self.output

    def add(self, o: Usage) -> None:
        self.input += o.input
        self.output += o.output
        self.cache_creation += o.cache_creation
        self.cache_read += o.cache_read
        self.calls += o.calls

    def to_json(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_creation": self.cache_creation,
            "cache_read": self.cache_read,
            "total": self.total,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Usage:
        return cls(
            token_count(d.get("input")),
            token_count(d.get("output")),
            token_count(d.get("cache_creation")),
            token_count(d.get("cache_read")),
        )


MAX_COUNT = 1 << 63


def token_count(v: Any, what: str = "usage count") -> int:
    """A token count as a source records it: an integer, a whole float or a numeric string;
    missing, null and empty are 0. Anything else (``Infinity``, ``NaN``, an object, a number
    beyond 64 bits) is bad input: a :class:`CtxtoolError` the reader places in its file."""
    if v is None or v == "" or v is False:
        return 0
    n: int | None = None
    if isinstance(v, int) and not isinstance(v, bool):
        n = int(v)
    elif isinstance(v, float) and math.isfinite(v):
        n = int(v)
    elif isinstance(v, str) and v.strip().lstrip("-").isdigit() and len(v) < 30:
        n = int(v)
    if n is None or not -MAX_COUNT < n < MAX_COUNT:
        # lazy: start-up (loaded only when this runs: .errors)
        from .errors import CtxtoolError

        shown = v if isinstance(v, (int, float, str)) and len(repr(v)) < 40 else type(v).__name__
        raise CtxtoolError(f"{what} is not a token count: {shown!r}")
    return n


@dataclass(slots=True)
class Metadata:
    """Routing and bookkeeping metadata (the Go agent MessageMetadata, the tool-output cache spec output_ref).

    Unset visibility means visible.
    """

    agent_visible: bool | None = None
    user_visible: bool | None = None
    kind: str | None = None
    output_ref: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return (
            self.agent_visible is None
            and self.user_visible is None
            and self.kind is None
            and self.output_ref is None
            and not self.extra
        )

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.agent_visible is not None:
            d["agent_visible"] = self.agent_visible
        if self.user_visible is not None:
            d["user_visible"] = self.user_visible
        if self.kind is not None:
            d["kind"] = self.kind
        if self.output_ref is not None:
            d["output_ref"] = self.output_ref
        d.update(self.extra)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Metadata:
        if not d:
            return cls()
        d = dict(d)
        return cls(
            agent_visible=d.pop("agent_visible", None),
            user_visible=d.pop("user_visible", None),
            kind=d.pop("kind", None),
            # anything but an object stays in extra, where restore reports it
            output_ref=d.pop("output_ref") if isinstance(d.get("output_ref"), dict) else None,
            extra=d,
        )


@dataclass(slots=True, eq=False)
class Message:
    """One message the model saw or produced."""

    role: str
    content: list[Block]
    id: str | None = None
    metadata: Metadata = field(default_factory=Metadata)
    usage: Usage | None = None
    usage_key: str | None = None  # usage is counted once per key (Claude Code repeats it per line)
    model: str | None = None
    lines: list[Line] = field(default_factory=list)  # verbatim source lines
    dirty: bool = False  # changed since read: writers render it instead of copying its lines
    extra: dict[str, Any] = field(default_factory=dict)  # format-specific hints for writers

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or not _opt_str(self.id) or not _opt_str(self.model):
            raise TypeError("message: role, id and model must be strings")

    @property
    def agent_visible(self) -> bool:
        return self.metadata.agent_visible is not False

    @property
    def user_visible(self) -> bool:
        return self.metadata.user_visible is not False

    @property
    def lineno(self) -> int | None:
        return self.lines[0].lineno if self.lines else None

    def chars(self) -> int:
        return sum(b.chars() for b in self.content)

    def text(self) -> str:
        """The plain text of text blocks, joined."""
        return "\n".join(b.text for b in self.content if b.type == "text")

    def tool_calls(self) -> list[Block]:
        return [b for b in self.content if b.type == "tool_call"]

    def tool_results(self) -> list[Block]:
        return [b for b in self.content if b.type == "tool_result"]

    def touch(self) -> None:
        """Mark as changed so writers re-render it."""
        self.dirty = True

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": "message", "role": self.role}
        if self.id is not None:
            d["id"] = self.id
        d["content"] = [b.to_json() for b in self.content]
        if not self.metadata.is_empty():
            d["metadata"] = self.metadata.to_json()
        if self.usage is not None:
            d["usage"] = self.usage.to_json()
        if self.model:
            d["model"] = self.model
        return d


@dataclass(slots=True, eq=False)
class Record:
    """A bookkeeping line (progress, snapshot, duplicated event): kept, not a message."""

    line: Line
    kind: str = ""


@dataclass(slots=True, eq=False)
class Cont:
    """Position of the ``part``-th source line of a message that spans several lines."""

    message: Message
    part: int


@dataclass(slots=True, eq=False)
class Compaction:
    """A persisted compaction: the summary and the first message kept verbatim (pi-style compaction)."""

    summary: str
    first_kept_id: str | None = None
    tokens_before: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    lines: list[Line] = field(default_factory=list)
    dirty: bool = False

    def __post_init__(self) -> None:
        # as for a block: a value of the wrong type is the source's shape, an input error
        tb = self.tokens_before
        if not isinstance(self.summary, str) or not _opt_str(self.first_kept_id) or not (
            tb is None or (isinstance(tb, int) and not isinstance(tb, bool))
        ):
            raise TypeError("compaction: summary and first kept id must be strings, tokens before an integer")


Entry = Message | Record | Cont | Compaction


@dataclass(slots=True, eq=False)
class Transcript:
    """One conversation, in source order.

    ``record`` holds, for dataset formats, the other fields of the record the
    messages came from (``messages_key`` names where they sit), so they are kept.
    """

    format: str
    entries: list[Entry] = field(default_factory=list)
    path: str = "-"
    index: int = 0  # position of this transcript inside its file (datasets)
    id: str | None = None
    record: dict[str, Any] | None = None
    messages_key: str | None = None
    lineno: int | None = None  # line (JSONL datasets) or record number where it starts
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def messages(self) -> list[Message]:
        return [e for e in self.entries if isinstance(e, Message)]

    def iter_messages(self) -> Iterator[Message]:
        for e in self.entries:
            if isinstance(e, Message):
                yield e

    @property
    def compactions(self) -> list[Compaction]:
        return [e for e in self.entries if isinstance(e, Compaction)]

    @property
    def label(self) -> str:
        if self.id:
            return f"{self.path}#{self.id}" if self.index or self.record is not None else self.path
        return f"{self.path}#{self.index}" if self.record is not None else self.path

    def remove(self, doomed: set[int]) -> None:
        """Drop the messages whose ``id()`` is in ``doomed``, with their continuation lines."""
        self.entries = [
            e
            for e in self.entries
            if not (
                (isinstance(e, Message) and id(e) in doomed)
                or (isinstance(e, Cont) and id(e.message) in doomed)
            )
        ]


#: how a pinned instruction starts (``compact --pin``: ctxtool.compaction.pins)
PINNED_PREFIX = "[Pinned instructions]"
#: how agents mark what they inject into a user-role message (text prefixes, first match wins):
#: Claude Code's reminders, slash-command lines, caveats, hook output, skill documents and
#: continuation summaries; Codex's context; ctxtool's pinned instructions. The one table every
#: reader of user words asks.
INJECTED_PREFIXES: tuple[tuple[str, str], ...] = (
    ("<system-reminder>", "reminder"),
    ("<command-name>", "command"), ("<command-message>", "command"), ("<command-args>", "command"),
    ("<local-command-stdout>", "command"), ("<local-command-stderr>", "command"),
    ("<bash-input>", "command"), ("<bash-stdout>", "command"), ("<bash-stderr>", "command"),
    ("<user_shell_command", "command"),
    ("<local-command-caveat>", "caveat"), ("Caveat: The messages below", "caveat"),
    ("<user-prompt-submit-hook>", "hook"), ("<hook", "hook"),
    ("<environment_context", "context"), ("<user_instructions", "context"), ("# AGENTS.md", "context"),
    ("<INSTRUCTIONS>", "context"), ("<permissions", "context"), ("# CLAUDE.md", "context"),
    ("<turn_aborted", "interrupt"), ("[Request interrupted", "interrupt"),
    ("Base directory for this skill:", "skill"),
    ("This session is being continued from a previous conversation", "summary"),
    (PINNED_PREFIX, "pinned"),
)


_INJECTED_STARTS = tuple(prefix for prefix, _ in INJECTED_PREFIXES)


def injected_text(text: str) -> str | None:
    """The kind of injected content a user-role text is (see :data:`INJECTED_PREFIXES`), or
    None when it reads as the user's own words."""
    s = text.lstrip()
    if not s.startswith(_INJECTED_STARTS):  # one test for all of them: most texts are the user's
        return None
    return next((kind for prefix, kind in INJECTED_PREFIXES if s.startswith(prefix)), None)


def injected_kind(m: Message) -> str | None:
    """Why a user-role message is not the user's words: ``summary`` (a compaction summary),
    the kind of its text (:func:`injected_text`) when every text block is injected, else
    ``meta`` for Claude Code's other ``isMeta`` lines (skill bodies); None otherwise."""
    if m.role != "user":
        return None
    if m.metadata.kind == KIND_COMPACTION_SUMMARY:
        return "summary"
    # a text of only whitespace is not looked at (isspace: what strip() would leave nothing of, without a copy)
    kinds = [injected_text(b.text) for b in m.content if b.type == "text" and b.text and not b.text.isspace()]
    if kinds and all(kinds):
        return kinds[0]
    return "meta" if m.extra.get("is_meta") else None


def is_injected(m: Message) -> bool:
    """Whether a user-role message is content the agent injected rather than the user's words:
    marked so (kind ``injected`` or ``compaction_summary``, Claude Code's ``isMeta``), or made
    only of injected text (:func:`injected_kind`)."""
    if m.role != "user":
        return False
    if m.metadata.kind == KIND_INJECTED:
        return True
    return injected_kind(m) is not None


def source_lines(e: Entry) -> list[Line]:
    """The source lines an entry was read from (a continuation has none of its own)."""
    if isinstance(e, (Message, Compaction)):
        return e.lines
    if isinstance(e, Record):
        return [e.line]
    return []


def transcript_json(r: Any) -> dict[str, Any]:
    """How a per-transcript report names its transcript in JSON: ``transcript`` (its label),
    ``path``, ``index`` and ``id``, the fields of ``r`` of those names."""
    return {"transcript": r.transcript, "path": r.path, "index": r.index, "id": r.id}


def group_turns(msgs: Sequence[Message]) -> list[list[int]]:
    """Message indices of each assistant API call, in order."""
    turns: list[list[int]] = []
    cur: list[int] | None = None
    keys: set[str] = set()
    usage_seen = False
    prev_role = None
    for i, m in enumerate(msgs):
        if m.role != "assistant":
            prev_role = m.role
            cur = None
            continue
        new = cur is None or prev_role != "assistant"
        if not new and m.usage_key and keys and m.usage_key not in keys:
            new = usage_seen  # a second keyed response right after the first
        if not new and m.usage is not None and usage_seen and (m.usage_key is None or m.usage_key not in keys):
            new = True
        if new:
            cur = []
            turns.append(cur)
            keys = set()
            usage_seen = False
        assert cur is not None
        cur.append(i)
        if m.usage_key:
            keys.add(m.usage_key)
        if m.usage is not None and m.usage.total > 0:
            usage_seen = True
        prev_role = "assistant"
    return turns
