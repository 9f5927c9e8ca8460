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


def test_every_module_is_on_the_map() -> None:
    """Every module of the package is named on the page (its path, or a dotted name in it)."""
    text = _text()
    named = {".".join(m.split(".")[:i]) for s in _code_spans() for m in re.findall(r"\bctxtool(?:\.\w+)+", s)
             for i in range(2, m.count(".") + 2)}
    named |= {p.removesuffix(".py").removesuffix("/").replace("/", ".") for p in _paths()}
    root = ROOT / "ctxtool"
    missing = []
    for p in sorted(root.rglob("*.py")):
        parts = ["ctxtool", *p.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        if ".".join(parts) not in named and f"`{p.relative_to(ROOT)}`" not in text:
            missing.append(str(p.relative_to(ROOT)))
    assert not missing, f"modules docs/architecture.md does not name: {missing}"


def package_of(module: str) -> str:
    """The node a module is drawn as: its package under ctxtool, or the top-level module
    (``ctxtool`` itself is the public API, ``ctxtool/__init__.py``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "ctxtool"


def package_edges() -> dict[str, set[str]]:
    """Which package imports which, from every import statement of every module (those in
    functions too), as tests/test_import_graph.py reads them."""
    from test_import_graph import graph

    edges: dict[str, set[str]] = {}
    for module, targets in graph().items():
        edges.setdefault(package_of(module), set()).update(
            package_of(t) for t in targets if package_of(t) != package_of(module))
    return edges


def drawn_edges() -> tuple[list[str], dict[str, list[str]]]:
    """The package diagram of docs/architecture.md: the first code block of "## Packages",
    one line per package, ``name ─▶ what it imports`` (a line starting with spaces goes on)."""
    section = _text().split("## Packages", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    order: list[str] = []
    edges: dict[str, list[str]] = {}
    for line in block.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            name, _, line = line.partition("─▶")
            order.append(name.strip())
            edges[order[-1]] = []
        edges[order[-1]] += line.split()
    return order, edges


def diagram(edges: dict[str, set[str]], order: list[str]) -> str:
    """The block as it should read: packages in ``order`` (new ones last), each import in that
    order, marked ``↑`` when it points up the page (packages that import each other both ways)."""
    order = [n for n in order if n in edges] + sorted(set(edges) - set(order))
    lines = []
    for n in order:
        deps = [("↑" if order.index(d) < order.index(n) else "") + d for d in sorted(edges[n], key=order.index)]
        lines.append((f"{n:<13}" + ("─▶ " + " ".join(deps) if deps else "")).rstrip())
    return "\n".join(lines)


def test_the_package_diagram_is_the_imports() -> None:
    order, drawn = drawn_edges()
    real = package_edges()
    expected = diagram(real, order)
    got = diagram({n: {d.lstrip("↑") for d in ds} for n, ds in drawn.items()}, order)
    marks = [f"{n} ─▶ {d}" for n, ds in drawn.items() for d in ds
             if d.startswith("↑") != (order.index(d.lstrip("↑")) < order.index(n))]
    assert got == expected and not marks, (
        "the package diagram of docs/architecture.md is not what the packages import"
        + (f" (wrong ↑ marks: {marks})" if marks else "") + "; it should read:\n" + expected)


def test_the_diagram_reader_sees_edges() -> None:
    edges = {"a": {"b"}, "b": {"c", "a"}, "c": set()}
    assert diagram(edges, ["a", "b", "c"]).splitlines() == ["a            ─▶ b", "b            ─▶ ↑a c", "c"]


def test_the_readme_links_the_doc() -> None:
    assert "docs/architecture.md" in (ROOT / "README.md").read_text(encoding="utf-8")
