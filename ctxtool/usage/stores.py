"""Where agents keep their sessions, and the files ``ctxtool usage`` reads: with no path, every
default store that exists (Claude Code, Codex, opencode, pi), each with the environment variable
that moves it. The table of stores and overrides: docs/architecture.md, "Commands, in more
detail"."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import CtxtoolError, Failure, refuse_empty_path


@dataclass(frozen=True, slots=True)
class Store:
    """One session store: the agent that writes it, its directory and what chose it."""

    agent: str
    path: str
    source: str  # "default" or the environment variable that named it

    def to_json(self) -> dict[str, str]:
        return {"agent": self.agent, "path": self.path, "source": self.source}


def _dirs(value: str) -> list[Path]:
    return [Path(v.strip()).expanduser() for v in value.split(",") if v.strip()]


def default_stores(env: Mapping[str, str] | None = None, home: Path | None = None) -> list[Store]:
    """The session stores of Claude Code, Codex, opencode and pi, as the environment places them
    (whether or not they exist)."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home()) if home is None else home
    stores: list[Store] = []
    claude = env.get("CLAUDE_CONFIG_DIR", "").strip()
    if claude:
        stores += [Store("claude-code", str(d / "projects"), "CLAUDE_CONFIG_DIR") for d in _dirs(claude)]
    else:
        stores += [Store("claude-code", str(home / ".claude" / "projects"), "default"),
                   Store("claude-code", str(home / ".config" / "claude" / "projects"), "default")]
    codex = env.get("CODEX_HOME", "").strip()
    chome, csource = (Path(codex).expanduser(), "CODEX_HOME") if codex else (home / ".codex", "default")
    stores += [Store("codex", str(chome / "sessions"), csource), Store("codex", str(chome / "archived_sessions"), csource)]
    data = env.get("XDG_DATA_HOME", "").strip()
    stores.append(Store("opencode", str(Path(data).expanduser() / "opencode" / "opencode.db"), "XDG_DATA_HOME") if data
                  else Store("opencode", str(home / ".local" / "share" / "opencode" / "opencode.db"), "default"))
    pi = env.get("PI_CODING_AGENT_DIR", "").strip()
    stores.append(Store("pi", str(Path(pi).expanduser() / "sessions"), "PI_CODING_AGENT_DIR") if pi
                  else Store("pi", str(home / ".pi" / "agent" / "sessions"), "default"))
    return stores


def _jsonl_under(d: Path) -> Iterator[Path]:
    """Session files under ``d`` (``*.jsonl``, compressed or not: Codex keeps old rollouts as
    ``.jsonl.zst``), sorted: regular files only (a FIFO is never opened), links not followed."""
    # lazy: start-up (loaded only when this runs: ..formats.walk)
    from ..formats.walk import walk_files

    yield from map(Path, walk_files(d, (".jsonl",)))


def session_files(paths: Iterable[str] | None, stores: list[Store] | None = None) -> tuple[list[Store], list[str]]:
    """The stores read and the files in them: ``paths`` (files, or directories searched
    recursively for ``*.jsonl``) or, when none, the default stores that exist. A path given
    that does not exist is an error; a missing default store is not."""
    files: list[str] = []
    if paths:
        used = []
        for p in paths:
            refuse_empty_path(p)
            q = Path(p)
            if p == "-":
                files.append(p)
                used.append(Store("", "-", "argument"))
            elif q.is_dir():
                files += [str(f) for f in _jsonl_under(q)]
                used.append(Store("", str(q), "argument"))
            elif q.exists():
                # lazy: start-up (loaded only when this runs: ..formats.walk)
                from ..formats.walk import with_subagents

                files += with_subagents(str(q))  # a session with its subagents (Claude Code, Gemini CLI)
                used.append(Store("", str(q), "argument"))
            else:
                raise CtxtoolError("no such file or directory", path=str(p), kind=Failure.NOT_FOUND)
        return used, _unique(files)
    stores = default_stores() if stores is None else stores
    present = [s for s in stores if Path(s.path).is_dir() or Path(s.path).is_file()]
    for s in present:
        files += [s.path] if Path(s.path).is_file() else [str(f) for f in _jsonl_under(Path(s.path))]
    return present, _unique(files)


def _unique(files: list[str]) -> list[str]:
    """Each file once (a store reached twice, a file named twice, a link): the same file is
    the same device and inode (one stat; its real path walks every component, 5x slower)."""
    seen: set[object] = set()
    out = []
    for f in files:
        key: object = f
        if f != "-":
            try:
                st = os.stat(f)
                key = (st.st_dev, st.st_ino)
            except OSError:
                key = os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
