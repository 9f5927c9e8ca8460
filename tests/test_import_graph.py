"""No import loops in ctxtool, counting every import statement: those at module level and those
inside functions alike (a function-level import that closes a loop is still a loop; only
``if TYPE_CHECKING:`` blocks, which never run, are left out)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ctxtool"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        parts = ["ctxtool", *p.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _target(name: str, mods: dict[str, Path]) -> str:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name


def imports(name: str, path: Path, mods: dict[str, Path]) -> dict[str, int]:
    """The package's modules that ``name`` imports, each with the line of its first import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking(node)
            for sub in node.body for n in ast.walk(sub)}
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        targets: list[str] = []
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [_target(a.name, mods) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, *([node.module] if node.module else [])])
            if mod == "ctxtool" or mod.startswith("ctxtool."):
                targets = [_target(f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod, mods) for a in node.names]
        for t in targets:
            if t and t != name:
                found.setdefault(t, node.lineno)
    return found


def loops(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        group.append(w)
                        if w == v:
                            break
                    if len(group) > 1:
                        out.append(sorted(group))
    return out


def graph() -> dict[str, dict[str, int]]:
    mods = modules()
    return {m: imports(m, p, mods) for m, p in mods.items()}


def test_no_import_loops() -> None:
    g = graph()
    found = loops(g)
    detail = ["  " + " -> ".join(f"{m} (line {g[m].get(group[(i + 1) % len(group)], '?')})" for i, m in enumerate(group))
              for group in found]
    assert not found, "import loops (counting function-level imports):\n" + "\n".join(detail)


def test_the_graph_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "ctxtool"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("from .. import a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..c import x\n")
    (pkg / "c.py").write_text("")
    mods = {"ctxtool.a": pkg / "a.py", "ctxtool.sub.b": pkg / "sub" / "b.py", "ctxtool.c": pkg / "c.py",
            "ctxtool": pkg / "__init__.py", "ctxtool.sub": pkg / "sub" / "__init__.py"}
    g = {m: imports(m, p, mods) for m, p in mods.items()}
    assert g["ctxtool.a"] == {"ctxtool.sub.b": 2}
    assert g["ctxtool.sub.b"] == {"ctxtool.a": 1}  # the TYPE_CHECKING import does not count
    assert loops(g) == [["ctxtool.a", "ctxtool.sub.b"]]
