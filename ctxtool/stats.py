"""What is in a transcript: messages, characters and tokens by role, tool calls and
outputs, thinking, images, system prompt, recorded usage, context percentage and the
seed 002 warning/critical thresholds: how they are counted (the figures themselves:
:mod:`ctxtool.stats_figures`, re-exported here).
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from . import formats
from .context import ContextSettings, last_model, resolve
from .errors import CtxtoolError
from .formats.base import ErrorPolicy
from .model import (
    IMAGE_CHARS,
    IMAGE_TOKENS,
    KIND_INJECTED,
    Message,
    Transcript,
    heuristic_tokens,
    is_injected,
)
from .pairing import tool_names
from .stats_figures import (  # noqa: F401  (re-exported: ctxtool.stats.Figures ...)
    BATCH_MESSAGES,
    CRITICAL_CHARS,
    LEVELS,
    STATS_ROWS,
    TOP_OUTPUTS,
    WARNING_CHARS,
    Figures,
    Overview,
    RoleStats,
    StatsReport,
    ToolOutput,
    TranscriptStats,
    UsageTotals,
    most_context,
)
from .timestamps import iso, span
from .tokens import (
    FRAMING_PER_MESSAGE,
    FRAMING_PER_REPLY,
    Tokenizer,
    get_tokenizer,
)
from .toolout import SAVED_OPEN, saved_output

if TYPE_CHECKING:
    from .registry import ModelInfo


def threshold_level(chars: int, warning: int = WARNING_CHARS, critical: int = CRITICAL_CHARS) -> str:
    """Seed 002 check_size (the ``chars`` policy): ``critical`` at/above the critical
    threshold, then ``warning``."""
    from .policies import Measure, PolicySettings, get

    return get("chars").evaluate(Measure(0, chars), PolicySettings(warning_chars=warning, critical_chars=critical)).status


def threshold_levels(warning: int = WARNING_CHARS, critical: int = CRITICAL_CHARS) -> Callable[[int], str]:
    """:func:`threshold_level` with the ``chars`` policy's thresholds resolved once (the
    status of the last one reached, as ``Policy.evaluate``): for one call per transcript."""
    from .policies import PolicySettings, get

    lim = get("chars").limits(None, PolicySettings(warning_chars=warning, critical_chars=critical))

    def level(chars: int) -> str:
        status = lim.status
        for th in lim.thresholds:
            if th.reached(chars):
                status = th.status
        return status

    return level


def transcript_stats(
    t: Transcript,
    counts: list[int] | None,
    tok: Tokenizer,
    *,
    context_window: int | None = None,
    warning_chars: int = WARNING_CHARS,
    critical_chars: int = CRITICAL_CHARS,
    rows: list[dict[str, Any]] | None = None,
    context: ContextSettings | None = None,
    accuracy: bool = False,
) -> TranscriptStats:
    """Fold one transcript's messages into figures. ``counts`` are the messages' exact token
    counts; ``None`` means the heuristic (computed here from the characters). ``accuracy``:
    measure each estimate against the usage the transcript records (it counts the text again
    with every tokenizer and fits the calibration: asked for, not by default)."""
    msgs = t.messages
    f = Figures()
    outputs: list[tuple[int, int, Message, Any]] = []
    seen_usage: set[str] = set()
    heuristic = counts is None
    all_counts: list[int] = []
    all_chars: list[int] = []
    calls_by_name = f.tool_calls_by_name
    for i, m in enumerate(msgs):
        chars = 0
        images = 0
        for b in m.content:
            bt = b.type
            if bt == "text":
                chars += len(b.text)
            elif bt == "tool_result":
                n_out = len(b.text)
                chars += n_out
                f.tool_results += 1
                if b.is_error:
                    f.tool_errors += 1
                if n_out:
                    outputs.append((n_out, i, m, b))
                    if b.text.startswith(SAVED_OPEN) and saved_output(b.text) is not None:
                        f.saved_outputs += 1
            elif bt == "tool_call":
                chars += b.chars()
                f.tool_calls += 1
                calls_by_name[b.name or "?"] += 1
            elif bt == "thinking":
                chars += len(b.text)
                f.thinking_blocks += 1
                f.thinking_chars += len(b.text)
                if b.text:
                    f.thinking_tokens += tok.count(b.text)
            elif bt == "image":
                images += 1
                if isinstance(b.data, dict) and b.data.get("type") == "document":  # formats.images.is_document
                    f.documents += 1
                else:
                    f.images += 1
            else:
                chars += len(b.text)
        n = heuristic_tokens(chars) + images * IMAGE_TOKENS if heuristic else counts[i]  # type: ignore[index]
        all_counts.append(n)
        chars += images * IMAGE_CHARS
        all_chars.append(chars)
        f.tokens += n
        f.chars += chars
        f.add_message(KIND_INJECTED if is_injected(m) else m.role, n, chars)
        if m.role == "system":
            f.system_prompt_chars += chars
            f.system_prompt_tokens += n
        if m.usage is not None:
            key = m.usage_key or f"#{i}"
            if key not in seen_usage:
                seen_usage.add(key)
                f.usage.input += m.usage.input
                f.usage.output += m.usage.output
                f.usage.cache_creation += m.usage.cache_creation
                f.usage.cache_read += m.usage.cache_read
                f.usage.api_messages += 1
        if rows is not None:
            rows.append(
                {
                    "transcript": t.label,
                    "index": i,
                    "id": m.id,
                    "line": m.lineno,
                    "role": m.role,
                    "kind": m.metadata.kind,
                    "agent_visible": m.agent_visible,
                    "chars": chars,
                    "tokens": n,
                    "tool_calls": sum(1 for b in m.content if b.type == "tool_call"),
                    "tool_results": sum(1 for b in m.content if b.type == "tool_result"),
                    "tools": ",".join(b.name or "?" for b in m.content if b.type == "tool_call"),
                }
            )
    f.messages = len(msgs)
    f.unknown_types = formats.unknown_records(t)
    f.framing_tokens = FRAMING_PER_MESSAGE * f.messages + (FRAMING_PER_REPLY if f.messages else 0)
    first, last = span(t)
    ctx = resolve(t, settings=context or ContextSettings(window=context_window), tokenizer=tok, counts=all_counts,
                  chars=all_chars)
    largest: list[ToolOutput] = []
    if outputs:
        names = tool_names(msgs)
        label = t.label
        for n_out, i, m, b in heapq.nlargest(TOP_OUTPUTS, outputs, key=lambda o: o[0]):
            out_tokens = all_counts[i] if len(m.content) == 1 else (heuristic_tokens(n_out) if heuristic else tok.count(b.text))
            largest.append(
                ToolOutput(label, m.id, m.lineno, names.get(b.id or "", b.name), out_tokens, n_out, b.text.count("\n") + 1)
            )
    return TranscriptStats(
        path=t.path,
        index=t.index,
        id=t.id,
        format=t.format,
        figures=f,
        context_tokens=ctx.tokens,
        context_source=ctx.tokens_source,
        context_window=ctx.window,
        level=threshold_level(ctx.chars, warning_chars, critical_chars),
        largest=largest,
        label=t.label,
        model=last_model(t),
        first_timestamp=iso(first),
        last_timestamp=iso(last),
        accuracy=_accuracy(t) if accuracy and f.usage.api_messages else None,
        rate_limits=rl if isinstance(rl := t.extra.get("rate_limits"), dict) else None,
    )


def _accuracy(t: Transcript) -> Any:
    """Each tokenizer's error against the input tokens the transcript records."""
    from .calibration import accuracy

    return accuracy(t)


