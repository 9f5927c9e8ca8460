"""The audit trail: one JSON line per truncation, spill, trim, cut or compaction
(adk-code truncate log, AgentCore.Context telemetry, the Go agent and pi-style compaction events)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import jsonl as jsonio
from .outputs import atomic_output


class EventLog:
    """Collects events; ``flush`` writes them atomically as JSONL (``None``: discarded)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = path
        self.events: list[dict[str, Any]] = []

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        ev = {"event": kind, **{k: v for k, v in fields.items() if v is not None}}
        self.events.append(ev)
        return ev

    def count(self, kind: str) -> int:
        return sum(1 for e in self.events if e["event"] == kind)

    def flush(self) -> None:
        if self.path is None:
            return
        with atomic_output(self.path) as out:
            for ev in self.events:
                out.write(jsonio.dumps(ev) + b"\n")
