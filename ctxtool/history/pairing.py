"""Tool call / tool result pairing, shared by validation and every operation that cuts
or drops messages (so none of them can leave an orphan)."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..model import Block, Message


def is_server_side(b: Block) -> bool:
    """Calls executed by the provider (e.g. Codex web_search) have no result item, nor does a
    call that ends the run (OpenHands ``finish``): ``formats.base.SERVER_TOOL`` / ``TERMINAL_CALL``."""
    x = b.extra
    return bool(x and (x.get("server_tool") or x.get("terminal_call")))


#: calls that end an agent's run, named so: no result answers them (OpenHands ``finish``,
#: read as a terminal call; the same call converted to a chat format that cannot mark it)
TERMINAL_NAMES = ("finish",)


def is_terminal(b: Block) -> bool:
    """A call that ends the run: no result is expected for it at the end of a transcript."""
    return is_server_side(b) or (b.type == "tool_call" and b.name in TERMINAL_NAMES)


@dataclass(slots=True)
class Pairing:
    """For each message index: the indices of the messages it is bound to by tool pairs."""

    # (call message index, call block, result message index or None)
    pairs: list[tuple[int, Block, int | None]] = field(default_factory=list)
    # result blocks with no call: (message index, block)
    orphans: list[tuple[int, Block]] = field(default_factory=list)
    # a result for a call that was already answered: (message index, block)
    duplicate_results: list[tuple[int, Block]] = field(default_factory=list)
    # a call id reused while an earlier call with that id is still unanswered
    duplicate_calls: list[tuple[int, Block]] = field(default_factory=list)

    def unanswered(self) -> list[tuple[int, Block]]:
        return [(ci, b) for ci, b, ri in self.pairs if ri is None]

    def trailing(self, msgs: Sequence[Message]) -> list[Block]:
        """The unanswered calls of a trailing assistant message (the tool-output cache spec): ``validate``
        reports them, ``repair`` strips them. A terminal call there ended the run: not one of them."""
        last = len(msgs) - 1
        if last < 0 or msgs[last].role != "assistant":
            return []
        return [b for ci, b, ri in self.pairs if ri is None and ci == last and not is_terminal(b)]


#: a tool call or tool result of one message, as pairing sees it: (a call?, its id, the other
#: call ids a result also answers). A call's id is None when it pairs with nothing (the
#: provider ran it: Codex web_search; or it has none); a result's may be None too.
Event = tuple[bool, str | None, Sequence[str]]

_PAIRED = ("tool_call", "tool_result")


def events(m: Message) -> Sequence[Event]:
    """The pairing events of a message: one per tool call and tool result block, in order."""
    out: list[Event] | None = None  # most messages have none: no list for them
    for b in m.content:
        t = b.type
        if t == "tool_call":
            e: Event = (True, None if is_server_side(b) else b.id, ())
        elif t == "tool_result":
            x = b.extra
            e = (False, b.id, x.get("answers", ()) if x else ())
        else:
            continue
        if out is None:
            out = [e]
        else:
            out.append(e)
    return out or ()


@dataclass(slots=True)
class Matched:
    """:func:`match` by position: (message, event) for each call and result."""

    pairs: list[tuple[int, int, int | None]] = field(default_factory=list)  # call message, its event, result message
    orphans: list[tuple[int, int]] = field(default_factory=list)
    duplicate_results: list[tuple[int, int]] = field(default_factory=list)
    duplicate_calls: list[tuple[int, int]] = field(default_factory=list)


def match(evs: Sequence[Sequence[Event]]) -> Matched:
    """The one pairing rule, over each message's events: a result answers the oldest open
    call with its id (and the open calls it also answers); a result for a call already
    answered is a duplicate, one for no call an orphan; a call id reused while an earlier
    call with it is unanswered is a duplicate call."""
    p = Matched()
    pairs, dup_calls = p.pairs, p.duplicate_calls
    open_calls: dict[str, deque[int]] = {}  # id -> indices into pairs
    answered: set[str] = set()
    for i, es in enumerate(evs):
        if not es:
            continue
        for j, (is_call, cid, also) in enumerate(es):
            if is_call:
                if cid is None:
                    continue  # pairs with nothing
                q = open_calls.get(cid)
                if q is None:
                    q = open_calls[cid] = deque()
                elif q:
                    dup_calls.append((i, j))
                q.append(len(pairs))
                pairs.append((i, j, None))
                continue
            for extra_id in also:
                q2 = open_calls.get(extra_id)
                if q2:
                    k = q2.popleft()
                    pairs[k] = (pairs[k][0], pairs[k][1], i)
                    answered.add(extra_id)
            q = open_calls.get(cid or "")
            if q:
                k = q.popleft()
                pairs[k] = (pairs[k][0], pairs[k][1], i)
                answered.add(cid or "")
            elif cid in answered:
                p.duplicate_results.append((i, j))
            else:
                p.orphans.append((i, j))
    return p


def pair(msgs: Sequence[Message]) -> Pairing:
    """Pair calls with results by id, in order (:func:`match`), as blocks."""
    m = match([events(x) for x in msgs])
    blocks = [[b for b in x.content if b.type in _PAIRED] for x in msgs]  # by event, as events() reads them
    return Pairing(
        [(ci, blocks[ci][cj], ri) for ci, cj, ri in m.pairs],
        [(i, blocks[i][j]) for i, j in m.orphans],
        [(i, blocks[i][j]) for i, j in m.duplicate_results],
        [(i, blocks[i][j]) for i, j in m.duplicate_calls],
    )


def closed_groups(msgs: Sequence[Message]) -> list[int]:
    """For each message, the index of the first message of the smallest run of consecutive
    messages containing it that no tool pair crosses. A cut before message ``i`` keeps every
    pair whole exactly when ``group_start[i] == i``."""
    return group_starts([events(m) for m in msgs])


def group_starts(evs: Sequence[Sequence[Event]]) -> list[int]:
    """:func:`closed_groups` of messages given by their pairing events (a reader that has
    not built the messages: :mod:`ctxtool.stats.fast`)."""
    n = len(evs)
    reach = _plain_reach(evs)
    if reach is None:
        reach = _reach(evs)
    starts = [0] * n
    start = 0
    furthest = -1
    for i in range(n):
        if i > furthest:
            start = i
        starts[i] = start
        r = reach[i]
        if r > furthest:
            furthest = r
    return starts


def _reach(evs: Sequence[Sequence[Event]]) -> list[int]:
    """For each message, the furthest message it is bound to by a tool pair (itself when
    none), as :func:`match` pairs them."""
    reach = list(range(len(evs)))
    p = match(evs)
    for ci, _, ri in p.pairs:
        if ri is not None and ri > reach[ci]:
            reach[ci] = ri
    if p.duplicate_results:
        # a second result for a call stays with the call too (dropping the call alone would orphan it)
        answered: dict[str, list[int]] = defaultdict(list)  # call id -> indices of answered calls
        for ci, cj, ri in p.pairs:
            if ri is not None:
                answered[evs[ci][cj][1] or ""].append(ci)
        for i, j in p.duplicate_results:
            before = [ci for ci in answered.get(evs[i][j][1] or "", ()) if ci < i]
            if before:
                reach[before[-1]] = max(reach[before[-1]], i)
    return reach


def _plain_reach(evs: Sequence[Sequence[Event]]) -> list[int] | None:
    """:func:`_reach` where :func:`match` has one answer for each result: no call id used again
    while a call with it is open, and every result answers an open call by its id alone (it
    names no others). Then a result's call is the one open call with its id, and nothing else
    binds; None where a record has anything else (:func:`_reach` reads it)."""
    reach = list(range(len(evs)))
    open_calls: dict[str, int] = {}  # id -> the message of the open call with it
    for i, es in enumerate(evs):
        for is_call, cid, also in es:
            if is_call:
                if cid is None:
                    continue  # pairs with nothing
                if cid in open_calls:
                    return None  # a duplicate call
                open_calls[cid] = i
            elif cid is None or also:
                return None
            else:
                ci = open_calls.pop(cid, None)
                if ci is None:
                    return None  # an orphan or a duplicate result
                if i > reach[ci]:
                    reach[ci] = i
    return reach


def valid_cut(msgs: Sequence[Message], i: int, starts: Sequence[int] | None = None) -> bool:
    """True when cutting before message ``i`` splits no tool call from its result."""
    if i <= 0 or i >= len(msgs):
        return True
    s = starts if starts is not None else closed_groups(msgs)
    return s[i] == i


def tool_names(msgs: Iterable[Message]) -> dict[str, str]:
    """Call id -> tool name, for every tool call that has both."""
    names: dict[str, str] = {}
    for m in msgs:
        for b in m.content:
            if b.type == "tool_call" and b.id and b.name:
                names[b.id] = b.name
    return names
