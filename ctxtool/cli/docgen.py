"""Generate the CLI reference (docs/cli.md) from the app itself: ``python -m ctxtool.cli.docgen``."""

from __future__ import annotations

import sys
from typing import Any


def _help(cmd: Any, name: str, parent: Any = None) -> tuple[str, Any]:
    import typer._click as click  # typer's own click, whichever version ships

    ctx = click.Context(cmd, info_name=name, parent=parent, terminal_width=100, max_content_width=100)
    return str(cmd.get_help(ctx)), ctx


def generate() -> str:

    import typer

    from . import app
    from .names import naming_table

    root = typer.main.get_command(app)
    out = [
        "# ctxtool CLI reference",
        "",
        "Generated from the app by `make docs` (`python -m ctxtool.cli.docgen`); a test fails when it is stale.",
        "",
    ]
    text, rctx = _help(root, "ctxtool")
    out += ["## ctxtool", "", "```text", text.rstrip(), "```", ""]

    leaves: dict[str, Any] = {}

    def walk(group: Any, prefix: str, pctx: Any) -> None:
        for name in group.list_commands(pctx):
            cmd = group.get_command(pctx, name)
            if cmd is None or getattr(cmd, "hidden", False):
                continue
            full = f"{prefix} {name}"
            if not hasattr(cmd, "list_commands"):
                leaves[full.removeprefix("ctxtool ")] = cmd
            text, ctx = _help(cmd, name, pctx)
            out.extend([f"## {full}", "", "```text", text.rstrip(), "```", ""])
            if hasattr(cmd, "list_commands"):
                walk(cmd, full, ctx)

    walk(root, "ctxtool", rctx)
    return "\n".join(out[:4] + ["## Names", "", "One name per idea across commands (`ctxtool/cli/names.py`; "
                                  "`tests/test_cli_names.py` holds every command to it):", "",
                                  naming_table(leaves), ""] + out[4:])


if __name__ == "__main__":
    sys.stdout.write(generate())
