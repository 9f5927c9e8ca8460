"""Inputs are never modified, on the commands whose inputs are not named ``paths`` or ``path``:
``score -o BEFORE`` replaced BEFORE with the report, ``instructions -o AGENTS.md`` replaced an
instruction file it had read with the merged text (exit 0 both); ``instructions ''`` read the
current directory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from io_pipes import SAMPLES, run_ctxtool

from ctxtool.cli.common import INPUT_ARGUMENTS
from ctxtool.cli.exits import ExitCode

#: arguments that name no input file
NOT_FILES = {"match", "keys", "ref", "args", "directory"}  # instructions DIRECTORY: its AGENTS.md files, below


def test_every_argument_naming_input_files_is_known_as_one() -> None:
    """A command whose files come in an argument of another name would let -o replace one."""
    from ctxtool.cli.docgen import leaves

    for path, cmd in leaves().items():
        for p in cmd.params:
            if p.param_type_name == "argument":
                assert p.name in INPUT_ARGUMENTS or p.name in NOT_FILES, (path, p.name)


@pytest.mark.parametrize("which", ["before", "after"])
def test_score_never_writes_over_its_inputs(tmp_path: Path, which: str) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    shutil.copy(SAMPLES / "openai_chat.json", before)
    shutil.copy(SAMPLES / "openai_chat.json", after)
    target = before if which == "before" else after
    r = run_ctxtool("score", "-o", str(target), str(before), str(after), cache=tmp_path / "c")
    assert r.returncode == ExitCode.USAGE and r.stdout == b""
    assert "inputs are never modified" in r.stderr.decode()
    assert target.read_bytes() == (SAMPLES / "openai_chat.json").read_bytes()


@pytest.mark.parametrize("level", ["workdir", "project"])
def test_instructions_never_writes_over_an_instruction_file_it_read(tmp_path: Path, level: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / "sub").mkdir()
    (project / "AGENTS.md").write_text("Project rule.\n")
    (project / "sub" / "AGENTS.md").write_text("Sub rule.\n")
    target = "AGENTS.md" if level == "workdir" else os.path.join("..", "AGENTS.md")
    monkeypatch.setenv("CTXTOOL_CONFIG_DIR", str(tmp_path / "config"))  # no global AGENTS.md
    r = run_ctxtool("instructions", "-o", target, cache=tmp_path / "c", cwd=project / "sub")
    assert r.returncode == ExitCode.USAGE, r.stderr
    assert "inputs are never modified" in r.stderr.decode()
    assert (project / "AGENTS.md").read_text() == "Project rule.\n"
    assert (project / "sub" / "AGENTS.md").read_text() == "Sub rule.\n"
    ok = run_ctxtool("instructions", "-o", "merged.md", cache=tmp_path / "c", cwd=project / "sub")
    assert ok.returncode == 0, ok.stderr
    assert (project / "sub" / "merged.md").read_text() == "Project rule.\n\nSub rule.\n"


def test_instructions_of_an_empty_directory_name_is_no_directory(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("A rule.\n")
    r = run_ctxtool("instructions", "--json", "", cache=tmp_path / "c", cwd=tmp_path)
    assert r.returncode == ExitCode.NOT_FOUND and r.stdout == b""
    assert r.stderr.decode() == "ctxtool: error: '': no such file (the path is empty)\n"


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else b"") for p in sorted(d.rglob("*"))}


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    d = tmp_path / "d"
    d.mkdir()
    shutil.copy(SAMPLES / "openai_chat.json", d / "a.json")
    shutil.copy(SAMPLES / "pi_session.jsonl", d / "b.jsonl")
    return d


@pytest.mark.parametrize("command", [["convert", "--to", "openai"], ["truncate"], ["compact", "--force"], ["redact"]])
def test_a_directory_is_never_written_into_itself(tmp_path: Path, inputs: Path, command: list[str]) -> None:
    """Before, convert wrote a.jsonl (from a.json) and its _done entry into the input directory,
    then stopped at b.jsonl, whose output was itself."""
    before = _tree(inputs)
    r = run_ctxtool(*command, str(inputs), "-o", f"{inputs}/", cache=tmp_path / "c")
    assert r.returncode == ExitCode.USAGE, r.stderr
    assert "inputs are never modified" in r.stderr.decode()
    assert _tree(inputs) == before


def test_no_output_of_a_directory_is_checked_after_another_is_written(tmp_path: Path, inputs: Path) -> None:
    """Every file's output is checked against the inputs before the first is written."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "b.jsonl").symlink_to(inputs / "b.jsonl")
    before, before_out = _tree(inputs), _tree(out)
    r = run_ctxtool("truncate", str(inputs), "-o", f"{out}/", cache=tmp_path / "c")
    assert r.returncode == ExitCode.USAGE and "inputs are never modified" in r.stderr.decode()
    assert _tree(inputs) == before and _tree(out) == before_out


