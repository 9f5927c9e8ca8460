"""The agent's plan: the latest state of each item its planning tool recorded (Claude Code's
``TodoWrite`` ``todos``: content, status; Codex's ``update_plan`` ``plan``: step, status; other
to-do tools' ``items``/``tasks``), and, where no such record exists, the last plan the
assistant wrote in its text (a numbered list after words such as "plan" or "next"), marked as
such."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ...model import Message
from ...text import lazyre
from ...text.prose import one_line
from ..prompt import call_args, command_of

TITLE = "Plan (as last updated)"
ITEM_CLIP = 200
MAX_TEXT_STEPS = 8
_MARK = {"completed": "[x]", "in_progress": "[ ] (in progress)", "pending": "[ ]"}
_DONE = ("completed", "complete", "done", "finished")
_LIST_KEYS = ("todos", "plan", "items", "tasks")
_TEXT_KEYS = ("content", "step", "title", "task", "text", "description")
_PLAN_TOOL = lazyre.compile(r"todo|plan|task", re.I)
_STEP = lazyre.compile(r"^\s*(?:\d+[.)]|[-*])\s+(?:\[[ x]\]\s+)?(.{6,})$")
_PLAN_WORDS = lazyre.compile(r"\b(plan|next steps?|steps?|remaining|todo|i(?:'ll| will) (?:now )?(?:do|need))\b", re.I)


@dataclass(frozen=True, slots=True)
class Item:
    text: str
    status: str  # completed | in_progress | pending | cancelled ...

    @property
    def done(self) -> bool:
        return self.status in _DONE

    @property
    def active(self) -> bool:
        return self.status == "in_progress"

    def line(self) -> str:
        return f"- {_MARK.get(self.status, '[ ]' if not self.done else '[x]')} {one_line(self.text, ITEM_CLIP)}"


def latest(msgs: Sequence[Message]) -> tuple[int, list[Item]] | None:
    """The items of the last plan update in ``msgs`` and its message index (None: no record).
    ``score`` has its own rule for this (:func:`ctxtool.score.records.last_plan`), apart on purpose: a measure shares no code with what it measures."""
    for i in range(len(msgs) - 1, -1, -1):
        for b in reversed(msgs[i].tool_calls()):
            args = call_args(b)
            steps = next((args[k] for k in _LIST_KEYS if isinstance(args.get(k), list)), None)
            if not steps or not (_PLAN_TOOL.search(b.name or "") or isinstance(args.get("todos"), list)):
                continue
            out = []
            for s in steps:
                if not isinstance(s, dict):
                    continue
                text = next((s[k] for k in _TEXT_KEYS if isinstance(s.get(k), str) and s[k].strip()), None)
                if text:
                    out.append(Item(text.strip(), str(s.get("status") or "pending").lower()))
            if out:
                return i, out
    return None


def latest_plan(msgs: Sequence[Message]) -> list[str]:
    """The items of the last plan update in ``msgs``, as task-list lines (empty: none)."""
    got = latest(msgs)
    return [it.line() for it in got[1]] if got else []


def text_plan(msgs: Sequence[Message]) -> list[str]:
    """The steps of the last list the assistant wrote as a plan in its text (empty: none)."""
    for m in reversed(msgs):
        if m.role != "assistant":
            continue
        text = "\n".join(b.text for b in m.content if b.type == "text")
        if not text.strip():
            continue
        lines = text.splitlines()
        for j in range(len(lines) - 1, -1, -1):
            if not _PLAN_WORDS.search(lines[j]) or _STEP.match(lines[j]):
                continue
            steps = []
            for ln in lines[j + 1:]:
                got = _STEP.match(ln)
                if got:
                    steps.append(one_line(got.group(1).strip(), ITEM_CLIP))
                elif ln.strip() and steps:
                    break
            if len(steps) >= 2:
                return steps[:MAX_TEXT_STEPS]
    return []


_BD = lazyre.compile(r"\bbd\s+(update|close|start|done)\s+([\w.-]+)(?:.*?--status[= ](\w+))?")
_BD_TITLE = lazyre.compile(r"([\w-]+\.\d+(?:\.\d+)*):\s+([^●\n]{5,160}?)\s*(?:●|\n|$)")


def tracker(msgs: Sequence[Message]) -> tuple[int, list[Item]] | None:
    """An issue tracker driven from the shell (beads: ``bd update ID --status in_progress``,
    ``bd close ID``): each issue's latest status, with its title where an output showed it
    (None: no such run)."""
    results = {b.id: b for m in msgs for b in m.tool_results() if b.id}
    status: dict[str, str] = {}
    titles: dict[str, str] = {}
    last = -1
    for i, m in enumerate(msgs):
        for b in m.tool_results():
            for ident, title in _BD_TITLE.findall(b.text[:20000]):
                titles.setdefault(ident, title.strip())
        for b in m.tool_calls():
            cmd = command_of(b) or ""
            res = results.get(b.id or "")
            if res is None or res.is_error:
                continue
            for verb, ident, st in _BD.findall(cmd):
                new = "completed" if verb in ("close", "done") else (st or "in_progress").lower()
                status.pop(ident, None)
                status[ident] = new
                last = i
    if not status:
        return None
    return last, [Item(f"{k}: {titles[k]}" if k in titles else k, v) for k, v in status.items()]
