"""Where the agent's context starts: the view of a transcript that may hold compactions.

A recorded compaction (a :class:`~ctxtool.model.Compaction` entry, or a summary message
ctxtool wrote into a dataset) replaces everything before the first message it kept. Each
format says what its entry shows the agent and where its kept part starts
(:meth:`~ctxtool.formats.base.Format.read_compaction`); nothing here knows a format.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import KIND_COMPACTION_SUMMARY, Compaction, Message, Transcript, injected_kind
from ..summarizers import prompt as sp
from ..tokens.count import Tokenizer, count_messages


@dataclass(slots=True)
class AgentContext:
    """The agent's context in a transcript that may already hold compactions."""

    messages: list[Message]  # every message of the transcript
    effective: list[Message]  # what the agent sees (system prompt + messages after the last compaction)
    previous_summary: str | None = None
    previous_tokens: int = 0  # tokens of a previous summary that is not a message (compaction entry)
    prev_read: list[str] = field(default_factory=list)
    prev_modified: list[str] = field(default_factory=list)


def _last_marker(t: Transcript) -> Compaction | Message | None:
    for e in reversed(t.entries):
        if isinstance(e, Compaction) or (isinstance(e, Message) and e.metadata.kind == KIND_COMPACTION_SUMMARY):
            return e
    return None


def context_view(t: Transcript, tok: Tokenizer) -> AgentContext:
    # lazy: start-up (loaded only when this runs: ..formats)
    from ..formats import get_format

    msgs = t.messages
    marker = _last_marker(t)
    if marker is None:
        return AgentContext(msgs, list(msgs))
    pos = {id(m): i for i, m in enumerate(msgs)}
    if isinstance(marker, Message):
        i = pos[id(marker)]
        # a retain message and a summary message written together are one summary; the pinned
        # instructions written beside it (before a format's acknowledgement) are messages the
        # agent sees, as they are when they follow the summary
        j = i
        while j > 0 and msgs[j - 1].role == "user" and (msgs[j - 1].metadata.kind == KIND_COMPACTION_SUMMARY
                                                        or injected_kind(msgs[j - 1]) == "pinned"):
            j -= 1
        summary = [m for m in msgs[j : i + 1] if m.metadata.kind == KIND_COMPACTION_SUMMARY]
        pinned = [m for m in msgs[j : i + 1] if m.metadata.kind != KIND_COMPACTION_SUMMARY]
        prev = "\n\n".join(sp.strip_prefix(m.text()) for m in summary if m.role == "user")
        prev_tokens = sum(count_messages(summary, tok))
        start = i + 1
    else:
        pinned = []
        prev, target = get_format(t.format).read_compaction(t, marker)
        prev_tokens = tok.count(sp.SUMMARY_PREFIX + "\n\n" + prev)
        if target is not None and id(target) in pos:
            start = pos[id(target)]
        else:  # the messages after the compaction entry
            after = t.entries[t.entries.index(marker) + 1 :]
            first = next((e for e in after if isinstance(e, Message)), None)
            start = pos[id(first)] if first is not None else len(msgs)
    eff = [m for m in msgs[:start] if m.role == "system"]
    eff += pinned
    eff += [m for m in msgs[start:] if m.metadata.kind != KIND_COMPACTION_SUMMARY]
    r, w = sp.parse_file_lists(prev)
    return AgentContext(msgs, eff, sp.strip_file_lists(prev) or None, prev_tokens, r, w)
