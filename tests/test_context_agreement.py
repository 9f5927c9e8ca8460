"""One transcript, one answer: stats, check, compact's plan and replay report the same window and the same
context tokens on every sample and corpus file, through the library and through --json;
check after compact reflects the compacted context."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, all_transcript_params
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.compaction.plan import plan_compaction
from ctxtool.compaction.settings import CompactOptions
from ctxtool.config import Config
from ctxtool.policies.check import check_transcript
from ctxtool.replay import core as replay
from ctxtool.stats.files import stats_files
from ctxtool.tokens import models as registry

runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_project_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def _items(d: Any) -> list[dict[str, Any]]:
    """The per-transcript objects of a --json output (a list, an object with ``transcripts``,
    or one transcript's object)."""
    if isinstance(d, list):
        return d
    return d["transcripts"] if "transcripts" in d else [d]


def _cli_json(*args: str) -> Any:
    r = runner.invoke(app, list(args))
    assert r.exit_code in (0, ExitCode.THRESHOLD), r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("path", all_transcript_params())
def test_stats_check_replay_agree(path: Path) -> None:
    cfg = Config()
    st = stats_files([str(path)], settings=cfg, workers=1)
    checks = [check_transcript(t, context=cfg) for t in formats.read(path)]
    reps = replay.replay_file(path, cfg=cfg)
    plans = [plan_compaction(t, CompactOptions.from_config(cfg)) for t in formats.read(path)]
    assert len(st.transcripts) == len(checks) == len(reps) == len(plans) > 0
    for s, c, r, p in zip(st.transcripts, checks, reps, plans, strict=True):
        assert r.context is not None
        assert s.context_window == c.context.window == r.window == r.context.window == p.window
        assert s.context_tokens == c.context.tokens == r.context.tokens == p.context_tokens
    # the same through the CLI
    sj = _items(_cli_json("stats", str(path), "--json"))
    cj = _items(_cli_json("check", str(path), "--json"))
    rj = _items(_cli_json("replay", str(path), "--json", "--no-chart", "--no-table"))
    for s, c, r, lib in zip(sj, cj, rj, checks, strict=True):
        assert s["context"]["window"] == c["context_window"] == r["context_window"] == lib.context.window
        assert s["context"]["tokens"] == c["used_tokens"] == r["context"]["tokens"] == lib.context.tokens


def test_claude_code_sample_uses_its_models_window() -> None:
    r = runner.invoke(app, ["check", str(SAMPLES / "claude_code_session.jsonl"), "--json"])
    assert r.exit_code == 0, r.output
    d = _items(json.loads(r.stdout))[0]
    # litellm lists the model at 1,000,000 tokens; Claude Code runs it with 200,000 without the [1m] suffix
    want = registry.lookup("claude-opus-4-6")
    assert want is not None and want.context_window == 1_000_000 and d["context_window"] == 200_000
    assert d["window_source"] == "claude-code:no [1m] suffix"
    assert d["compact"] is False and d["percent"] < 20


@pytest.mark.parametrize("name", ["claude_code_session.jsonl", "codex_rollout.jsonl", "openai_chat.json"])
def test_check_after_compact_settles(name: str, tmp_path: Path) -> None:
    src = SAMPLES / name
    tokens = _items(_cli_json("check", str(src), "--json"))[0]["used_tokens"]
    window = str(tokens + 16_384 - 500)  # the default seed000 policy fires
    assert runner.invoke(app, ["check", str(src), "--context-window", window]).exit_code == ExitCode.THRESHOLD
    out = tmp_path / name
    r = runner.invoke(app, ["compact", str(src), "-o", str(out), "--context-window", window,
                            "--keep-recent-tokens", "500"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["check", str(out), "--context-window", window, "--json"])
    assert r.exit_code == 0, r.output
    after = _items(json.loads(r.stdout))[0]
    assert after["used_tokens"] < tokens and after["context"]["boundary"] is not None


def test_settings_are_honoured_by_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(SAMPLES / "claude_code_session.jsonl")
    monkeypatch.setenv("CTXTOOL_CONTEXT_WARNING_CHARS", "1000")
    monkeypatch.setenv("CTXTOOL_COMPACTION_ENABLED", "false")
    monkeypatch.setenv("CTXTOOL_COMPACTION_COMPACT_THRESHOLD", "0.1")
    s = _cli_json("stats", path, "--json")
    assert s["thresholds"]["warning_chars"] == 1000 and _items(s)[0]["threshold"] == "warning"
    c = _items(_cli_json("check", path, "--json"))[0]
    assert c["verdicts"]["effective-limit"]["status"] == "disabled" and c["verdicts"]["chars"]["status"] == "warning"
    assert c["verdicts"]["hard-stop"]["status"] == "disabled"  # would compact at 10%, but compaction is off
    r = _items(_cli_json("replay", path, "--json", "--no-chart", "--no-table"))[0]
    assert "effective-limit" not in r["policies"] and "hard-stop" not in r["policies"]
    assert r["policies"]["chars-warning"]["value"] == 1000 and r["policies"]["chars-warning"]["first_turn"]


SESSIONS = [p for p in all_transcript_params() if p.values[0].parent.name in ("claude_code", "codex", "pi")]


@pytest.mark.parametrize("path", SESSIONS)
def test_check_after_compact_on_the_corpus(path: Path, tmp_path: Path) -> None:
    """Whenever compact cuts a session, check on its output no longer asks for compaction
    (the usage recorded before the boundary, and on the messages it kept, is not trusted)."""
    from ctxtool.compaction.run import compact_file
    from ctxtool.compaction.settings import CompactOptions

    before = _items(_cli_json("check", str(path), "--json"))[0]["used_tokens"]
    window = before + 16_384 - 500
    out = tmp_path / path.name
    rep = compact_file(path, out, options=CompactOptions(context_window=window))
    if rep.records[0].status != "compacted":
        pytest.skip(f"compact did not cut: {rep.records[0].reason}")
    r = runner.invoke(app, ["check", str(out), "--context-window", str(window), "--json"])
    assert r.exit_code == 0, r.output
    assert _items(json.loads(r.stdout))[0]["used_tokens"] < window - 16_384
