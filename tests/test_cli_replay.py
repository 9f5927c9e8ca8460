"""archive / replay / instructions through typer's CliRunner and one real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES, all_transcript_params
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode

runner = CliRunner()
CLAUDE = SAMPLES / "claude_code_session.jsonl"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXTOOL_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    for k in ("CTXTOOL_CONFIG", "CTXTOOL_SUMMARIZER_KIND", "CTXTOOL_CONTEXT_WINDOW", "CTXTOOL_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


# -- archive -----------------------------------------------------------------------------------


def test_archive_writes_file_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    r = invoke("archive", str(CLAUDE), "--cutoff", "3", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "archived 6 of 9 tool results" in r.stdout
    assert "wrote 1 transcript(s)" in r.stderr
    t = next(formats.read(out))
    assert sum(1 for m in t.messages if m.metadata.kind == "tool_result_archived") == 6
    assert t.messages[-1].metadata.kind == "tool_summary"


def test_archive_json_and_events(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    ev = tmp_path / "events.jsonl"
    r = invoke("archive", str(CLAUDE), "-n", "2", "-o", str(out), "--json", "--events", str(ev), "--strategy", "heuristic")
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    assert j["totals"]["archived_results"] == 7 and j["transcripts"][0]["visible_after"] == 2
    assert j["transcripts"][0]["strategy_used"] == "heuristic"
    lines = [json.loads(x) for x in ev.read_text().splitlines()]
    assert sum(1 for e in lines if e["event"] == "tool_result_archived") == 7
    assert lines[-1]["event"] == "tool_summary"


def test_archive_to_stdout_and_json_needs_output() -> None:
    r = invoke("archive", str(CLAUDE), "-n", "2")
    assert r.exit_code == 0
    assert r.stdout.count("\n") == CLAUDE.read_bytes().count(b"\n") + 1  # one summary line appended
    assert "archived" in r.stderr
    r = invoke("archive", str(CLAUDE), "--json")
    assert r.exit_code == ExitCode.USAGE and "-o FILE" in r.stderr


def test_archive_dry_run_and_off(tmp_path: Path) -> None:
    r = invoke("archive", str(SAMPLES / "sharegpt_dataset.json"), "-n", "1", "--dry-run", "--json")
    assert r.exit_code == 0
    assert json.loads(r.stdout)["totals"]["transcripts"] == 3
    r = invoke("archive", str(CLAUDE), "--strategy", "off", "--dry-run")
    assert "nothing archived (strategy off)" in r.stdout
    r = invoke("archive", str(CLAUDE), "--strategy", "magic")
    assert r.exit_code == ExitCode.USAGE


def test_archive_cutoff_from_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXTOOL_COMPACTION_TOOL_CALL_CUTOFF", "5")
    r = invoke("archive", str(CLAUDE), "--dry-run", "--json")
    assert json.loads(r.stdout)["transcripts"][0]["visible_after"] == 5


def test_archive_to_other_format(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    r = invoke("archive", str(CLAUDE), "-n", "2", "--to", "openai", "-o", str(out))
    assert r.exit_code == 0, r.output
    t = next(formats.read(out))
    assert t.format == "openai" and t.messages[-1].metadata.kind == "tool_summary"


# -- replay ------------------------------------------------------------------------------------


def test_replay_table_and_chart() -> None:
    r = invoke("replay", str(CLAUDE), "--context-window", "200000")  # thresholds near the context: drawn
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "8 turns" in out and "turns left" in out and "📊" in out
    assert "hard-limit" in out and "hard-stop" in out and "█" in out


def test_replay_json() -> None:
    r = invoke("replay", str(CLAUDE), "--json", "--context-window", "40000")
    assert r.exit_code == 0, r.output
    [j] = json.loads(r.stdout)["transcripts"]
    assert j["context_window"] == 40000 and j["window_source"] == "flag"
    assert j["turn_count"] == 8 and j["policies"]["hard-stop"]["first_turn"] == 2
    r = invoke("replay", str(SAMPLES / "sharegpt_dataset.json"), "--json", "--index", "1")
    [j] = json.loads(r.stdout)["transcripts"]
    assert j["transcript"].endswith("#1")


def test_replay_model_flag_and_many() -> None:
    r = invoke("replay", str(SAMPLES / "openai_chat.json"), "--model", "gpt-4o", "--json")
    [j] = json.loads(r.stdout)["transcripts"]
    assert j["window_source"] == "registry:gpt-4o"
    r = invoke("replay", str(SAMPLES / "sharegpt_dataset.json"))
    assert r.exit_code == 0 and "3 transcripts" in r.stdout
    r = invoke("replay", str(SAMPLES / "sharegpt_dataset.json"), "--index", "7")
    assert r.exit_code == ExitCode.NOT_FOUND


def test_replay_plot_files(tmp_path: Path) -> None:
    html = tmp_path / "c.html"
    r = invoke("replay", str(CLAUDE), "--plot", str(html), "--no-table", "--no-chart")
    assert r.exit_code == 0, r.output
    assert "<svg" in html.read_text() and "wrote html chart" in r.stderr
    png = tmp_path / "c.png"
    r = invoke("replay", str(CLAUDE), "--plot", str(png), "--json")
    assert r.exit_code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    json.loads(r.stdout)
    r = invoke("replay", str(CLAUDE), "--plot", str(tmp_path / "c.bmp"))
    assert r.exit_code == ExitCode.USAGE


# -- instructions ------------------------------------------------------------------------------


def _tree(tmp_path: Path) -> Path:
    cfg = tmp_path / "cfg"
    cfg.mkdir(exist_ok=True)
    (cfg / "AGENTS.md").write_text("GLOBAL\n")
    proj = tmp_path / "proj"
    work = proj / "sub"
    work.mkdir(parents=True)
    (proj / "pyproject.toml").write_text("[project]\nname='x'\n")
    (proj / "AGENTS.md").write_text("PROJECT\n")
    (work / "AGENTS.md").write_text("WORK ✓\n")
    return work


def test_instructions_report_print_json(tmp_path: Path) -> None:
    work = _tree(tmp_path)
    r = invoke("instructions", str(work))
    assert r.exit_code == 0, r.output
    assert "merged: 3 source(s)" in r.stdout and "project root" in r.stdout
    r = invoke("instructions", str(work), "--print")
    assert r.stdout == "GLOBAL\n\nPROJECT\n\nWORK ✓\n"
    r = invoke("instructions", str(work), "--json", "--max-bytes", "12")
    j = json.loads(r.stdout)
    assert j["truncated"] and j["bytes"] <= 12 and j["merged"] == "GLOBAL\n\nPROJ"
    out = tmp_path / "merged.md"
    r = invoke("instructions", str(work), "-o", str(out))
    assert out.read_text() == "GLOBAL\n\nPROJECT\n\nWORK ✓\n"


def test_instructions_default_dir_and_missing(tmp_path: Path) -> None:
    work = _tree(tmp_path)
    import os

    os.chdir(work)
    r = invoke("instructions", "--json")
    assert json.loads(r.stdout)["num_sources"] == 3
    r = invoke("instructions", str(tmp_path / "nope"))
    assert r.exit_code == ExitCode.NOT_FOUND


# -- a real process ----------------------------------------------------------------------------


def test_subprocess_replay_and_archive(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "CTXTOOL_CONFIG_DIR": str(tmp_path / "cfg"), "HOME": str(tmp_path)}
    p = subprocess.run(
        [sys.executable, "-m", "ctxtool", "replay", str(CLAUDE), "--json"],
        capture_output=True, cwd=ROOT, env=env, timeout=120, check=False,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["transcripts"][0]["turn_count"] == 8
    out = tmp_path / "a.jsonl"
    p = subprocess.run(
        [sys.executable, "-m", "ctxtool", "archive", str(CLAUDE), "-n", "1", "-o", str(out)],
        capture_output=True, cwd=ROOT, env=env, timeout=120, check=False,
    )
    assert p.returncode == 0, p.stderr
    assert b"archived 8 of 9" in p.stdout and out.exists()


# -- every sample and corpus file through every command --------------------------------------------


@pytest.mark.parametrize("path", all_transcript_params())
def test_every_file_every_command(path: Path, tmp_path: Path) -> None:
    out = tmp_path / ("archived" + path.suffix)
    r = invoke("archive", str(path), "-n", "2", "-o", str(out), "--json")
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    assert all(x["visible_after"] <= 2 for x in j["transcripts"])
    assert len(list(formats.read(out))) == j["totals"]["transcripts"]
    r = invoke("replay", str(path), "--json")
    assert r.exit_code == 0, r.output
    reps = json.loads(r.stdout)["transcripts"]
    assert len(reps) == j["totals"]["transcripts"]
    r = invoke("replay", str(out), "--no-table", "--index", "0")
    assert r.exit_code == 0, r.output
    r = invoke("instructions", str(path.parent), "--json")
    assert r.exit_code == 0, r.output
