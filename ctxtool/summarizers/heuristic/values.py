"""Values the assistant found and relied on: environment variable names, error types, config
keys and identifiers it quoted, functions it changed, versions, URLs. Drawn from the
assistant's own text and from its edits (not from every tool output: what it relied on is
what it repeated)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...model import Message
from ...text import lazyre
from ..prompt import call_args

MAX_PER_KIND = 12
_ENV = lazyre.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_ERROR_TYPE = lazyre.compile(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception)\b|\berror TS\d{4}\b|\bE\d{4}\b")
_URL = lazyre.compile(r"https?://[^\s)>\]`'\"]+")
_VERSION = lazyre.compile(r"(?<![\w.])v?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]+)?(?![\w.])")
_TICKED = lazyre.compile(r"`([^`\n]{2,80})`")
_DEFINED = lazyre.compile(r"\b(?:def|defp|defmacro|function|func|fn|class|interface|type|struct|enum|trait|impl)\s+"
                          r"([A-Za-z_][\w.!?]{2,60})")
_IDENT = lazyre.compile(r"^[\w.:/@$-]+(?:\(\))?$")
#: words a definition pattern catches in prose or code that are not names ("class with", "type for")
_KEYWORDS = frozenset(
    "with for import from private public protected static async await const let var return if else elif while "
    "the and that this these those which what when where then than into onto over under about after before "
    "is are was were be been being has have had not all any each every some none true false null nil self "
    "new def end do in of on to as at by or an it its there here also only just more most other such same "
    "should would could will can may must need uses used using".split())
#: paths that are not files: slash commands, a home directory, Elixir's name/arity, a call's text
_JUNK_PATH = lazyre.compile(r"^/[\w-]+$|^/(?:Users|home)/[^/]+/?$|^~/?$|/\d+$|[(),;=]")
KINDS = ("Environment variables and constants", "Error types", "Functions and types changed", "Identifiers and keys",
         "Paths", "Versions", "URLs")
#: how many of each kind at most (the most mentioned)
CAPS = {"Identifiers and keys": 40, "Functions and types changed": 24, "Paths": 20}


def _add(bucket: dict[str, int], value: str) -> None:
    bucket[value] = bucket.get(value, 0) + 1


def values(msgs: Sequence[Message]) -> dict[str, list[str]]:
    """Per kind, the values in order of first mention (most mentioned kept when over the cap)."""
    found: dict[str, dict[str, int]] = {k: {} for k in KINDS}
    for m in msgs:
        if m.role != "assistant":
            continue
        text = "\n".join(b.text for b in m.content if b.type == "text")
        for v in _ENV.findall(text):
            if len(v) >= 5 and not v.startswith(("HTTP_", "TODO")):
                _add(found["Environment variables and constants"], v)
        for v in _ERROR_TYPE.findall(text):
            _add(found["Error types"], v)
        for v in _URL.findall(text):
            _add(found["URLs"], v.rstrip(".,;:"))
        for v in _VERSION.findall(text):
            _add(found["Versions"], v)
        for v in _TICKED.findall(text):
            v = v.strip()
            if not _IDENT.match(v) or not re.search(r"[A-Za-z]", v) or _ENV.fullmatch(v):
                continue
            if "/" in v:
                if not _JUNK_PATH.search(v):
                    _add(found["Paths"], v)
            elif re.search(r"[._:()]|[a-z][A-Z]", v):
                _add(found["Identifiers and keys"], v)
        for b in m.tool_calls():
            args = call_args(b)
            for k in ("new_string", "new_str", "content", "input", "patch"):
                v = args.get(k)
                if isinstance(v, str):
                    new = v if k != "input" and k != "patch" else "\n".join(
                        ln[1:] for ln in v.splitlines() if ln.startswith("+"))
                    for name in _DEFINED.findall(new):
                        if name.lower() not in _KEYWORDS and not name.isdigit():
                            _add(found["Functions and types changed"], name)
    out: dict[str, list[str]] = {}
    for kind, bucket in found.items():
        if not bucket:
            continue
        keep = sorted(bucket, key=lambda v: -bucket[v])[: CAPS.get(kind, MAX_PER_KIND)]
        out[kind] = [v for v in bucket if v in keep]
    return out


def render(vals: dict[str, list[str]]) -> list[str]:
    return [f"{kind}: " + ", ".join(f"`{v}`" for v in vs) for kind, vs in vals.items()]
