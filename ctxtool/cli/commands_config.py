"""config: the resolved settings and where each came from."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ..errors import CtxtoolError, Failure
from . import common
from .common import stdout_console
from .render import emit


def config_cmd(
    keys: Annotated[list[str] | None, typer.Argument(help="Settings to show (default: all), e.g. compaction.reserve_tokens.", show_default=False)] = None,
    as_json: common.JsonOpt = False,
    changed: Annotated[bool, typer.Option("--changed", help="Only settings not at their default.")] = False,
) -> None:
    """Print every setting's resolved value and where it came from: default, file (ctxtool.toml
    or [tool.ctxtool] in pyproject.toml, in this directory or a parent; $CTXTOOL_CONFIG
    names another), env (CTXTOOL_SECTION_NAME) or flag. Commands' flags override all."""
    # lazy: start-up (loaded only when this runs: ..config)
    from ..config import BY_KEY, Config, find_config_file

    cfg = Config()
    items = cfg.items()
    if keys:
        unknown = [k for k in keys if k not in BY_KEY]
        if unknown:
            raise CtxtoolError(f"unknown setting {unknown[0]!r} (see `ctxtool config`)", kind=Failure.USAGE)
        items = [(k, r) for k, r in items if k in keys]
    if changed:
        items = [(k, r) for k, r in items if r.source != "default"]
    found = find_config_file()
    if as_json:
        emit("config", {
            "config_file": str(found[0]) if found else None,
            "settings": {k: {"value": r.value, "source": r.source, "default": BY_KEY[k].default, "help": BY_KEY[k].help} for k, r in items},
        })
        return
    if keys and len(keys) == 1 and items:
        sys.stdout.write(f"{items[0][1].value}\n")
        return
    # lazy: start-up (`ctxtool --help` would load ctxtool.cli.table)
    from .table import SIMPLE_HEAD, Table

    t = Table(title=f"settings (config file: {found[0] if found else 'none'})", title_justify="left",
              box=SIMPLE_HEAD, pad_edge=False)
    for col in ("key", "value", "source", "meaning"):
        t.add_column(col, overflow="fold", no_wrap=col != "meaning")
    for k, r in items:
        v = r.value
        shown = repr(v) if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else f"{v:,}" if isinstance(v, int) else str(v)
        t.add_row(k, shown, r.source, BY_KEY[k].help, style=None if r.source == "default" else "bold")

    stdout_console().print(t)


def register(app: typer.Typer) -> None:
    app.command("config")(config_cmd)
