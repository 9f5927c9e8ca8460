"""What the assistant said: decisions as whole sentences (rejected designs marked rejected, no
fragments such as "Let me try a different approach:"), its latest intentions (next steps) and
its last statements (the current state)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...model import Message
from ...text import lazyre
from ...text.prose import one_line
from .requests import user_words
from .text import sentences

MAX_DECISIONS = 10
DECISION_CLIP = 300

_DECISION_RE = lazyre.compile(
    r"\b(decided|decide to|i'll use|we'll use|i will use|we will use|going with|go with|instead of|chose|opted|"
    r"settled on|switch(?:ed)? to|the design is|rejected|won't use|will not use|abandon(?:ed)?|reverted?)\b",
    re.I,
)
_REJECTED_RE = lazyre.compile(
    r"\b(rejected|won't use|will not use|not going to|abandon(?:ed)?|reverted?|dropped|no longer)\b",
    re.I,
)
#: hypotheses, guesses and complaints: not decisions
_HEDGE_RE = lazyre.compile(
    r"\b(maybe|perhaps|might|could be|possibly|probably|i think|i suspect|seems?|appears?|wonder|hypothes\w+|"
    r"mess|ugh|terrible|awful)\b|\?\s*$",
    re.I,
)
#: what an approval goes on to ask for ("ok, create a branch", "yes, start implementing")
_ACTION_RE = lazyre.compile(r"\b(go|do|start|implement\w*|proceed|create|use|continue|ship|commit|merge|apply|"
                            r"keep|add|write|build|make|fix|try|run)\b", re.I)
#: a user's approval or choice (of what the assistant proposed)
_APPROVAL_RE = lazyre.compile(
    r"^(?:yes|yep|yeah|ok(?:ay)?|sure|go ahead|do it|sounds good|looks good|lgtm|approved?|proceed|perfect|"
    r"let'?s (?:go with|do|use)|go with|use (?:option|approach)|option \w+\b)",
    re.I,
)
#: intentions and narration, not decisions
_FRAGMENT_RE = lazyre.compile(
    r"^(?:let me|now let me|let's|now,? i'll|i'll now|i will now|first,? (?:let me|i'll)|next,? (?:let me|i'll)|"
    r"perfect|great|good|okay|ok|now)\b",
    re.I,
)
_NEXT_RE = lazyre.compile(
    r"\b(next step|next,? (?:i|we)\b|(?:i|we)'ll next|then (?:i|we)'ll|(?:i|we) will now|now (?:i|we)'ll|"
    r"let me (?!know)|todo|remaining|still need|(?:i|we) need to)",
    re.I,
)


@dataclass(slots=True)
class Said:
    statements: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)  # "**Decided**: ..." / "**Rejected**: ..."
    next_hints: list[str] = field(default_factory=list)


def is_decision(s: str) -> bool:
    """A whole sentence stating a decision or a finding, not a fragment or a narration."""
    s = s.strip()
    if len(s) < 25 or len(s) > 500 or s.endswith(":") or _FRAGMENT_RE.match(s):
        return False
    if _HEDGE_RE.search(s):
        return False
    if unicodedata.category(s[0]) == "So":  # "✅ Simpler structure": a status bullet, not a sentence
        return False
    words = re.findall(r"[A-Za-z]+", s)
    if not s.endswith((".", "!", "?", "`", '"')) and sum(w[0].isupper() for w in words) >= 0.6 * len(words):
        return False  # a heading ("Key Benefits of This Approach"), not a sentence
    return bool(_DECISION_RE.search(s))


def decision_item(s: str) -> str:
    kind = "Rejected" if _REJECTED_RE.search(s) else "Decided"
    return f"**{kind}**: {one_line(s, DECISION_CLIP)}"


def approval(user_text: str, proposal: str) -> str | None:
    """A user's approval or choice of what the assistant last proposed, as a decision."""
    said = " ".join(user_text.split())
    m = _APPROVAL_RE.match(said) if said and len(said) <= 400 else None
    if m is None:
        return None
    rest = said[m.end():].strip(" ,.!:;-")
    bare = m.group(0).lower() in ("yes", "yep", "yeah", "ok", "okay", "sure", "perfect")
    if bare and rest and not _ACTION_RE.search(rest):  # "ok, i hope ..." is a remark, not an approval
        return None
    mine = set(re.findall(r"[a-z0-9_]{3,}", said.lower())) - {"yes", "let", "lets", "with", "the", "and", "sure", "okay"}
    cands = [x for x in sentences(proposal) if len(x) >= 12 and not _FRAGMENT_RE.match(x) and not _HEDGE_RE.search(x)]
    scored = [(len(mine & set(re.findall(r"[a-z0-9_]{3,}", x.lower()))), -i, x) for i, x in enumerate(cands)]
    best = max(scored) if scored else None
    first = best[2] if best and (best[0] > 0 or not mine) else ""
    return (f"**Decided** (the user: \"{one_line(said, 160)}\")" + (f" on: {one_line(first, DECISION_CLIP)}" if first else ""))


def said(msgs: Sequence[Message]) -> Said:
    out = Said()
    for m in msgs:
        if m.role == "user":
            got = approval(user_words(m), out.statements[-1]) if out.statements else None
            if got:
                out.decisions.append(got)
            continue
        if m.role != "assistant":
            continue
        txt = "\n".join(b.text for b in m.content if b.type == "text").strip()
        if not txt:
            continue
        out.statements.append(txt)
        for s in sentences(txt):
            if is_decision(s):
                out.decisions.append(decision_item(s))
    for s in sentences(out.statements[-1] if out.statements else ""):  # only the latest intentions
        if _NEXT_RE.search(s) and len(s) <= 400 and not s.endswith(":"):
            out.next_hints.append(one_line(s, 240))
    return out
