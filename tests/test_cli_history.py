"""cut / check / window / repair / config through typer's CliRunner, a real subprocess,
and every corpus file through every command."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import SAMPLES, all_transcript_params
from typer.testing import CliRunner

from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.errors import CtxtoolError

runner = CliRunner()


def invoke(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), input=input)


def one(out: str) -> dict:  # type: ignore[type-arg]
    """The only transcript of a --json report (every report lists its transcripts)."""
    ts = json.loads(out)["transcripts"]
    assert len(ts) == 1
    return ts[0]


def call(cid: str, name: str = "bash") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


CHAT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the failing test in utils.py " + "please " * 200},
    {"role": "assistant", "content": None, "tool_calls": [call("c1", "read"), call("c2", "grep")]},
    {"role": "tool", "tool_call_id": "c1", "content": "def add(a, b):\n    return a - b\n" * 100},
    {"role": "tool", "tool_call_id": "c2", "content": "utils.py:2"},
    {"role": "assistant", "content": "The add function subtracts; fixing it." * 20},
    {"role": "user", "content": "Now run the tests " * 50},
    {"role": "assistant", "content": "running", "tool_calls": [call("c3")]},
    {"role": "tool", "tool_call_id": "c3", "content": "1 passed " * 300},
    {"role": "assistant", "content": "All green."},
]
BROKEN = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
    {"role": "tool", "tool_call_id": "a", "content": "ok"},
    {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
    {"role": "assistant", "content": "and now", "tool_calls": [call("c")]},
]


def write_jsonl(p: Path, rows: list[dict]) -> Path:
    p.write_bytes(b"".join(json.dumps(m).encode() + b"\n" for m in rows))
    return p


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "chat.jsonl", CHAT)


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "broken.jsonl", BROKEN)


@pytest.fixture(autouse=True)
def _isolated_config(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    """No ctxtool.toml from the checkout and no CTXTOOL_* variables leak into these tests."""
    import os

    for k in list(os.environ):
        if k.startswith("CTXTOOL_") and k not in ("CTXTOOL_MODELS",):
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)


# -- cut ------------------------------------------------------------------------------


def test_cut_json(chat: Path) -> None:
    r = invoke("cut", str(chat), "--keep-recent-tokens", "1000", "--json")
    assert r.exit_code == 0, r.output
    d = one(r.stdout)
    assert d["cut_index"] == 6 and d["split_turn"] is False
    assert d["messages_summarized"] == 6 and d["messages_kept"] == 4
    assert d["tokens_before"] > d["tokens_after"] == d["tokens_kept"]
    assert d["first_kept_line"] == 7


def test_cut_nothing_to_cut(chat: Path) -> None:
    d = one(invoke("cut", str(chat), "--json").stdout)
    assert d["cut_index"] is None and d["first_kept_id"] is None


def test_cut_split_turn_and_table(chat: Path) -> None:
    r = invoke("cut", str(chat), "-k", "50")
    assert r.exit_code == 0
    assert "cut_index" in r.stdout and "yes@6" in r.stdout


def test_cut_keep_recent_count_and_clamp(chat: Path) -> None:
    d = one(invoke("cut", str(chat), "--keep-recent", "3", "--json").stdout)
    assert d["keep_budget"] is None and d["keep_recent"] == 3 and d["messages_kept"] >= 3
    d = one(invoke("cut", str(chat), "--context-window", "17384", "--json").stdout)
    assert d["effective_limit"] == 1000 and d["keep_budget"] == 500
    # a reserve as large as the window: the limit is 0, and 0 clamps as the transform does
    d = one(invoke("cut", str(chat), "--context-window", "1000", "--reserve-tokens", "2000", "--json").stdout)
    assert d["effective_limit"] == 0 and d["keep_budget"] == 0 and d["keep_recent"] is None


def test_cut_output_keeps_lines_verbatim(chat: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept.jsonl"
    r = invoke("cut", str(chat), "-k", "1000", "-o", str(out))
    assert r.exit_code == 0, r.output
    src = chat.read_bytes().splitlines()
    assert out.read_bytes().splitlines() == [src[0], *src[6:]]
    assert invoke("validate", str(out)).exit_code == 0


# -- check -------------------------------------------------------------------------------


def test_check_exit_status(chat: Path) -> None:
    r = invoke("check", str(chat), "--context-window", "1000000")
    assert r.exit_code == 0, r.output
    assert "no compaction needed" in r.stdout
    r = invoke("check", str(chat), "--context-window", "17000")
    assert r.exit_code == ExitCode.THRESHOLD
    assert "COMPACT" in r.stdout


def test_check_json_reports_every_policy(chat: Path) -> None:
    r = invoke("check", str(chat), "--context-window", "20000", "--policy", "seed004", "--json")
    d = one(r.stdout)
    assert set(d["verdicts"]) == {"effective-limit", "reserve", "ratio", "hard-stop", "chars"}
    assert d["policy"] == "hard-stop" and d["context_window"] == 20000 and d["window_source"] == "flag"
    assert d["used_tokens"] > 0 and d["percent"] == pytest.approx(100 * d["used_tokens"] / 20000, abs=0.01)
    assert r.exit_code == (ExitCode.THRESHOLD if d["compact"] else 0)


def test_check_ratio_is_strict(chat: Path) -> None:
    r = invoke("check", str(chat), "--policy", "ratio")
    assert r.exit_code == ExitCode.USAGE
    assert "context limit" in r.output


def test_check_window_from_model_and_config(chat: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    d = one(invoke("check", str(chat), "--model", "gpt-4o", "--json").stdout)
    assert d["context_window"] == 128000 and d["window_source"] == "registry:gpt-4o"
    cfg = tmp_path / "ctxtool.toml"
    cfg.write_text("context_window = 12345\n[compaction]\nreserve_tokens = 345\n")
    monkeypatch.setenv("CTXTOOL_CONFIG", str(cfg))
    d = one(invoke("check", str(chat), "--json").stdout)
    assert d["context_window"] == 12345 and d["verdicts"]["reserve"]["limit"] == 12000
    # the flag wins over the file
    d = one(invoke("check", str(chat), "--json", "--context-window", "50000").stdout)
    assert d["context_window"] == 50000


def test_check_dataset_counts(tmp_path: Path) -> None:
    r = invoke("check", str(SAMPLES / "openai_dataset.jsonl"), "--max-tokens", "100", "--json")
    d = json.loads(r.stdout)
    assert len(d["transcripts"]) == 3
    assert d["totals"]["compact"] == sum(1 for t in d["transcripts"] if t["compact"]) >= 1
    assert r.exit_code == ExitCode.THRESHOLD


# -- window --------------------------------------------------------------------------------


def test_window_writes_and_reports(chat: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.jsonl"
    r = invoke("window", str(chat), "-o", str(out), "--max-messages", "4", "--json")
    assert r.exit_code == 0, r.output
    d = one(r.stdout)
    assert d["dropped"] == 5 and d["messages_after"] == 4 and d["kept_first_user"]
    assert d["dropped_tool_calls"] == d["dropped_tool_results"] == 2
    src = chat.read_bytes().splitlines()
    assert out.read_bytes().splitlines() == [src[0], src[1], *src[7:]]


def test_window_to_stdout_reports_on_stderr(chat: Path) -> None:
    r = invoke("window", str(chat), "--max-messages", "3", "--no-keep-first-user", "-s", "sliding")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert [json.loads(x)["role"] for x in lines] == ["system", "assistant", "tool", "assistant"]


def test_window_json_needs_output(chat: Path) -> None:
    assert invoke("window", str(chat), "--json").exit_code == ExitCode.USAGE
    d = one(invoke("window", str(chat), "--json", "--dry-run", "--max-chars", "100").stdout)
    assert d["over_limit"] and d["dropped"] > 0


def test_window_bookends(chat: Path, tmp_path: Path) -> None:
    out = tmp_path / "b.jsonl"
    r = invoke("window", str(chat), "-o", str(out), "--strategy", "bookends", "--max-messages", "2", "--json")
    d = one(r.stdout)
    assert d["strategy"] == "bookends" and d["messages_after"] <= 3


# -- repair --------------------------------------------------------------------------------


def test_repair_then_validate(broken: Path, tmp_path: Path) -> None:
    assert invoke("validate", str(broken)).exit_code == ExitCode.INVALID
    out = tmp_path / "fixed.jsonl"
    r = invoke("repair", str(broken), "-o", str(out), "--json")
    assert r.exit_code == 0, r.output
    d = one(r.stdout)
    assert d["counts"] == {
        "orphan_result_dropped": 1,
        "trailing_call_stripped": 1,
        "empty_message_dropped": 1,
        "aborted_result_added": 1,
    }
    assert invoke("validate", str(out)).exit_code == 0
    rows = [json.loads(x) for x in out.read_bytes().splitlines()]
    assert rows[3] == {"role": "tool", "tool_call_id": "b", "content": "aborted"}
    assert rows[-1] == {"role": "assistant", "content": "and now"}
    src = broken.read_bytes().splitlines()
    assert out.read_bytes().splitlines()[:3] == src[:3]


def test_repair_text_report(broken: Path, tmp_path: Path) -> None:
    r = invoke("repair", str(broken), "--dry-run")
    assert r.exit_code == 0
    assert "aborted_result_added 'b' at line 2" in r.stdout
    assert "nothing written (dry run)" in r.stdout


def test_repair_abort_trailing(broken: Path) -> None:
    r = invoke("repair", str(broken))
    assert r.exit_code == 0
    r2 = invoke("repair", str(broken), "--abort-trailing-calls")
    assert r2.stdout.count('"aborted"') == 2


# -- config --------------------------------------------------------------------------------


def test_config_sources(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "ctxtool.toml"
    cfg.write_text("[compaction]\nreserve_tokens = 1000\n")
    monkeypatch.setenv("CTXTOOL_CONFIG", str(cfg))
    monkeypatch.setenv("CTXTOOL_WINDOW_MAX_MESSAGES", "42")
    r = invoke("config", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    s = d["settings"]
    assert s["compaction.reserve_tokens"] == {**s["compaction.reserve_tokens"], "value": 1000, "source": f"file:{cfg}"}
    assert s["window.max_messages"]["value"] == 42 and s["window.max_messages"]["source"] == "env:CTXTOOL_WINDOW_MAX_MESSAGES"
    assert s["compaction.keep_recent_tokens"]["source"] == "default"
    assert invoke("config", "window.max_messages").stdout.strip() == "42"
    table = invoke("config", "--changed").stdout
    assert "compaction.reserve_tokens" in table and "compaction.keep_recent " not in table
    assert invoke("config", "nope").exit_code == ExitCode.USAGE


def test_a_pyproject_without_a_ctxtool_table_is_not_read(tmp_path: Path) -> None:
    from ctxtool.config import find_config_file

    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("[project\nname = 'broken, and not ours'\n")
    assert find_config_file(proj / "sub") is None  # not parsed: its error is not ctxtool's
    (proj / "pyproject.toml").write_text("[project]\nname = 'x'\n[tool.ctxtool.compaction]\nreserve_tokens = 7\n")
    found = find_config_file(proj / "sub")
    assert found is not None and found[1] == {"compaction": {"reserve_tokens": 7}}
    (proj / "pyproject.toml").write_text("[tool.ctxtool\n")
    with pytest.raises(CtxtoolError, match="cannot read config"):
        find_config_file(proj / "sub")
    (proj / "ctxtool.toml").write_bytes(b"[compaction]\nreserve_tokens = 7 # \xff\n")  # not UTF-8: said, no traceback
    with pytest.raises(CtxtoolError, match="cannot read config"):
        find_config_file(proj / "sub")


def test_config_flows_into_window(chat: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CTXTOOL_WINDOW_MAX_MESSAGES", "4")
    d = one(invoke("window", str(chat), "--dry-run", "--json").stdout)
    assert d["max_messages"] == 4 and d["dropped"] == 5
    d = one(invoke("window", str(chat), "--dry-run", "--json", "--max-messages", "100").stdout)
    assert d["dropped"] == 0


def test_bad_config_value(monkeypatch, chat: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CTXTOOL_WINDOW_MAX_CHARS", "lots")
    r = invoke("window", str(chat), "--dry-run")
    assert r.exit_code == ExitCode.USAGE and "window.max_chars" in r.output


# -- a real process ------------------------------------------------------------------------


def test_subprocess_pipeline(broken: Path, tmp_path: Path) -> None:
    """repair | window | check through real processes and pipes."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")}
    exe = [sys.executable, "-m", "ctxtool"]
    p1 = subprocess.run([*exe, "repair", str(broken)], capture_output=True, env=env, timeout=60, cwd=tmp_path)
    assert p1.returncode == 0, p1.stderr
    assert b"repair made" in p1.stderr
    p2 = subprocess.run([*exe, "window", "-", "--max-messages", "2"], input=p1.stdout, capture_output=True, env=env, timeout=60, cwd=tmp_path)
    assert p2.returncode == 0, p2.stderr
    p3 = subprocess.run([*exe, "check", "-", "--policy", "reserve", "--context-window", "16385", "--json"],
                        input=p2.stdout, capture_output=True, env=env, timeout=60, cwd=tmp_path)
    assert p3.returncode == ExitCode.THRESHOLD, p3.stderr
    assert one(p3.stdout.decode())["verdicts"]["reserve"]["limit"] == 1
    p4 = subprocess.run([*exe, "check", str(broken), "--policy", "ratio"], capture_output=True, env=env, timeout=60, cwd=tmp_path)
    assert p4.returncode == ExitCode.USAGE
    assert p4.stderr.decode().startswith("ctxtool: error:") and b"Traceback" not in p4.stderr


