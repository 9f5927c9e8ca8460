"""jsontext.needs_exact: which documents orjson cannot read exactly.

The scan matches only number tokens that can change (fractions, exponents, integers of 19
digits or more, ``-0``) and looks past strings, so "took: 0.50s" in a tool output does not
send a record to the slower exact parser. Held here against the numbers a generated
document holds outside its strings, and on any bytes against a scan of every number token
(strings included): never more. The first version missed a number after ',' when no array
of the document started with one (``{"a": ["x", 1.50]}`` was written back as ``1.5``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.io import jsonl as jsonio
from ctxtool.io import jsontext

# every number token after ':', '[' or ',', strings included
_ANY = re.compile(rb"[:,\[][ \t\r\n]*(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)")


def any_token_changes(data: bytes) -> bool:
    return any(jsontext._changes(m.group(1)) for m in _ANY.finditer(data))


NUMBERS = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["-0", "0", "0.5", "1.50", "1e5", "1E-7", "0.000005", "2.0", "-0.0", "18446744073709551616",
                     "-9223372036854775809", "9223372036854775807", "1234567890123456789"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.builds(lambda a, b, e: f"{a}.{b}e{e}", st.integers(-99, 99), st.integers(0, 999), st.integers(-30, 30)),
)
# text that looks like numbers after separators, quotes and backslashes: what must not count
STRING_TEXT = st.text(alphabet=st.sampled_from(list(': ,[]{}"\\0123456789.eE-xé\n')), max_size=30)


def _doc(draw: st.DrawFn, depth: int, found: list[str]) -> str:
    kind = draw(st.integers(2, 3)) if depth == 0 else draw(st.integers(0, 3 if depth < 3 else 1))  # a document: {} or []
    if kind == 0:
        tok = draw(NUMBERS)
        found.append(tok)
        return tok
    if kind == 1:
        return json.dumps(draw(STRING_TEXT), ensure_ascii=draw(st.booleans()))
    sep = draw(st.sampled_from([",", ", ", " ,\n "]))
    items = [_doc(draw, depth + 1, found) for _ in range(draw(st.integers(0, 4)))]
    if kind == 2:
        return "[" + sep.join(items) + "]"
    keys = [json.dumps(draw(STRING_TEXT)) for _ in items]
    colon = draw(st.sampled_from([":", ": ", " :\t"]))
    return "{" + sep.join(k + colon + v for k, v in zip(keys, items, strict=True)) + "}"


@st.composite
def documents(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    found: list[str] = []
    text = _doc(draw, 0, found)
    return text.encode(), found


@settings(max_examples=400, deadline=None)
@given(documents())
def test_needs_exact_is_whether_a_number_outside_strings_changes(doc: tuple[bytes, list[str]]) -> None:
    data, numbers = doc
    want = any(jsontext._changes(n.encode()) for n in numbers)
    assert jsontext.needs_exact(data) == want
    if not want:  # orjson's reading is exact: it writes every number back as the source had it
        assert jsonio.dumps(orjson.loads(data)) == jsonio.dumps(jsontext.parse_exact(data.decode()))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200) | STRING_TEXT.map(str.encode))
def test_never_more_than_every_token(data: bytes) -> None:
    if jsontext.needs_exact(data):
        assert any_token_changes(data)


def test_a_later_array_item_counts() -> None:
    assert jsontext.needs_exact(b'{"a": ["x", 1.50]}')
    assert jsonio.dumps(jsonio.loads(b'{"a": ["x", 1.50]}'), jsontext.Style(", ", ": ")) == b'{"a": ["x", 1.50]}'


def test_a_colon_is_a_key_separator_only_after_a_closing_quote() -> None:
    assert not jsontext.needs_exact(b'[":-0"]')  # the quote before ':' opens a string
    assert not jsontext.needs_exact(b'["x\\": 1.50"]')  # an escaped quote
    assert jsontext.needs_exact(b'{":": 1.50}')  # a key that is ':'
    assert jsontext.needs_exact(b'{"a,": 1.50}')  # a key that ends like a separator
    assert jsontext.needs_exact(b'{"a\\\\": 1.50}')  # a key ending in an escaped backslash
    assert jsontext.needs_exact(b'{"a" : 1.50}')


def test_numbers_inside_strings_do_not_count() -> None:
    assert not jsontext.needs_exact(b'{"content": "Python: 3.10, took: 0.50s", "n": 3}')
    assert not jsontext.needs_exact(b'{"content": "args {\\"x\\": 1.50}"}')
    assert jsontext.needs_exact(b'{"content": "say \\"hi\\"", "x": 1.50}')
    assert jsontext.needs_exact(b'{"a": "\\\\", "b": [0.000005]}')


def test_unterminated_strings_scan_in_linear_time() -> None:
    # a cut line full of escaped quotes and candidates inside its last string: a string
    # pattern that fails at a quote would try again from each of the 100,000 quotes after
    # it (minutes); counting quotes once is linear
    line = b'{"a": 1, "t": "' + b'x \\"y\\" : 1.50 ' * 50_000
    assert not jsontext.needs_exact(line)
    assert jsontext.needs_exact(b'{"a": 1.50, "t": "\\')  # a lone backslash at the end
    assert jsontext.needs_exact(b'{"t": "\\\\", "a": 1.50}')  # an escaped backslash, then the string's end
    assert not jsontext.needs_exact(b'{"t": "\\\\\\" x: 1.50"}')  # \\ then \": still inside


def test_a_rewritten_record_keeps_a_later_array_number(tmp_path: Path) -> None:
    """window drops messages, so the record is written again: its other fields as the source
    had them, byte for byte."""
    msgs = [{"role": "user", "content": "x" * 50}, {"role": "assistant", "content": "y" * 50}] * 5
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"scores": ["a", 1.50, 2.0e-6], "messages": msgs}).replace("1.5,", "1.50,") + "\n")
    assert b'["a", 1.50, 2e-06]' in src.read_bytes()
    out = tmp_path / "o.jsonl"
    r = subprocess.run([sys.executable, "-m", "ctxtool", "window", "--max-messages", "3", "-o", str(out), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert b'"scores": ["a", 1.50, 2e-06], "messages": [' in out.read_bytes()
    assert len(json.loads(out.read_bytes())["messages"]) < len(msgs)
