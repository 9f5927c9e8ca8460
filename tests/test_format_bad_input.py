"""Inputs that used to end as ``internal error`` (issue 10 items 4, 5 and 10): each is read
correctly or is a one-line input error (exit 3) naming the file and line, on every command
that reads; detection looks past an unreadable first record; a forced format that matches
nothing in the file is an error naming the format detection would pick."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import corpus_file
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.errors import CtxtoolError
from ctxtool.formats.base import ErrorPolicy

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()

HUGE = "9" * 5000  # beyond Python's 4,300-digit conversion limit
CC_LINE = (
    '{"type":"assistant","sessionId":"s","uuid":"u1","parentUuid":null,"message":{"id":"m1","role":"assistant",'
    '"model":"claude-sonnet-4-5","content":[{"type":"text","text":"x"}],"usage":{"input_tokens":%s,"output_tokens":1}}}'
)


def _dataset(extra: str) -> str:
    return '{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]' + extra + "}\n"


#: name -> (file name, content, expected exit: 0 read correctly, 3 input error at line 1)
CASES = {
    "int-5000-digits": ("big.jsonl", _dataset(f',"seed":{HUGE}'), 0),
    "usage-infinity": ("inf.jsonl", CC_LINE % "Infinity" + "\n", 3),
    "usage-nan": ("nan.jsonl", CC_LINE % "NaN" + "\n", 3),
    "usage-huge": ("huge.jsonl", CC_LINE % HUGE + "\n", 3),
    "nested-100000": ("deep.jsonl", '{"messages":' + "[" * 100_000 + "]" * 100_000 + "}\n", 3),
    "sharegpt-value-object": (
        "sg1.json",
        json.dumps([{"conversations": [{"from": "human", "value": {"q": 1}}, {"from": "gpt", "value": {"a": [1, 2]}}]}]),
        0,
    ),
    "sharegpt-value-number": (
        "sg2.jsonl",
        json.dumps({"conversations": [{"from": "human", "value": 3}, {"from": "gpt", "value": 2.50}, {"from": "observation", "value": 7}]}) + "\n",
        0,
    ),
}
COMMANDS = {
    "stats": ["stats"],
    "validate": ["validate"],
    "convert": ["convert", "--to", "ctxtool", "-o", "{out}"],
    "truncate": ["truncate", "-o", "{out}"],
    "trim": ["trim", "--budget", "5", "-o", "{out}"],
    "cut": ["cut"],
    "check": ["check", "--context-window", "1000"],
    "window": ["window", "--max-messages", "1", "-o", "{out}"],
    "repair": ["repair", "-o", "{out}"],
    "archive": ["archive", "-o", "{out}"],
    "replay": ["replay", "--context-window", "1000"],
    "restore": ["restore", "-o", "{out}"],
    "compact": ["compact", "--force", "--summarizer", "heuristic", "--context-window", "1000", "-o", "{out}"],
}


def _args(cmd: str, path: Path, out: Path) -> list[str]:
    head, *rest = COMMANDS[cmd]
    return [head, str(path), *(a.replace("{out}", str(out)) for a in rest)]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_bad_input_is_read_or_one_line_error(case: str, cmd: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    name, content, want = CASES[case]
    path = tmp_path / name
    path.write_text(content)
    before = path.read_bytes()
    out = tmp_path / ("out" + path.suffix)
    r = runner.invoke(app, _args(cmd, path, out))
    assert "internal error" not in r.output and "Traceback" not in r.output, r.output
    assert path.read_bytes() == before
    if want == 3 and cmd != "validate":  # validate lists unreadable records as problems (exit 4)
        assert r.exit_code == ExitCode.INPUT, r.output
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and f"{path}:1:" in err[0], r.stderr
    elif want == 3:
        assert r.exit_code == ExitCode.INVALID, r.output
    else:
        assert r.exit_code in (0, ExitCode.THRESHOLD, ExitCode.INVALID), r.output
        if out.exists() and "seed" in content:
            assert HUGE in out.read_text()


def test_bad_input_in_a_real_process(tmp_path: Path) -> None:
    for name in ("usage-infinity", "nested-100000", "int-5000-digits"):
        fname, content, want = CASES[name]
        path = tmp_path / fname
        path.write_text(content)
        r = subprocess.run([sys.executable, "-m", "ctxtool", "stats", str(path)], capture_output=True, text=True, timeout=120)
        assert r.returncode == want, r.stderr
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr
        if want:
            assert r.stderr.count("\n") == 1 and f"{path}:1:" in r.stderr


def test_usage_error_skipped_under_on_error_skip(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = CC_LINE.replace('"uuid":"u1"', '"uuid":"u2"').replace('"m1"', '"m2"') % "5"
    path.write_text(CC_LINE % "NaN" + "\n" + good + "\n")
    policy = ErrorPolicy("skip")
    (t,) = formats.read(path, policy=policy)
    assert len(t.messages) == 1 and t.messages[0].usage and t.messages[0].usage.input == 5
    assert [(e.path, e.line) for e in policy.skipped] == [(str(path), 1)]


# -- detection looks past unreadable records (item 5) ----------------------------------
@pytest.mark.parametrize("broken", [b'{"type": "sess', b"\x00garbage", b'{"a": NaN]'])
def test_detection_looks_past_a_broken_first_record(broken: bytes, tmp_path: Path) -> None:
    src = corpus_file("pi", "pi_before-compaction.jsonl")
    lines = src.read_bytes().splitlines()
    path = tmp_path / "pi.jsonl"
    path.write_bytes(b"\n".join([broken, *lines[1:]]) + b"\n")
    with pytest.raises(CtxtoolError) as e:
        list(formats.read(path))
    assert e.value.line == 1 and e.value.path == str(path)  # fail: the broken record is named
    policy = ErrorPolicy("skip")
    (t,) = formats.read(path, policy=policy)
    assert t.format == "pi" and len(t.messages) > 100
    assert [e.line for e in policy.skipped] == [1]
    r = runner.invoke(app, ["stats", str(path), "--on-error", "skip", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["transcripts"][0]["format"] == "pi"
    assert f"{path}:1" in r.stderr


def test_detection_looks_past_broken_records_among_the_first(tmp_path: Path) -> None:
    src = corpus_file("claude_code", "spotter_tool_heavy.jsonl")
    lines = src.read_bytes().splitlines()
    broken = [b"{" + ln[:20] for ln in lines[:5]]
    path = tmp_path / "cc.jsonl"
    path.write_bytes(b"\n".join(broken + lines[5:]) + b"\n")
    policy = ErrorPolicy("skip")
    (t,) = formats.read(path, policy=policy)
    assert t.format == "claude-code"
    assert [e.line for e in policy.skipped] == [1, 2, 3, 4, 5]


# -- forced formats (item 10) -------------------------------------------------------------
def test_forced_format_that_matches_nothing_names_the_detected_one() -> None:
    path = corpus_file("pi", "pi_before-compaction.jsonl")
    r = runner.invoke(app, ["stats", str(path), "--format", "claude-code"])
    assert r.exit_code == ExitCode.INPUT, r.output
    assert "looks like pi" in r.stderr and str(path) in r.stderr
    r = runner.invoke(app, ["convert", str(path), "--format", "codex", "--to", "ctxtool"])
    assert r.exit_code == ExitCode.INPUT and "looks like pi" in r.stderr
    # a forced format that fits reads as before
    assert runner.invoke(app, ["stats", str(path), "--format", "pi"]).exit_code == 0
