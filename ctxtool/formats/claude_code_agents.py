"""Claude Code 2.1 subagents: ``<session>/subagents/agent-<id>.jsonl`` beside the session
file ``<session>.jsonl``, each with an ``agent-<id>.meta.json`` (its type, description,
depth). A subagent's transcript belongs to its session: read with it, named by it."""

from __future__ import annotations

import os
import stat
from typing import Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio

__all__ = ["agent_info", "subagent_files"]


def subagent_files(session: str) -> list[str]:
    """The subagent transcripts Claude Code 2.1 keeps beside a session file ``X.jsonl``:
    ``X/subagents/agent-*.jsonl`` (regular files, sorted)."""
    d = os.path.join(os.path.splitext(session)[0], "subagents")
    if not session.endswith(".jsonl") or not os.path.isdir(d):
        return []
    out = []
    for n in sorted(os.listdir(d)):
        q = os.path.join(d, n)
        try:
            if n.startswith("agent-") and n.endswith(".jsonl") and stat.S_ISREG(os.stat(q).st_mode):
                out.append(q)
        except OSError:
            continue
    return out


def agent_info(path: str) -> dict[str, Any] | None:
    """A subagent transcript's agent (``.../subagents/agent-<id>.jsonl``): its id, and from
    the ``agent-<id>.meta.json`` beside it its type, description, depth and model."""
    d, n = os.path.split(path)
    if os.path.basename(d) != "subagents" or not (n.startswith("agent-") and n.endswith(".jsonl")):
        return None
    info: dict[str, Any] = {"id": n[len("agent-"):-len(".jsonl")], "session_file": os.path.dirname(d) + ".jsonl"}
    try:
        with open(os.path.join(d, n[: -len(".jsonl")] + ".meta.json"), "rb") as fh:
            meta = jsonio.loads(fh.read(1 << 20))
    except (OSError, CtxtoolError):
        meta = None
    if isinstance(meta, dict):
        for k, key in (("agentType", "type"), ("description", "description"), ("spawnDepth", "depth"), ("model", "model")):
            if isinstance(meta.get(k), (str, int)) and not isinstance(meta.get(k), bool):
                info[key] = meta[k]
    return info
