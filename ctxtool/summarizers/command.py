"""A summary model behind any program, run without a shell: the system prompt, a blank line and the
prompt on stdin, the summary on stdout, ``CTXTOOL_SUMMARY_MAX_TOKENS``, ``CTXTOOL_SUMMARY_STYLE``
(and ``CTXTOOL_SUMMARY_MODEL``) in the environment. A non-zero exit, a timeout or an empty stdout
is a :class:`~ctxtool.errors.CtxtoolError` (``Failure.REMOTE``)."""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Any

from ..errors import CtxtoolError, Failure
from ..tokens.context import called_model_window
from . import SummaryRequest, built_from


def create(kind: str = "command", **options: Any) -> CommandSummarizer:
    """Build the command summarizer from the options it takes (``command``, ``model``,
    ``timeout``, ``context_window``, ``max_tokens``); the others are ignored."""
    return built_from(CommandSummarizer, options)


def _argv(command: str | list[str] | tuple[str, ...] | None) -> list[str]:
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as e:
            raise CtxtoolError(f"cannot parse summarizer command: {e}", kind=Failure.USAGE) from e
    elif command:
        argv = [str(a) for a in command]
    else:
        argv = []
    if not argv:
        raise CtxtoolError(
            "the command summarizer needs a program: pass --command or set summarizer.command",
            kind=Failure.USAGE,
        )
    return argv


class CommandSummarizer:
    """Run ``argv`` once per summary; thread-safe (each call is its own process)."""

    name = "command"

    def __init__(
        self,
        command: str | list[str] | tuple[str, ...] | None = None,
        *,
        model: str | None = None,
        timeout: float = 120.0,
        context_window: int | None = None,
        max_tokens: int = 4096,
    ) -> None:
        self.argv = _argv(command)
        if timeout <= 0:
            raise CtxtoolError(f"summarizer timeout must be positive, got {timeout}", kind=Failure.USAGE)
        self.model = model or None
        self.timeout = float(timeout)
        self.max_tokens = int(max_tokens)
        self.context_window = called_model_window(context_window, model)

    def settings(self) -> dict[str, Any]:
        return {
            "kind": "command",
            "argv": list(self.argv),
            "model": self.model,
            "max_tokens": self.max_tokens,
        }

    def __repr__(self) -> str:  # stable across runs (a shard's settings hash)
        return f"CommandSummarizer({self.settings()!r})"

    def summarize(self, req: SummaryRequest) -> str:
        stdin = f"{req.system}\n\n{req.prompt}" if req.system else req.prompt
        max_tokens = min(req.max_tokens, self.max_tokens) if req.max_tokens > 0 else self.max_tokens
        env = dict(os.environ)
        env["CTXTOOL_SUMMARY_MAX_TOKENS"] = str(max_tokens)
        env["CTXTOOL_SUMMARY_STYLE"] = req.style
        if self.model:
            env["CTXTOOL_SUMMARY_MODEL"] = self.model
        prog = self.argv[0]
        try:
            proc = subprocess.run(
                self.argv,
                input=stdin.encode("utf-8", "replace"),  # a lone surrogate becomes "?"
                capture_output=True,
                timeout=self.timeout,
                env=env,
                check=False,
            )
        except FileNotFoundError as e:
            raise CtxtoolError(f"summarizer command not found: {prog}", kind=Failure.REMOTE) from e
        except PermissionError as e:
            raise CtxtoolError(f"summarizer command is not executable: {prog}", kind=Failure.REMOTE) from e
        except subprocess.TimeoutExpired as e:
            raise CtxtoolError(
                f"summarizer command {prog} timed out after {self.timeout:g} s", kind=Failure.REMOTE
            ) from e
        except OSError as e:
            raise CtxtoolError(
                f"cannot run summarizer command {prog}: {e.strerror or e}", kind=Failure.REMOTE
            ) from e
        except ValueError as e:  # a NUL byte in the command line or the environment
            raise CtxtoolError(f"cannot run summarizer command {prog!r}: {e}", kind=Failure.USAGE) from e
        if proc.returncode != 0:
            err = _first_line(proc.stderr.decode("utf-8", "replace"))
            how = (
                f"was killed by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"exited with status {proc.returncode}"
            )
            raise CtxtoolError(
                f"summarizer command {prog} {how}" + (f": {err}" if err else ""), kind=Failure.REMOTE
            )
        out = proc.stdout.decode("utf-8", "replace").strip()
        if not out:
            raise CtxtoolError(f"summarizer command {prog} printed no summary", kind=Failure.REMOTE)
        return out


def _first_line(s: str) -> str:
    for line in s.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""
