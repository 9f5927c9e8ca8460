"""Tool outputs an agent saved to disk itself, leaving a reference in the transcript (Claude
Code's ``<persisted-output>`` notice): :func:`saved_output` reads the reference. A module of its
own so that ``ctxtool stats``, which counts them, does not load the truncation algorithms
(:mod:`ctxtool.tool_outputs.algorithms` keeps these names too)."""

from __future__ import annotations

from dataclasses import dataclass

from ..text import lazyre

#: Claude Code 2.1 (over 50,000 characters): the result in the log is a notice naming the file
#: under ``<session>/tool-results/`` and a preview of its start
SAVED_OPEN = "<persisted-output>"
_SAVED_SIZE = lazyre.compile(r"Output too large \(([^)\n]*)\)")
_SAVED_PATH = lazyre.compile(r"Full output saved to: ([^\n]+)")


@dataclass(frozen=True, slots=True)
class SavedOutput:
    """A tool output its agent saved to a file, leaving a reference in the transcript."""

    path: str  # as the agent wrote it (ctxtool never opens it on its own)
    size: str  # the size as the agent stated it ("52.3KB"), "" when not stated

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "size": self.size}


def saved_output(text: str) -> SavedOutput | None:
    """The file a tool result names when its agent saved the output there (Claude Code's
    ``<persisted-output>`` notice); ``None`` for an output held in the transcript."""
    if not text.startswith(SAVED_OPEN):
        return None
    head = text[: 4096]
    p = _SAVED_PATH.search(head)
    if p is None:
        return None
    s = _SAVED_SIZE.search(head)
    return SavedOutput(p.group(1).strip(), s.group(1) if s else "")
