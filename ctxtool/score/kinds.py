"""The built-in probe kinds: the goal and every user request, the user's constraints and
corrections, files modified and read, failed tool calls (their error, resolved or not),
identifiers and values, the last plan and next step."""

from __future__ import annotations

import re
from bisect import bisect_right

from .. import lazyre
from .. import summary_prompt as sp
from ..model import Block, Message
from ..prose import one_line, sentences
from .probes import Part, Probe, ProbeKind, register_probe
from .text import Haystack, words

REQUEST_CAP = 2000  # a request longer than this is probed on its head
_SENT = lazyre.compile(r"(?<=[.!?])\s+|\n+")


def _sentences(text: str) -> list[str]:
    return sentences(text, _SENT)


@register_probe
class Goal(ProbeKind):
    name = "goal"
    category = "recall"
    help = "the session's first user request"

    def extract(self, part: Part) -> list[Probe]:
        first = part.first_request()
        return [self.probe(txt[:REQUEST_CAP], message=i) for i, txt in part.user_words() if i == first]


@register_probe
class Request(ProbeKind):
    name = "request"
    category = "recall"
    help = "every later user request, in the user's own words"

    def extract(self, part: Part) -> list[Probe]:
        first = part.first_request()
        return [self.probe(txt[:REQUEST_CAP], message=i) for i, txt in part.user_words()
                if i != first and len(words(txt)) >= 2]


_CONSTRAINT = lazyre.compile(
    r"\b(must|must not|mustn't|never|always|don't|do not|avoid|prefer|make sure|ensure|only|without|instead|"
    r"should|shouldn't|required?|no need|not allowed|keep)\b", re.I)
_CORRECTION = lazyre.compile(
    r"^(no[,!.]\s|nope\b|actually\b|wrong\b|that's (?:not|wrong)|that is not|stop\b|wait\b|i said\b|i meant\b|not that\b|"
    r"undo\b|revert\b)", re.I)


def _prose(s: str) -> bool:
    """A sentence of words, not a line of pasted code, JSON or log."""
    return "\\n" not in s and '{"' not in s and sum(c.isalpha() or c.isspace() for c in s) >= 0.75 * len(s)


@register_probe
class Constraint(ProbeKind):
    name = "constraint"
    category = "decisions"
    help = "the user's constraints, preferences and corrections"

    def extract(self, part: Part) -> list[Probe]:
        out: list[Probe] = []
        seen: set[str] = set()
        for i, txt in part.user_words():
            for s in _sentences(txt):
                if len(s) > 400 or len(words(s)) < 3 or not _prose(s) or not (_CONSTRAINT.search(s) or _CORRECTION.search(s)):
                    continue
                key = " ".join(words(s))
                if key not in seen:
                    seen.add(key)
                    out.append(self.probe(s, message=i))
        return out


class _Files(ProbeKind):
    category = "artifacts"
    modified = False

    def extract(self, part: Part) -> list[Probe]:
        read, mod, where = part.files()
        return [self.probe(p, message=where.get(p)) for p in (mod if self.modified else read)]

    def check(self, probe: Probe, after: Haystack) -> bool:
        p = probe.target
        if after.has_value(p):
            return True
        parts = [x for x in p.replace("\\", "/").split("/") if x]
        return len(parts) >= 3 and after.has_value("/".join(parts[-2:]))


@register_probe
class FileModified(_Files):
    name = "file_modified"
    help = "files the lost part modified"
    modified = True


@register_probe
class FileRead(_Files):
    name = "file_read"
    help = "files the lost part read (and did not modify)"


_ERROR_LINE = lazyre.compile(r"error|exception|failed|failure|fatal|denied|not found|no such|cannot|can't|invalid|"
                             r"refused|timed out|traceback|panic", re.I)


