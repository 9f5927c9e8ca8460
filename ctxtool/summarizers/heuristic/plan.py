"""The agent's latest plan, as its planning tool last recorded it: Claude Code's ``TodoWrite``
(``todos``: content, status) or Codex's ``update_plan`` (``plan``: step, status)."""

from __future__ import annotations

from collections.abc import Sequence

from ...model import Message
from ..prompt import call_args
from .text import one_line

TITLE = "Plan (as last updated)"
ITEM_CLIP = 200
_MARK = {"completed": "[x]", "in_progress": "[ ] (in progress)", "pending": "[ ]"}


def latest_plan(msgs: Sequence[Message]) -> list[str]:
    """The items of the last plan update in ``msgs``, as task-list lines (empty: none)."""
    for m in reversed(msgs):
        for b in reversed(m.tool_calls()):
            args = call_args(b)
            steps = args.get("todos") if isinstance(args.get("todos"), list) else args.get("plan")
            if not isinstance(steps, list) or not steps:
                continue
            out = []
            for s in steps:
                if not isinstance(s, dict):
                    continue
                text = s.get("content") or s.get("step") or s.get("title")
                if isinstance(text, str) and text.strip():
                    mark = _MARK.get(str(s.get("status", "pending")), "[ ]")
                    out.append(f"- {mark} {one_line(text, ITEM_CLIP)}")
            if out:
                return out
    return []
