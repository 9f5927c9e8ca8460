"""AgentCore.Context's ``truncate``: a window of the history within a message and character budget,
``sliding`` (the most recent messages that fit) or ``bookends`` (the first and last, the head
given half of each budget). System messages are always kept and count against neither budget;
the first user message is kept with ``keep_first_user``; a tool call and its result stay
together (:func:`ctxtool.history.pairing.closed_groups`); a newest unit over the budget is kept
and the result says ``over_limit``. Kept messages are written back verbatim."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..config import BY_KEY
from ..errors import CtxtoolError, Failure
from ..formats.base import STRUCTURE_ERRORS, record_bytes, writes_anew
from ..model import KIND_INJECTED, Message, Transcript, transcript_json
from ..run.operation import FileResults, MapTask, Operation, Results, RunContext, Task
from ..run.runner import run_each
from .pairing import Event, events, group_starts

if TYPE_CHECKING:
    from ..formats.base import ErrorPolicy, Format
    from ..formats.dataset import DatasetFormat
    from ..io.jsonl import Source
    from ..model import Line
    from ..stats.fast import Tally

STRATEGIES = ("sliding", "bookends")
#: AgentCore.Context's defaults, as the settings table holds them (``window.*`` in :mod:`ctxtool.config`)
STRATEGY = str(BY_KEY["window.strategy"].default)
MAX_MESSAGES = int(BY_KEY["window.max_messages"].default)
MAX_CHARS = int(BY_KEY["window.max_chars"].default)
KEEP_FIRST_USER = bool(BY_KEY["window.keep_first_user"].default)
_ALIASES = {"sliding_window": "sliding", "keep_bookends": "bookends", "sliding-window": "sliding"}


@dataclass(slots=True)
class WindowResult:
    transcript: str
    path: str
    index: int
    id: str | None
    strategy: str
    max_messages: int
    max_chars: int
    keep_first_user: bool
    messages_before: int
    messages_after: int
    chars_before: int
    chars_after: int
    dropped: int
    dropped_tool_calls: int  # tool calls dropped (each with its result)
    dropped_tool_results: int
    kept_first_user: bool  # the first user message was kept only because of keep_first_user
    over_limit: bool  # the kept messages still exceed a budget
    dropped_indices: list[int]

    def to_json(self) -> dict[str, Any]:
        return {
            **transcript_json(self),
            "strategy": self.strategy,
            "max_messages": self.max_messages,
            "max_chars": self.max_chars,
            "keep_first_user": self.keep_first_user,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "chars_before": self.chars_before,
            "chars_after": self.chars_after,
            "dropped": self.dropped,
            "dropped_tool_calls": self.dropped_tool_calls,
            "dropped_tool_results": self.dropped_tool_results,
            "kept_first_user": self.kept_first_user,
            "over_limit": self.over_limit,
        }


def normalize_strategy(name: str) -> str:
    s = _ALIASES.get(name, name)
    if s not in STRATEGIES:
        raise CtxtoolError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}", kind=Failure.USAGE)
    return s


def window_settings(config: Any) -> dict[str, Any]:
    """:func:`window_file`'s ``strategy``, ``max_messages``, ``max_chars`` and
    ``keep_first_user`` from the ``window.*`` settings of ``config`` (a
    :class:`ctxtool.config.Config`, flags over the environment over the file over defaults)."""
    return {"strategy": normalize_strategy(config["window.strategy"]), "max_messages": int(config["window.max_messages"]),
            "max_chars": int(config["window.max_chars"]), "keep_first_user": bool(config["window.keep_first_user"])}


class WindowRows:
    """What the window needs of a transcript's messages, by position: each one's role, its
    characters toward the budget (a system message: 0, it is always kept) and its tool
    calls and results as pairing sees them (:func:`ctxtool.history.pairing.events`; read only when
    the messages do not all fit). Built from the messages (:meth:`of`), or from a dataset
    record's parsed values without them (:meth:`of_tally`, :mod:`ctxtool.stats.fast`)."""

    __slots__ = ("_events", "_msgs", "chars", "roles")

    def __init__(self, roles: list[str], chars: list[int], evs: Sequence[Sequence[Event]] | None = None,
                 msgs: Sequence[Message] = ()) -> None:
        self.roles = roles
        self.chars = chars
        self._events = evs
        self._msgs = msgs

    @classmethod
    def of(cls, msgs: Sequence[Message]) -> WindowRows:
        return cls([m.role for m in msgs], message_chars(msgs), msgs=msgs)

    @classmethod
    def of_tally(cls, tl: Tally) -> WindowRows:
        """The view of a dataset record from its tally: the messages its format would read."""
        if tl.events is None:
            raise ValueError("a tally read without its pairing events (stats_fast.read pairs=True)")
        roles = ["user" if r == KIND_INJECTED else r for r in tl.rows]  # an injected message's role is user's
        return cls(roles, [0 if r == "system" else c for r, c in zip(roles, tl.chars, strict=True)], tl.events)

    @property
    def events(self) -> Sequence[Sequence[Event]]:
        if self._events is None:
            self._events = [events(m) for m in self._msgs]
        return self._events

    def tool_counts(self, at: Iterable[int]) -> tuple[int, int]:
        """How many tool calls and tool results the messages ``at`` hold."""
        evs = self.events
        n = calls = 0
        for i in at:
            for e in evs[i]:
                n += 1
                if e[0]:
                    calls += 1
        return calls, n - calls


