"""stats on plain text (token counts, like ttok) and the recorded model and timestamps of
stats --json."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from pathlib import Path

from conftest import CORPUS
from typer.testing import CliRunner

from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.tokens.count import get_tokenizer
from ctxtool.tokens.plain import count_text, is_plain_text

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
runner = CliRunner()
TEXT = "The quick brown fox jumps over the lazy dog.\nHello, world: {\"not\": \"a transcript\"}\n"


def ctxtool(*args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    """The real command with a real pipe on stdin."""
    return subprocess.run([sys.executable, "-m", "ctxtool", *args], input=stdin, capture_output=True, check=False)


def test_stdin_text_counts_tokens() -> None:
    r = ctxtool("stats", "-", stdin=b"hello\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "2 tokens (heuristic) \u00b7 6 characters \u00b7 1 line of plain text\n"
    exact = get_tokenizer("o200k_base").count(TEXT)
    r = ctxtool("stats", "-", "--count", "-t", "o200k_base", stdin=TEXT.encode())
    assert r.returncode == 0 and r.stdout == f"{exact}\n".encode()


def test_file_text_and_compressed(tmp_path: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text(TEXT, "utf-8")
    gz = tmp_path / "notes.txt.gz"
    gz.write_bytes(gzip.compress(TEXT.encode()))
    for f in (p, gz):
        assert is_plain_text(f)
        r = runner.invoke(app, ["stats", str(f), "--count"])
        assert r.exit_code == 0, r.output
        assert r.stdout == f"{math.ceil(len(TEXT) / 4)}\n"
    c = count_text(p, "cl100k_base")
    assert (c.chars, c.lines, c.tokenizer) == (len(TEXT), 2, "cl100k_base")
    assert c.tokens == get_tokenizer("cl100k_base").count(TEXT)
    r = runner.invoke(app, ["stats", str(p), "--json"])
    assert r.exit_code == ExitCode.USAGE and "--count" in r.stderr


def test_json_with_errors_still_errors(tmp_path: Path) -> None:
    """Broken JSON and JSONL stay errors: they are transcripts with an error, not text."""
    broken = b'{"type": "user", "message": \n'
    bad_first = b"garbage\n" + b'{"type":"user","message":{"role":"user","content":"x"}}\n' * 3
    for data in (broken, bad_first, b'[{"role": "user"'):
        r = ctxtool("stats", "-", stdin=data)
        assert r.returncode not in (0, 1), data
        assert b"ctxtool: error:" in r.stderr and b"plain text" not in r.stdout
        f = tmp_path / "x.txt"
        f.write_bytes(data)
        assert not is_plain_text(f)
    named = tmp_path / "session.jsonl"  # named as a transcript: text in it is an error
    named.write_bytes(b"hello\n")
    assert not is_plain_text(named)
    assert runner.invoke(app, ["stats", str(named)]).exit_code == ExitCode.INPUT


def test_count_of_a_transcript() -> None:
    src = SAMPLES / "claude_code_session.jsonl"
    d = json.loads(runner.invoke(app, ["stats", str(src), "--json"]).stdout)
    r = runner.invoke(app, ["stats", str(src), "--count"])
    assert r.exit_code == 0 and r.stdout == f"{d['totals']['tokens']}\n"


def test_json_model_and_timestamps() -> None:
    files = [SAMPLES / "claude_code_session.jsonl", SAMPLES / "openai_dataset.jsonl"]
    d = json.loads(runner.invoke(app, ["stats", *map(str, files), "--json"]).stdout)
    cc = d["transcripts"][0]
    assert cc["model"] == "claude-opus-4-6"
    assert cc["first_timestamp"] == "2026-03-04T10:12:05.083Z"  # the first message (the snapshot line is later)
    assert cc["last_timestamp"] is not None and cc["last_timestamp"] > cc["first_timestamp"]
    assert all(t["first_timestamp"] is None for t in d["transcripts"][1:])  # a dataset records no times
    assert "claude-opus-4-6" in d["models"]
    assert (d["first_timestamp"], d["last_timestamp"]) == (cc["first_timestamp"], cc["last_timestamp"])
    if CORPUS.is_dir():
        # a branched pi session: its header is written after the messages it copies
        pi = json.loads(runner.invoke(app, ["stats", str(CORPUS / "pi" / "pi_before-compaction.jsonl"), "--json"]).stdout)
        t = pi["transcripts"][0]
        assert (t["model"], t["first_timestamp"], t["last_timestamp"]) == (
            "claude-opus-4-5", "2025-12-08T22:41:05.306Z", "2025-12-09T01:26:35.570Z")


def test_a_timestamp_no_clock_can_hold_is_no_time() -> None:
    """An epoch number past any date (an integer too large for a float, or past year 9999)
    is read as no time, not an internal error (bad-input suite, seed 9, case 671)."""
    from ctxtool.formats.timestamps import parse

    assert parse(10**400) is None and parse(-(10**400)) is None
    assert parse(1e300) is None
    assert parse(1_700_000_000_000) is not None  # milliseconds
    assert parse(1_700_000_000) is not None  # seconds


PYPROJECT = (ROOT / "pyproject.toml").read_bytes()


def test_what_is_not_a_transcript_is_counted_as_text(tmp_path: Path) -> None:
    """Like ttok: TOML (a line starting with '['), a JSON document or JSON Lines no format
    reads, empty input: each gives a count, on stdin and in a file."""
    heuristic = get_tokenizer("heuristic")
    cases = {
        "toml": PYPROJECT,
        "toml-array-table": b"[[bin]]\nname = 'x'\n[tool.x]\ny = true\n",
        "json-doc": b'{"name": "ctxtool", "version": "1.0", "scripts": {"test": "pytest"}}\n',
        "json-array": b"[1, 2, 3]\n",
        "json-lines": b'{"level": "info", "msg": "started"}\n{"level": "warn", "msg": "slow"}\n',
        "empty": b"",
        "blank": b"\n\n",
    }
    for name, data in cases.items():
        want = heuristic.count(data.decode()) if data.strip() else (heuristic.count(data.decode()) if data else 0)
        r = ctxtool("stats", "-", "--count", stdin=data)
        assert r.returncode == 0, (name, r.stderr)
        assert r.stdout == f"{want}\n".encode(), name
        f = tmp_path / f"{name}.txt"
        f.write_bytes(data)
        r = ctxtool("stats", str(f), "--count", stdin=b"")
        assert r.returncode == 0 and r.stdout == f"{want}\n".encode(), (name, r.stderr)
    doc = tmp_path / "package.json"  # a .json document that is not a transcript
    doc.write_bytes(cases["json-doc"])
    r = ctxtool("stats", str(doc), stdin=b"")
    assert r.returncode == 0 and b"of plain text" in r.stdout, r.stderr
    assert runner.invoke(app, ["stats", str(SAMPLES / "openai_chat.json"), "--count"]).stdout != "0\n"


def test_process_substitution_and_several_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a.md", tmp_path / "b.toml"
    a.write_text(TEXT, "utf-8")
    b.write_bytes(PYPROJECT)
    h = get_tokenizer("heuristic")
    r = subprocess.run(["bash", "-c", f'"{sys.executable}" -m ctxtool stats <(cat "{a}") --count'],
                       capture_output=True, check=False)
    assert r.returncode == 0 and r.stdout == f"{h.count(TEXT)}\n".encode(), r.stderr
    # a transcript through <(...) is still read as one: the bytes looked at are read again
    r = subprocess.run(["bash", "-c", f'"{sys.executable}" -m ctxtool stats <(cat "{SAMPLES / "claude_code_session.jsonl"}") --count'],
                       capture_output=True, check=False)
    want = runner.invoke(app, ["stats", str(SAMPLES / "claude_code_session.jsonl"), "--count"]).stdout
    assert r.returncode == 0 and r.stdout.decode() == want, r.stderr
    r = ctxtool("stats", str(a), str(b), "--count", stdin=b"")
    assert r.returncode == 0 and r.stdout == f"{h.count(TEXT) + h.count(PYPROJECT.decode())}\n".encode()
    r = ctxtool("stats", str(a), str(b), stdin=b"")
    lines = r.stdout.decode().splitlines()
    assert r.returncode == 0 and len(lines) == 3 and lines[0].endswith(str(a)) and lines[2].endswith(": 2 files")


def test_binary_input_is_an_error_naming_the_file(tmp_path: Path) -> None:
    for name, data in (("nul.bin", b"abc\x00def\n"), ("latin1.txt", "caf\u00e9\n".encode("latin-1")),
                       ("random.bin", bytes(range(128, 256)) * 4)):
        f = tmp_path / name
        f.write_bytes(data)
        r = ctxtool("stats", str(f), stdin=b"")
        assert r.returncode == ExitCode.INPUT, (name, r.stdout)
        assert r.stderr.decode().startswith(f"ctxtool: error: {f}: binary input"), r.stderr
        r = ctxtool("stats", "-", "--count", stdin=data)
        assert r.returncode == ExitCode.INPUT and b"-: binary input" in r.stderr, (name, r.stderr)
