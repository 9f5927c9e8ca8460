"""A directory of transcripts as the input of a rewriting command: each file is written under
its own relative name into the output directory, and restore gives every file back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
