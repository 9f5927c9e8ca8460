"""``stats`` over files: the run (:class:`ctxtool.stats.op.StatsOp` through the runner, many files on
every core), the head of its JSON report and the per-message rows."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..errors import CtxtoolError, Failure
from ..formats.base import ErrorPolicy
from ..formats.walk import iter_paths
from ..io.outputs import atomic_output
from ..model import Transcript
from ..tokens.context import ContextSettings
from ..tokens.count import Tokenizer, get_tokenizer
from .figures import Figures, StatsReport, TranscriptStats

if TYPE_CHECKING:
    from ..tokens.models import ModelInfo

def stats_files(
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
    one per core from 8 MB; see :func:`ctxtool.run.runner.run_file`); otherwise exact tokenizers
    use every core through tiktoken's threads.
    The window of each transcript and its context tokens come from :func:`ctxtool.tokens.context.resolve`
    (``context_window``/``model`` as the flags, then ``settings``, a ``Config``: default the
    environment's); AgentCore.Context thresholds default to ``context.warning_chars`` /
    ``context.critical_chars``. ``fast``: dataset records are tallied from their parsed
    values where that gives the same figures (:mod:`ctxtool.stats.fast`); False reads every
    transcript into the full model. ``engine``: each file run as shards
    (:class:`ctxtool.run.engines.Sharding`). ``keep``: hold only the ``keep`` transcripts with
    the most context tokens (memory flat however many there are; the totals, levels, models
    and timestamps still count every one); None: all, in input order. ``each``: called with
    every transcript's figures in input order as they are known, none of them held (the
    report's ``transcripts`` is empty): a stream in flat memory. ``messages_column``: a Parquet
    dataset's conversation column (:mod:`ctxtool.io.parquet`; None: found). ``accuracy``: each
    transcript that records usage gets its estimates' error against it
    (:func:`ctxtool.calibration.accuracy.accuracy`: every tokenizer, the calibrated estimate on held-back
    turns and the default usage-aware one).
    """
    # lazy: start-up (loaded only when this runs: ..run.manyfiles, .op)
    from ..run.manyfiles import run_files  # many files: whole files on every core
    from .op import StatsOp, StatsPart

    tok, cs, window, cfg = _setup(tokenizer, model, context_window, settings)
    warning_chars = int(cfg["context.warning_chars"]) if warning_chars is None else warning_chars
    critical_chars = int(cfg["context.critical_chars"]) if critical_chars is None else critical_chars
    op = StatsOp(tok.name, cs, warning_chars, critical_chars, per_message, fast, 0 if each else keep, each,
                 accuracy=accuracy)
    policy = ErrorPolicy(on_error)
    total = StatsPart(Figures(), [], [], [], [] if per_message else None, keep=op.keep)
    runs = run_files(op, list(iter_paths(paths, subagents=True)), fmt=fmt, on_error=on_error, jobs=workers,
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
    tok = get_tokenizer(tokenizer or "heuristic")
    cfg = settings if settings is not None else Config()
    cs = ContextSettings.from_config(cfg, window=context_window, model=model.name if model else None)
    return tok, cs, cs.resolve(None).window if (context_window or model) else None, cfg


def write_rows(rows: list[dict[str, Any]], path: str) -> None:
    """Per-message rows to CSV or Parquet (by extension), atomically, through polars."""
    import io
    import os

    import polars as pl

    suffix = os.path.splitext(path)[1].lower()
    if suffix not in (".csv", ".parquet"):
        raise CtxtoolError("per-message output must end in .csv or .parquet", kind=Failure.USAGE, path=path)
    df = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
    buf = io.BytesIO()  # serialized first: polars would wrap a failed write (a full disk) in its own error
    if suffix == ".csv":
        df.write_csv(buf)
    else:
        df.write_parquet(buf)
    with atomic_output(path) as fh:
        fh.write(buf.getbuffer())
