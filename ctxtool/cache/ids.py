"""Ref ids: what a ref is (64 hex digits, the sha256 of its content), how it is found in text,
and the error for one that is not (:class:`BadRefError`, exit 3)."""

from __future__ import annotations

import re

from ..errors import CtxtoolError, Failure

REF_RE = re.compile(r"^[0-9a-f]{64}$")
PREFIX_RE = re.compile(r"^[0-9a-f]{8,64}$")
REF_IN_TEXT_RE = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
SOURCE_REF_RE = re.compile(r"^[0-9a-f]{64}(#[0-9]{1,9})?$")


class BadRefError(CtxtoolError):
    """A ref id that is not one (not 64 hex digits, not a string, ...): bad input, exit 3.

    Raised by :func:`check_ref` (a ref read from a transcript: its file and line are named)
    and by :meth:`RefCache.resolve` (a ref given on the command line).
    """

    def __init__(
        self, message: str, *, kind: Failure = Failure.INPUT, path: str | None = None, line: int | None = None
    ) -> None:
        super().__init__(message, kind=kind, path=path, line=line)

    def at(self, path: str | None, line: int | None) -> BadRefError:
        """The same error, located where the ref was read (a transcript's file and line)."""
        return BadRefError(self.message, kind=self.kind, path=path, line=line)


def check_ref(
    value: object, *, what: str = "ref", source: bool = False, path: str | None = None, line: int | None = None
) -> str:
    """``value`` if it is a ref id as a transcript carries it, else :class:`BadRefError`.

    A ref id is a string of 64 lower-case hex digits; with ``source=True`` (a ``source_ref``)
    it may end in ``#<k>``, naming one stash of a pack. ``what`` names the field in the
    message (``output_ref.id``, ``source_ref``), ``path`` and ``line`` where it was read.
    """
    ok = SOURCE_REF_RE if source else REF_RE
    if isinstance(value, str) and ok.match(value):
        return value
    shown = repr(value) if isinstance(value, str) else f"a JSON {_json_type(value)}"
    if isinstance(value, str) and len(shown) > 80:
        shown = shown[:76] + "...'"
    raise BadRefError(f"invalid {what} {shown}: a ref id is a sha256 (64 hex digits)", path=path, line=line)


def _json_type(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, list):
        return "array"
    return "object" if isinstance(v, dict) else type(v).__name__
