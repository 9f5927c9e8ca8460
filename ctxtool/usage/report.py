"""Usage and cost tables: API calls grouped by day, month, session, project or model,
filtered by date in a time zone, priced from the model registry."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

from ..errors import CtxtoolError, Failure
from ..model import Usage
from ..registry import Registry
from ..text import lazyre
from .events import UsageEvent


def tokens_json(u: Usage) -> dict[str, int]:
    """A row's tokens as ``usage --json`` shows them: input (uncached), output, prompt-cache
    writes (``cache_write``) and reads, total."""
    return {"input": u.input, "output": u.output, "cache_write": u.cache_creation, "cache_read": u.cache_read,
            "total": u.total}


@dataclass(slots=True)
class UsageRow:
    """One line of the table: a day, month, session, project or model."""

    key: str
    tokens: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    messages: int = 0
    unpriced_messages: int = 0  # calls of a model the registry does not price
    models: set[str] = field(default_factory=set)
    first: datetime | None = None
    last: datetime | None = None
    projects: set[str] = field(default_factory=set)
    by_model: dict[str, UsageRow] | None = None  # --breakdown: one row per model inside this one
    ends: datetime | None = None  # a 5-hour block's end

    @property
    def cost(self) -> float | None:
        """The cost in USD; None when no call of the row has a price (unknown, not zero)."""
        return None if self.messages and self.unpriced_messages == self.messages else self.cost_usd

    def add(self, ev: UsageEvent, tokens: Usage, cost: float | None) -> None:
        self.tokens.add(tokens)
        self.messages += 1
        if cost is None:
            self.unpriced_messages += 1
        else:
            self.cost_usd += cost
        if ev.model:
            self.models.add(ev.model)
        self.projects.add(ev.project)
        if ev.time is not None:
            self.first = ev.time if self.first is None or ev.time < self.first else self.first
            self.last = ev.time if self.last is None or ev.time > self.last else self.last
        if self.by_model is not None:
            name = ev.model or "-"
            sub = self.by_model.get(name)
            if sub is None:
                sub = self.by_model[name] = UsageRow(name)
            sub.add(ev, tokens, cost)

    def to_json(self, tz: tzinfo | None = None) -> dict[str, Any]:
        cost = self.cost
        d: dict[str, Any] = {
            "key": self.key,
            **tokens_json(self.tokens),
            "cost_usd": None if cost is None else round(cost, 6),
            "messages": self.messages,
            "unpriced_messages": self.unpriced_messages,
            "models": sorted(self.models),
            "projects": sorted(self.projects),
            "first": self.first.astimezone(tz).isoformat() if self.first else None,
            "last": self.last.astimezone(tz).isoformat() if self.last else None,
        }
        if self.ends is not None:
            d["ends"] = self.ends.astimezone(tz).isoformat()
        if self.by_model is not None:
            subs = sorted(self.by_model.values(), key=lambda r: (-(r.cost or 0.0), -r.tokens.total, r.key))
            d["breakdown"] = [{k: v for k, v in r.to_json(tz).items() if k not in ("models", "projects")} for r in subs]
        return d


# -- groupings: one class per --by value, registered by name -------------------------------
class Grouping:
    """What a table row is: ``key`` gives the row of one event (in the report's zone)."""

    name = ""
    title = ""
    chronological = False  # rows in key order (dates); else most expensive first
    deferred = False  # rows made once every call is in (blocks)

    def key(self, ev: UsageEvent, tz: tzinfo | None) -> str:
        raise NotImplementedError


#: the groupings by name (``usage --by``), in the order help lists them
GROUPINGS: Registry[Grouping] = Registry("grouping")


def local_day(ev: UsageEvent, tz: tzinfo | None) -> date | None:
    return ev.time.astimezone(tz).date() if ev.time is not None else None


@GROUPINGS.register_instance_of
class ByDay(Grouping):
    name, title, chronological = "day", "date", True

    def key(self, ev: UsageEvent, tz: tzinfo | None) -> str:
        d = local_day(ev, tz)
        return d.isoformat() if d else "-"


@GROUPINGS.register_instance_of
class ByWeek(Grouping):
    """Weeks from Monday, named by their Monday (in the report's zone)."""

    name, title, chronological = "week", "week of", True

    def key(self, ev: UsageEvent, tz: tzinfo | None) -> str:
        d = local_day(ev, tz)
        return (d - timedelta(days=d.weekday())).isoformat() if d else "-"


@GROUPINGS.register_instance_of
class ByMonth(Grouping):
    name, title, chronological = "month", "month", True

    def key(self, ev: UsageEvent, tz: tzinfo | None) -> str:
        d = local_day(ev, tz)
        return d.isoformat()[:7] if d else "-"


@GROUPINGS.register_instance_of
class ByBlock(Grouping):
    """5-hour blocks as Claude's subscription plans meter usage (as ccusage's ``blocks``
    reports them): a block starts at the hour of its first call (UTC) and lasts 5 hours; the
    next call after it, or after a 5-hour gap, starts another. A block depends on the calls
    before it, so rows are made once every call is in (:meth:`Tally.sorted_rows`)."""

    name, title, chronological = "block", "block (5 h)", True
    deferred = True

    def key(self, ev: UsageEvent, tz: tzinfo | None) -> str:
        raise NotImplementedError("blocks are made from every call: Tally.sorted_rows")


@GROUPINGS.register_instance_of
class BySession(Grouping):
    name, title = "session", "session"

    def key(self, ev: UsageEvent, tz: tzinfo | None) -> str:
        return ev.session


@GROUPINGS.register_instance_of
class ByProject(Grouping):
    name, title = "project", "project"

    def key(self, ev: UsageEvent, tz: tzinfo | None) -> str:
        return ev.project


#: a 5-hour block (:class:`ByBlock`)
BLOCK = timedelta(hours=5)


def block_starts(times: list[datetime]) -> list[datetime]:
    """The start of the block of each time in ``times`` (sorted)."""
    out: list[datetime] = []
    start: datetime | None = None
    prev: datetime | None = None
    for t in times:
        if start is None or prev is None or t >= start + BLOCK or t - prev >= BLOCK:
            start = t.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        out.append(start)
        prev = t
    return out


@GROUPINGS.register_instance_of
class ByModel(Grouping):
    name, title = "model", "model"

    def key(self, ev: UsageEvent, tz: tzinfo | None) -> str:
        return ev.model or "-"


@GROUPINGS.register_instance_of
class ByAgent(Grouping):
    name, title = "agent", "agent"

    def key(self, ev: UsageEvent, tz: tzinfo | None) -> str:
        return ev.agent


# -- dates and zones --------------------------------------------------------------------------
def resolve_zone(name: str | None) -> tzinfo | None:
    """An IANA time zone (``Europe/Berlin``, ``UTC``); None or ``local``: the system's."""
    if not name or name == "local":
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise CtxtoolError(f"unknown time zone {name!r} (an IANA name such as UTC or Europe/Berlin)",
                           kind=Failure.USAGE) from e


def today_in(tz: tzinfo | None, now: datetime | None = None) -> date:
    now = now or datetime.now(UTC)
    return now.astimezone(tz).date()


_DAYS = lazyre.compile(r"^(\d{1,5})d$")


def parse_day(text: str, today: date) -> date:
    """A day as ``--since``/``--until`` take it: ``YYYY-MM-DD`` (or ``YYYYMMDD``), ``today``,
    ``yesterday``, or ``Nd``: the first of the last N days (``7d`` is today and the 6 before)."""
    s = text.strip().lower()
    if s == "today":
        return today
    if s == "yesterday":
        return today - timedelta(days=1)
    m = _DAYS.match(s)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise CtxtoolError(f"bad day {text!r}: Nd needs N of 1 or more", kind=Failure.USAGE)
        return today - timedelta(days=n - 1)
    try:
        return date.fromisoformat(s)
    except ValueError:
        pass
    raise CtxtoolError(f"bad day {text!r}: use YYYY-MM-DD, today, yesterday or Nd (e.g. 7d)", kind=Failure.USAGE)


# -- pricing ---------------------------------------------------------------------------------
def price_event(ev: UsageEvent, tokens: Usage, day: date | None) -> float | None:
    """The cost in USD of one call from the registry's prices on its day; None when the
    registry does not know its model."""
    # lazy: start-up (loaded only when this runs: ..tokens)
    from ..tokens import models as registry

    info = registry.lookup(ev.model)
    if info is None:
        return None
    return info.prices(day).cost(tokens.input, tokens.output, tokens.cache_creation, tokens.cache_read)


@dataclass(slots=True)
class Tally:
    """Rows being filled, the totals, and what was left out."""

    grouping: Grouping
    tz: tzinfo | None
    since: date | None = None
    until: date | None = None
    rows: dict[str, UsageRow] = field(default_factory=dict)
    total: UsageRow = field(default_factory=lambda: UsageRow("total"))
    duplicates: int = 0
    outside: int = 0  # calls before --since or after --until (or undated, with either)
    unpriced_models: set[str] = field(default_factory=set)
    seen: set[Any] = field(default_factory=set)
    breakdown: bool = False  # each row's calls per model too
    pending: list[tuple[UsageEvent, Usage, float | None]] = field(default_factory=list)  # deferred groupings

    def add_all(self, evs: Iterable[UsageEvent]) -> None:
        for ev in evs:
            self.add(ev)

    def sorted_rows(self) -> list[UsageRow]:
        if self.pending:
            self._blocks()
        rows = list(self.rows.values())
        if self.grouping.chronological:
            return sorted(rows, key=lambda r: r.key)
        return sorted(rows, key=lambda r: (-r.cost_usd, -r.tokens.total, r.key))

    def add(self, ev: UsageEvent) -> None:
        if ev.key is not None:
            if ev.key in self.seen:
                self.duplicates += 1
                return
            self.seen.add(ev.key)
        day = local_day(ev, self.tz)
        if (self.since or self.until) and (
            day is None or (self.since and day < self.since) or (self.until and day > self.until)
        ):
            self.outside += 1
            return
        tokens = ev.usage
        cost = price_event(ev, tokens, day)
        if cost is None:
            self.unpriced_models.add(ev.model or "-")
        self.total.add(ev, tokens, cost)
        if self.grouping.deferred:
            self.pending.append((ev, tokens, cost))
            return
        self._row(self.grouping.key(ev, self.tz)).add(ev, tokens, cost)

    def _row(self, key: str) -> UsageRow:
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = UsageRow(key, by_model={} if self.breakdown else None)
        return row

    def _blocks(self) -> None:
        """The 5-hour blocks of the pending calls (undated calls: one row, ``-``)."""
        dated = sorted((p for p in self.pending if p[0].time is not None), key=lambda p: p[0].time)  # type: ignore[arg-type,return-value]
        starts = block_starts([p[0].time for p in dated])  # type: ignore[misc]
        for (ev, tokens, cost), start in zip(dated, starts, strict=True):
            row = self._row(start.astimezone(self.tz).strftime("%Y-%m-%d %H:%M"))
            row.ends = start + BLOCK
            row.add(ev, tokens, cost)
        for ev, tokens, cost in self.pending:
            if ev.time is None:
                self._row("-").add(ev, tokens, cost)
        self.pending = []
