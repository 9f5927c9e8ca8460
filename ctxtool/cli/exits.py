"""The exit statuses of the ``ctxtool`` command (documented in the README), and the one
mapping from a library error's kind of failure to its status."""

from __future__ import annotations

from enum import IntEnum

from ..errors import CtxtoolError, Failure


class ExitCode(IntEnum):
    """Exit statuses of the ``ctxtool`` command."""

    OK = 0
    ERROR = 1  # unexpected failure (a bug): shown with a traceback
    USAGE = 2  # bad flags or arguments
    INPUT = 3  # unreadable or malformed input file
    INVALID = 4  # `validate` found structural problems
    THRESHOLD = 5  # a threshold was crossed (`stats --fail-on`, `check` says compact)
    REMOTE = 6  # a summary model, a command or a Ray cluster failed
    NOT_FOUND = 7  # a file, ref or record that does not exist
    IO = 8  # an output could not be written (disk full, I/O error, no permission)
    SECRETS = 9  # `redact --check` found something it would redact
    DEPENDENCY = 10  # a package the command needs is not installed (the error names it and how to install it)
    INTERRUPTED = 130


#: each kind of failure's exit status
EXIT_CODES: dict[Failure, ExitCode] = {
    Failure.USAGE: ExitCode.USAGE,
    Failure.INPUT: ExitCode.INPUT,
    Failure.INVALID: ExitCode.INVALID,
    Failure.THRESHOLD: ExitCode.THRESHOLD,
    Failure.REMOTE: ExitCode.REMOTE,
    Failure.NOT_FOUND: ExitCode.NOT_FOUND,
    Failure.IO: ExitCode.IO,
    Failure.SECRETS: ExitCode.SECRETS,
    Failure.DEPENDENCY: ExitCode.DEPENDENCY,
    Failure.INTERNAL: ExitCode.ERROR,
}


def exit_code(e: CtxtoolError) -> ExitCode:
    """The exit status of a library error."""
    return EXIT_CODES[e.kind]
