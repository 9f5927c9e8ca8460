"""stats, validate, convert, formats, models."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from .. import formats
from ..errors import CtxtoolError, Failure
from ..formats import FORMATS
from . import common, console
from .commands_redact import RedactFlag, SecretsFromOpt, options
from .common import configured_model, fmt_int, short_label, stdout_console, warn_drift, warn_skipped
from .console import err_line, stderr_console
from .exits import ExitCode
from .render import Emitter, JsonlOpt, emit


class FailOn(StrEnum):
    warning = "warning"
    critical = "critical"


PROGRESS_BYTES = 20 * 1024 * 1024


def stats(
    paths: common.Paths,
    fmt: common.FormatOpt = None,
    tokenizer: common.TokenizerOpt = None,
    model: common.ModelOpt = None,
    context_window: common.WindowOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    fail_on: Annotated[FailOn | None, typer.Option("--fail-on", help="Exit 5 when any transcript reaches this character threshold (AgentCore.Context's warning/critical levels).")] = None,
    warning_chars: Annotated[int | None, typer.Option(min=0, help="Warning threshold in characters of agent-visible context since the last compaction (default 200,000, context.warning_chars; AgentCore.Context).")] = None,
    critical_chars: Annotated[int | None, typer.Option(min=0, help="Critical threshold in characters of agent-visible context since the last compaction (default 400,000, context.critical_chars; AgentCore.Context).")] = None,
    per_message: Annotated[bool, typer.Option("--per-message", help="Write one row per message to -o FILE.csv|.parquet.")] = False,
    output: Annotated[
        str | None,
        common.path_option("--output", "-o", help="Write the report (the table, --json, --jsonl or --count) to FILE instead of stdout, "
                     "atomically; with --per-message, one row per message to FILE.csv or FILE.parquet."),
    ] = None,
    on_error: common.OnErrorOpt = common.OnError.fail,
    top: Annotated[int, typer.Option("--limit", min=0, help="How many of the largest tool outputs to list.")] = 5,
    jobs: common.JobsOpt = None,
    count: Annotated[bool, typer.Option("--count", help="Print only the number of tokens (of the transcripts, or of plain text).")] = False,
    engine: common.EngineOpt = None,
    address: common.AddressOpt = None,
    messages_column: common.MessagesColumnOpt = None,
    accuracy: Annotated[bool, typer.Option("--accuracy", help="Where a transcript records usage, measure each estimate against it, turn by turn: every tokenizer, the calibrated estimate and the default usage-aware one (held-back turns), in the report and in --json. It counts the text again with each tokenizer: asked for, not by default.")] = False,
) -> None:
    """Messages, characters and tokens by role; tool calls and largest outputs; thinking,
    images, system prompt, recorded usage, context percentage and the character thresholds (warning/critical, as AgentCore.Context sets them).
    Input that is not a transcript (text, TOML, a JSON document no format reads, empty input;
    files, - or <(...)) is counted as plain text, like ttok; binary input is an error."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base, ctxtool.formats.walk)
    from ..formats.walk import iter_paths
    from ..stats import files as st

    if per_message and not output:
        raise CtxtoolError("--per-message needs -o FILE.csv or FILE.parquet", kind=Failure.USAGE)
    if output and output != "-" and not per_message:  # the report itself goes to -o FILE
        if output.lower().removesuffix(".gz").removesuffix(".zst").endswith((".csv", ".parquet")):
            raise CtxtoolError("rows per message are written with --per-message; without it -o writes the report",
                               path=output, kind=Failure.USAGE)
        with common.data_to(output, paths):
            stats(paths, fmt, tokenizer, model, context_window, as_json, as_jsonl, fail_on, warning_chars, critical_chars,
                  False, None, on_error, top, jobs, count, engine, address, messages_column, accuracy)
        return
    info, tok = configured_model(model, tokenizer)
    files = list(iter_paths(paths, subagents=True))  # a Claude Code session with its subagents
    if per_message:
        # lazy: start-up (`ctxtool models` would load ctxtool.io)
        from ..io.paths import refuse_overwrite

        refuse_overwrite(files, output)  # a link named .csv may lead to an input
    if _plain_text(files, tok, count, as_json or as_jsonl):
        return
    # lazy: start-up (`ctxtool models` would load ctxtool.io.files)
    from ..io.files import input_size

    size = sum(input_size(f) or 0 for f in files)
    progress_cb = None
    prog = None
    if size >= PROGRESS_BYTES and sys.stderr.isatty():
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        prog = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(), console=stderr_console(), transient=True)
        task = prog.add_task("reading", total=None)
        counter = [0]

        def progress_cb(t):
            counter[0] += 1
            if counter[0] % 50 == 0:
                prog.update(task, description=f"{counter[0]:,} transcripts  {t.path}")

        prog.start()
    from contextlib import ExitStack

    # lazy: start-up (`ctxtool validate` would load ctxtool.config)
    from ..config import Config

    cfg = Config()  # read once: the head and the run resolve the same settings
    em = None
    if (as_json or as_jsonl) and not count:  # each transcript written as it is known: none held
        em = Emitter("stats", st.report_head(tok, info, context_window, cfg), jsonl=as_jsonl)

    stack = ExitStack()  # closes the engine (a local Ray cluster) with the progress bar
    try:
        sh = stack.enter_context(common.sharding(engine, files, None, address, False, jobs))
        report = st.stats_files(
            files,
            tokenizer=tok,
            model=info,
            context_window=context_window,
            fmt=fmt,
            on_error=on_error.value,
            warning_chars=warning_chars,
            critical_chars=critical_chars,
            per_message=per_message,
            progress=progress_cb,
            workers=jobs,
            engine=sh,
            settings=cfg,
            keep=CONTEXT_ROWS,  # the table shows only these
            each=None if em is None else (lambda t: em.item(t.to_json())),  # --json: streamed, none held
            messages_column=messages_column,
            accuracy=accuracy,
        )
    finally:
        stack.close()
        if prog is not None:
            prog.stop()
    machine = as_json or as_jsonl
    report.largest = report.largest[:top] if not machine else report.largest
    if per_message and output:
        st.write_rows(report.rows or [], output)
        err_line(f"wrote {len(report.rows or []):,} rows to {output}")
    warn_skipped(report.skipped)
    if not (context_window or info) and report.overview is not None:
        common.warn_unknown_models(report.overview.models)
    warn_drift(report.overview.drift if report.overview is not None else {})
    if accuracy and not report.totals.usage.calls:
        err_line("--accuracy: no transcript records usage (input tokens per turn), so there is nothing to measure "
                 "the estimates against")
    if count:
        sys.stdout.write(f"{report.totals.tokens}\n")
    elif em is not None:
        d = report.to_json(transcripts=False)
        for k in ("tokenizer", "model", "context_window"):
            del d[k]  # in the head, written with the first transcript
        em.finish(d)
    else:
        _render_stats(report, top)
    if fail_on is not None:
        order = ("ok", "warning", "critical")
        if order.index(report.level) >= order.index(fail_on.value):
            raise typer.Exit(int(ExitCode.THRESHOLD))


