"""The AGENTS.md instruction hierarchy (adk-code's ``internal/instructions/loader.go``): the global
file (ctxtool's config directory, ``$CTXTOOL_CONFIG_DIR``), the project root's (the nearest
directory at or above the working directory holding ``.git``, ``.hg``, ``go.mod``,
``package.json`` or ``pyproject.toml``) and the working directory's, merged in that order with a
blank line, read once when two are the same, capped at ``instructions.max_bytes`` (32 KiB) by
cutting the end, never inside a UTF-8 character."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CtxtoolError, Failure, refuse_empty_path
from ..tokens.count import Tokenizer, get_tokenizer

FILENAME = "AGENTS.md"
PROJECT_MARKERS = (".git", ".hg", "go.mod", "package.json", "pyproject.toml")
MAX_BYTES = 32 * 1024
SEPARATOR = b"\n\n"


@dataclass(slots=True)
class InstructionSource:
    level: str  # global | project | workdir
    path: str
    found: bool
    bytes: int = 0  # size of the file
    included_bytes: int = 0  # how much of it made it into the merged text
    same_as: str | None = None  # the level already holding this file

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "path": self.path,
            "found": self.found,
            "bytes": self.bytes,
            "included_bytes": self.included_bytes,
            "same_as": self.same_as,
        }


@dataclass(slots=True)
class InstructionsResult:
    directory: str
    project_root: str | None
    sources: list[InstructionSource] = field(default_factory=list)
    merged: str = ""
    bytes: int = 0  # size of the merged text (after the cap)
    total_bytes: int = 0  # size before the cap
    tokens: int = 0
    tokenizer: str = "heuristic"
    max_bytes: int = MAX_BYTES
    truncated: bool = False

    @property
    def num_sources(self) -> int:
        return sum(1 for s in self.sources if s.found and s.same_as is None)

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "project_root": self.project_root,
            "sources": [s.to_json() for s in self.sources],
            "num_sources": self.num_sources,
            "bytes": self.bytes,
            "total_bytes": self.total_bytes,
            "max_bytes": self.max_bytes,
            "truncated": self.truncated,
            "tokens": self.tokens,
            "tokenizer": self.tokenizer,
            "merged": self.merged,
        }


def find_project_root(start: str | Path) -> Path | None:
    """The nearest directory at or above ``start`` holding a project marker."""
    d = Path(start).resolve()
    for cand in (d, *d.parents):
        if any((cand / m).exists() for m in PROJECT_MARKERS):
            return cand
    return None


def clip_utf8(data: bytes, limit: int) -> bytes:
    """At most ``limit`` bytes of ``data``, never ending inside a UTF-8 sequence."""
    if len(data) <= limit:
        return data
    cut = max(limit, 0)
    # back off over continuation bytes (10xxxxxx) to the start of the character at ``cut``
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut]


def global_path() -> Path:
    # lazy: start-up (loaded only when this runs: ..io.paths)
    from ..io.paths import config_dir

    return config_dir() / FILENAME


def load_instructions(
    directory: str | Path | None = None,
    *,
    max_bytes: int | None = None,
    global_file: str | Path | None = None,
    tokenizer: Tokenizer | str | None = None,
) -> InstructionsResult:
    """Find and merge the three AGENTS.md levels for ``directory`` (default: the current one)."""
    if directory is not None:
        refuse_empty_path(str(directory))  # not the current directory
    d = Path(directory) if directory is not None else Path.cwd()
    if not d.exists():
        raise CtxtoolError("no such directory", path=str(d), kind=Failure.NOT_FOUND)
    if not d.is_dir():
        raise CtxtoolError("not a directory", path=str(d), kind=Failure.USAGE)
    d = d.resolve()
    if max_bytes is None:
        # lazy: start-up (loaded only when this runs: ..config)
        from ..config import Config

        max_bytes = int(Config()["instructions.max_bytes"])
    if max_bytes < 0:
        raise CtxtoolError("max_bytes must be >= 0", kind=Failure.USAGE)
    tok = get_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, str) else tokenizer
    root = find_project_root(d)
    gpath = Path(global_file) if global_file is not None else global_path()
    cands: list[tuple[str, Path | None]] = [
        ("global", gpath),
        ("project", root / FILENAME if root else None),
        ("workdir", d / FILENAME),
    ]
    res = InstructionsResult(str(d), str(root) if root else None, max_bytes=max_bytes, tokenizer=tok.name)
    seen: dict[Path, str] = {}
    chunks: list[tuple[InstructionSource, bytes]] = []
    for level, p in cands:
        if p is None:
            res.sources.append(InstructionSource(level, "", False))
            continue
        src = InstructionSource(level, str(p), p.is_file())
        res.sources.append(src)
        if not src.found:
            continue
        key = p.resolve()
        if key in seen:
            src.same_as = seen[key]
            continue
        seen[key] = level
        try:
            data = p.read_bytes()
        except OSError as e:
            raise CtxtoolError(f"cannot read: {e.strerror}", path=str(p), kind=Failure.INPUT) from e
        src.bytes = len(data)
        body = data.rstrip(b"\r\n")
        if body:
            chunks.append((src, body))
    merged = b""
    starts: list[int] = []
    for k, (src, body) in enumerate(chunks):
        if k:
            merged += SEPARATOR
        starts.append(len(merged))
        merged += body
        src.included_bytes = src.bytes  # the whole file (its trailing newlines normalized)
    if merged:
        merged += b"\n"
    res.total_bytes = len(merged)
    if len(merged) > max_bytes:
        merged = clip_utf8(merged, max_bytes)
        res.truncated = True
        for (src, body), start in zip(chunks, starts, strict=True):
            if start + len(body) > len(merged):
                src.included_bytes = max(0, len(merged) - start)
    res.bytes = len(merged)
    res.merged = merged.decode("utf-8", errors="replace")
    res.tokens = tok.count(res.merged) if res.merged else 0
    return res
