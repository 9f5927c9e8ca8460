"""jsontext.Style.detect: the escaping of a one-line JSON text, decided without scanning
it for escapes when the answer does not depend on them."""

import json

import pytest

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