def _plain_text(files: list[str], tok: str | None, count: bool, machine: bool) -> bool:
    """Count ``files`` as plain text (like ttok) if none of them is a transcript; whether they were."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.tokens.plain)
    from ..tokens.plain import count_text, is_plain_text

    if not files or not all(is_plain_text(f) for f in files):
        return False
    if machine:
        raise CtxtoolError("plain text, not a transcript: --json/--jsonl describe transcripts; use --count",
                           path=files[0], kind=Failure.USAGE)
    counts = [count_text(f, tok) for f in files]
    total = sum(r.tokens for r in counts)
    if count:
        sys.stdout.write(f"{total}\n")
        return True

    def line(tokens: int, chars: int, lines: int, tokenizer: str) -> str:
        return f"{tokens:,} tokens ({tokenizer}) · {chars:,} characters · {lines:,} line{'s' if lines != 1 else ''} of plain text"

    out = console.PrintableStream(sys.stdout)
    if len(counts) == 1:
        r = counts[0]
        out.write(line(r.tokens, r.chars, r.lines, r.tokenizer) + "\n")
        return True
    for r in counts:
        out.write(line(r.tokens, r.chars, r.lines, r.tokenizer) + f": {r.path}\n")
    out.write(line(total, sum(r.chars for r in counts), sum(r.lines for r in counts), counts[0].tokenizer)
              + f": {len(counts):,} files\n")
    return True


CONTEXT_ROWS = common.TABLE_ROWS  # transcripts in the context table: those with the most context tokens


def _render_stats(report, top: int) -> None:
    # lazy: start-up (`ctxtool --help` would load ctxtool.cli.table, ctxtool.stats.figures)
    from ..stats.figures import most_context
    from .table import Table

    con = stdout_console()
    tot = report.totals
    n = report.count
    title = f"{n:,} transcript{'s' if n != 1 else ''} · tokenizer {report.tokenizer}"
    if report.model:
        title += f" · model {report.model.name}"
    t = Table(title=title, title_justify="left")
    t.add_column("role")
    t.add_column("messages", justify="right")
    t.add_column("chars", justify="right")
    t.add_column("tokens", justify="right")
    t.add_column("share", justify="right")
    for role, rs in tot.by_role.items():
        if rs.messages == 0:
            continue
        share = f"{100 * rs.tokens / tot.tokens:.1f}%" if tot.tokens else "-"
        t.add_row(role, fmt_int(rs.messages), fmt_int(rs.chars), fmt_int(rs.tokens), share)
    t.add_row("total", fmt_int(tot.messages), fmt_int(tot.chars), fmt_int(tot.tokens), "100%", style="bold")
    con.print(t)
    u = tot.usage
    lines = [
        f"tool calls {tot.tool_calls:,} · tool results {tot.tool_results:,} ({tot.tool_errors:,} errors)",
        f"thinking {tot.thinking_blocks:,} blocks, {tot.thinking_tokens:,} tokens · images {tot.images:,}"
        f" · system prompt {tot.system_prompt_tokens:,} tokens · framing overhead {tot.framing_tokens:,} tokens",
    ]
    if tot.documents or tot.saved_outputs:
        lines.append(f"documents {tot.documents:,} · tool outputs the agent saved to files {tot.saved_outputs:,}"
                     " (the transcript holds a reference and a preview)")
    if u.calls:
        lines.append(
            f"recorded usage ({u.calls:,} API messages): input {u.input:,} · output {u.output:,}"
            f" · cache write {u.cache_creation:,} · cache read {u.cache_read:,} · total {u.total:,}"
        )
    for ts in report.transcripts:
        if ts.accuracy is not None:
            head = "" if n == 1 else f"{ts.label}: "
            lines.append(f"{head}estimate vs recorded input ({ts.accuracy.turns:,} turns; error median · p90 · share "
                         "within ±10%):")
            lines += [f"  {x}" for x in ts.accuracy.lines()]
    lines += [("" if n == 1 else f"{ts.label}: ") + rate_limits_line(ts.rate_limits)
              for ts in report.transcripts if ts.rate_limits]
    for ln in lines:
        con.print(ln, highlight=False)
    if tot.tool_calls_by_name:
        tt = Table(title="tool calls", title_justify="left", min_width=24)
        tt.add_column("tool")
        tt.add_column("calls", justify="right")
        for name, c in tot.tool_calls_by_name.most_common(10):
            tt.add_row(name, fmt_int(c))
        con.print(tt)
    if report.largest:
        lt = Table(title=f"largest tool outputs (top {min(top, len(report.largest))})", title_justify="left")
        lt.add_column("tool")
        lt.add_column("tokens", justify="right")
        lt.add_column("chars", justify="right")
        lt.add_column("lines", justify="right")
        lt.add_column("where")
        for o in report.largest[:top]:
            where = short_label(o.transcript) + (f":{o.line}" if o.line else "")
            lt.add_row(o.tool or "?", fmt_int(o.tokens), fmt_int(o.chars), fmt_int(o.lines), where)
        lt.fit(con.width, ("lines", "chars"))
        con.print(lt)
    ct = Table(title="context (since the last compaction, where there is one)", title_justify="left")
    ct.add_column("transcript")
    ct.add_column("messages", justify="right")
    ct.add_column("context tokens", justify="right")
    ct.add_column("source")
    ct.add_column("window", justify="right")
    ct.add_column("used", justify="right")
    ct.add_column("threshold")
    shown = report.transcripts if n <= CONTEXT_ROWS else most_context(report.transcripts, CONTEXT_ROWS)
    for ts in shown:
        pct = ts.context_percent
        ct.add_row(
            short_label(ts.path) if ts.index == 0 and n == 1 else f"{short_label(ts.path)}#{ts.id or ts.index}",
            fmt_int(ts.figures.messages),
            fmt_int(ts.context_tokens),
            ts.context_source,
            fmt_int(ts.context_window),
            "-" if pct is None else f"{pct:.1f}%",
            ts.level,
        )
    if n > CONTEXT_ROWS:
        ct.caption = common.table_caption(n, "with the most context tokens")
    ct.fit(con.width, ("source", "messages"))
    con.print(ct)
    assert report.overview is not None
    levels = report.overview.levels
    con.print(
        f"chars since the last compaction: warning ≥ {report.warning_chars:,}, critical ≥ {report.critical_chars:,}"
        f" (AgentCore.Context):"
        f" ok {levels['ok']:,}, warning {levels['warning']:,}, critical {levels['critical']:,}",
        highlight=False,
    )


def rate_limits_line(rl: dict[str, Any]) -> str:
    """Codex's ``rate_limits`` as it last recorded them: each window's share used."""
    parts = []
    for name in ("primary", "secondary"):
        w = rl.get(name)
        if not isinstance(w, dict) or not isinstance(w.get("used_percent"), (int, float)):
            continue
        mins = w.get("window_minutes")
        span = f" of a {mins:,}-minute window" if isinstance(mins, int) and not isinstance(mins, bool) else ""
        parts.append(f"{name} {w['used_percent']:g}% used{span}")
    return "rate limits at the last token count (Codex): " + (" · ".join(parts) or "recorded, no window figures")


def validate(
    paths: common.Paths,
    fmt: common.FormatOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    limit: Annotated[int, typer.Option("--limit", min=0, help="How many problems to list (all with --json).")] = 50,
    jobs: common.JobsOpt = None,
    messages_column: common.MessagesColumnOpt = None,
) -> None:
    """Check schema (canonical files) and structure: tool results without a call, calls
    without a result, duplicate ids, a trailing assistant message with unanswered calls.
    Exit 4 when anything is wrong."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base)
    from ..history import validate as v

    report = v.validate(paths, fmt, jobs=jobs, messages_column=messages_column)
    if as_json or as_jsonl:
        d = report.to_json()
        totals = {"files": d["files"], "transcripts": d["transcripts"], "messages": d["messages"],
                  "problems": len(report.problems), "problem_counts": d["problem_counts"]}
        emit("validate", items=(c.to_json() for c in report.checked),
             tail={"ok": report.ok, "totals": totals, "problems": d["problems"]}, jsonl=as_jsonl)
    else:
        out = console.PrintableStream(sys.stdout)
        for p in report.problems[:limit]:
            out.write(str(p) + "\n")
        if len(report.problems) > limit:
            out.write(f"... and {len(report.problems) - limit:,} more (use --json for all)\n")
        counts = report.to_json()["problem_counts"]
        summary = ", ".join(f"{k} {c:,}" for k, c in counts.items()) or "no problems"
        out.write(
            f"{report.files:,} file(s), {report.transcripts:,} transcript(s), {report.messages:,} messages: {summary}\n"
        )
    if not report.ok:
        raise typer.Exit(int(ExitCode.INVALID))


