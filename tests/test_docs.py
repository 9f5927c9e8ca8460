"""The CLI reference is generated from the app and must be current; every command has help."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxtool.cli import app
from ctxtool.cli.docgen import generate

ROOT = Path(__file__).resolve().parent.parent


def test_cli_reference_is_current() -> None:
    doc = ROOT / "docs" / "cli.md"
    assert doc.exists(), "run `make docs`"
    assert doc.read_text() == generate(), "docs/cli.md is stale: run `make docs`"


def test_every_command_has_help() -> None:
    import typer._click as click

    root = typer.main.get_command(app)
    ctx = click.Context(root, info_name="ctxtool")

    def walk(group, ctx):  # type: ignore[no-untyped-def]
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            assert (cmd.help or "").strip(), f"command {name!r} has no help"
            if hasattr(cmd, "list_commands"):
                walk(cmd, click.Context(cmd, info_name=name, parent=ctx))

    walk(root, ctx)


def test_readme_opens_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    head = text[: text.find("## ", text.find("make test"))]
    assert "make run" in head and "make test" in head


def test_readme_library_example_runs(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The README's Python example is executed as written (from a scratch directory)."""
    import re

    text = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None
    (tmp_path / "samples").symlink_to(ROOT / "samples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    src = code.group(1).replace('RefCache("/tmp/refs")', f'RefCache("{tmp_path / "refs"}")')
    exec(compile(src, "README.md", "exec"), {})
    assert (tmp_path / "compacted.jsonl").exists()


def test_command_table_matches_the_modules() -> None:
    """ctxtool.cli.COMMANDS (what lets a command load only its own module) must name every
    command each module defines, and nothing else."""
    import ctxtool.cli as cli

    defined: dict[str, str] = {}
    for module in dict.fromkeys(cli.COMMANDS.values()):
        for name in cli.load_commands(module):
            defined[name] = module
    assert defined == cli.COMMANDS
