"""What the CLI prints for people: control characters made visible, the rich console class
(rich imported on first use), lines on stdout and stderr."""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable
from typing import Any

#: C0 control characters but tab and newline, DEL and the C1 controls: text from a
#: transcript (a tool name, an id, a path, an error quoting them) shows them as visible
#: symbols (ESC as U+241B) instead of sending them to the terminal, where an escape sequence
#: could recolour, hide or rewrite what is shown, or set the clipboard (OSC 52)
_CONTROLS = {c: 0x2400 + c for c in range(32) if c not in (9, 10)} | {0x7F: 0x2421} | dict.fromkeys(range(0x80, 0xA0), 0xFFFD)


def printable(text: str) -> str:
    """``text`` as a terminal may receive it (see :data:`_CONTROLS`); data files are never
    changed so, only what is printed for people to read."""
    return text.translate(_CONTROLS)


class PrintableStream:
    """``stream`` (stdout or stderr) for lines people read (a report, a listing): what is
    written goes through :func:`printable`, so names, ids and paths from transcripts reach
    it without their control characters."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return int(self.stream.write(printable(text)))

    def flush(self) -> None:
        self.stream.flush()


def out_line(text: str) -> None:
    """A line for people on stdout (a listing, a report), as :func:`printable` shows it."""
    PrintableStream(sys.stdout).write(text + "\n")


def err_line(text: str) -> None:
    """One line on stderr (an error, a warning, a report line), whatever it quotes: a
    newline inside (a file name, a value from a record) shows as U+2424, as scripts that
    read errors a line at a time expect; control characters as :func:`printable` shows them."""
    sys.stderr.write(printable(text.rstrip("\n").replace("\r\n", "\n").replace("\n", "\u2424")) + "\n")
    sys.stderr.flush()


#: what ctxtool prints is data (paths, ids, tool names, text from transcripts): never read
#: as rich markup (``[/x]`` in a tool name would end the run) or emoji codes, not highlighted
PLAIN: dict[str, Any] = {"markup": False, "emoji": False, "highlight": False}


def stderr_console() -> Any:
    return console_class()(stderr=True, **PLAIN)


_CONSOLE: Any = None


def console_class() -> Any:
    """The rich Console ctxtool prints through (rich imported on first use): every string
    it renders, a table cell or a line, goes through :func:`printable` first."""
    global _CONSOLE
    if _CONSOLE is None:
        from rich.console import Console

        class DataConsole(Console):
            def render_str(self, text: str, **kwargs: Any) -> Any:
                return super().render_str(printable(text), **kwargs)

            def on_broken_pipe(self) -> None:  # rich would exit 1; the group ends quietly with 0
                self.quiet = True
                raise BrokenPipeError(errno.EPIPE, "Broken pipe")

        _CONSOLE = DataConsole
    return _CONSOLE


def progress_bar(label: str, task: str, *, least: int, eta: bool = False) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """A bar on stderr, a terminal only: ``(update(done, total), stop)``, shown once
    ``total`` reaches ``least``; ``eta``: with the time remaining. Not a terminal:
    ``(None, stop)``, nothing to update."""
    if not sys.stderr.isatty():
        return None, lambda: None
    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        if total < least:
            return
        if "bar" not in state:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), *((TimeRemainingColumn(),) if eta else ()))
            bar = Progress(*columns, console=stderr_console(), transient=True)
            state["task"] = bar.add_task(task, total=total)
            bar.start()
            state["bar"] = bar
        state["bar"].update(state["task"], completed=done)

    def stop() -> None:
        if "bar" in state:
            state["bar"].stop()

    return update, stop
