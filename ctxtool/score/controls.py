"""The controls every report scores beside the summary, on the same cut and budget: what a real
summary must beat: ``none`` (no summary), ``content_free`` (:data:`CONTENT_FREE`, headings with
nothing of the session), ``identifiers`` (the removed part's identifiers and values, most used
first, one bag of words) and ``tail`` (the removed part's last budget tokens verbatim)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from ..model import Message
from . import records

CONTENT_FREE = (
    "## Goal\nContinue the task described in the conversation.\n\n"
    "## Progress\nWork was carried out as discussed.\n\n"
    "## Next Steps\nPick up where the conversation left off.\n"
)
CONTROLS = ("none", "content_free", "identifiers", "tail")


def serialize(msgs: list[tuple[int, Message]]) -> str:
    """The removed part as plain text: one paragraph per text, call and result."""
    out = []
    for _, m in msgs:
        for b in m.content:
            if b.type == "tool_call":
                out.append(f"[{m.role} called {b.name}] {b.arguments_text()}")
            elif b.type == "tool_result":
                out.append(f"[result] {b.text}")
            elif b.type == "text" and b.text:
                out.append(f"[{m.role}] {b.text}")
    return "\n\n".join(out)


def identifiers(msgs: list[tuple[int, Message]]) -> str:
    n: Counter[str] = Counter()
    for _, m in msgs:
        for b in m.content:
            srcs = records.strings(b) if b.type == "tool_call" else [b.text]
            n.update(v for src in srcs for v in records.values(src))
    return " ".join(v for v, _ in n.most_common())


def controls(msgs: list[tuple[int, Message]], tail: Callable[[str], str]) -> dict[str, str]:
    """Each control's text for the removed part ``msgs``; ``tail`` keeps a text's last budget tokens."""
    return {"none": "", "content_free": CONTENT_FREE, "identifiers": identifiers(msgs), "tail": tail(serialize(msgs))}
