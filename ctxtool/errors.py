"""One error type for everything a user can get wrong, with distinct exit codes."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit statuses of the ``ctxtool`` command (documented in the README)."""

    OK = 0
    ERROR = 1  # unexpected failure (a bug): shown with a traceback
    USAGE = 2  # bad flags or arguments
    INPUT = 3  # unreadable or malformed input file
    INVALID = 4  # `validate` found structural problems
    THRESHOLD = 5  # a threshold was crossed (`stats --fail-on`, `check` says compact)
    REMOTE = 6  # a summary model or command failed
    NOT_FOUND = 7  # a file, ref or record that does not exist
    IO = 8  # an output could not be written (disk full, I/O error, no permission)
    SECRETS = 9  # `redact --check` found something it would redact
    DEPENDENCY = 10  # a package the command needs is not installed (the error names it and how to install it)
    INTERRUPTED = 130


class CtxtoolError(Exception):
    """A user-facing error: one line on stderr, a distinct exit code, no traceback."""

    def __init__(
        self,
        message: str,
        *,
        code: ExitCode = ExitCode.INPUT,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.path = path
        self.line = line

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:{self.line}: " if self.line is not None else f"{self.path}: "
        return f"{where}{self.message}"


def _rebuild(cls: type[CtxtoolError], message: str, code: int, path: str | None, line: int | None) -> CtxtoolError:
    return cls(message, code=ExitCode(code), path=path, line=line)


def _reduce(self: CtxtoolError) -> tuple[object, tuple[object, ...]]:
    # errors raised in worker processes keep their code, file and line when sent back
    return (_rebuild, (type(self), self.message, int(self.code), self.path, self.line))


CtxtoolError.__reduce__ = _reduce  # type: ignore[method-assign,assignment]
