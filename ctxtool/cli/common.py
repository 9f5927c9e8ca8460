"""Shared CLI plumbing: the app class with one error handler, shared options and consoles
(JSON output: ctxtool.cli.render). Heavy modules are imported inside commands, never here."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from typer._click.types import ParamType
from typer._types import TyperChoice
from typer.core import TyperGroup
from typer.exceptions import Abort, Exit, TyperException

from ..errors import CtxtoolError, Failure, refuse_empty_option
from ..formats import FORMATS
from ..run.engines import ENGINES
from ..run.engines import sharding as make
from .console import err_line
from .exits import ExitCode, exit_code

if TYPE_CHECKING:
    from ..registry import Registry


class State:
    debug: bool = bool(os.environ.get("CTXTOOL_DEBUG"))


def warn_unknown_models(names: Any) -> None:
    """A warning on stderr for each model name (recorded in a transcript) that the registry
    does not know, saying how to add it."""
    names = list(names)
    if not names:  # lazy: start-up (no model recorded: the registry is not even imported)
        return
    # lazy: start-up (`ctxtool --version` would load ctxtool.tokens)
    from ..tokens import models as registry

    for name in registry.unknown(names):
        err_line(f"ctxtool: warning: {registry.missing_hint(name)}")


class CtxGroup(TyperGroup):
    """Turns :class:`CtxtoolError` into one line on stderr and its exit code (no traceback
    unless ``--debug``); unexpected exceptions become exit 1 with a hint."""

    #: name -> typer CommandInfo / TyperInfo, turned into a command only when used: typer's
    #: conversion of every command costs ~100 ms, too much for `ctxtool --version` in a pipe.
    #: Empty here; the root group (ctxtool.cli.RootGroup) has its own.
    lazy: dict[str, Any] = {}  # noqa: RUF012 - read-only on this class

    def list_commands(self, ctx: Any) -> list[str]:
        names = list(self.commands)  # definition order, not alphabetical
        return names + [n for n in self.lazy if n not in self.commands]

    def get_command(self, ctx: Any, name: str) -> Any:
        cmd = self.commands.get(name)
        if cmd is None and name in self.lazy:
            import typer.main as tm

            # lazy: start-up (`ctxtool --version` would load ctxtool.cli.names)
            from .names import accept_former_names

            info = self.lazy[name]
            if isinstance(info, tm.TyperInfo):
                cmd = tm.get_group_from_info(
                    info, pretty_exceptions_short=True, suggest_commands=True, rich_markup_mode=None
                )
                for sub_name, sub in cmd.commands.items():
                    with_output(sub)
                    accept_former_names(sub, f"{name} {sub_name}")
            else:
                cmd = tm.get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=None)
                with_output(cmd)
                accept_former_names(cmd, name)
            self.commands[name] = cmd
        return cmd

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """A command name that is not one: the error names the closest commands (lazy ones too)."""
        try:
            return super().resolve_command(ctx, args)
        except TyperException as e:
            message = getattr(e, "message", "")
            if args and isinstance(message, str) and "Did you mean" not in message and "No such command" in message:
                from difflib import get_close_matches

                close = get_close_matches(args[0], self.list_commands(ctx))
                if close:
                    e.message = f"{message.rstrip('.')}. Did you mean {', '.join(map(repr, close))}?"
            raise

    def invoke(self, ctx: Any) -> Any:
        if sys.stdout is None:  # started with stdout closed (`>&-`): fail on the first write
            sys.stdout = _ClosedStdout()
        try:
            try:
                rv = super().invoke(ctx)
                sys.stdout.flush()  # a closed pipe or a full disk shows here, not at exit
                return rv
            except OSError as e:
                if e.errno not in _WRITE_FAILURES:
                    raise
                # outputs written with -o name themselves (jsonio.atomic_output); what is left
                # is stdout, redirected to a file on a full disk
                raise CtxtoolError(
                    f"cannot write the output: {e.strerror or e}", path=e.filename or "<stdout>", kind=Failure.IO
                ) from e
        except CtxtoolError as e:
            if State.debug:
                traceback.print_exc()
            err_line(f"ctxtool: error: {e}")
            raise Exit(int(exit_code(e))) from None
        except KeyboardInterrupt:
            err_line("ctxtool: interrupted")
            raise Exit(int(ExitCode.INTERRUPTED)) from None
        except BrokenPipeError:
            closed_pipe()
            raise Exit(0) from None
        except (TyperException, Exit, Abort, SystemExit):
            raise
        except Exception as e:  # a bug: say so briefly, with the way to see more
            if isinstance(e, OSError) and e.errno == errno.EPIPE:
                closed_pipe()
                raise Exit(0) from None
            if State.debug:
                traceback.print_exc()
            else:
                err_line(f"ctxtool: internal error: {type(e).__name__}: {e} (run with --debug for a traceback)")
            raise Exit(int(ExitCode.ERROR)) from None


#: the arguments that name a command's input files (the -o FILE :func:`with_output` gives a
#: command is never one of them); tests/test_cli_empty_options.py holds every command to it
INPUT_ARGUMENTS = ("paths", "path", "before", "after")


def _listed(value: Any) -> list[str]:
    """An argument's value as a list of strings (one, several or none)."""
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


