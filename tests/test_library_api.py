"""A complete library API: every command of the CLI's table (ctxtool.cli.COMMANDS) that works
on files has its operation exported from ``ctxtool``, called by the command and named in the
README's library section; every export resolves to where it is defined (no shims, no modules
that only pass names on)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import ctxtool
from ctxtool.cli import COMMANDS

ROOT = Path(__file__).resolve().parent.parent

#: command -> what ``ctxtool`` exports for it (the first: the one the command calls)
COMMAND_API: dict[str, tuple[str, ...]] = {
    "stats": ("stats_files",),
    "validate": ("validate_files", "check_messages"),
    "convert": ("convert_file",),
    "formats": ("survey_file",),  # `formats FILE`: what each line type was read as
    "truncate": ("truncate_file",),
    "restore": ("restore_file",),
    "trim": ("trim_file",),
    "refs": ("RefCache", "referenced_refs"),
    "cut": ("cut_files", "cut_file", "CutSettings", "find_cut", "cut_transcript"),
    "check": ("check_files", "check_transcript"),
    "window": ("window_file",),
    "repair": ("repair_file",),
    "archive": ("archive_file",),
    "replay": ("replay_file",),
    "instructions": ("load_instructions",),
    "compact": ("compact_file", "compact_paths", "CompactOptions"),
    "compactions": ("compactions_files",),
    "score": ("score_files",),
    "export": ("export_path", "export_file", "export_pages", "export_index"),
    "usage": ("usage_report",),
    "redact": ("redact_files",),
}

#: commands that read no transcript file, so have no file operation to export
NO_FILE_OPERATION: dict[str, str] = {
    "models": "lists the model registry (ctxtool.tokens.models)",
    "config": "shows the settings and where each comes from (ctxtool.config.Config)",
    "mcp": "serves the cache's tools to an agent over stdio (a server, not an operation on a file)",
}


def library_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[text.index("\n## Library\n"):text.index("\n## Exit codes\n")]


def test_every_command_is_accounted_for() -> None:
    assert not set(COMMAND_API) & set(NO_FILE_OPERATION)
    assert set(COMMANDS) == set(COMMAND_API) | set(NO_FILE_OPERATION)


def test_each_command_operation_is_exported_and_called_by_the_command() -> None:
    for command, names in COMMAND_API.items():
        for name in names:
            assert name in ctxtool._EXPORTS, (command, name)
        first = getattr(ctxtool, names[0])
        source = (ROOT / "ctxtool" / "cli" / f"{COMMANDS[command]}.py").read_text(encoding="utf-8")
        assert re.search(rf"\b{re.escape(first.__name__)}\b", source), (command, names[0])


def test_every_export_resolves_where_it_is_defined() -> None:
    for name, (module, attr) in ctxtool._EXPORTS.items():
        obj = getattr(ctxtool, name)
        assert obj is getattr(importlib.import_module(module), attr)
        assert getattr(obj, "__module__", module) == module, f"{name}: {module} only passes on {obj.__module__}'s"
    assert set(ctxtool.__all__) >= set(ctxtool._EXPORTS)


def test_every_export_is_named_in_the_readme() -> None:
    section = library_section()
    missing = [n for n in ctxtool._EXPORTS if not re.search(rf"(`|\bctxtool\.){re.escape(n)}\b", section)]
    assert not missing, f"exported but not in README.md's library section: {missing}"
    for names in COMMAND_API.values():  # the table of commands lists each
        for n in names:
            assert f"`{n}`" in section, n


def test_no_module_only_passes_names_on() -> None:
    """A module made of imports alone (a shim) or one whose ``__all__`` lists names it does not
    define (a re-export) is gone; ``ctxtool/__init__.py`` (the public API, imported on first
    use) and ``ctxtool.run.engines`` (the engines' names, the shard machinery on first use)
    are the API of their packages."""
    allowed = {ROOT / "ctxtool" / "__init__.py", ROOT / "ctxtool" / "run" / "engines" / "__init__.py"}
    found = []
    for path in sorted((ROOT / "ctxtool").rglob("*.py")):
        if path in allowed:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined: set[str] = set()
        code = []
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if not (isinstance(node, (ast.Import, ast.ImportFrom))
                    or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
                    or (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets))):
                code.append(node)
        imports = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.level]
        if imports and not code:
            found.append(f"{path.relative_to(ROOT)}: imports only")
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                passed_on = [n for n in ast.literal_eval(node.value) if n not in defined]
                if passed_on:
                    found.append(f"{path.relative_to(ROOT)}: __all__ passes on {passed_on}")
    assert not found, found
