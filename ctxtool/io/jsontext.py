"""JSON text that keeps what it was: exact numbers and the source's style. orjson reads integers
beyond 64 bits as floats and writes floats its own way (``0.000005`` as ``5e-6``): when
:func:`needs_exact` says a document would change, it is parsed with every number keeping its
source text (:class:`FloatText`, :class:`IntText`) and :func:`encode` writes that text back.
:class:`Style` (separators, ASCII escaping) is detected from the bytes, so a changed record is
written back the way its source was."""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

import orjson

from ..text import lazyre

__all__ = ["COMPACT", "FloatText", "IntText", "SourceStyle", "Style", "encode", "needs_exact", "parse_exact"]

INT64_MIN = -(1 << 63)
UINT64_MAX = (1 << 64) - 1
#: Python refuses to convert integers of more digits than this to and from text
INT_MAX_STR_DIGITS = 4300


class FloatText(float):
    """A float that remembers its source text (``0.000005``, ``1.50``, ``NaN``)."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> FloatText:
        self = super().__new__(cls, text)
        self.text = text
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FloatText, (self.text,))

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def __deepcopy__(self, memo: Any) -> FloatText:
        return self

    def __copy__(self) -> FloatText:
        return self


class IntText(int):
    """An integer that remembers its source text: one with more digits than Python converts
    to or from text (4,300), or ``-0``."""

    text: str

    def __new__(cls, text: str) -> IntText:
        import decimal

        value = int(decimal.Decimal(text))  # libmpdec converts without the digit limit
        self = super().__new__(cls, value)
        self.text = text
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (IntText, (self.text,))

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return self.text if not spec else int.__format__(self, spec)

    def __deepcopy__(self, memo: Any) -> IntText:
        return self

    def __copy__(self) -> IntText:
        return self


def _parse_int(s: str) -> int:
    if len(s) > INT_MAX_STR_DIGITS or s == "-0":
        return IntText(s)
    return int(s)


def _constant(s: str) -> FloatText:
    return FloatText(s)  # NaN, Infinity, -Infinity: not JSON, but common in Python-written data


_DECODER = json.JSONDecoder(parse_float=FloatText, parse_int=_parse_int, parse_constant=_constant)


#: the recursion limit while a value is walked (:func:`deep`)
WRITE_RECURSION = 6_000


@contextlib.contextmanager
def deep() -> Iterator[None]:
    """Room for the frames a recursive walk of a value takes when it is nested as deeply as
    the readers accept (orjson reads 1,024 levels); the usual limit comes back after."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, WRITE_RECURSION))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def parse_exact(text: str) -> Any:
    """Parse with every float keeping its text and every integer exact (standard library).
    Nesting as deep as orjson reads (1,024 levels) parses here too."""
    with deep():
        return _DECODER.decode(text)


# A number token outside a string follows ':' (an object value), '[' (an array's first
# item) or ',' (any later item), and blanks. Only some tokens can change (:func:`_changes`):
# a fraction or an exponent, an integer of 19 digits or more, and ``-0``; the scans match
# only those, so the common integers cost nothing. A search that starts with a literal
# character is fast: three such scans beat one over the class [:,[]. Tokens inside strings
# match too ("took: 0.50s" in a tool output) and are told apart: a ':' outside strings
# always follows a key's closing quote; after ',' or '[', a match counts only where an even
# number of the strings' quotes comes before it.
_TOKEN = rb"(-?[0-9]+(?:\.[0-9]+(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)|-?[0-9]{19,}|-0(?![0-9]))"
_VALUE, _ITEM, _FIRST = (lazyre.compile(sep + rb"[ \t\r\n]*" + _TOKEN) for sep in (rb":", rb",", rb"\["))