def convert(
    path: common.OnePath,
    to: Annotated[str, common.registry_option("--to", registry=FORMATS, help="Output format.")],
    output: common.OutOpt = None,
    fmt: common.FormatOpt = None,
    on_error: common.OnErrorOpt = common.OnError.fail,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
    redact: RedactFlag = False,
    secrets_from: SecretsFromOpt = None,
    join: common.JoinOpt = False,
) -> None:
    """Convert a transcript file (or a directory of them, into -o DIR/) to another format.
    Converting a file to its own format reproduces it; converting to ctxtool and back does
    too. With --json, the report (one entry per transcript) goes to stdout, so the transcript
    needs -o FILE."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base)
    from ..formats.convert import convert_file

    target = formats.writable(formats.get_format(to))
    machine = as_json or as_jsonl
    if machine and (output is None or output == "-"):
        raise CtxtoolError("--json prints the report on stdout: write the transcript with -o FILE", kind=Failure.USAGE)

    with common.sharding(None, [path], output, None, join) as sh:
        run = convert_file(path, output or "-", to, fmt=fmt, on_error=on_error.value, records=machine,
                           redact=options(secrets_from) if redact or secrets_from else None, engine=sh)
    warn_skipped(run.skipped)
    if machine:
        items = run.report.items
        totals = {"transcripts": run.transcripts, "messages": sum(x["messages"] for x in items)}
        emit("convert", {"path": path, "output": output, "to": target.name}, items=items,
             tail={"totals": totals, "skipped": run.skipped}, jsonl=as_jsonl)
    elif output and output != "-":
        err_line(f"wrote {run.transcripts:,} transcript(s) as {target.name} to {output}")


def formats_cmd(
    paths: Annotated[list[str] | None, typer.Argument(help="Files to look at: what each line type was read as.")] = None,
    fmt: common.FormatOpt = None,
    as_json: common.JsonOpt = False,
) -> None:
    """List the transcript formats ctxtool reads and writes: each one's layouts, and whether
    it is written back (a read-only one converts with --to to any format that is). Given
    files: for each, the version of the agent that wrote it and what each type of line was
    read as (a message, a record kept verbatim, a type ctxtool does not know)."""
    if paths:
        # lazy: start-up (`ctxtool --help` would load ctxtool.formats.survey, ctxtool.formats.walk)
        from ..formats.survey import survey_file
        from ..formats.walk import iter_paths

        surveys = [survey_file(p, fmt) for p in iter_paths(paths)]
        if as_json:
            emit("formats", items=[s.to_json() for s in surveys], key="files")
            return
        for s in surveys:
            sys.stdout.write(f"{s.path}: {s.format}, {s.transcripts:,} transcript(s), written by "
                             f"{s.tool_version or 'a version it does not record'}\n")
            width = max((len(kind) for (kind, _h) in s.types), default=4)
            for (kind, how), count in sorted(s.types.items(), key=lambda x: (-x[1], x[0])):
                sys.stdout.write(f"  {kind:<{width}}  {count:>7,}  {how}\n")
        return

    writable = list(formats.writable_names())
    rows = []
    for n in formats.format_names():
        f = formats.get_format(n)
        rows.append({"name": n, "description": f.description, "reads": f.reads, "writes": f.writes,
                     "to": writable if f.writes else [w for w in writable if w != n]})
    if as_json:
        emit("formats", items=rows, key="formats")
    else:
        for r in rows:
            mode = "read/write" if r["writes"] else "read only"
            sys.stdout.write(f"{r['name']:<12} {mode:<10} {r['description']}\n")


def models_cmd(
    match: Annotated[str | None, typer.Argument(help="Only the models whose name or an alias contains this text "
                                                "(e.g. opus, gpt-5).", show_default=False)] = None,
    as_json: common.JsonOpt = False,
) -> None:
    """List the model registry (context window, max output, prices, encoding, the aliases each
    entry also answers to, and where its window and prices came from: litellm's maintained
    table, ctxtool's own entries, or the user's override file)."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.cli.table, ctxtool.tokens.models)
    from ..tokens import models as registry
    from .table import Table

    ms = [m for m in registry.models().values()
          if not match or any(match.lower() in n.lower() for n in (m.name, *m.aliases))]
    src = registry.litellm_source()
    if as_json:
        emit("models", {"override_file": str(registry.user_models_file()), "litellm": src},
             items=[m.to_json() for m in ms], key="models")
        return
    t = Table(title=f"model registry (override: {registry.user_models_file()})", title_justify="left",
              caption=f"litellm: {src.get('from', '-')}, {src.get('licence', '-')}; refreshed {src.get('refreshed', '-')} "
                      f"({src.get('refresh', '-')})")
    t.add_column("model", overflow="fold", min_width=min(max((len(m.name) for m in ms), default=5), 28))
    for c in ("provider", "context", "max output", "$/1M in", "$/1M out", "encoding", "from"):
        t.add_column(c, justify="right" if c not in ("provider", "encoding", "from") else "left")
    t.add_column("aliases", overflow="fold")
    for m in sorted(ms, key=lambda m: m.name):
        t.add_row(m.name, m.provider, fmt_int(m.context_window), fmt_int(m.max_output), f"{m.input_price:g}",
                  f"{m.output_price:g}", m.encoding, m.source, ", ".join(m.aliases))
    con = stdout_console()
    t.fit(con.width, ("aliases", "encoding", "provider", "from", "max output"))
    con.print(t)


def register(app: typer.Typer) -> None:
    app.command("stats")(stats)
    app.command("validate")(validate)
    app.command("convert")(convert)
    app.command("formats")(formats_cmd)
    app.command("models")(models_cmd)
