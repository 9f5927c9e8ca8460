"""``ctxtool mcp``: the tools of :mod:`ctxtool.agent.tools` served over the Model Context Protocol
on stdio with the official MCP SDK (the ``mcp`` extra), imported only by that command. A failing
tool returns an error result with one line saying why; each call runs in an SDK worker thread,
and every call is bounded (a page reads one output once, a search stops after
:data:`ctxtool.agent.tools.GREP_SECONDS`), so a client that goes away ends the server."""

# no "from __future__ import annotations": the SDK reads the tools' annotations, some local to build()

from collections.abc import Sequence
from typing import Annotated, Any

from .. import __version__
from ..errors import CtxtoolError, Failure
from ..tool_outputs.algorithms import GREP, READ
from . import tools as T


def build(cache: Any, transcripts: Sequence[str] = ()) -> Any:
    """An ``MCPServer`` with the three tools over ``cache`` (a :class:`ctxtool.cache.RefCache`);
    ``transcript_search`` reads only under the directories or files ``transcripts``."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        from mcp_types import ToolAnnotations
        from pydantic import Field
    except ImportError as e:
        raise CtxtoolError(
            f"ctxtool mcp needs the MCP Python SDK ({e.name} is missing): pip install 'ctxtool[mcp]'",
            kind=Failure.DEPENDENCY,
        ) from None

    server = MCPServer(
        "ctxtool",
        version=__version__,
        instructions=(
            "Tool outputs that ctxtool truncated, spilled or trimmed out of a transcript are kept whole in a "
            "cache, each under a ref (a sha256, 'ref=...' in the placeholder). Read one with "
            f"{READ}, search them with {GREP}; find where a string appeared in the transcripts "
            f"kept before a compaction with {T.SEARCH}."
        ),
        log_level="WARNING",
    )
    ro = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    roots = list(transcripts)

    def call(fn: Any, *args: Any) -> str:
        try:
            out: str = fn(*args)
        except CtxtoolError as e:
            raise ToolError(T.error_text(e)) from None
        return out

    RefId = Annotated[str, Field(description="The ref: 64 hex digits (the sha256 after 'ref=' in a placeholder) "
                                             "or a unique prefix of at least 8.", max_length=200)]

    @server.tool(name=READ, annotations=ro, structured_output=False)
    def tool_output_cache(
        ref_id: RefId,
        offset: Annotated[int | None, Field(description="First line, 1-based (default 1).")] = None,
        limit: Annotated[int | None, Field(description=f"Lines to return (default {T.DEFAULT_LIMIT}).")] = None,
    ) -> str:
        """Read a tool output kept in the ctxtool cache, by lines: each line as '<number>\\t<text>',
        like a file read tool. A note at the end says how to read the next page."""
        return call(T.read_ref, cache, ref_id, offset, limit)

    @server.tool(name=GREP, annotations=ro, structured_output=False)
    def tool_output_cache_grep(
        pattern: Annotated[str, Field(description="A regular expression (Python syntax).", max_length=1000)],
        ref_id: Annotated[str | None, Field(description="Search only this ref (default: every cached output).",
                                            max_length=200)] = None,
        context: Annotated[int | None, Field(description=f"Lines of context around each match (0-{T.MAX_CONTEXT}).")] = None,
        max_matches: Annotated[int | None, Field(description=f"Stop after N matches (default {T.DEFAULT_MATCHES}).")] = None,
        skip: Annotated[int | None, Field(description="Pass over the first N matches (the next page).")] = None,
        ignore_case: Annotated[bool, Field(description="Match regardless of case.")] = False,
    ) -> str:
        """Search the tool outputs kept in the ctxtool cache for a regular expression: matching
        lines as '<ref>:<line>:<text>' (context lines with '-')."""
        return call(T.grep_refs, cache, pattern, ref_id, context, max_matches, skip, ignore_case)

    @server.tool(name=T.SEARCH, annotations=ro, structured_output=False)
    def transcript_search(
        query: Annotated[str, Field(description="A string to find (any case).", max_length=1000)],
        paths: Annotated[list[str] | None, Field(description="Transcript files or directories (default: all the "
                                                            "server may read).", max_length=100)] = None,
        max_hits: Annotated[int | None, Field(description=f"Stop after N hits (default {T.DEFAULT_HITS}).")] = None,
        skip: Annotated[int | None, Field(description="Pass over the first N hits (the next page).")] = None,
    ) -> str:
        """Find where in agent transcripts a string (a file name, an error) appeared: file, line,
        message index, role and block of each message holding it, with a snippet."""
        return call(T.search, roots, query, paths, max_hits, skip)

    return server


def serve(cache: Any, transcripts: Sequence[str] = ()) -> None:
    """Serve the tools on stdin/stdout until the client closes them."""
    build(cache, transcripts).run("stdio")
