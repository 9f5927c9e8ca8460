"""Tool call / tool result pairing, shared by validation and every operation that cuts
or drops messages (so none of them can leave an orphan)."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .model import Block, Message


def is_server_side(b: Block) -> bool:
    """Calls executed by the provider (e.g. Codex web_search) have no result item."""
    return bool(b.extra and b.extra.get("server_tool"))


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


def pair(msgs: Sequence[Message]) -> Pairing:
    """Pair calls with results by id, in order: a result answers the oldest open call with its id."""
    p = Pairing()
    open_calls: dict[str, deque[int]] = defaultdict(deque)  # id -> indices into p.pairs
    answered: set[str] = set()
    for i, m in enumerate(msgs):
        for b in m.content:
            if b.type == "tool_call":
                if is_server_side(b) or b.id is None:
                    continue
                if open_calls[b.id]:
                    p.duplicate_calls.append((i, b))
                open_calls[b.id].append(len(p.pairs))
                p.pairs.append((i, b, None))
            elif b.type == "tool_result":
                for extra_id in (b.extra or {}).get("answers", ()):
                    q2 = open_calls.get(extra_id)
                    if q2:
                        k = q2.popleft()
                        p.pairs[k] = (p.pairs[k][0], p.pairs[k][1], i)
                        answered.add(extra_id)
                q = open_calls.get(b.id or "")
                if q:
                    k = q.popleft()
                    ci, cb, _ = p.pairs[k]
                    p.pairs[k] = (ci, cb, i)
                    answered.add(b.id or "")
                elif b.id in answered:
                    p.duplicate_results.append((i, b))
                else:
                    p.orphans.append((i, b))
    return p


def closed_groups(msgs: Sequence[Message]) -> list[int]:
    """For each message, the index of the first message of the smallest run of consecutive
    messages containing it that no tool pair crosses. A cut before message ``i`` keeps every
    pair whole exactly when ``group_start[i] == i``."""
    n = len(msgs)
    reach = list(range(n))  # furthest index each message is bound to
    p = pair(msgs)
    answered: dict[str, list[int]] = defaultdict(list)  # call id -> indices of answered calls
    for ci, cb, ri in p.pairs:
        if ri is not None:
            reach[ci] = max(reach[ci], ri)
            answered[cb.id or ""].append(ci)
    # a second result for a call stays with the call too (dropping the call alone would orphan it)
    for i, b in p.duplicate_results:
        before = [ci for ci in answered.get(b.id or "", ()) if ci < i]
        if before:
            reach[before[-1]] = max(reach[before[-1]], i)
    starts = [0] * n
    start = 0
    furthest = -1
    for i in range(n):
        if i > furthest:
            start = i
        starts[i] = start
        furthest = max(furthest, reach[i])
    return starts


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
