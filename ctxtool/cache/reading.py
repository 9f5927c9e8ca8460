"""Reading refs as text: ``show`` like a file reader, ``grep`` one or all refs, both streaming a
ref line by line (:class:`ctxtool.cache.lines.Lines`); ``refs show``/``refs grep`` and the
cache's tools of ``ctxtool mcp`` are these two calls. Patterns are compiled by the ``regex``
module, whose matching is bounded in time: a catastrophic pattern is an error, not a hang."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from ..errors import CtxtoolError, Failure
from .lines import Batch, Lines, NotText, text_of
from .results import GrepMatch, GrepResult, RefInfo, ShowResult

LINE_SECONDS = 1.0  # with a time limit: a pattern matching one line longer than this is an error


class Reading:
    """``RefCache``'s reading commands; they need only ``resolve``, ``stream`` and ``list_refs``."""

    def resolve(self, ref: str) -> str:
        raise NotImplementedError

    def stream(self, ref: str) -> Iterator[bytes]:
        raise NotImplementedError

    def list_refs(self) -> list[RefInfo]:
        raise NotImplementedError

    def show(
        self,
        ref: str,
        offset: int = 1,
        limit: int | None = 2000,
        *,
        max_bytes: int | None = None,
        max_line: int | None = None,
    ) -> ShowResult:
        """Lines ``offset`` (1-based) to ``offset + limit - 1`` of a ref, numbered.

        ``max_bytes``: stop before the lines shown pass that many UTF-8 bytes (at least one
        line is shown); ``max_line``: each line cut at that many characters (as the tool-output cache spec
        in-context view cuts them). The whole ref is read (its lines counted, its sha256
        checked), a page of it kept.
        """
        if offset < 1:
            raise CtxtoolError("--offset is 1-based: it must be >= 1", kind=Failure.USAGE)
        if limit is not None and limit < 0:
            raise CtxtoolError("--limit must be >= 0", kind=Failure.USAGE)
        full = self.resolve(ref)
        lines = Lines(self.stream(full), keep=None if max_line is None else 4 * max_line)
        out: list[tuple[int, str]] = []
        size = cut = 0
        capped = False
        if limit != 0:
            for ln in lines.read(offset):
                try:
                    text, was_cut = text_of(ln, max_line)
                except NotText as e:
                    raise _not_text(full, e) from None
                size += len(text.encode("utf-8", "surrogatepass")) + 8
                if out and max_bytes is not None and size > max_bytes:
                    capped = True
                    break
                out.append((ln.n, text))
                cut += was_cut
                if limit is not None and len(out) >= limit:
                    break
        total = lines.finish()
        return ShowResult(full, offset, limit, total, out, cut_lines=cut, capped=capped)

    def grep(
        self,
        pattern: str,
        refs: list[str] | None = None,
        *,
        context: int = 0,
        ignore_case: bool = False,
        fixed: bool = False,
        max_matches: int | None = None,
        skip: int = 0,
        time_limit: float | None = None,
        max_line: int | None = None,
    ) -> GrepResult:
        """Search one ref, several, or (``refs=None``) every ref in the cache, streamed.

        ``skip``: the first matches are passed over (the next page of a search);
        ``time_limit``: seconds the whole search may take: a search that runs out of time
        between lines returns what it found, ``timed_out`` set; a pattern that matches one
        line for longer than :data:`LINE_SECONDS` (or the time left) is an error
        (catastrophic backtracking); ``max_line``: each line
        searched in, and shown to, its first that many characters.
        """
        import regex

        flags = regex.IGNORECASE if ignore_case else 0
        try:
            rx = regex.compile(regex.escape(pattern) if fixed else pattern, flags | regex.VERSION0)
        except (regex.error, ValueError, OverflowError, RecursionError) as e:
            raise CtxtoolError(f"invalid pattern {_clip(pattern)}: {e}", kind=Failure.USAGE) from e
        targets = [self.resolve(r) for r in refs] if refs is not None else [
            r.id for r in self.list_refs() if r.present and r.kind != "source"
        ]
        deadline = None if time_limit is None else time.monotonic() + time_limit
        res = GrepResult(pattern, 0, [])
        found = 0  # matches seen, skipped ones included
        for ref in targets:
            res.refs_searched += 1
            match = _Matcher(rx, _block_rx(regex, pattern, flags, fixed), deadline, ref)
            found = _grep_ref(self.stream(ref), ref, match, res, found, context, skip, max_matches, max_line)
            if res.timed_out or res.more:
                break
        return res


def _clip(pattern: str) -> str:
    shown = repr(pattern)
    return shown if len(shown) <= 80 else shown[:76] + "...'"


def _block_rx(regex: Any, pattern: str, flags: int, fixed: bool) -> Any:
    """The pattern for a whole batch of lines (``MULTILINE``: ``^`` and ``$`` at each line),
    when a match in one line is sure to be one in the batch too; ``None`` for a pattern that
    may tell a line's ends from a newline (``\\A``, ``\\Z``, lookarounds, inline flags)."""
    if not fixed and ("(?" in pattern.replace("(?:", "").replace("(?P<", "") or re_edge(pattern)):
        return None
    return regex.compile(regex.escape(pattern) if fixed else pattern, flags | regex.MULTILINE | regex.VERSION0)


