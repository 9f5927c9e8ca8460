"""ctxtool compactions: the compactions of real sessions, and a hand-built session with a
compaction loop and files read again (known answers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import corpus_file
from typer.testing import CliRunner

from ctxtool.cli import app
from ctxtool.formats import read_all
from ctxtool.stats.compactions import compactions, transcript_compactions

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

SID = "5f0c9a2e-0000-4000-8000-000000000001"


class Session:
    """Claude Code lines, written one by one."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.n = 0
        self.parent: str | None = None

    def _base(self, ts: str) -> dict[str, Any]:
        self.n += 1
        uid = f"00000000-0000-4000-8000-{self.n:012d}"
        d = {"parentUuid": self.parent, "isSidechain": False, "userType": "external", "cwd": "/w",
             "sessionId": SID, "version": "2.1.39", "uuid": uid, "timestamp": f"2026-03-04T10:{ts}.000Z"}
        self.parent = uid
        return d

    def user(self, ts: str, text: str, **kw: Any) -> None:
        self.lines.append({**self._base(ts), "type": "user", "message": {"role": "user", "content": text}, **kw})

    def result(self, ts: str, call: str, text: str) -> None:
        content = [{"type": "tool_result", "tool_use_id": call, "content": text}]
        self.lines.append({**self._base(ts), "type": "user", "message": {"role": "user", "content": content}})

    def assistant(self, ts: str, context: int, *, read: str | None = None, edit: str | None = None,
                  text: str = "ok") -> str:
        call = f"toolu_{self.n + 1:04d}"
        if read:
            content: list[dict[str, Any]] = [{"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": read}}]
        elif edit:
            content = [{"type": "tool_use", "id": call, "name": "Edit",
                        "input": {"file_path": edit, "old_string": "a", "new_string": "b"}}]
        else:
            content = [{"type": "text", "text": text}]
        usage = {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": context - 20,
                 "output_tokens": 10}
        msg = {"model": "claude-opus-4-6", "id": f"msg_{self.n + 1:04d}", "type": "message", "role": "assistant",
               "content": content, "stop_reason": "tool_use" if read or edit else "end_turn", "usage": usage}
        self.lines.append({**self._base(ts), "type": "assistant", "message": msg, "requestId": f"req_{self.n + 1}"})
        return call

    def boundary(self, ts: str, trigger: str, pre: int) -> None:
        self.lines.append({**self._base(ts), "parentUuid": None, "type": "system", "subtype": "compact_boundary",
                           "content": "Conversation compacted", "isMeta": False, "level": "info",
                           "compactMetadata": {"trigger": trigger, "preTokens": pre}})
        self.user(ts, "This session is being continued from a previous conversation. Summary: ...",
                  isCompactSummary=True, isVisibleInTranscriptOnly=True)

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(x) + "\n" for x in self.lines), "utf-8")
        return path


def looping_session(tmp: Path) -> Path:
    s = Session()
    s.user("00:00", "fix the bug in a.py")
    s.result("00:02", s.assistant("00:01", 1000, read="/w/a.py"), "a = 1\n" * 50)
    s.result("00:04", s.assistant("00:03", 2000, read="/w/b.py"), "b = 2\n" * 50)
    s.result("00:06", s.assistant("00:05", 3000, edit="/w/c.py"), "edited")
    s.assistant("00:07", 3500, text="reading done")
    s.boundary("05:00", "auto", 150_000)  # compaction 1: 4 turns in, nothing earlier
    s.result("05:02", s.assistant("05:01", 20_000, read="/w/a.py"), "a = 1\n" * 50)  # read again
    s.result("05:04", s.assistant("05:03", 21_000, edit="/w/b.py"), "edited")
    s.result("05:06", s.assistant("05:05", 22_000, read="/w/b.py"), "b = 3\n" * 50)  # modified first: not a re-read
    s.result("05:08", s.assistant("05:07", 23_000, read="/w/c.py"), "c")  # c.py was only edited before
    s.boundary("07:00", "auto", 151_000)  # compaction 2: 4 turns and 2 minutes later: a loop
    s.result("07:02", s.assistant("07:01", 30_000, read="/w/b.py"), "b = 3\n" * 50)  # read again
    s.result("07:04", s.assistant("07:03", 31_000, read="/w/a.py"), "a = 1\n" * 50)  # read again
    s.assistant("07:05", 32_000, text="done")
    s.user("30:00", "/compact")
    s.boundary("30:01", "manual", 40_000)  # compaction 3: 3 turns, 23 minutes: a loop by turns only
    s.assistant("59:00", 5_000, text="hello again")
    return s.write(tmp / "loop.jsonl")