DATA_OUTPUT_HELP = "Write what the command prints on stdout to FILE instead (atomically; compressed when it ends in .gz or .zst)."


def with_output(cmd: Any) -> None:
    """Give a command that prints data and has no ``-o`` of its own one: ``-o FILE`` writes
    what it prints on stdout to FILE (:func:`data_to`). Every command gets it as it is built,
    so one added later has it too."""
    if any(p.name in ("output", "data_output") for p in cmd.params):
        return
    from typer.core import TyperOption

    cmd.params.append(TyperOption(param_decls=["data_output", "--output", "-o"], type=PathValue(), metavar="FILE",
                                  help=DATA_OUTPUT_HELP))
    inner = cmd.callback

    def callback(*args: Any, data_output: str | None = None, **kwargs: Any) -> Any:
        inputs = [p for name in INPUT_ARGUMENTS for p in _listed(kwargs.get(name))]
        with data_to(data_output, inputs):
            return inner(*args, **kwargs)

    cmd.callback = callback


@contextlib.contextmanager
def data_to(output: str | None, inputs: Any = ()) -> Iterator[None]:
    """What the block prints on stdout written to ``output`` instead (``None`` or ``-``:
    stdout), atomically: a failure leaves no half-written file, a full disk is exit 8. An exit
    status the command decides (a threshold, problems found) keeps what it wrote."""
    if output is None or output == "-":
        yield
        return
    # lazy: start-up (`ctxtool --version` would load ctxtool.io)
    from ..io.outputs import atomic_output
    from ..io.paths import refuse_overwrite

    refuse_overwrite([str(p) for p in inputs if str(p) != "-"], output)
    decided: Exit | None = None
    old = sys.stdout
    with atomic_output(output) as fh:
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="\n", write_through=True)
        sys.stdout = text
        try:
            try:
                yield
            except Exit as e:
                decided = e
            text.flush()
        finally:
            sys.stdout = old
            text.detach()
    if decided is not None:
        raise decided


def closed_pipe() -> None:
    """The reader of stdout went away (``| head``): end quietly with status 0, as Unix tools do.
    stdout's descriptor now points at /dev/null, so that the flush at interpreter exit of what
    is still buffered neither fails nor prints "Exception ignored ... BrokenPipeError"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # stdout is not a file descriptor (embedded use): nothing is flushed at exit


_WRITE_FAILURES = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


class _ClosedStdout(io.TextIOBase):
    """Stands for a stdout that was closed before ctxtool started."""

    @property
    def buffer(self) -> Any:
        return self

    def write(self, s: Any) -> int:
        raise CtxtoolError("cannot write the output: stdout is closed", path="<stdout>", kind=Failure.IO)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("stdout is closed")


class Choice(TyperChoice[str]):
    """A choice of names listed in help as ``<a|b|c>``; ``names`` may be a function that gives
    them (asked when the command is parsed or its help shown: a registry's names, with what was
    registered since). ``aliases`` (former names) are accepted as the name they map to and
    never listed."""

    def __init__(self, names: Any, aliases: dict[str, str] | None = None, case_sensitive: bool = True) -> None:
        self._names = names
        self.aliases = dict(aliases or {})
        self.case_sensitive = case_sensitive

    @property
    def choices(self) -> Sequence[str]:  # type: ignore[override]
        return tuple(self._names() if callable(self._names) else self._names)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        return super().convert(self.aliases.get(value, value), param, ctx)


class RegistryChoice(Choice):
    """The names of a registry (:class:`ctxtool.registry.Registry`), for an option whose value
    names one of its entries: listed in help as ``<a|b|c>`` (what is registered when the
    command is parsed or its help shown); a value is accepted as the registry accepts it (a
    name, a former name, a spelling it folds: ``claude_code`` for ``claude-code``) and given
    on as the registered name; another is a usage error naming the closest names and every
    choice (:meth:`ctxtool.registry.Registry.unknown`). ``registry``: the registry, or
    ``"module:NAME"`` where it is defined (imported on first use: start-up stays lean);
    ``exclude``: registered names the option does not take, ``what`` then names its values."""

    def __init__(self, registry: Any, exclude: Sequence[str] = (), what: str | None = None) -> None:
        super().__init__(self.names)
        self._registry = registry
        self.exclude = frozenset(exclude)
        self.what = what

    def registry(self) -> Registry[Any]:
        if isinstance(self._registry, str):
            import importlib

            module, _, name = self._registry.partition(":")
            self._registry = getattr(importlib.import_module(module), name)
        return cast("Registry[Any]", self._registry)

    def names(self) -> tuple[str, ...]:
        return tuple(n for n in self.registry().names() if n not in self.exclude)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        reg = self.registry()
        if value in reg and reg.key(value) not in self.exclude:
            return reg.key(value)
        self.fail(reg.unknown(value, among=self.names(), kind=self.what).message, param, ctx)


def registry_option(*decls: str, registry: Any, help: str, exclude: Sequence[str] = (),  # noqa: A002
                    what: str | None = None, **kw: Any) -> Any:
    """A ``typer.Option`` whose value names an entry of ``registry`` (:class:`RegistryChoice`):
    every option of the kind, so that what it accepts, lists and suggests is the registry's."""
    return typer.Option(*decls, click_type=RegistryChoice(registry, exclude, what), help=help, **kw)