def needs_exact(data: bytes) -> bool:
    """Whether orjson would change a number of ``data`` (an object or an array): an integer
    beyond 64 bits, ``-0``, or a float whose text is not the one written back."""
    hits = []  # matches told apart by counting quotes
    for m in _VALUE.finditer(data):
        if _changes(m.group(1)):
            key = _after_key(data, m.start())
            if key:
                return True
            if key is None:
                hits.append(m.start(1))
    hits.extend(m.start(1) for scan in (_ITEM, _FIRST) for m in scan.finditer(data) if _changes(m.group(1)))
    if not hits:
        return False
    # Escapes blanked at the same offsets (pairs of backslashes first, as JSON reads them),
    # the quotes left are the strings' own. Linear on any input, JSON or not.
    quotes = data.replace(b"\\\\", b"  ").replace(b'\\"', b"  ")
    seen, last = 0, 0
    for at in sorted(hits):
        seen += quotes.count(b'"', last, at)
        last = at
        if not seen & 1:
            return True
    return False


_BLANK = b" \t\r\n"


def may_change(obj: Any) -> bool:
    """Whether a value read fast (orjson) may hold a number its source wrote otherwise: a
    float (written back in orjson's form, whatever its text was) or an integer 0 (``-0``
    reads as 0). Other integers are read exactly (one beyond 64 bits is never read fast);
    a value already exact (:class:`FloatText`, :class:`IntText`) counts too."""
    return _holds_other(obj, True)


def _plain(obj: Any) -> bool:
    """Whether ``obj`` holds only dicts, lists, strings, integers, booleans and None (exactly
    those types: no float, no :class:`FloatText` or :class:`IntText`, no subclass)."""
    return not _holds_other(obj, False)


def _holds_other(obj: Any, zero: bool) -> bool:
    """Whether ``obj`` holds a value other than a dict, list, string, integer, boolean or
    None, each of exactly that type (``zero``: or an integer 0)."""
    stack = [obj]
    pop, extend = stack.pop, stack.extend
    while stack:
        o = pop()
        t = type(o)
        if t is str:  # the most common value: asked first
            continue
        if t is dict:
            extend(o.values())
        elif t is list:
            extend(o)
        elif t is int:
            if zero and o == 0:
                return True
        elif t is not bool and o is not None:
            return True
    return False


def _after_key(data: bytes, colon: int) -> bool | None:
    """Whether the ':' at ``colon`` follows an object's key: True after a quote that closes
    a string, False where it is text of a string (no quote before it, or an escaped one),
    None when the quote may open one (it follows a '{', '[', ',' or ':')."""
    j = colon - 1
    while j >= 0 and data[j] in _BLANK:
        j -= 1
    if j < 0 or data[j] != 0x22:  # '"'
        return False
    k = j - 1
    while k >= 0 and data[k] == 0x5C:  # '\\'
        k -= 1
    if k < j - 1:  # backslashes before the quote: text of a string, escaped or closed
        return (j - 1 - k) % 2 == 0  # an odd run escapes the quote: inside a string
    while k >= 0 and data[k] in _BLANK:
        k -= 1
    # an opening quote follows one of these (or nothing); a closing one may too ("{\"a,\": 1}")
    return None if k < 0 or data[k] in b"{[,:" else True


def _changes(tok: bytes) -> bool:
    if b"." in tok or b"e" in tok or b"E" in tok:
        try:
            f = float(tok)
        except ValueError:
            return True
        return orjson.dumps(f) != tok or float.__repr__(f).encode() != tok
    if len(tok) < 19:
        return tok == b"-0"
    return len(tok) > INT_MAX_STR_DIGITS or not INT64_MIN <= int(tok) <= UINT64_MAX


