"""The read-set ledger: each file the agent read, with the size and sha256 of the content as
the transcript shows it (line-number gutters of Read tools removed), the lines read when only
part was, the tool-output cache ref where a truncated output names one, and whether the file
was changed afterwards, so an agent can skip re-reading what it already saw."""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...cache.ids import REF_IN_TEXT_RE
from ...model import Block, Message
from ...text import lazyre
from ..prompt import PATH_KEYS, READ_TOOLS, call_args, command_of, extract_files
from .text import items

MAX_ENTRIES = 40
HASH_CHARS = 16
_GUTTER = lazyre.compile(r"^ *\d+(?:→|\t)")  # Claude Code's `cat -n` view and the like
_REMINDER = lazyre.compile(r"\s*<system-reminder>.*?</system-reminder>\s*", re.S)
_SED_RANGE = lazyre.compile(r"^\d+(?:,\d+)?p$")
_EXEC_HEADER = lazyre.compile(r"^(?:Chunk ID|Wall time|Exit code|Process exited)", re.M)
_RUNNING = lazyre.compile(r"^Process running with session ID \d+", re.M)
_CTX_NOTICE = lazyre.compile(r"\[ctxtool: tool output (?:truncated|too large)[^\]]*\]|\[tool output trimmed; ref=[0-9a-f]+[^\]\n]*\]")


@dataclass(slots=True)
class Read:
    path: str
    size: int | None = None  # bytes (UTF-8) of the content as read
    sha256: str | None = None
    lines: str | None = None  # "1-200" when only part was read
    ref: str | None = None  # the cached full output
    changed_after: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.size, "sha256": self.sha256, "lines": self.lines, "ref": self.ref,
                "modified_after": self.changed_after}

    def line(self) -> str:
        facts = []
        if self.size is not None:
            facts.append(f"{self.size:,} bytes")
        if self.sha256 and not self.lines:  # a partial read's hash is not the file's
            facts.append(f"sha256 {self.sha256[:HASH_CHARS]}")
        if self.lines:
            facts.append(f"lines {self.lines}")
        if self.ref:
            facts.append(f"ref={self.ref}")
        if self.changed_after:
            facts.append("modified after it was read")
        return f"`{self.path}`" + (f": {', '.join(facts)}" if facts else "")


def content_as_read(text: str) -> str:
    """The file content a read tool's output shows: without the line-number gutter, the
    reminders an agent appends, and ctxtool's truncation notice."""
    head, sep, rest = text.partition("\nOutput:\n")
    if sep and _EXEC_HEADER.match(head):  # Codex's exec header (chunk, wall time, exit code)
        text = rest
    body = _CTX_NOTICE.sub("", _REMINDER.sub("\n", text)).rstrip()
    lines = body.split("\n")
    if lines and all(_GUTTER.match(ln) for ln in lines if ln.strip()):
        lines = [_GUTTER.sub("", ln, count=1) for ln in lines]
    return "\n".join(lines)


def _read_path(b: Block) -> str | None:
    short = (b.name or "").lower().rsplit("__", 1)[-1].rsplit(".", 1)[-1]
    args = call_args(b)
    if short in READ_TOOLS or short.startswith("read"):
        for k in PATH_KEYS:
            v = args.get(k)
            if isinstance(v, str) and v.strip() and "\n" not in v:
                return v.strip()
        return None
    cmd = command_of(b)
    if cmd and not re.search(r"[|;&<>]", cmd):
        try:
            words = shlex.split(cmd)
        except ValueError:
            return None
        files = [w for w in words[1:] if not w.startswith("-")]
        if words and words[0] in ("cat", "/bin/cat") and len(files) == 1:
            return files[0]
        if words[:2] == ["sed", "-n"] and len(files) == 2 and _SED_RANGE.match(files[0]):
            return files[1]
    return None


def _ref(m: Message, res: Block) -> str | None:
    ref = m.metadata.output_ref
    if isinstance(ref, dict) and isinstance(ref.get("id"), str):
        return str(ref["id"])
    found = _CTX_NOTICE.search(res.text)
    if found:
        refs = REF_IN_TEXT_RE.findall(found.group(0))
        if refs:
            return str(refs[0])
    return None


def _part(b: Block) -> str | None:
    cmd = command_of(b)
    if cmd and (m := re.search(r"sed -n '?(\d+),(\d+)p", cmd)):
        return f"{m.group(1)}-{m.group(2)}"
    args = call_args(b)
    off, lim = args.get("offset"), args.get("limit")
    if isinstance(off, int) or isinstance(lim, int):
        start = off if isinstance(off, int) and off > 0 else 1
        return f"{start}-{start + lim - 1}" if isinstance(lim, int) else f"{start}-"
    return None


def read_set(msgs: Sequence[Message]) -> list[Read]:
    """The files read in ``msgs``, latest read of each, in the order last read."""
    results: dict[str, tuple[Message, Block]] = {}
    for m in msgs:
        for b in m.tool_results():
            if b.id:
                results[b.id] = (m, b)
    last_change: dict[str, int] = {}
    for i, m in enumerate(msgs):
        if m.role == "assistant":
            for p in extract_files([m])[1]:
                last_change[p] = i
    out: dict[str, Read] = {}
    for i, m in enumerate(msgs):
        for b in m.tool_calls():
            path = _read_path(b)
            if path is None:
                continue
            got = results.get(b.id or "")
            if got is None or got[1].is_error:
                continue
            rm, res = got
            content = content_as_read(res.text)
            data = content.encode("utf-8", "surrogatepass")
            ref = _ref(rm, res)
            r = Read(path, len(data), hashlib.sha256(data).hexdigest(), _part(b), ref)
            if ref or _RUNNING.search(res.text):  # cut (its hash is not the file's), or not in the result at all
                r.size = r.sha256 = None
            r.changed_after = last_change.get(path, -1) > i
            out.pop(path, None)
            out[path] = r
    return list(out.values())


def render(reads: list[Read], previous_body: str = "") -> list[str]:
    """The ledger's lines: earlier entries (from a previous summary) first, then the reads of
    this part (a file read again replaces its earlier entry)."""
    new_paths = {f"`{r.path}`" for r in reads}
    earlier = [x for x in items(previous_body) if x.split(":", 1)[0] not in new_paths and x.startswith("`")]
    lines = earlier + [r.line() for r in reads]
    if len(lines) > MAX_ENTRIES:
        lines = [f"(and {len(lines) - MAX_ENTRIES} files read earlier)"] + lines[-MAX_ENTRIES:]
    return [f"- {x}" for x in lines]
