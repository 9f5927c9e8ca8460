"""Generate the CLI reference (docs/cli.md) from the app itself: ``python -m ctxtool.cli.docgen``."""

from __future__ import annotations

import sys
from typing import Any

from . import app


def _context(cmd: Any, name: str, parent: Any = None) -> Any:
    import typer._click as click  # typer's own click, whichever version ships

    return click.Context(cmd, info_name=name, parent=parent, terminal_width=100, max_content_width=100)


def commands() -> dict[str, tuple[Any, Any]]:
    """Every command of the app but hidden ones, the root included (``""``), in the order of
    its help: path ("refs grep") -> (click command, its context). Commands are read from the
    app, so one registered later is listed too."""
    import typer

    root = typer.main.get_command(app)
    rctx = _context(root, "ctxtool")
    out: dict[str, tuple[Any, Any]] = {"": (root, rctx)}

    def walk(group: Any, prefix: str, pctx: Any) -> None:
        for name in group.list_commands(pctx):
            cmd = group.get_command(pctx, name)
            if cmd is None or getattr(cmd, "hidden", False):
                continue
            path = f"{prefix}{name}"
            ctx = _context(cmd, name, pctx)
            out[path] = (cmd, ctx)
            if hasattr(cmd, "list_commands"):
                walk(cmd, path + " ", ctx)

    walk(root, "", rctx)
    return out


def leaves() -> dict[str, Any]:
    """The commands that run (not groups): path -> click command."""
    return {p: c for p, (c, _) in commands().items() if p and not hasattr(c, "list_commands")}


def generate() -> str:
    # lazy: start-up (loaded only when this runs: .names)
    from .names import naming_table

    cmds = commands()
    out = [
        "# ctxtool CLI reference",
        "",
        "Generated from the app by `make docs` (`python -m ctxtool.cli.docgen`); a test fails when it is stale.",
        "",
        "## Names",
        "",
        "One name per idea across commands (`ctxtool/cli/names.py`; `tests/test_cli_names.py` holds every command to it):",
        "",
        naming_table({p: c for p, (c, _) in cmds.items() if p and not hasattr(c, "list_commands")}),
        "",
    ]
    for path, (cmd, ctx) in cmds.items():
        text = str(cmd.get_help(ctx))
        out += [f"## {('ctxtool ' + path).strip()}", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(generate())