# -- writing ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Style:
    """How a JSON text is written: separators and whether non-ASCII is escaped."""

    item_sep: str = ","
    key_sep: str = ":"
    ascii: bool = False
    indent: int | None = None  # documents: spaces per level (None: one line)
    #: a document's: whether its text ends with a newline (None: not read from a document, so
    #: neither its indentation nor its end is known; writers end a document with a newline)
    final_newline: bool | None = None
    #: an indented document's arrays of numbers written on one line (token ids, logprobs, as
    #: harbor writes ATIF): the separator between their items; None: one item a line
    inline_numbers: str | None = None

    @property
    def compact(self) -> bool:
        return self.item_sep == "," and self.key_sep == ":" and not self.ascii and self.indent is None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"item_sep": self.item_sep, "key_sep": self.key_sep, "ascii": self.ascii}
        if self.indent is not None:
            d["indent"] = self.indent
        if self.final_newline is not None:
            d["final_newline"] = self.final_newline
        if self.inline_numbers is not None:
            d["inline_numbers"] = self.inline_numbers
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Style:
        indent = d.get("indent")
        return cls(
            str(d.get("item_sep", ",")),
            str(d.get("key_sep", ":")),
            bool(d.get("ascii")),
            indent if isinstance(indent, int) and 0 <= indent <= 16 else None,
            d["final_newline"] if isinstance(d.get("final_newline"), bool) else None,
            d["inline_numbers"] if d.get("inline_numbers") in (",", ", ") else None,
        )

    @property
    def document(self) -> bool:
        """Read from a JSON document: its layout (indented, or one line) is known."""
        return self.indent is not None or self.final_newline is not None

    def end(self) -> bytes:
        """What follows a document written in this style: its source's end (a newline unless
        the source had none)."""
        return b"" if self.final_newline is False else b"\n"

    @classmethod
    def detect_document(cls, data: bytes, final_newline: bool = True) -> Style:
        """The style of a whole JSON document: its indentation (pretty-printed, else one line),
        escaping, and whether it ends with a newline."""
        m = _INDENT.search(data)
        if m is None:
            one = cls.detect(data)
            return cls(one.item_sep, one.key_sep, one.ascii, None, final_newline)
        hint = _ascii_hint(data)
        arr = _ONE_LINE_NUMBERS.search(data) if _SPLIT_NUMBERS.search(data) is None else None
        return cls(",", ": ", hint if hint is not None else True, len(m.group(1)), final_newline,
                   arr.group(1).decode() if arr is not None else None)

    @classmethod
    def detect_lines(cls, raws: list[bytes]) -> Style:
        """The style of JSON Lines: separators from the first line, escaping from the first
        line that shows it."""
        first = cls.detect(raws[0])
        for raw in raws:
            hint = _ascii_hint(raw)
            if hint is not None:
                return cls(first.item_sep, first.key_sep, hint)
        return first

    @classmethod
    def detect(cls, raw: bytes) -> Style:
        """The style of a one-line JSON text (as Python's ``json.dumps`` writes by default:
        ``", "``/``": "`` and ``\\uXXXX``; JavaScript, orjson and serde: compact, raw UTF-8).
        The same bytes object asked again (a changed record: its stash, then its writer) is
        answered from the last answer, not scanned again."""
        last = _DETECTED[0]
        if last is not None and last[0] is raw and cls is Style:
            return last[1]
        style = cls._detect(raw)
        if cls is Style and type(raw) is bytes:  # immutable: the same object, the same text
            _DETECTED[0] = (raw, style)
        return style

    @classmethod
    def _detect(cls, raw: bytes) -> Style:
        item_sep, key_sep = _separators(raw)
        # nothing to tell: Python's json.dumps escapes by default, compact writers do not
        default = item_sep == ", "
        if default and raw.isascii() and b"\x7f" not in raw:
            return cls(item_sep, key_sep, True)  # an escape found or none: escaped either way
        hint = _ascii_hint(raw)
        return cls(item_sep, key_sep, hint if hint is not None else default)


COMPACT = Style()


def _separators(raw: bytes) -> tuple[str, str]:
    """The item and key separators of a one-line JSON text (:meth:`Style.detect`'s): from
    the first of each outside strings, else the other's writer's default."""
    key_sep = item_sep = None
    for m in _STRUCT.finditer(raw):
        c = m.group(0)
        if c == b":" and key_sep is None:
            key_sep = ": " if raw[m.end() : m.end() + 1] == b" " else ":"
        elif c == b"," and item_sep is None:
            item_sep = ", " if raw[m.end() : m.end() + 1] == b" " else ","
        if key_sep is not None and item_sep is not None:
            break
    key_sep = key_sep or (": " if item_sep == ", " else ":")
    item_sep = item_sep or (", " if key_sep == ": " else ",")
    return item_sep, key_sep


