"""What the transcript records, read by score's own rules: the files a tool call names, the command
it ran and its family, whether its run failed, the plan and to-do records, and the identifiers
and values a text holds. No summarizer's rule and no part of compaction's, on purpose (a measure
shares no code with what it measures). The definitions: docs/architecture.md, "The grader"."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..model import Block, Message, is_injected
from ..text import lazyre

COMMAND_KEYS = ("command", "cmd", "script")
_EDITS = lazyre.compile(r"edit|write|patch|replace|create|insert|delete|remove|move|rename|mkdir|save", re.I)
_PATCH_FILE = lazyre.compile(r"^(?:\*\*\* (?:Update|Add|Delete) File: |\+\+\+ b/)(\S.*)$", re.M)
_EXIT = lazyre.compile(r"(?:exit(?:ed with)? (?:code|status)|process exited with code|returned non-zero exit status)"
                       r"\s*[:=]?\s*(-?\d+)", re.I)
PLAN_TOOLS = frozenset({"todowrite", "todo_write", "update_plan", "write_todos", "todo", "todos", "plan",
                        "set_plan", "update_todos"})
PLAN_LIST_KEYS = ("todos", "plan", "items", "tasks", "steps")
PLAN_TEXT_KEYS = ("content", "step", "text", "title", "task", "description")
DONE_STATUSES = frozenset({"completed", "complete", "done", "finished", "cancelled", "canceled"})
SUMMARY_KINDS = ("compaction_summary", "tool_summary")
#: a publisher's redaction marker ("[REDACTED_TEXT len=120 sha=..]"): no content, never a probe
REDACTED = lazyre.compile(r"\[REDACTED[^\]]*\]")


def args(b: Block) -> dict[str, Any]:
    a = b.arguments
    if isinstance(a, str):
        try:
            a = json.loads(a)
        except ValueError:
            return {"input": a}
    return a if isinstance(a, dict) else {}


def strings(b: Block, limit: int | None = None) -> Iterator[str]:
    """The string values of a call's arguments (not their keys), nested ones too; with
    ``limit``, only those of at most ``limit`` characters (names, paths, commands: not bodies)."""
    stack: list[Any] = [args(b)]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            if limit is None or len(x) <= limit:
                yield x
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, list):
            stack.extend(reversed(x))


def command(b: Block) -> str:
    """The command a shell-like call ran ("" for other calls)."""
    a = args(b)
    for k in COMMAND_KEYS:
        v = a.get(k)
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            v = " ".join(v[2:] if len(v) >= 3 and v[1] in ("-c", "-lc") else v)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return ""


def family(cmd: str) -> str:
    """The program and its first argument that is not a flag ("pytest tests/x.py")."""
    ws = [w for w in cmd.replace("&&", " ").split() if not w.startswith("-") and "=" not in w[:1]]
    while ws and ws[0] in ("cd", "sudo", "env", "time", "uv", "npx", "poetry") and len(ws) > 1:
        ws = ws[2:] if ws[0] == "cd" else ws[1:]
    return " ".join(ws[:2])


def files(b: Block) -> list[str]:
    """The files a call names."""
    out: dict[str, None] = {}
    for k, v in args(b).items():
        kl = k.lower()
        if isinstance(v, str) and ("path" in kl or "file" in kl) and "\n" not in v and 0 < len(v) < 300:
            out[v.strip()] = None
        elif isinstance(v, str) and kl in ("input", "patch") and "\n" in v:
            for p in _PATCH_FILE.findall(v):
                out[p.strip()] = None
    return list(out)


def modifies(b: Block) -> bool:
    return bool(_EDITS.search(b.name or ""))


def failed(result: Block) -> bool:
    if result.is_error:
        return True
    m = _EXIT.search(result.text[:4000]) or _EXIT.search(result.text[-2000:])
    return bool(m and m.group(1) != "0")


def own_words(m: Message) -> str:
    """The text of a user message in the user's own words ("" for injected context and summaries)."""
    if m.role != "user" or is_injected(m) or m.metadata.kind in SUMMARY_KINDS:
        return ""
    return REDACTED.sub(" ", "\n".join(b.text for b in m.content if b.type == "text")).strip()