@pytest.mark.parametrize("command", [["truncate", "--preset", "head-tail"], ["redact"]])
def test_an_output_directory_inside_the_input_is_not_read_again(tmp_path: Path, inputs: Path, command: list[str]) -> None:
    """``truncate d -o d/short/`` run twice: before, the second run read d/short/a.json (its own
    output) as an input and wrote d/short/short/a.json. A sharded run's output directory (its
    ``_done/``) is left out of the inputs; one that holds transcripts no such run wrote (redact's
    copies: it keeps no ``_done/``) is refused, nothing written, rather than read or replaced."""
    args = (*command, "--json", str(inputs), "-o", f"{inputs}/short/")
    first = run_ctxtool(*args, cache=tmp_path / "c")
    assert first.returncode == 0, first.stderr
    written = _tree(inputs / "short")
    again = run_ctxtool(*args, cache=tmp_path / "c")
    if command == ["redact"]:
        assert again.returncode == ExitCode.USAGE and "they are inputs" in again.stderr.decode(), again.stderr
    else:
        assert again.returncode == 0, again.stderr
    assert not (inputs / "short" / "short").exists()
    assert {k: v for k, v in _tree(inputs / "short").items() if k != "_report.json"} == \
        {k: v for k, v in written.items() if k != "_report.json"}


@pytest.mark.parametrize("command", ["stats", "validate", "check", "compactions", "usage", "formats", "replay"])
def test_a_report_never_replaces_a_file_of_an_input_directory(tmp_path: Path, inputs: Path, command: str) -> None:
    """``check d -o d/a.json``: before, the report replaced a.json, one of the transcripts read
    (usage left it empty)."""
    before = _tree(inputs)
    r = run_ctxtool(command, str(inputs), "-o", str(inputs / "a.json"), cache=tmp_path / "c")
    assert r.returncode == ExitCode.USAGE, r.stderr
    assert "inputs are never modified" in r.stderr.decode()
    assert _tree(inputs) == before
    # a name no walk reads is no input: written, and written again
    for _ in range(2):
        ok = run_ctxtool(command, str(inputs), "-o", str(inputs / "report.txt"), cache=tmp_path / "c")
        assert ok.returncode in (0, ExitCode.INVALID, ExitCode.THRESHOLD), ok.stderr


@pytest.mark.parametrize(("args", "name"), [
    (["replay", "--plot"], "chart.svg"),
    (["stats", "--per-message", "-o"], "rows.csv"),
    (["export", "-o"], "doc.md"),
], ids=lambda v: v if isinstance(v, str) else v[0])
def test_an_output_linked_to_the_input_is_refused(tmp_path: Path, args: list[str], name: str) -> None:
    """An output of its own suffix that is a link to the input: before, the chart, the rows or
    the document replaced the transcript."""
    src = tmp_path / "in.json"
    shutil.copy(SAMPLES / "openai_chat.json", src)
    (tmp_path / name).symlink_to(src)
    r = run_ctxtool(*args, str(tmp_path / name), str(src), cache=tmp_path / "c")
    assert r.returncode == ExitCode.USAGE, r.stderr
    assert "inputs are never modified" in r.stderr.decode()
    assert src.read_bytes() == (SAMPLES / "openai_chat.json").read_bytes()


def test_an_output_directory_inside_the_input_holding_other_transcripts_is_refused(tmp_path: Path) -> None:
    """``truncate d -o d/sub/`` where d/sub holds transcripts of its own (no earlier run's
    ``_done/``): they are inputs; before, they were left out of the run without a word and
    d/sub/a.jsonl was replaced by d/a.jsonl's output. Refused, nothing written."""
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    shutil.copy(SAMPLES / "claude_code_session.jsonl", d / "a.jsonl")
    shutil.copy(SAMPLES / "codex_rollout.jsonl", d / "sub" / "a.jsonl")
    before = _tree(d)
    r = run_ctxtool("truncate", "--preset", "head-tail", str(d), "-o", f"{d}/sub/", cache=tmp_path / "c")
    assert r.returncode == ExitCode.USAGE and "they are inputs" in r.stderr.decode(), r.stderr
    assert _tree(d) == before


def test_a_link_to_a_file_of_an_input_directory_is_refused(tmp_path: Path) -> None:
    """``stats ../data/d -o report.json`` where report.json links to a transcript of d: the
    report would replace it (a check that asked whether the link's target lies in the link's own
    directory let it through)."""
    d, work = tmp_path / "data" / "d", tmp_path / "work"
    d.mkdir(parents=True)
    work.mkdir()
    shutil.copy(SAMPLES / "codex_rollout.jsonl", d / "a.jsonl")
    (work / "report.json").symlink_to(d / "a.jsonl")
    before = _tree(d)
    r = run_ctxtool("stats", str(d), "-o", "report.json", cache=tmp_path / "c", cwd=work)
    assert r.returncode == ExitCode.USAGE and "inputs are never modified" in r.stderr.decode(), r.stderr
    assert _tree(d) == before


def test_redact_checks_every_copy_before_the_first_is_written(tmp_path: Path) -> None:
    """``redact x/a.jsonl out/b.jsonl -o out/``: out/b.jsonl, an input, would be its own copy;
    refused before x/a.jsonl's copy is written (each output checked against the inputs first)."""
    x, out = tmp_path / "x", tmp_path / "out"
    x.mkdir()
    out.mkdir()
    shutil.copy(SAMPLES / "claude_code_session.jsonl", x / "a.jsonl")
    shutil.copy(SAMPLES / "codex_rollout.jsonl", out / "b.jsonl")
    before = _tree(out)
    r = run_ctxtool("redact", str(x / "a.jsonl"), str(out / "b.jsonl"), "-o", f"{out}/", cache=tmp_path / "c")
    assert r.returncode == ExitCode.USAGE and "inputs are never modified" in r.stderr.decode(), r.stderr
    assert _tree(out) == before
