"""Where history can be cut (pi-style compaction, with the Go agent's rules): a cut before message
``i`` summarizes ``messages[:i]`` and keeps the rest verbatim. Valid cut points are user and
assistant messages (a user message of only tool results is a tool message); a cut never separates
a call from its result; when even the newest turn is over the budget the cut lands mid-turn at an
assistant message and the turn is flagged as split."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..model import Message, Transcript, transcript_json
from ..tokens.count import Tokenizer, count_messages, get_tokenizer
from .pairing import closed_groups

if TYPE_CHECKING:
    from ..run.operation import FileRun


@dataclass(frozen=True, slots=True)
class CutPoint:
    cut_index: int | None  # index into the canonical message list; None: nothing to cut
    first_kept_id: str | None
    tokens_before: int
    tokens_kept: int
    tokens_summarized: int
    messages_summarized: int
    messages_kept: int
    split_turn: bool
    turn_start_index: int | None  # for a split turn: where the turn begins
    keep_budget: int | None  # the token budget actually used (after clamping)
    keep_recent: int | None  # the message count used when no token budget is given

    def to_json(self) -> dict[str, Any]:
        return {
            "cut_index": self.cut_index,
            "first_kept_id": self.first_kept_id,
            "tokens_before": self.tokens_before,
            "tokens_kept": self.tokens_kept,
            "tokens_summarized": self.tokens_summarized,
            "messages_summarized": self.messages_summarized,
            "messages_kept": self.messages_kept,
            "split_turn": self.split_turn,
            "turn_start_index": self.turn_start_index,
            "keep_budget": self.keep_budget,
            "keep_recent": self.keep_recent,
        }


def is_tool_message(m: Message) -> bool:
    return m.role == "tool" or any(b.type == "tool_result" for b in m.content)


def cut_candidates(msgs: Sequence[Message]) -> list[bool]:
    """For each index: may history be cut right before this message?

    Not before a tool message, not inside a tool pair, and not between two parts of
    one API response (consecutive assistant messages sharing a usage key).
    """
    starts = closed_groups(msgs)
    return [
        i > 0
        and starts[i] == i
        and m.role in ("user", "assistant")
        and not is_tool_message(m)
        and not (
            m.role == "assistant"
            and m.usage_key is not None
            and msgs[i - 1].role == "assistant"
            and msgs[i - 1].usage_key == m.usage_key
        )
        for i, m in enumerate(msgs)
    ]


def find_cut(
    msgs: Sequence[Message],
    *,
    keep_recent_tokens: int | None = 20000,
    keep_recent: int = 5,
    effective_limit: int | None = None,
    tokenizer: Tokenizer | None = None,
    counts: Sequence[int] | None = None,
) -> CutPoint:
    """Pi-style compaction's backward walk; the Go agent's message-count variant when no token budget is given
    and its clamp of the budget to half of the effective limit."""
    tok = tokenizer or get_tokenizer("heuristic")
    n = len(msgs)
    if counts is None:
        counts = count_messages(msgs, tok)
    weights = [0 if (m.role == "system" or not m.agent_visible) else c for m, c in zip(msgs, counts, strict=True)]
    total = sum(weights)
    ok = cut_candidates(msgs)
    budget = keep_recent_tokens if keep_recent_tokens and keep_recent_tokens > 0 else None
    if budget is not None and effective_limit is not None:  # 0 is a limit: keep nothing recent
        budget = min(budget, effective_limit // 2)

    def result(cut: int | None, split: bool = False, turn_start: int | None = None) -> CutPoint:
        if cut is None:
            return CutPoint(None, None, total, total, 0, 0, n, False, None, budget, None if budget is not None else keep_recent)
        kept = sum(weights[cut:])
        return CutPoint(
            cut, msgs[cut].id, total, kept, total - kept, cut, n - cut, split, turn_start, budget,
            None if budget is not None else keep_recent,
        )

    if budget is None:
        if n <= keep_recent:
            return result(None)
        target = n - keep_recent
        # the nearest valid cut at or before the target keeps at least keep_recent messages
        for i in range(target, 0, -1):
            if ok[i]:
                return _finish(msgs, ok, i, result)
        return result(None)

    if total <= budget:
        return result(None)
    acc = 0
    candidate = 0
    for i in range(n - 1, -1, -1):
        acc += weights[i]
        if acc >= budget:
            candidate = i
            break
    # Pi-style compaction: the cut falls on a user message at or after the candidate (keeping at most
    # the budget); when the newest turn alone is larger, mid-turn at an assistant message.
    for role in ("user", "assistant"):
        for i in range(max(candidate, 1), n):
            if ok[i] and msgs[i].role == role:
                return _finish(msgs, ok, i, result)
    # no valid cut after the candidate: the nearest one before it (keeps more than the budget)
    for i in range(min(candidate, n - 1), 0, -1):
        if ok[i]:
            return _finish(msgs, ok, i, result)
    return result(None)


def _finish(msgs: Sequence[Message], ok: list[bool], i: int, result: Any) -> CutPoint:
    if msgs[i].role == "user":
        return result(i)
    # an assistant message: the turn (which starts at the previous user message) is split
    turn_start = None
    for j in range(i - 1, -1, -1):
        if msgs[j].role == "user" and not is_tool_message(msgs[j]):
            turn_start = j
            break
    return result(i, True, turn_start)


# -- over transcripts -------------------------------------------------------------


@dataclass(slots=True)
class CutReport:
    """Where one transcript would be cut, and what applying the cut dropped (``-o``)."""

    transcript: str  # label: path, or path#id for datasets
    path: str
    index: int
    id: str | None
    messages: int
    cut: CutPoint
    effective_limit: int | None
    tokenizer: str
    first_kept_line: int | None = None  # source line of the first kept message
    applied: bool = False
    messages_dropped: int = 0  # messages removed when the cut was applied (system prompts stay)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            **transcript_json(self),
            "messages": self.messages,
        }
        d.update(self.cut.to_json())
        d["tokens_after"] = self.cut.tokens_kept
        d["first_kept_line"] = self.first_kept_line
        d["effective_limit"] = self.effective_limit
        d["tokenizer"] = self.tokenizer
        if self.applied:
            d["messages_dropped"] = self.messages_dropped
        return d


def cut_transcript(
    t: Transcript,
    *,
    keep_recent_tokens: int | None = 20000,
    keep_recent: int = 5,
    effective_limit: int | None = None,
    tokenizer: Tokenizer | None = None,
    apply: bool = False,
) -> CutReport:
    """Find the cut point of ``t`` (see :func:`find_cut`); with ``apply``, drop what lies
    before it (system messages stay), leaving every kept message untouched."""
    tok = tokenizer or get_tokenizer("heuristic")
    msgs = t.messages
    cp = find_cut(
        msgs,
        keep_recent_tokens=keep_recent_tokens,
        keep_recent=keep_recent,
        effective_limit=effective_limit,
        tokenizer=tok,
    )
    rep = CutReport(t.label, t.path, t.index, t.id, len(msgs), cp, effective_limit, tok.name)
    if cp.cut_index is not None:
        rep.first_kept_line = msgs[cp.cut_index].lineno
    if apply:
        rep.applied = True
        rep.messages_dropped = apply_cut(t, cp.cut_index)
    return rep


def apply_cut(t: Transcript, cut_index: int | None) -> int:
    """Drop the messages before ``cut_index`` except system messages; returns how many.

    The messages kept are not touched, so writers copy their source lines verbatim.
    A valid cut (from :func:`find_cut`) leaves no tool call without its result.
    """
    if not cut_index:
        return 0
    msgs = t.messages
    doomed = {id(m) for m in msgs[:cut_index] if m.role != "system"}
    t.remove(doomed)
    return len(doomed)


# -- over files ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CutSettings:
    """What ``ctxtool cut`` cuts by: the tokens kept verbatim (None: the Go agent's
    message-count split, ``keep_recent`` messages), and the limit that clamps that budget."""

    keep_recent_tokens: int | None = 20000
    keep_recent: int = 5
    effective_limit: int | None = None

    @classmethod
    def from_config(cls, config: Any, *, by_messages: bool = False) -> CutSettings:
        """From ``config`` (a :class:`ctxtool.config.Config`): ``compaction.keep_recent_tokens``
        (``by_messages``: none, the message-count split), ``compaction.keep_recent``, and the
        effective limit where one is known or configured
        (:meth:`ctxtool.policies.settings.PolicySettings.cut_limit`)."""
        # lazy: start-up (`ctxtool cut` would load ctxtool.policies)
        from ..policies.settings import PolicySettings

        return cls(None if by_messages else int(config["compaction.keep_recent_tokens"]),
                   int(config["compaction.keep_recent"]), PolicySettings.from_config(config).cut_limit(config))

    def cut(self, tokenizer: Tokenizer | None = None, apply: bool = False) -> Callable[[Transcript], CutReport]:
        """:func:`cut_transcript` with these settings, as a function that pickles (for workers)."""
        return functools.partial(cut_transcript, keep_recent_tokens=self.keep_recent_tokens,
                                 keep_recent=self.keep_recent, effective_limit=self.effective_limit,
                                 tokenizer=tokenizer, apply=apply)


def cut_files(
    paths: Sequence[str],
    sink: Callable[[CutReport], None],
    settings: CutSettings | None = None,
    *,
    tokenizer: Tokenizer | None = None,
    fmt: str | None = None,
    on_error: str = "fail",
    jobs: int | None = None,
    messages_column: str | None = None,
) -> list[str]:
    """``ctxtool cut``: where every transcript of ``paths`` would be cut, each
    :class:`CutReport` passed to ``sink`` in input order as it is known (nothing written);
    returns the records and files ``on_error="skip"`` left out."""
    # lazy: start-up (`ctxtool cut` would load ctxtool.formats.walk, ctxtool.run.manyfiles)
    from ..formats.walk import iter_paths
    from ..run.manyfiles import each_result

    op = (settings or CutSettings()).cut(tokenizer)
    return each_result(op, iter_paths(paths), sink, fmt=fmt, on_error=on_error, jobs=jobs,
                       messages_column=messages_column)


def cut_file(
    path: str,
    output: str | None,
    settings: CutSettings | None = None,
    *,
    tokenizer: Tokenizer | None = None,
    fmt: str | None = None,
    to: str | None = None,
    on_error: str = "fail",
    messages_column: str | None = None,
) -> FileRun[Any]:
    """``ctxtool cut -o``: every transcript of ``path`` cut and written to ``output`` (``-``:
    stdout; the kept messages and system prompts, unchanged); ``run.report.items`` holds each
    :class:`CutReport`."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base)
    from ..run.operation import MapOp
    from ..run.runner import run_file

    op = (settings or CutSettings()).cut(tokenizer, apply=True)
    return run_file(MapOp(op), path, output, fmt=fmt, to=to, on_error=on_error, messages_column=messages_column)