def _units(roles: Sequence[str], starts: Sequence[int], chars: Sequence[int]) -> tuple[list[list[int]], list[int]]:
    """Indices of non-system messages grouped into runs no tool pair crosses, and each run's
    characters."""
    units: list[list[int]] = []
    sums: list[int] = []
    cur: list[int] | None = None
    cur_start = -1
    for i, role in enumerate(roles):
        s = starts[i]
        if s != cur_start:
            cur_start = s
            cur = None
        if role != "system":
            if cur is None:
                cur = [i]
                units.append(cur)
                sums.append(chars[i])
            else:
                cur.append(i)
                sums[-1] += chars[i]
    return units, sums


def plan_window(
    msgs: Sequence[Message],
    *,
    strategy: str = STRATEGY,
    max_messages: int = MAX_MESSAGES,
    max_chars: int = MAX_CHARS,
    keep_first_user: bool = KEEP_FIRST_USER,
    chars: Sequence[int] | None = None,
) -> tuple[list[bool], bool, bool]:
    """Which messages to keep: ``(keep, kept_first_user, over_limit)``. ``chars``: each
    message's characters as :func:`message_chars` gives them, when the caller has them."""
    v = WindowRows.of(msgs)
    if chars is not None:
        v.chars = list(chars)
    return plan_rows(v, strategy=strategy, max_messages=max_messages, max_chars=max_chars, keep_first_user=keep_first_user)


def plan_rows(
    v: WindowRows,
    *,
    strategy: str = STRATEGY,
    max_messages: int = MAX_MESSAGES,
    max_chars: int = MAX_CHARS,
    keep_first_user: bool = KEEP_FIRST_USER,
) -> tuple[list[bool], bool, bool]:
    """:func:`plan_window` of a :class:`WindowRows`."""
    strategy = normalize_strategy(strategy)
    if max_messages < 1 or max_chars < 1:
        raise CtxtoolError("--max-messages and --max-chars must be at least 1", kind=Failure.USAGE)
    roles = v.roles
    n = len(roles)
    chars = v.chars
    if sum(chars) <= max_chars and n - roles.count("system") <= max_messages:
        return [True] * n, False, False  # all fit (none at all: nothing to drop)
    keep = [r == "system" for r in roles]
    evs = v.events
    units, sums = _units(roles, group_starts(evs), chars)
    used_n = used_c = 0
    chosen: set[int] = set()  # unit positions

    first_user_unit = None
    if keep_first_user:
        for k, u in enumerate(units):  # a user message that holds no tool result
            for i in u:
                if roles[i] == "user":
                    for e in evs[i]:
                        if not e[0]:
                            break
                    else:
                        first_user_unit = k
                        break
            if first_user_unit is not None:
                break
    if first_user_unit is not None:
        chosen.add(first_user_unit)
        used_n += len(units[first_user_unit])
        used_c += sums[first_user_unit]

    last = len(units) - 1
    if strategy == "bookends":
        head_n, head_c = max_messages // 2, max_chars // 2
        for k in range(len(units)):
            if k in chosen:
                continue
            a = len(units[k])
            b = sums[k]
            if k == last or used_n + a > head_n or used_c + b > head_c:
                break
            chosen.add(k)
            used_n += a
            used_c += b
    # the tail (sliding: the whole window) from the newest unit back; the conversation's
    # last unit always stays, over the budget or not
    for k in range(last, -1, -1):
        if k in chosen:
            continue
        a = len(units[k])
        b = sums[k]
        if k != last and (used_n + a > max_messages or used_c + b > max_chars):
            break
        chosen.add(k)
        used_n += a
        used_c += b
    for k in chosen:
        for i in units[k]:
            keep[i] = True
    kept_first_user = False
    if first_user_unit is not None:  # kept only for keep_first_user: not where the window reached it
        k = last
        while k in chosen and k != first_user_unit:
            k -= 1
        natural = k == first_user_unit and k in chosen
        if not natural and strategy == "bookends":
            k = 0
            while k in chosen and k != first_user_unit:
                k += 1
            natural = k == first_user_unit and k in chosen
        kept_first_user = not natural
    over = used_n > max_messages or used_c > max_chars
    return keep, kept_first_user, over


