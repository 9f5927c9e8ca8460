"""Probes: what a handoff must carry, drawn from the part a compaction removed.

A probe kind is a registered class (:class:`ProbeKind`) with a ``weight`` (what losing it
costs): it draws its probes from the removed part (:class:`CompactionCut`) and checks each against
the summary (:class:`~ctxtool.score.text.Haystack`). Add one with :func:`register_probe`;
``ctxtool score`` and ``compact``'s retention pick it up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..model import Message
from . import records
from .text import Haystack, key_words


@dataclass(frozen=True, slots=True)
class Probe:
    """One thing the summary should hold."""

    kind: str
    text: str  # what is shown (and asked about by the judge)
    target: str  # what is matched: a value, or a passage whose key words are matched
    message: int | None = None  # its message's index in BEFORE's context
    note: str = ""  # e.g. "in progress", "used after the cut: edit"

    @property
    def keys(self) -> list[str]:
        return key_words(self.target)


@dataclass(slots=True)
class CompactionCut:
    """A cut: BEFORE's context, the part the compaction removed, and what came after it."""

    lost: list[tuple[int, Message]]  # (index in BEFORE's context, message), removed
    before: list[Message]  # BEFORE's context
    after: list[Message] = field(default_factory=list)  # after the cut: kept messages, then what followed
    kept: Haystack = field(default_factory=lambda: Haystack(""))  # the kept messages' text (in context anyway)
    _runs: list[records.Run] | None = None
    _lost_text: str | None = None

    def user_words(self) -> list[tuple[int, str]]:
        """The user's own messages in the removed part (not injected context, not summaries)."""
        return [(i, t) for i, m in self.lost if (t := records.own_words(m))]

    previous_summary: str = ""  # a compaction entry's summary BEFORE began with

    def first_request(self) -> int | None:
        """The index in BEFORE of the user's first own message with something to ask."""
        return next((i for i, m in enumerate(self.before) if len(key_words(records.own_words(m))) >= 4), None)

    def previous(self) -> tuple[int | None, str] | None:
        """The earlier summary BEFORE's context began with (a compaction entry's, or a summary
        message the cut removed), or None."""
        if self.previous_summary:
            return None, self.previous_summary
        for i, m in self.lost:
            if m.role == "user" and m.metadata.kind in records.SUMMARY_KINDS[:1]:
                return i, text_of(m)
        return None

    @property
    def cut(self) -> int:
        """The index in BEFORE after the last removed message."""
        return self.lost[-1][0] + 1 if self.lost else 0

    def runs(self) -> list[records.Run]:
        """BEFORE's calls with their results, up to the cut."""
        if self._runs is None:
            self._runs = records.runs(self.before[: self.cut])
        return self._runs

    @property
    def lost_text(self) -> str:
        """The removed part as lower-case text (calls, results and texts)."""
        if self._lost_text is None:
            self._lost_text = "\n".join(text_of(m) for _, m in self.lost).lower()
        return self._lost_text


def text_of(m: Message) -> str:
    out = []
    for b in m.content:
        if b.type == "tool_call":
            out.append(f"{b.name} {b.arguments_text()}")
        elif b.text and b.type != "thinking":
            out.append(b.text)
    return records.REDACTED.sub(" ", "\n".join(out))


class ProbeKind:
    """A kind of probe: subclass, set ``name``, ``category``, ``weight`` and ``help``,
    implement :meth:`extract` (and :meth:`check` when the key-word match is not the rule)."""

    name: ClassVar[str] = ""
    category: ClassVar[str] = "recall"  # the judge's question family: recall | artifacts | continuation | decisions
    weight: ClassVar[float] = 1.0
    help: ClassVar[str] = ""

    def extract(self, part: CompactionCut) -> list[Probe]:
        raise NotImplementedError

    def check(self, probe: Probe, summary: Haystack) -> bool:
        return summary.has_keys(probe.keys)

    def probe(self, text: str, target: str | None = None, message: int | None = None, note: str = "") -> Probe:
        return Probe(self.name, text, text if target is None else target, message, note)
