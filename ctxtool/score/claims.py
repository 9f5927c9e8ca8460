"""False claims: what a summary says about the task's state, checked against what the transcript
recorded up to the cut (runs with their exit status, plan and to-do records, the user's
countermands): ``failed_called_done``, ``fixed_called_open``, ``done_called_next``,
``countermanded``, each with the line quoted. The grader's definitions: docs/architecture.md,
"The grader"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..text import lazyre
from . import records
from .kinds import GENERIC, error_line
from .probes import CompactionCut
from .text import Haystack, key_words, words

_DONE = lazyre.compile(r"\b(done|completed?|finished|passed|passes|passing|succeeded|successful(?:ly)?|fixed|resolved|"
                       r"works|working|ok|okay|green|verified)\b|✓|✅|\[x\]", re.I)
_NOT_DONE = lazyre.compile(r"\b(not|n't|never|fail\w*|error\w*|broken|still|pending|todo|remaining|unresolved)\b", re.I)
_OPEN_HEAD = lazyre.compile(r"next|pending|remaining|todo|to do|in progress|open|outstanding|blocked|current", re.I)
_FAILING = lazyre.compile(r"\b(fails?|failing|broken|unresolved|still (?:an? )?error|open error|error persists)\b", re.I)
_HEAD = lazyre.compile(r"^(#{1,6}\s+|\*\*[^*]+\*\*:?\s*$|[A-Z][\w &/-]{2,40}:\s*$)")
_COUNTER = lazyre.compile(r"\b(?:don't|do not|dont|never|stop|no need to|not)\s+(?:\w+\s+){0,2}?"
                          r"((?:use|add|run|create|change|touch|delete|remove|write|implement|call|push|commit|make|"
                          r"install)\b[^.!?\n,;]{3,120})", re.I)
MATCH_SHARE = 0.75  # share of a record's key words a claim line must hold


@dataclass(frozen=True, slots=True)
class FalseClaim:
    kind: str  # failed_called_done | fixed_called_open | done_called_next | countermanded
    line: str  # the summary's line, quoted
    evidence: str  # what the transcript recorded
    message: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "evidence": self.evidence, "message": self.message}


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    open: bool  # under an open-work heading, or an unticked item
    done: bool  # says done/ok ...


def lines(summary: str) -> list[Line]:
    out = []
    section_open = False
    for raw in summary.splitlines():
        s = raw.strip()
        if not s:
            continue
        if _HEAD.match(s):
            section_open = bool(_OPEN_HEAD.search(s))
            body = _HEAD.sub("", s).strip(" *:")
            if not body:
                continue
            s = body
        ticked = "[x]" in s.lower()
        unticked = "[ ]" in s
        done = ticked or (bool(_DONE.search(s)) and not _NOT_DONE.search(s))
        out.append(Line(s, (section_open or unticked) and not ticked, done))
    return out


def _mentions(line: Haystack, keys: list[str]) -> bool:
    n = len(set(keys))
    return n >= 2 and line.overlap(keys) >= MATCH_SHARE


def false_claims(part: CompactionCut, summary: str) -> list[FalseClaim]:
    """The summary's claims the transcript contradicts (each summary line counted once)."""
    ls = [(ln, Haystack(ln.text)) for ln in lines(summary)]
    out: list[FalseClaim] = []
    used: set[str] = set()

    def add(kind: str, ln: Line, evidence: str, message: int | None) -> None:
        if ln.text not in used:
            used.add(ln.text)
            out.append(FalseClaim(kind, ln.text[:300], evidence, message))

    rs = part.runs()
    last: dict[str, records.Run] = {}  # each exact command's last run before the cut
    for r in rs:
        if r.command:
            last[" ".join(r.command.split())] = r
    for cmd, r in last.items():
        ws = words(cmd)[:12]
        if not r.failed or len(ws) < 2 or ws[0] in ("cd", "ls", "cat", "echo"):
            continue
        for ln, h in ls:
            if ln.done and h.has_words(" ".join(ws)):
                add("failed_called_done", ln, f"its last run before the cut failed: {cmd[:120]}", r.index)
    for n, r in enumerate(rs):
        if not r.failed:
            continue
        fix = next((x for x in rs[n + 1:] if not x.failed and x.family == r.family), None)
        err = error_line(r.output)
        if fix is None or not err:
            continue
        keys = [w for w in key_words(err) if w not in GENERIC]
        for ln, h in ls:
            if (ln.open or _FAILING.search(ln.text)) and not ln.done and _mentions(h, keys):
                add("fixed_called_open", ln, f"{err} (fixed by a later run, message {fix.index})", r.index)
    lost = [(i, m) for i, m in enumerate(part.before[: part.cut])]
    plan = records.last_plan(lost)
    if plan is not None:
        i, items = plan
        for it in items:
            keys = key_words(it.text)
            if not it.done or len(keys) < 2:
                continue
            for ln, h in ls:
                if ln.open and not ln.done and _mentions(h, keys):
                    add("done_called_next", ln, f"plan item {it.status}: {it.text[:160]}", i)
    for i, m in enumerate(part.before[: part.cut]):
        said = records.own_words(m)
        for obj in _COUNTER.findall(said) if said else ():
            keys = key_words(obj)
            if len(keys) < 2:
                continue
            for ln, h in ls:
                if ln.open and not ln.done and _mentions(h, keys):
                    add("countermanded", ln, f"the user said: {' '.join(said.split())[:160]}", i)
    return out
