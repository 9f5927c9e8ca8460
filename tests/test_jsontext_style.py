"""jsontext.Style.detect: the escaping of a one-line JSON text, decided without scanning
it for escapes when the answer does not depend on them."""

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.io import jsontext


@pytest.mark.parametrize(
    ("obj", "seps", "ascii_", "expected"),
    [
        ({"a": "plain", "b": [1, 2]}, (", ", ": "), True, True),  # Python's default: nothing to tell
        ({"a": "caf\u00e9"}, (", ", ": "), True, True),  # escaped non-ASCII
        ({"a": "caf\u00e9"}, (", ", ": "), False, False),  # raw UTF-8
        ({"a": "plain"}, (",", ":"), False, False),  # compact, nothing to tell
        ({"a": "caf\u00e9"}, (",", ":"), True, True),  # compact with escapes
        ({"a": "caf\u00e9"}, (",", ":"), False, False),
        ({"a": "del\x7f"}, (", ", ": "), False, False),  # an escaping writer escapes DEL too
    ],
)
def test_detect_escaping(obj: object, seps: tuple[str, str], ascii_: bool, expected: bool) -> None:
    raw = json.dumps(obj, separators=seps, ensure_ascii=ascii_).encode("utf-8")
    style = jsontext.Style.detect(raw)
    assert (style.item_sep, style.key_sep, style.ascii) == (*seps, expected)
    assert jsontext.encode(json.loads(raw), style) == raw


def test_detect_asked_again_answers_for_the_bytes_asked() -> None:
    """The same bytes object asked twice (a changed record's stash, then its writer) gets the
    same answer; other bytes, equal or not, in between or after, get their own."""
    python = json.dumps({"a": "caf\u00e9", "b": [1, 2]}).encode()
    compact = json.dumps({"a": "caf\u00e9"}, separators=(",", ":"), ensure_ascii=False).encode()
    want_python, want_compact = jsontext.Style(", ", ": ", True), jsontext.Style(",", ":", False)
    for raw, want in [(python, want_python), (python, want_python), (compact, want_compact),
                      (bytes(bytearray(python)), want_python), (compact, want_compact), (python, want_python)]:
        assert jsontext.Style.detect(raw) == want
    mutable = bytearray(compact)
    assert jsontext.Style.detect(mutable) == want_compact  # type: ignore[arg-type]
    mutable[:] = python
    assert jsontext.Style.detect(mutable) == want_python  # type: ignore[arg-type]  # a mutable buffer: read each time


# -- compact with non-ASCII escaped: orjson's text where it is the standard library's --------
STYLES = [jsontext.Style(",", ":", True), jsontext.Style(", ", ": ", True), jsontext.Style(", ", ": ", False)]
_chars = st.one_of(
    st.characters(max_codepoint=0x7F),  # ASCII, control characters and DEL included
    st.characters(codec=None, exclude_categories=()),  # any code point: lone surrogates, U+2028/2029 ...
    st.sampled_from("\u2028\u2029\ud800\udfff\x00\x1f\x7f\"\\/\n,:[]{} "),
)
_text = st.text(_chars, max_size=12) | st.text(st.characters(max_codepoint=0x7F), max_size=12)
_scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
            | st.floats(allow_nan=True, allow_infinity=True) | _text)
_values = st.recursive(_scalars, lambda kids: st.lists(kids, max_size=5) | st.dictionaries(_text, kids, max_size=5),
                       max_leaves=30)


