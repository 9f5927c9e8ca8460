"""A model's summary checked against the facts the transcript records (:class:`~.Facts`): the
claims about the task's state the records contradict (``failed_called_done``,
``fixed_called_open``, ``done_called_next``, ``countermanded``), each with the line quoted and
the fact. A line claims done when ticked ``[x]`` or saying done, ok, passed, fixed ... without a
negation; it claims open under a heading of current, pending, next, remaining or blocked work,
or as an unticked ``[ ]`` item."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...text import lazyre

if TYPE_CHECKING:
    from . import Facts

_HEAD = lazyre.compile(r"^(?:#{1,6}\s+(.*)|\*\*([^*]+)\*\*:?\s*)$")
_OPEN_HEAD = lazyre.compile(r"next|pending|remaining|to-?do|in progress|blocked|open|current|outstanding", re.I)
_DONE = lazyre.compile(r"\[x\]|✅|✓|\b(done|completed?|finished|passed|passes|succeeded|successful(?:ly)?|fixed|"
                       r"resolved|works|working|ok|green)\b", re.I)
_NOT = lazyre.compile(r"\b(not|never|fail\w*|errors?|broken|still|pending|todo|blocked|unresolved)\b|n't\b", re.I)
_COUNTER = lazyre.compile(r"\b(don'?t|do not|never|stop|no need to|remove|delete|revert|undo)\s+"
                          r"((?:the\s+)?[\w./-]+(?:\s+[\w./-]+){0,4})", re.I)
_UNDOING = lazyre.compile(r"\b(remov\w*|delet\w*|revert\w*|undo\w*|drop\w*)\b", re.I)
_WORD = lazyre.compile(r"[a-z0-9_][a-z0-9_./-]*[a-z0-9_]|[a-z0-9]", re.I)
_NOISE = frozenset("the a an to of and or in on for with is it this that be by as at 2>&1 head tail".split())
SHARE = 0.75  # the share of a fact's key words a line must hold to name it


@dataclass(frozen=True, slots=True)
class Disagreement:
    kind: str  # failed_called_done | fixed_called_open | done_called_next | countermanded
    line: str  # the summary's line
    fact: str  # what the transcript records

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "fact": self.fact}


@dataclass(frozen=True, slots=True)
class _Line:
    text: str
    words: frozenset[str]
    open: bool
    done: bool


def _words(text: str) -> list[str]:
    return [w for w in (x.lower() for x in _WORD.findall(text)) if w not in _NOISE]


def _lines(summary: str) -> list[_Line]:
    out = []
    in_open = False
    for raw in summary.splitlines():
        s = raw.strip()
        if not s:
            continue
        if (h := _HEAD.match(s)) is not None:
            in_open = bool(_OPEN_HEAD.search(h.group(1) or h.group(2) or ""))
            continue
        ticked, unticked = "[x]" in s.lower(), "[ ]" in s
        done = ticked or (bool(_DONE.search(s)) and not _NOT.search(s))
        out.append(_Line(s, frozenset(_words(s)), (in_open or unticked) and not ticked, done))
    return out


def _names(line: _Line, keys: list[str], share: float = SHARE) -> bool:
    ks = set(keys)
    named = len(ks) >= 2 or any("." in k or "/" in k for k in ks)  # one word names a thing only when a path
    return named and bool(ks) and len(ks & line.words) >= share * len(ks)


def check(facts: Facts, summary: str) -> list[Disagreement]:
    """The summary's claims the facts contradict (each line counted once)."""
    ls = _lines(summary)
    out: list[Disagreement] = []
    seen: set[str] = set()

    def add(kind: str, ln: _Line, fact: str) -> None:
        if ln.text not in seen:
            seen.add(ln.text)
            out.append(Disagreement(kind, ln.text[:300], fact[:300]))

    act = facts.act
    failing = [(f.family, f"{f.label} failed: {f.error}") for f in act.blocked()]
    failing += [(fam, f"{label}: {result}") for fam, (label, result) in act.checks.items() if result.startswith("FAILED")]
    for fam, fact in failing:
        keys = _words(fam.split(":", 1)[-1])[:6]
        for ln in ls:
            if ln.done and _names(ln, keys, 1.0):
                add("failed_called_done", ln, fact)
    for f in act.resolved():
        keys = [w for w in _words(f.error) if len(w) > 2][:12]
        for ln in ls:
            if ln.open and not ln.done and _names(ln, keys):
                add("fixed_called_open", ln, f"{f.label} failed ({f.error}), resolved by a later run ({f.resolved_by})")
    for it in facts.plan[1] if facts.plan else []:
        if not it.done:
            continue
        keys = _words(it.text)
        for ln in ls:
            if ln.open and not ln.done and _names(ln, keys):
                add("done_called_next", ln, f"plan item completed: {it.text}")
    for r in facts.reqs:
        for verb, obj in _COUNTER.findall(r.text):
            keys = _words(obj)
            undo = _UNDOING.match(verb) is not None  # "remove X": a step that still makes or edits X
            for ln in ls:
                if ln.open and not ln.done and _names(ln, keys) and not (undo and _UNDOING.search(ln.text)):
                    add("countermanded", ln, f"the user said: {' '.join(r.text.split())[:160]}")
    return out