def stats(
    paths: Iterable[str],
    *,
    tokenizer: str | None = None,
    model: ModelInfo | None = None,
    context_window: int | None = None,
    fmt: str | None = None,
    on_error: str = "fail",
    warning_chars: int | None = None,
    critical_chars: int | None = None,
    per_message: bool = False,
    progress: Callable[[Transcript], None] | None = None,
    workers: int | None = None,
    settings: Any = None,
    fast: bool = True,
    engine: Any = None,
    keep: int | None = None,
    each: Callable[[TranscriptStats], None] | None = None,
    messages_column: str | None = None,
    accuracy: bool = False,
) -> StatsReport:
    """Statistics over every transcript of ``paths`` (files, directories or ``-``).

    Large dataset files (one record per line) are read by ``workers`` processes (default:
    one per core from 8 MB; see :func:`ctxtool.runner.run_file`); otherwise exact tokenizers
    use every core through tiktoken's threads.
    The window of each transcript and its context tokens come from :func:`ctxtool.context.resolve`
    (``context_window``/``model`` as the flags, then ``settings``, a ``Config``: default the
    environment's); the seed 002 thresholds default to ``context.warning_chars`` /
    ``context.critical_chars``. ``fast``: dataset records are tallied from their parsed
    values where that gives the same figures (:mod:`ctxtool.stats_fast`); False reads every
    transcript into the full model. ``engine``: each file run as shards
    (:class:`ctxtool.engines.Sharding`). ``keep``: hold only the ``keep`` transcripts with
    the most context tokens (memory flat however many there are; the totals, levels, models
    and timestamps still count every one); None: all, in input order. ``each``: called with
    every transcript's figures in input order as they are known, none of them held (the
    report's ``transcripts`` is empty): a stream in flat memory. ``messages_column``: a Parquet
    dataset's conversation column (:mod:`ctxtool.parquet`; None: found). ``accuracy``: each
    transcript that records usage gets its estimates' error against it
    (:func:`ctxtool.calibration.accuracy`: every tokenizer, the calibrated estimate on held-back
    turns and the default usage-aware one).
    """
    from .manyfiles import run_files  # many files: whole files on every core
    from .stats_op import StatsOp, StatsPart

    tok, cs, window, cfg = _setup(tokenizer, model, context_window, settings)
    warning_chars = int(cfg["context.warning_chars"]) if warning_chars is None else warning_chars
    critical_chars = int(cfg["context.critical_chars"]) if critical_chars is None else critical_chars
    op = StatsOp(tok.name, cs, warning_chars, critical_chars, per_message, fast, 0 if each else keep, each,
                 accuracy=accuracy)
    policy = ErrorPolicy(on_error)
    total = StatsPart(Figures(), [], [], [], [] if per_message else None, keep=op.keep)
    runs = run_files(op, list(formats.iter_paths(paths, subagents=True)), fmt=fmt, on_error=on_error, jobs=workers,
                     progress=progress, engine=engine, messages_column=messages_column)
    with contextlib.closing(runs) as it:  # an error stops the worker processes now, not at exit
        for run in it:
            if isinstance(run, CtxtoolError):
                policy.handle(run)
                continue
            total.merge(run.report)
            total.skipped.extend(run.skipped)
    total.skipped.extend(str(e) for e in policy.skipped)
    return StatsReport(
        tokenizer=tok.name,
        model=model,
        context_window=window,
        warning_chars=warning_chars,
        critical_chars=critical_chars,
        totals=total.totals,
        transcripts=total.kept(),
        largest=total.largest,
        skipped=total.skipped,
        rows=total.rows,
        overview=total.overview,
        kept=op.keep,
    )