class SourceStyle:
    """Values written as :func:`encode` writes them in the style of a one-line JSON text
    (:meth:`Style.detect` of ``raw``), reading ``raw`` only as far as they need: its
    separators always; its escaping (a scan of all of it) only for a value whose text
    depends on it. A value whose orjson text is printable ASCII, without a float, is
    written the same escaped or not (:func:`_from_orjson`): escaping unread."""

    __slots__ = ("_python", "_style", "item_sep", "key_sep", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.item_sep, self.key_sep = _separators(raw)
        self._python = _PYTHON_SEPS.get((self.item_sep, self.key_sep))  # None: separators orjson cannot give
        self._style: Style | None = None

    @property
    def style(self) -> Style:
        """All of :meth:`Style.detect`'s answer (its escaping read once, when first asked)."""
        if self._style is None:
            self._style = Style.detect(self.raw)
        return self._style

    def encode(self, obj: Any, plain: bool = False) -> bytes:
        """``encode(obj, Style.detect(raw))``, from orjson's text where that is its answer:
        a value without a float whose text is printable ASCII (escaped or not, the same:
        :func:`_from_orjson`), or any text orjson writes in a style that does not escape
        (compact: ``encode``'s own orjson text; Python's separators: only for a value
        without a float). orjson is asked once. ``plain``: the caller has shown ``obj``
        plain (:func:`_plain`: it walked it already), so it is not walked again."""
        python = self._python
        b = _orjson_text(obj, python) if python is not None else None
        if b is None or python is None:
            return encode(obj, self.style)
        if _printable(b) and (plain or _plain(obj)):  # the same escaped or not: escaping unread
            return _spaced(b) if python else b
        text = _from_orjson(obj, b, python, self.style.ascii, plain)
        return text if text is not None else _escaped(obj, self.style)


#: the last text :meth:`Style.detect` read and its style (one: a record's bytes, held until the next)
_DETECTED: list[tuple[bytes, Style] | None] = [None]
_INDENT = lazyre.compile(rb"\A[ \t\r\n]*[\[{][ \t]*\r?\n( +)[^ ]")
# an array of numbers on one line (after a key, or alone on its line), and one an item a line
_ONE_LINE_NUMBERS = lazyre.compile(rb'(?:(?<!\\)": |\n[ \t]*)\[-?[0-9][0-9.eE+-]*(, ?)-?[0-9][^\n"\[\]{}]*\]')
_SPLIT_NUMBERS = lazyre.compile(rb"\[[ \t]*\r?\n[ \t]*-?[0-9]")
_STRUCT = lazyre.compile(rb'"(?:[^"\\]|\\.)*"|[:,]', re.DOTALL)
_NON_ASCII_ESCAPE = lazyre.compile(rb"\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})")


def _ascii_hint(raw: bytes) -> bool | None:
    """True: non-ASCII is escaped; False: written raw; None: ``raw`` does not tell."""
    if not raw.isascii() or b"\x7f" in raw:  # an ASCII-escaping writer escapes DEL too
        return False
    return True if _NON_ASCII_ESCAPE.search(raw) is not None else None


def encode(obj: Any, style: Style = COMPACT, indent: int | None = None) -> bytes:
    """JSON bytes in ``style``; numbers read from a source keep their text.

    Compact raw UTF-8 without indentation goes through orjson when it can (no
    :class:`FloatText`, no integer beyond 64 bits in ``obj``); ``indent`` (else the
    style's) pretty-prints."""
    if indent is None:
        indent = style.indent
        if indent is not None or style.final_newline is not None:
            style = Style(style.item_sep, style.key_sep, style.ascii, inline_numbers=style.inline_numbers)
    exact = style.inline_numbers is not None and indent is not None  # one-line arrays: the exact encoder
    if exact:
        pass
    elif style.compact and indent is None:
        try:
            return orjson.dumps(obj, option=orjson.OPT_PASSTHROUGH_SUBCLASS)  # IntText("-0"): exact encoder
        except (TypeError, orjson.JSONEncodeError):
            pass
    elif not style.ascii and indent == 2:
        try:
            return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_PASSTHROUGH_SUBCLASS)
        except (TypeError, orjson.JSONEncodeError):
            pass
    elif indent is None and (python := _PYTHON_SEPS.get((style.item_sep, style.key_sep))) is not None:
        b = _orjson_text(obj, python)
        if b is not None:
            text = _from_orjson(obj, b, python, style.ascii)
            return text if text is not None else _escaped(obj, style)
    if not exact and (fast := _c_encoded(obj, style, indent)) is not None:
        return fast
    return _exact_encoded(obj, style, indent)


