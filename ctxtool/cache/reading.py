"""Reading refs as text (seed 001 1.8): ``show`` like a file reader, ``grep`` one or all refs.

Both stream a ref line by line (:class:`ctxtool.cache.lines.Lines`), so an output of any
size is read in flat memory; ``refs show``/``refs grep`` and the ``tool_output_cache`` tools of
``ctxtool mcp`` are these two calls. A pattern is compiled by the ``regex`` module (Python
``re`` syntax), whose matching can be bounded in time: a pattern that backtracks
catastrophically is an error after ``time_limit`` seconds, not a hang.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from ..errors import CtxtoolError, ExitCode
from .lines import Line, Lines
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
        line is shown); ``max_line``: each line cut at that many characters (as the seed 001
        in-context view cuts them). The whole ref is read (its lines counted, its sha256
        checked), a page of it kept.
        """
        if offset < 1:
            raise CtxtoolError("--offset is 1-based: it must be >= 1", code=ExitCode.USAGE)
        if limit is not None and limit < 0:
            raise CtxtoolError("--limit must be >= 0", code=ExitCode.USAGE)
        full = self.resolve(ref)
        lines = Lines(self.stream(full), keep=None if max_line is None else 4 * max_line)
        out: list[tuple[int, str]] = []
        size = cut = 0
        capped = False
        if limit != 0:
            for ln in lines.read(offset):
                text, was_cut = _text(full, ln, max_line)
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
            raise CtxtoolError(f"invalid pattern {_clip(pattern)}: {e}", code=ExitCode.USAGE) from e
        targets = [self.resolve(r) for r in refs] if refs is not None else [
            r.id for r in self.list_refs() if r.present and r.kind != "source"
        ]
        deadline = None if time_limit is None else time.monotonic() + time_limit
        res = GrepResult(pattern, 0, [])
        found = 0  # matches seen, skipped ones included
        for ref in targets:
            res.refs_searched += 1
            found = _grep_ref(self.stream(ref), ref, rx, res, found, context, skip, max_matches, deadline, max_line)
            if res.timed_out or res.more:
                break
        return res


def _clip(pattern: str) -> str:
    shown = repr(pattern)
    return shown if len(shown) <= 80 else shown[:76] + "...'"


def _text(ref: str, ln: Line, max_line: int | None) -> tuple[str, bool]:
    """A line's text (cut at ``max_line`` characters), and whether it was cut."""
    data = ln.data
    for _ in range(4):  # a cut inside a character: its bytes dropped
        try:
            text = data.decode("utf-8", "surrogatepass")
            break
        except UnicodeDecodeError as e:
            if not ln.cut or e.start < len(data) - 3:
                raise CtxtoolError(f"ref {ref} is not UTF-8 text (line {ln.n})", code=ExitCode.INPUT) from e
            data = data[: e.start]
    if max_line is not None and (ln.cut or len(text) > max_line):
        return text[:max_line], True
    return text, False


def _grep_ref(
    pieces: Iterator[bytes], ref: str, rx: Any, res: GrepResult, found: int, context: int, skip: int,
    max_matches: int | None, deadline: float | None, max_line: int | None,
) -> int:
    """Search one ref's lines, adding to ``res``; returns the matches seen so far in all.

    Context lines are merged as grep merges them: a line is shown once, and the context after
    a match stops at the next match. The search stops after ``max_matches`` (the context
    after the last one still shown, up to the next match).
    """
    before: deque[tuple[int, str]] = deque(maxlen=context)
    after = 0
    stopped = False
    for ln in Lines(pieces, keep=None if max_line is None else 4 * max_line).read():
        text = _text(ref, ln, max_line)[0]
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                res.timed_out = True
                res.stopped_at = (ref, ln.n)
                return found
            try:
                hit = rx.search(text, timeout=min(left, LINE_SECONDS)) is not None
            except TimeoutError:
                raise CtxtoolError(
                    f"pattern {_clip(rx.pattern)} took more than {min(left, LINE_SECONDS):g} s on line {ln.n} of "
                    f"ref {ref[:12]} (catastrophic backtracking?): simplify it, or search a plain string",
                    code=ExitCode.USAGE) from None
        else:
            hit = rx.search(text) is not None
        if hit and stopped:
            res.more = True
            return found
        if hit and found < skip:
            found += 1
            before.clear()
            after = 0
            continue
        if hit:
            res.matches.extend(GrepMatch(ref, n, t, False) for n, t in before)
            before.clear()
            res.matches.append(GrepMatch(ref, ln.n, text, True))
            found += 1
            after = context
            if max_matches is not None and found - skip >= max_matches:
                stopped = True
        elif after:
            res.matches.append(GrepMatch(ref, ln.n, text, False))
            after -= 1
        elif stopped:
            res.more = True
            return found
        elif context:
            before.append((ln.n, text))
        if stopped and not after and not context:
            res.more = True
            return found
    res.more = stopped
    return found
