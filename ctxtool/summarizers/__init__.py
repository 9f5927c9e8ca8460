"""Summary models behind one small interface.

``heuristic`` (offline, deterministic) builds the summary from the messages
themselves; ``openai`` and ``anthropic`` call a remote model over HTTP; ``command``
runs a program that reads the prompt on stdin and prints the summary.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..errors import CtxtoolError, Failure
from ..model import Message
from ..registry import Registry

S = TypeVar("S")


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
    style: str = "structured"  # "structured" (pi-style compaction Markdown) or "retain" (the tool-output cache spec <retain>/<summary>)
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

    def __init__(self, message: str, *, kind: Failure = Failure.REMOTE, **kw: Any) -> None:
        super().__init__(message, kind=kind, **kw)


@runtime_checkable
class CacheCounts(Protocol):
    """A summarizer that counts its cache hits and misses (``CachedSummarizer``)."""

    @property
    def hits(self) -> int: ...

    @property
    def misses(self) -> int: ...


@runtime_checkable
class Closeable(Protocol):
    """A summarizer holding resources (connections) to release after use."""

    def close(self) -> None: ...


#: a module name (its ``create(kind, **options)`` builds the summarizer) or a factory
Factory = str | Callable[..., Summarizer]
SUMMARIZERS: Registry[Factory] = Registry("summarizer")
SUMMARIZERS.register("ctxtool.summarizers.heuristic", "heuristic")
SUMMARIZERS.register("ctxtool.summarizers.remote", "openai")
SUMMARIZERS.register("ctxtool.summarizers.remote", "anthropic")
SUMMARIZERS.register("ctxtool.summarizers.command", "command")


def register_summarizer(kind: str, factory: Factory) -> None:
    """Add a summarizer: ``factory(**options)`` (or a module's ``create(kind, **options)``)
    builds it; ``--summarizer`` offers every registered kind."""
    SUMMARIZERS.register(factory, kind)


def built_from(cls: Callable[..., S], options: dict[str, Any], *args: Any) -> S:
    """``cls(*args, ...)`` given the ``options`` its constructor takes: a module's ``create``
    receives every summarizer's options (``--command`` and ``--base-url`` alike) and each kind
    reads its own; the defaults are the constructor's."""
    import inspect

    accepted = inspect.signature(cls).parameters
    return cls(*args, **{k: v for k, v in options.items() if k in accepted})


def get_summarizer(kind: str, **options: Any) -> Summarizer:
    """Build a registered summarizer."""
    factory = SUMMARIZERS.get(kind)
    if isinstance(factory, str):
        created: Summarizer = importlib.import_module(factory).create(kind, **options)
        return created
    return factory(**options)
