"""stats / validate / convert through typer's CliRunner and a real subprocess; bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES
from typer.testing import CliRunner

from ctxtool.cli import app, main
from ctxtool.cli.exits import ExitCode

runner = CliRunner()

CHAT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the failing test in utils.py"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"utils.py\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "def add(a, b):\n    return a - b\n"},
    {"role": "assistant", "content": "The add function subtracts; fixing it."},
]


@pytest.fixture
def chat_jsonl(tmp_path: Path) -> Path:
    p = tmp_path / "chat.jsonl"
    p.write_text("".join(json.dumps(m) + "\n" for m in CHAT))
    return p


def invoke(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), input=input)


def test_stats_json_shape(chat_jsonl: Path) -> None:
    r = invoke("stats", str(chat_jsonl), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["tokenizer"] == "heuristic"
    for k in ("messages", "tokens", "chars", "tool_calls", "tool_results"):
        assert k in d["totals"]
    assert d["totals"]["messages"] == 5
    assert d["totals"]["tool_calls"] == 1 and d["totals"]["tool_results"] == 1
    assert d["by_role"]["tool"]["messages"] == 1
    assert sum(r["tokens"] for r in d["by_role"].values()) == d["totals"]["tokens"]
    assert len(d["transcripts"]) == 1
    t = d["transcripts"][0]
    assert t["messages"] == 5 and t["by_role"]["assistant"]["messages"] == 2
    assert t["tool_calls_by_name"] == {"read": 1}
    # content tokens only; framing reported separately
    assert d["totals"]["framing_tokens"] == 4 * 5 + 3


def test_stats_exact_tokenizer_and_model(chat_jsonl: Path) -> None:
    r = invoke("stats", str(chat_jsonl), "--json", "--model", "gpt-4o")
    d = json.loads(r.stdout)
    assert d["tokenizer"] == "o200k_base"
    assert d["context_window"] == 128000
    pct = d["transcripts"][0]["context"]["percent"]
    assert 0 < pct < 1


def test_stats_stdin(chat_jsonl: Path) -> None:
    r = invoke("stats", "-", "--json", input=chat_jsonl.read_text())
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["totals"]["messages"] == 5


def test_stats_fail_on_threshold(tmp_path: Path) -> None:
    p = tmp_path / "big.jsonl"
    p.write_text(json.dumps({"role": "user", "content": "x" * 250_000}) + "\n")
    assert invoke("stats", str(p), "--fail-on", "warning").exit_code == ExitCode.THRESHOLD
    assert invoke("stats", str(p), "--fail-on", "critical").exit_code == 0
    r = invoke("stats", str(p), "--json")
    assert json.loads(r.stdout)["thresholds"]["level"] == "warning"


def test_stats_per_message_csv_and_parquet(chat_jsonl: Path, tmp_path: Path) -> None:
    import polars as pl

    for name in ("rows.csv", "rows.parquet"):
        out = tmp_path / name
        r = invoke("stats", str(chat_jsonl), "--per-message", "-o", str(out))
        assert r.exit_code == 0, r.output
        df = pl.read_csv(out) if name.endswith(".csv") else pl.read_parquet(out)
        assert df.height == 5
        assert df["role"].to_list() == ["system", "user", "assistant", "tool", "assistant"]


def test_stats_human_table(chat_jsonl: Path) -> None:
    r = invoke("stats", str(chat_jsonl))
    assert r.exit_code == 0
    assert "assistant" in r.stdout and "tool calls" in r.stdout


def test_text_from_transcripts_is_printed_as_it_is(tmp_path: Path) -> None:
    """Tool names, ids and paths are data: brackets are not read as rich markup (``[/b]``
    used to end the run with an internal error) nor ``:codes:`` as emoji."""
    rec = {"id": "x[/y]z", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "[/b]:smile:", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out [red]x"}]}
    f = tmp_path / "ids[bold].jsonl"
    f.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "id": "q[/y]"}) + "\n")
    r = invoke("stats", str(f))
    assert r.exit_code == 0, r.stderr
    assert "[/b]:smile:" in r.stdout and "ids[bold].jsonl#x[/y]z" in r.stdout and "ids[bold].jsonl#q[/y]" in r.stdout


def test_control_characters_from_transcripts_never_reach_the_terminal(tmp_path: Path) -> None:
    """An escape sequence in a tool name or an id (a colour, OSC 52 setting the clipboard)
    is shown as visible symbols in tables, in report lines and in error lines; --json
    keeps the text exactly (JSON escapes it)."""
    esc_name = "\x1b[31mRED\x1b[0m"
    esc_id = "x\x1b]52;c;SGVsbG8=\x07y\x9b"
    rec = {"id": esc_id, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": esc_name, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out\n" * 3000}]}
    f = tmp_path / "esc.jsonl"
    f.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "id": "q"}) + "\n")
    controls = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
    for args in (["stats", str(f)], ["check", str(f), "--context-window", "100"],
                 ["window", str(f), "--max-messages", "2", "-o", str(tmp_path / "w.jsonl")]):
        r = invoke(*args)
        assert r.exit_code in (0, 5), (args, r.stderr)
        assert not controls.search(r.stdout) and not controls.search(r.stderr), args
    r = invoke("stats", str(f))
    assert "\u241b[31mRED\u241b[0m" in r.stdout and "x\u241b]52;c;SGVsbG8=\u2407y\ufffd" in r.stdout
    cache = tmp_path / "cache"
    r = invoke("truncate", str(f), "--cache-dir", str(cache), "-o", str(tmp_path / "t.jsonl"))
    assert r.exit_code == 0, r.stderr
    r = invoke("refs", "ls", "--cache-dir", str(cache))
    assert r.exit_code == 0 and "\u241b[31mRED" in r.stdout and not controls.search(r.stdout)
    r = invoke("stats", str(f), "--json")
    assert {t["id"] for t in json.loads(r.stdout)["transcripts"]} == {esc_id, "q"}


def test_an_error_stays_one_line_whatever_the_file_is_called(tmp_path: Path) -> None:
    f = tmp_path / "a\nb\x1b[2J.jsonl"
    f.write_text("garbage\n")
    r = invoke("stats", str(f))
    assert r.exit_code == ExitCode.INPUT
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("ctxtool: error: ")
    assert "a\u2424b\u241b[2J.jsonl:1: not JSON" in r.stderr


def test_an_existing_name_with_glob_characters_is_that_file(tmp_path: Path, chat_jsonl: Path) -> None:
    """``run[1].jsonl`` names the file when it exists; otherwise it is a pattern (and
    ``run[12].jsonl`` matches neither ``run1`` nor ``run2`` here: nothing matches)."""
    lit = tmp_path / "run[1].jsonl"
    lit.write_bytes(chat_jsonl.read_bytes())
    r = invoke("stats", str(lit), "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["totals"]["transcripts"] == 1 and "run[1].jsonl" in r.stdout
    r = invoke("stats", str(tmp_path / "run[12].jsonl"))
    assert r.exit_code == ExitCode.NOT_FOUND and "no file matches" in r.stderr
    (tmp_path / "run2.jsonl").write_bytes(chat_jsonl.read_bytes())
    r = invoke("stats", str(tmp_path / "run[12].jsonl"), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["totals"]["transcripts"] == 1
    assert "run2.jsonl" in r.stdout and "run[1].jsonl" not in r.stdout


def test_validate_clean_and_broken(chat_jsonl: Path, tmp_path: Path) -> None:
    assert invoke("validate", str(chat_jsonl)).exit_code == 0
    bad = tmp_path / "bad.jsonl"
    msgs = CHAT[:3] + [{"role": "tool", "tool_call_id": "zz", "content": "?"}]
    bad.write_text("".join(json.dumps(m) + "\n" for m in msgs))
    r = invoke("validate", str(bad), "--json")
    assert r.exit_code == ExitCode.INVALID
    d = json.loads(r.stdout)
    codes = {p["code"] for p in d["problems"]}
    assert codes == {"orphan_result", "unanswered_call"}
    orphan = next(p for p in d["problems"] if p["code"] == "orphan_result")
    assert orphan["line"] == 4 and orphan["path"] == str(bad)


def test_convert_round_trip_via_ctxtool(chat_jsonl: Path, tmp_path: Path) -> None:
    canon = tmp_path / "c.jsonl"
    back = tmp_path / "back.jsonl"
    assert invoke("convert", str(chat_jsonl), "--to", "ctxtool", "-o", str(canon)).exit_code == 0
    assert invoke("validate", str(canon)).exit_code == 0
    assert invoke("convert", str(canon), "--to", "openai", "-o", str(back)).exit_code == 0
    assert back.read_bytes().splitlines() == [json.dumps(m, separators=(",", ":")).encode() for m in CHAT] or [
        json.loads(x) for x in back.read_text().splitlines()
    ] == CHAT


def test_convert_to_stdout(chat_jsonl: Path) -> None:
    r = invoke("convert", str(chat_jsonl), "--to", "openai")
    assert [json.loads(x) for x in r.stdout.splitlines()] == CHAT


@pytest.mark.parametrize(
    ("content", "needle", "line"),
    [
        (b'{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "trunc', "invalid JSON", 2),
        (b'{"role": "user", "content": "caf\xe9"}\n', "invalid UTF-8", 1),
        (b"", "empty file", 1),
        (b'{"role": "user", "content": 5}\n', "content must be", 1),
        (b"hello\n", "not JSON", 1),
    ],
)
def test_bad_input_one_line_error(tmp_path: Path, content: bytes, needle: str, line: int) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content)
    r = invoke("stats", str(p))
    assert r.exit_code == ExitCode.INPUT, r.output
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1
    assert needle in err and f"{p}:{line}:" in err
    assert "Traceback" not in r.output


def test_unknown_format_and_missing_file(tmp_path: Path, chat_jsonl: Path) -> None:
    r = invoke("stats", str(chat_jsonl), "--format", "nope")
    assert r.exit_code == ExitCode.USAGE and "unknown format 'nope'" in r.stderr and "openai" in r.stderr
    r = invoke("stats", str(tmp_path / "missing.jsonl"))
    assert r.exit_code == ExitCode.NOT_FOUND and "no such file" in r.stderr
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    r = invoke("stats", str(empty))
    assert r.exit_code == ExitCode.NOT_FOUND and "no transcript files" in r.stderr


def test_undetectable_format_names_candidates(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"foo": 1}\n')
    r = invoke("stats", str(p))
    assert r.exit_code == ExitCode.INPUT
    assert "--format" in r.stderr and "claude-code" in r.stderr


def test_on_error_skip_counts_records(tmp_path: Path) -> None:
    p = tmp_path / "ds.jsonl"
    good = json.dumps({"messages": CHAT[:2]})
    p.write_text(good + "\n" + json.dumps({"messages": [{"role": "user", "content": 5}]}) + "\n" + good + "\n")
    assert invoke("stats", str(p)).exit_code == ExitCode.INPUT
    r = invoke("stats", str(p), "--on-error", "skip", "--json")
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert d["skipped"] == 1 and d["totals"]["transcripts"] == 2
    assert "skipped 1" in r.stderr


@pytest.mark.parametrize("sample", ["claude_code_session.jsonl", "codex_rollout.jsonl", "pi_session.jsonl", "openai_dataset.jsonl"])
def test_on_error_skip_reads_past_a_broken_line(sample: str, tmp_path: Path) -> None:
    """A line that is not JSON at all (a torn write, say) is one skipped error; the lines
    after it are still read, in every JSONL format."""
    src = Path(__file__).resolve().parent.parent / "samples" / sample
    lines = src.read_bytes().splitlines(keepends=True)
    at = len(lines) // 2
    broken = tmp_path / sample
    broken.write_bytes(b"".join(lines[:at]) + b'{"type": "assist\n' + b"".join(lines[at:]))
    whole = json.loads(invoke("stats", str(src), "--json").stdout)
    r = invoke("stats", str(broken), "--on-error", "skip", "--json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["skipped"] == 1 and f":{at + 1}:" in d["skipped_errors"][0]
    assert d["totals"]["messages"] == whole["totals"]["messages"]
    failed = invoke("stats", str(broken))
    assert failed.exit_code == ExitCode.INPUT and f":{at + 1}:" in failed.stderr


def test_debug_shows_traceback(tmp_path: Path) -> None:
    p = tmp_path / "missing.jsonl"
    proc = subprocess.run([sys.executable, "-m", "ctxtool", "--debug", "stats", str(p)], capture_output=True, text=True)
    assert proc.returncode == ExitCode.NOT_FOUND
    assert "Traceback" in proc.stderr


def test_huge_single_line(tmp_path: Path) -> None:
    p = tmp_path / "huge.jsonl"
    with p.open("w") as f:
        f.write('{"role": "tool", "tool_call_id": "c", "content": "')
        chunk = "0123456789" * 100_000
        for _ in range(100):
            f.write(chunk)
        f.write('"}\n')
    r = invoke("stats", str(p), "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["totals"]["chars"] == 100_000_000


def test_subprocess_pipe_and_version(chat_jsonl: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ctxtool", "stats", "-", "--json"],
        input=chat_jsonl.read_bytes(),
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["totals"]["messages"] == 5
    v = subprocess.run([sys.executable, "-m", "ctxtool", "--version"], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.startswith("ctxtool ")


def test_main_returns_exit_codes(chat_jsonl: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["validate", str(chat_jsonl)]) == 0
    assert main(["stats", "/nonexistent/file.jsonl"]) == ExitCode.NOT_FOUND
    assert main(["stats", "--no-such-flag", str(chat_jsonl)]) == ExitCode.USAGE


def test_inputs_never_modified(chat_jsonl: Path, tmp_path: Path) -> None:
    before = chat_jsonl.read_bytes()
    invoke("convert", str(chat_jsonl), "--to", "ctxtool", "-o", str(tmp_path / "o.jsonl"))
    invoke("stats", str(chat_jsonl))
    assert chat_jsonl.read_bytes() == before


def test_make_run_sample_exists() -> None:
    assert (SAMPLES / "claude_code_session.jsonl").exists() or pytest.skip("sample being written")


@pytest.mark.parametrize(
    "args",
    [
        ["convert", "{p}", "--to", "ctxtool", "-o", "{p}"],
        ["window", "{p}", "--max-messages", "3", "-o", "{p}"],
        ["repair", "{p}", "-o", "{p}"],
        ["archive", "{p}", "--cutoff", "0", "-o", "{p}"],
        ["truncate", "{p}", "--max-lines", "1", "-o", "{p}"],
        ["trim", "{p}", "--budget", "1", "-o", "{p}"],
        ["compact", "{p}", "--force", "-o", "{p}"],
    ],
    ids=lambda a: a[0],
)
def test_no_command_writes_over_its_input(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    p = tmp_path / "ds.jsonl"
    p.write_bytes((SAMPLES / "openai_dataset.jsonl").read_bytes())
    before = p.read_bytes()
    r = invoke(*[a.format(p=p) for a in args])
    assert r.exit_code == ExitCode.USAGE and "overwrite the input" in r.stderr
    assert p.read_bytes() == before


@pytest.mark.parametrize(
    "args",
    [
        ["convert", "{p}", "--to", "ctxtool", "-o", "{o}.jsonl"],
        ["window", "{p}", "--max-messages", "3", "-o", "{o}.jsonl"],
        ["stats", "{p}", "--per-message", "-o", "{o}.csv"],
        ["replay", "{p}", "--context-window", "1000", "--plot", "{o}.png"],
        ["truncate", "{p}", "--max-lines", "1", "-o", "{o}.jsonl"],
    ],
    ids=lambda a: a[0],
)
def test_an_unwritable_output_is_a_one_line_error(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    p = SAMPLES / "openai_dataset.jsonl"
    r = invoke(*[a.format(p=p, o=blocker / "out") for a in args])
    assert r.exit_code == ExitCode.IO, r.output
    assert "cannot write the output" in r.stderr and "internal error" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ctxtool: error:")]
    assert len(errors) == 1 and str(blocker) in errors[0] and "Traceback" not in r.stderr


def test_stats_warns_of_a_recorded_model_the_registry_does_not_know(tmp_path: Path) -> None:
    """The registry is asked only when a transcript records a model (start-up): a model it
    does not know is still named on stderr, one it knows is not, and none recorded says nothing."""
    src = (SAMPLES / "claude_code_session.jsonl").read_text()
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text(src.replace('"model":"claude-opus-4-6"', '"model":"no-such-model-37"'))
    r = subprocess.run([sys.executable, "-m", "ctxtool", "stats", str(unknown)], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and "'no-such-model-37' is not in the model registry" in r.stderr
    for known in (SAMPLES / "claude_code_session.jsonl", SAMPLES / "openai_dataset.jsonl"):
        r = subprocess.run([sys.executable, "-m", "ctxtool", "stats", str(known)], capture_output=True, text=True, check=False)
        assert r.returncode == 0 and "model registry" not in r.stderr


@pytest.mark.parametrize("command", [["stats"], ["formats"], ["validate"], ["usage"], ["check"], ["compactions"],
                                     ["window", "--max-chars", "100"], ["refs", "gc"],
                                     ["truncate", "--join", "-o", "joined.jsonl"],
                                     ["window", "--max-chars", "100", "--engine", "local", "-o", "outdir/"]])
def test_an_empty_path_is_no_file_not_the_current_directory(tmp_path: Path, command: list[str]) -> None:
    """``ctxtool stats "$F"`` with F unset: pathlib reads "" as the current directory, which
    held a transcript here and would have been read whole; it is a missing file instead."""
    (tmp_path / "chat.json").write_bytes((SAMPLES / "openai_chat.json").read_bytes())
    r = subprocess.run([sys.executable, "-m", "ctxtool", *command, ""], cwd=tmp_path, capture_output=True,
                       env={**os.environ, "CTXTOOL_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == ExitCode.NOT_FOUND, r.stderr
    err = r.stderr.decode().strip()
    assert err.startswith("ctxtool: error: '': no such file") and len(err.splitlines()) == 1
    assert r.stdout == b""