def _reference(obj: object, style: jsontext.Style) -> bytes:
    """``encode(obj, style)`` on one line as it was written before orjson's text was asked for
    other styles: orjson for compact raw UTF-8, else the standard library's C encoder, else
    the exact encoder."""
    if style.compact:
        try:
            return orjson.dumps(obj, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
        except (TypeError, orjson.JSONEncodeError):
            pass
    fast = jsontext._c_encoded(obj, style, None)
    return fast if fast is not None else jsontext._exact_encoded(obj, style, None)


def _containers(kids: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.lists(kids, max_size=4) | st.dictionaries(_text, kids, max_size=4)


#: values without a float, integers orjson writes
_plain_values = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | _text, _containers, max_leaves=20)
ALL_STYLES = [*STYLES, jsontext.COMPACT, jsontext.Style(",", ": ", True), jsontext.Style(", ", ":", False)]


@settings(max_examples=500, deadline=None)
@given(_values, st.sampled_from(ALL_STYLES))
def test_encode_one_line_as_before(obj: object, style: jsontext.Style) -> None:
    """``encode`` writes every value on one line, in every style, byte for byte as before
    (orjson's text where it is the standard library's: no float; escaped: printable ASCII)."""
    assert jsontext.encode(obj, style) == _reference(obj, style)


@settings(max_examples=200, deadline=None)
@given(_plain_values, st.sampled_from([False, True]))
def test_orjson_text_answers_for_plain_values(obj: object, python: bool) -> None:
    """Not vacuous: every value without a float that orjson writes as printable ASCII is
    written from orjson's text, escaped or not; and that text is the standard library's."""
    b = jsontext._orjson_text(obj, python)
    try:
        compact = orjson.dumps(obj)
    except orjson.JSONEncodeError:  # a lone surrogate
        assert b is None
        return
    assert b is not None
    seps = (", ", ": ") if python else (",", ":")
    if compact.isascii() and b"\x7f" not in compact:
        text = jsontext._from_orjson(obj, b, python, True)
        assert text is not None and text == jsontext._from_orjson(obj, b, python, False)
        assert text == json.dumps(obj, separators=seps).encode()
    assert jsontext._from_orjson(obj, b, python, False) == json.dumps(obj, separators=seps, ensure_ascii=False).encode()


@settings(max_examples=400, deadline=None)
@given(_values, _values, st.sampled_from([(",", ":"), (", ", ": "), (",", ": "), (", ", ":")]), st.booleans(), st.booleans())
def test_source_style_writes_as_the_detected_style(source: object, obj: object, seps: tuple[str, str], escaped: bool,
                                                  by_orjson: bool) -> None:
    """:class:`jsontext.SourceStyle` writes any value as ``encode`` in ``Style.detect``'s
    style of the source text does, whatever that text (any separators, escaped or raw UTF-8,
    written by the standard library or by orjson; lone surrogates, DEL, U+2028/2029 ...),
    reading its escaping only when needed."""
    try:
        raw = orjson.dumps(source) if by_orjson else json.dumps(source, separators=seps, ensure_ascii=escaped).encode(
            "utf-8", "surrogatepass")
    except (orjson.JSONEncodeError, ValueError):
        return
    want = _reference(obj, jsontext.Style.detect(raw))
    ss = jsontext.SourceStyle(raw)
    assert (ss.item_sep, ss.key_sep) == (jsontext.Style.detect(raw).item_sep, jsontext.Style.detect(raw).key_sep)
    assert ss.encode(obj) == want



@settings(max_examples=300, deadline=None)
@given(_values, _values, st.sampled_from([(",", ":"), (", ", ": "), (",", ": "), (", ", ":")]), st.booleans(), st.booleans())
def test_source_style_told_plain_writes_as_when_it_walks(source: object, obj: object, seps: tuple[str, str], escaped: bool,
                                                        by_orjson: bool) -> None:
    """A value a caller has shown cannot change (:func:`jsontext.may_change` False: the splice
    of a dataset record, whose items are the values it walked) is written, told plain, as
    ``SourceStyle.encode`` writes it after its own walk (:func:`jsontext._plain`)."""
    try:
        raw = orjson.dumps(source) if by_orjson else json.dumps(source, separators=seps, ensure_ascii=escaped).encode(
            "utf-8", "surrogatepass")
    except (orjson.JSONEncodeError, ValueError):
        return
    items = [obj]
    if jsontext.may_change(items):
        return
    assert jsontext._plain(items)  # what may_change False shows
    assert jsontext.SourceStyle(raw).encode(items, True) == jsontext.SourceStyle(raw).encode(items)


def _holds_other_by_recursion(o: object, zero: bool) -> bool:
    t = type(o)
    if t is dict:
        return any(_holds_other_by_recursion(v, zero) for v in o.values())  # type: ignore[attr-defined]
    if t is list:
        return any(_holds_other_by_recursion(v, zero) for v in o)  # type: ignore[attr-defined]
    if t is int:
        return zero and o == 0
    return not (t is str or t is bool or o is None)


_walked = st.recursive(_scalars | st.sampled_from([jsontext.FloatText("1.50"), jsontext.IntText("-0"), ("t", 1), b"x"]),
                       _containers, max_leaves=20)


@given(_walked)
def test_may_change_and_plain_are_their_definitions(obj: object) -> None:
    """The walk behind may_change and _plain (a stack, strings asked first) answers as the
    recursive definition: a value other than a dict, list, string, integer, boolean or None of
    exactly that type (may_change: or an integer 0)."""
    assert jsontext.may_change(obj) == _holds_other_by_recursion(obj, True)
    assert jsontext._plain(obj) == (not _holds_other_by_recursion(obj, False))
