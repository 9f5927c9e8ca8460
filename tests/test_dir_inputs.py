"""A directory of transcripts as the input of a rewriting command: each file is written under
its own relative name into the output directory, and restore gives every file back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def _ctxtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CTXTOOL_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "ctxtool", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _files(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*") if p.is_file() and not p.name.startswith(".")}


def test_truncate_a_directory_then_restore_gives_each_file_back(tmp_path: Path) -> None:
    tree = tmp_path / "in"
    (tree / "nested").mkdir(parents=True)
    for name in ("claude_code_session.jsonl", "pi_session.jsonl", "openai_chat.json"):
        (tree / name).write_bytes((SAMPLES / name).read_bytes())
    (tree / "nested" / "codex_rollout.jsonl").write_bytes((SAMPLES / "codex_rollout.jsonl").read_bytes())
    r = _ctxtool("truncate", "in", "--max-lines", "5", "--max-bytes", "300", "-o", "cut/", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    written = {f for f in _files(tmp_path / "cut") if not f.startswith("_")}
    assert written == _files(tree)
    assert any((tmp_path / "cut" / f).read_bytes() != (tree / f).read_bytes() for f in written)
    r = _ctxtool("restore", "cut", "-o", "back/", cwd=tmp_path)  # the run's _done and _report.json are not inputs
    assert r.returncode == 0, r.stderr
    back = {f for f in _files(tmp_path / "back") if not f.startswith("_")}
    assert back == written
    for f in back:
        assert (tmp_path / "back" / f).read_bytes() == (tree / f).read_bytes(), f


def test_a_directory_into_one_file_is_refused(tmp_path: Path) -> None:
    r = _ctxtool("window", str(SAMPLES), "--max-messages", "4", "-o", "out.jsonl", cwd=tmp_path)
    assert r.returncode == 2
    assert "give -o DIR/" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out.jsonl").exists()


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "in"
    (tree / "nested").mkdir(parents=True)
    for name in ("claude_code_session.jsonl", "openai_chat.json"):
        (tree / name).write_bytes((SAMPLES / name).read_bytes())
    (tree / "nested" / "pi_session.jsonl").write_bytes((SAMPLES / "pi_session.jsonl").read_bytes())
    return tree


def _stdin(args: list[str], cwd: Path, data: bytes) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "CTXTOOL_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "ctxtool", *args], cwd=cwd, env=env, input=data, capture_output=True,
                          timeout=300)


#: the commands that rewrite transcripts, with their options: a file, a directory into -o DIR/, and -
WRITERS = {
    "convert": ["--to", "ctxtool"],
    "repair": [],
    "archive": ["--tool-call-cutoff", "1"],
    "redact": [],
}


@pytest.mark.parametrize("cmd", sorted(WRITERS))
def test_a_writer_takes_a_file_a_directory_and_stdin(cmd: str, tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    opts = WRITERS[cmd]
    r = _ctxtool(cmd, "in/claude_code_session.jsonl", *opts, "-o", "one.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "one.jsonl").stat().st_size > 0
    r = _ctxtool(cmd, "in", *opts, "-o", "out/", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    written = {f for f in _files(tmp_path / "out") if not f.startswith("_")}
    stems = {os.path.splitext(f)[0] for f in written}
    assert stems == {os.path.splitext(f)[0] for f in _files(tree)}, written
    # each file of the tree is the file run alone, byte for byte
    for f in sorted(written):
        src = next(p for p in _files(tree) if os.path.splitext(p)[0] == os.path.splitext(f)[0])
        alone = tmp_path / "alone" / f
        alone.parent.mkdir(parents=True, exist_ok=True)
        r = _ctxtool(cmd, str(tree / src), *opts, "-o", str(alone), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        if cmd != "redact":  # redact numbers a secret once per run: no secrets in these samples, bytes alike
            assert (tmp_path / "out" / f).read_bytes() == alone.read_bytes(), f
    s = _stdin([cmd, "-", *opts], tmp_path, (tree / "claude_code_session.jsonl").read_bytes())
    assert s.returncode == 0, s.stderr
    assert s.stdout.strip()


@pytest.mark.parametrize("cmd", ["convert", "repair", "archive", "redact"])
def test_a_writer_refuses_a_directory_into_one_file(cmd: str, tmp_path: Path) -> None:
    _tree(tmp_path)
    r = _ctxtool(cmd, "in", *WRITERS[cmd], "-o", "out.jsonl", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "directory" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_a_directory_repaired_then_validated_is_clean(tmp_path: Path) -> None:
    r = _ctxtool("validate", str(SAMPLES), cwd=tmp_path)
    assert r.returncode == 4  # the Cline sample ends with an unanswered call
    r = _ctxtool("repair", str(SAMPLES), "-o", "fixed/", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = _ctxtool("validate", "fixed", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_score_pairs_two_directories_by_relative_path(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    r = _ctxtool("archive", "in", "--tool-call-cutoff", "1", "-o", "after/", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = _ctxtool("score", "in", "after", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    import json

    doc = json.loads(r.stdout)
    assert doc["totals"]["transcripts"] == 3
    (tmp_path / "after" / "nested" / "pi_session.jsonl").unlink()
    r = _ctxtool("score", "in", "after", cwd=tmp_path)
    assert r.returncode == 2 and "nested/pi_session.jsonl has no counterpart" in r.stderr
    r = _ctxtool("score", "in", str(tree / "openai_chat.json"), cwd=tmp_path)
    assert r.returncode == 2 and "a directory with a directory" in r.stderr


#: the commands that read transcripts and write none: each takes a file, a directory and -
READERS = {
    "stats": [], "validate": [], "check": [], "cut": [], "replay": ["--no-chart"], "compactions": [],
    "usage": [], "formats": [], "export": [], "refs gc": [],
}


@pytest.mark.parametrize("cmd", sorted(READERS))
def test_a_reader_takes_a_file_a_directory_and_stdin(cmd: str, tmp_path: Path) -> None:
    _tree(tmp_path)
    argv = [*cmd.split(), *READERS[cmd]]
    r = _ctxtool(*argv, "in/claude_code_session.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = ["-o", "pages/"] if cmd == "export" else []  # many sessions: a directory of pages
    r = _ctxtool(*argv, "in", *out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    s = _stdin([*argv, "-"], tmp_path, (tmp_path / "in" / "claude_code_session.jsonl").read_bytes())
    assert s.returncode == 0, s.stderr
    assert (s.stdout if cmd != "refs gc" else s.stderr).strip()  # gc reports on stderr
