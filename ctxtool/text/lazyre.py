"""Regular expressions compiled on first use (``THINK = lazyre.compile(r"...", re.S)``), so a
module's patterns cost nothing when it is imported: every process imports patterns its run never
uses, and compiling them all was a visible part of start-up. The object stands for the
:class:`re.Pattern` (typed as one) but is not one: do not hand it to ``re.sub(PATTERN, ...)`` or
``isinstance``; use ``re.compile`` there."""

from __future__ import annotations

import re
from typing import Any, AnyStr, cast

# What a pattern offers; after the first use each is an attribute of the stand-in itself, so
# later calls cost what a compiled pattern's do.
_ATTRS = ("search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer", "scanner",
          "pattern", "flags", "groups", "groupindex")


class _Lazy:
    def __init__(self, source: Any, flags: int) -> None:
        self._args = (source, flags)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_args":  # copy/pickle probing, not a use
            raise AttributeError(name)
        compiled = re.compile(*self._args)
        for a in _ATTRS:
            setattr(self, a, getattr(compiled, a))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazyre.compile({self._args[0]!r}, {self._args[1]!r})"


def compile(pattern: AnyStr, flags: int | re.RegexFlag = 0) -> re.Pattern[AnyStr]:  # noqa: A001 - re.compile's name
    """:func:`re.compile`, done when the pattern is first used."""
    return cast("re.Pattern[AnyStr]", _Lazy(pattern, int(flags)))
