"""A small opencode session store (``opencode.db``) built to opencode's published schema.

Tables and columns as opencode declares them with drizzle (anomalyco/opencode, formerly
sst/opencode, MIT: ``packages/opencode/src/session/session.sql.ts`` at commit
``063e8306d9895af9bdd175306cfa4fa3291fd83a``; ``project`` reduced to its key); the JSON in
``message.data`` and ``part.data`` follows ``packages/opencode/src/session/message-v2.ts``
(``User``/``Assistant`` infos, ``TextPart``, ``ReasoningPart``, ``ToolPart`` with its
``ToolState``, ``StepStartPart``, ``StepFinishPart``, ``CompactionPart``). Ids, text and
figures are ours. A main session and a subagent session (``parent_id``), three model calls
with usage, one tool error, a compaction.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE `project` (`id` text PRIMARY KEY, `worktree` text NOT NULL, `time_created` integer NOT NULL,
  `time_updated` integer NOT NULL);
CREATE TABLE `session` (`id` text PRIMARY KEY, `project_id` text NOT NULL, `workspace_id` text, `parent_id` text,
  `slug` text NOT NULL, `directory` text NOT NULL, `path` text, `title` text NOT NULL, `version` text NOT NULL,
  `share_url` text, `summary_additions` integer, `summary_deletions` integer, `summary_files` integer,
  `summary_diffs` text, `cost` real DEFAULT 0 NOT NULL, `tokens_input` integer DEFAULT 0 NOT NULL,
  `tokens_output` integer DEFAULT 0 NOT NULL, `tokens_reasoning` integer DEFAULT 0 NOT NULL,
  `tokens_cache_read` integer DEFAULT 0 NOT NULL, `tokens_cache_write` integer DEFAULT 0 NOT NULL, `revert` text,
  `permission` text, `goal` text, `agent` text, `model` text, `time_created` integer NOT NULL,
  `time_updated` integer NOT NULL, `time_compacting` integer, `time_archived` integer,
  FOREIGN KEY (`project_id`) REFERENCES `project`(`id`) ON DELETE cascade);
CREATE TABLE `message` (`id` text PRIMARY KEY, `session_id` text NOT NULL, `time_created` integer NOT NULL,
  `time_updated` integer NOT NULL, `data` text NOT NULL,
  FOREIGN KEY (`session_id`) REFERENCES `session`(`id`) ON DELETE cascade);
CREATE TABLE `part` (`id` text PRIMARY KEY, `message_id` text NOT NULL, `session_id` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL,
  FOREIGN KEY (`message_id`) REFERENCES `message`(`id`) ON DELETE cascade);
CREATE INDEX `session_project_idx` ON `session` (`project_id`);
CREATE INDEX `session_parent_idx` ON `session` (`parent_id`);
CREATE INDEX `message_session_time_created_id_idx` ON `message` (`session_id`,`time_created`,`id`);
CREATE INDEX `part_message_id_id_idx` ON `part` (`message_id`,`id`);
CREATE INDEX `part_session_idx` ON `part` (`session_id`);
"""

T0 = 1_777_000_000_000  # ms
MODEL = "claude-sonnet-4-5"


def _tokens(inp: int, out: int, reasoning: int, read: int, write: int) -> dict[str, Any]:
    return {"input": inp, "output": out, "reasoning": reasoning, "cache": {"read": read, "write": write}}


#: (session, input, output, reasoning, cache read, cache write) of each model call
CALLS = [("ses_main", 1200, 80, 40, 0, 3000), ("ses_main", 300, 120, 0, 4100, 0), ("ses_sub", 900, 60, 0, 0, 1000)]


def build(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.execute("insert into project values ('prj_1', '/home/dev/app', ?, ?)", (T0, T0))
    for sid, parent, title in (("ses_main", None, "Fix the failing test"), ("ses_sub", "ses_main", "Find the flaky test (@general subagent)")):
        con.execute("insert into session (id, project_id, parent_id, slug, directory, title, version, time_created, time_updated)"
                    " values (?, 'prj_1', ?, ?, '/home/dev/app', ?, '1.2.10', ?, ?)",
                    (sid, parent, sid.replace("_", "-"), title, T0 + (5000 if parent else 0), T0 + 9000))
    n = [0]

    def msg(sid: str, mid: str, data: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        n[0] += 1
        at = T0 + 1000 * n[0]
        con.execute("insert into message values (?, ?, ?, ?, ?)", (mid, sid, at, at, json.dumps(data)))
        for k, p in enumerate(parts):
            con.execute("insert into part values (?, ?, ?, ?, ?, ?)", (f"prt_{mid}_{k:02d}", mid, sid, at, at, json.dumps(p)))

    user = {"role": "user", "time": {"created": T0}, "agent": "build", "model": {"providerID": "anthropic", "modelID": MODEL}}

    def assistant(parent: str, tokens: dict[str, Any], summary: bool = False) -> dict[str, Any]:
        d = {"role": "assistant", "time": {"created": T0, "completed": T0 + 1}, "parentID": parent, "modelID": MODEL,
             "providerID": "anthropic", "mode": "build", "agent": "build", "path": {"cwd": "/home/dev/app", "root": "/home/dev/app"},
             "cost": 0.01, "tokens": tokens}
        if summary:
            d["summary"] = True
        return d

    c1, c2, c3 = (_tokens(*c[1:]) for c in CALLS)
    msg("ses_main", "msg_01", user, [{"type": "text", "text": "The test test_totals fails. Fix it."}])
    msg("ses_main", "msg_02", assistant("msg_01", c1), [
        {"type": "step-start"},
        {"type": "reasoning", "text": "Run the test first.", "time": {"start": T0}},
        {"type": "tool", "callID": "toolu_01", "tool": "bash",
         "state": {"status": "completed", "input": {"command": "pytest -q tests/test_totals.py"}, "output": "1 failed",
                   "title": "pytest", "metadata": {}, "time": {"start": T0, "end": T0 + 5}}},
        {"type": "tool", "callID": "toolu_02", "tool": "read",
         "state": {"status": "error", "input": {"filePath": "/home/dev/app/missing.py"}, "error": "File not found",
                   "time": {"start": T0, "end": T0 + 1}}},
        {"type": "step-finish", "reason": "tool-calls", "cost": 0.01, "tokens": c1},
        {"type": "step-start"},
        {"type": "text", "text": "Rounding happens too early; I changed totals.py to round once."},
        {"type": "step-finish", "reason": "stop", "cost": 0.002, "tokens": c2},
    ])
    msg("ses_main", "msg_03", user, [{"type": "compaction", "auto": True}])
    msg("ses_main", "msg_04", assistant("msg_03", _tokens(0, 0, 0, 0, 0), summary=True),
        [{"type": "text", "text": "Summary: test_totals failed on early rounding; fixed in totals.py."}])
    msg("ses_sub", "msg_05", user, [{"type": "text", "text": "Find which test is flaky."}])
    msg("ses_sub", "msg_06", assistant("msg_05", c3), [
        {"type": "step-start"}, {"type": "text", "text": "test_clock is flaky: it reads the wall clock."},
        {"type": "step-finish", "reason": "stop", "cost": 0.003, "tokens": c3}])
    con.commit()
    con.close()
    return path
