"""The ``ctxtool`` command: parses, calls the library, renders. ``main(argv) -> int``."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from typer.exceptions import Abort, Exit, TyperException

from .. import __version__
from .common import CtxGroup, State


class RootGroup(CtxGroup):
    """The top-level group: its commands are built on first use."""

    lazy: dict[str, object] = {}


app = typer.Typer(
    cls=RootGroup,
    name="ctxtool",
    help="Offline context management for LLM agent transcripts: inspect, validate, convert, "
    "truncate, spill, trim, cut and compact transcript files.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"ctxtool {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    if debug:
        State.debug = True


def _register() -> None:
    from . import commands_foundation

    commands_foundation.register(app)
    # one module per group of commands; each exposes register(app)
    for name in ("commands_tools", "commands_history", "commands_replay", "commands_compact", "commands_config"):
        try:
            mod = __import__(f"ctxtool.cli.{name}", fromlist=["register"])
        except ModuleNotFoundError as e:
            if e.name != f"ctxtool.cli.{name}":
                raise
            continue
        mod.register(app)


_register()
# Commands are built on first use (see CtxGroup.lazy), not at start-up.
RootGroup.lazy = {ci.name or "": ci for ci in app.registered_commands}
RootGroup.lazy.update({gi.name or "": gi for gi in app.registered_groups})
app.registered_commands = []
app.registered_groups = []


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status instead of exiting (for embedding and tests)."""
    try:
        rv = app(args=argv, prog_name="ctxtool", standalone_mode=False)
    except Exit as e:
        return int(e.exit_code)
    except Abort:
        sys.stderr.write("ctxtool: interrupted\n")
        return 130
    except TyperException as e:
        show = getattr(e, "show", None)
        if show:
            show()
        else:
            sys.stderr.write(f"ctxtool: error: {e.format_message()}\n")
        return int(e.exit_code)
    return rv if isinstance(rv, int) else 0


def entry() -> None:  # pragma: no cover - console script
    sys.exit(main())
