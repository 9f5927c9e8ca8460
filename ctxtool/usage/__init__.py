"""Usage and cost of people's own agent sessions (``ctxtool usage``, :func:`usage_report`). With no
paths it reads the default session stores (:mod:`ctxtool.usage.stores`); every API call is counted
once across all files (:mod:`ctxtool.usage.events`), so a copied or resumed session adds nothing;
cost comes from the model registry's prices of the call's day."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from typing import Any

from ..errors import CtxtoolError
from ..model import Transcript
from ..run.operation import MapOp
from .events import UsageEvent, events
from .report import (
    GROUPINGS,
    Grouping,
    Tally,
    UsageRow,
    parse_day,
    resolve_zone,
    today_in,
)
from .stores import Store, session_files

Progress = Callable[[int, int, str], None]  # (files done, files in all, the file being read)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file that was not read: not a transcript, or bad input (the message names its line)."""

    path: str
    error: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "error": self.error}


@dataclass(slots=True)
class UsageReport:
    by: str
    timezone: str
    since: date | None
    until: date | None
    stores: list[Store]
    files: int
    rows: list[UsageRow]
    total: UsageRow
    duplicates: int  # calls seen again (copies, resumed sessions) and not counted
    outside: int  # calls outside --since/--until
    unpriced_models: list[str]
    skipped: list[Skipped] = field(default_factory=list)
    tz: tzinfo | None = None
    now: datetime | None = None  # when the report was made (a block still open is active)

    def head_json(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "timezone": self.timezone,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "stores": [s.to_json() for s in self.stores],
        }

    def rows_json(self) -> list[dict[str, Any]]:
        return [r.to_json(self.tz) for r in self.rows]

    def tail_json(self) -> dict[str, Any]:
        total = self.total.to_json(self.tz)
        total.pop("key")
        return {
            "totals": total,
            "files": self.files,
            "duplicates": self.duplicates,
            "outside": self.outside,
            "unpriced_models": self.unpriced_models,
            "skipped": [s.to_json() for s in self.skipped],
        }

    def to_json(self) -> dict[str, Any]:
        return {**self.head_json(), "rows": self.rows_json(), **self.tail_json()}


def _events_of(t: Transcript) -> list[UsageEvent]:
    return list(events(t))


def _zone_name(tz: tzinfo | None) -> str:
    if tz is None:
        return "local:" + (datetime.now().astimezone().tzname() or "")
    return str(getattr(tz, "key", tz))


def usage_report(
    paths: Iterable[str] | None = None,
    *,
    by: str = "day",
    since: str | date | None = None,
    until: str | date | None = None,
    timezone: str | None = None,
    stores: list[Store] | None = None,
    progress: Progress | None = None,
    now: datetime | None = None,
    jobs: int | None = None,
    breakdown: bool = False,
) -> UsageReport:
    """Usage and cost of the sessions in ``paths`` (files or directories), or of the default
    session stores when there are none, one row per ``by`` (day, week, month, 5-hour block,
    session, project, model); ``breakdown``: each row's calls per model too. ``since``/``until`` are days in ``timezone`` (an IANA name; default local),
    both included: ``YYYY-MM-DD``, ``today``, ``yesterday`` or ``Nd``. Many small files are
    read by ``jobs`` processes (default: one per core; :func:`ctxtool.run.manyfiles.run_files`);
    ``progress`` is called with (files done, files in all, the next file) as they are read."""
    g: Grouping = GROUPINGS.get(by)
    tz = resolve_zone(timezone)
    today = today_in(tz, now)
    d0 = parse_day(since, today) if isinstance(since, str) else since
    d1 = parse_day(until, today) if isinstance(until, str) else until
    used, files = session_files(list(paths) if paths else None, stores)
    tally = Tally(g, tz, d0, d1, breakdown=breakdown)
    skipped: list[Skipped] = []
    done = 0
    if progress is not None:
        progress(0, len(files), files[0] if files else "")
    # a file counts whole or not at all (an error in it skips it); many small session files
    # run on every core (manyfiles.run_files), their events tallied here in file order
    # lazy: start-up (loaded only when this runs: ..run.manyfiles)
    from ..run.manyfiles import run_files

    runs = run_files(MapOp(_events_of, "usage", parallel=True), files, on_error="fail", jobs=jobs)
    try:
        for run in runs:
            if isinstance(run, CtxtoolError):
                skipped.append(Skipped(files[done], str(run)))
                done += 1
            else:
                for found in run.report.items:
                    tally.add_all(found)
                done += run.files
            if progress is not None:
                progress(done, len(files), files[done] if done < len(files) else "")
    finally:
        runs.close()
    return UsageReport(
        by=g.name,
        timezone=_zone_name(tz),
        since=d0,
        until=d1,
        stores=used,
        files=len(files),
        rows=tally.sorted_rows(),
        total=tally.total,
        duplicates=tally.duplicates,
        outside=tally.outside,
        unpriced_models=sorted(tally.unpriced_models),
        skipped=skipped,
        tz=tz,
        now=now or datetime.now(UTC),
    )
