"""The tool output cache as tools an agent calls: ``tool_output_cache`` reads a ref by numbered
lines, ``tool_output_cache_grep`` searches one ref or all, ``transcript_search`` finds where a
string appeared. Each is a function of a :class:`ctxtool.cache.RefCache` returning the text, or
raising :class:`ctxtool.errors.CtxtoolError`; each only reads (ids validated, reads inside the
cache, transcripts only under a directory the server was given), capped as the in-context view
is (:func:`view`: 50 KiB, lines of 2,000 characters), ending with how to get the next page."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import CtxtoolError, Failure
from ..tool_outputs.algorithms import GREP, PRESETS, READ

SEARCH = "transcript_search"
TOOLS = (READ, GREP, SEARCH)

DEFAULT_LIMIT = 2000  # lines per page, as a read tool
DEFAULT_MATCHES = 100
MAX_CONTEXT = 20
GREP_SECONDS = 10.0  # the time one search may take
DEFAULT_HITS = 50
ERROR_CHARS = 300  # an error result echoes at most this much of what it was given

HINT = (
    f"[ctxtool: tool outputs cut or trimmed in this transcript are kept whole in a cache. "
    f"With the ctxtool MCP server (ctxtool mcp), read one by its ref with {READ}(ref_id, offset, limit), "
    f"search them with {GREP}(pattern, ref_id?), and find where a string appeared before a "
    f"compaction with {SEARCH}(query, paths).]"
)


def add_hint(t: Any) -> bool:
    """``--agent-hint``: :data:`HINT` as a system message at the end of transcript ``t``
    (once: not when it is there already); whether it was added. A format with no system
    messages (Gemini CLI's) writes it as a user message."""
    # lazy: start-up (loaded only when this runs: ..model)
    from ..model import Block, Message

    if any(is_hint(m) for m in t.iter_messages()):
        return False
    t.entries.append(Message("system", [Block("text", text=HINT)], dirty=True))
    return True


def is_hint(m: Any) -> bool:
    """Is message ``m`` the note :func:`add_hint` writes (``restore`` takes it out)?"""
    return bool(m.role in ("system", "user") and m.text() == HINT)


def view() -> tuple[int, int]:
    """What one result may hold: bytes, and characters per line (the in-context view's maxMessageBytes and
    maxLineLength, :data:`ctxtool.tool_outputs.algorithms.PRESETS`)."""

    v = PRESETS.get("view")
    return v.max_bytes, v.max_line_length


def _int(name: str, v: Any, lo: int, default: int | None = None) -> int:
    if v is None and default is not None:
        return default
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise CtxtoolError(f"{name} must be an integer >= {lo}", kind=Failure.USAGE)
    return v


def read_ref(cache: Any, ref_id: str, offset: int | None = None, limit: int | None = None) -> str:
    """``tool_output_cache``: lines ``offset`` (1-based, default 1) to ``offset + limit - 1``
    (default :data:`DEFAULT_LIMIT` lines) of a ref, as ``<number>\\t<line>``, then a note
    when lines follow or were cut."""
    offset = _int("offset", offset, 1, 1)
    limit = _int("limit", limit, 1, DEFAULT_LIMIT)
    max_bytes, max_line = view()
    res = cache.show(ref_id, offset, limit, max_bytes=max_bytes - 512, max_line=max_line)
    body = res.render()
    last = res.lines[-1][0] if res.lines else offset - 1
    notes = []
    if not res.lines:
        notes.append(f"no lines from {offset:,}: the output has {res.total_lines:,} line(s)")
    if res.cut_lines:
        notes.append(f"{res.cut_lines:,} line(s) longer than {max_line:,} characters cut; "
                     f"{GREP} with ref_id finds text in them")
    if last < res.total_lines:
        why = f" ({max_bytes // 1024} KiB per result)" if res.capped else ""
        notes.append(f"lines {offset:,}-{last:,} of {res.total_lines:,}{why}; {res.total_lines - last:,} more: "
                      f"call {READ} with ref_id={res.ref} offset={last + 1}")
    elif res.lines:
        notes.append(f"lines {offset:,}-{last:,} of {res.total_lines:,}: the end of the output")
    return body + "".join(f"[{n}]\n" for n in notes)


def grep_refs(
    cache: Any,
    pattern: str,
    ref_id: str | None = None,
    context: int | None = None,
    max_matches: int | None = None,
    skip: int | None = None,
    ignore_case: bool = False,
) -> str:
    """``tool_output_cache_grep``: matching lines of one ref (``ref_id``) or of every output
    in the cache, as ``<ref>:<line>:<text>`` (context lines with ``-``), then a note when
    more may follow."""
    context = _int("context", context, 0, 0)
    if context > MAX_CONTEXT:
        raise CtxtoolError(f"context must be <= {MAX_CONTEXT}", kind=Failure.USAGE)
    max_matches = _int("max_matches", max_matches, 1, DEFAULT_MATCHES)
    skip = _int("skip", skip, 0, 0)
    if not isinstance(pattern, str) or not pattern:
        raise CtxtoolError("pattern must be a non-empty string", kind=Failure.USAGE)
    max_bytes, max_line = view()
    res = cache.grep(
        pattern, None if ref_id is None else [ref_id], context=context, ignore_case=ignore_case,
        max_matches=max_matches, skip=skip, time_limit=GREP_SECONDS, max_line=max_line,
    )
    out: list[str] = []
    size = 0
    prev = None
    shown = 0  # matches shown
    capped = False
    for m in res.matches:
        sep = ":" if m.match else "-"
        line = ("--\n" if context and prev is not None and (m.ref != prev.ref or m.line != prev.line + 1) else "")
        line += f"{m.ref[:16]}{sep}{m.line}{sep}{m.text}\n"
        size += len(line.encode("utf-8", "surrogatepass"))
        if size > max_bytes - 512 and shown:
            capped = True
            break
        out.append(line)
        shown += m.match
        prev = m
    n = res.match_count if not capped else shown
    where = f"ref {res.matches[0].ref[:16] if res.matches else ref_id}" if ref_id else f"{res.refs_searched:,} ref(s)"
    notes = [f"{n:,} match{'es' if n != 1 else ''} in {where}" + (f" after skipping {skip:,}" if skip else "")]
    if capped or res.more:
        notes.append(f"more may follow: call {GREP} again with skip={skip + n}")
    if res.timed_out and res.stopped_at:
        notes.append(f"stopped after {GREP_SECONDS:g} s at line {res.stopped_at[1]:,} of ref {res.stopped_at[0][:16]}: "
                     f"search that ref with ref_id, or call again with skip={skip + n}")
    if not res.matches and not ref_id and not res.refs_searched:
        notes.append("the cache holds no tool outputs")
    return "".join(out) + "".join(f"[{x}]\n" for x in notes)


def allowed_paths(roots: Sequence[str], paths: Iterable[str]) -> list[str]:
    """The transcript files ``paths`` name (a directory: its ``*.jsonl`` and ``*.json`` files,
    recursively), each checked to be under one of ``roots``; anything else is an error."""
    if not roots:
        raise CtxtoolError(f"{SEARCH} is off: start the server with --transcripts DIR to let it read transcripts "
                           "under DIR", kind=Failure.USAGE)
    real_roots = [os.path.realpath(r) for r in roots]
    out: list[str] = []
    for p in paths:
        if not isinstance(p, str) or not p or "\0" in p or len(p) > 4096:
            raise CtxtoolError(f"invalid path {_clip(repr(p))}", kind=Failure.USAGE)
        full = os.path.realpath(p if os.path.isabs(p) else os.path.join(real_roots[0], p))
        if not any(full == r or full.startswith(r.rstrip(os.sep) + os.sep) for r in real_roots):
            raise CtxtoolError(f"{_clip(p)} is outside the transcript directories this server may read",
                               kind=Failure.USAGE)
        if os.path.isdir(full):
            found = sorted(str(f) for f in Path(full).rglob("*") if f.suffix in (".jsonl", ".json") and f.is_file())
            out.extend(f for f in found if not os.path.islink(f))
        elif os.path.isfile(full):
            out.append(full)
        else:
            raise CtxtoolError(f"no transcript at {_clip(p)}", kind=Failure.NOT_FOUND)
    if not out:
        raise CtxtoolError("no transcript files given", kind=Failure.USAGE)
    return out


def search(roots: Sequence[str], query: str, paths: Sequence[str] | None = None, max_hits: int | None = None,
           skip: int | None = None) -> str:
    """``transcript_search``: the messages of the given transcripts (default: every one under
    ``roots``) that hold ``query``, each as ``<file>:<line> message <index> (<role>, <block>): <snippet>``."""
    # lazy: start-up (`ctxtool truncate` would load ctxtool.agent.search)
    from .search import search_transcripts

    max_hits = _int("max_hits", max_hits, 1, DEFAULT_HITS)
    skip = _int("skip", skip, 0, 0)
    if not isinstance(query, str) or not query:
        raise CtxtoolError("query must be a non-empty string", kind=Failure.USAGE)
    files = allowed_paths(roots, paths or list(roots))
    res = search_transcripts(query, files, max_hits=max_hits, skip=skip)
    max_bytes = view()[0]
    out: list[str] = []
    size = 0
    for h in res.hits:
        line = f"{h.path}:{h.line if h.line is not None else '?'} message {h.message} ({h.role}, {h.block})" + (
            f" transcript {h.transcript}" if h.transcript else "") + f": {h.snippet}\n"
        size += len(line.encode("utf-8", "surrogatepass"))
        if size > max_bytes - 512 and out:
            res.more = True
            break
        out.append(line)
    n = len(out)
    notes = [f"{n:,} hit(s) in {res.files:,} file(s)"]
    if res.more:
        notes.append(f"more may follow: call {SEARCH} again with skip={skip + n}")
    return "".join(out) + "".join(f"[{x}]\n" for x in notes)


def _clip(s: str) -> str:
    return s if len(s) <= 80 else s[:76] + "..."


def error_text(e: CtxtoolError) -> str:
    """An error result: the one-line message, at most :data:`ERROR_CHARS` characters."""
    msg = str(e)
    return msg if len(msg) <= ERROR_CHARS else msg[: ERROR_CHARS - 3] + "..."
