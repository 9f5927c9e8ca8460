"""opencode's session store (``~/.local/share/opencode/opencode.db``, opencode 1.2+), read only
(``mode=ro``): one transcript per session, each assistant message cut into its steps, each step's
results one tool message; converted with ``--to``.

The tables and parts it reads: docs/architecture.md, "Formats as ctxtool reads them"."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from ..errors import CtxtoolError
from ..io.jsonl import Source
from ..model import KIND_COMPACTION_SUMMARY, Block, Line, Message, Metadata, Transcript, Usage, token_count
from .base import ErrorPolicy, Format

__all__ = ["FORMAT", "OpencodeFormat", "connect"]

TABLES = frozenset(("session", "message", "part"))


def connect(path: str) -> sqlite3.Connection:
    """The store at ``path``, opened read only (the standard library's sqlite3, a URI with
    ``mode=ro``: nothing is written, not even a journal)."""
    from pathlib import Path

    uri = Path(path).resolve().as_uri() + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
        con.execute("select 1 from sqlite_master limit 1").fetchall()
    except sqlite3.Error as e:
        raise CtxtoolError(f"cannot open the SQLite store read only ({e})", path=path) from e
    return con


def is_store(path: str) -> bool:
    try:
        con = connect(path)
    except CtxtoolError:
        return False
    try:
        names = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
    except sqlite3.Error:
        return False
    finally:
        con.close()
    return TABLES <= names


def _json(raw: Any, what: str, path: str) -> dict[str, Any]:
    try:
        v = json.loads(raw)
    except (TypeError, ValueError) as e:
        raise CtxtoolError(f"{what}: its data is not JSON ({e})", path=path) from e
    if not isinstance(v, dict):
        raise CtxtoolError(f"{what}: its data is not a JSON object", path=path)
    return v


def _iso(ms: Any) -> str | None:
    if isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms > 0:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return None


def _usage(tokens: Any) -> Usage | None:
    if not isinstance(tokens, dict):
        return None
    got = tokens.get("cache")
    cache: dict[str, Any] = got if isinstance(got, dict) else {}
    u = Usage(token_count(tokens.get("input")), token_count(tokens.get("output")) + token_count(tokens.get("reasoning")),
              token_count(cache.get("write")), token_count(cache.get("read")))
    return u if u.total else None


def _line(kind: str, row_id: str, ms: Any, data: dict[str, Any]) -> Line:
    """What a message of the store stands on (read only: never written back): its row."""
    return Line({"type": kind, "id": row_id, "timestamp": _iso(ms), "data": data})


def _user(mid: str, ms: Any, info: dict[str, Any], parts: list[dict[str, Any]]) -> Message:
    blocks: list[Block] = []
    for p in parts:
        t = p.get("type")
        if t == "text" and isinstance(p.get("text"), str) and not p.get("ignored"):
            blocks.append(Block("text", text=p["text"]))
        elif t == "file":
            blocks.append(Block("text", text=f"[file {p.get('filename') or p.get('url') or ''} ({p.get('mime')})]"))
        elif t == "subtask" and isinstance(p.get("prompt"), str):
            blocks.append(Block("text", text=p["prompt"]))
        elif t == "compaction":
            blocks.append(Block("text", text="What did we do so far?"))  # what opencode sends for it
    m = Message("user", blocks, id=mid, lines=[_line("message", mid, ms, info)])
    if any(p.get("type") == "text" and p.get("synthetic") for p in parts) and all(
            p.get("synthetic") for p in parts if p.get("type") == "text"):
        m.extra["is_meta"] = True
    return m


def _assistant(mid: str, ms: Any, info: dict[str, Any], parts: list[dict[str, Any]]) -> list[Message]:
    """An assistant message as its steps: each an assistant message and a tool message."""
    steps: list[list[dict[str, Any]]] = [[]]
    for p in parts:
        if p.get("type") == "step-start" and steps[-1]:
            steps.append([])
        steps[-1].append(p)
    model = info.get("modelID") if isinstance(info.get("modelID"), str) else None
    summary = bool(info.get("summary"))
    out: list[Message] = []
    any_finish = any(p.get("type") == "step-finish" for p in parts)
    for k, step in enumerate(steps):
        blocks: list[Block] = []
        results: list[Block] = []
        usage = None
        for p in step:
            t = p.get("type")
            if t == "reasoning" and isinstance(p.get("text"), str):
                blocks.append(Block("thinking", text=p["text"]))
            elif t == "text" and isinstance(p.get("text"), str):
                blocks.append(Block("text", text=p["text"]))
            elif t == "tool":
                state = p.get("state")
                st: dict[str, Any] = state if isinstance(state, dict) else {}
                cid, name = p.get("callID"), p.get("tool")
                blocks.append(Block("tool_call", id=cid, name=name, arguments=st.get("input")))
                if st.get("status") == "completed":
                    out_text = st.get("output")
                    results.append(Block("tool_result", text=out_text if isinstance(out_text, str) else json.dumps(out_text),
                                         id=cid, name=name))
                elif st.get("status") == "error":
                    err = st.get("error")
                    results.append(Block("tool_result", text=err if isinstance(err, str) else json.dumps(err), id=cid,
                                         name=name, is_error=True))
            elif t == "step-finish":
                usage = _usage(p.get("tokens"))
        if not any_finish and k == len(steps) - 1:
            usage = _usage(info.get("tokens"))
        if not blocks and usage is None:
            continue
        sid = mid if k == 0 else f"{mid}/step-{k}"
        meta = Metadata(kind=KIND_COMPACTION_SUMMARY) if summary else Metadata()
        out.append(Message("assistant", blocks, id=sid, metadata=meta, usage=usage, usage_key=sid if usage else None,
                           model=model, lines=[_line("message", mid, ms, info)]))
        if results:
            out.append(Message("tool", results, id=f"{sid}/results", lines=[_line("part", mid, ms, {"results": len(results)})]))
    return out


def session_transcript(con: sqlite3.Connection, row: tuple[Any, ...], index: int, path: str) -> Transcript:
    sid, parent, title, directory, version, created = row
    t = Transcript("opencode", path=path, index=index, id=sid)
    t.extra["session"] = {"id": sid, "cwd": directory, "version": version, "title": title}
    if parent:  # started by another session: a subagent
        t.extra["parent_session"] = parent
        t.extra["agent"] = {"id": sid, "type": "subagent"}
    t.extra["layout"] = "opencode_store"
    parts: dict[str, list[dict[str, Any]]] = {}
    for pid, mid, data in con.execute("select id, message_id, data from part where session_id = ? order by message_id, id", (sid,)):
        parts.setdefault(mid, []).append(_json(data, f"part {pid}", path))
    for mid, ms, data in con.execute(
            "select id, time_created, data from message where session_id = ? order by time_created, id", (sid,)):
        info = _json(data, f"message {mid}", path)
        role = info.get("role")
        got = parts.get(mid, [])
        if role == "user":
            t.entries.append(_user(mid, ms, info, got))
        elif role == "assistant":
            t.entries.extend(_assistant(mid, ms, info, got))
        else:
            raise CtxtoolError(f"message {mid}: role must be user or assistant, not {role!r}", path=path)
    return t


class OpencodeFormat(Format):
    name = "opencode"
    description = "opencode session store (opencode.db, SQLite, opencode 1.2+): each session's messages, read only"
    reads = "SQLite store `opencode.db` (read only)"
    writes = False
    default_layout = "opencode_store"
    record_family = "opencode"

    def sniff(self, sample: list[Any], src: Source) -> int:
        return 97 if src.layout == "sqlite" and is_store(str(src.doc)) else 0

    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        if src.layout != "sqlite":
            raise CtxtoolError("not an opencode store (a SQLite opencode.db)", path=src.path)
        con = connect(str(src.doc))
        try:
            names = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
            if not TABLES <= names:
                raise CtxtoolError(f"not an opencode store: no {', '.join(sorted(TABLES - names))} table", path=src.path)
            rows = con.execute("select id, parent_id, title, directory, version, time_created from session "
                               "order by time_created, id").fetchall()
            for i, row in enumerate(rows):
                try:
                    yield session_transcript(con, row, i, src.path)
                except CtxtoolError as e:
                    e.message = f"session {row[0]}: {e.message}"
                    policy.handle(e)
                except sqlite3.Error as e:
                    policy.handle(CtxtoolError(f"session {row[0]}: {e}", path=src.path))
        except sqlite3.Error as e:
            raise CtxtoolError(f"cannot read the opencode store ({e})", path=src.path) from e
        finally:
            con.close()

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        raise CtxtoolError("opencode stores are read only: convert with --to")


FORMAT = OpencodeFormat()
