"""The one place the CLI writes machine-readable output. ``--json`` is ONE object per command,
``command`` and ``version`` first, then the settings, then the item list written one by one (a
stream stays a stream), then ``totals``; ``--jsonl`` one item per line and a last ``summary``
line holding the rest. Each command's schema is ``schemas/<command>.schema.json`` (its
``$defs.item`` one item). The shape in detail: docs/architecture.md, "Commands"."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Annotated, Any

import typer

JSON_VERSION = 1

JsonlOpt = Annotated[
    bool,
    typer.Option("--jsonl", help="Print one JSON object per transcript per line, then a summary line (type: summary)."),
]

#: the ``type`` of a --jsonl line holding one item of the list named by the key
ITEM_TYPES = {"transcripts": "transcript", "formats": "format", "models": "model", "refs": "ref", "rows": "row"}

Fields = Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None


def _fields(f: Fields) -> Mapping[str, Any]:
    if f is None:
        return {}
    return f() if callable(f) else f


def emit(
    command: str,
    head: Fields = None,
    *,
    items: Iterable[Mapping[str, Any]] | None = None,
    key: str = "transcripts",
    tail: Fields = None,
    jsonl: bool = False,
    to_stderr: bool = False,
) -> None:
    """Write one command's output: the envelope ``{command, version, **head, key: items,
    **tail}`` as one JSON object, or (``jsonl``) one line per item and a summary line.
    ``tail`` may be a function: it is called after the items were written (totals of a
    stream). ``to_stderr`` when stdout carries a transcript. (:class:`Emitter` when the
    items are pushed by the work rather than pulled from an iterable.)"""
    em = Emitter(command, head, key=key if items is not None else None, jsonl=jsonl, to_stderr=to_stderr)
    for item in items or ():
        em.item(item)
    em.finish(tail)


class Emitter:
    """:func:`emit` written as the items come: ``item(obj)`` for each, then ``finish(tail)``.
    Nothing is written before the first item (or ``finish``): an error in reading the first
    transcript (a bad file, a missing setting) leaves stdout empty rather than holding half
    an object. ``key`` None: an envelope without an item list."""

    def __init__(self, command: str, head: Fields = None, *, key: str | None = "transcripts", jsonl: bool = False,
                 to_stderr: bool = False) -> None:
        self.command, self.head, self.key, self.jsonl, self.to_stderr = command, head, key, jsonl, to_stderr
        self.out: IO[bytes] | None = None
        self.envelope: dict[str, Any] = {}
        self.count = 0

    def _open(self) -> IO[bytes]:
        if self.out is None:
            stream = sys.stderr if self.to_stderr else sys.stdout
            stream.flush()
            self.out = stream.buffer
            self.envelope = {"command": self.command, "version": JSON_VERSION, **_fields(self.head)}
            if not self.jsonl:
                self.out.write(b"{\n" + _members(self.envelope))
                if self.key is not None:
                    self.out.write(f',\n  "{self.key}": ['.encode())
        return self.out

    def item(self, item: Mapping[str, Any]) -> None:
        # lazy: start-up (`ctxtool models` would load ctxtool.io.files)
        from ..io.jsonl import dumps

        out = self._open()
        if self.jsonl:
            kind = ITEM_TYPES.get(self.key or "", self.key)
            out.write(dumps({"type": kind, **item}) + b"\n")
            out.flush()  # a line per transcript as it comes, for the reader of a pipe
        else:
            out.write(b",\n    " if self.count else b"\n    ")
            out.write(dumps(item))
        self.count += 1

    def finish(self, tail: Fields = None) -> None:
        # lazy: start-up (`ctxtool models` would load ctxtool.io.files)
        from ..io.jsonl import dumps

        out = self._open()
        if self.jsonl:
            out.write(dumps({"type": "summary", **self.envelope, **_fields(tail)}) + b"\n")
        else:
            if self.key is not None:
                out.write(b"\n  ]" if self.count else b"]")
            rest = _members(_fields(tail))
            if rest:
                out.write(b",\n" + rest)
            out.write(b"\n}\n")
        out.flush()


def _members(obj: Mapping[str, Any]) -> bytes:
    """The members of ``obj`` pretty-printed at the first level, without the braces."""
    # lazy: start-up (`ctxtool models` would load ctxtool.io.files)
    from ..io.jsonl import dumps_pretty

    if not obj:
        return b""
    body = dumps_pretty(dict(obj)).rstrip()
    return body[1:-1].strip(b"\n")