class PathValue(ParamType):
    """The value of an option that names a file or directory (every ``-o``, ``--events``,
    ``--cache-dir``, ``--plot``, ``--secrets-from``, ``--transcripts``): an empty one is a usage
    error naming the option (:func:`ctxtool.errors.refuse_empty_option`), given as the command
    line is read, so nothing is read or written first."""

    name = "path"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str):
            refuse_empty_option("/".join(getattr(param, "opts", None) or ["an option"]), value)
        return value


def path_option(*decls: str, help: str, metavar: str = "FILE", **kw: Any) -> Any:  # noqa: A002
    """A ``typer.Option`` whose value names a file (``metavar`` DIR: a directory): :class:`PathValue`."""
    return typer.Option(*decls, click_type=PathValue(), metavar=metavar, help=help, **kw)


class OnError(StrEnum):
    fail = "fail"
    skip = "skip"


# -- shared options (defined once, used by every command) ----------------------------
Paths = Annotated[
    list[str],
    typer.Argument(help="Transcript files (gzip/zstd too), directories (searched recursively) or - for stdin.", show_default=False),
]
OnePath = Annotated[
    str, typer.Argument(help="Transcript file (gzip/zstd too), FIFO, <(process substitution), - for stdin, or a directory "
                        "of transcripts (each written under its own name into -o DIR/).", show_default=False)
]
FormatOpt = Annotated[str | None, registry_option("--format", "-f", registry=FORMATS, help="Input format (default: detected).")]
ToOpt = Annotated[str | None, registry_option("--to", registry=FORMATS, help="Output format (default: the input's).")]
OutOpt = Annotated[
    str | None,
    path_option(
        "--output", "-o",
        help="Output file (default: stdout), compressed when it ends in .gz or .zst. A file is replaced atomically; a FIFO or device is written in place.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
TokenizerOpt = Annotated[
    str | None,
    registry_option("--tokenizer", "-t", registry="ctxtool.tokens.count:ESTIMATORS", help="heuristic (ceil(chars/4), fast), o200k_base or cl100k_base (exact, offline), or calibrated (fitted to the usage the transcript records). Default: heuristic, or the model's encoding with --model."),
]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", metavar="MODEL", help="Model from the registry (an id or a listed alias, see `ctxtool models`): sets the context window and encoding.")]
WindowOpt = Annotated[int | None, typer.Option("--context-window", help="Context window in tokens (overrides the model's).", min=1)]
OnErrorOpt = Annotated[OnError, typer.Option("--on-error", help="fail: stop at the first bad record; skip: report and continue.")]
JobsOpt = Annotated[
    int | None,
    typer.Option("--jobs", "-j", min=1, help="Worker processes for a dataset file (one transcript per line; default: one per core from 8 MB) and for many files (default: one per core from 1 MB of them)."),
]
EngineOpt = Annotated[
    str | None,
    registry_option("--engine", registry=ENGINES, help="Where shards run (default local). Any engine but the default "
                 "(or --join, an input glob, an output directory) writes -o DIR as shards plus _report.json; a re-run skips finished shards."),
]
AddressOpt = Annotated[
    str | None,
    typer.Option("--address", metavar="HOST:PORT", help="--engine ray: join this running cluster (host:port or ray://host:port); default: start a local one."),
]
JoinOpt = Annotated[bool, typer.Option("--join", help="With shards: join them, in order, into the one file -o FILE.")]
MessagesColumnOpt = Annotated[
    str | None,
    typer.Option("--messages-column", help="Parquet datasets (a .parquet file, a directory of shards, a URL): the column holding each row's conversation, OpenAI or ShareGPT messages as a list of structs or a JSON string (default: found: messages, conversations, trajectory, ...)."),
]
MaxInFlightOpt = Annotated[
    int | None,
    typer.Option("--max-in-flight", min=1, help="At most N summary requests at once across all workers (no 429 storms)."),
]


@contextlib.contextmanager
def sharding(engine: str | None, paths: list[str], output: str | None, address: str | None, join: bool,
             jobs: int | None = None) -> Iterator[Any]:
    """The shards a file command runs as (None: a plain run), and the engine closed afterwards."""
    sh = make(engine, paths, output, address=address, join=join, workers=jobs)
    try:
        yield sh
    finally:
        if sh is not None:
            sh.engine.close()


@dataclass(frozen=True)
class RunFlags:
    """The flags a file command that rewrites a transcript runs by (--on-error, --jobs, --engine,
    --address, --join, --messages-column), as one value: a command takes them as a parameter
    ``run: RunFlags`` and :func:`run_flags` puts the six options in its place."""

    on_error: OnError = OnError.fail
    jobs: int | None = None
    engine: str | None = None
    address: str | None = None
    join: bool = False
    messages_column: str | None = None

    def sharding(self, path: str, output: str | None) -> contextlib.AbstractContextManager[Any]:
        """The shards the run of ``path`` into ``output`` takes (:func:`sharding`)."""
        return sharding(self.engine, [path], output, self.address, self.join, self.jobs)

    def keywords(self, engine: Any) -> dict[str, Any]:
        """The library's keywords for these flags, ``engine`` the shards :meth:`sharding` gave."""
        return {"on_error": self.on_error.value, "jobs": self.jobs, "engine": engine,
                "messages_column": self.messages_column}


DEFAULT_RUN = RunFlags()

#: the options of :class:`RunFlags`, in the order a command lists them
_RUN_FLAGS: dict[str, tuple[Any, Any]] = {
    "on_error": (OnErrorOpt, OnError.fail),
    "jobs": (JobsOpt, None),
    "engine": (EngineOpt, None),
    "address": (AddressOpt, None),
    "join": (JoinOpt, False),
    "messages_column": (MessagesColumnOpt, None),
}


def run_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """A command taking ``run: RunFlags`` as one taking its six options in that place (what
    typer reads); each call packs them into the :class:`RunFlags` the command is given."""
    import functools
    import inspect

    sig = inspect.signature(command, eval_str=True)
    params: list[inspect.Parameter] = []
    for p in sig.parameters.values():
        if p.name == "run":
            params += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=opt)
                       for name, (opt, default) in _RUN_FLAGS.items()]
        else:
            params.append(p)

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        flags = RunFlags(**{name: kwargs.pop(name) for name in _RUN_FLAGS})
        return command(**kwargs, run=flags)

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def resolve_model(model: str | None, tokenizer: str | None) -> tuple[Any, str]:
    """Registry entry for ``--model`` and the tokenizer it implies (flag wins). The name is
    strict: an unknown one is a usage error naming the closest registered names."""
    # lazy: start-up (`ctxtool --version` would load ctxtool.tokens)
    from ..tokens.count import model_and_tokenizer

    return model_and_tokenizer(model, tokenizer)