# -- every sample and corpus file through every command -------------------------------------


def _problems(path: Path) -> Counter:
    from ctxtool.history.validate import validate

    return Counter(p.code for p in validate([str(path)]).problems)


def _assert_verbatim(out: Path, src_lines: set[bytes]) -> None:
    """Every output line is an input line; pi's and Claude Code's writers re-link the parent
    (``parentId``, ``parentUuid``: Claude Code records the old one under ``ctxtool``) of a line
    whose parent was dropped, and a compact_boundary's ``logicalParentUuid`` likewise, so those
    fields may differ there."""
    links = ("parentId", "parentUuid", "logicalParentUuid", "ctxtool")
    relinked = None
    for ln in out.read_bytes().splitlines():
        if ln in src_lines:
            continue
        if relinked is None:
            relinked = {json.dumps({k: v for k, v in json.loads(x).items() if k not in links}) for x in src_lines}
        obj = json.loads(ln)
        assert "parentId" in obj or "parentUuid" in obj, ln[:200]
        assert json.dumps({k: v for k, v in obj.items() if k not in links}) in relinked, ln[:200]


def _is_entries_jsonl(path: Path) -> bool:
    from ctxtool import formats

    t = next(formats.read(path))
    return t.extra.get("layout") == "entries_jsonl"


