"""Truncation algorithms (seeds 000/001/004): examples and hypothesis properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool.errors import CtxtoolError
from ctxtool.tool_outputs import algorithms as T

MARKER_RE = re.compile(r"^\[\.\.\. omitted [\d,]+ of [\d,]+ lines \.\.\.\]$")


def lines_of(n: int, width: int = 10) -> str:
    return "\n".join(f"{i:0{width}d}" for i in range(n))


# -- examples -------------------------------------------------------------------------------


def test_seed004_preserves_start_and_end() -> None:
    """Seed 004 TestTruncateOutput_PreservesStartAndEnd: 1000 lines -> <260 lines, first, last, marker."""
    text = lines_of(1000)
    cut = T.truncate_text(text, T.PRESETS.get("head-tail"))
    out = cut.text.split("\n")
    assert len(out) < 260
    assert out[0] == "0000000000" and out[-1] == "0000000999"
    assert "[... omitted 744 of 1,000 lines ...]" in out
    assert cut.kept_lines == 256 and cut.omitted_lines == 744
    assert cut.reasons == ["lines"]


def test_under_limits_unchanged() -> None:
    text = lines_of(100)
    cut = T.truncate_text(text, T.Limits())
    assert not cut.changed and cut.text == text and cut.reasons == []


def test_seed000_spill_above_threshold() -> None:
    cut = T.truncate_text("x" * (200 * 1024 + 1), T.Limits())
    assert cut.spilled and cut.text == "" and cut.reasons == ["spill"]
    assert not T.truncate_text("x" * (200 * 1024), T.Limits(max_bytes=0, max_chars=0)).changed


def test_seed000_order_lines_then_chars_then_bytes() -> None:
    text = "\n".join("é" * 100 for _ in range(3000))  # 3000 lines, 2 bytes per char
    cut = T.truncate_text(text, T.Limits(max_lines=2000, max_chars=250_000, max_bytes=50 * 1024, spill_threshold=0))
    assert cut.reasons == ["lines", "bytes"]
    assert T.utf8_len(cut.text) <= 50 * 1024
    cut2 = T.truncate_text(text, T.Limits(max_lines=2000, max_chars=100_000, max_bytes=0, spill_threshold=0))
    assert cut2.reasons == ["lines", "chars"] and len(cut2.text) <= 100_000


def test_seed001_line_length_and_head() -> None:
    text = "a" * 5000 + "\nshort\n" + "b" * 10
    cut = T.truncate_text(text, T.PRESETS.get("view"))
    first = cut.text.split("\n")[0]
    assert first.startswith("a" * 2000) and first.endswith("[... 3,000 chars cut]")
    assert cut.long_lines_cut == 1 and cut.reasons == ["line_length"]
    assert "short" in cut.text


def test_head_mode_has_no_marker() -> None:
    cut = T.truncate_text(lines_of(50), T.Limits(max_lines=10, mode="head"))
    assert cut.text == lines_of(10) + "\n"
    assert "omitted" not in cut.text


def test_small_limit_uses_head() -> None:
    """Seed 000: the head_tail marker only when the limit is >= 4."""
    cut = T.truncate_text(lines_of(10), T.Limits(max_lines=3))
    assert "omitted" not in cut.text and cut.text.count("\n") == 3


def test_byte_cut_never_splits_a_character() -> None:
    text = "€" * 1000  # 3 bytes each
    for n in range(1, 20):
        cut = T.truncate_text(text, T.Limits(max_bytes=n, mode="head", spill_threshold=0))
        assert cut.text == "€" * (n // 3)


def test_presets_and_validation() -> None:
    assert T.PRESETS.get("seed004").head_lines == 128
    assert T.PRESETS.get("004").max_bytes == 10 * 1024
    with pytest.raises(CtxtoolError):
        T.PRESETS.get("nope")
    with pytest.raises(CtxtoolError):
        T.Limits(mode="middle")
    with pytest.raises(CtxtoolError):
        T.Limits(max_lines=-1)
    assert T.limits_with(T.Limits(), max_lines=10, mode=None).max_lines == 10


def test_notices() -> None:
    cut = T.truncate_text(lines_of(1000), T.PRESETS.get("head-tail"))
    ref = "a" * 64
    n = T.truncation_notice(cut, ref, 2750)
    assert "1,000 lines" in n and "~2,750 tokens" in n and f"ref={ref}" in n
    assert n.endswith(f"Full output: ref={ref} (tool_output_cache or ctxtool refs show aaaaaaaaaaaa)]")
    # seed 001 1.7's placeholder, naming the tool of 1.8 that expands it
    assert T.trim_placeholder(ref) == f"[tool output trimmed; ref={ref}; read it with tool_output_cache]"
    spilled = T.truncate_text("x" * 300_000, T.Limits())
    s = T.spill_notice(spilled, ref, 75_000)
    assert "300,000 characters" in s and f"sha256={ref}" in s
    assert "the tool_output_cache tool" in s and "the tool_output_cache_grep tool" in s
    assert T.with_notice("", "N") == "N"
    assert T.with_notice("a\n", "N") == "a\n\nN" == T.with_notice("a", "N")


@pytest.mark.parametrize("text,n", [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n", 1), ("\n\n", 2)])
def test_count_lines(text: str, n: int) -> None:
    assert T.count_lines(text) == n
    assert len(T.split_lines(text)) == n
    assert "".join(T.split_lines(text)) == text


# -- properties -------------------------------------------------------------------------------

line_text = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=40),
    st.text(alphabet="aé€😀 x", min_size=50, max_size=400),  # long lines, multi-byte
)
outputs = st.builds(
    lambda lines, nl: "\n".join(lines) + ("\n" if nl and lines else ""),
    st.lists(line_text, max_size=120),
    st.booleans(),
)
limits = st.builds(
    T.Limits,
    max_lines=st.sampled_from([0, 3, 4, 10, 50]),
    max_bytes=st.sampled_from([0, 200, 1000, 5000]),
    max_chars=st.sampled_from([0, 150, 800, 4000]),
    spill_threshold=st.sampled_from([0, 20_000]),
    mode=st.sampled_from(["head", "head_tail"]),
    max_line_length=st.sampled_from([0, 60, 200]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs, limits)
def test_limits_hold(text: str, lim: T.Limits) -> None:
    cut = T.truncate_text(text, lim)
    out = cut.text
    out.encode("utf-8")  # valid UTF-8: no split characters, no lone surrogates
    assert ("\ufffd" in out) <= ("\ufffd" in text)
    assert cut.orig_lines == T.count_lines(text)
    assert cut.orig_bytes == len(text.encode())
    if cut.spilled:
        assert len(text) > lim.spill_threshold and out == ""
        return
    if not cut.changed:
        assert out == text
        return
    if lim.max_chars:
        assert len(out) <= lim.max_chars
    if lim.max_bytes:
        assert len(out.encode()) <= lim.max_bytes
    split = lim.line_split()
    if split is not None:
        assert T.count_lines(out) <= split[0] + split[1] + 2
    if lim.max_line_length:
        for ln in out.split("\n"):
            if not MARKER_RE.match(ln):
                assert len(ln) <= lim.max_line_length + len(T.LINE_CUT.format(n=10**6))
    for ln in out.split("\n"):
        if ln.startswith("[... omitted ") and ln not in text:
            assert MARKER_RE.match(ln)
    assert 0 <= cut.kept_lines <= cut.orig_lines


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abcé€😀", min_size=1, max_size=8), min_size=5, max_size=400), st.booleans())
def test_first_and_last_lines_kept(lines: list[str], nl: bool) -> None:
    """Short lines: head_tail keeps the first and the last line, with the marker when lines go."""
    text = "\n".join(lines) + ("\n" if nl else "")
    lim = T.Limits(max_lines=20, max_bytes=400, max_chars=0, spill_threshold=0, mode="head_tail")
    cut = T.truncate_text(text, lim)
    out = cut.text.split("\n")
    if out[-1] == "" and cut.text.endswith("\n"):
        out.pop()
    assert out[0] == lines[0]
    assert out[-1] == lines[-1]
    if cut.changed:
        assert any(MARKER_RE.match(x) for x in out)
    else:
        assert cut.text == text


@settings(max_examples=200, deadline=None)
@given(outputs, st.integers(min_value=1, max_value=3000))
def test_head_bytes_is_a_prefix(text: str, n: int) -> None:
    cut = T.truncate_text(text, T.Limits(max_lines=0, max_chars=0, max_bytes=n, spill_threshold=0, mode="head"))
    assert text.startswith(cut.text)
    assert len(cut.text.encode()) <= n
    if cut.changed:  # the longest prefix that fits: one more character would not
        assert len(text[: len(cut.text) + 1].encode()) > n


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.text(alphabet="ab é€😀[.] omitted", min_size=2, max_size=60), min_size=3, max_size=80),
    st.booleans(),
    st.integers(min_value=0, max_value=10),
    st.integers(min_value=0, max_value=10),
    st.sampled_from([16, 40, 64, 100, 160, 400, 1000]),
    st.sampled_from(["head", "head_tail"]),
    st.integers(min_value=0, max_value=3),
)
def test_the_line_and_byte_cut_read_at_once(lines: list[str], nl: bool, head: int, tail: int, max_bytes: int,
                                            mode_name: str, fewer: int) -> None:
    """Where a mode reads the line cut and the byte cut from the whole text at once (the kept lines
    never built), it gives what the byte cut of the kept lines gives, and those are over the byte
    limit (so the byte cut runs on them); truncate_text then returns the same cut either way."""
    text = "\n".join(lines) + ("\n" if nl else "")
    mode = T.MODES.get(mode_name)
    lim = T.Limits(max_lines=0, head_lines=head, tail_lines=tail, max_bytes=max_bytes, max_chars=0, spill_threshold=0,
                   mode=mode_name) if head or tail else T.Limits(max_lines=8, max_bytes=max_bytes, max_chars=0,
                                                                  spill_threshold=0, mode=mode_name)
    split = lim.line_split(mode)
    assert split is not None
    total = T.count_lines(text)
    if total <= split[0] + split[1]:
        return
    kept_lines = max(0, split[0] + split[1] - fewer)
    both = mode.cut_lines_bytes(text, split, max_bytes, total, kept_lines)
    if both is None:
        return
    kept_text, _ = T._cut_lines(text, split, total)
    assert T.utf8_len(kept_text) > max_bytes
    assert both == T._cut_size(kept_text, 0, max_bytes, mode, total, kept_lines)
    cut = T.truncate_text(text, lim)
    assert cut.reasons == ["lines", "bytes"] and cut.text == both[0]


def test_the_line_and_byte_cut_read_at_once_examples() -> None:
    """adk-code's preset on long lines: no kept-lines text; short lines or a tiny byte limit: built."""
    ht, hd = T.MODES.get("head_tail"), T.MODES.get("head")
    long_lines = "\n".join(f"{i:04d} " + "x" * 95 for i in range(300))
    got = ht.cut_lines_bytes(long_lines, (128, 128), 10 * 1024, 300, 256)
    kept_text, _ = T._cut_lines(long_lines, (128, 128), 300)
    assert got is not None and got == T._cut_size(kept_text, 0, 10 * 1024, ht, 300, 256)
    assert got[0].startswith("0000 ") and got[0].endswith("0299 " + "x" * 95)
    assert hd.cut_lines_bytes(long_lines, (256, 0), 10 * 1024, 300, 256) is not None
    short = "\n".join("x" for _ in range(3000))
    assert ht.cut_lines_bytes(short, (128, 128), 10 * 1024, 3000, 256) is None  # the kept lines are under 10 KiB
    assert ht.cut_lines_bytes(long_lines, (128, 0), 10 * 1024, 300, 128) is None  # no tail: no marker line
    assert ht.cut_lines_bytes(long_lines, (128, 128), 40, 300, 256) is None  # no room beside the marker

    class Other(T.HeadTail):  # cuts otherwise: no claim
        def cut_size(self, text: str, max_chars: int, max_bytes: int, total_lines: int, kept_lines: int) -> tuple[str, int]:
            return text[:1], 0

    assert Other().cut_lines_bytes(long_lines, (128, 128), 10 * 1024, 300, 256) is None
    cut = T.truncate_text(long_lines, T.PRESETS.get("head-tail"))
    assert cut.reasons == ["lines", "bytes"] and (cut.text, cut.kept_lines) == got