def message_chars(msgs: Sequence[Message]) -> list[int]:
    """Each message's characters toward the limit (a system message: 0, it is always kept)."""
    return [0 if m.role == "system" else m.chars() for m in msgs]


def window_messages(
    msgs: Sequence[Message],
    *,
    strategy: str = STRATEGY,
    max_messages: int = MAX_MESSAGES,
    max_chars: int = MAX_CHARS,
    keep_first_user: bool = KEEP_FIRST_USER,
) -> tuple[list[Message], int]:
    """AgentCore.Context's ``truncate/2``: the kept messages and the dropped count."""
    keep, _, _ = plan_window(
        msgs, strategy=strategy, max_messages=max_messages, max_chars=max_chars, keep_first_user=keep_first_user
    )
    kept = [m for m, k in zip(msgs, keep, strict=True) if k]
    return kept, len(msgs) - len(kept)


def window(
    t: Transcript,
    *,
    strategy: str = STRATEGY,
    max_messages: int = MAX_MESSAGES,
    max_chars: int = MAX_CHARS,
    keep_first_user: bool = KEEP_FIRST_USER,
) -> WindowResult:
    """Drop messages from ``t`` (in place) so the rest fits; returns what was dropped."""
    msgs = t.messages
    v = WindowRows.of(msgs)
    r = windowed(t, v, strategy=strategy, max_messages=max_messages, max_chars=max_chars, keep_first_user=keep_first_user)
    if r.dropped_indices:
        t.remove({id(msgs[i]) for i in r.dropped_indices})
    return r


def windowed(
    t: Transcript,
    v: WindowRows,
    *,
    strategy: str = STRATEGY,
    max_messages: int = MAX_MESSAGES,
    max_chars: int = MAX_CHARS,
    keep_first_user: bool = KEEP_FIRST_USER,
) -> WindowResult:
    """What :func:`window` drops from the messages ``v`` views (``t`` names them; it is not
    changed)."""
    strategy = normalize_strategy(strategy)
    keep, kept_first, over = plan_rows(
        v, strategy=strategy, max_messages=max_messages, max_chars=max_chars, keep_first_user=keep_first_user
    )
    chars = v.chars
    dropped = [i for i, k in enumerate(keep) if not k]  # never a system message
    before_n = len(v.roles) - v.roles.count("system")
    before_c = sum(chars)
    calls, results = v.tool_counts(dropped) if dropped else (0, 0)
    return WindowResult(
        transcript=t.label,
        path=t.path,
        index=t.index,
        id=t.id,
        strategy=strategy,
        max_messages=max_messages,
        max_chars=max_chars,
        keep_first_user=keep_first_user,
        messages_before=before_n,
        messages_after=before_n - len(dropped),
        chars_before=before_c,
        chars_after=before_c - sum([chars[i] for i in dropped]),
        dropped=len(dropped),
        dropped_tool_calls=calls,
        dropped_tool_results=results,
        kept_first_user=kept_first and bool(dropped),
        over_limit=over,
        dropped_indices=dropped,
    )


# -- files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowOp(Operation[Results[WindowResult]]):
    """:func:`window` as a file operation (see :mod:`ctxtool.run.runner`). ``fast``: a dataset
    record whose tally gives its view (:mod:`ctxtool.stats.fast`) is planned from it, and
    the messages it keeps are written back as they came, none read into the model; False
    reads every message. The output and the results are the same either way (the tests
    compare both)."""

    name: ClassVar[str] = "window"
    shares_source: ClassVar[bool] = True  # drops whole messages: the record written is built from new lists
    makes_record_bytes: ClassVar[bool] = True  # its read makes them (_WindowTask.read)
    strategy: str = STRATEGY
    max_messages: int = MAX_MESSAGES
    max_chars: int = MAX_CHARS
    keep_first_user: bool = KEEP_FIRST_USER
    fast: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", normalize_strategy(self.strategy))
        if self.max_messages < 1 or self.max_chars < 1:
            raise CtxtoolError("--max-messages and --max-chars must be at least 1", kind=Failure.USAGE)

    def start(self, ctx: RunContext) -> Task[Results[WindowResult]]:
        return _WindowTask(self, self.fast and ctx.to is None)  # another format on output: every message read

    def options(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "max_messages": self.max_messages, "max_chars": self.max_chars,
                "keep_first_user": self.keep_first_user}


