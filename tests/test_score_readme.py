"""The README's score section: its console example runs as written against samples/ and prints
what the README shows; its table of the products' compactions is what bench/retention.py
measures on the corpus."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("### score\n"): text.index("### usage\n")]


def test_the_score_console_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    block = re.search(r"```console\n(.*?)```", _section(), re.S)
    assert block is not None
    (tmp_path / "samples").symlink_to(ROOT / "samples")
    env = {**os.environ, "CTXTOOL_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    commands: list[tuple[str, list[str]]] = []
    for line in block.group(1).splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    assert len(commands) == 2
    for cmd, expected in commands:
        argv = shlex.split(cmd)
        assert argv[0] == "ctxtool"
        p = subprocess.run([sys.executable, "-m", "ctxtool", *argv[1:]], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        got = (p.stderr + p.stdout).splitlines() if argv[1] == "compact" else p.stdout.splitlines()
        assert sorted(got) == sorted(expected), cmd


def test_the_readme_table_is_what_the_bench_measures() -> None:
    from conftest import CORPUS

    if not (CORPUS / "pi" / "pi_before-compaction.jsonl").is_file():
        pytest.skip("the corpus is not present")
    sys.path.insert(0, str(ROOT))
    from bench.retention import readme_rows, table

    rows = readme_rows(table(CORPUS, log=lambda s: None))
    assert rows and all(r in _section() for r in rows), "\n".join(rows)
