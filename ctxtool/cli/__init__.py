"""The ``ctxtool`` command: parses, calls the library, renders. ``main(argv) -> int``."""

from __future__ import annotations

import gc

# What the CLI's start-up creates lives as long as the process (modules, classes, functions):
# the cyclic collector is paused while it loads, and what loaded is set aside from its later
# passes (gc.freeze; ~3 ms of `ctxtool --version`, measured); it runs as before afterwards.
_collecting = gc.isenabled()
gc.disable()
try:
    import importlib
    import os
    import sys
    from typing import Annotated, Any

    import typer
    from typer.exceptions import Abort, Exit, TyperException

    from .. import __version__
    from .common import CtxGroup, State, closed_pipe
    from .console import err_line
    from .exits import exit_code
finally:
    if _collecting:
        gc.freeze()
        gc.enable()

# Every command, in the order of `ctxtool --help`, with the module that defines it. A module
# is imported only when one of its commands is used (or help lists them all): `ctxtool
# --version` and a single command in a pipe load what they need. A test checks the table
# against what the modules register.
COMMANDS: dict[str, str] = {
    **dict.fromkeys(("stats", "validate", "convert", "formats", "models"), "commands_foundation"),
    **dict.fromkeys(("truncate", "restore", "trim"), "commands_tools"),
    "cut": "commands_cut",
    "check": "commands_check",
    **dict.fromkeys(("window", "repair"), "commands_history"),
    "archive": "commands_archive",
    "replay": "commands_replay",
    "instructions": "commands_instructions",
    "compact": "commands_compact",
    "compactions": "commands_compactions",
    "score": "commands_score",
    "export": "commands_export",
    "config": "commands_config",
    "refs": "commands_tools",
    "usage": "commands_usage",
    "mcp": "commands_mcp",
    "redact": "commands_redact",
}


class RootGroup(CtxGroup):
    """The top-level group: its commands are defined and built on first use."""

    lazy: dict[str, object] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands) + [n for n in COMMANDS if n not in self.commands]

    def get_command(self, ctx: Any, name: str) -> Any:
        if name not in self.commands and name not in self.lazy and name in COMMANDS:
            load_commands(COMMANDS[name])
        return super().get_command(ctx, name)


def load_commands(module: str) -> list[str]:
    """Import one module of commands; returns the names it defines (kept for first use)."""
    mod = importlib.import_module(f"ctxtool.cli.{module}")
    holder = typer.Typer()
    mod.register(holder)
    infos: list[Any] = [*holder.registered_commands, *holder.registered_groups]
    for info in infos:
        RootGroup.lazy[info.name or ""] = info
    return [info.name or "" for info in infos]


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


def entry() -> None:  # pragma: no cover - console script (tests/test_startup.py runs it)
    """The process entry (the ``ctxtool`` script, ``python -m ctxtool``): :func:`main`, then
    the end of the process without tearing the interpreter down. What a run leaves behind is
    settled first (stdout and stderr flushed, the exit handlers run: pending finalizers, the
    process pool's joins, logging); freeing every module and object one by one afterwards
    would only cost time (about 40 ms after ``stats`` on a 200 MB dataset). Under a profiler
    or a tracer (``python -m cProfile -m ctxtool``, coverage), or while a thread other than a
    daemon is still running, the interpreter ends as usual."""
    code = main()
    import threading

    traced = sys.gettrace() is not None or sys.getprofile() is not None  # reports at interpreter exit
    if traced or any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    os._exit(_settle(code))


def _settle(code: int) -> int:
    """Flush stdout and stderr and run the exit handlers, as the interpreter's exit would;
    a stdout that fails now is reported (a closed pipe ends quietly)."""
    import atexit

    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BrokenPipeError:
            closed_pipe()
        except (OSError, ValueError) as e:
            if stream is sys.stdout:
                # lazy: start-up (`ctxtool --version` would load ctxtool.io)
                from ..io.outputs import output_error

                err = output_error(e if isinstance(e, OSError) else OSError(str(e)), None)
                err_line(f"ctxtool: error: {err}")
                code = code or int(exit_code(err))
    atexit._run_exitfuncs()
    return code
