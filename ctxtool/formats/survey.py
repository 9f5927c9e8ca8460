"""What ctxtool made of each line type of a file (``ctxtool formats FILE``): for every type
of line or record, how many there are and what they were read as (a message of a role, a
compaction, a record kept verbatim, or a type the reader does not know, kept verbatim), and
the version of the tool that wrote the file, where the file records it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..model import Compaction, Cont, Message, Record, Transcript
from ..text import lazyre
from . import get_format, read

__all__ = ["FileSurvey", "survey_file"]


@dataclass(slots=True)
class FileSurvey:
    path: str
    format: str | None = None
    tool_version: str | None = None
    transcripts: int = 0
    #: (line type, what it was read as) -> how many
    types: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def unknown(self) -> int:
        return sum(n for (_t, how), n in self.types.items() if how.startswith("unknown"))

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "tool_version": self.tool_version,
                "transcripts": self.transcripts,
                "types": [{"type": t, "read_as": how, "count": n} for (t, how), n in self.types.most_common()]}


_NAME = lazyre.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")  # a value that names a type (``run``, ``assistant``)


def _line_type(obj: Any) -> str:
    """A line's type as its agent names it: ``type`` (with ``subtype``, or a wrapped
    ``payload``'s type), else the message's ``role`` (or OpenHands' ``source``, ``action``,
    ``observation``), else its first key. A value that is no name (a SWE-agent step's
    ``action`` is the command itself, its ``observation`` the command's output) names no
    type: the key alone does, so that a file's lines fall into a few types, not one per text."""
    if not isinstance(obj, dict):
        return type(obj).__name__
    t = obj.get("type")
    if isinstance(t, str):
        sub = obj.get("subtype")
        p = obj.get("payload")
        if isinstance(sub, str):
            return f"{t}:{sub}"
        if isinstance(p, dict) and isinstance(p.get("type"), str):
            return f"{t}:{p['type']}"
        return t
    for k in ("role", "source", "action", "observation"):
        v = obj.get(k)
        if isinstance(v, str):
            return f"{k}:{v}" if _NAME.fullmatch(v) else k
    return next(iter(obj), "{}")


def tool_version(t: Transcript) -> str | None:
    """The version of the agent that wrote ``t``, as its file records it."""
    sess = t.extra.get("session")
    if isinstance(sess, dict):
        for k in ("version", "cli_version"):
            v = sess.get(k)
            if isinstance(v, str) and v:
                return v
    rec = t.record if isinstance(t.record, dict) else {}
    agent = rec.get("agent")
    if isinstance(agent, dict) and isinstance(agent.get("version"), str):  # ATIF
        name = agent.get("name")
        return f"{name} {agent['version']}" if isinstance(name, str) else agent["version"]
    log = rec.get("log")
    if isinstance(log, dict):  # Inspect: the log's packages
        ev = log.get("eval")
        pk = ev.get("packages") if isinstance(ev, dict) else None
        if isinstance(pk, dict) and isinstance(pk.get("inspect_ai"), str):
            return f"inspect_ai {pk['inspect_ai']}"
    for e in t.entries[:50]:  # a version on its lines (Claude Code writes one on each)
        for ln in getattr(e, "lines", None) or ([e.line] if isinstance(e, Record) else []):
            v = ln.obj.get("version") if isinstance(ln.obj, dict) else None
            if isinstance(v, str) and v:
                return v
    return None


def survey_file(path: str, fmt: str | None = None) -> FileSurvey:
    """Read ``path`` and tell, per line type, what its lines were read as."""
    s = FileSurvey(path)
    for t in read(path, fmt):
        s.transcripts += 1
        s.format = s.format or t.format
        s.tool_version = s.tool_version or tool_version(t)
        f = get_format(t.format)
        unknown = f.unknown_records(t)
        for e in t.entries:
            if isinstance(e, Message):
                for ln in e.lines[:1]:
                    s.types[(_line_type(ln.obj), f"message ({e.role})")] += 1
            elif isinstance(e, Cont):
                s.types[(_line_type(e.message.lines[e.part].obj), f"message ({e.message.role}), continued")] += 1
            elif isinstance(e, Compaction):
                for ln in e.lines[:1]:
                    s.types[(_line_type(ln.obj), "compaction")] += 1
            elif isinstance(e, Record):
                how = "unknown type, kept verbatim" if e.kind in unknown else "record, kept verbatim"
                s.types[(_line_type(e.line.obj), how)] += 1
        # what a reader counts as not understood beside whole records (an ATIF step's field, a content part)
        kinds = {e.kind for e in t.entries if isinstance(e, Record)}
        for k, n in unknown.items():
            if k not in kinds:
                s.types[(k, "unknown field or part, kept verbatim")] += n
    return s
