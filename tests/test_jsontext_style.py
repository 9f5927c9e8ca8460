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