def test_hand_built_session_known_answers(tmp_path: Path) -> None:
    (t,) = read_all(looping_session(tmp_path))
    r = transcript_compactions(t, loop_turns=3, loop_minutes=5)
    assert r.turns == 12 and r.format == "claude-code"
    got = [(c.number, c.kind, c.trigger, c.tokens_before, c.tokens_before_source, c.tokens_after,
            c.tokens_after_source, c.turns_since, c.minutes_since, c.loop, c.reread) for c in r.compactions]
    assert got == [
        (1, "boundary", "auto", 150_000, "recorded", 20_000, "usage", 4, None, False, ("/w/a.py",)),
        (2, "boundary", "auto", 151_000, "recorded", 30_000, "usage", 4, 2.0, True, ("/w/b.py", "/w/a.py")),
        (3, "boundary", "manual", 40_000, "recorded", 5_000, "usage", 3, 23.02, True, ()),
    ]
    assert r.compactions[0].timestamp == "2026-03-04T10:05:00.000Z"
    assert r.compactions[0].freed == 130_000
    assert r.loops == 2 and r.reread == 3
    # a stricter rule: no loop by turns, the 2-minute gap still is one
    strict = transcript_compactions(t, loop_turns=0, loop_minutes=5)
    assert [c.loop for c in strict.compactions] == [False, True, False]


def test_cli_json_and_text(tmp_path: Path) -> None:
    p = looping_session(tmp_path)
    r = runner.invoke(app, ["compactions", str(p), "--loop-turns", "3", "--loop-minutes", "5", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["loop_turns"], d["loop_minutes"]) == (3, 5.0)
    assert d["totals"] == {"transcripts": 1, "with_compactions": 1, "compactions": 3, "auto": 2, "manual": 1,
                           "loops": 2, "reread_files": 3}
    assert [c["reread"] for c in d["transcripts"][0]["compactions"]] == [["/w/a.py"], ["/w/b.py", "/w/a.py"], []]
    text = runner.invoke(app, ["compactions", str(p), "--loop-turns", "3", "--loop-minutes", "5"])
    assert text.exit_code == 0
    assert "LOOP" in text.stdout and "read again after #2: /w/b.py, /w/a.py" in text.stdout
    assert "3 compaction(s) in 1 of 1 transcript(s)" in text.stdout


def test_corpus_compactions() -> None:
    files = [corpus_file("claude_code", "codemie_session-624a4a58.jsonl"), corpus_file("claude_code", "spotter_ae4a77f8_main.jsonl"),
             corpus_file("pi", "pi_before-compaction.jsonl"),
             corpus_file("codex", "localpush_redacted_rollout-2026-02-23T12-54-34-019c8a59.jsonl"),
             corpus_file("codex", "codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl")]
    rep = compactions(files)
    by = {Path(t.path).name: t.compactions for t in rep.transcripts}
    cc = by["codemie_session-624a4a58.jsonl"]
    assert [(c.kind, c.trigger, c.tokens_before, c.timestamp) for c in cc] == [
        ("boundary", "auto", 155_979, "2026-01-07T20:58:27.907Z")]
    assert cc[0].tokens_after is not None and cc[0].tokens_after < 60_000 and cc[0].tokens_after_source == "usage"
    assert [(c.trigger, c.tokens_before) for c in by["spotter_ae4a77f8_main.jsonl"]] == [("manual", 142_431)]
    pi = by["pi_before-compaction.jsonl"]
    assert [(c.kind, c.tokens_before) for c in pi] == [("compaction", 175_004), ("compaction", 185_014)]
    assert pi[1].minutes_since == 31.45 and not pi[1].loop
    assert all(c.tokens_after is not None and c.tokens_after < c.tokens_before for c in pi)  # type: ignore[operator]
    cx = by["localpush_redacted_rollout-2026-02-23T12-54-34-019c8a59.jsonl"]
    assert [(c.kind, c.trigger, c.line) for c in cx] == [("compacted", None, 1788)]
    assert cx[0].tokens_before_source == "usage"
    assert by["codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl"] == ()
    assert rep.totals["compactions"] == 5 and rep.totals["loops"] == 0


def test_ctxtool_summary_counts_once(tmp_path: Path) -> None:
    """A summary ctxtool wrote (compact) is one compaction, of kind summary."""
    out = tmp_path / "c.jsonl"
    src = ROOT / "samples" / "claude_code_session.jsonl"
    r = runner.invoke(app, ["compact", str(src), "-o", str(out), "--force", "--keep-recent-tokens", "300"],
                      env={"CTXTOOL_CACHE_DIR": str(tmp_path / "cache")})
    assert r.exit_code == 0, r.output
    (t,) = read_all(out)
    cs = transcript_compactions(t).compactions
    assert len(cs) == 1 and cs[0].kind in ("summary", "boundary")
