"""Directory walks: which files of a directory are transcripts (``*.jsonl``, ``*.json``,
``*.traj``, ``*.ndjson``, compressed or not, and session stores such as ``opencode.db``),
regular files only, and a Claude Code or Gemini CLI session's subagents with it."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from ..errors import CtxtoolError, Failure, refuse_empty_path
from ..io.paths import TRANSCRIPT_SUFFIXES, transcript_name
from ..text import lazyre

#: a sharded run's bookkeeping beside its output files (:mod:`ctxtool.run.engines.shards`): never a transcript
REPORT = "_report.json"
DONE = "_done"


def walk_files(d: str | Path, suffixes: Sequence[str] = TRANSCRIPT_SUFFIXES) -> list[str]:
    """The transcript files under directory ``d``, sorted: regular files only (a FIFO or a
    device in the tree is never opened: it could block), directory links not followed."""
    import os
    import stat

    found = []
    for root, dirs, names in os.walk(d, followlinks=False):
        if REPORT in names and DONE in dirs:  # the output of a sharded run: its bookkeeping left out
            dirs.remove(DONE)
            names = [n for n in names if n != REPORT]
        for n in names:
            if not transcript_name(n, suffixes):
                continue
            q = os.path.join(root, n)
            try:
                if stat.S_ISREG(os.stat(q).st_mode):
                    found.append(q)
            except OSError:
                continue
    return sorted(found)


def iter_paths(paths: Iterable[str | Path], *, subagents: bool = False) -> Iterator[str]:
    """Expand directories (recursively) and globs into transcript files; URLs (``s3://``...)
    and ``-`` pass through. ``subagents``: a Claude Code session file named alone brings its
    subagents' transcripts (``<session>/subagents/agent-*.jsonl``) after it, and a Gemini CLI
    session file its subagents' (``chats/<sessionId>/*.jsonl``), so that the session is read
    as one unit (each file once)."""
    if not subagents:
        yield from _iter_paths(paths)
        return
    seen: set[str] = set()
    for p in _iter_paths(paths):
        for q in with_subagents(p) if p != "-" else [p]:
            if q not in seen:
                seen.add(q)
                yield q


def with_subagents(session: str) -> list[str]:
    """A session file and its subagents' transcripts after it: Claude Code's
    ``<session>/subagents/agent-*.jsonl``, Gemini CLI's ``chats/<sessionId>/*.jsonl``."""
    # lazy: start-up (`ctxtool validate` would load ctxtool.formats.claude_code_agents)
    from .claude_code_agents import subagent_files

    return [session, *subagent_files(session), *gemini_subagent_files(session)]


#: ``"sessionId": "..."`` near the start of a session file (its metadata line, or the JSON document's head)
_SESSION_ID = lazyre.compile(rb'"sessionId"\s*:\s*"([^"\\]{1,200})"')


def gemini_subagent_files(session: str) -> list[str]:
    """The subagent sessions Gemini CLI keeps for a session file ``chats/session-*.jsonl``
    (or ``.json``): ``chats/<its sessionId>/*.jsonl`` (the id with every character other
    than letters, digits, ``_`` and ``-`` made ``_``, as Gemini names the directory),
    regular files, sorted."""
    d, n = os.path.split(session)
    if os.path.basename(d) != "chats" or not n.startswith("session-") or not n.endswith((".jsonl", ".json")):
        return []
    try:
        with open(session, "rb") as fh:
            m = _SESSION_ID.search(fh.read(1 << 16))
    except OSError:
        return []
    if m is None:
        return []
    sub = os.path.join(d, re.sub(r"[^a-zA-Z0-9_-]", "_", m.group(1).decode("utf-8", "replace")))
    if not os.path.isdir(sub):
        return []
    out = []
    for name in sorted(os.listdir(sub)):
        q = os.path.join(sub, name)
        try:
            if name.endswith((".jsonl", ".json")) and stat.S_ISREG(os.stat(q).st_mode):
                out.append(q)
        except OSError:
            continue
    return out


def _iter_paths(paths: Iterable[str | Path]) -> Iterator[str]:
    """A file is given once however it is named (a relative and an absolute path, a link, a
    directory holding a file also named): the first name is kept."""
    import os
    import stat

    # lazy: start-up (loaded only when this runs: ..io)
    from ..io import urls

    seen: set[tuple[int, int]] = set()

    def first(name: str) -> bool:
        try:
            st = os.stat(name)
        except OSError:
            return True
        if not stat.S_ISREG(st.st_mode):  # a FIFO, a device: read as often as named
            return True
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return False
        seen.add(key)
        return True

    for p in paths:
        s = str(p)
        if s == "-":
            yield s
            continue
        if urls.is_url(s) or urls.has_glob(s):  # fsspec URLs and globs (s3://bucket/*.jsonl)
            yield from (q for q in urls.expand(s) if urls.is_url(q) or first(q))
            continue
        refuse_empty_path(s)
        path = Path(s)
        if path.is_dir():
            found = walk_files(path)
            # lazy: start-up (`ctxtool export` would load ctxtool.io.parquet_paths)
            from ..io.parquet_paths import is_parquet_dir

            if is_parquet_dir(s):  # Parquet shards: the directory runs as its shards (ctxtool.io.parquet)
                yield s
                if not found:
                    continue
            if not found:
                raise CtxtoolError("directory holds no transcript files (*.jsonl, *.json, compressed or not)", path=s,
                                   kind=Failure.NOT_FOUND)
            yield from (q for q in found if first(q))
        elif not path.exists():
            raise CtxtoolError("no such file", path=s, kind=Failure.NOT_FOUND)
        elif first(s):
            yield s
