"""One error type for everything a user can get wrong, with the kind of failure it is."""

from __future__ import annotations

from enum import Enum


class Failure(Enum):
    """What went wrong (the command turns each kind into its exit status: :mod:`ctxtool.cli.exits`)."""

    USAGE = "usage"  # bad flags, arguments or settings
    INPUT = "input"  # unreadable or malformed input file
    INVALID = "invalid"  # structural problems found (`validate`)
    THRESHOLD = "threshold"  # a threshold was crossed (`stats --fail-on`, `check` says compact)
    REMOTE = "remote"  # a summary model, a command or a Ray cluster failed
    NOT_FOUND = "not-found"  # a file, ref or record that does not exist
    IO = "io"  # an output could not be written (disk full, I/O error, no permission)
    SECRETS = "secrets"  # something would be redacted (`redact --check`)
    DEPENDENCY = "dependency"  # a package the operation needs is not installed (the error names it)
    INTERNAL = "internal"  # ctxtool's own check of its work failed (a bug)


class CtxtoolError(Exception):
    """A user-facing error: one line naming the file and line where known, and its kind of failure."""

    def __init__(
        self,
        message: str,
        *,
        kind: Failure = Failure.INPUT,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.path = path
        self.line = line

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            name = self.path or "''"  # an empty path (an unset shell variable) shown as one
            where = f"{name}:{self.line}: " if self.line is not None else f"{name}: "
        return f"{where}{self.message}"


def _rebuild(cls: type[CtxtoolError], message: str, kind: str, path: str | None, line: int | None) -> CtxtoolError:
    return cls(message, kind=Failure(kind), path=path, line=line)


def _reduce(self: CtxtoolError) -> tuple[object, tuple[object, ...]]:
    # errors raised in worker processes keep their kind, file and line when sent back
    return (_rebuild, (type(self), self.message, self.kind.value, self.path, self.line))


CtxtoolError.__reduce__ = _reduce  # type: ignore[method-assign,assignment]


def refuse_empty_path(path: str) -> None:
    """A path a user named, refused when empty: to pathlib ``Path("")`` is the current
    directory, so an unset shell variable (``ctxtool stats "$F"``) would read all of it."""
    if not path:
        raise CtxtoolError("no such file (the path is empty)", path=path, kind=Failure.NOT_FOUND)


def refuse_empty_option(option: str, value: str) -> None:
    """The value of an option that names a file or directory (``-o``, ``--events``,
    ``--cache-dir`` ...), refused when empty: a usage error naming the option. An unset shell
    variable (``-o "$OUT"``) would otherwise mean no option at all (stdout, the default cache)
    or, to pathlib, the current directory."""
    if not value:
        raise CtxtoolError(f"{option}: the path is empty", kind=Failure.USAGE)
