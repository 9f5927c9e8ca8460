"""Probes: what a handoff must carry, drawn from the part of BEFORE that AFTER lost.

A probe kind is a registered class (:class:`ProbeKind`): it draws its probes from the lost
part (:class:`Part`) and checks each against AFTER (:class:`~ctxtool.score.text.Haystack`).
Add one with :func:`register_probe`; ``ctxtool score`` and ``compact``'s retention pick it up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from ..model import Block, Message, is_injected
from ..summary_prompt import extract_files
from .text import Haystack


@dataclass(frozen=True, slots=True)
class Probe:
    """One thing AFTER should still hold."""

    kind: str
    text: str  # what is shown (and asked about by the judge)
    target: str  # what is matched against AFTER
    message: int | None = None  # its message's index in BEFORE's context
    note: str = ""  # e.g. "resolved later"


@dataclass(slots=True)
class Part:
    """The part of BEFORE that AFTER no longer holds verbatim, with what the kinds need."""

    lost: list[tuple[int, Message]]  # (index in BEFORE's context, message)
    before: list[Message]  # BEFORE's whole context (a failure's fix may be in the kept part)
    calls: dict[str, Block] = field(default_factory=dict)  # tool call id -> call, all of BEFORE
    _files: tuple[list[str], list[str], dict[str, int]] | None = None

    def files(self) -> tuple[list[str], list[str], dict[str, int]]:
        """Files read (not modified) and modified by the lost part's tool calls
        (:func:`ctxtool.summary_prompt.extract_files`), and the message that first names each."""
        if self._files is None:
            where: dict[str, int] = {}
            for i, m in self.lost:
                if m.role == "assistant" and m.tool_calls():
                    r, w = extract_files([m])
                    for p in (*r, *w):
                        where.setdefault(p, i)
            read, mod = extract_files(m for _, m in self.lost)
            self._files = (read, mod, where)
        return self._files

    @classmethod
    def of(cls, lost: list[tuple[int, Message]], before: list[Message]) -> Part:
        calls = {b.id: b for m in before for b in m.tool_calls() if b.id}
        return cls(lost, before, calls)

    def user_words(self) -> list[tuple[int, str]]:
        """The user's own messages in the lost part (not injected context, not summaries), as text."""
        return [(i, t) for i, m in self.lost if (t := own_words(m))]

    def first_request(self) -> int | None:
        """The index in BEFORE of the user's first own message (the goal)."""
        return next((i for i, m in enumerate(self.before) if own_words(m)), None)

    def assistant_texts(self) -> list[tuple[int, str]]:
        out = []
        for i, m in self.lost:
            if m.role == "assistant":
                txt = "\n".join(b.text for b in m.content if b.type == "text").strip()
                if txt:
                    out.append((i, txt))
        return out


def own_words(m: Message) -> str:
    """The text of a user message in the user's own words ("" for injected context and summaries)."""
    if m.role != "user" or is_injected(m) or m.metadata.kind in ("compaction_summary", "tool_summary"):
        return ""
    return "\n".join(b.text for b in m.content if b.type == "text").strip()


class ProbeKind:
    """A kind of probe: subclass, set ``name``, ``category`` and ``help``, implement
    :meth:`extract` (and :meth:`check` when a passage match is not the rule)."""

    name: ClassVar[str] = ""
    category: ClassVar[str] = "recall"  # the judge's question family: recall | artifacts | continuation | decisions
    help: ClassVar[str] = ""

    def extract(self, part: Part) -> list[Probe]:
        raise NotImplementedError

    def check(self, probe: Probe, after: Haystack) -> bool:
        return after.has_passage(probe.target)

    def probe(self, text: str, target: str | None = None, message: int | None = None, note: str = "") -> Probe:
        return Probe(self.name, text, text if target is None else target, message, note)


_KINDS: dict[str, ProbeKind] = {}


def register_probe(kind: type[ProbeKind]) -> type[ProbeKind]:
    """Register a probe kind (usable as a class decorator)."""
    if not kind.name:
        raise ValueError("a probe kind needs a name")
    _KINDS[kind.name] = kind()
    return kind


def unregister_probe(name: str) -> None:
    _KINDS.pop(name, None)


def probe_kinds() -> Sequence[ProbeKind]:
    from . import kinds  # noqa: F401  (registers the built-in kinds)

    return tuple(_KINDS.values())


def get_probe_kind(name: str) -> ProbeKind:
    probe_kinds()
    return _KINDS[name]
