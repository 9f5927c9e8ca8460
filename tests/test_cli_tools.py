"""The truncate / restore / trim / refs commands, through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxtool.cli import app

BIG = "\n".join(f"log line {i} " + "é" * 20 for i in range(3000))


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    return cache


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    rows = [
        {"role": "user", "content": "build it"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"make\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": BIG},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "x" * 30_000},
        {"role": "assistant", "content": "done"},
    ]
    p = tmp_path / "chat.jsonl"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return p


def run(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


def test_truncate_restore_roundtrip(env: Path, chat: Path, tmp_path: Path) -> None:
    out = tmp_path / "short.jsonl"
    r = run("truncate", str(chat), "-o", str(out), "--preset", "head-tail", "--events", "ev.jsonl", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)["totals"]
    assert rep["truncated"] == 2 and rep["bytes_saved"] > 0 and rep["tokens_saved"] > 0
    assert out.stat().st_size < chat.stat().st_size
    events = [json.loads(x) for x in (tmp_path / "ev.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["truncate", "truncate"]
    assert {"message_id", "tool", "bytes_before", "bytes_after", "ref"} <= set(events[0]) | {"message_id"}
    assert events[0]["tool"] == "bash"
    back = tmp_path / "back.jsonl"
    r = run("restore", str(out), "-o", str(back))
    assert r.exit_code == 0, r.output
    assert back.read_bytes() == chat.read_bytes()
    assert chat.read_text(encoding="utf-8").count("log line") == 3000  # input untouched


def test_truncate_flags_and_spill(env: Path, chat: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    r = run("truncate", str(chat), "-o", str(out), "--spill-threshold", "20000", "--max-lines", "10", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)["totals"]
    assert rep["spilled"] == 2  # both outputs exceed 20,000 characters
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert "too large for the context" in rows[2]["content"]
    assert rows[2]["ctxtool"]["output_ref"]["line_count"] == 3000
    r = run("truncate", str(chat), "-o", str(out), "--head-lines", "2", "--tail-lines", "3", "--max-bytes", "0", "--json")
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    view = rows[2]["content"].split("\n")
    assert view[:2] == ["log line 0 " + "é" * 20, "log line 1 " + "é" * 20]
    assert view[2] == "[... omitted 2,995 of 3,000 lines ...]"
    assert view[5] == "log line 2999 " + "é" * 20


def test_truncate_to_stdout_reports_on_stderr(env: Path, chat: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "ctxtool", "truncate", str(chat), "--preset", "head-tail"],
        capture_output=True,
        env={**os.environ, "CTXTOOL_CACHE_DIR": str(env)},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(rows) == 6 and "[... omitted" in rows[2]["content"]
    assert b"truncate: 1 transcript" in r.stderr


def test_refs_commands(env: Path, chat: Path, tmp_path: Path) -> None:
    out = tmp_path / "short.jsonl"
    assert run("truncate", str(chat), "-o", str(out), "--preset", "head-tail").exit_code == 0
    ref = json.loads(out.read_text().splitlines()[2])["ctxtool"]["output_ref"]["id"]
    r = run("refs", "show", ref[:12], "--offset", "2", "--limit", "2")
    assert r.exit_code == 0, r.output
    assert r.stdout == "     2\tlog line 1 " + "é" * 20 + "\n     3\tlog line 2 " + "é" * 20 + "\n"
    r = run("refs", "show", ref, "--offset", "3000", "--json")
    assert json.loads(r.stdout)["lines"] == [{"n": 3000, "text": "log line 2999 " + "é" * 20}]
    r = run("refs", "grep", ref, "line 1500 ", "-C", "1")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == [
        f"{ref[:12]}-1500-log line 1499 " + "é" * 20,
        f"{ref[:12]}:1501:log line 1500 " + "é" * 20,
        f"{ref[:12]}-1502-log line 1501 " + "é" * 20,
    ]
    r = run("refs", "grep", "xxxxx", "--all", "--json")
    assert json.loads(r.stdout)["match_count"] == 1
    r = run("refs", "ls", "--json")
    refs = json.loads(r.stdout)["refs"]
    assert {x["kind"] for x in refs} == {"output", "source"}
    assert any(s.get("tool") == "bash" for x in refs for s in x["sources"])
    r = run("refs", "verify", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["clean"]
    # gc: everything is referenced by the truncated file; nothing by the original
    r = run("refs", "gc", str(out), "--json")
    assert json.loads(r.stdout)["deleted_count"] == 0
    r = run("refs", "gc", str(chat))
    assert r.exit_code == 0 and "would delete" in r.stdout
    assert len(list((env / "refs").iterdir())) == len(refs) == 3  # 2 outputs + 1 stash pack of 2 messages
    r = run("refs", "gc", str(chat), "--yes", "--json")
    assert json.loads(r.stdout)["deleted_count"] == 3
    assert list((env / "refs").iterdir()) == []


def test_ref_errors_are_one_line(env: Path, chat: Path, tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "ctxtool", "refs", "show", "../../etc/passwd"],
        capture_output=True, text=True, env={**os.environ, "CTXTOOL_CACHE_DIR": str(env)}, timeout=60,
    )
    assert r.returncode == 3 and "invalid ref" in r.stderr and "Traceback" not in r.stderr
    out = tmp_path / "short.jsonl"
    assert run("truncate", str(chat), "-o", str(out), "--preset", "head-tail").exit_code == 0
    ref = json.loads(out.read_text().splitlines()[2])["ctxtool"]["output_ref"]["id"]
    (env / "refs" / ref).write_text("tampered")
    r = run("refs", "show", ref)
    assert r.exit_code == 3 and "corrupted" in r.output
    r = run("refs", "verify")
    assert r.exit_code == 4 and "CORRUPTED" in r.stdout
    r = run("restore", str(out), "-o", str(tmp_path / "back.jsonl"))
    assert r.exit_code == 3 and "corrupted" in r.output
    assert run("refs", "show", "0" * 64).exit_code == 7


def test_trim_command(env: Path, chat: Path, tmp_path: Path) -> None:
    out = tmp_path / "trim.jsonl"
    r = run("trim", str(chat), "--budget", "1000", "-o", str(out), "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["budget"] == 1000
    rep = rep["totals"]
    assert rep["trimmed"] == 1 and rep["tokens_after"] < rep["tokens_before"]
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows[2]["content"].startswith("[tool output trimmed; ref=")
    assert rows[4]["content"] == "x" * 30_000  # the newest is kept
    r = run("trim", str(chat), "-o", str(out))
    assert r.exit_code == 2 and "--budget" in r.output
    r = run("trim", str(chat), "--context-window", "200000", "-o", str(out), "--json")
    assert json.loads(r.stdout)["budget"] == 50_000
    back = tmp_path / "back.jsonl"
    run("trim", str(chat), "--budget", "10", "-o", str(out))
    assert run("restore", str(out), "-o", str(back)).exit_code == 0
    assert back.read_bytes() == chat.read_bytes()


def test_usage_errors(env: Path, chat: Path) -> None:
    assert run("truncate", str(chat), "-o", str(chat)).exit_code == 2
    assert run("truncate", str(chat), "--preset", "seed999").exit_code == 2
    assert run("truncate", str(chat), "--mode", "middle").exit_code == 2
    assert run("truncate", str(chat), "--include", "videos").exit_code == 2
    assert run("refs", "grep", "only-pattern").exit_code == 2
    assert run("truncate", "nope.jsonl", "-o", "x.jsonl").exit_code == 7


def test_refs_group_lists_only_its_commands() -> None:
    r = run("refs", "--help")
    assert r.exit_code == 0
    listed = [ln.split()[0] for ln in r.stdout.split("Commands:")[1].splitlines() if ln.startswith("  ")]
    assert listed == ["show", "grep", "ls", "verify", "gc"]


# -- issue 10 items 7 and 9, issue 11 (trim's window) ------------------------------------


def _ctxtool(args: list[str], cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CTXTOOL_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "ctxtool", *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_skipped_records_are_reported_on_stderr_only(tmp_path: Path) -> None:
    rec = {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": BIG},
        {"role": "assistant", "content": "done"},
    ]}
    src = tmp_path / "ds.jsonl"
    src.write_text(json.dumps(rec) + "\n{not json\n" + json.dumps(rec) + "\n")
    cache = tmp_path / "c"
    runs = {
        "truncate": ["truncate", str(src), "--max-lines", "10", "-o", "t.jsonl", "--on-error", "skip"],
        "trim": ["trim", str(src), "--budget", "10", "-o", "m.jsonl", "--on-error", "skip"],
    }
    for name, args in runs.items():
        r = _ctxtool(args, cache, tmp_path)
        assert r.returncode == 0, r.stderr
        assert "unreadable" not in r.stdout and f"{name}: 2 transcripts" in r.stdout
        assert "skipped 1 unreadable record(s)" in r.stderr and ":2:" in r.stderr
    (tmp_path / "t2.jsonl").write_text((tmp_path / "t.jsonl").read_text() + "{not json\n")
    r = _ctxtool(["restore", "t2.jsonl", "-o", "back.jsonl", "--on-error", "skip"], cache, tmp_path)
    assert r.returncode == 0 and "unreadable" not in r.stdout and "skipped 1 unreadable" in r.stderr
    assert "2 messages restored" in r.stdout


@pytest.mark.parametrize("bad", [5, None, [1, 2], "text"])
def test_restore_reports_an_output_ref_that_is_not_an_object(chat: Path, env: Path, tmp_path: Path, bad: object) -> None:
    short = tmp_path / "short.jsonl"
    assert CliRunner().invoke(app, ["truncate", str(chat), "-o", str(short)]).exit_code == 0
    lines = short.read_text().splitlines()
    row = json.loads(lines[2])
    row["ctxtool"]["output_ref"] = bad
    lines[2] = json.dumps(row)
    short.write_text("\n".join(lines) + "\n")
    r = _ctxtool(["restore", str(short), "-o", str(tmp_path / "back.jsonl")], env, tmp_path)
    assert r.returncode == 3 and r.stdout == ""
    assert r.stderr.startswith(f"ctxtool: error: {short}:3: output_ref must be an object") and r.stderr.count("\n") == 1
    r = _ctxtool(["restore", str(short), "-o", str(tmp_path / "back.jsonl"), "--on-error", "skip"], env, tmp_path)
    assert r.returncode == 0 and f"{short}:3: output_ref must be an object" in r.stderr
    assert "0 messages restored" in r.stdout and json.loads((tmp_path / "back.jsonl").read_text().splitlines()[2]) == row


@pytest.mark.parametrize("ref", ["nothex", "../../etc/passwd", 7, None])
def test_a_bad_ref_id_in_a_transcript_is_bad_input(chat: Path, env: Path, tmp_path: Path, ref: object) -> None:
    short = tmp_path / "short.jsonl"
    assert CliRunner().invoke(app, ["truncate", str(chat), "-o", str(short)]).exit_code == 0
    lines = short.read_text().splitlines()
    row = json.loads(lines[2])
    row["ctxtool"]["source_ref"] = ref
    lines[2] = json.dumps(row)
    short.write_text("\n".join(lines) + "\n")
    r = _ctxtool(["restore", str(short), "-o", str(tmp_path / "back.jsonl")], env, tmp_path)
    assert r.returncode == 3, r.stderr
    assert r.stderr.startswith(f"ctxtool: error: {short}:3: ") and r.stderr.count("\n") == 1


def test_trim_takes_the_window_from_the_transcripts_model(env: Path, tmp_path: Path) -> None:
    from ctxtool.tool_outputs import files as tools_ops

    sample = Path(__file__).resolve().parent.parent / "samples" / "claude_code_session.jsonl"
    r = CliRunner().invoke(app, ["trim", str(sample), "-o", str(tmp_path / "t.jsonl"), "--json"])
    assert r.exit_code == 0, r.output
    from ctxtool.tokens import models as registry

    info = registry.lookup("claude-opus-4-6")  # the recorded model: litellm's 1,000,000, Claude Code's 200,000 without [1m]
    assert info is not None and info.context_window == 1_000_000
    want = min(max(200_000 // 4, 20_000), 60_000)  # clamp(window x 0.25, 20k, 60k)
    assert json.loads(r.stdout)["budget"] == want
    rep = tools_ops.trim_file(str(sample), None, cache=env)
    assert rep.budget == want
    r = CliRunner().invoke(app, ["trim", str(sample), "-o", str(tmp_path / "t2.jsonl"), "--json", "--model", "claude-sonnet-4-5"])
    assert json.loads(r.stdout)["budget"] == 50_000  # clamp(200,000 x 0.25, 20k, 60k)
    chat = tmp_path / "nomodel.jsonl"
    chat.write_text(json.dumps({"role": "user", "content": "hi"}) + "\n")
    r = CliRunner().invoke(app, ["trim", str(chat), "-o", str(tmp_path / "x.jsonl")])
    assert r.exit_code == 2 and "no context window known" in r.output
