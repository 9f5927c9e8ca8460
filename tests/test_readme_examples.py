"""The README's tour cannot drift: every ```console example in README.md is run, in order,
in one working directory holding a copy of samples/ (what a clone has), and its output
compared with the README's. A line ``...`` in the README stands for any lines.

``CTXTOOL_UPDATE_README=1 pytest tests/test_readme_examples.py`` writes the real output
into README.md for the examples that differ (then put back any ``...`` elisions by hand).
The Python library example is run too, each ``print`` against its ``# value`` comment."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
#: the working directory and home the README shows
TOUR, HOME = "/tmp/tour", "/home/me"

pytestmark = pytest.mark.xdist_group("readme")


@dataclass
class Step:
    command: str
    expected: list[str] = field(default_factory=list)
    start: int = 0  # index in the README's lines of the first expected line
    end: int = 0
    indent: int = 0  # of the example (one inside a list item is indented)


@dataclass
class Block:
    steps: list[Step]
    line: int


def console_blocks(lines: list[str]) -> list[Block]:
    """Each console example whose lines start with a ``$`` prompt: its commands (with ``\\``
    continuations) and the output shown after each."""
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^( *)(`{3,})console\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, start = len(m.group(1)), m.group(2), i + 1
        j = start
        while not lines[j].strip().startswith(fence):
            j += 1
        body = [ln[indent:] for ln in lines[start:j]]
        if body and body[0].startswith("$ "):
            steps: list[Step] = []
            k = 0
            while k < len(body):
                cmd = body[k][2:]
                while cmd.endswith("\\"):
                    k += 1
                    cmd = cmd[:-1] + " " + body[k].strip()
                k += 1
                step = Step(cmd, start=start + k, indent=indent)
                while k < len(body) and not body[k].startswith("$ "):
                    step.expected.append(body[k])
                    k += 1
                step.end = start + k
                steps.append(step)
            blocks.append(Block(steps, start))
        i = j + 1
    return blocks


def matches(expected: list[str], actual: list[str]) -> bool:
    pattern = "".join(r"(?:[^\n]*\n)*?" if ln.strip() == "..." else re.escape(ln) + r"\n" for ln in expected)
    return re.fullmatch(pattern, "".join(a + "\n" for a in actual)) is not None


def environment(work: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXTOOL_", "CLAUDE_", "CODEX_", "PI_"))
           and k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), TZ="UTC", LC_ALL="C.UTF-8")
    return env


def run_step(cmd: str, work: Path, env: dict[str, str], last_rc: int) -> tuple[list[str], int]:
    if cmd.strip() == "echo $?":
        return [str(last_rc)], last_rc
    p = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, check=False, timeout=300)
    text = p.stdout.replace(str(work), TOUR).replace(env["HOME"], HOME)
    return text.rstrip("\n").split("\n") if text.strip() else [], p.returncode


@pytest.fixture
def tour(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "tour"
    home = tmp_path / "home"
    shutil.copytree(ROOT / "samples", work / "samples")
    home.mkdir()
    return work, environment(work, home)


def test_every_console_example_prints_what_the_readme_shows(tour):
    work, env = tour
    lines = README.read_text().split("\n")
    blocks = console_blocks(lines)
    assert len(blocks) >= 8
    wrong: list[tuple[Step, list[str]]] = []
    rc = 0
    for block in blocks:
        for step in block.steps:
            actual, rc = run_step(step.command, work, env, rc)
            if not matches(step.expected, actual):
                wrong.append((step, actual))
    if wrong and os.environ.get("CTXTOOL_UPDATE_README"):
        for step, actual in sorted(wrong, key=lambda w: -w[0].start):
            lines[step.start:step.end] = [" " * step.indent + a if a else a for a in actual]
        README.write_text("\n".join(lines))
    report = "\n\n".join(f"$ {s.command}\n--- README\n" + "\n".join(s.expected) + "\n--- real\n" + "\n".join(a)
                         for s, a in wrong)
    assert not wrong, report


def test_the_library_example_prints_what_its_comments_say(tour):
    work, env = tour
    text = README.read_text()
    code = re.search(r"^```python\n(import ctxtool\n.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert code, "the README has its library example"
    src = code.group(1)
    expected = []
    for ln in src.splitlines():
        if ln.startswith("print(") and "#" in ln:
            comment = ln.split("#", 1)[1].strip()
            expected.append(re.sub(r"\s*\(.*\)$", "", comment))
    p = subprocess.run([sys.executable, "-c", src], cwd=work, env=env, capture_output=True, text=True, check=False,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == expected
