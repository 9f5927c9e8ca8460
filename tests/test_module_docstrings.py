"""Module docstrings say in a few lines what the module is for; the design, the formats' details
and the reasons live once in docs/architecture.md (the map), not again at the top of each module.
This is about comments repeating the map, not about a module's size."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ctxtool"

#: the most lines a module docstring may take (aim for six)
MAX_LINES = 10


def docstring_lines(path: Path) -> int:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    return len(doc.strip().splitlines()) if doc else 0


def test_every_module_says_what_it_is_for_in_a_few_lines() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100
    missing = [str(p.relative_to(PACKAGE.parent)) for p in modules if docstring_lines(p) == 0]
    long = [f"{p.relative_to(PACKAGE.parent)}: {n} lines" for p in modules if (n := docstring_lines(p)) > MAX_LINES]
    assert not missing, f"modules without a docstring: {missing}"
    assert not long, (f"module docstrings over {MAX_LINES} lines (say what the module is for; the design "
                      f"goes once into docs/architecture.md): {long}")


def test_the_count_sees_a_long_docstring(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text('"""One.\n\n' + "more\n" * 10 + '"""\nx = 1\n')
    assert docstring_lines(p) == 12
    p.write_text("x = 1\n")
    assert docstring_lines(p) == 0