def error_line(text: str) -> str:
    """The line of a failed tool output that says what went wrong (the first error-like line
    of three words or more), else its first line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    telling = [ln for ln in lines if _ERROR_LINE.search(ln)]
    best = next((ln for ln in telling if len(words(ln)) >= 3), telling[0] if telling else (lines[0] if lines else ""))
    return one_line(re.sub(r"</?tool_use_error>", "", best), 200)


def _family(b: Block) -> str:
    """What a later success must share with a failure to resolve it: the same program and
    first arguments for commands, the same file for file tools, else the same tool."""
    cmd = sp.command_of(b)
    if cmd:
        ws = [w for w in cmd.split() if not w.startswith("-")][:3]
        return f"{b.name}:{' '.join(ws)}"
    args = sp.call_args(b)
    path = next((args[k] for k in sp.PATH_KEYS if isinstance(args.get(k), str)), None)
    return f"{b.name}:{path}" if path else str(b.name)


@register_probe
class Failure(ProbeKind):
    name = "failure"
    category = "decisions"
    help = "failed tool calls: the error, and whether a later call resolved it"

    def extract(self, part: Part) -> list[Probe]:
        lost = {i for i, _ in part.lost}
        later_ok: list[tuple[int, str]] = []  # (message index, family) of successful calls
        failed: list[tuple[int, Block, Block]] = []
        for i, m in enumerate(part.before):
            for r in m.tool_results():
                call = part.calls.get(r.id or "")
                if call is None:
                    continue
                if r.is_error:
                    if i in lost:
                        failed.append((i, call, r))
                else:
                    later_ok.append((i, _family(call)))
        out = []
        for i, call, r in failed:
            err = error_line(r.text)
            if not words(err):
                continue
            fam = _family(call)
            resolved = any(j > i and f == fam for j, f in later_ok)
            label = one_line(sp.command_of(call) or f"{call.name}({call.arguments_text()})", 120)
            out.append(self.probe(f"{label} failed: {err}", target=err, message=i,
                                  note="resolved later" if resolved else "unresolved"))
        return out

    def check(self, probe: Probe, after: Haystack) -> bool:
        return after.has_passage(probe.target, 0.6)


_VALUE_RES = (
    lazyre.compile(r"https?://[^\s)>\]\"'`,]+"),  # URLs
    lazyre.compile(r"(?<![\w/.-])(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]*\.\w{1,8}\b"),  # paths with an extension
    lazyre.compile(r"\bv?\d+\.\d+\.\d+(?:[-+.][\w.]+)?\b"),  # versions
    lazyre.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]{2,}\b"),  # environment variables, constants
    lazyre.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),  # uuids
    lazyre.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),  # hashes, commit ids
    lazyre.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,12}\b"),  # codes, ticket and booking ids
    lazyre.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"),  # snake_case names
    lazyre.compile(r"\b[a-z]+[A-Z][A-Za-z0-9]+\b"),  # camelCase names
    lazyre.compile(r"\b[A-Za-z_][\w.]*(?=\(\))"),  # function() names
)
_TICKED = lazyre.compile(r"`([^`\s]{3,80})`")


def values(text: str) -> list[str]:
    """Identifiers and values in a text: URLs, paths, versions, environment variables, ids,
    function and variable names (code-like words in backticks too)."""
    found: dict[str, None] = {}
    for rx in _VALUE_RES:
        for v in rx.findall(text):
            v = v.rstrip(".,:;")
            if len(v) >= 4:
                found.setdefault(v, None)
    for v in _TICKED.findall(text):
        if re.search(r"[_./:()\-]|[a-z][A-Z]|\d", v):
            found.setdefault(v.rstrip(".,:;"), None)
    # a value inside another found value (a path's file name in its path) is not a second probe
    vs = list(found)
    return [v for v in vs if not any(v != w and v in w for w in vs)]


def _message_text(m: Message) -> str:
    parts = []
    for b in m.content:
        if b.type == "tool_call":
            parts.append(b.arguments_text())
        elif b.text:
            parts.append(b.text)
    return "\n".join(parts)


def _uses(vals: set[str], msgs: list[Message]) -> dict[str, int]:
    """In how many of ``msgs`` each (lower-case) value appears, counted up to two."""
    texts = [_message_text(m).lower() for m in msgs]
    starts, pos = [], 0
    for t in texts:
        starts.append(pos)
        pos += len(t) + 1
    joined = "\x00".join(texts)
    out: dict[str, int] = {}
    for v in vals:
        seen: set[int] = set()
        at = joined.find(v)
        while at >= 0 and len(seen) < 2:
            k = bisect_right(starts, at) - 1
            seen.add(k)
            nxt = starts[k + 1] if k + 1 < len(starts) else len(joined)
            at = joined.find(v, max(at + 1, nxt))
        out[v] = len(seen)
    return out


@register_probe
class Identifier(ProbeKind):
    name = "identifier"
    category = "artifacts"
    help = "identifiers and values the user gave, or the assistant wrote and relied on (used in two messages or more)"

    def extract(self, part: Part) -> list[Probe]:
        read, mod, _ = part.files()
        files = {*read, *mod}
        out: dict[str, Probe] = {}
        for i, txt in part.user_words():
            for v in values(txt):
                out.setdefault(v.lower(), self.probe(v, message=i, note="user"))
        said = [(i, values(t)) for i, t in part.assistant_texts()]
        if said:
            uses = _uses({v.lower() for _, vs in said for v in vs}, part.before)
            for i, vs in said:
                for v in vs:
                    if uses[v.lower()] >= 2:
                        out.setdefault(v.lower(), self.probe(v, message=i, note="assistant"))
        return [p for p in out.values() if not any(p.target == f or f.endswith("/" + p.target) for f in files)]

    def check(self, probe: Probe, after: Haystack) -> bool:
        return after.has_value(probe.target)


_NEXT = lazyre.compile(r"\b(next|then|i'll|i will|we'll|we will|let me|let's|todo|remaining|still need|need to|plan|"
                       r"going to|step \d)\b", re.I)
PLAN_TOOLS = {"todowrite": ("todos", "content"), "update_plan": ("plan", "step"), "todo_write": ("todos", "content")}


@register_probe
class NextStep(ProbeKind):
    name = "next_step"
    category = "continuation"
    help = "the last plan (open to-do items) and the next step the assistant stated"

    def extract(self, part: Part) -> list[Probe]:
        out: list[Probe] = []
        said = part.assistant_texts()
        if said:
            i, txt = said[-1]
            sents = [s for s in _sentences(txt) if len(words(s)) >= 4]
            nxt = [s for s in sents if _NEXT.search(s)][-3:] or sents[-1:]
            out += [self.probe(one_line(s, 400), message=i) for s in nxt]
        for i, m in reversed(part.lost):
            plan = [b for b in m.tool_calls() if (b.name or "").lower() in PLAN_TOOLS]
            if plan:
                key, field = PLAN_TOOLS[(plan[-1].name or "").lower()]
                items = sp.call_args(plan[-1]).get(key)
                for it in items if isinstance(items, list) else []:
                    if isinstance(it, dict) and it.get("status") != "completed" and isinstance(it.get(field), str):
                        out.append(self.probe(one_line(it[field], 300), message=i, note="plan"))
                break
        return out

    def check(self, probe: Probe, after: Haystack) -> bool:
        return after.has_passage(probe.target, 0.6)