def configured_model(model: str | None, tokenizer: str | None, cfg: Any = None) -> tuple[Any, str]:
    """:func:`resolve_model` for a command: the flags, else what the settings chose (``model``
    and ``tokenizer`` in a config file or ``CTXTOOL_MODEL`` / ``CTXTOOL_TOKENIZER``), else the
    model's own encoding. ``cfg``: the command's :class:`ctxtool.config.Config`, when it has one."""
    if cfg is None:
        # lazy: start-up (`ctxtool --version` would load ctxtool.config)
        from ..config import Config

        cfg = Config({"model": model})
    return resolve_model(model or cfg["model"] or None, cfg.chosen("tokenizer", tokenizer))


def stdout_console() -> Any:
    """stdout for tables and lines people read (:class:`ctxtool.cli.table.Out`): the
    terminal's width, or wide enough when piped; plain text without rich where rich would
    print plain text."""
    # lazy: start-up (`ctxtool --version` would load ctxtool.cli.table)
    from .table import Out

    return Out()


def fmt_int(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


#: what compact and score count, named the same in both: the content of the messages the agent
#: sees since the last compaction (stats' role table counts every message in the file)
SINCE = "message tokens since the last compaction"

#: the rows of a per-transcript table over a dataset; ``--json`` lists every transcript
TABLE_ROWS = 20


def table_rows(items: list[Any], key: Any, what: str) -> tuple[list[Any], str | None]:
    """The rows a per-transcript table shows: every item when there are at most
    :data:`TABLE_ROWS`, else the first :data:`TABLE_ROWS` by ``key`` (largest first, ties in
    input order), with the caption that says so ("20 with the most dropped of 2,388")."""
    if len(items) <= TABLE_ROWS:
        return items, None
    import heapq

    return heapq.nlargest(TABLE_ROWS, items, key=key), table_caption(len(items), what)


def table_caption(total: int, what: str) -> str:
    """The caption of a per-transcript table that shows :data:`TABLE_ROWS` of ``total``."""
    return f"{TABLE_ROWS} {what} of {total:,} (--json lists all)"


def short_label(label: str) -> str:
    """A transcript label (``path#id``) with the path cut to its file name, for tables."""
    import os

    path, sep, rest = label.partition("#")
    return os.path.basename(path) + sep + rest


def warn_skipped(skipped: list[Any]) -> None:
    """One stderr line for the unreadable records ``--on-error skip`` left out."""
    if skipped:
        err_line(f"ctxtool: skipped {len(skipped)} unreadable record(s); first: {skipped[0]}")


def warn_drift(drift: dict[str, Any]) -> None:
    """One stderr line per file holding records of types its format's reader does not know."""
    for path, kinds in drift.items():
        n = sum(kinds.values())
        names = ", ".join(f"{k} ×{c}" for k, c in kinds.most_common(6)) + (", ..." if len(kinds) > 6 else "")
        err_line(f"ctxtool: warning: {path}: {n:,} item(s) of a kind ctxtool does not know (a line's type, a field, "
                 f"a content part), kept verbatim and not counted as messages: {names}")


def json_needs_output(as_json: bool, dry_run: bool, output: str | None, events: str | None = None) -> None:
    """``--json`` puts the report on stdout, so the transcript needs ``-o FILE`` (or ``--dry-run``),
    and the event log ``--events FILE``."""
    if as_json and not dry_run and (output is None or output == "-"):
        raise CtxtoolError("--json prints the report on stdout: write the transcript with -o FILE (or use --dry-run)",
                           kind=Failure.USAGE)
    if as_json and events == "-":
        raise CtxtoolError("--json prints the report on stdout: write the event log with --events FILE",
                           kind=Failure.USAGE)


def report_to_stderr(output: str | None, events: str | None = None, dry_run: bool = False) -> bool:
    """Whether stdout carries a command's data, so that its report goes to stderr: the
    transcript (no ``-o``, or ``-o -``, unless ``--dry-run``) or the event log (``--events -``)."""
    return (not dry_run and (output is None or output == "-")) or events == "-"


ReserveOpt = Annotated[
    int | None, typer.Option("--reserve-tokens", min=0, help="Tokens reserved for the response (default 16384, compaction.reserve_tokens).")
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option("--max-tokens", min=0, help="The effective limit in tokens when no context window is known (default 8000, compaction.max_tokens)."),
]


def resolve_settings(
    *,
    model: str | None = None,
    tokenizer: str | None = None,
    context_window: int | None = None,
    flags: dict[str, Any] | None = None,
) -> tuple[Any, Any, Any]:
    """(Config, ModelInfo | None, Tokenizer) with flags over env over file over defaults."""
    # lazy: start-up (`ctxtool --version` would load ctxtool.config, ctxtool.io)
    from ..config import Config
    from ..tokens.count import get_tokenizer

    f = dict(flags or {})
    f["compaction.context_window"] = context_window
    f["model"] = model
    cfg = Config(f)
    info, tok = configured_model(model, tokenizer, cfg)
    return cfg, info, get_tokenizer(tok)