def re_edge(pattern: str) -> bool:
    return any(e in pattern for e in ("\\A", "\\Z", "\\z", "\\G"))


class _Matcher:
    """Which lines of a batch match: the batch searched whole first (one call for a megabyte
    of lines that do not match), each line it points at checked on its own; a pattern that
    cannot be searched so, or a batch whose search takes too long, line by line."""

    def __init__(self, rx: Any, brx: Any, deadline: float | None, ref: str) -> None:
        self.rx, self.brx, self.deadline, self.ref = rx, brx, deadline, ref

    def _left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _line(self, text: str, n: int) -> bool:
        left = self._left()
        if left is None:
            return self.rx.search(text) is not None
        try:
            return self.rx.search(text, timeout=max(min(left, LINE_SECONDS), 0.001)) is not None
        except TimeoutError:
            raise CtxtoolError(
                f"pattern {_clip(self.rx.pattern)} took more than {min(left, LINE_SECONDS):g} s on line {n} of ref "
                f"{self.ref[:12]} (catastrophic backtracking?): simplify it, or search a plain string",
                kind=Failure.USAGE) from None

    def hits(self, b: Batch) -> tuple[list[int], int]:
        """The indexes of the matching lines of batch ``b``, and how many of its lines were
        searched (fewer than all: out of time)."""
        if self.brx is not None:
            left = self._left()
            if left is None or left > 0:
                try:
                    return self._by_block(b, left), b.count
                except TimeoutError:
                    pass  # a pattern slow on a batch (one crossing lines): line by line
        out: list[int] = []
        for k, text in enumerate(b.lines):
            left = self._left()
            if left is not None and left <= 0:
                return out, k
            if self._line(text, b.n0 + k):
                out.append(k)
        return out, b.count

    def _by_block(self, b: Batch, left: float | None) -> list[int]:
        block = b.text
        kw = {} if left is None else {"timeout": max(min(left, LINE_SECONDS), 0.001)}
        out: list[int] = []
        pos = at = k = 0  # search from pos; line k starts at ``at``
        while (m := self.brx.search(block, pos, **kw)) is not None:
            k += block.count("\n", at, m.start())
            at = block.rfind("\n", 0, m.start()) + 1
            nl = block.find("\n", m.start())
            if self._line(b.cut(block[at:nl] if nl >= 0 else block[at:]), b.n0 + k):
                out.append(k)
            if nl < 0:
                break
            pos = at = nl + 1
            k += 1
        return out


def _grep_ref(
    pieces: Iterator[bytes], ref: str, match: _Matcher, res: GrepResult, found: int, context: int, skip: int,
    max_matches: int | None, max_line: int | None,
) -> int:
    """Search one ref's lines, adding to ``res``; returns the matches seen so far in all.

    Context lines are merged as grep merges them: a line is shown once, and the context after
    a match stops at the next match. The search stops after ``max_matches`` (the context
    after the last one still shown, up to the next match).
    """
    before: deque[tuple[int, str]] = deque(maxlen=context)
    after = 0
    stopped = False
    try:
        for b in Lines(pieces, keep=None if max_line is None else 4 * max_line).batches(max_line):
            hits, upto = match.hits(b)
            n0 = b.n0
            i = 0
            for k in [*hits, upto]:
                if i < k and after:  # context after the last match
                    take = min(after, k - i)
                    lines = b.lines
                    res.matches.extend(GrepMatch(ref, n0 + j, lines[j], False) for j in range(i, i + take))
                    after -= take
                    i += take
                if i < k:
                    if stopped:
                        res.more = True
                        return found
                    lo = max(i, k - context)
                    if k == b.count and not hits:
                        before.extend(zip(range(n0 + lo, n0 + k), b.last(k - lo), strict=True))
                    else:
                        before.extend((n0 + j, b.lines[j]) for j in range(lo, k))
                    i = k
                if k == upto:
                    break
                i = k + 1
                if stopped:
                    res.more = True
                    return found
                found += 1
                if found <= skip:
                    before.clear()
                    after = 0
                    continue
                res.matches.extend(GrepMatch(ref, m, t, False) for m, t in before)
                before.clear()
                res.matches.append(GrepMatch(ref, n0 + k, b.lines[k], True))
                after = context
                if max_matches is not None and found - skip >= max_matches:
                    stopped = True
                    if not context:
                        res.more = True
                        return found
            if upto < b.count:
                res.timed_out = True
                res.stopped_at = (ref, n0 + upto)
                return found
    except NotText as e:
        raise _not_text(ref, e) from None
    res.more = stopped
    return found


def _not_text(ref: str, e: NotText) -> CtxtoolError:
    return CtxtoolError(f"ref {ref} is not UTF-8 text (line {e.line})", kind=Failure.INPUT)
