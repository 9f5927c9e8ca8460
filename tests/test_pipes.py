"""Pipes a script can rely on: every command that prints data takes -o FILE (written
atomically; a full disk is exit 8, never an internal error), output names are checked
against what is written, every command reads what stats reads, and a misspelt command is
answered with the closest ones. Commands are read from the app, so one added later is held
to the same."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ctxtool.cli.exits import ExitCode

ROOT = Path(__file__).resolve().parent.parent
S = ROOT / "samples"
SESSION = str(S / "claude_code_session.jsonl")


def run(*args: str, cwd: Path, limit: int | None = None, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    """The real command; ``limit``: the largest file it may write (RLIMIT_FSIZE, so a write
    past it fails with EFBIG as on a full disk, without touching any device)."""

    def lower() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")} | {"CTXTOOL_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "ctxtool", *args], cwd=cwd, env=env, capture_output=True,
                          input=stdin.decode(), text=True, check=False, preexec_fn=lower if limit else None)


def leaf_commands() -> dict[str, object]:
    from ctxtool.cli.docgen import leaves

    return leaves()


def test_every_command_takes_an_output_file():
    cmds = leaf_commands()
    assert {"stats", "check", "usage", "refs ls", "config"} <= set(cmds)
    missing = [n for n, c in cmds.items() if not any("-o" in p.opts and "--output" in p.opts for p in c.params)]
    assert missing == []


def test_stats_json_to_a_file(tmp_path):
    r = run("stats", SESSION, "--json", "-o", "report.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    d = json.loads((tmp_path / "report.json").read_text())
    direct = json.loads(run("stats", SESSION, "--json", cwd=tmp_path).stdout)
    assert d == direct
    r = run("stats", SESSION, "-o", "rows.csv", cwd=tmp_path)  # rows need --per-message
    assert r.returncode == ExitCode.USAGE and "--per-message" in r.stderr
    r = run("stats", SESSION, "--per-message", "-o", "rows.csv", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "rows.csv").read_text().count("\n") == 20


@pytest.mark.parametrize("args", [["check", "--context-window", "40000", SESSION],  # exit 5: kept
                                  ["validate", str(S / "openai_dataset.jsonl")],
                                  ["models", "--json"], ["config"], ["replay", "--context-window", "60000", SESSION],
                                  ["compactions", str(S / "pi_session.jsonl")],
                                  ["usage", SESSION, "--json"]])
def test_what_a_command_prints_goes_to_the_output_file(tmp_path, args):
    direct = run(*args, cwd=tmp_path)
    r = run(*args, "-o", "out.txt", cwd=tmp_path)
    assert r.returncode == direct.returncode, r.stderr
    assert r.stdout == ""
    assert (tmp_path / "out.txt").read_text() == direct.stdout
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


@pytest.mark.parametrize("args", [["stats", SESSION, "--json", "-o", "report.json"],
                                  ["stats", SESSION, "--per-message", "-o", "rows.csv"],
                                  ["stats", SESSION, "--per-message", "-o", "rows.parquet"],
                                  ["check", "--context-window", "40000", "--json", SESSION, "-o", "c.json"],
                                  ["models", "-o", "m.txt"]])
def test_a_full_disk_is_exit_8_naming_the_output(tmp_path, args):
    r = run(*args, cwd=tmp_path, limit=400)
    assert r.returncode == ExitCode.IO, r.stderr
    out = args[args.index("-o") + 1]
    assert r.stderr.startswith(f"ctxtool: error: {out}: cannot write the output") and r.stderr.count("\n") == 1
    assert not (tmp_path / out).exists()
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


def test_an_output_never_replaces_an_input(tmp_path):
    src = tmp_path / "s.jsonl"
    src.write_bytes(Path(SESSION).read_bytes())
    for args in (["stats", str(src), "-o", str(src)], ["check", str(src), "-o", str(src)]):
        r = run(*args, cwd=tmp_path)
        assert r.returncode == ExitCode.USAGE and "never modified" in r.stderr
    assert src.read_bytes() == Path(SESSION).read_bytes()


def test_export_checks_the_output_name_against_to(tmp_path):
    src = str(S / "pi_session.jsonl")
    for args in (["-o", "out.pdf"], ["-o", "out.html", "--to", "markdown"], ["-o", "out.md", "--to", "html"]):
        r = run("export", src, *args, cwd=tmp_path)
        assert r.returncode == ExitCode.USAGE, (args, r.stderr)
        assert "export writes markdown" in r.stderr
    assert list(tmp_path.glob("out.*")) == []
    assert run("export", src, "-o", "out.html", cwd=tmp_path).returncode == 0
    assert (tmp_path / "out.html").read_text().startswith("<!DOCTYPE html>")


def test_replay_reads_a_directory_as_stats_does(tmp_path):
    r = run("replay", str(S), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    n = json.loads(run("stats", str(S), "--json", cwd=tmp_path).stdout)["totals"]["transcripts"]
    assert json.loads(r.stdout)["totals"]["transcripts"] == n
    r = run("replay", "-", "--json", cwd=tmp_path, stdin=Path(SESSION).read_bytes())
    assert r.returncode == 0 and json.loads(r.stdout)["totals"]["transcripts"] == 1


def test_a_misspelt_command_names_the_closest(tmp_path):
    r = run("stat", SESSION, cwd=tmp_path)
    assert r.returncode == ExitCode.USAGE and "Did you mean 'stats'?" in r.stderr
    r = run("refs", "shwo", cwd=tmp_path)
    assert r.returncode == ExitCode.USAGE and "Did you mean 'show'?" in r.stderr
