"""truncate, restore, trim and the refs group (the tool output cache)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from ..errors import CtxtoolError, Failure
from ..tool_outputs.algorithms import MODES, PRESET_HELP, PRESETS
from . import common
from .common import configured_model, fmt_int, warn_skipped
from .console import err_line, out_line
from .exits import ExitCode
from .render import JsonlOpt, emit

CacheDirOpt = Annotated[
    str | None,
    common.path_option("--cache-dir", metavar="DIR", help="Ref cache directory (default: $CTXTOOL_CACHE_DIR, else the user cache directory)."),
]
HintOpt = Annotated[
    bool,
    typer.Option("--agent-hint", help="End each transcript with one short system note naming the tools that read "
                 "the cache (tool_output_cache, tool_output_cache_grep: ctxtool mcp)."),
]
EventsOpt = Annotated[
    str | None, common.path_option("--events", help="Write one JSON line per truncation, spill, trim or restore to FILE.")
]


def _cache(cache_dir: str | None) -> Any:
    # lazy: start-up (`ctxtool --help` would load ctxtool.cache, ctxtool.config)
    from ..cache import RefCache, configured_dir

    return RefCache(configured_dir(cache_dir))


_HEAD = ("path", "output", "format", "budget")
_TAIL = ("file_bytes_before", "file_bytes_after")


def _emit_report(rep: Any, output: str | None, events: str | None, as_json: bool, lines: list[str],
                 as_jsonl: bool = False) -> None:
    """The report goes to stdout, unless stdout carries the transcript or the event log;
    warnings (skipped records) always go to stderr."""
    warn_skipped(rep.skipped)
    to_stderr = common.report_to_stderr(output, events)
    if as_json or as_jsonl:
        d = rep.to_json()
        head = {k: d.pop(k) for k in _HEAD if k in d}
        tail = {k: d.pop(k) for k in _TAIL}
        d.pop("op")
        d.pop("skipped", None)
        emit(rep.op, head, items=rep.items or [], tail={"totals": d, **tail, "skipped": rep.skipped},
             jsonl=as_jsonl, to_stderr=to_stderr)
        return
    for ln in lines:
        if to_stderr:
            err_line(ln)
        else:
            out_line(ln)


def _pct(saved: int, before: int) -> str:
    return f"{100 * saved / before:.1f}%" if before else "-"


def _summary(rep: Any, cache_root: Any, tokenizer: str) -> list[str]:
    n = rep.transcripts
    head = f"{rep.op}: {n:,} transcript{'s' if n != 1 else ''} ({rep.format or '-'})"
    if rep.op != "restore":
        head += f", {rep.outputs:,} outputs"
    if rep.op == "truncate":
        head += f": {rep.truncated:,} truncated, {rep.spilled:,} spilled"
    elif rep.op == "trim":
        head += f": {rep.trimmed:,} trimmed (budget {fmt_int(rep.budget)} tokens per transcript)"
    else:
        head += f": {rep.restored:,} message{'s' if rep.restored != 1 else ''} restored"
    out = [head]
    if rep.op != "restore":
        out.append(
            f"tool output bytes {fmt_int(rep.bytes_before)} -> {fmt_int(rep.bytes_after)}"
            f" (saved {fmt_int(rep.bytes_saved)}, {_pct(rep.bytes_saved, rep.bytes_before)})"
        )
        out.append(
            f"tokens ({tokenizer}) {fmt_int(rep.tokens_before)} -> {fmt_int(rep.tokens_after)}"
            f" (saved {fmt_int(rep.tokens_saved)}, {_pct(rep.tokens_saved, rep.tokens_before)})"
        )
        out.append(f"refs written {rep.refs_written:,} to {cache_root}")
    if rep.file_bytes_before is not None and rep.file_bytes_after is not None:
        out.append(f"file {fmt_int(rep.file_bytes_before)} -> {fmt_int(rep.file_bytes_after)} bytes: {rep.output}")
    return out


_PRESETS_HELP = "; ".join(f"{n} ({PRESET_HELP[n]})" for n in PRESETS)
_MODES_HELP = "; ".join(f"{name} ({m.description})" for name, m in MODES.items())


@common.run_flags
def truncate(
    path: common.OnePath,
    output: common.OutOpt = None,
    fmt: common.FormatOpt = None,
    to: common.ToOpt = None,
    preset: Annotated[
        str | None,
        common.registry_option("--preset", registry=PRESETS, show_default=False,
                               help="A system's limits exactly: " + _PRESETS_HELP + ". Default: the tool_output settings (spill's values)."),
    ] = None,
    mode: Annotated[str | None, common.registry_option("--mode", registry=MODES, help=f"How cut outputs are kept: {_MODES_HELP}.")] = None,
    max_lines: Annotated[int | None, typer.Option("--max-lines", min=0, help="Lines kept (default 2000, tool_output.max_lines; 0: off).")] = None,
    head_lines: Annotated[int | None, typer.Option("--head-lines", min=0, help="First lines kept (head-tail preset: 128).")] = None,
    tail_lines: Annotated[int | None, typer.Option("--tail-lines", min=0, help="Last lines kept (head-tail preset: 128).")] = None,
    max_chars: Annotated[int | None, typer.Option("--max-chars", min=0, help="Characters (code points) kept (default 204800, tool_output.max_chars).")] = None,
    max_bytes: Annotated[int | None, typer.Option("--max-bytes", min=0, help="UTF-8 bytes kept (default 51200, tool_output.max_bytes; head-tail preset: 10240).")] = None,
    max_line_length: Annotated[
        int | None, typer.Option("--max-line-length", min=0, help="Cut each line at N characters (view preset: 2000; 0: off).")
    ] = None,
    spill_threshold: Annotated[
        int | None,
        typer.Option("--spill-threshold", min=0, help="Above N characters the whole output moves to the cache (default 204800, tool_output.spill_threshold; 0: off)."),
    ] = None,
    include: Annotated[
        str | None, typer.Option("--include", help="Also cut these kinds (comma-separated): thinking, tool_call, image, all.")
    ] = None,
    cache_dir: CacheDirOpt = None,
    events: EventsOpt = None,
    agent_hint: HintOpt = False,
    tokenizer: common.TokenizerOpt = None,
    model: common.ModelOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    run: common.RunFlags = common.DEFAULT_RUN,
) -> None:
    """Shorten every tool output over the limits (in the Go agent's order: lines, then characters,
    then bytes; spill above the threshold), keeping the full original in the ref cache."""
    # lazy: start-up (`ctxtool mcp` would load ctxtool.agent, ctxtool.config)
    from ..tool_outputs.algorithms import limits_for
    from ..tool_outputs.files import truncate_file

    _, tok = configured_model(model, tokenizer)
    limits = limits_for(preset, max_lines=max_lines, max_bytes=max_bytes, max_chars=max_chars,
                        spill_threshold=spill_threshold, mode=mode, max_line_length=max_line_length,
                        head_lines=head_lines, tail_lines=tail_lines)
    cache = _cache(cache_dir)
    with run.sharding(path, output) as sh:
        rep = truncate_file(
            path, output or "-", limits=limits, include=include, cache=cache, fmt=fmt, to=to,
            events=events, tokenizer=tok, records=as_json or as_jsonl, hint=agent_hint, **run.keywords(sh),
        )
    _emit_report(rep, output, events, as_json, _summary(rep, cache.root, tok), as_jsonl)


@common.run_flags
def restore(
    path: common.OnePath,
    output: common.OutOpt = None,
    fmt: common.FormatOpt = None,
    to: common.ToOpt = None,
    cache_dir: CacheDirOpt = None,
    events: EventsOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    run: common.RunFlags = common.DEFAULT_RUN,
) -> None:
    """Put back the full outputs that truncate, spill and trim moved to the cache:
    the transcript comes back as it was read."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.agent)
    from ..tool_outputs.files import restore_file

    cache = _cache(cache_dir)
    with run.sharding(path, output) as sh:
        rep = restore_file(
            path, output or "-", cache=cache, fmt=fmt, to=to, events=events, records=as_json or as_jsonl,
            **run.keywords(sh),
        )
    _emit_report(rep, output, events, as_json, _summary(rep, cache.root, "heuristic"), as_jsonl)