@pytest.mark.parametrize("path", all_transcript_params())
def test_every_command_on_every_file(path: Path, tmp_path: Path) -> None:
    before = _problems(path)
    src_lines = set(path.read_bytes().splitlines())
    verbatim = _is_entries_jsonl(path)
    suffix = path.suffix
    # check: a verdict for every transcript
    r = invoke("check", str(path), "--context-window", "128000", "--json")
    assert r.exit_code in (0, ExitCode.THRESHOLD), r.output
    ts = json.loads(r.stdout)["transcripts"]
    assert all(t["used_tokens"] >= 0 and t["context_window"] == 128000 for t in ts)
    # cut: never on a tool result; output valid and verbatim
    out = tmp_path / f"cut{suffix}"
    r = invoke("cut", str(path), "-k", "3000", "-o", str(out))
    assert r.exit_code == 0, r.output
    r = invoke("cut", str(path), "-k", "3000", "--json")
    for rep in json.loads(r.stdout)["transcripts"]:
        if rep["cut_index"] is not None:
            assert rep["tokens_after"] <= rep["tokens_before"]
    after = _problems(out)
    for code in ("orphan_result", "unanswered_call", "duplicate_result"):
        assert after[code] <= before[code], (code, after)
    if verbatim:
        _assert_verbatim(out, src_lines)
    # window: both strategies
    for strategy in ("sliding", "bookends"):
        out = tmp_path / f"window-{strategy}{suffix}"
        r = invoke("window", str(path), "-o", str(out), "--max-messages", "12", "--max-chars", "40000", "-s", strategy, "--json")
        assert r.exit_code == 0, r.output
        after = _problems(out)
        for code in ("orphan_result", "unanswered_call", "duplicate_result"):
            assert after[code] <= before[code], (strategy, code, after)
        if verbatim:
            _assert_verbatim(out, src_lines)
    # repair: then validate is clean
    out = tmp_path / f"repaired{suffix}"
    r = invoke("repair", str(path), "-o", str(out), "--json")
    assert r.exit_code == 0, r.output
    assert not _problems(out), _problems(out)
    changed = sum(x["changed"] for x in json.loads(r.stdout)["transcripts"])
    assert changed == 0 or sum(before.values()) > 0
    if not before:
        assert out.read_bytes() == path.read_bytes() or not verbatim


