"""The event log (``--events``) is an output too: it never replaces an input (a file named, or
a file of a directory named) and never goes where the transcript goes (the same file, or both
stdout). Before, each of these ran with exit 0: the input or the written transcript was replaced
by the event log, or the events followed the transcript on stdout."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from io_pipes import SAMPLES, run_ctxtool

from ctxtool.cli.exits import ExitCode

#: commands that write --events, with options that make each log an event
COMMANDS = {
    "truncate": ["truncate", "--preset", "head-tail"],
    "trim": ["trim", "--budget", "100"],
    "restore": ["restore"],
    "archive": ["archive", "-n", "0"],
    "compact": ["compact", "--force", "-k", "100"],
}


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    (d / "in").mkdir(parents=True)
    shutil.copy(SAMPLES / "openai_chat.json", d / "in" / "session.json")
    return d


def _refused(r: object, what: str) -> None:
    assert r.returncode == ExitCode.USAGE, r.stderr  # type: ignore[attr-defined]
    assert r.stdout == b""  # type: ignore[attr-defined]
    err = r.stderr.decode()  # type: ignore[attr-defined]
    assert len(err.splitlines()) == 1 and what in err, err


@pytest.mark.parametrize("command", COMMANDS)
def test_the_event_log_never_replaces_the_input(work: Path, command: str) -> None:
    src = work / "in" / "session.json"
    before = _digest(src)
    r = run_ctxtool(*COMMANDS[command], "--events", str(src), str(src), "-o", str(work / "out.jsonl"),
                    cache=work / "cache")
    _refused(r, "inputs are never modified")
    assert _digest(src) == before and not (work / "out.jsonl").exists()


@pytest.mark.parametrize("command", ["truncate", "compact"])
def test_the_event_log_never_replaces_a_file_of_an_input_directory(work: Path, command: str) -> None:
    src = work / "in" / "session.json"
    before = _digest(src)
    r = run_ctxtool(*COMMANDS[command], "--events", str(src), str(work / "in"), "-o", str(work / "out") + "/",
                    cache=work / "cache")
    _refused(r, "inputs are never modified")
    assert _digest(src) == before
    # a new file there is no input: written
    ok = run_ctxtool(*COMMANDS[command], "--events", str(work / "in" / "events.log"), str(work / "in"),
                     "-o", str(work / "out") + "/", cache=work / "cache")
    assert ok.returncode == 0, ok.stderr
    assert _digest(src) == before and (work / "in" / "events.log").read_bytes()


@pytest.mark.parametrize("command", COMMANDS)
def test_the_event_log_and_the_transcript_never_share_a_place(work: Path, command: str) -> None:
    src, out = work / "in" / "session.json", work / "out.jsonl"
    r = run_ctxtool(*COMMANDS[command], "--events", str(out), str(src), "-o", str(out), cache=work / "cache")
    _refused(r, "both be written to the same file")
    assert not out.exists()
    r = run_ctxtool(*COMMANDS[command], "--events", "-", str(src), cache=work / "cache")
    _refused(r, "both be written to stdout")
    # each in its own place: both written, the events on stdout
    ok = run_ctxtool(*COMMANDS[command], "--events", "-", str(src), "-o", str(out), cache=work / "cache")
    assert ok.returncode == 0, ok.stderr
    assert out.stat().st_size and (b'"event"' in ok.stdout or command == "restore")  # nothing to restore here


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_events_on_stdout_keep_stdout_for_them(name: str, work: Path) -> None:
    """``--events -`` with the transcript in a file: stdout carries the event log alone, every
    line a JSON object, the command's report going to stderr (before, the report followed the
    events on stdout). ``--json`` there goes where it goes when stdout carries the transcript:
    to stderr (truncate, trim, restore), or refused (archive, compact), nothing written."""
    src, out = work / "in" / "session.json", work / "out.json"
    caches = [work / "cache", work / "cache2"]
    if name == "restore":  # something to restore: the outputs truncate cut, its cache read twice
        cut = work / "cut.json"
        assert run_ctxtool(*COMMANDS["truncate"], str(src), "-o", str(cut), cache=caches[0]).returncode == 0
        src, caches = cut, [caches[0], caches[0]]
    r = run_ctxtool(*COMMANDS[name], "--events", "-", str(src), "-o", str(out), cache=caches[0])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines, "no event logged: the case tests nothing"
    assert all(isinstance(json.loads(ln), dict) for ln in lines), r.stdout
    assert r.stderr.strip(), "the report went nowhere"
    out.unlink()
    j = run_ctxtool(*COMMANDS[name], "--json", "--events", "-", str(src), "-o", str(out), cache=caches[1])
    if name in ("truncate", "trim", "restore"):
        assert j.returncode == 0, j.stderr
        assert [json.loads(ln) for ln in j.stdout.decode().splitlines()] == [json.loads(ln) for ln in lines]
        assert json.loads(j.stderr)["command"] == name
    else:
        _refused(j, "--json")
        assert not out.exists()
