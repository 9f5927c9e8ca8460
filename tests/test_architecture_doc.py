"""docs/architecture.md cannot rot: every path, dotted name, test and command it names exists.
(Modules are split where the design has a seam, not at a line count: a long module is a question
for review, not a test.)"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _code_spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", _text())


def _paths() -> list[str]:
    return sorted({s for s in _code_spans() if re.fullmatch(r"(ctxtool|tests|schemas|docs)/[\w./*-]*", s)})


def _dotted() -> list[str]:
    return sorted({m for s in _code_spans() for m in re.findall(r"\bctxtool(?:\.[A-Za-z_]\w*)+", s)})


def resolve(name: str) -> object:
    """The object a dotted name stands for: the longest importable module, then attributes."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as e:
            if e.name is None or not ".".join(parts[:i]).startswith(e.name):
                raise
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(name)


def test_the_doc_names_paths_and_names() -> None:
    assert len(_paths()) > 10 and len(_dotted()) > 100


@pytest.mark.parametrize("path", _paths())
def test_every_path_exists(path: str) -> None:
    assert list(ROOT.glob(path)), f"docs/architecture.md names {path}, which does not exist"


@pytest.mark.parametrize("name", _dotted())
def test_every_dotted_name_exists(name: str) -> None:
    try:
        resolve(name)
    except (ImportError, AttributeError) as e:
        pytest.fail(f"docs/architecture.md names {name}: {e}")


def test_every_named_test_exists() -> None:
    named = re.findall(r"`(tests/\w+\.py)` \(`(test_\w+)`\)", _text())
    assert named
    for path, test in named:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        assert test in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, f"{path} has no {test}"


def test_every_command_and_seed_is_mapped() -> None:
    from ctxtool import cli

    text = _text()
    missing = [c for c in cli.COMMANDS if f"`ctxtool {c}`" not in text and f"`ctxtool {c}` (" not in text]
    assert not missing, f"commands missing from docs/architecture.md: {missing}"
    seeds = sorted(p.name[:3] for p in (ROOT.parent / "shared" / "seeds").glob("[0-9][0-9][0-9]_*.txt")) or [
        "000", "001", "002", "003", "004"]
    rows = re.findall(r"^\| (\d{3}) \|", text, flags=re.MULTILINE)
    assert set(seeds) <= set(rows), "every seed has its mechanisms in the table"


def test_the_readme_links_the_doc() -> None:
    assert "docs/architecture.md" in (ROOT / "README.md").read_text(encoding="utf-8")
