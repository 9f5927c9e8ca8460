"""The built-in probe kinds and their weights (what losing one costs): goal, open state and
continuation weigh 3, a request or constraint 2, a continuation value or unresolved failure 1.5,
a modified file 1, an identifier 0.5; passages need enough key words to be probes. The table of
where each is drawn from: docs/architecture.md, "The grader"."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..model import Message
from ..registry import Registry
from ..text import lazyre
from . import records
from .probes import CompactionCut, Probe, ProbeKind, text_of
from .text import Haystack, key_words, words

REQUEST_CAP = 1500  # characters of a request probed (its ask comes first)
MIN_KEYS = 3
MIN_ASK = 4  # key words of a request: fewer is a reaction ("ok, looks good, continue")
HORIZON = 60  # messages after the cut in which continuation is looked for
ARG_CLIP = 300  # a longer argument is a body (code, a file's content), not a value the agent typed

# -- the registry of probe kinds: the built-in kinds below register themselves

PROBE_KINDS: Registry[ProbeKind] = Registry("probe kind")
#: register a probe kind (a class decorator); the built-in kinds of this module come first
register_probe = PROBE_KINDS.register_instance_of


def _clip(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _kept(part: CompactionCut, text: str) -> bool:
    """The kept messages hold this passage (contiguous words of its head)."""
    return part.kept.has_words(" ".join(words(text)[:12]))


_GOAL_SECTION = lazyre.compile(
    r"^[#*\s\d.]*(?:primary |main |overall )?(?:goal|request|intent|task|objective)s?\b[^\n]*\n+(.+?)(?=\n\s*\n\s*[#*\d]|\n#|\Z)",
    re.I | re.M | re.S)


@register_probe
class Goal(ProbeKind):
    name = "goal"
    category = "recall"
    weight = 3.0
    help = "the user's first request with something to ask, or the goal an earlier summary carried"

    def extract(self, part: CompactionCut) -> list[Probe]:
        prev = part.previous()
        if prev is not None:  # the session started before this context: its goal is the summary's
            i, txt = prev
            m = _GOAL_SECTION.search(txt)
            goal = " ".join(m.group(1).split())[:600] if m else ""
            return [self.probe(goal, message=i, note="from the previous summary")] \
                if len(key_words(goal)) >= MIN_KEYS else []
        first = part.first_request()
        return [self.probe(txt[:REQUEST_CAP], message=i) for i, txt in part.user_words()
                if i == first and not _kept(part, txt)]


@register_probe
class Request(ProbeKind):
    name = "request"
    category = "recall"
    weight = 2.0
    help = "every later user request, in the user's own words"

    def extract(self, part: CompactionCut) -> list[Probe]:
        first = part.first_request()
        return [self.probe(txt[:REQUEST_CAP], message=i) for i, txt in part.user_words()
                if i != first and len(key_words(txt[:REQUEST_CAP])) >= MIN_ASK and not _kept(part, txt)]


_CONSTRAINT = lazyre.compile(
    r"\b(must|never|always|don't|do not|dont|avoid|prefer|make sure|ensure|only|instead|should|shouldn't|"
    r"required?|no need|not allowed|keep|rather|stop|revert|undo)\b", re.I)
_SPLIT = lazyre.compile(r"(?<=[.!?])\s+|\n+")


def _prose(s: str) -> bool:
    """A sentence of words, not a line of pasted code, JSON or log."""
    return "{" not in s and sum(c.isalpha() or c.isspace() for c in s) >= 0.8 * len(s)


@register_probe
class Constraint(ProbeKind):
    name = "constraint"
    category = "decisions"
    weight = 2.0
    help = "the user's constraints, preferences and corrections"

    def extract(self, part: CompactionCut) -> list[Probe]:
        out: list[Probe] = []
        for i, txt in part.user_words():
            for s in _SPLIT.split(txt):
                s = s.strip(" -*>\t")
                if (len(s) <= 400 and _prose(s) and _CONSTRAINT.search(s) and len(key_words(s)) >= MIN_KEYS
                        and not _kept(part, s)):
                    out.append(self.probe(s, message=i))
        return out


@register_probe
class OpenState(ProbeKind):
    name = "open_state"
    category = "continuation"
    weight = 3.0
    help = "the open items of the last plan or to-do record the compaction removed"

    def extract(self, part: CompactionCut) -> list[Probe]:
        kept_after = [(i, m) for i, m in enumerate(part.before) if i >= part.cut]
        if records.last_plan(kept_after) is not None:  # a newer plan is in context anyway
            return []
        got = records.last_plan(part.lost)
        if got is None:
            return []
        i, items = got
        return [self.probe(_clip(it.text, 300), message=i, note=it.status) for it in items
                if not it.done and len(key_words(it.text)) >= 2]


_ERROR_LINE = lazyre.compile(r"error|exception|failed|failure|fatal|denied|not found|no such|cannot|can't|invalid|"
                             r"refused|timed out|traceback|panic|expected|undefined|assert", re.I)
GENERIC = frozenset(words("error errors fail failed failure exit code status command stderr stdout line file process "
                           "returned non zero warning tool use result output"))


def error_line(text: str) -> str:
    """The line of a failed output that says what went wrong: the first error-like line with
    three words beyond the generic ones, else ""."""
    for ln in text.splitlines():
        ln = re.sub(r"</?tool_use_error>", "", ln).strip()
        if _ERROR_LINE.search(ln) and len([w for w in key_words(ln) if w not in GENERIC]) >= MIN_KEYS:
            return _clip(ln, 200)
    return ""


def open_failures(part: CompactionCut) -> list[tuple[records.Run, str]]:
    """The removed part's failed runs no later run of the same step fixed before the cut,
    one per distinct error, with their error line."""
    lost = {i for i, _ in part.lost}
    rs = part.runs()
    out: dict[str, tuple[records.Run, str]] = {}  # the step's last failure
    for n, r in enumerate(rs):
        if not r.failed or r.index not in lost:
            continue
        if any(not x.failed and x.family == r.family for x in rs[n + 1:]):
            continue
        err = error_line(r.output)
        if err:
            out[r.family] = (r, err)
    errors: dict[frozenset[str], tuple[records.Run, str]] = {}
    for r, err in out.values():
        errors.setdefault(frozenset(key_words(err)), (r, err))
    return list(errors.values())


@register_probe
class Failure(ProbeKind):
    name = "failure"
    category = "decisions"
    weight = 1.5
    help = "failed runs still unresolved at the cut: the error"

    def extract(self, part: CompactionCut) -> list[Probe]:
        fixed_after = {r.family for r in records.runs(part.after) if not r.failed}
        out = []
        for r, err in open_failures(part):
            label = _clip(r.command or f"{r.call.name}", 100)
            note = "fixed after the cut" if r.family in fixed_after else "open"
            out.append(self.probe(f"{label} failed: {err}", target=err, message=r.index, note=note))
        return out


def has_path(hay: Haystack, p: str) -> bool:
    """A file is named: its path, its last two components, or a distinctive file name."""
    p = p.strip().replace("\\", "/")
    if hay.has_value(p):
        return True
    parts = [x for x in p.split("/") if x]
    if len(parts) >= 2 and hay.has_value("/".join(parts[-2:])):
        return True
    base = parts[-1] if parts else ""
    return len(base) >= 6 and "." in base.strip(".") and hay.has_value(base)


@register_probe
class FileModified(ProbeKind):
    name = "file_modified"
    category = "artifacts"
    weight = 1.0
    help = "files the removed part modified"

    def extract(self, part: CompactionCut) -> list[Probe]:
        out: dict[str, Probe] = {}
        for i, m in part.lost:
            for b in m.tool_calls():
                if records.modifies(b):
                    for f in records.files(b):
                        if not has_path(part.kept, f):
                            out.setdefault(f, self.probe(f, message=i))
        return list(out.values())

    def check(self, probe: Probe, summary: Haystack) -> bool:
        return has_path(summary, probe.target)


TRIVIAL_GIT = frozenset({"log", "status", "diff", "show", "branch"})
TRIVIAL = frozenset({"ls", "cat", "echo", "pwd", "head", "tail", "wc", "which", "true", "sleep", "clear", "grep", "rg",
                     "find", "sed", "awk", "sort", "tree", "stat", "file", "du", "df", "date", "whoami", "type"})


def _first_seen(msgs: list[Message], wanted: dict[str, int]) -> dict[str, int]:
    """For each (lower-case) value, the first message of ``msgs`` whose text holds it."""
    out: dict[str, int] = {}
    left = dict(wanted)
    for j, m in enumerate(msgs):
        if not left:
            break
        t = text_of(m).lower()
        for v in [v for v in left if v in t]:
            out[v] = j
            del left[v]
    return out


class _After(ProbeKind):
    """What the agent used after the cut: first met there in its own call or text, and held
    by the removed part (not by the messages kept before it)."""

    category = "continuation"
    values = False

    def uses(self, m: Message) -> Iterator[tuple[str, str]]:
        raise NotImplementedError

    def extract(self, part: CompactionCut) -> list[Probe]:
        after = part.after[:HORIZON]
        lost_idx = {i for i, _ in part.lost}
        earlier = "\n".join(text_of(m) for i, m in enumerate(part.before[: part.cut]) if i not in lost_idx).lower()
        uses: dict[str, tuple[int, str, str]] = {}  # lower value -> (message after the cut, value, how)
        for j, m in enumerate(after):
            if m.role == "assistant":
                for v, how in self.uses(m):
                    uses.setdefault(v.lower(), (j, v, how))
        lost_text = part.lost_text
        cands = {k: j for k, (j, _, _) in uses.items() if k in lost_text and k not in earlier}
        first = _first_seen(after, cands)
        out = []
        for k, j in cands.items():
            if first.get(k, j) < j:  # the agent read it after the cut before using it
                continue
            _, v, how = uses[k]
            out.append(self.probe(v, message=part.cut + j, note=f"{how} after the cut"))
        # a value inside another used value (a file's name in its path) is not a second probe
        vals = [p.target.lower() for p in out]
        return [p for p in out if not any(v != p.target.lower() and p.target.lower() in v for v in vals)]

    def check(self, probe: Probe, summary: Haystack) -> bool:
        if probe.note.startswith("re-ran"):
            return summary.has_words(probe.target)
        return has_path(summary, probe.target) if "/" in probe.target else summary.has_value(probe.target)


@register_probe
class Continuation(_After):
    name = "continuation"
    weight = 3.0
    help = "files the agent opened or edited again after the cut, commands it re-ran, that only the removed part held"

    def uses(self, m: Message) -> Iterator[tuple[str, str]]:
        for b in m.tool_calls():
            how = "edited" if records.modifies(b) else "opened"
            for f in records.files(b):
                yield f, how
            cmd = records.command(b)
            fam = records.family(cmd) if cmd else ""
            fw = fam.split()
            if fw and fw[0] not in TRIVIAL and not (fw[0] == "git" and fw[1:2] and fw[1] in TRIVIAL_GIT) and len(fam) >= 4:
                yield fam, "re-ran"


@register_probe
class ContinuationValue(_After):
    name = "continuation_value"
    weight = 1.5
    help = "identifiers and values the agent typed after the cut (names, paths, ids: not code bodies) that only the removed part held"

    def uses(self, m: Message) -> Iterator[tuple[str, str]]:
        for b in m.tool_calls():
            for s in records.strings(b, ARG_CLIP):
                for v in records.values(s):
                    yield v, "typed"
        for v in records.values(m.text()):
            yield v, "typed"


@register_probe
class Identifier(ProbeKind):
    name = "identifier"
    category = "artifacts"
    weight = 0.5
    help = "identifiers and values the user gave, or the assistant used in two messages or more"

    def extract(self, part: CompactionCut) -> list[Probe]:
        out: dict[str, Probe] = {}
        for i, txt in part.user_words():
            for v in records.values(txt):
                out.setdefault(v.lower(), self.probe(v, message=i, note="user"))
        count: dict[str, int] = {}
        first: dict[str, tuple[int, str]] = {}
        for i, m in part.lost:
            if m.role != "assistant":
                continue
            seen = set()
            for b in m.content:
                srcs = records.strings(b) if b.type == "tool_call" else [b.text] if b.type == "text" else []
                for v in (v for src in srcs for v in records.values(src)):
                    if v.lower() not in seen:
                        seen.add(v.lower())
                        count[v.lower()] = count.get(v.lower(), 0) + 1
                        first.setdefault(v.lower(), (i, v))
        for k, n in count.items():
            if n >= 2:
                i, v = first[k]
                out.setdefault(k, self.probe(v, message=i, note="assistant"))
        vals = list(out)
        return [p for k, p in out.items() if not part.kept.has_value(p.target)
                and not any(k != w and k in w for w in vals)]

    def check(self, probe: Probe, summary: Haystack) -> bool:
        return summary.has_value(probe.target)