@dataclass(frozen=True, slots=True)
class Run:
    """A tool call and how its result came back."""

    index: int  # message index of the call
    call: Block
    failed: bool
    output: str

    @property
    def command(self) -> str:
        return command(self.call)

    @property
    def family(self) -> str:
        """What a later run must share to count as the same step: the command's family, the
        file of a file tool, else the tool."""
        c = self.command
        if c:
            return "cmd:" + family(c)
        fs = files(self.call)
        return f"{self.call.name}:{fs[0]}" if fs else str(self.call.name)


def runs(msgs: list[Message]) -> list[Run]:
    """Every call that got a result, in order."""
    calls: dict[str, tuple[int, Block]] = {}
    out = []
    for i, m in enumerate(msgs):
        for b in m.content:
            if b.type == "tool_call" and b.id:
                calls[b.id] = (i, b)
            elif b.type == "tool_result" and b.id in calls:
                j, c = calls.pop(b.id)
                out.append(Run(j, c, failed(b), b.text))
    return out


@dataclass(frozen=True, slots=True)
class PlanItem:
    text: str
    status: str  # as recorded, lower case

    @property
    def done(self) -> bool:
        return self.status in DONE_STATUSES


def plan_of(b: Block) -> list[PlanItem] | None:
    """The items of a to-do call (None when ``b`` is no to-do call)."""
    if b.type != "tool_call" or (b.name or "").lower().replace("-", "_") not in PLAN_TOOLS:
        return None
    a = args(b)
    items = next((a[k] for k in PLAN_LIST_KEYS if isinstance(a.get(k), list)), None)
    if items is None:
        return None
    out = []
    for it in items:
        if isinstance(it, dict):
            txt = next((it[k] for k in PLAN_TEXT_KEYS if isinstance(it.get(k), str)), "")
            if txt.strip():
                out.append(PlanItem(txt.strip(), str(it.get("status") or "pending").lower()))
    return out


def last_plan(msgs: list[tuple[int, Message]]) -> tuple[int, list[PlanItem]] | None:
    for i, m in reversed(msgs):
        for b in reversed(m.content):
            p = plan_of(b)
            if p is not None:
                return i, p
    return None


_VALUE_RES = (
    lazyre.compile(r"https?://[^\s)>\]\"'`,]+"),  # URLs
    lazyre.compile(r"(?<![\w/.-])(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]*\.\w{1,8}\b"),  # paths with an extension
    lazyre.compile(r"\b[\w-]+\.(?:py|rs|go|ts|tsx|js|jsx|ex|exs|rb|java|kt|c|h|cc|cpp|md|json|toml|ya?ml|sh|sql)\b"),
    lazyre.compile(r"\bv?\d+\.\d+\.\d+(?:[-+][\w.]+)?\b"),  # versions
    lazyre.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]{2,}\b"),  # environment variables, constants
    lazyre.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),  # hashes, commit ids
    lazyre.compile(r"\b[A-Za-z][a-z0-9]*(?:_[A-Za-z0-9]+)+\b"),  # snake_case names
    lazyre.compile(r"\b[a-z]+(?:[A-Z][a-z0-9]+)+\b"),  # camelCase names
    lazyre.compile(r"\b(?:[A-Z][a-z0-9]+){2,}\b"),  # PascalCase names
    lazyre.compile(r"\b[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+(?=\()"),  # dotted.calls(
)


def values(text: str) -> Iterator[str]:
    """Identifiers and values in a text: URLs, paths and file names, versions, constants,
    hashes, snake/camel/Pascal case names, dotted calls (four characters or more)."""
    seen: set[str] = set()
    text = REDACTED.sub(" ", text)
    for rx in _VALUE_RES:
        for v in rx.findall(text):
            v = v.rstrip(".,:;")
            if len(v) >= 4 and v not in seen:
                seen.add(v)
                yield v
