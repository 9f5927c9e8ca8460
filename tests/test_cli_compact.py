"""ctxtool compact through typer's CliRunner, the command summarizer, and a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_compact import write_chat, write_dataset
from typer.testing import CliRunner

from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.summarizers import prompt as sp

runner = CliRunner()


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, [str(a) for a in args])


def test_help_lists_the_options() -> None:
    r = invoke("compact", "--help")
    assert r.exit_code == 0
    for opt in ("--keep-recent-tokens", "--layout", "--retain-last-turns", "--summary-directive", "--retain-directive",
                "--instructions", "--summarizer", "--fallback", "--events", "--dry-run", "--jobs", "--cache-dir",
                "--on-error", "--force", "--to", "--json"):
        assert opt in r.output


def test_compact_writes_output_and_reports(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    out = tmp_path / "o.json"
    ev = tmp_path / "ev.jsonl"
    r = invoke("compact", src, "-o", out, "--force", "--keep-recent-tokens", "400", "--events", ev)
    assert r.exit_code == 0, r.output
    assert "compacted" in r.stdout and "ratio" in r.stdout and f"wrote {out}" in r.stdout
    msgs = json.loads(out.read_text())
    assert msgs[1]["content"].startswith(sp.SUMMARY_PREFIX)
    kinds = [json.loads(x)["event"] for x in ev.read_text().splitlines()]
    assert kinds == ["compaction_start", "compaction_end", "compaction"]


def test_json_report(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=2)
    r = invoke("compact", src, "-o", tmp_path / "o.jsonl", "--force", "--keep-recent-tokens", "400", "--json", "--jobs", "2")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["totals"]["compacted"] == 2 and rep["totals"]["ratio"] > 1 and len(rep["transcripts"]) == 2
    for rec in rep["transcripts"]:
        assert rec["status"] == "compacted" and rec["tokens_after"] < rec["tokens_before"] and rec["ratio"] > 1


def test_transcript_to_stdout_report_to_stderr(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    r = invoke("compact", src, "--force", "--keep-recent-tokens", "400")
    assert r.exit_code == 0
    assert json.loads(r.stdout)[1]["content"].startswith(sp.SUMMARY_PREFIX)
    assert "compacted" in r.stderr


def test_nothing_to_do_exits_zero(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=2, filler=100)
    r = invoke("compact", src, "-o", tmp_path / "o.json")
    assert r.exit_code == 0 and "nothing to do" in r.stdout


def test_dry_run_prints_the_plan(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    r = invoke("compact", src, "-o", tmp_path / "o.json", "--force", "--keep-recent-tokens", "400", "--dry-run")
    assert r.exit_code == 0
    assert "would compact" in r.stdout and "summary prompt" in r.stdout
    assert not (tmp_path / "o.json").exists()


def test_layouts_and_directives(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    out = tmp_path / "o.json"
    r = invoke("compact", src, "-o", out, "--force", "--layout", "retain", "--retain-last-turns", "1",
               "--retain-directive", "error messages", "--retain-directive", "ticket ids",
               "--summary-directive", "mention the CLI flags", "--instructions", "the parser")
    assert r.exit_code == 0, r.output
    msgs = json.loads(out.read_text())
    assert "<retain>" in msgs[1]["content"] and "ticket ids" in msgs[1]["content"]
    assert "Keep in mind: mention the CLI flags" in msgs[2]["content"]
    assert "Summary focus requested: the parser" in msgs[2]["content"]
    r = invoke("compact", src, "-o", tmp_path / "i.json", "--force", "--layout", "initial")
    assert r.exit_code == 0
    assert json.loads((tmp_path / "i.json").read_text())[1] == json.loads(src.read_text())[1]


def test_to_other_format(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    out = tmp_path / "o.jsonl"
    r = invoke("compact", src, "-o", out, "--force", "--keep-recent-tokens", "400", "--to", "ctxtool")
    assert r.exit_code == 0, r.output
    types = [json.loads(x)["type"] for x in out.read_text().splitlines()]
    assert types.count("compaction") == 1 and types[0] == "transcript"
    assert invoke("validate", out).exit_code == 0


def test_errors_have_exit_codes(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    r = invoke("compact", src, "-o", src, "--force")
    assert r.exit_code == ExitCode.USAGE and "overwrite the input" in r.stderr
    r = invoke("compact", src, "--json", "--force")
    assert r.exit_code == ExitCode.USAGE
    r = invoke("compact", tmp_path / "missing.json", "-o", tmp_path / "o.json")
    assert r.exit_code == ExitCode.NOT_FOUND
    small = write_chat(tmp_path / "s.json", turns=2, filler=30)
    r = invoke("compact", small, "-o", tmp_path / "o.json", "--force", "--keep-recent-tokens", "60")
    assert r.exit_code == 0 and "left unchanged" in r.stdout and "not be smaller" in r.stdout  # not a failure
    assert (tmp_path / "o.json").read_bytes() == small.read_bytes() or "compaction" not in (tmp_path / "o.json").read_text()
    r = invoke("compact", small, "-o", tmp_path / "o.json", "--force", "--keep-recent-tokens", "60", "--fallback")
    assert r.exit_code == 0 and "fallback summary" in r.stdout


SCRIPT = """
import sys
data = sys.stdin.read()
if "src/app_r1.py" in data:
    sys.exit(3)
print("## Goal\\nsummarized by a command")
"""


def test_command_summarizer_cache_and_on_error(tmp_path: Path) -> None:
    script = tmp_path / "summ.py"
    script.write_text(SCRIPT)
    src = write_dataset(tmp_path / "d.jsonl", n=3)
    cmd = f"{sys.executable} {script}"
    common = ["compact", src, "--force", "--keep-recent-tokens", "400", "--summarizer", "command", "--command", cmd,
              "--cache-dir", tmp_path / "cache", "--json"]
    r = invoke(*common, "-o", tmp_path / "o.jsonl")
    assert r.exit_code == ExitCode.REMOTE and not (tmp_path / "o.jsonl").exists()
    r = invoke(*common, "-o", tmp_path / "o.jsonl", "--on-error", "skip")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert [x["status"] for x in rep["transcripts"]] == ["compacted", "error", "compacted"]
    assert rep["totals"]["cache_hits"] == 1  # the first run stopped at record 1: record 0 was cached
    assert "left unchanged" in r.stderr
    out = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert "summarized by a command" in out[0]["messages"][1]["content"]


def test_real_subprocess(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    out = tmp_path / "o.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ctxtool", "compact", str(src), "-o", str(out), "--force", "--keep-recent-tokens", "400", "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["totals"]["compacted"] == 1
    assert json.loads(out.read_text())[1]["content"].startswith(sp.SUMMARY_PREFIX)