def report_head(tokenizer: str | None = None, model: ModelInfo | None = None, context_window: int | None = None,
                settings: Any = None) -> dict[str, Any]:
    """The fields of :meth:`StatsReport.to_json` known before any transcript is read (the
    tokenizer, the model, the window the flags give), as :func:`stats` sets them."""
    tok, _, window, _ = _setup(tokenizer, model, context_window, settings)
    return {"tokenizer": tok.name, "model": model.to_json() if model else None, "context_window": window}


def _setup(tokenizer: str | None, model: ModelInfo | None, context_window: int | None,
           settings: Any) -> tuple[Tokenizer, ContextSettings, int | None, Any]:
    from .config import Config

    tok = get_tokenizer(tokenizer or "heuristic")
    cfg = settings if settings is not None else Config()
    cs = ContextSettings.from_config(cfg, window=context_window, model=model.name if model else None)
    return tok, cs, cs.resolve(None).window if (context_window or model) else None, cfg


def write_rows(rows: list[dict[str, Any]], path: str) -> None:
    """Per-message rows to CSV or Parquet (by extension), atomically, through polars."""
    import io
    import os

    import polars as pl

    from .errors import CtxtoolError, ExitCode
    from .jsonio import atomic_output

    suffix = os.path.splitext(path)[1].lower()
    if suffix not in (".csv", ".parquet"):
        raise CtxtoolError("per-message output must end in .csv or .parquet", code=ExitCode.USAGE, path=path)
    df = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
    buf = io.BytesIO()  # serialized first: polars would wrap a failed write (a full disk) in its own error
    if suffix == ".csv":
        df.write_csv(buf)
    else:
        df.write_parquet(buf)
    with atomic_output(path) as fh:
        fh.write(buf.getbuffer())
