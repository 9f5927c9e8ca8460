"""The user's words: every request verbatim (clipped only past a generous cap, the clip
marked), corrections marked, constraints quoted. Injected content (skill documents, caveats,
command output, system reminders, hook output, instructions files, pinned instructions,
earlier summaries) is told by :func:`ctxtool.model.injected_text` and is never a request or
a constraint."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ...model import Message, injected_text, is_injected
from ...text import lazyre
from ...text.prose import one_line
from ..prompt import clip
from .text import sentences

REQUEST_CLIP = 2000  # one request, verbatim up to here
REQUESTS_BUDGET = 24000  # all requests together; past it the middle ones are shortened
SHORT_CLIP = 300
CONSTRAINT_CLIP = 240
MAX_CONSTRAINTS = 12

_CONSTRAINT_RE = lazyre.compile(
    r"\b(must|must not|mustn't|should|shouldn't|never|always|don't|do not|avoid|prefer|please|make sure|"
    r"ensure|only|without|no need|required?|need to|needs to|keep|use)\b",
    re.I,
)
_CORRECTION_RE = lazyre.compile(
    r"^(?:no\b|nope\b|wait\b|actually\b|stop\b|wrong\b|not (?:what|like)|that'?s not|that is not|it'?s not|"
    r"it is not|don'?t\b|do not\b|wtf\b|i said\b|i meant\b|instead\b|revert\b|undo\b|"
    r"hmm+\b|ugh\b)"
    r"|\b(?:i told you|not what i|you (?:forgot|missed|broke|ignored)|redundant|overcomplicat|too complex)",
    re.I,
)
#: a bare <context> block an agent injects as a user message (the agents' own markers are in
#: ctxtool.model.INJECTED_PREFIXES)
_CONTEXT_PREFIXES = ("<context>", "<task-notification>")
#: a slash command typed alone ("/mode", "/clear", "/model opus"): an instruction to the agent's UI, not a task
_SLASH = lazyre.compile(r"^/[\w:-]+(?:\s+\S+){0,2}\s*$")


@dataclass(slots=True)
class Request:
    text: str  # verbatim (clipped past REQUEST_CLIP, the clip marked)
    correction: bool
    index: int = 0  # position among the summarized messages


def user_words(m: Message) -> str:
    """The user's own text of a user-role message: injected text blocks left out.
    ``score`` has its own rule for this (:func:`ctxtool.score.records.own_words`), apart on purpose: a measure shares no code with what it measures."""
    if m.role != "user" or is_injected(m):
        return ""
    parts = [b.text for b in m.content if b.type == "text" and b.text.strip()]
    own = [p for p in parts if injected_text(p) is None and not p.lstrip().startswith(_CONTEXT_PREFIXES)
           and not _SLASH.match(p.strip())]
    return "\n\n".join(own).strip()


def collect(msgs: Sequence[Message]) -> tuple[list[Request], list[str]]:
    """Every user request in order, and the constraints quoted from them."""
    reqs: list[Request] = []
    constraints: list[str] = []
    for i, m in enumerate(msgs):
        if m.metadata.kind in ("compaction_summary", "tool_summary"):
            continue
        txt = user_words(m)
        if not txt:
            continue
        reqs.append(Request(clip(txt, REQUEST_CLIP), bool(_CORRECTION_RE.search(txt[:400])), i))
        for s in sentences(txt):
            if _CONSTRAINT_RE.search(s) and len(s) <= 400:
                constraints.append(f'"{one_line(s, CONSTRAINT_CLIP)}"')
    return fit(reqs), constraints


def fit(reqs: list[Request]) -> list[Request]:
    """Within :data:`REQUESTS_BUDGET`: the first and the latest requests stay verbatim; the
    ones in between are shortened to one clipped line, oldest first, until it fits."""
    total = sum(len(r.text) for r in reqs)
    i = 1
    while total > REQUESTS_BUDGET and i < len(reqs) - 1:
        short = one_line(reqs[i].text, SHORT_CLIP)
        if len(short) < len(reqs[i].text):
            total -= len(reqs[i].text) - len(short)
            reqs[i] = Request(short + f" [clipped from {len(reqs[i].text):,} characters]", reqs[i].correction,
                              reqs[i].index)
        i += 1
    return reqs