def test_dataset_tables_show_twenty_rows_and_json_lists_all(tmp_path: Path) -> None:
    """window, cut, check and stats over a dataset: the table shows the 20 transcripts that matter
    most (common.table_rows) and says so; --json lists every one."""
    ds = tmp_path / "ds.jsonl"
    recs = []
    for i in range(30):
        msgs = [{"role": "user", "content": f"task {i}"}]
        msgs += [{"role": "assistant" if k % 2 else "user", "content": f"turn {k} " + "x" * 40} for k in range(i + 2)]
        recs.append(json.dumps({"id": f"r{i}", "messages": msgs}))
    ds.write_text("\n".join(recs) + "\n")
    r = invoke("window", str(ds), "--max-messages", "3", "-o", str(tmp_path / "w.jsonl"))
    assert r.exit_code == 0, r.output
    assert "20 with the most dropped of 30" in r.output
    shown = [f"r{i}" for i in range(30) if f"ds.jsonl#r{i} " in r.output]
    assert shown == [f"r{i}" for i in range(10, 30)]  # the 20 longest histories lose the most
    r = invoke("window", str(ds), "--max-messages", "3", "-o", str(tmp_path / "w2.jsonl"), "--json")
    assert len(json.loads(r.output)["transcripts"]) == 30
    r = invoke("cut", str(ds), "--keep-recent", "2")
    assert r.exit_code == 0, r.output
    assert "20 with the most tokens of 30" in r.output and "ds.jsonl#r29 " in r.output and "ds.jsonl#r0 " not in r.output
    r = invoke("stats", str(ds))  # stats keeps only these while it reads (the same rule, the same caption)
    assert r.exit_code == 0, r.output
    assert "20 with the most context tokens of 30 (--json lists all)" in r.output
    assert "ds.jsonl#r29 " in r.output and "ds.jsonl#r0 " not in r.output
