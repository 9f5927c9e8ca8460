"""``ctxtool instructions``: the AGENTS.md instruction hierarchy (as adk-code loads it)."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from ..history.archive import STRATEGIES as ARCHIVE_STRATEGIES
from ..io.outputs import atomic_output
from ..io.paths import refuse_overwrite
from . import common, console
from .console import err_line
from .render import emit

# archive --strategy: the archiver's strategies (ctxtool.history.archive.STRATEGIES)
SummaryStrategy = StrEnum("SummaryStrategy", {s: s for s in ARCHIVE_STRATEGIES})  # type: ignore[misc]


# -- archive ---------------------------------------------------------------------------------


def instructions_cmd(
    directory: Annotated[str | None, typer.Argument(help="Working directory (default: the current one).", show_default=False)] = None,
    as_json: common.JsonOpt = False,
    show: Annotated[bool, typer.Option("--print", help="Print the merged instructions on stdout.")] = False,
    output: Annotated[str | None, common.path_option("--output", "-o", help="Write the merged instructions to FILE (atomically).")] = None,
    max_bytes: Annotated[int | None, typer.Option("--max-bytes", min=0, help="Cap on the merged text (default 32 KiB, instructions.max_bytes).")] = None,
    tokenizer: common.TokenizerOpt = None,
) -> None:
    """Find the AGENTS.md instruction hierarchy (as adk-code merges it): the global file in ctxtool's config
    directory, the project root's (found by .git, .hg, go.mod, package.json or pyproject.toml)
    and the working directory's; merge them in that order under the 32 KiB cap and report
    sources, bytes, tokens and whether the text was cut."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.agent, ctxtool.config)
    from ..agent.instructions import load_instructions
    from ..config import Config

    cfg = Config({"instructions.max_bytes": max_bytes})
    tok = cfg.chosen("tokenizer", tokenizer) or "heuristic"
    res = load_instructions(directory, max_bytes=int(cfg["instructions.max_bytes"]), tokenizer=tok)
    if output:
        refuse_overwrite([s.path for s in res.sources if s.found], output)  # an AGENTS.md it read
        with atomic_output(output) as out:
            out.write(res.merged.encode("utf-8"))
        err_line(f"wrote {res.bytes:,} bytes of instructions to {output}")
    if as_json:
        emit("instructions", res.to_json())
        return
    if show:
        sys.stdout.write(res.merged)
        sys.stdout.flush()
        return
    w = console.PrintableStream(sys.stdout)
    w.write(f"directory     {res.directory}\n")
    w.write(f"project root  {res.project_root or '(none found)'}\n")
    for s in res.sources:
        if not s.path:
            state = "no project root"
        elif not s.found:
            state = "not found"
        elif s.same_as:
            state = f"same file as {s.same_as}"
        elif s.included_bytes < s.bytes and res.truncated:
            state = f"{s.bytes:,} bytes, {s.included_bytes:,} included"
        else:
            state = f"{s.bytes:,} bytes"
        w.write(f"  {s.level:<8} {s.path or '-'}  ({state})\n")
    cut = f", cut from {res.total_bytes:,}" if res.truncated else ""
    w.write(
        f"merged: {res.num_sources} source(s), {res.bytes:,} bytes (cap {res.max_bytes:,}{cut}), "
        f"{res.tokens:,} tokens ({res.tokenizer}){' [TRUNCATED]' if res.truncated else ''}\n"
    )


def register(app: typer.Typer) -> None:
    app.command("instructions")(instructions_cmd)
