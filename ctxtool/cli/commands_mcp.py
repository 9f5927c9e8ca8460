"""mcp: the tool output cache as tools an agent calls, over the Model Context Protocol."""

from __future__ import annotations

from typing import Annotated

import typer

from .commands_tools import CacheDirOpt, _cache
from .common import path_option


def mcp_cmd(
    cache_dir: CacheDirOpt = None,
    transcripts: Annotated[
        list[str] | None,
        path_option("--transcripts", metavar="PATH", help="A transcript file or directory transcript_search may read (repeatable; "
                     "default: none, the tool refuses every path)."),
    ] = None,
) -> None:
    """Serve the ref cache to an agent as MCP tools on stdin/stdout: tool_output_cache (read a
    ref by lines), tool_output_cache_grep (search one ref or all) and transcript_search (where a
    string appeared in the transcripts under --transcripts). Read only. Needs the mcp extra:
    pip install 'ctxtool[mcp]'."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.agent)
    from ..agent.mcp_server import serve

    serve(_cache(cache_dir), transcripts or [])


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_cmd)