_PLANNED = "window_result"  # where a record planned from its tally carries its result


@functools.cache
def _fast_read() -> Any:
    """:mod:`ctxtool.stats.fast`, imported on first use (start-up: loaded only when the fast
    read runs) and kept: records.process starts a task per record."""
    from ..stats import fast

    return fast


@functools.cache
def _dataset_format() -> type[DatasetFormat]:
    """:class:`ctxtool.formats.dataset.DatasetFormat`, imported on first use and kept (as
    :func:`_fast_read`)."""
    from ..formats.dataset import DatasetFormat

    return DatasetFormat


class _WindowTask(MapTask[WindowResult]):
    def __init__(self, op: WindowOp, fast: bool) -> None:
        super().__init__(self._window)
        self.opts = op.options()
        self.fast = fast

    def read(self, src: Source, fmt: str | Format | None, policy: ErrorPolicy) -> Iterator[Transcript]:
        # a caller's parsed record comes without its bytes (WindowOp.makes_record_bytes): they
        # are made where it may be written as read (read in full, or passed on unchanged)
        if self.fast:
            ts = _fast_read().read(src, fmt, policy, exact=False, make=self._planned, pairs=True, full=record_bytes)
            if ts is not None:
                return ts
        for ln in src.peek:
            record_bytes(ln)
        return super().read(src, fmt, policy)

    def _planned(self, f: Format, src: Source, ln: Line, stand_in: Transcript) -> Transcript | None:
        """A record planned from its tally (on its stand-in), written with only the messages it
        keeps, none of them read into the model."""
        if not isinstance(f, _dataset_format()):
            return None
        tl = stand_in.extra[_fast_read().TALLY_KEY]
        r = windowed(stand_in, WindowRows.of_tally(tl), **self.opts)
        dropped = set(r.dropped_indices)
        i = stand_in.index
        try:
            if dropped and ln.raw is None and not writes_anew(ln, f.messages_key(ln.obj), dropped):
                record_bytes(ln)
            if dropped:  # the messages kept written back as they came: not read into the model
                t = f.line_record(ln, src, i, [k for k in range(len(tl.rows)) if k not in dropped], read=False)
            else:
                record_bytes(ln)
                t = f.passed_record(ln, src, i)  # unchanged: written as it was read
        except CtxtoolError:
            return None  # read in full: the format says what is wrong
        except STRUCTURE_ERRORS:
            return None
        t.extra[_PLANNED] = r
        return t

    def _window(self, t: Transcript) -> WindowResult:
        r = t.extra.pop(_PLANNED, None)
        return r if isinstance(r, WindowResult) else window(t, **self.opts)


@dataclass(slots=True)
class WindowReport(FileResults[WindowResult]):
    """What :func:`window_file` dropped, per transcript and in total."""

    @property
    def dropped(self) -> int:
        return sum(r.dropped for r in self.transcripts)

    def totals(self) -> dict[str, Any]:
        keys = ("messages_before", "messages_after", "chars_before", "chars_after", "dropped", "dropped_tool_calls",
                "dropped_tool_results")
        out: dict[str, Any] = {"transcripts": len(self.transcripts)}
        out.update({k: sum(getattr(r, k) for r in self.transcripts) for k in keys})
        out["over_limit"] = sum(1 for r in self.transcripts if r.over_limit)
        return out


def window_file(
    path: str,
    output: str | None = None,
    *,
    strategy: str = STRATEGY,
    max_messages: int = MAX_MESSAGES,
    max_chars: int = MAX_CHARS,
    keep_first_user: bool = KEEP_FIRST_USER,
    fmt: str | None = None,
    to: str | None = None,
    on_error: str = "fail",
    jobs: int | None = None,
    engine: Any = None,
    fast: bool = True,
    messages_column: str | None = None,
) -> WindowReport:
    """``ctxtool window``: keep a window of every transcript of ``path`` and write them to
    ``output`` (``-``: stdout; None: nothing, a dry run). ``engine``: run as shards
    (:class:`ctxtool.run.engines.Sharding`). ``fast``: see :class:`WindowOp`. ``messages_column``: a
    Parquet dataset's conversation column (:mod:`ctxtool.io.parquet`)."""
    op = WindowOp(strategy, max_messages, max_chars, keep_first_user, fast)
    return run_each(WindowReport, op, path, output, fmt=fmt, to=to, on_error=on_error, jobs=jobs, engine=engine,
                    messages_column=messages_column)