@common.run_flags
def trim(
    path: common.OnePath,
    budget: Annotated[
        int | None,
        typer.Option("--budget", min=0, help="Token budget for all tool outputs of a transcript (default: clamp(window x 0.25, 20k, 60k))."),
    ] = None,
    output: common.OutOpt = None,
    fmt: common.FormatOpt = None,
    to: common.ToOpt = None,
    model: common.ModelOpt = None,
    context_window: common.WindowOpt = None,
    tokenizer: common.TokenizerOpt = None,
    cache_dir: CacheDirOpt = None,
    events: EventsOpt = None,
    agent_hint: HintOpt = False,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    run: common.RunFlags = common.DEFAULT_RUN,
) -> None:
    """Trim old tool outputs to a token budget (the tool-output cache spec's trimming): while the
    tool outputs exceed the budget, replace the oldest by
    '[tool output trimmed; ref=...]' (full content in the cache); the newest stay. Without
    --budget: clamp(window x 0.25, 20k, 60k) of each transcript's window (--context-window,
    --model, the config, else what the transcript records or its model's)."""
    # lazy: start-up (`ctxtool mcp` would load ctxtool.agent, ctxtool.config, ctxtool.tokens)
    from ..config import Config
    from ..tokens.context import ContextSettings
    from ..tool_outputs.files import configured_budget, trim_file

    cfg = Config({"model": model})
    _, tok = configured_model(model, tokenizer, cfg)
    budget = configured_budget(budget, cfg)
    context = ContextSettings.from_config(cfg, window=context_window, model=model)
    cache = _cache(cache_dir)
    with run.sharding(path, output) as sh:
        rep = trim_file(
            path, output or "-", budget=budget, cache=cache, fmt=fmt, to=to, events=events, tokenizer=tok,
            context=context, records=as_json or as_jsonl, hint=agent_hint, **run.keywords(sh),
        )
    _emit_report(rep, output, events, as_json, _summary(rep, cache.root, tok), as_jsonl)