def _exact_encoded(obj: Any, style: Style, indent: int | None) -> bytes:
    """The exact encoder's text (numbers as their source wrote them)."""
    parts: list[str] = []
    enc = _Encoder(style, indent, parts)
    try:
        with deep():  # whatever the readers accept can be written
            enc.value(obj, 0)
    except RecursionError:
        raise ValueError("JSON nested too deeply to write") from None
    text = "".join(parts)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (only inside strings): escaped, as JavaScript does
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


_SURROGATE = lazyre.compile("[\ud800-\udfff]")


def _from_orjson(obj: Any, b: bytes, python: bool, escaped: bool, plain: bool = False) -> bytes | None:
    """``encode``'s one-line text of ``obj`` from orjson's (``b``, :func:`_orjson_text`), or
    None: the standard library's text differs. orjson's text is the standard library's for a
    value without a float (the two write floats each their own way; compact raw UTF-8 is
    orjson's own, floats and all) and, escaped, only where it holds no byte outside printable
    ASCII (nothing to escape; the standard library escapes DEL, orjson does not).
    tests/test_jsontext_style.py compares them over arbitrary values."""
    if escaped and not _printable(b):
        return None
    if (python or escaped) and not (plain or _plain(obj)):  # plain: shown so by the caller
        return None
    return _spaced(b) if python else b


def _escaped(obj: Any, style: Style) -> bytes:
    """One line escaped, for a value orjson writes (so plain: the C encoder writes it) whose
    text is not orjson's: the standard library's."""
    fast = _c_encoded(obj, style, None, accepted=True)
    return fast if fast is not None else _exact_encoded(obj, style, None)


def _orjson_text(obj: Any, python: bool) -> bytes | None:
    """orjson's text of ``obj``: compact, or (``python``) indented, for :func:`_spaced`.
    None: orjson refuses it (a subclass, an integer beyond 64 bits, a lone surrogate ...)."""
    try:
        return orjson.dumps(obj, option=_INDENTED if python else orjson.OPT_PASSTHROUGH_SUBCLASS)
    except (TypeError, orjson.JSONEncodeError):
        return None


def _spaced(b: bytes) -> bytes:
    """orjson's indented text on one line with Python's separators: a newline there is
    always its own (one in a string is written ``\\n``), so each newline and its
    indentation goes, after a comma for a space."""
    return _INDENTATION.sub(b"", _ITEM_BREAK.sub(b", ", b)) if b"\n" in b else b


def _printable(b: bytes) -> bool:
    """Printable ASCII only: nothing an escaping writer escapes that orjson does not (DEL)."""
    return b.isascii() and b"\x7f" not in b


#: the one-line separators orjson's text gives: compact (False) and Python's (True)
_PYTHON_SEPS = {(",", ":"): False, (", ", ": "): True}
_INDENTED = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_INDENT_2
_ITEM_BREAK, _INDENTATION = lazyre.compile(rb",\n *"), lazyre.compile(rb"\n *")


