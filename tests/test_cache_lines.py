"""A ref's lines read from its pieces (ctxtool.cache.lines) are the lines of its whole text, however
the pieces fall; show and grep, streamed, give what the whole text gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxtool.cache import RefCache
from ctxtool.cache.lines import Lines
from ctxtool.errors import CtxtoolError

TEXT = st.lists(st.sampled_from(["a", "é", "b", "\n", "\n", "\r", "xyz", "€"]), max_size=40).map("".join)


def whole_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines if text else []


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    at = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *at], [*at, len(data)], strict=True)]


@given(TEXT, st.lists(st.integers(0, 200), max_size=8), st.integers(1, 30), st.integers(0, 6),
       st.none() | st.integers(1, 6))
def test_lines_from_any_pieces(text: str, cuts: list[int], start: int, limit: int, keep: int | None) -> None:
    data = text.encode()
    want = whole_lines(text)
    every = Lines(pieces(data, cuts))
    assert [(ln.n, ln.data.decode()) for ln in every.read()] == list(enumerate(want, 1))
    assert every.finish() == len(want)
    page = Lines(pieces(data, cuts), keep=keep)
    got = []
    for ln in page.read(start):
        if len(got) >= limit:
            break
        got.append((ln.n, ln.data, ln.length))
    wb = [w.encode() for w in want]
    assert got == [(i + 1, wb[i][:keep] if keep else wb[i], len(wb[i])) for i in range(start - 1, min(len(want), start - 1 + limit))]
    assert page.finish() == len(want)
    batches = list(Lines(pieces(data, cuts), keep=None if keep is None else 4 * keep).batches(keep))
    flat = [(n, t) for b in batches for n, t in enumerate(b.lines, b.n0)]
    assert flat == [(i, w[:keep] if keep else w) for i, w in enumerate(want, 1)]
    assert all(b.count == len(b.lines) and b.last(2) == b.lines[-2:] for b in batches)


def grep_whole(text: str, pattern: str, context: int, max_matches: int | None) -> list[tuple[int, str, bool]]:
    """What refs grep printed when it read a ref whole (the code before streaming)."""
    rx = re.compile(pattern)
    lines = whole_lines(text)
    out: list[tuple[int, str, bool]] = []
    shown, n = -1, 0
    hits = [i for i, ln in enumerate(lines) if rx.search(ln)]
    for i in hits:
        for j in range(max(0, i - context, shown + 1), min(len(lines), i + context + 1)):
            if j > i and j in hits:
                break
            out.append((j + 1, lines[j], j == i))
            shown = j
        n += 1
        if max_matches is not None and n >= max_matches:
            break
    return out


@given(st.lists(st.sampled_from(["a", "b", "\n", "ab\n", "é"]), max_size=60).map("".join), st.sampled_from(["a", "^b", "ab$", "é|b", "(?=b)b$", "\\Aa", "a\\s*b"]),
       st.integers(0, 3), st.none() | st.integers(1, 4), st.integers(0, 3))
def test_grep_streamed_is_grep_of_the_whole_text(
    tmp_path_factory: pytest.TempPathFactory, text: str, pattern: str, context: int, max_matches: int | None, skip: int
) -> None:
    cache = RefCache(tmp_path_factory.mktemp("c"))
    ref = cache.put(text).id
    got = cache.grep(pattern, [ref], context=context, max_matches=max_matches)
    assert [(m.line, m.text, m.match) for m in got.matches] == grep_whole(text, pattern, context, max_matches)
    # a next page starts after the matches skipped
    paged = cache.grep(pattern, [ref], max_matches=max_matches, skip=skip, time_limit=60)
    every = [m for m in grep_whole(text, pattern, 0, None)]
    assert [(m.line, m.text) for m in paged.matches] == [(n, t) for n, t, _ in every[skip:][:max_matches]]


def test_show_streamed_is_show_of_the_whole_text(tmp_path: Path) -> None:
    cache = RefCache(tmp_path)
    text = "".join(f"{i} {'é' * (i % 7)}\r\n" if i % 3 else f"{i}\n" for i in range(1, 5000)) + "last"
    ref = cache.put(text).id
    want = whole_lines(text)
    for offset, limit in [(1, 10), (4990, 100), (5000, 1), (5001, 5), (1, None), (7, 0)]:
        res = cache.show(ref, offset, limit)
        end = len(want) if limit is None else min(len(want), offset - 1 + limit)
        assert res.total_lines == 5000
        assert res.lines == [(i + 1, want[i]) for i in range(offset - 1, end)]


def test_a_ref_that_is_not_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    cache = RefCache(tmp_path)
    ref = cache.put(b"ok\nok\n\xff\xfe\n").id
    for call in (lambda: cache.show(ref), lambda: cache.grep("x", [ref])):
        with pytest.raises(CtxtoolError, match=r"is not UTF-8 text \(line 3\)"):
            call()