# -- refs ------------------------------------------------------------------------------------

class RefsGroup(common.CtxGroup):
    """The refs sub-group: its own (empty) lazy table, not the root's commands."""

    lazy: dict[str, Any] = {}  # noqa: RUF012


refs_app = typer.Typer(
    cls=RefsGroup,
    name="refs",
    help="The tool output cache: show, grep, list, verify and garbage-collect refs.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@refs_app.command("show")
def refs_show(
    ref: Annotated[str, typer.Argument(help="Ref id (sha256) or a unique prefix of 8+ hex digits.", show_default=False)],
    offset: Annotated[int, typer.Option("--offset", min=1, help="First line (1-based).")] = 1,
    limit: Annotated[int, typer.Option("--limit", min=0, help="How many lines to print (0: all).")] = 2000,
    cache_dir: CacheDirOpt = None,
    as_json: common.JsonOpt = False,
) -> None:
    """Print a ref's lines with line numbers, like a file reader."""
    res = _cache(cache_dir).show(ref, offset, limit or None)
    if as_json:
        emit("refs show", res.to_json())
        return
    text = res.render()
    sys.stdout.write(text if not text or text.endswith("\n") else text + "\n")
    sys.stdout.flush()
    last = res.lines[-1][0] if res.lines else offset - 1
    if last < res.total_lines:
        err_line(f"[{res.total_lines - last:,} more lines: --offset {last + 1}]")


@refs_app.command("grep")
def refs_grep(
    args: Annotated[list[str], typer.Argument(help="REF PATTERN, or PATTERN with --all.", show_default=False)],
    all_refs: Annotated[bool, typer.Option("--all", help="Search every ref in the cache.")] = False,
    context: Annotated[int, typer.Option("--context", "-C", min=0, help="Lines of context around each match.")] = 0,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i", help="Case-insensitive.")] = False,
    fixed: Annotated[bool, typer.Option("--fixed-strings", "-F", help="PATTERN is a plain string, not a regex.")] = False,
    max_count: Annotated[int | None, typer.Option("--limit", min=1, help="How many matches to list: stop after N (like grep's --max-count).")] = None,
    cache_dir: CacheDirOpt = None,
    as_json: common.JsonOpt = False,
) -> None:
    """Search one ref (or all refs with --all) for a regular expression."""
    if all_refs:
        if len(args) != 1:
            raise CtxtoolError("with --all give only PATTERN", kind=Failure.USAGE)
        refs, pattern = None, args[0]
    else:
        if len(args) != 2:
            raise CtxtoolError("give REF PATTERN (or PATTERN --all)", kind=Failure.USAGE)
        refs, pattern = [args[0]], args[1]
    res = _cache(cache_dir).grep(pattern, refs, context=context, ignore_case=ignore_case, fixed=fixed, max_matches=max_count)
    if as_json:
        emit("refs grep", res.to_json())
        return
    prev = None
    for m in res.matches:
        if context and prev is not None and (m.ref != prev.ref or m.line != prev.line + 1):
            sys.stdout.write("--\n")
        sep = ":" if m.match else "-"
        sys.stdout.write(f"{m.ref[:12]}{sep}{m.line}{sep}{m.text}\n")
        prev = m
    err_line(f"{res.match_count:,} match{'es' if res.match_count != 1 else ''} in {res.refs_searched:,} ref(s)")


@refs_app.command("ls")
def refs_ls(cache_dir: CacheDirOpt = None, as_json: common.JsonOpt = False) -> None:
    """List refs with their size, line count and where they came from."""
    cache = _cache(cache_dir)
    refs = cache.list_refs()
    if as_json:
        totals = {"refs": len(refs), "bytes": sum(r.byte_size for r in refs), "missing": sum(1 for r in refs if not r.present)}
        emit("refs ls", {"cache_dir": str(cache.root)}, items=(r.to_json() for r in refs), key="refs", tail={"totals": totals})
        return
    for r in refs:
        src = r.sources[0] if r.sources else {}
        where = src.get("file", "?")
        if src.get("line"):
            where += f":{src['line']}"
        if src.get("tool"):
            where += f" ({src['tool']})"
        state = "" if r.present else " MISSING"
        lines = f"{r.line_count:>8,}" if r.line_count >= 0 else f"{'?':>8}"
        out_line(f"{r.id[:16]}  {r.kind:<7} {_size(r.byte_size)} B {lines} lines  {where}{state}")
    err_line(f"{len(refs):,} ref(s) in {cache.root}")


@refs_app.command("verify")
def refs_verify(cache_dir: CacheDirOpt = None, as_json: common.JsonOpt = False) -> None:
    """Check every ref file against its sha256; exit 4 when one is corrupted or missing."""
    res = _cache(cache_dir).verify()
    if as_json:
        emit("refs verify", res.to_json())
    else:
        out_line(f"checked {res.checked:,} refs: {res.ok:,} ok")
        for r in res.corrupted:
            why = res.problems.get(r)
            out_line(f"CORRUPTED {r}" + (f" ({why})" if why else ""))
        for r in res.missing:
            out_line(f"MISSING   {r}")
        for r in res.unlisted:
            out_line(f"unlisted  {r} (no manifest entry)")
        for r in res.stray:
            out_line(f"stray     {r} (not a ref name)")
    if not res.clean:
        raise typer.Exit(int(ExitCode.INVALID))


@refs_app.command("gc")
def refs_gc(
    paths: common.Paths,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete (default: dry run, only print).")] = False,
    fmt: common.FormatOpt = None,
    cache_dir: CacheDirOpt = None,
    as_json: common.JsonOpt = False,
) -> None:
    """Delete refs that none of the given transcripts reference. Dry run unless --yes."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.cache)
    from ..tool_outputs.refs import referenced_refs

    referenced = referenced_refs(paths, fmt)
    cache = _cache(cache_dir)
    res = cache.gc(referenced, dry_run=not yes)
    if as_json:
        emit("refs gc", res.to_json())
        return
    verb = "would delete" if res.dry_run else "deleted"
    for r in res.deleted:
        src = r.sources[0].get("file", "?") if r.sources else "?"
        out_line(f"{verb} {r.id}  {r.kind:<7} {_size(r.byte_size)} B  {src}")
    tail = " (dry run: add --yes to delete)" if res.dry_run and res.deleted else ""
    err_line(f"{verb} {len(res.deleted):,} ref(s), {res.bytes_freed:,} bytes on disk; {res.kept:,} kept{tail}")


def _size(n: int) -> str:
    """A content size, right-aligned; ``?`` when unknown (an unreadable ref with no manifest entry)."""
    return f"{n:>12,}" if n >= 0 else f"{'?':>12}"


def register(app: typer.Typer) -> None:
    app.command("truncate")(truncate)
    app.command("restore")(restore)
    app.command("trim")(trim)
    app.add_typer(refs_app, name="refs")
