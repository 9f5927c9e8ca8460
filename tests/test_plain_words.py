"""Plain words where users look: users never saw the specification's seed documents, so the
word "seed" appears in no command's --help, no `ctxtool config` row, nothing `make run`
prints and no page of the documentation but docs/architecture.md (which maps the seeds to
the code). Commands are read from the app itself, so a command added later is covered."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEED = re.compile(r"\bseeds?\b", re.IGNORECASE)
BIN = Path(sys.executable).parent


def command_paths() -> list[list[str]]:
    """Every registered command and subcommand (hidden ones aside), as argv prefixes."""
    from ctxtool.cli.docgen import commands

    return [path.split() for path in commands() if path]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")} | {"COLUMNS": "100"}


def test_every_command_is_found():
    names = {" ".join(p) for p in command_paths()}
    assert {"stats", "check", "truncate", "compact", "refs show", "config"} <= names


def test_no_help_text_says_seed():
    """Every command's --help, through the real program (one process lists them all)."""
    paths = command_paths()
    script = ("import sys, io, contextlib\nfrom ctxtool.cli import main\n"
              "for argv in eval(sys.argv[1]):\n"
              "    buf = io.StringIO()\n"
              "    with contextlib.redirect_stdout(buf):\n"
              "        main([*argv, '--help'])\n"
              "    sys.stdout.write('=== ' + ' '.join(argv) + '\\n' + buf.getvalue())\n")
    p = subprocess.run([sys.executable, "-c", script, repr([[], *paths])], capture_output=True, text=True,
                       env=_env(), cwd=ROOT, check=True)
    sections = p.stdout.split("=== ")
    assert len(sections) >= len(paths) + 1
    found = [(s.split("\n", 1)[0], m.group()) for s in sections for m in SEED.finditer(s)]
    assert found == []


def test_a_help_text_runs_as_a_command(tmp_path):
    """One --help through the installed entry point, as a user runs it."""
    p = subprocess.run([sys.executable, "-m", "ctxtool", "check", "--help"], capture_output=True, text=True,
                       env=_env(), cwd=tmp_path, check=True)
    assert "--policy" in p.stdout and not SEED.search(p.stdout)


def test_config_does_not_say_seed(tmp_path):
    for args in (["config"], ["config", "--json"]):
        p = subprocess.run([sys.executable, "-m", "ctxtool", *args], capture_output=True, text=True, env=_env(),
                           cwd=tmp_path, check=True)
        assert "compaction.reserve_tokens" in p.stdout
        assert SEED.findall(p.stdout) == [], args


def make_run_commands() -> list[str]:
    """The recipe lines of the Makefile's `run` target that run ctxtool."""
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^run:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.MULTILINE)
    assert m, "the Makefile has a run target"
    return [ln.strip().lstrip("@") for ln in m.group(1).splitlines() if "ctxtool" in ln]


def test_make_run_does_not_say_seed():
    cmds = make_run_commands()
    assert cmds
    for cmd in cmds:
        cmd = cmd.replace("$(BIN)/", f"{BIN}/")
        p = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=_env(), cwd=ROOT, check=True)
        assert p.stdout.strip()
        assert SEED.findall(p.stdout + p.stderr) == [], cmd


def test_error_messages_do_not_say_seed(tmp_path):
    """The strict ratio policy's error, a former policy name, an unknown preset."""
    sample = str(ROOT / "samples" / "openai_dataset.jsonl")
    runs = [["check", "--policy", "ratio", sample], ["check", "--policy", "nope", sample],
            ["truncate", "--preset", "nope", sample]]
    for args in runs:
        p = subprocess.run([sys.executable, "-m", "ctxtool", *args], capture_output=True, text=True, env=_env(),
                           cwd=tmp_path, check=False)
        assert p.returncode == 2, (args, p.stderr)
        assert SEED.findall(p.stdout + p.stderr) == [], args


@pytest.mark.parametrize("doc", sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "architecture.md")
                         + ["README.md"])
def test_the_docs_leave_seeds_to_the_architecture_page(doc):
    path = ROOT / doc if doc == "README.md" else ROOT / "docs" / doc
    lines = [f"{n}: {ln}" for n, ln in enumerate(path.read_text().splitlines(), 1) if SEED.search(ln)]
    assert lines == []


def test_former_names_still_work(tmp_path):
    """Configs and scripts written with the former policy and preset names keep working; the
    names are not listed."""
    sample = str(ROOT / "samples" / "claude_code_session.jsonl")
    p = subprocess.run([sys.executable, "-m", "ctxtool", "check", "--policy", "seed004", "--context-window", "40000",
                        "--json", sample], capture_output=True, text=True, env=_env(), cwd=tmp_path, check=False)
    assert p.returncode == 5 and '"policy": "hard-stop"' in p.stdout
    p = subprocess.run([sys.executable, "-m", "ctxtool", "truncate", "--preset", "seed004", "--cache-dir",
                        str(tmp_path / "c"), "-o", str(tmp_path / "o.jsonl"), sample], capture_output=True, text=True,
                       env=_env(), cwd=tmp_path, check=False)
    assert p.returncode == 0, p.stderr