def _c_encoded(obj: Any, style: Style, indent: int | None, accepted: bool = False) -> bytes | None:
    """Any other style through the standard library's C encoder, which writes what
    :class:`_Encoder` writes for plain values. orjson accepting ``obj`` with subclasses
    passed through proves the values are plain: no :class:`FloatText` or :class:`IntText`,
    no integer beyond 64 bits, no lone surrogate, no non-string key, no ``orjson.Fragment``
    (None then: the exact encoder writes it). ``accepted``: orjson accepted it already."""
    if not accepted:
        try:
            orjson.dumps(obj, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
        except (TypeError, orjson.JSONEncodeError):
            return None
    if indent is None:
        seps = (style.item_sep, style.key_sep)
    else:
        seps = (style.item_sep.rstrip(" "), ": ")
    try:
        text = json.dumps(obj, ensure_ascii=style.ascii, indent=indent, check_circular=False, separators=seps)
    except (TypeError, ValueError):
        return None
    return text.encode("utf-8")


class _Encoder:
    __slots__ = ("indent", "inline", "item_sep", "key_sep", "out", "string")

    def __init__(self, style: Style, indent: int | None, out: list[str]) -> None:
        self.string = encode_basestring_ascii if style.ascii else encode_basestring
        self.indent = indent
        self.inline = style.inline_numbers if indent is not None else None
        self.item_sep = style.item_sep if indent is None else style.item_sep.rstrip(" ")
        self.key_sep = style.key_sep if indent is None else ": "
        self.out = out

    def value(self, o: Any, depth: int) -> None:
        out = self.out
        if isinstance(o, str):
            out.append(self.string(o))
        elif o is None:
            out.append("null")
        elif o is True:
            out.append("true")
        elif o is False:
            out.append("false")
        elif isinstance(o, (FloatText, IntText)):
            out.append(o.text)
        elif isinstance(o, int):
            out.append(int.__repr__(o))
        elif isinstance(o, float):
            out.append(_float(o))
        elif isinstance(o, dict):
            self.container(o, depth, "{", "}", True)
        elif isinstance(o, (list, tuple)):
            self.container(o, depth, "[", "]", False)
        elif isinstance(o, orjson.Fragment):
            c = o.contents
            out.append(c.decode("utf-8") if isinstance(c, bytes) else c)
        else:
            raise TypeError(f"Type is not JSON serializable: {type(o).__name__}")

    def container(self, o: Any, depth: int, open_: str, close: str, is_dict: bool) -> None:
        out = self.out
        if not o:
            out.append(open_ + close)
            return
        if self.inline is not None and not is_dict and all(type(v) in _NUMBERS or isinstance(v, (IntText, FloatText)) for v in o):
            out.append(open_ + self.inline.join(_float(v) if type(v) is float else
                                                 v.text if isinstance(v, (IntText, FloatText)) else int.__repr__(v) for v in o) + close)
            return
        out.append(open_)
        if self.indent is not None:
            inner = "\n" + " " * (self.indent * (depth + 1))
            sep = self.item_sep + inner
            out.append(inner)
        else:
            inner = ""
            sep = self.item_sep
        first = True
        if is_dict:
            for k, v in o.items():
                if not first:
                    out.append(sep)
                first = False
                if not isinstance(k, str):
                    k = _key(k)
                out.append(self.string(k))
                out.append(self.key_sep)
                self.value(v, depth + 1)
        else:
            for v in o:
                if not first:
                    out.append(sep)
                first = False
                self.value(v, depth + 1)
        if self.indent is not None:
            out.append("\n" + " " * (self.indent * depth))
        out.append(close)


_NUMBERS = (int, float)  # exactly: a bool is not a number of an array kept on one line


def _float(f: float) -> str:
    if math.isfinite(f):
        return float.__repr__(f)
    if math.isnan(f):
        return "NaN"
    return "Infinity" if f > 0 else "-Infinity"


def _key(k: Any) -> str:
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, (int, float)):
        return str(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")
