"""What every renderer shares: the options, the renderer interface and its registry."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from ..errors import CtxtoolError, Failure
from ..registry import Registry
from .walk import ExportedTranscript

#: tool outputs, arguments and injected content longer than this many characters are
#: collapsed (HTML) or clipped with a note (markdown)
DEFAULT_COLLAPSE = 2000
#: messages per page of an HTML export (its pager shows one page at a time)
DEFAULT_PAGE_SIZE = 250


@dataclass(frozen=True, slots=True)
class ExportOptions:
    collapse: int = DEFAULT_COLLAPSE  # characters; 0: never collapse
    title: str | None = None  # the document title (default: the input's file name)
    page_size: int = DEFAULT_PAGE_SIZE  # messages per page (HTML); 0: one page

    def __post_init__(self) -> None:
        if self.collapse < 0:
            raise CtxtoolError("--collapse must be 0 or more characters", kind=Failure.USAGE)
        if self.page_size < 0:
            raise CtxtoolError("--page-size must be 0 or more messages", kind=Failure.USAGE)

    def long(self, text: str) -> bool:
        return bool(self.collapse) and len(text) > self.collapse


class Renderer:
    """Turns views into a document, as a stream of text pieces."""

    name: ClassVar[str] = ""
    suffixes: ClassVar[tuple[str, ...]] = ()  # output names that imply this renderer
    description: ClassVar[str] = ""

    def __init__(self, options: ExportOptions) -> None:
        self.options = options

    def document(self, title: str, views: Iterator[ExportedTranscript]) -> Iterator[str]:
        raise NotImplementedError


RENDERERS: Registry[type[Renderer]] = Registry("export format", fold=str.lower)
#: a class decorator: make a renderer available under its ``name``
register = RENDERERS.register


def renderer_for_output(output: str | None) -> str | None:
    """The renderer an output name implies by its suffix (``.html``, ``.md``; compressed too)."""
    if not output or output == "-":
        return None
    name = output.lower().removesuffix(".gz").removesuffix(".zst")
    return next((n for n, c in RENDERERS.items() if name.endswith(c.suffixes)), None)


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def short_label(label: str) -> str:
    """A transcript label (``path#id``) with the path cut to its file name."""
    path, sep, rest = label.partition("#")
    return os.path.basename(path) + sep + rest


def clip_note(shown: int, text: str) -> str:
    lines = text.count("\n") + 1
    return f"clipped: {shown:,} of {len(text):,} characters shown ({plural(lines, 'line')} in all)"

