"""Summary models behind one small interface.

``heuristic`` (offline, deterministic) builds the summary from the messages
themselves; ``openai`` and ``anthropic`` call a remote model over HTTP; ``command``
runs a program that reads the prompt on stdin and prints the summary.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import CtxtoolError, ExitCode
from ..model import Message

SUMMARIZERS = ("heuristic", "openai", "anthropic", "command")


@dataclass(slots=True)
class SummaryRequest:
    """Everything a summarizer may use. Remote models read ``system`` + ``prompt``;
    the heuristic reads ``messages`` (the part being summarized, agent-visible only)."""

    system: str
    prompt: str
    messages: Sequence[Message] = ()
    previous_summary: str | None = None
    read_files: Sequence[str] = ()
    modified_files: Sequence[str] = ()
    max_tokens: int = 4096
    style: str = "structured"  # "structured" (seed 003 Markdown) or "retain" (seed 001 <retain>/<summary>)
    options: dict[str, Any] = field(default_factory=dict)


class Summarizer(Protocol):
    name: str
    #: the summary model's context window in tokens (prompts larger than this are chunked)
    context_window: int

    def summarize(self, req: SummaryRequest) -> str: ...

    def settings(self) -> dict[str, Any]:
        """What identifies this summarizer's output (for the summary cache key); never secrets."""
        ...


class ContextOverflowError(CtxtoolError):
    """The summary model said the prompt does not fit its context window (OpenAI
    ``context_length_exceeded``, Anthropic "prompt is too long", HTTP 413): compaction
    can split the input into chunks and try again."""

    def __init__(self, message: str, *, code: ExitCode = ExitCode.REMOTE, **kw: Any) -> None:
        super().__init__(message, code=code, **kw)


_MODULES = {
    "heuristic": "ctxtool.summarizers.heuristic",
    "openai": "ctxtool.summarizers.remote",
    "anthropic": "ctxtool.summarizers.remote",
    "command": "ctxtool.summarizers.command",
}


def get_summarizer(kind: str, **options: Any) -> Summarizer:
    """Build a summarizer; each module exposes ``create(kind, **options)``."""
    if kind not in _MODULES:
        raise CtxtoolError(f"unknown summarizer {kind!r}; choose one of: {', '.join(SUMMARIZERS)}", code=ExitCode.USAGE)
    mod = importlib.import_module(_MODULES[kind])
    return mod.create(kind, **options)
