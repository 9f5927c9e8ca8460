"""When an entry of a transcript happened, read from the source line that recorded it.

Claude Code, Codex and pi write an ISO 8601 ``timestamp`` on every line; pi's messages also
carry one in milliseconds since the epoch. Formats without times give ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..model import Compaction, Entry, Message, Record, Transcript, source_lines

_KEYS = ("timestamp", "created_at", "time")
#: every key a time is read from (``message`` holds a nested ``timestamp``): a line with none of them has none
_TIME_KEYS = frozenset((*_KEYS, "message"))


def parse(value: Any) -> datetime | None:
    """An ISO 8601 string or epoch number (seconds or milliseconds) as an aware datetime."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:  # an integer too large for a float overflows in the division already
            return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            d = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        return d if d.tzinfo else d.replace(tzinfo=UTC)
    return None


def _time(e: Entry) -> tuple[Any, datetime | None]:
    """The timestamp its first source line records, as written and parsed ((None, None) if none)."""
    for ln in source_lines(e)[:1]:
        return _line_time(ln.obj)
    return None, None


def _line_time(obj: Any) -> tuple[Any, datetime | None]:
    """The timestamp a source line's value records, as written and parsed ((None, None) if none)."""
    if isinstance(obj, dict):
        for k in _KEYS:
            if k in obj and (d := parse(obj[k])) is not None:
                return obj[k], d
        inner = obj.get("message")
        if isinstance(inner, dict) and (d := parse(inner.get("timestamp"))) is not None:
            return inner["timestamp"], d
    return None, None


def raw_time(e: Entry) -> Any:
    """The timestamp its first source line records, as written (``None`` if none)."""
    return _time(e)[0]


def entry_time(e: Entry) -> datetime | None:
    return _time(e)[1]


def iso(d: datetime | None) -> str | None:
    """UTC, ISO 8601 with milliseconds and ``Z``."""
    if d is None:
        return None
    return d.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def span(entries: Sequence[Entry] | Transcript) -> tuple[datetime | None, datetime | None]:
    """The earliest and latest times recorded, whatever the line order (a branched pi
    session's header is written after the messages it copies)."""
    es = entries.entries if isinstance(entries, Transcript) else entries
    times = []
    # entry_time of each entry, its first line read in place (one call fewer per entry, no
    # list) and a plain dict with none of the keys passed over (most lines of a dataset)
    for e in es:
        cls = e.__class__
        if cls is Record:
            obj = e.line.obj  # type: ignore[union-attr]
        else:
            lines = e.lines if cls is Message or cls is Compaction else source_lines(e)  # type: ignore[union-attr]
            if not lines:
                continue
            obj = lines[0].obj
        if obj.__class__ is dict and _TIME_KEYS.isdisjoint(obj):
            continue
        d = _line_time(obj)[1]
        if d is not None:
            times.append(d)
    return (min(times), max(times)) if times else (None, None)
